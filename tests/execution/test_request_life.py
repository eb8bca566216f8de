"""A request's life (docs/architecture.md, "A request's life"): one test per transition of
the table there that test_timeouts.py (TIMEOUT in each state), tests/isolation/ (a run handed
to a host) and tests/llapi/ (on_finish) do not already make, on every server of the matrix.

* parsed -> refused: an error reply, nothing blocked, nothing queued;
* parsed -> inline -> answered: in the command, no blocked client, no completion;
* parsed -> queued -> running -> finished -> answered: through the completion path (one
  `ai_completions` more);
* running -> queued on another device's queue -> running: a DAG whose ops are on CPU and
  CPU:1;
* the client killed (`CLIENT KILL ID`) while its DAG is queued, running, or finished and not
  yet answered (unblocked while the main thread sleeps in `DEBUG SLEEP`): the
  DAG still runs and is freed, its run counted in AI.INFO, nothing stored, nothing left
  blocked, the server goes on; a queued client's disconnect likewise.

No new command: the clients run as the default user; what a restricted user may run is
tests/security/'s.
"""
from __future__ import annotations

import time

import pytest

import engine_models as em
import tf_graphs
from helpers import assert_error, assert_ok, info_field, wait_until
from redis_server import Connect, RedisServer
from resp import RawClient, encode_command

pytestmark = pytest.mark.inprocess_only("the in-process run queue's workers")


@pytest.fixture(scope="module")
def tf_server(start_server, tf_backend_path) -> RedisServer:
    """THREADS_PER_QUEUE 1: the transitions through "queued" need a request that waits behind a
    slow run; the default helper (engine/run_queue.c) would run it beside. INLINE_RUN_MAX_US
    50: the transition through "inline" needs inline runs, off by default."""
    return start_server(["TF", str(tf_backend_path), "THREADS_PER_QUEUE", "1",
                         "INLINE_RUN_MAX_US", "50"])


@pytest.fixture
def c(tf_server: RedisServer, slow_n, connect: Connect) -> RawClient:
    client = connect(tf_server)
    em.store_slow_and_mul(client)
    return client


def counters(c: RawClient) -> dict[str, int]:
    fields = c.execute("INFO", "MODULES")
    return {k: int(info_field(fields, f"ai_{k}")) for k in ("inline_runs", "completions")}


def blocked(c: RawClient) -> int:
    return int(info_field(c.execute("INFO", "clients"), "blocked_clients"))


def slow_calls(c: RawClient) -> int:
    info = c.execute("AI.INFO", "slow")
    return int(info[info.index(b"calls") + 1])


def test_parsed_then_refused(c: RawClient) -> None:
    before = counters(c)
    assert_error(c.execute("AI.MODELEXECUTE", "nosuch", "INPUTS", 1, "a", "OUTPUTS", 1, "o"),
                 "ERR model key is empty")
    assert counters(c) == before and blocked(c) == 0


def test_parsed_inline_answered(c: RawClient) -> None:
    run = ("AI.MODELEXECUTE", "m", "INPUTS", 2, "a", "b", "OUTPUTS", 1, "o")
    assert_ok(c.execute(*run))   # its first run is queued and measured
    before = counters(c)
    for _ in range(5):
        assert_ok(c.execute(*run))
    after = counters(c)
    inline = after["inline_runs"] - before["inline_runs"]
    assert inline >= 1, (before, after)
    # each run inline or through the completion path, none elsewhere
    assert inline + after["completions"] - before["completions"] == 5, (before, after)
    assert [float(v) for v in c.execute("AI.TENSORGET", "o", "VALUES")] == [8.0, 15.0]


def test_parsed_queued_running_finished_answered(c: RawClient) -> None:
    before = counters(c)
    assert_ok(c.execute("AI.TENSORSET", "n1", "INT32", "VALUES", 1))
    # a DAG never runs inline: queued, run by the worker, answered from the queue
    assert c.execute("AI.DAGEXECUTE", "LOAD", 1, "n1", "|>", "AI.MODELEXECUTE", "slow",
                     "INPUTS", 1, "n1", "OUTPUTS", 1, "o", "|>", "AI.TENSORGET", "o",
                     "META")[1][-1] == [8, 8]
    after = counters(c)
    assert after["inline_runs"] == before["inline_runs"]
    assert after["completions"] - before["completions"] == 1


def test_running_then_queued_on_another_device_then_answered(c: RawClient) -> None:
    assert_ok(em.store_tf(c, "m1", tf_graphs.mul_graph(), ["a", "b"], ["mul"], device="CPU:1"))
    reply = c.execute("AI.DAGEXECUTE", "LOAD", 2, "a", "b", "|>",
                      "AI.MODELEXECUTE", "m", "INPUTS", 2, "a", "b", "OUTPUTS", 1, "x", "|>",
                      "AI.MODELEXECUTE", "m1", "INPUTS", 2, "x", "b", "OUTPUTS", 1, "y", "|>",
                      "AI.TENSORGET", "y", "VALUES")
    assert reply[:2] == ["OK", "OK"] and [float(v) for v in reply[2]] == [32.0, 75.0], reply


def killed_case(c: RawClient, port: int, victim_cmd: tuple, kill) -> None:
    """The victim sends victim_cmd; kill(victim_id) removes it at the moment under test.
    Then: its run still happened (AI.INFO), nothing stored, nothing blocked, PING."""
    calls = slow_calls(c)
    victim = RawClient(port)
    try:
        vid = victim.execute("CLIENT", "ID")
        victim.send(*victim_cmd)
        kill(vid)
    finally:
        victim.close()
    assert wait_until(lambda: slow_calls(c) > calls, timeout=20), "the victim's run never ran"
    assert wait_until(lambda: blocked(c) == 0, timeout=10), blocked(c)
    assert c.execute("EXISTS", "victim_out") == 0
    assert c.execute("PING") == "PONG"


def test_client_killed_while_queued(c: RawClient, tf_server: RedisServer, slow_n) -> None:
    assert_ok(c.execute("AI.TENSORSET", "n1", "INT32", "VALUES", 1))

    def kill(vid: int) -> None:
        assert em.wait_until_blocked(c, 2), "the victim never queued"
        assert c.execute("CLIENT", "KILL", "ID", vid) == 1

    with em.HeldQueue(tf_server.port, slow_n(0.5)):
        killed_case(c, tf_server.port,
                    ("AI.MODELEXECUTE", "slow", "INPUTS", 1, "n1", "OUTPUTS", 1, "victim_out"),
                    kill)


def test_client_killed_while_running(c: RawClient, tf_server: RedisServer, slow_n) -> None:
    assert_ok(c.execute("AI.TENSORSET", "n_long", "INT32", "VALUES", slow_n(0.3)))

    def kill(vid: int) -> None:
        assert em.wait_until_blocked(c, 1), "the victim's run never started"
        time.sleep(0.05)
        assert c.execute("CLIENT", "KILL", "ID", vid) == 1

    killed_case(c, tf_server.port,
                ("AI.MODELEXECUTE", "slow", "INPUTS", 1, "n_long", "OUTPUTS", 1, "victim_out"),
                kill)


def test_client_gone_while_queued(c: RawClient, tf_server: RedisServer, slow_n) -> None:
    assert_ok(c.execute("AI.TENSORSET", "n1", "INT32", "VALUES", 1))

    def leave(vid: int) -> None:
        assert em.wait_until_blocked(c, 2), "the victim never queued"
        # killed_case closes the victim's connection right after this returns

    with em.HeldQueue(tf_server.port, slow_n(0.5)):
        killed_case(c, tf_server.port,
                    ("AI.MODELEXECUTE", "slow", "INPUTS", 1, "n1", "OUTPUTS", 1, "victim_out"),
                    leave)


def test_client_killed_while_finished_and_not_yet_answered(c: RawClient, tf_server: RedisServer,
                                                          slow_n) -> None:
    """The run ends while Redis's main thread sleeps in DEBUG SLEEP; the killer's next
    command, in the same pipeline, kills the client before the next pass answers it. The
    DAG is freed all the same, its run counted."""
    assert_ok(c.execute("AI.TENSORSET", "n_short", "INT32", "VALUES", slow_n(0.1)))
    before = counters(c)
    with RawClient(tf_server.port, timeout=20) as killer:

        def kill(vid: int) -> None:
            assert em.wait_until_blocked(c, 1), "the victim's run never started"
            # one write: Redis reads both at once and runs the kill right after the sleep
            killer.sock.sendall(encode_command("DEBUG", "SLEEP", "0.5") +
                                encode_command("CLIENT", "KILL", "ID", vid))
            assert killer.read() == "OK"
            assert killer.read() == 1

        killed_case(c, tf_server.port,
                    ("AI.MODELEXECUTE", "slow", "INPUTS", 1, "n_short", "OUTPUTS", 1,
                     "victim_out"), kill)
    assert counters(c)["completions"] > before["completions"]
