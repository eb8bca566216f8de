"""Shared fixtures: a real redis-server with the built module, on a free port.

The helper modules live in tests/support/ (on sys.path through pytest's `pythonpath`
setting in pyproject.toml): import them by their plain names (`from resp import RawClient`),
never from this file (a conftest.py is not a module to import from)."""
from __future__ import annotations

import os
import pathlib
from typing import Any, Callable, Iterator, Sequence

import pytest
import redis

import engine_models as em
from build_tools import pins, servers
from build_tools.errors import BuildError
from helpers import assert_ok
from native import FixtureBackends, build_fixture_backends
from paths import backend_file, find_install_dir
from redis_server import (ISOLATE_ENV, SERVER_ENV, SERVER_EXE_ENV, Connect, RedisServer,
                          StartServer, backend_args, server_exe, server_name)
from resp import RawClient
from server_facts import ServerFacts, build_probe


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--isolate", default=None, metavar="KINDS",
                     help="run every server with these backend kinds isolated: all, or e.g. "
                          "ONNX,TORCH (sets REDISAI_TEST_ISOLATE)")
    parser.addoption("--server", default=None, choices=servers.server_names(), metavar="NAME",
                     help="run every server on this one: " + ", ".join(servers.server_names())
                          + " (default: REDISAI_TEST_SERVER, else "
                          + f"{pins.DEFAULT_SERVER}, Debian's redis-server; the "
                          "others are fetched by `python3 -m build_tools setup`; sets "
                          "REDISAI_TEST_SERVER)")


def pytest_configure(config: pytest.Config) -> None:
    value = config.getoption("--isolate", default=None)
    if value:
        os.environ[ISOLATE_ENV] = value
    name = config.getoption("--server", default=None)
    if name:
        os.environ[SERVER_ENV] = name
    if os.environ.get(SERVER_ENV) and os.environ.get(SERVER_EXE_ENV):
        raise pytest.UsageError(f"{SERVER_ENV} (--server) and {SERVER_EXE_ENV} both name the "
                                "server to run: give one")
    if os.environ.get(SERVER_ENV):
        try:
            server_exe()
        except RuntimeError as exc:
            raise pytest.UsageError(str(exc)) from None
    config.addinivalue_line("markers", "inprocess_only(why): observes in-process facts; "
                            "skipped when the suite runs isolated")
    config.addinivalue_line("markers", "long(why): runs a minute or more (the fault soak); "
                            "CI runs it in a pass of its own and leaves it out of the others "
                            "with -m 'not long'")


def pytest_report_header(config: pytest.Config) -> str:
    exe = server_exe()
    if os.environ.get(SERVER_EXE_ENV):
        return f"server: {exe} ({SERVER_EXE_ENV})"
    try:
        product, version = servers.server_version(pathlib.Path(exe))
        found = f"{product} {version}"
    except BuildError as exc:  # the header must not stop the run; the first server will
        found = f"--version failed: {exc.message}"
    return f"server: {server_name()} ({exe}: {found})"


def pytest_collection_modifyitems(config: pytest.Config, items: list) -> None:
    if not os.environ.get(ISOLATE_ENV):
        return
    for item in items:
        mark = item.get_closest_marker("inprocess_only")
        if mark is not None:
            why = mark.args[0] if mark.args else "observes in-process facts"
            item.add_marker(pytest.mark.skip(reason=f"in-process only: {why}"))


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
def start_server(module_path: pathlib.Path) -> Iterator[StartServer]:
    """start_server(module_args=(), *, module=None, **kw): a RedisServer of this test module
    (module: another module .so to load first; kw: RedisServer's extra=, env=, exe=, cwd=),
    stopped once the module's tests are done. For servers shared by a test module; a test
    that needs a server of its own starts and stops it itself."""
    started: list[RedisServer] = []

    def start(module_args: Sequence[str] = (), *, module: pathlib.Path | None = None,
              **kw: Any) -> RedisServer:
        srv = RedisServer(module or module_path, module_args, **kw)
        started.append(srv)
        return srv

    yield start
    for srv in started:
        srv.stop()


@pytest.fixture(scope="module")
def server(start_server: StartServer) -> RedisServer:
    """A server with the module and no backend loaded (backends load lazily or by test)."""
    return start_server()


@pytest.fixture(scope="module")
def tf_server(start_server: StartServer, tf_backend_path: pathlib.Path) -> RedisServer:
    """A server with the module and the TensorFlow backend loaded at load time."""
    return start_server(["TF", str(tf_backend_path)])


@pytest.fixture(scope="module")
def tf_one_worker_server(start_server: StartServer, tf_backend_path: pathlib.Path) -> RedisServer:
    """TensorFlow with THREADS_PER_QUEUE 1, RedisAI 1.2's queue: one worker, no helper. For tests
    that hold the worker with a slow run so that requests wait behind it: with the default
    helper (engine/run_queue.c) a request would run beside the slow run, or the slow run itself
    go to the helper (pushed while the worker was still finishing the run before)."""
    return start_server(["TF", str(tf_backend_path), "THREADS_PER_QUEUE", "1"])


@pytest.fixture(scope="module")
def torch_server(start_server: StartServer, torch_backend_path: pathlib.Path) -> RedisServer:
    """A server with the module and the Torch backend loaded at load time."""
    return start_server(["TORCH", str(torch_backend_path)])


@pytest.fixture(scope="module")
def onnx_server(start_server: StartServer, onnx_backend_path: pathlib.Path) -> RedisServer:
    """A server with the module and the ONNX Runtime backend loaded at load time."""
    return start_server(["ONNX", str(onnx_backend_path)])


@pytest.fixture(scope="module")
def tflite_server(start_server: StartServer, tflite_backend_path: pathlib.Path) -> RedisServer:
    """A server with the module and the TFLITE (LiteRT) backend loaded at load time."""
    return start_server(["TFLITE", str(tflite_backend_path)])


@pytest.fixture(scope="module")
def all_backends_server(start_server: StartServer,
                        all_backend_paths: dict[str, pathlib.Path]) -> RedisServer:
    """A server with TF, TORCH and ONNX loaded at load time, in that order."""
    return start_server(backend_args(all_backend_paths))


@pytest.fixture
def connect() -> Iterator[Connect]:
    """connect(server, flush=True): an exact-reply client of the server, after FLUSHALL SYNC
    unless flush=False (SYNC: Valkey 8 frees a flush's values in the background by default,
    so a model's statistics would outlive the flush for a moment). When the test is done the client is closed and the server must still
    be running (its log is the failure message): a crash is never a pass."""
    opened: list[tuple[RawClient, RedisServer]] = []

    def open_client(srv: RedisServer, flush: bool = True) -> RawClient:
        client = RawClient(srv.port)
        opened.append((client, srv))
        if flush:
            assert_ok(client.execute("FLUSHALL", "SYNC"))
        return client

    yield open_client
    for client, _ in opened:
        client.close()
    for _, srv in opened:
        assert srv.alive(), srv.log()


@pytest.fixture(scope="module")
def slow_n(tf_server: RedisServer) -> Callable[[float], int]:
    """n(seconds) -> the loop count of tf_graphs.slow_graph() for a run of about that long
    on tf_server, measured once per test module (engine_models.calibrate_slow)."""
    with RawClient(tf_server.port) as c:
        assert_ok(c.execute("FLUSHALL", "SYNC"))
        return em.calibrate_slow(c)


@pytest.fixture
def r(server: RedisServer) -> Iterator[redis.Redis]:
    c = server.client()
    c.flushall()
    yield c
    assert server.alive(), server.log()


@pytest.fixture
def raw(r: redis.Redis, server: RedisServer) -> Iterator[RawClient]:
    """An exact-reply client (tests/support/resp.py) on the module's `server`, after FLUSHALL."""
    c = RawClient(server.port)
    yield c
    c.close()


@pytest.fixture(scope="session")
def server_facts(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerFacts]:
    """What this session's server offers a module (its API functions, the wording of
    RedisModule_WrongArity), asked of a server of the same executable with a probe module
    (tests/support/server_facts.py), started on first use and stopped at the end."""
    facts = ServerFacts(build_probe(tmp_path_factory.mktemp("server_probe")))
    yield facts
    facts.close()


@pytest.fixture(scope="session")
def fixture_backends(tmp_path_factory: pytest.TempPathFactory) -> FixtureBackends:
    """Compiles the C fixture backends once per session with `cc -shared -fPIC`."""
    return build_fixture_backends(tmp_path_factory.mktemp("fixture_backends"))


# A test that needs the Torch, ONNX Runtime or TFLITE backend skips (with the path in the reason) only
# when that backend is absent from the install tree. CI builds them all and sets
# REDISAI_TEST_REQUIRE_BACKENDS=1 (ci/setup-and-test.sh), so there an absent backend fails the
# test instead of passing it silently.

def _require_backend(install_dir: pathlib.Path, name: str, what: str) -> pathlib.Path:
    path = backend_file(install_dir, name)
    if not path.is_file():
        why = (f"{what} backend not built: {path} is absent from the install tree "
               f"(backends/{name}/ has no sources, or `python -m build_tools build` "
               "has not run since they arrived)")
        if os.environ.get("REDISAI_TEST_REQUIRE_BACKENDS") == "1":
            pytest.fail(why)
        pytest.skip(why)
    return path


@pytest.fixture(scope="session")
def torch_backend_path(install_dir: pathlib.Path) -> pathlib.Path:
    return _require_backend(install_dir, "torch", "TORCH")


@pytest.fixture(scope="session")
def onnx_backend_path(install_dir: pathlib.Path) -> pathlib.Path:
    return _require_backend(install_dir, "onnxruntime", "ONNX")


@pytest.fixture(scope="session")
def tflite_backend_path(install_dir: pathlib.Path) -> pathlib.Path:
    return _require_backend(install_dir, "tflite", "TFLITE")


@pytest.fixture(scope="session")
def all_backend_paths(tf_backend_path: pathlib.Path, torch_backend_path: pathlib.Path,
                      onnx_backend_path: pathlib.Path) -> dict[str, pathlib.Path]:
    """The three backends by load keyword (TF, TORCH, ONNX); skips if one is absent."""
    return {"TF": tf_backend_path, "TORCH": torch_backend_path, "ONNX": onnx_backend_path}
