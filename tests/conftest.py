"""Shared fixtures: a real redis-server with the built module, on a free port.

The helper modules live in tests/support/ (on sys.path through pytest's `pythonpath`
setting in pyproject.toml): import them by their plain names (`from resp import RawClient`),
never from this file (a conftest.py is not a module to import from)."""
from __future__ import annotations

import os
import pathlib
from typing import Iterator

import pytest
import redis

from native import FixtureBackends, build_fixture_backends
from paths import backend_file, find_install_dir
from redis_server import ISOLATE_ENV, RedisServer
from resp import RawClient


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


@pytest.fixture
def raw(r: redis.Redis, server: RedisServer) -> Iterator[RawClient]:
    """An exact-reply client (tests/support/resp.py) on the module's `server`, after FLUSHALL."""
    c = RawClient(server.port)
    yield c
    c.close()


@pytest.fixture(scope="session")
def fixture_backends(tmp_path_factory: pytest.TempPathFactory) -> FixtureBackends:
    """Compiles the C fixture backends once per session with `cc -shared -fPIC`."""
    return build_fixture_backends(tmp_path_factory.mktemp("fixture_backends"))


# A test that needs the Torch or ONNX Runtime backend skips (with the path in the reason) only
# when that backend is absent from the install tree; CI builds all three, so there they run.

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
