"""The Torch backend's OpenMP pools (backends/torch/torch_common.h, prepare_worker_thread;
module/loader/backend_loader.c; docs/performance.md "Intra-op pools"): libgomp keeps one pool
per thread that runs a multi-threaded operation, and once all pools' threads outnumber the
cores it cuts every pool's spin-wait, so each parallel region of each run wakes its pool
through a futex; and unless told otherwise its pool threads spin after every region.

* the core loads the backend with OMP_WAIT_POLICY=PASSIVE in the environment, which the
  backend logs; a user's own OMP_WAIT_POLICY, or a GOMP_SPINCOUNT, wins.

Checked with INTRA_OP_PARALLELISM set to the cores the server may use (its workers' pools
then take every spare core) and inline runs on, so that Redis's main thread, a caller that
is not a queue worker, runs the CNN too:

* the worker's run starts its pool: at least INTRA_OP_PARALLELISM - 1 new threads in the
  server;
* the main thread's inline runs start no pool of their own: no new thread in the server
  (before, OpenMP's and MKL's per-thread settings gave it INTRA_OP_PARALLELISM threads too),
  and their outputs are those of the queued run.

No timing is asserted."""
from __future__ import annotations

import os
import pathlib

import numpy as np
import pytest

import torch_models as tm
from helpers import assert_ok, info_field
from redis_server import RedisServer, StartServer
from resp import RawClient

pytestmark = pytest.mark.inprocess_only("isolated backends never run inline, and their "
                                        "threads are the host's")

CORES = len(os.sched_getaffinity(0))
RUNS = 20


OMP_VARS = ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")


def env_with(**omp: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in OMP_VARS}
    env.update(omp)
    return env


def thread_count(srv: RedisServer) -> int:
    return len(os.listdir(f"/proc/{srv.proc.pid}/task"))


def info_int(c: RawClient, field: str) -> int:
    value = info_field(c.execute("INFO", "MODULES"), field)
    assert value is not None, f"INFO MODULES has no {field}"
    return int(value)


@pytest.fixture(scope="module")
def srv(start_server: StartServer, torch_backend_path: pathlib.Path) -> RedisServer:
    return start_server(["TORCH", str(torch_backend_path), "INTRA_OP_PARALLELISM", str(CORES),
                         "INLINE_RUN_MAX_US", "100000"], env=env_with())


@pytest.mark.parametrize("omp, logged", [
    ({}, "OpenMP wait policy PASSIVE, GOMP_SPINCOUNT unset"),
    ({"OMP_WAIT_POLICY": "ACTIVE"}, "OpenMP wait policy ACTIVE, GOMP_SPINCOUNT unset"),
    ({"GOMP_SPINCOUNT": "1000"}, "OpenMP wait policy unset, GOMP_SPINCOUNT 1000"),
])
def test_wait_policy_passive_unless_the_user_sets_one(
        start_server: StartServer, torch_backend_path: pathlib.Path, omp: dict[str, str],
        logged: str) -> None:
    s = start_server(["TORCH", str(torch_backend_path)], env=env_with(**omp))
    assert f"Torch: {logged}" in s.log()


@pytest.mark.skipif(CORES < 2, reason="one core: no pool threads to give")
def test_main_thread_runs_start_no_second_pool(srv: RedisServer) -> None:
    built = tm.cnn()
    x = built.sample[0]
    with RawClient(srv.port) as c:
        assert_ok(c.execute("AI.MODELSTORE", "cnn", "TORCH", "CPU", "BLOB", built.blob))
        assert_ok(c.execute("AI.TENSORSET", "x", "FLOAT", *x.shape, "BLOB", x.tobytes()))
        before = thread_count(srv)
        # The first run of a model is never inline: the worker runs it.
        assert_ok(c.execute("AI.MODELEXECUTE", "cnn", "INPUTS", 1, "x", "OUTPUTS", 1, "y"))
        assert info_int(c, "ai_inline_runs") == 0
        queued = np.frombuffer(bytes(c.execute("AI.TENSORGET", "y", "BLOB")), np.float32)
        np.testing.assert_allclose(queued, built.run(x)[0].ravel(), rtol=1e-4, atol=1e-5)
        after_worker = thread_count(srv)
        # libtorch may start a thread of its own at a first run, beside the pool.
        assert after_worker - before >= CORES - 1, "the worker's pool was not started"

        for _ in range(RUNS):
            assert_ok(c.execute("AI.MODELEXECUTE", "cnn", "INPUTS", 1, "x", "OUTPUTS", 1, "y"))
        assert info_int(c, "ai_inline_runs") > 0, "no run went inline on the main thread"
        inline = np.frombuffer(bytes(c.execute("AI.TENSORGET", "y", "BLOB")), np.float32)
        np.testing.assert_array_equal(inline, queued)
        assert thread_count(srv) == after_worker, \
            "the main thread's runs started an OpenMP pool beside the worker's"
