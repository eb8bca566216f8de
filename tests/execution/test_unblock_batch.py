"""Unblocks two at a time (module/engine/unblock_batch.c, docs/performance.md "Unblocks two at
a time"): while at least four DAGs wait in its queue, a run-queue worker keeps a client whose
short run finished until its next run of the same model has finished too, and unblocks both
together (one wake-up of Redis's main thread for two requests).

* ten requests queued behind a slow run: the first six pair up (9, 8 / 7, 6 / 5, 4 waiting when
  each ran), the last four, with fewer waiting, are unblocked alone; every reply is right and
  `ai_unblocks_paired` grows by one to three (three when every run was short, as they are);
* a kept client is unblocked before the worker waits: behind it only DAGs held for
  MINBATCHSIZE, which the worker cannot take, and its reply comes at once, not when the batch
  fills;
* a lone client's requests and clients that leave the queue with fewer than four waiting are
  never kept;
* sixteen clients at once for a while: every reply is its own request's.

No new command or setting: the clients here run as the default user; ACL checks come before a
DAG is queued and are those of test_worker_spin.py's restricted user.
"""
from __future__ import annotations

import pytest

import engine_models as em
import tf_graphs
from helpers import assert_ok, in_threads, info_field
from resp import RawClient

pytestmark = pytest.mark.inprocess_only("the in-process run queue's workers")


@pytest.fixture
def c(tf_server, connect) -> RawClient:
    client = connect(tf_server)
    assert_ok(client.execute("AI.MODELSTORE", "slow", "TF", "CPU", "INPUTS", 1, "n", "OUTPUTS", 1,
                             "out", "BLOB", tf_graphs.slow_graph()))
    assert_ok(em.store_tf(client, "plus", em.tf_add_one_graph(), ["x"], ["out"]))
    for i in range(3):  # past the first runs of a session, which take milliseconds
        run_and_check(client, 900 + i)
    return client


def paired(c: RawClient) -> int:
    return int(info_field(c.execute("INFO", "MODULES"), "ai_unblocks_paired"))


def run_and_check(c: RawClient, i: int) -> None:
    assert_ok(c.execute("AI.TENSORSET", f"x{i}", "FLOAT", 2, "VALUES", i, -i))
    assert_ok(c.execute("AI.MODELEXECUTE", "plus", "INPUTS", 1, f"x{i}", "OUTPUTS", 1, f"y{i}"))
    assert [float(v) for v in c.execute("AI.TENSORGET", f"y{i}", "VALUES")] == [i + 1, 1 - i]


def test_queued_requests_pair_up_while_enough_wait(c, tf_server, slow_n) -> None:
    before = paired(c)
    for i in range(10):
        assert_ok(c.execute("AI.TENSORSET", f"x{i}", "FLOAT", 2, "VALUES", i, -i))
    replies = em.replies_behind(
        em.HeldQueue(tf_server.port, slow_n(0.5)), tf_server.port,
        [("AI.MODELEXECUTE", "plus", "INPUTS", 1, f"x{i}", "OUTPUTS", 1, f"y{i}")
         for i in range(10)])
    assert replies == ["OK"] * 10, replies
    for i in range(10):
        assert [float(v) for v in c.execute("AI.TENSORGET", f"y{i}", "VALUES")] == [i + 1, 1 - i]
    # Three pairs when every run took at most 500 us; a run slowed past that on a busy machine
    # is unblocked alone, so fewer, never more.
    assert 1 <= paired(c) - before <= 3, paired(c) - before


def test_a_kept_client_is_unblocked_before_the_worker_waits(c, tf_server, slow_n) -> None:
    """Behind the one request that can run, four wait for a batch of eight that never fills
    while the test waits: the worker keeps the runnable one's client (four waiting), finds
    nothing it can take, and must unblock it before it sleeps."""
    assert_ok(em.store_tf(c, "bs", em.tf_batch_size_graph(), ["x"], ["bs", "y"],
                          "BATCHSIZE", 8, "MINBATCHSIZE", 8))
    before = paired(c)
    assert_ok(c.execute("AI.TENSORSET", "x0", "FLOAT", 2, "VALUES", 5, 6))
    assert_ok(c.execute("AI.TENSORSET", "row", "FLOAT", 1, 2, "VALUES", 1, 2))
    batched = [RawClient(tf_server.port) for _ in range(8)]
    alone = RawClient(tf_server.port, timeout=10)
    try:
        with em.HeldQueue(tf_server.port, slow_n(0.5)) as h:
            for i in range(4):
                h.queue(batched[i], "AI.MODELEXECUTE", "bs", "INPUTS", 1, "row", "OUTPUTS", 2,
                        f"b{i}", f"z{i}")
            h.queue(alone, "AI.MODELEXECUTE", "plus", "INPUTS", 1, "x0", "OUTPUTS", 1, "y0")
        assert alone.read() == "OK"   # a worker sleeping with it kept would hang here
        assert [float(v) for v in c.execute("AI.TENSORGET", "y0", "VALUES")] == [6, 7]
        assert not any(b.pending() for b in batched[:4]), "the batch ran with 4 rows of 8"
        for i in range(4, 8):   # the batch fills and runs
            batched[i].send("AI.MODELEXECUTE", "bs", "INPUTS", 1, "row", "OUTPUTS", 2,
                            f"b{i}", f"z{i}")
        assert [b.read() for b in batched] == ["OK"] * 8
        assert c.execute("AI.TENSORGET", "b7", "VALUES")[0] == b"8", "not one batch of 8"
    finally:
        alone.close()
        for b in batched:
            b.close()
    assert paired(c) == before


def test_a_lone_client_and_a_short_queue_are_never_kept(c, tf_server, slow_n) -> None:
    before = paired(c)
    for i in range(50):
        run_and_check(c, i)
    for i in range(3):
        assert_ok(c.execute("AI.TENSORSET", f"x{i}", "FLOAT", 2, "VALUES", i, -i))
    replies = em.replies_behind(   # at most three waiting behind the first
        em.HeldQueue(tf_server.port, slow_n(0.3)), tf_server.port,
        [("AI.MODELEXECUTE", "plus", "INPUTS", 1, f"x{i % 3}", "OUTPUTS", 1, f"y{i}")
         for i in range(4)])
    assert replies == ["OK"] * 4
    assert paired(c) == before


def test_many_clients_each_get_their_own_reply(c, tf_server) -> None:
    def client(k: int) -> None:
        with RawClient(tf_server.port) as other:
            for i in range(60):
                run_and_check(other, 1000 * (k + 1) + i)

    in_threads(16, client)
    assert c.execute("PING") == "PONG"
