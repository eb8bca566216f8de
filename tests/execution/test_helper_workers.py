"""The helper worker of the default thread settings (docs/configuration.md, "Threads";
module/engine/run_queue.c).

* THREADS_PER_QUEUE unset, two cores or more, no backend isolated: the CPU queue has one
  helper (INFO `ai_helper_workers` 1, a `bthread` CPU line for it), which runs a waiting
  request while the worker runs a long one: a short request sent during a slow run is
  answered before it (`ai_helper_runs` counts it);
  two long requests sent together run at once, even when both were queued before the
  worker took the first;
* THREADS_PER_QUEUE given, even 1: exactly that many threads, as in RedisAI 1.2; the short
  request waits for the slow run;
* a model with BATCHSIZE: its requests are left to gather for the worker, never taken by the
  helper;
* ISOLATE (the isolated pass of CI): no helper (a worker keeps several isolated runs in
  flight itself).

The slow run is tf_graphs.slow_graph() (engine_models.calibrate_slow); no timing is
asserted, only which reply comes first."""
from __future__ import annotations

import os

import pytest

import engine_models as em
import tf_graphs
from helpers import assert_ok
from redis_server import ISOLATE_ENV, RedisServer
from resp import RawClient

CORES = len(os.sched_getaffinity(0))
ISOLATED = bool(os.environ.get(ISOLATE_ENV, "").strip())


def helper_info(c: RawClient) -> tuple[int, int]:
    """(ai_helper_workers, ai_helper_runs) of INFO MODULES."""
    text = c.execute("INFO", "MODULES")
    text = text.decode() if isinstance(text, bytes) else text
    fields = dict(line.split(":", 1) for line in text.splitlines() if ":" in line)
    return int(fields["ai_helper_workers"]), int(fields["ai_helper_runs"])


def cpu_threads(c: RawClient) -> int:
    text = c.execute("INFO", "MODULES")
    text = text.decode() if isinstance(text, bytes) else text
    return sum(1 for line in text.splitlines()
               if line.startswith("ai_queue_CPU_bthread_n"))


def expected_helpers() -> int:
    return 0 if ISOLATED or CORES < 2 else 1


@pytest.fixture(scope="module")
def default_server(start_server, tf_backend_path) -> RedisServer:
    return start_server(["TF", str(tf_backend_path)])


def short_beside_slow(srv: RedisServer, seconds: float) -> tuple[bool, int]:
    """A slow run on one connection, then AI.MODELEXECUTE of the 2x2 `m` on another while it
    runs: (whether the short one was answered while the slow one still ran, helper runs
    it added)."""
    with RawClient(srv.port) as c, RawClient(srv.port) as slow, RawClient(srv.port) as short:
        assert_ok(c.execute("FLUSHALL", "SYNC"))
        em.store_slow_and_mul(c)
        n = em.slow_at_least(c, em.calibrate_slow(c)(seconds), seconds)
        _, runs_before = helper_info(c)
        assert_ok(c.execute("AI.TENSORSET", "n", "INT32", "VALUES", n))
        slow.send("AI.MODELEXECUTE", "slow", "INPUTS", 1, "n", "OUTPUTS", 1, "o")
        assert em.wait_until_blocked(c, 1), "the slow run never blocked its client"
        short.send("AI.MODELEXECUTE", "m", "INPUTS", 2, "a", "b", "OUTPUTS", 1, "y")
        assert short.read() == "OK"
        first = slow.pending() is False
        assert slow.read() == "OK"
        assert c.execute("AI.TENSORGET", "y", "VALUES") == [b"8", b"15"]
        _, runs_after = helper_info(c)
        return first, runs_after - runs_before


def test_defaults_have_a_helper(default_server: RedisServer) -> None:
    with RawClient(default_server.port) as c:
        workers, _ = helper_info(c)
        assert workers == expected_helpers()
        assert cpu_threads(c) == 1 + expected_helpers()


def test_threads_per_queue_given_means_no_helper(tf_one_worker_server: RedisServer) -> None:
    with RawClient(tf_one_worker_server.port) as c:
        assert helper_info(c)[0] == 0
        assert cpu_threads(c) == 1


@pytest.mark.skipif(CORES < 2 or ISOLATED, reason="no helper on one core or when isolated")
def test_helper_answers_a_request_beside_a_long_run(default_server: RedisServer) -> None:
    answered_first, runs = short_beside_slow(default_server, 0.6)
    assert answered_first, "the short request waited for the slow run: no helper took it"
    assert runs >= 1


@pytest.mark.skipif(CORES < 2 or ISOLATED, reason="no helper on one core or when isolated")
def test_long_requests_sent_together_run_at_once(default_server: RedisServer) -> None:
    """A long run and a shorter one sent back to back, from two connections: the shorter is
    answered while the long one still runs, whether the main thread pushed both before the
    worker took the first (the helper is woken because more wait than the idle worker takes)
    or the worker was already running the first."""
    with RawClient(default_server.port) as c, RawClient(default_server.port) as long_c, \
            RawClient(default_server.port) as short_c:
        assert_ok(c.execute("FLUSHALL", "SYNC"))
        em.store_slow_and_mul(c)
        calibrated = em.calibrate_slow(c)
        n_long = em.slow_at_least(c, calibrated(1.0), 1.0)
        n_short = calibrated(0.2)
        _, runs_before = helper_info(c)
        assert_ok(c.execute("AI.TENSORSET", "nl", "INT32", "VALUES", n_long))
        assert_ok(c.execute("AI.TENSORSET", "ns", "INT32", "VALUES", n_short))
        long_c.send("AI.MODELEXECUTE", "slow", "INPUTS", 1, "nl", "OUTPUTS", 1, "ol")
        short_c.send("AI.MODELEXECUTE", "slow", "INPUTS", 1, "ns", "OUTPUTS", 1, "os")
        assert short_c.read() == "OK"
        assert long_c.pending() is False, "the shorter run waited for the long one"
        assert long_c.read() == "OK"
        assert helper_info(c)[1] > runs_before


def test_one_worker_serves_in_order(tf_one_worker_server: RedisServer) -> None:
    answered_first, runs = short_beside_slow(tf_one_worker_server, 0.3)
    assert not answered_first, "THREADS_PER_QUEUE 1 ran two requests at once"
    assert runs == 0


@pytest.mark.skipif(CORES < 2 or ISOLATED, reason="no helper on one core or when isolated")
def test_batched_requests_wait_for_the_worker(default_server: RedisServer) -> None:
    """A BATCHSIZE model's request sent during a slow run is not run by the idle helper: it
    waits to gather with others, and runs (batched) once the worker is free."""
    with RawClient(default_server.port) as c, RawClient(default_server.port) as slow, \
            RawClient(default_server.port) as batched:
        assert_ok(c.execute("FLUSHALL", "SYNC"))
        assert_ok(c.execute("AI.MODELSTORE", "slow", "TF", "CPU", "INPUTS", 1, "n", "OUTPUTS",
                            1, "out", "BLOB", tf_graphs.slow_graph()))
        assert_ok(em.store_tf(c, "bm", em.tf_batch_size_graph(), ["x"], ["bs", "y"],
                              "BATCHSIZE", 4))
        assert_ok(c.execute("AI.TENSORSET", "x", "FLOAT", 1, 2, "VALUES", 1, 2))
        n = em.slow_at_least(c, em.calibrate_slow(c)(0.5), 0.5)
        _, runs_before = helper_info(c)
        assert_ok(c.execute("AI.TENSORSET", "n", "INT32", "VALUES", n))
        slow.send("AI.MODELEXECUTE", "slow", "INPUTS", 1, "n", "OUTPUTS", 1, "o")
        assert em.wait_until_blocked(c, 1)
        batched.send("AI.MODELEXECUTE", "bm", "INPUTS", 1, "x", "OUTPUTS", 2, "bs", "y")
        assert em.wait_until_blocked(c, 2)
        assert slow.read() == "OK"
        assert batched.read() == "OK"
        assert c.execute("AI.TENSORGET", "y", "VALUES") == [b"2", b"4"]
        assert helper_info(c)[1] == runs_before, "the helper took a batched model's request"
