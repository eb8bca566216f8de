"""Side-by-side backends (issue 12, item 3): the ONNX backend built a second time, from
ONNX Runtime 1.21.0's wheel (pins.ORT_SIDE_BY_SIDE), next to the one built from .venv's
1.32.0, in the same install tree; two servers load one each by name.

The side-by-side folder is built once per session by `python -m build_tools build-variant`
when the tree does not hold it intact yet (about 5 s here: the 16 MB wheel, downloaded once
per machine into ~/.cache/redisai-build/wheels/, and a compile of the backend alone), and
reused when it does; `build` keeps it and rebuilds it with the tree.
"""
from __future__ import annotations

import os
import pathlib
import subprocess
import sys
import time
from typing import Any, Iterator

import numpy as np
import pytest

from helpers import assert_ok, info_field
from paths import ROOT
from redis_server import RedisServer
from resp import RawClient

from build_tools import layout, manifest, pins, variants
from build_tools.errors import BuildError
from build_tools.frameworks import discover, spec_for

OLD = pins.ORT_SIDE_BY_SIDE.split("==")[1]
FIELDS = ["name", "kind", "framework", "version", "variant", "abi", "path", "link", "manifest",
          "loaded", "loaded_at", "load_seconds", "models", "scripts", "isolated"]


def _new_version() -> str:
    fw = discover(spec_for("onnxruntime"))
    if fw is None:
        pytest.skip("onnxruntime is not installed in this environment")
    return fw.version


def _build_tools(*args: str, timeout: float = 900) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "build_tools", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=timeout)


def _is_side_folder(folder: pathlib.Path) -> bool:
    if not (folder / manifest.MANIFEST_NAME).is_file() or manifest.verify(folder):
        return False
    header = manifest.parse((folder / manifest.MANIFEST_NAME).read_text()).header
    return header.get("version") == OLD and bool(header.get(variants.SOURCE_KEY))


@pytest.fixture(scope="session")
def old_folder(install_dir: pathlib.Path) -> pathlib.Path:
    """backends/redisai_onnxruntime-<OLD>-cpu/: reused when the tree holds it intact,
    else built now (download of the 16 MB wheel, once per machine, and a compile)."""
    folder = install_dir / "backends" / f"redisai_onnxruntime-{OLD}-cpu"
    if _is_side_folder(folder):
        return folder
    start = time.monotonic()
    proc = _build_tools("build-variant", pins.ORT_SIDE_BY_SIDE, "--install", str(install_dir))
    took = time.monotonic() - start
    assert proc.returncode == 0, proc.stdout + proc.stderr
    print(f"\nbuild-variant {pins.ORT_SIDE_BY_SIDE}: {took:.1f} s")
    assert _is_side_folder(folder), proc.stdout
    return folder


@pytest.fixture(scope="module")
def new_folder(install_dir: pathlib.Path) -> pathlib.Path:
    folder = install_dir / "backends" / f"redisai_onnxruntime-{_new_version()}-cpu"
    assert folder.is_dir(), f"no {folder}: run `python -m build_tools build`"
    return folder


def _name(folder: pathlib.Path) -> str:
    return folder.name[len("redisai_"):]


def _list(c: RawClient) -> dict[str, dict[str, Any]]:
    out = {}
    for e in c.execute("AI.CONFIG", "LIST"):
        d = {k.decode(): (v.decode() if isinstance(v, bytes) else v)
             for k, v in zip(e[::2], e[1::2])}
        assert list(d) == FIELDS, d
        out[d["name"]] = d
    return out


@pytest.fixture(scope="module")
def servers(module_path: pathlib.Path, old_folder: pathlib.Path,
            new_folder: pathlib.Path) -> Iterator[dict[str, RedisServer]]:
    """Two servers of the same tree, each told by name which ONNX backend to load."""
    started: dict[str, RedisServer] = {}
    try:
        for folder in (old_folder, new_folder):
            s = RedisServer(module_path)
            started[_name(folder)] = s
            with RawClient(s.port) as c:
                assert_ok(c.execute("AI.CONFIG", "LOADBACKEND", "ONNX", _name(folder)))
        yield started
    finally:
        for s in started.values():
            s.stop()


# --- the tree ----------------------------------------------------------------------------

def test_tree_holds_both_versions_and_check_verifies_both(install_dir, old_folder, new_folder):
    """Each folder has its own lib/ with its own ONNX Runtime and a manifest naming its
    version; the side-by-side one names the wheel it came from; the default link still
    points at .venv's version; `check` verifies every folder."""
    for folder, version in ((old_folder, OLD), (new_folder, _new_version())):
        lib = folder / "lib" / f"libonnxruntime.so.{version}"
        assert lib.is_file() and not lib.is_symlink(), sorted(os.listdir(folder / "lib"))
        assert os.readlink(folder / "lib" / "libonnxruntime.so.1") == lib.name
        others = [p.name for p in (folder / "lib").iterdir()
                  if p.name.startswith("libonnxruntime.so.1.") and p.name != lib.name]
        assert not others, others
        header = manifest.parse((folder / manifest.MANIFEST_NAME).read_text()).header
        assert (header["framework"], header["version"], header["kind"]) == \
            ("onnxruntime", version, "ONNX")
    old_header = manifest.parse((old_folder / manifest.MANIFEST_NAME).read_text()).header
    assert old_header[variants.SOURCE_KEY].startswith(f"onnxruntime-{OLD}-cp311-"), old_header
    assert old_header[variants.SOURCE_KEY].endswith(".whl"), old_header
    assert variants.SOURCE_KEY not in \
        manifest.parse((new_folder / manifest.MANIFEST_NAME).read_text()).header
    assert os.readlink(install_dir / "backends" / "redisai_onnxruntime") == new_folder.name

    proc = _build_tools("check", str(install_dir), timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    for folder in (old_folder, new_folder):
        rel = f"backends/{folder.name}"
        for f in ("redisai_onnxruntime.so", "lib/libonnxruntime.so.1", manifest.MANIFEST_NAME):
            assert f"{rel}/{f} " in proc.stdout, proc.stdout
    assert " 0 problem(s)" in proc.stdout


def test_check_names_a_broken_side_by_side_folder(install_dir, old_folder, tmp_path):
    """check verifies the side-by-side folder like any other: its library swapped for the
    other version's is named; a folder whose name disagrees with its manifest too."""
    clone = tmp_path / install_dir.name
    (clone / "backends").mkdir(parents=True)
    os.link(install_dir / "redisai.so", clone / "redisai.so")
    # The backend host lives beside redisai.so: an isolated run (--isolate) needs it too.
    os.link(install_dir / "redisai-backend-host", clone / "redisai-backend-host")
    new = os.readlink(install_dir / "backends" / "redisai_onnxruntime")
    for folder in (old_folder.name, new):
        subprocess.run(["cp", "-al", str(install_dir / "backends" / folder),
                        str(clone / "backends" / folder)], check=True)
    lib = clone / "backends" / old_folder.name / "lib" / f"libonnxruntime.so.{OLD}"
    lib.unlink()
    os.link(install_dir / "backends" / new / "lib" / f"libonnxruntime.so.{_new_version()}", lib)
    os.rename(clone / "backends" / new, clone / "backends" / "redisai_onnxruntime-9.9.9-cpu")
    proc = _build_tools("check", str(clone), timeout=300)
    assert proc.returncode != 0, proc.stdout
    assert f"{old_folder.name}/redisai_backend.manifest: lib/libonnxruntime.so.{OLD}: size " \
        in proc.stdout, proc.stdout
    assert (f"redisai_onnxruntime-9.9.9-cpu/redisai_backend.manifest: the folder's name says "
            f"version 9.9.9, its manifest {_new_version()}") in proc.stdout, proc.stdout


# --- two servers, one tree ------------------------------------------------------------------

def test_same_model_same_results_on_both_versions(servers):
    """The same ONNX models stored on both servers give the same outputs: bit for bit
    for elementwise ones, within float rounding for a CNN exported by torch.onnx."""
    from onnx_models import add, cnn, sum_and_product  # noqa: PLC0415 - imports onnx, torch

    results: dict[str, list[np.ndarray]] = {}
    for name, s in servers.items():
        with RawClient(s.port) as c:
            got = []
            for i, built in enumerate((add(), sum_and_product(), cnn())):
                key = f"m{i}"
                assert_ok(c.execute("AI.MODELSTORE", key, "ONNX", "CPU", "BLOB", built.blob))
                ins = [f"{key}in{j}" for j in range(len(built.inputs))]
                outs = [f"{key}out{j}" for j in range(len(built.outputs))]
                for k, arr in zip(ins, built.sample):
                    assert_ok(c.execute("AI.TENSORSET", k, "FLOAT", *arr.shape,
                                        "BLOB", arr.tobytes()))
                assert_ok(c.execute("AI.MODELEXECUTE", key, "INPUTS", len(ins), *ins,
                                    "OUTPUTS", len(outs), *outs))
                for k, want in zip(outs, built.run(*built.sample)):
                    meta = c.execute("AI.TENSORGET", k, "META", "BLOB")
                    d = dict(zip(meta[::2], meta[1::2]))
                    assert d[b"dtype"] == b"FLOAT" and d[b"shape"] == list(want.shape), d
                    arr = np.frombuffer(d[b"blob"], dtype=np.float32).reshape(want.shape)
                    np.testing.assert_allclose(arr, want, rtol=1e-5, atol=1e-6)
                    got.append(arr)
        results[name] = got
    old, new = results.values()
    assert len(old) == len(new) == 4
    for i in range(3):  # add: c; sum_and_product: s, p
        assert old[i].tobytes() == new[i].tobytes(), i
    np.testing.assert_allclose(old[3], new[3], rtol=1e-5, atol=1e-6)


def test_info_shows_each_servers_version_and_file(servers, old_folder, new_folder):
    for folder, version in ((old_folder, OLD), (new_folder, _new_version())):
        with RawClient(servers[_name(folder)].port) as c:
            info = c.execute("INFO", "MODULES")
            assert info_field(info, "ai_onnxruntime_version") == version, info
            assert info_field(info, "ai_onnxruntime_path") == \
                str(folder / "redisai_onnxruntime.so"), info


def test_list_shows_which_is_loaded_on_each(servers, old_folder, new_folder):
    """Both servers list both folders with their versions; each marks its own loaded (the
    default link counts as loaded only where its target is)."""
    old, new = _name(old_folder), _name(new_folder)
    for mine, other in ((old, new), (new, old)):
        with RawClient(servers[mine].port) as c:
            got = _list(c)
        assert got[mine]["loaded"] == 1 and got[mine]["loaded_at"] is not None, got[mine]
        assert got[other]["loaded"] == 0 and got[other]["loaded_at"] is None, got[other]
        assert got["onnxruntime"]["link"] == new_folder.name
        assert got["onnxruntime"]["loaded"] == (1 if mine == new else 0)
        assert (got[old]["version"], got[new]["version"]) == (OLD, _new_version())
        for n in (old, new):
            assert (got[n]["kind"], got[n]["framework"], got[n]["manifest"]) == \
                ("ONNX", "onnxruntime", "present")


def test_module_argument_by_name_and_lazy_default(module_path, old_folder, new_folder):
    """`ONNX onnxruntime-<OLD>-cpu` as a module argument loads the old one at start; a
    server given no backend loads the default link's (.venv's version) lazily."""
    from onnx_models import add  # noqa: PLC0415

    for args, version in ((["ONNX", _name(old_folder)], OLD), ([], _new_version())):
        s = RedisServer(module_path, args)
        try:
            with RawClient(s.port) as c:
                assert_ok(c.execute("AI.MODELSTORE", "m", "ONNX", "CPU", "BLOB", add().blob))
                info = c.execute("INFO", "ai_backends_info")
                assert info_field(info, "ai_onnxruntime_version") == version, (args, info)
        finally:
            s.stop()


# --- build_tools -----------------------------------------------------------------------------

@pytest.mark.parametrize("request_text, message", [
    ("onnxruntime==1.20.1", "ONNX Runtime 1.20.1 serves C API versions up to 20, and the ONNX "
                            "backend asks for C API 21"),
    ("torch==2.12.0", "PyTorch cannot be built side by side"),
    ("onnxruntime>=1.21", "bad framework version 'onnxruntime>=1.21'"),
    ("onnxruntime==1.21.0+cpu", "bad framework version"),
    ("nosuchframework==1.0", "unknown framework 'nosuchframework'"),
])
def test_build_variant_refuses_what_cannot_work(request_text, message):
    """Refused before anything is downloaded or compiled, with the reason."""
    proc = _build_tools("build-variant", request_text, timeout=120)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert message in proc.stderr, proc.stderr
    assert "pip download" not in proc.stdout, proc.stdout


def test_build_variant_refuses_the_environments_own_version():
    proc = _build_tools("build-variant", f"onnxruntime=={_new_version()}", timeout=120)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "is the version in this environment" in proc.stderr, proc.stderr


def test_side_folders_are_found_and_kept_by_lay_out(install_dir, old_folder, tmp_path):
    """`build` keeps (and rebuilds) the folders whose manifest names a wheel:
    variants.side_folders() finds the real one with its request; lay_out keeps such a
    folder whole while it removes a stray one, and refuses a default link to a folder
    it neither builds nor keeps."""
    found = {sf.folder: sf for sf in variants.side_folders(install_dir)}
    sf = found[old_folder.name]
    assert (str(sf.request), sf.variant) == (pins.ORT_SIDE_BY_SIDE, "cpu")
    assert sf.wheel.startswith(f"onnxruntime-{OLD}-")

    tree = tmp_path / "tree"
    (tree / "backends").mkdir(parents=True)
    subprocess.run(["cp", "-al", str(old_folder), str(tree / "backends" / old_folder.name)],
                   check=True)
    (tree / "backends" / "redisai_stray-1.0-cpu").mkdir()
    core = tmp_path / "redisai.so"
    core.write_bytes(b"core")
    before = sorted(str(p.relative_to(tree)) for p in (tree / "backends").rglob("*"))
    layout.lay_out(tree, core, [], tmp_path / "record.json", keep_folders=[old_folder.name])
    after = sorted(str(p.relative_to(tree)) for p in (tree / "backends").rglob("*"))
    assert after == [p for p in before if "redisai_stray" not in p], after
    assert manifest.verify(tree / "backends" / old_folder.name) == []
    with pytest.raises(BuildError, match="is not in"):
        layout.lay_out(tree, core, [], tmp_path / "record.json", keep_folders=[],
                       defaults={"onnxruntime": "redisai_onnxruntime-0.1-cpu"})


def test_build_variant_default_moves_the_link(install_dir, old_folder, tmp_path):
    """`build-variant ... --default` in a copy of the tree: the default link then names the
    old version's folder, so lazy loading gets ONNX Runtime <OLD>; the rest of the copy
    (redisai.so, the other folder) is left as it was."""
    from build_tools.build import build_variant  # noqa: PLC0415
    from onnx_models import add  # noqa: PLC0415

    clone = tmp_path / install_dir.name
    (clone / "backends").mkdir(parents=True)
    os.link(install_dir / "redisai.so", clone / "redisai.so")
    # The backend host lives beside redisai.so: an isolated run (--isolate) needs it too.
    os.link(install_dir / "redisai-backend-host", clone / "redisai-backend-host")
    new = os.readlink(install_dir / "backends" / "redisai_onnxruntime")
    for folder in (old_folder.name, new):
        subprocess.run(["cp", "-al", str(install_dir / "backends" / folder),
                        str(clone / "backends" / folder)], check=True)
    os.symlink(new, clone / "backends" / "redisai_onnxruntime")
    untouched = {p: p.stat().st_ino for p in (clone / "redisai.so",
                                               clone / "backends" / new / "redisai_onnxruntime.so")}
    build_variant(pins.ORT_SIDE_BY_SIDE, make_default=True, install=clone,
                  build_root=tmp_path / "build")
    assert os.readlink(clone / "backends" / "redisai_onnxruntime") == old_folder.name
    assert {p: p.stat().st_ino for p in untouched} == untouched
    assert manifest.verify(clone / "backends" / old_folder.name) == []
    s = RedisServer(clone / "redisai.so")
    try:
        with RawClient(s.port) as c:
            assert_ok(c.execute("AI.MODELSTORE", "m", "ONNX", "CPU", "BLOB", add().blob))
            info = c.execute("INFO", "MODULES")
            assert info_field(info, "ai_onnxruntime_version") == OLD, info
            assert info_field(info, "ai_onnxruntime_path") == str(
                clone / "backends" / "redisai_onnxruntime" / "redisai_onnxruntime.so"), info
    finally:
        s.stop()
