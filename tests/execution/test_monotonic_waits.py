"""The run queue's timed waits follow the monotonic clock (docs/architecture.md, "A request's
life"): a held request's TIMEOUT and a lone batched request's MINBATCHTIMEOUT end on time
whatever the wall clock does.

The server runs with tests/fixtures/preload/realtime_ahead.c preloaded: its CLOCK_REALTIME
reads 60 s ahead of the kernel's, which to a wait whose deadline was built from the wall
clock is a step back of 60 s during the wait. A worker whose wait followed the wall clock
would sleep 60 s past the deadline. One worker (THREADS_PER_QUEUE 1), TF's batch-revealing
graph (BATCHSIZE 8, MINBATCHSIZE 2) and one request, which is held.
"""
from __future__ import annotations

import os
import pathlib
import time
from typing import Iterator

import numpy as np
import pytest

import engine_models as em
from helpers import assert_ok
from native import cc_shared
from paths import ROOT
from redis_server import RedisServer
from resp import RawClient, Status

AHEAD_S = 60
# Far below AHEAD_S, far above the waits themselves on a loaded machine.
ANSWERED_WITHIN_S = 20.0

pytestmark = pytest.mark.skipif(
    bool(os.environ.get("REDISAI_TEST_SERVER_EXE")),
    reason="an instrumented server (AddressSanitizer) must have its runtime first, not a preload")


@pytest.fixture(scope="module")
def ahead_server(tmp_path_factory: pytest.TempPathFactory, module_path: pathlib.Path,
                 tf_backend_path: pathlib.Path) -> Iterator[RedisServer]:
    lib = tmp_path_factory.mktemp("preload") / "realtime_ahead.so"
    cc_shared("-o", str(lib), str(ROOT / "tests" / "fixtures" / "preload" / "realtime_ahead.c"))
    env = {**os.environ, "LD_PRELOAD": str(lib), "REALTIME_AHEAD_S": str(AHEAD_S)}
    srv = RedisServer(module_path, ["TF", str(tf_backend_path), "THREADS_PER_QUEUE", "1"],
                      env=env)
    try:
        yield srv
    finally:
        srv.stop()


@pytest.fixture
def c(ahead_server: RedisServer) -> Iterator[RawClient]:
    with RawClient(ahead_server.port) as client:
        assert_ok(client.execute("FLUSHALL"))
        x = np.arange(3, dtype=np.float32).reshape(1, 3)
        assert_ok(client.execute("AI.TENSORSET", "x", "FLOAT", 1, 3, "BLOB", x.tobytes()))
        yield client


def test_the_preload_moves_the_wall_clock_only(c: RawClient) -> None:
    """The server's TIME (gettimeofday) is the machine's, so Redis itself is not misled;
    the module's wall-clock reads are AHEAD_S ahead (the preload is in effect: a test
    passing without it would prove nothing)."""
    server_s = int(c.execute("TIME")[0])
    assert abs(server_s - time.time()) < 5, server_s
    pid = int(c.execute("INFO", "server").decode().split("process_id:")[1].split()[0])
    maps = pathlib.Path(f"/proc/{pid}/maps").read_text()
    assert "realtime_ahead.so" in maps


@pytest.mark.parametrize("opts, extra, want", [
    (("MINBATCHTIMEOUT", 300), (), "OK"),   # released alone at MINBATCHTIMEOUT
    ((), ("TIMEOUT", 300), "TIMEDOUT"),       # held for ever, but its TIMEOUT ends it
], ids=["minbatchtimeout", "held-timeout"])
def test_held_request_is_answered_at_its_deadline(c: RawClient, ahead_server: RedisServer,
                                                  opts: tuple, extra: tuple, want: str) -> None:
    assert_ok(em.store_tf(c, "m", em.tf_batch_size_graph(), ["x"], ["bs", "y"],
                          "BATCHSIZE", 8, "MINBATCHSIZE", 2, *opts))
    with RawClient(ahead_server.port) as a:
        a.send("AI.MODELEXECUTE", "m", "INPUTS", 1, "x", "OUTPUTS", 2, "bs", "y", *extra)
        assert a.pending(wait=ANSWERED_WITHIN_S), (
            f"a held request with a 300 ms deadline was not answered within "
            f"{ANSWERED_WITHIN_S:.0f} s (the worker waits on the wall clock)")
        reply = a.read()
    assert isinstance(reply, Status) and reply == want, reply
