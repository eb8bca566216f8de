"""Packages: `build_tools package` and `build_tools install-package`, on real archives.

The real install tree is packed once (gzip level 1: about 15 s for the
1.3 GB of the four backends here), the archives are installed into a fresh
folder elsewhere, and a redis-server started from that copy, with no virtual
environment, PYTHONPATH or LD_LIBRARY_PATH, runs a model on every backend.
Refusals are tested on the real ONNX archive with one byte changed and on
small hand-made archives that try to write outside their folder.
"""
from __future__ import annotations

import io
import os
import re
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path
from typing import Callable, Iterator

import numpy as np
import pytest

import onnx_models as om
import tf_graphs
import tflite_models
import torch_models as tm
from model_io import assert_same, get, put
from paths import ROOT, find_install_dir
from redis_server import RedisServer
from resp import RawClient

from build_tools import core_manifest, manifest, pins

KINDS = {"TF": "tensorflow", "TORCH": "torch", "ONNX": "onnxruntime", "TFLITE": "tflite"}
CORE_ARCHIVE = f"redisai-{pins.VERSION}-core.tar.gz"


def _tool(*args: str | Path, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "build_tools", *map(str, args)], cwd=ROOT,
                          capture_output=True, text=True, timeout=timeout)


def _ok(proc: subprocess.CompletedProcess[str]) -> str:
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout


def _versioned_folders(install: Path) -> list[Path]:
    return sorted(p for p in (install / "backends").iterdir()
                  if p.is_dir() and not p.is_symlink())


@pytest.fixture(scope="module")
def dist(install_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    for kind in KINDS.values():
        if not (install_dir / "backends" / f"redisai_{kind}").is_dir():
            pytest.skip(f"the install tree has no {kind} backend")
    out = tmp_path_factory.mktemp("dist")
    text = _ok(_tool("package", "--install", install_dir, "--dist", out))
    print(text)   # sizes and times, shown with -s
    # Each archive ends with a progress line: "<archive>: <done>/<total> MB in <s> s, ..."
    for folder in _versioned_folders(install_dir):
        assert re.search(rf"\[package\] {re.escape(folder.name)}\.tar\.gz: (\d+)/\1 MB in ",
                         text), text
    yield out
    shutil.rmtree(out, ignore_errors=True)   # 370 MB of archives: not left in pytest's tmp


@pytest.fixture(scope="module")
def installed(dist: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """Every archive installed into a fresh tree far from the checkout."""
    top = tmp_path_factory.mktemp("elsewhere")
    tree = top / "opt" / "redisai"
    _ok(_tool("install-package", dist / CORE_ARCHIVE, tree))
    # The folders the source tree's default links choose first: the first of a kind
    # installed gets the default link (a tree may hold several variants of a backend).
    defaults = [_archive(dist, kind) for kind in KINDS.values()]
    others = [a for a in sorted(dist.glob("redisai_*.tar.gz")) if a not in defaults]
    for archive in defaults + others:
        _ok(_tool("install-package", archive, tree))
    yield tree
    shutil.rmtree(top, ignore_errors=True)   # 1.3 GB


def _archive(dist: Path, kind: str) -> Path:
    """The archive of the folder the checkout's default link redisai_<kind> points to."""
    folder = os.readlink(find_install_dir() / "backends" / f"redisai_{kind}")
    return dist / f"{folder}.tar.gz"


def _first_members(archive: Path, n: int) -> list[tarfile.TarInfo]:
    out: list[tarfile.TarInfo] = []
    with tarfile.open(archive, "r|gz") as tar:
        for member in tar:
            out.append(member)
            if len(out) == n:
                break
    return out


# --- package --------------------------------------------------------------------------

def test_one_archive_for_the_core_and_one_per_backend_folder(install_dir: Path,
                                                             dist: Path) -> None:
    want = {CORE_ARCHIVE} | {f"{f.name}.tar.gz" for f in _versioned_folders(install_dir)}
    assert {p.name for p in dist.iterdir()} == want


def test_each_archive_carries_its_manifest_in_its_folder(install_dir: Path, dist: Path) -> None:
    for folder in _versioned_folders(install_dir):
        names = [m.name for m in _first_members(dist / f"{folder.name}.tar.gz", 3)]
        assert names[0] == folder.name, names
        assert f"{folder.name}/{manifest.MANIFEST_NAME}" in names, names
    with tarfile.open(dist / CORE_ARCHIVE, "r:gz") as tar:
        names = tar.getnames()
        data = tar.extractfile(f"redisai-{pins.VERSION}/{core_manifest.CORE_MANIFEST_NAME}")
        assert data is not None
        core = manifest.parse(data.read().decode())
    assert f"redisai-{pins.VERSION}/redisai.so" in names
    assert not [n for n in names if "/backends" in n], names
    assert core.header["kind"] == "core" and core.header["version"] == pins.VERSION
    assert core.header["abi"] == manifest.abi_version()
    [so] = [e for e in core.files if e.path == "redisai.so"]
    assert so.sha256 == manifest.sha256_file(install_dir / "redisai.so")
    assert so.size == (install_dir / "redisai.so").stat().st_size


# --- install-package ------------------------------------------------------------------

def test_installed_tree_has_the_layout_and_passes_check(install_dir: Path,
                                                        installed: Path) -> None:
    assert (installed / "redisai.so").is_file()
    assert (installed / core_manifest.CORE_MANIFEST_NAME).is_file()
    for folder in _versioned_folders(install_dir):
        assert (installed / "backends" / folder.name / manifest.MANIFEST_NAME).is_file()
    for kind in KINDS.values():
        link = installed / "backends" / f"redisai_{kind}"
        assert link.is_symlink(), link
        assert os.readlink(link) == os.readlink(install_dir / "backends" / f"redisai_{kind}")
    out = _ok(_tool("check", installed))
    assert "0 problem(s)" in out, out


def _mapped_files(pid: int) -> set[str]:
    with open(f"/proc/{pid}/maps") as f:
        return {line.split(None, 5)[5].strip() for line in f if len(line.split(None, 5)) == 6}


@pytest.mark.inprocess_only("reads the frameworks from redis-server's own maps")
def test_installed_tree_runs_a_model_on_every_backend_without_a_venv(installed: Path) -> None:
    tf_blob, tfl_blob = tf_graphs.mul_graph(), tflite_models.mul(2)
    pt, ox = tm.cnn(), om.cnn()
    args: list[str] = []
    for keyword, kind in KINDS.items():
        args += [keyword, str(installed / "backends" / f"redisai_{kind}" / f"redisai_{kind}.so")]
    # No venv, no PYTHONPATH, no LD_LIBRARY_PATH: only what the archives brought.
    env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "TF_CPP_MIN_LOG_LEVEL": "3"}
    srv = RedisServer(installed / "redisai.so", args, env=env, cwd=str(installed.parent))
    try:
        with RawClient(srv.port) as c:
            replies = [
                c.execute("AI.MODELSTORE", "tf", "TF", "CPU", "INPUTS", 2, "a", "b",
                          "OUTPUTS", 1, "mul", "BLOB", tf_blob),
                c.execute("AI.MODELSTORE", "pt", "TORCH", "CPU", "BLOB", pt.blob),
                c.execute("AI.MODELSTORE", "ox", "ONNX", "CPU", "BLOB", ox.blob),
                c.execute("AI.MODELSTORE", "tfl", "TFLITE", "CPU", "BLOB", tfl_blob),
            ]
            assert replies == ["OK"] * 4, (replies, srv.log())
            a = np.array([[2, 3], [4, 5]], np.float32)
            put(c, "a", a)
            put(c, "b", a)
            x = tm.cnn_sample(batch=2, seed=5)
            put(c, "x", x)
            for key, ins, out in (("tf", ["a", "b"], "tf_out"), ("pt", ["x"], "pt_out"),
                                  ("ox", ["x"], "ox_out"), ("tfl", ["a", "b"], "tfl_out")):
                reply = c.execute("AI.MODELEXECUTE", key, "INPUTS", len(ins), *ins,
                                  "OUTPUTS", 1, out)
                assert reply == "OK", (key, reply, srv.log())
            assert_same(get(c, "tf_out"), a * a)
            assert_same(get(c, "pt_out"), pt.run(x)[0])
            assert_same(get(c, "ox_out"), ox.run(x)[0])
            assert_same(get(c, "tfl_out"), a * a)
            # AI.CONFIG LIST: each backend loaded from the installed folder, manifest present.
            listed = [dict(zip(map(bytes.decode, e[::2]), e[1::2]))
                      for e in c.execute("AI.CONFIG", "LIST")]
            loaded = {e["kind"].decode(): e for e in listed if e["loaded"] == 1}
            assert sorted(loaded) == sorted(KINDS), listed
            for keyword, e in loaded.items():
                assert e["path"].decode().startswith(str(installed / "backends")), e
                assert e["manifest"] == b"present", e
        # Shared objects only: ONNX Runtime also maps a data file of its own under ~/.cache.
        mapped = [p for p in _mapped_files(srv.proc.pid) if ".so" in Path(p).name
                  and any(s in p for s in ("redisai", "tensorflow", "torch", "onnxruntime",
                                           "libc10"))]
        for kind in ("libtensorflow_cc", "libtorch_cpu", "libonnxruntime", "libLiteRt"):
            assert any(kind in p for p in mapped), (kind, mapped)
        outside = [p for p in mapped if not p.startswith(str(installed))]
        assert not outside, f"mapped from outside the installed tree: {outside}"
        assert srv.alive(), srv.log()
    finally:
        srv.stop()


def _rewrite(src: Path, dst: Path, change: Callable[[tarfile.TarInfo, bytes], bytes]) -> None:
    """Copies archive src to dst, passing each file's bytes through change."""
    with tarfile.open(src, "r|gz") as tin, tarfile.open(dst, "w:gz", compresslevel=1) as tout:
        for member in tin:
            if member.isreg():
                f = tin.extractfile(member)
                assert f is not None
                data = change(member, f.read())
                tout.addfile(member, io.BytesIO(data))
            else:
                tout.addfile(member)


def test_a_changed_byte_is_refused_naming_the_file(dist: Path, tmp_path: Path) -> None:
    src = _archive(dist, "onnxruntime")
    bad = tmp_path / src.name

    def flip(member: tarfile.TarInfo, data: bytes) -> bytes:
        if not member.name.endswith("/redisai_onnxruntime.so"):
            return data
        mid = len(data) // 2
        return data[:mid] + bytes([data[mid] ^ 0xFF]) + data[mid + 1:]

    _rewrite(src, bad, flip)
    dest = tmp_path / "dest"
    proc = _tool("install-package", bad, dest)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "does not match the manifest" in proc.stderr, proc.stderr
    assert "redisai_onnxruntime.so: SHA-256" in proc.stderr, proc.stderr
    assert list(dest.iterdir()) == [], "nothing may be installed from a tampered archive"


def test_a_truncated_archive_is_refused(dist: Path, tmp_path: Path) -> None:
    src = _archive(dist, "onnxruntime")
    cut = tmp_path / src.name
    with open(src, "rb") as f:
        cut.write_bytes(f.read(src.stat().st_size // 2))   # an interrupted download
    dest = tmp_path / "dest"
    proc = _tool("install-package", cut, dest)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert f"{cut}: cannot unpack" in proc.stderr, proc.stderr
    assert list(dest.iterdir()) == []


def test_a_backend_goes_into_a_backendspath_folder_and_is_not_overwritten(
        dist: Path, tmp_path: Path) -> None:
    archive = _archive(dist, "onnxruntime")
    folder = archive.name[:-len(".tar.gz")]
    dest = tmp_path / "backends"
    dest.mkdir()
    out = _ok(_tool("install-package", archive, dest))
    assert "0 problem(s)" in out, out
    assert (dest / folder / "redisai_onnxruntime.so").is_file()
    assert os.readlink(dest / "redisai_onnxruntime") == folder

    again = _tool("install-package", archive, dest)
    assert again.returncode == 1 and "exists" in again.stderr, again.stderr
    os.remove(dest / "redisai_onnxruntime")
    os.symlink("redisai_onnxruntime-0.0.1-cpu", dest / "redisai_onnxruntime")
    forced = _ok(_tool("install-package", "--force", archive, dest))
    assert "default link kept" in forced, forced
    assert os.readlink(dest / "redisai_onnxruntime") == "redisai_onnxruntime-0.0.1-cpu"
    assert sorted(p.name for p in dest.iterdir()) == sorted([folder, "redisai_onnxruntime"])


def test_check_and_package_name_a_changed_core_file(dist: Path, tmp_path: Path) -> None:
    tree = tmp_path / "core"
    _ok(_tool("install-package", dist / CORE_ARCHIVE, tree))
    with open(tree / "redisai.so", "ab") as f:
        f.write(b"\0")
    proc = _tool("check", tree)
    assert proc.returncode == 1, proc.stdout
    assert "redisai.so: size" in proc.stdout, proc.stdout
    # ... and package does not bless the changed file with a new manifest.
    proc = _tool("package", "--install", tree, "--dist", tmp_path / "dist")
    assert proc.returncode == 1, proc.stdout
    assert "redisai.so: size" in proc.stderr, proc.stderr
    assert not (tmp_path / "dist").exists()


# --- hostile archives -------------------------------------------------------------------

TOP = "redisai_onnxruntime-9.9.9-cpu"


def _member(name: str, kind: bytes = tarfile.REGTYPE, link: str = "",
            data: bytes = b"x") -> tuple[tarfile.TarInfo, bytes | None]:
    info = tarfile.TarInfo(name)
    info.type = kind
    info.linkname = link
    info.mode = 0o644
    if kind == tarfile.REGTYPE:
        info.size = len(data)
        return info, data
    return info, None


HOSTILE: dict[str, tuple[list[tuple[tarfile.TarInfo, bytes | None]], str]] = {
    "dotdot": ([_member(TOP, tarfile.DIRTYPE), _member(f"{TOP}/../evil")], "'..' in the path"),
    "absolute": ([_member("/tmp/redisai-evil-abs")], "absolute path"),
    "link-out-abs": ([_member(f"{TOP}/lib", tarfile.SYMTYPE, "/etc")], "absolute path"),
    "link-out-dotdot": ([_member(f"{TOP}/up", tarfile.SYMTYPE, "../..")], "leaves its folder"),
    "below-link": ([_member(f"{TOP}/l", tarfile.SYMTYPE, "lib"), _member(f"{TOP}/l/evil")],
                   "below a symbolic link"),
    "hard-link": ([_member(f"{TOP}/h", tarfile.LNKTYPE, "/etc/passwd")], "hard link"),
    "device": ([_member(f"{TOP}/dev", tarfile.CHRTYPE)], "device file"),
    "fifo": ([_member(f"{TOP}/fifo", tarfile.FIFOTYPE)], "device file, fifo"),
    "two-tops": ([_member(f"{TOP}/a"), _member("other/evil")], "outside the top folder"),
    "twice": ([_member(f"{TOP}/a"), _member(f"{TOP}/a", tarfile.SYMTYPE, "b")],
              "appears twice"),
}


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_a_hostile_archive_is_refused(case: str, tmp_path: Path) -> None:
    members, why = HOSTILE[case]
    archive = tmp_path / f"{TOP}.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        for info, data in members:
            tar.addfile(info, io.BytesIO(data) if data is not None else None)
    dest = tmp_path / "a" / "b" / "dest"
    proc = _tool("install-package", archive, dest)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "refused member" in proc.stderr and why in proc.stderr, proc.stderr
    assert list(dest.iterdir()) == [], "the staging folder must be gone"
    assert not (tmp_path / "a" / "b" / "evil").exists()
    assert not (tmp_path / "a" / "evil").exists()
    assert not Path("/tmp/redisai-evil-abs").exists()


def test_a_result_that_is_not_a_backend_folder_is_refused(tmp_path: Path) -> None:
    archive = tmp_path / "x.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        info, data = _member("just-a-folder/file")
        tar.addfile(info, io.BytesIO(data or b""))
    proc = _tool("install-package", archive, tmp_path / "dest")
    assert proc.returncode == 1
    assert "neither redisai-<version> nor redisai_<name>-<version>-<variant>" in proc.stderr


def test_package_refuses_a_tree_that_does_not_match_its_manifests(install_dir: Path,
                                                                  tmp_path: Path) -> None:
    tree = tmp_path / f"redisai-{pins.VERSION}"
    folder = tree / "backends" / "redisai_x-1.0-cpu"
    folder.mkdir(parents=True)
    (tree / "redisai.so").write_bytes((install_dir / "redisai.so").read_bytes())
    (folder / "redisai_x.so").write_bytes(b"not what the manifest says")
    (folder / manifest.MANIFEST_NAME).write_text(
        f"format 1\nfile {'0' * 64} 3 redisai_x.so\n")
    proc = _tool("package", "--install", tree, "--dist", tmp_path / "dist")
    assert proc.returncode == 1
    assert "redisai_x.so: size" in proc.stderr, proc.stderr
    assert not (tmp_path / "dist").exists() or not list((tmp_path / "dist").iterdir())

