"""Shared fixtures: a real redis-server with the built module, on a free port."""
from __future__ import annotations

import os
import pathlib
import socket
import subprocess
import tempfile
import time
from typing import Iterator, Sequence

import pytest
import redis

ROOT = pathlib.Path(__file__).resolve().parent.parent


def find_install_dir() -> pathlib.Path:
    """The newest install/redisai-<version>/ tree, or REDISAI_INSTALL_DIR."""
    env = os.environ.get("REDISAI_INSTALL_DIR")
    if env:
        return pathlib.Path(env)
    trees = sorted((ROOT / "install").glob("redisai-*/redisai.so"))
    if not trees:
        pytest.exit("no install/redisai-*/redisai.so: run `python -m build_tools build` first", 2)
    return trees[-1].parent


ISOLATE_ENV = "REDISAI_TEST_ISOLATE"


def isolate_args() -> list[str]:
    """`ISOLATE <kind>` module arguments asked for by REDISAI_TEST_ISOLATE ("all" or a
    comma-separated list of kinds; `pytest --isolate ...` sets it): the whole suite can run
    with its backends in backend host processes (docs/isolation.md)."""
    value = os.environ.get(ISOLATE_ENV, "").strip()
    if not value:
        return []
    kinds = ["TF", "TORCH", "ONNX"] if value.lower() == "all" else \
        [k.strip().upper() for k in value.split(",") if k.strip()]
    return [w for k in kinds for w in ("ISOLATE", k)]


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--isolate", default=None, metavar="KINDS",
                     help="run every server with these backend kinds isolated: all, or e.g. "
                          "ONNX,TORCH (sets REDISAI_TEST_ISOLATE)")


def pytest_configure(config: pytest.Config) -> None:
    value = config.getoption("--isolate", default=None)
    if value:
        os.environ[ISOLATE_ENV] = value
    config.addinivalue_line("markers", "inprocess_only(why): observes in-process facts; "
                            "skipped when the suite runs isolated")


def pytest_collection_modifyitems(config: pytest.Config, items: list) -> None:
    if not os.environ.get(ISOLATE_ENV):
        return
    for item in items:
        mark = item.get_closest_marker("inprocess_only")
        if mark is not None:
            why = mark.args[0] if mark.args else "observes in-process facts"
            item.add_marker(pytest.mark.skip(reason=f"in-process only: {why}"))


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class RedisServer:
    """One redis-server process of our own, with its own port and work dir."""

    def __init__(self, module: pathlib.Path | None, module_args: Sequence[str] = (),
                 extra: Sequence[str] = (), env: dict[str, str] | None = None,
                 exe: str | None = None, cwd: str | os.PathLike | None = None) -> None:
        # REDISAI_TEST_SERVER_EXE: another redis-server executable, e.g. ci/asan/redis-server
        # (AddressSanitizer preloaded into the server only; see ci/asan-tests.sh).
        exe = exe or os.environ.get("REDISAI_TEST_SERVER_EXE") or "redis-server"
        self.port = free_port()
        self.dir = tempfile.mkdtemp(prefix="redisai-test-")
        self.logfile = pathlib.Path(self.dir) / "redis.log"
        cmd = [exe, "--port", str(self.port), "--bind", "127.0.0.1", "--dir", self.dir,
               "--save", "", "--appendonly", "no", "--logfile", str(self.logfile),
               "--enable-debug-command", "yes", "--enable-module-command", "yes"]
        cmd += list(extra)
        if module is not None:
            cmd += ["--loadmodule", str(module), *isolate_args(), *module_args]
        self.cmd = cmd
        self.proc = subprocess.Popen(cmd, env=env, cwd=cwd, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.STDOUT)
        self._wait_ready()

    def _wait_ready(self, timeout: float = 30.0) -> None:
        # A raw PING over a plain socket: redis-py 8 retries a refused connection with
        # backoff (seconds), which would hide a server that exits at once.
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"redis-server exited with {self.proc.returncode}:\n{self.log()}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=2.0) as s:
                    s.sendall(b"PING\r\n")
                    if s.recv(64).startswith(b"+PONG"):
                        return
            except OSError:
                pass
            time.sleep(0.02)
        raise RuntimeError(f"redis-server did not answer in {timeout}s:\n{self.log()}")

    def client(self, **kw) -> redis.Redis:
        return redis.Redis(host="127.0.0.1", port=self.port, **kw)

    def log(self) -> str:
        try:
            return self.logfile.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def alive(self) -> bool:
        return self.proc.poll() is None

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


@pytest.fixture(scope="session")
def install_dir() -> pathlib.Path:
    return find_install_dir()


@pytest.fixture(scope="session")
def module_path(install_dir: pathlib.Path) -> pathlib.Path:
    return install_dir / "redisai.so"


@pytest.fixture(scope="session")
def tf_backend_path(install_dir: pathlib.Path) -> pathlib.Path:
    return install_dir / "backends" / "redisai_tensorflow" / "redisai_tensorflow.so"


@pytest.fixture(scope="module")
def server(module_path: pathlib.Path) -> Iterator[RedisServer]:
    """A server with the module and no backend loaded (backends load lazily or by test)."""
    srv = RedisServer(module_path)
    yield srv
    srv.stop()


@pytest.fixture(scope="module")
def tf_server(module_path: pathlib.Path, tf_backend_path: pathlib.Path) -> Iterator[RedisServer]:
    """A server with the module and the TensorFlow backend loaded at load time."""
    srv = RedisServer(module_path, ["TF", str(tf_backend_path)])
    yield srv
    srv.stop()


@pytest.fixture
def r(server: RedisServer) -> Iterator[redis.Redis]:
    c = server.client()
    c.flushall()
    yield c
    assert server.alive(), server.log()


# --------------------------------------------------------------------------------------
# Added for the foundation suite: exact-reply client, fixture backends, failed starts.
# --------------------------------------------------------------------------------------
import dataclasses  # noqa: E402
import shutil  # noqa: E402

from resp import RawClient  # noqa: E402

FIXTURE_SRC = ROOT / "tests" / "fixtures" / "backends"
ABI_INCLUDE = ROOT / "include"


@pytest.fixture
def raw(r: redis.Redis, server: RedisServer) -> Iterator[RawClient]:
    """An exact-reply client (tests/resp.py) on the module's `server`, after FLUSHALL."""
    c = RawClient(server.port)
    yield c
    c.close()


@dataclasses.dataclass(frozen=True)
class FixtureBackends:
    """Paths of the backends compiled from tests/fixtures/backends/ for this session."""

    dir: pathlib.Path
    missing: pathlib.Path        # does not exist
    not_elf: pathlib.Path        # a text file named .so
    no_entry: pathlib.Path       # a shared object without RAI_BackendEntry
    abi_major_999: pathlib.Path  # descriptor abi_major = 999
    small_table: pathlib.Path    # descriptor size = 8
    needs_missing_lib: pathlib.Path  # NEEDED library deleted after linking
    missing_lib_name: str
    onnx_kind: pathlib.Path      # a working no-op backend of kind ONNX


def _cc(*args: str) -> None:
    cc = os.environ.get("CC", "cc")
    cmd = [cc, "-shared", "-fPIC", "-O0", "-Wall", f"-I{ABI_INCLUDE}", *args]
    res = subprocess.run(cmd, capture_output=True, text=True)
    if res.returncode != 0:
        raise RuntimeError(f"fixture compile failed ({res.returncode}): {' '.join(cmd)}\n"
                           f"{res.stdout}{res.stderr}")


@pytest.fixture(scope="session")
def fixture_backends(tmp_path_factory: pytest.TempPathFactory) -> FixtureBackends:
    """Compiles the C fixture backends once per session with `cc -shared -fPIC`."""
    d = tmp_path_factory.mktemp("fixture_backends")
    out = {}
    for name in ("no_entry", "abi_major_999", "small_table", "onnx_kind"):
        out[name] = d / f"{name}.so"
        _cc("-o", str(out[name]), str(FIXTURE_SRC / f"{name}.c"))
    # A backend whose NEEDED library is gone: build the library, link against it, delete it.
    libname = "raifixturegone"
    lib = d / f"lib{libname}.so"
    _cc("-o", str(lib), str(FIXTURE_SRC / "dummy_lib.c"))
    needs = d / "needs_missing_lib.so"
    _cc("-o", str(needs), str(FIXTURE_SRC / "needs_missing_lib.c"),
        f"-L{d}", "-Wl,--no-as-needed", f"-l{libname}")
    lib.unlink()
    not_elf = d / "not_a_library.so"
    shutil.copyfile(FIXTURE_SRC / "not_a_library.so.txt", not_elf)
    return FixtureBackends(
        dir=d, missing=d / "no_such_dir" / "no_such_backend.so", not_elf=not_elf,
        no_entry=out["no_entry"], abi_major_999=out["abi_major_999"],
        small_table=out["small_table"], needs_missing_lib=needs,
        missing_lib_name=f"lib{libname}.so", onnx_kind=out["onnx_kind"])


def start_expecting_failure(module: pathlib.Path, module_args: Sequence[str],
                            cwd: str | os.PathLike | None = None) -> str:
    """Starts redis-server with the module and arguments that must make the module load
    fail (the server exits); returns the server log."""
    try:
        srv = RedisServer(module, module_args, cwd=cwd)
    except RuntimeError as e:
        return str(e)
    srv.stop()
    raise AssertionError(f"redis-server started although module args {list(module_args)!r} "
                         "should have made the module load fail")


# --------------------------------------------------------------------------------------
# Added for the Torch / ONNX Runtime backends: their install paths. A test that needs one
# skips (with the path in the reason) only when that backend is absent from the install
# tree; CI builds all three backends, so there they run.
# --------------------------------------------------------------------------------------

def backend_file(install_dir: pathlib.Path, name: str) -> pathlib.Path:
    """install_dir/backends/redisai_<name>/redisai_<name>.so (the lazy-loading default)."""
    return install_dir / "backends" / f"redisai_{name}" / f"redisai_{name}.so"


def _require_backend(install_dir: pathlib.Path, name: str, what: str) -> pathlib.Path:
    path = backend_file(install_dir, name)
    if not path.is_file():
        pytest.skip(f"{what} backend not built: {path} is absent from the install tree "
                    f"(backends/{name}/ has no sources, or `python -m build_tools build` "
                    "has not run since they arrived)")
    return path


@pytest.fixture(scope="session")
def torch_backend_path(install_dir: pathlib.Path) -> pathlib.Path:
    return _require_backend(install_dir, "torch", "TORCH")


@pytest.fixture(scope="session")
def onnx_backend_path(install_dir: pathlib.Path) -> pathlib.Path:
    return _require_backend(install_dir, "onnxruntime", "ONNX")


@pytest.fixture(scope="session")
def all_backend_paths(tf_backend_path: pathlib.Path, torch_backend_path: pathlib.Path,
                      onnx_backend_path: pathlib.Path) -> dict[str, pathlib.Path]:
    """The three backends by load keyword (TF, TORCH, ONNX); skips if one is absent."""
    return {"TF": tf_backend_path, "TORCH": torch_backend_path, "ONNX": onnx_backend_path}
