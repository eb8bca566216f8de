"""What RedisAI's LLAPI implementation promises beyond the calls themselves (tests/lowlevel_api/test_llapi.py
drives every function): tests/llapi_impl/ is a second client module, `llapiimpl`, built on first
use like llapitest.

* threads of a client module run a stored model synchronously, in parallel, with Redis's lock
  released; every run is right and AI.INFO counts each one, a failing one (an input missing)
  as an error;
* in a DAG, a tensor loaded after the ops that read it is seen by them (1.2: loaded tensors are
  visible to every op); one never loaded fails DAGRun with EDAGBUILDER; a bad DAG string leaves
  the DAG as it was; a second load of one name is refused;
* a DAG freed while it runs stays whole for its callback, which runs on a RedisAI worker thread;
* a synchronous ScriptRun from a command (Redis's main thread) may call redis.execute.
"""
from __future__ import annotations

import pathlib

import numpy as np
import pytest

import torch_models as tm
from helpers import assert_error_startswith, assert_ok
from model_io import get, put
from native import build_target
from redis_server import Connect, RedisServer, StartServer
from resp import RawClient

A = np.array([[1.5, -2.0, 3.0], [4.0, 0.25, -6.0]], np.float32)
B = np.array([[2.0, 3.0, -1.0], [0.5, 8.0, 2.0]], np.float32)
EDAGBUILDER = 16

SCRIPT = '''
def write_and_double(tensors: List[Tensor], keys: List[str], args: List[str]):
    redis.execute("SET", "written", "by-script")
    return tensors[0] * 2
'''


@pytest.fixture(scope="session")
def llapiimpl_so() -> pathlib.Path:
    return build_target("llapiimpl", "llapiimpl.so")


@pytest.fixture(scope="module")
def srv(start_server: StartServer, module_path: pathlib.Path, torch_backend_path: pathlib.Path,
        llapiimpl_so: pathlib.Path) -> RedisServer:
    return start_server(module=llapiimpl_so, extra=["--loadmodule", str(module_path),
                                                    "TORCH", str(torch_backend_path)])


@pytest.fixture
def c(srv: RedisServer, connect: Connect) -> RawClient:
    client = connect(srv)
    assert_ok(client.execute("AI.MODELSTORE", "m", "TORCH", "CPU", "BLOB", tm.add().blob))
    put(client, "a", A)
    put(client, "b", B)
    return client


def info(c: RawClient, key: str) -> dict[bytes, int]:
    reply = c.execute("AI.INFO", key)
    assert isinstance(reply, list), reply
    return dict(zip(reply[::2], reply[1::2]))


def test_sync_runs_from_client_threads(c: RawClient) -> None:
    assert c.execute("LLAPIIMPL.THREADS", "m", "a", "b", 8, 25) == [200, 200, 0]
    stats = info(c, "m")
    assert (stats[b"calls"], stats[b"errors"]) == (200, 0)
    assert stats[b"samples"] == 200 * A.shape[0]


def test_failing_sync_runs_from_client_threads_count(c: RawClient) -> None:
    """Every second run of each thread lacks an input: it fails, and counts a call and an
    error, as the good runs beside it count theirs."""
    assert c.execute("LLAPIIMPL.THREADS", "m", "a", "b", 8, 25, "UNFIT") == [104, 104, 96]
    stats = info(c, "m")
    assert (stats[b"calls"], stats[b"errors"]) == (200, 96)
    assert stats[b"samples"] == 104 * A.shape[0]


def test_sync_runs_outlive_the_key(srv: RedisServer, c: RawClient) -> None:
    """The threads hold their own reference: deleting the key after the command started
    (it is answered when they are done) changes nothing for them."""
    c.send("LLAPIIMPL.THREADS", "m", "a", "b", 4, 50)
    with RawClient(srv.port) as other:
        assert other.execute("DEL", "m") == 1
    assert c.read() == [200, 200, 0]


def test_load_after_the_ops_that_read_it(c: RawClient) -> None:
    numops, bad_code, second_load, values = c.execute("LLAPIIMPL.LATELOAD", "m", "a", "b")
    assert numops == 2            # the model op and the TENSORGET; nothing of the bad string
    assert bad_code == EDAGBUILDER
    assert second_load == 1       # REDISMODULE_ERR: y was loaded already
    np.testing.assert_allclose(np.array(values, np.float32).reshape(A.shape), A + B)


def test_a_name_never_loaded_fails_the_dag_run(c: RawClient) -> None:
    reply = c.execute("LLAPIIMPL.LATELOAD", "m", "a", "b", "NOLOAD")
    assert_error_startswith(reply, f"E{EDAGBUILDER} ERR INPUT key cannot be found in DAG")


def test_dag_freed_while_it_runs(c: RawClient) -> None:
    for _ in range(20):
        on_main, values = c.execute("LLAPIIMPL.EARLYFREE", "m", "a", "b")
        assert on_main == 0       # the callback ran on a RedisAI worker
        np.testing.assert_allclose(np.array(values, np.float32).reshape(A.shape), A + B)


def test_sync_script_calls_redis_from_the_main_thread(c: RawClient) -> None:
    assert_ok(c.execute("AI.SCRIPTSTORE", "s", "CPU", "ENTRY_POINTS", 1, "write_and_double",
                        "SOURCE", SCRIPT))
    values = c.execute("LLAPIIMPL.SCRIPTSYNC", "s", "write_and_double", "a")
    np.testing.assert_allclose(np.array(values, np.float32).reshape(A.shape), A * 2)
    assert c.execute("GET", "written") == b"by-script"
    assert info(c, "s")[b"calls"] == 1
