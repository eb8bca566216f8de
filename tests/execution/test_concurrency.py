"""The main thread never runs a model: while a ~2 s MODELEXECUTE is blocked on a worker,
PING (and other commands) answer within milliseconds. Also TIMEOUT (+TIMEDOUT) for a run
queued behind a slow one (THREADS_PER_QUEUE 1), and a client that disconnects while blocked.

The slow graph (tests/support/tf_graphs.py) loops `n` times; `n` is calibrated at test time."""
from __future__ import annotations

import time

import pytest

import tf_graphs
from helpers import assert_ok, info_field, wait_until
from resp import RawClient, Status


@pytest.fixture(scope="module")
def slow(tf_server):
    """Stores the slow and the mul model; returns a function n(seconds) -> loop count."""
    return store_slow(tf_server)


@pytest.fixture(scope="module")
def one_worker(tf_one_worker_server):
    """One worker (conftest.py): a request queued behind a slow run waits for it."""
    return tf_one_worker_server, store_slow(tf_one_worker_server)


def store_slow(server):
    with RawClient(server.port) as c:
        assert_ok(c.execute("FLUSHALL", "SYNC"))
        assert_ok(c.execute("AI.MODELSTORE", "slow", "TF", "CPU", "INPUTS", 1, "n", "OUTPUTS", 1,
                            "out", "BLOB", tf_graphs.slow_graph()))
        assert_ok(c.execute("AI.MODELSTORE", "mul", "TF", "CPU", "INPUTS", 2, "a", "b",
                            "OUTPUTS", 1, "mul", "BLOB", tf_graphs.mul_graph()))
        assert_ok(c.execute("AI.TENSORSET", "a", "FLOAT", 2, "VALUES", 2, 3))

        def run(n: int) -> float:
            assert_ok(c.execute("AI.TENSORSET", "n_cal", "INT32", "VALUES", n))
            t0 = time.perf_counter()
            assert_ok(c.execute("AI.MODELEXECUTE", "slow", "INPUTS", 1, "n_cal", "OUTPUTS", 1, "o_cal"))
            return time.perf_counter() - t0

        run(10)  # warm-up: first run of a TF session
        n, t = 2000, run(2000)
        while t < 0.2 and n < 50_000_000:
            n *= 8 if t < 0.05 else 2
            t = run(n)
        # two points, so the fixed cost of a run (queueing, session setup) cancels out
        t3 = run(3 * n)
        per_iter = max((t3 - t) / (2 * n), t3 / (3 * n) / 4)
        assert c.execute("AI.TENSORGET", "o_cal", "META") == [b"dtype", b"FLOAT", b"shape", [8, 8]]
    return lambda seconds: max(1, int(seconds / per_iter))


def _blocked(c: RawClient) -> int:
    return int(info_field(c.execute("INFO", "clients"), "blocked_clients"))


def test_ping_answers_while_model_runs(tf_server, slow):
    n = slow(2.0)
    with RawClient(tf_server.port) as blocker, RawClient(tf_server.port) as c:
        assert_ok(c.execute("AI.TENSORSET", "n", "INT32", "VALUES", n))
        t_start = time.perf_counter()
        blocker.send("AI.MODELEXECUTE", "slow", "INPUTS", 1, "n", "OUTPUTS", 1, "o")
        assert wait_until(lambda: _blocked(c) == 1, timeout=1.0), "MODELEXECUTE never blocked"
        t0 = time.perf_counter()
        assert c.execute("PING") == "PONG"
        ping_s = time.perf_counter() - t0
        assert not blocker.pending(), "the slow run finished before the PING could be checked"
        assert _blocked(c) == 1
        assert ping_s < 0.25, f"PING took {ping_s:.3f} s while a model ran"
        # the main thread serves data commands too
        t0 = time.perf_counter()
        assert_ok(c.execute("AI.TENSORSET", "x", "FLOAT", 2, "VALUES", 1, 2))
        assert c.execute("AI.TENSORGET", "x", "VALUES") == [b"1", b"2"]
        assert time.perf_counter() - t0 < 0.25
        reply = blocker.read()
        elapsed = time.perf_counter() - t_start
        print(f"slow run n={n}: {elapsed:.3f} s; PING during it {ping_s * 1e3:.2f} ms")
        assert isinstance(reply, Status) and reply == "OK", reply
        assert elapsed > 0.5, f"the slow model took only {elapsed:.3f} s: calibration failed"
        assert c.execute("AI.TENSORGET", "o", "META") == [b"dtype", b"FLOAT", b"shape", [8, 8]]
        assert _blocked(c) == 0


def test_timeout_for_a_run_queued_behind_a_slow_one(one_worker):
    tf_server, slow = one_worker
    n = slow(0.6)
    with RawClient(tf_server.port) as blocker, RawClient(tf_server.port) as waiter, \
            RawClient(tf_server.port) as c:
        assert_ok(c.execute("AI.TENSORSET", "n", "INT32", "VALUES", n))
        assert_ok(c.execute("AI.TENSORSET", "a", "FLOAT", 2, "VALUES", 2, 3))
        c.execute("DEL", "late")
        blocker.send("AI.MODELEXECUTE", "slow", "INPUTS", 1, "n", "OUTPUTS", 1, "o")
        assert wait_until(lambda: _blocked(c) == 1, timeout=1.0)
        waiter.send("AI.MODELEXECUTE", "mul", "INPUTS", 2, "a", "a", "OUTPUTS", 1, "late", "TIMEOUT", 1)
        assert wait_until(lambda: _blocked(c) == 2, timeout=1.0)
        assert blocker.read() == "OK"
        reply = waiter.read()
        assert isinstance(reply, Status) and reply == "TIMEDOUT", reply
        assert c.execute("EXISTS", "late") == 0
        # a generous TIMEOUT does not fire
        assert_ok(c.execute("AI.MODELEXECUTE", "mul", "INPUTS", 2, "a", "a", "OUTPUTS", 1, "late",
                            "TIMEOUT", 60000))
        assert c.execute("AI.TENSORGET", "late", "VALUES") == [b"4", b"9"]


def test_client_disconnects_while_blocked(tf_server, slow):
    n = slow(0.4)
    with RawClient(tf_server.port) as c:
        assert_ok(c.execute("AI.TENSORSET", "n", "INT32", "VALUES", n))
        gone = RawClient(tf_server.port)
        gone.send("AI.MODELEXECUTE", "slow", "INPUTS", 1, "n", "OUTPUTS", 1, "o2")
        assert wait_until(lambda: _blocked(c) == 1, timeout=1.0)
        gone.close()
        assert wait_until(lambda: _blocked(c) == 0, timeout=10.0)
        time.sleep(0.2)
        assert c.execute("PING") == "PONG"
        assert tf_server.alive()
        # the queue still works
        assert_ok(c.execute("AI.MODELEXECUTE", "mul", "INPUTS", 2, "a", "a", "OUTPUTS", 1, "after"))
