"""Runs in flight while Redis pauses writes (docs/cluster.md, "Failover"): `CLIENT PAUSE WRITE`
and `CLIENT PAUSE ALL` on a master with a replica, as a manual failover does. Propagating a
write then makes Redis abort (`!(areClientsPaused() && ...)`), so a finished run is answered
without writing: its client gets `TRYAGAIN` and resends, and Redis holds the resent write
until the pause ends (engine/write_gate.h says why this and not a held reply).

* a model run in flight when the pause starts: `TRYAGAIN`, its output not stored on the
  master nor the replica; resent after the pause: stored and replicated;
* a DAG with PERSIST likewise (one error, not an array); a read-only DAG in flight is answered
  with its values;
* a script that writes through `redis.execute` (queued behind the model run, so it runs
  during the pause): the write is refused in the script, nothing is stored; a script run with
  an OUTPUTS key: `TRYAGAIN`;
* the same runs without a pause store their outputs (the test can tell);
* neither server aborts; INFO counts the refusals (`ai_completion_paused_refusals`).

No new command: the clients run as the default user.
"""
from __future__ import annotations

import time
from typing import Iterator

import pytest

import engine_models as em
import torch_models as tm
from helpers import assert_ok, info_field, wait_until
from persist_servers import Servers, wait_info
from redis_server import backend_args
from resp import RawClient, RespError

pytestmark = pytest.mark.inprocess_only("the in-process run queue's one worker")

TRYAGAIN_PAUSED = ("TRYAGAIN writes are paused (CLIENT PAUSE or a failover): the run's "
                   "outputs were not stored; send the command again")
RUN_SECONDS = 1.2
# CLIENT PAUSE ALL holds every client's commands, CLIENT UNPAUSE too: each ALL test waits for
# its pause to end, so it is shorter (4x the queued runs, about 1.5 s); WRITE's is lifted at once.
PAUSE_MS = {"WRITE": 15000, "ALL": 6000}


class Pair:
    def __init__(self, master, replica, n: int) -> None:
        self.master = master
        self.replica = replica
        self.n = n  # slow model's loop count for a run of about RUN_SECONDS


@pytest.fixture(scope="module")
def pair(module_path, tf_backend_path, torch_backend_path) -> Iterator[Pair]:
    servers = Servers(module_path, [*backend_args({"TF": tf_backend_path,
                                                   "TORCH": torch_backend_path}),
                                    "THREADS_PER_QUEUE", "1"])
    try:
        master = servers.start(extra=["--repl-diskless-sync-delay", "0"])
        replica = servers.start()
        with RawClient(master.port) as mc, RawClient(replica.port) as rc:
            n = em.calibrate_slow(mc)(RUN_SECONDS)
            assert_ok(mc.execute("AI.SCRIPTSTORE", "s", "CPU", "ENTRY_POINTS",
                                 len(tm.REDIS_ENTRY_POINTS) + 1, "bar", *tm.REDIS_ENTRY_POINTS,
                                 "SOURCE", tm.SCRIPT + tm.REDIS_SCRIPT))
            assert_ok(mc.execute("AI.TENSORSET", "n", "INT32", "VALUES", n))
            assert_ok(mc.execute("AI.TENSORSET", "a", "FLOAT", 2, "VALUES", 2, 3))
            assert_ok(rc.execute("REPLICAOF", "127.0.0.1", master.port))
            wait_info(rc, "replication", {"master_link_status": "up",
                                          "master_sync_in_progress": "0"})
            assert mc.execute("WAIT", 1, 30000) == 1
        yield Pair(master, replica, n)
        assert master.alive(), master.log()[-3000:]
        assert replica.alive(), replica.log()[-3000:]
    finally:
        servers.close()


@pytest.fixture
def mc(pair: Pair) -> Iterator[RawClient]:
    c = RawClient(pair.master.port)
    yield c
    c.execute("CLIENT", "UNPAUSE")
    for key in ("out", "dag_out", "kv", "sum"):
        c.execute("DEL", key)
    assert c.execute("WAIT", 1, 30000) == 1
    c.close()
    assert pair.master.alive(), pair.master.log()[-3000:]


def blocked(c: RawClient) -> int:
    return int(info_field(c.execute("INFO", "clients"), "blocked_clients"))


def refusals(c: RawClient) -> int:
    return int(info_field(c.execute("INFO", "MODULES"), "ai_completion_paused_refusals"))


SLOW_RUN = ("AI.MODELEXECUTE", "slow", "INPUTS", 1, "n", "OUTPUTS", 1, "out")
SLOW_DAG = ("AI.DAGEXECUTE", "LOAD", 1, "n", "PERSIST", 1, "dag_out", "|>",
            "AI.MODELEXECUTE", "slow", "INPUTS", 1, "n", "OUTPUTS", 1, "dag_out")
SLOW_DAG_RO = ("AI.DAGEXECUTE_RO", "LOAD", 1, "n", "|>", "AI.MODELEXECUTE", "slow", "INPUTS",
               1, "n", "OUTPUTS", 1, "o", "|>", "AI.TENSORGET", "o", "VALUES")
SCRIPT_WRITE = ("AI.SCRIPTEXECUTE", "s", "set_get", "KEYS", 1, "kv", "ARGS", 1, 41)
SCRIPT_OUT = ("AI.SCRIPTEXECUTE", "s", "bar", "INPUTS", 2, "a", "a", "OUTPUTS", 1, "sum")


def in_flight(pair: Pair, commands: list[tuple], pause: str | None) -> list[object]:
    """Sends each command on its own connection (the first one holds the queue's one
    worker for RUN_SECONDS, the others queue behind it), then pauses writes with
    CLIENT PAUSE <pause> (None: no pause), and reads every reply."""
    conns = [RawClient(pair.master.port) for _ in commands]
    try:
        with RawClient(pair.master.port) as watch:
            base = blocked(watch)
            for c, cmd in zip(conns, commands):
                c.send(*cmd)
            assert wait_until(lambda: blocked(watch) >= base + len(commands), 5.0)
            if pause is not None:
                assert_ok(watch.execute("CLIENT", "PAUSE", PAUSE_MS[pause], pause))
            started = time.monotonic()
            replies = [c.read() for c in conns]
            if pause is not None:
                # answered while the pause still held (the tree before aborted here)
                assert time.monotonic() - started < PAUSE_MS[pause] / 1000 - 1.0
        return replies
    finally:
        for c in conns:
            c.close()


@pytest.mark.parametrize("mode", ["WRITE", "ALL"])
def test_model_run_in_flight_answers_tryagain(pair: Pair, mc: RawClient, mode: str) -> None:
    before = refusals(mc)
    [reply] = in_flight(pair, [SLOW_RUN], mode)
    assert isinstance(reply, RespError) and str(reply) == TRYAGAIN_PAUSED, reply
    assert refusals(mc) == before + 1
    assert_ok(mc.execute("CLIENT", "UNPAUSE"))
    assert mc.execute("EXISTS", "out") == 0
    with RawClient(pair.replica.port) as rc:
        assert rc.execute("EXISTS", "out") == 0
    # resent: stored and replicated
    assert_ok(mc.execute(*SLOW_RUN))
    assert mc.execute("WAIT", 1, 30000) == 1
    with RawClient(pair.replica.port) as rc:
        assert rc.execute("EXISTS", "out") == 1


@pytest.mark.parametrize("mode", ["WRITE", "ALL"])
def test_dags_in_flight(pair: Pair, mc: RawClient, mode: str) -> None:
    dag, ro = in_flight(pair, [SLOW_DAG, SLOW_DAG_RO], mode)
    assert isinstance(dag, RespError) and str(dag) == TRYAGAIN_PAUSED, dag
    assert isinstance(ro, list) and ro[0] == "OK" and isinstance(ro[1], list), ro
    assert_ok(mc.execute("CLIENT", "UNPAUSE"))
    assert mc.execute("EXISTS", "dag_out") == 0


@pytest.mark.parametrize("mode", ["WRITE", "ALL"])
def test_scripts_in_flight(pair: Pair, mc: RawClient, mode: str) -> None:
    run, write, out = in_flight(pair, [SLOW_RUN, SCRIPT_WRITE, SCRIPT_OUT], mode)
    assert isinstance(run, RespError) and str(run) == TRYAGAIN_PAUSED, run
    # the script ran during the pause: its SET refused inside it, in the server's words
    # (or, without the module ACL API, refused as every call there is)
    assert isinstance(write, RespError), write
    assert isinstance(out, RespError) and str(out) == TRYAGAIN_PAUSED, out
    assert_ok(mc.execute("CLIENT", "UNPAUSE"))
    assert mc.execute("EXISTS", "kv") == 0 and mc.execute("EXISTS", "sum") == 0
    assert mc.execute("WAIT", 1, 30000) == 1
    with RawClient(pair.replica.port) as rc:
        assert rc.execute("EXISTS", "kv") == 0 and rc.execute("EXISTS", "sum") == 0


def test_without_pause_runs_store(pair: Pair, mc: RawClient) -> None:
    before = refusals(mc)
    run, dag, out = in_flight(pair, [SLOW_RUN, SLOW_DAG, SCRIPT_OUT], None)
    assert run == "OK" and dag == ["OK"] and out == "OK", (run, dag, out)
    assert refusals(mc) == before
    assert mc.execute("WAIT", 1, 30000) == 1
    with RawClient(pair.replica.port) as rc:
        assert [rc.execute("EXISTS", k) for k in ("out", "dag_out", "sum")] == [1, 1, 1]
