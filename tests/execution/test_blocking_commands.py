"""Blocking AI.* commands as RedisAI 1.2 times and answers them (issue 11, items 3 and 5).

* SLOWLOG and INFO COMMANDSTATS: the `usec` / duration of every blocking command
  (MODELEXECUTE, MODELRUN, SCRIPTEXECUTE, SCRIPTRUN, DAGEXECUTE(_RO), DAGRUN(_RO)) includes
  the time its run took on the worker thread (RedisModule_BlockedClientMeasureTimeStart/End,
  as 1.2), not only the main thread's parse and reply. Checked without any clock of the
  test's own: the SLOWLOG entry's duration and the COMMANDSTATS `usec` growth are at least
  the run time the module itself reports in AI.INFO's `duration` (the module measures
  inside the interval it reports to Redis). A run takes tens of ms; the main thread's share
  is well under one, so without the measurement every comparison fails.
* TIMEOUT t: a request that waited more than t ms in its queue before a worker could start
  it gets +TIMEDOUT, writes nothing and is not counted; one with a TIMEOUT long enough runs.
  The queue (THREADS_PER_QUEUE 1) is held by a TorchScript `gate` that runs until the test
  sets a key, so the wait is at least the test's pause, whatever the machine's speed.

One server with the TF and TORCH backends."""
from __future__ import annotations

import time
from typing import Any, Iterator

import pytest

import engine_models as em
import tf_graphs
from helpers import assert_ok
from redis_server import Connect, RedisServer, StartServer
from resp import RawClient, Status

TIMEDOUT = Status("TIMEDOUT")

# `spin` and `spin_t` loop n times (n from an INT32 input tensor); `gate` runs until the
# key keys[0] holds "go" (or args[0] rounds passed: a test that fails cannot hang).
SCRIPT = """
def _spin(x: Tensor, n: int):
    y = x
    for i in range(n):
        y = y * 0.5 + 1.0
    return y

def spin(tensors: List[Tensor], keys: List[str], args: List[str]):
    return _spin(tensors[0], int(tensors[1].item()))

def spin_t(x: Tensor, n: Tensor):
    return _spin(x, int(n.item()))

def gate(tensors: List[Tensor], keys: List[str], args: List[str]):
    rounds = int(args[0])
    y = tensors[0]
    i = 0
    while i < rounds:
        if str(redis.execute("GET", keys[0])) == "go":
            break
        y = _spin(y, 200)
        i += 1
    return y
"""
SPIN_N = 5000  # TorchScript loop rounds: tens of ms
SLOW_N = 5000  # TF while-loop rounds of tf_graphs.slow_graph: tens of ms


@pytest.fixture(scope="module")
def srv(start_server: StartServer, tf_backend_path, torch_backend_path) -> RedisServer:
    return start_server(["TF", str(tf_backend_path), "TORCH", str(torch_backend_path),
                         "THREADS_PER_QUEUE", "1"])


@pytest.fixture
def c(srv: RedisServer, connect: Connect) -> Iterator[RawClient]:
    client = connect(srv)
    assert_ok(client.execute("AI.SCRIPTSTORE", "s", "CPU", "ENTRY_POINTS", 1, "spin",
                             "SOURCE", SCRIPT))
    # the gate's own key, so that its runs count apart
    assert_ok(client.execute("AI.SCRIPTSTORE", "gs", "CPU", "ENTRY_POINTS", 1, "gate",
                             "SOURCE", SCRIPT))
    assert_ok(client.execute("AI.MODELSTORE", "slow", "TF", "CPU", "INPUTS", 1, "n", "OUTPUTS",
                             1, "out", "BLOB", tf_graphs.slow_graph()))
    assert_ok(em.store_tf(client, "m", tf_graphs.mul_graph(), ["a", "b"], ["mul"]))
    assert_ok(client.execute("AI.TENSORSET", "a", "FLOAT", 2, "VALUES", 2, 3))
    assert_ok(client.execute("AI.TENSORSET", "b", "FLOAT", 2, "VALUES", 4, 5))
    assert_ok(client.execute("AI.TENSORSET", "ns", "INT32", 1, "VALUES", SPIN_N))
    assert_ok(client.execute("AI.TENSORSET", "nt", "INT32", 1, "VALUES", SLOW_N))
    yield client
    assert_ok(client.execute("CONFIG", "SET", "slowlog-log-slower-than", 10000))


def info_field(c: RawClient, key: str, field: str) -> int:
    reply = c.execute("AI.INFO", key)
    assert isinstance(reply, list) and len(reply) == 18, reply
    return reply[reply.index(field.encode()) + 1]


def cmdstat_usec(c: RawClient, name: str) -> int:
    text = c.execute("INFO", "commandstats").decode()
    for line in text.splitlines():
        if line.startswith(f"cmdstat_{name}:"):
            fields = dict(kv.split("=") for kv in line.split(":", 1)[1].split(","))
            return int(fields["usec"])
    return 0


def slowlog_entries(c: RawClient, name: str) -> list[Any]:
    return [e for e in c.execute("SLOWLOG", "GET", -1) if e[3][0].decode().lower() == name]


# --------------------------------------------------------------------------------------
# SLOWLOG and COMMANDSTATS include the background run (item 3)
# --------------------------------------------------------------------------------------

SCRIPT_OP = ["AI.SCRIPTEXECUTE", "s", "spin", "INPUTS", 2, "a", "ns", "OUTPUTS", 1, "x"]
MODEL_OP = ["AI.MODELEXECUTE", "slow", "INPUTS", 1, "nt", "OUTPUTS", 1, "o"]

TIMED = {
    "MODELEXECUTE": (["AI.MODELEXECUTE", "slow", "INPUTS", 1, "nt", "OUTPUTS", 1, "o"], ["slow"]),
    "MODELRUN": (["AI.MODELRUN", "slow", "INPUTS", "nt", "OUTPUTS", "o"], ["slow"]),
    "SCRIPTEXECUTE": (["AI.SCRIPTEXECUTE", "s", "spin", "INPUTS", 2, "a", "ns", "OUTPUTS", 1, "o"],
                      ["s"]),
    "SCRIPTRUN": (["AI.SCRIPTRUN", "s", "spin_t", "INPUTS", "a", "ns", "OUTPUTS", "o"], ["s"]),
    # two ops of two backends: both runs count
    "DAGEXECUTE": (["AI.DAGEXECUTE", "LOAD", 3, "a", "ns", "nt", "PERSIST", 1, "o",
                    "|>", *SCRIPT_OP, "|>", *MODEL_OP], ["s", "slow"]),
    # read-only DAGs take no scripts: two model runs
    "DAGEXECUTE_RO": (["AI.DAGEXECUTE_RO", "LOAD", 3, "a", "b", "nt", "|>", *MODEL_OP,
                       "|>", "AI.MODELEXECUTE", "m", "INPUTS", 2, "a", "b", "OUTPUTS", 1, "c",
                       "|>", "AI.TENSORGET", "o", "META"], ["slow", "m"]),
    "DAGRUN": (["AI.DAGRUN", "LOAD", 2, "a", "ns", "PERSIST", 1, "o", "|>", "AI.SCRIPTRUN", "s",
                "spin_t", "INPUTS", "a", "ns", "OUTPUTS", "o"], ["s"]),
    "DAGRUN_RO": (["AI.DAGRUN_RO", "LOAD", 1, "nt", "|>", "AI.MODELRUN", "slow", "INPUTS", "nt",
                   "OUTPUTS", "o", "|>", "AI.TENSORGET", "o", "META"], ["slow"]),
}


def ok_reply(reply: Any) -> bool:
    if isinstance(reply, list):
        return all(not isinstance(r, str) or r == "OK" for r in reply)
    return reply == "OK"


@pytest.mark.parametrize("name", list(TIMED))
def test_slowlog_and_commandstats_include_the_run(c, name):
    cmd, keys = TIMED[name]
    stat = cmd[0].lower()
    for k in keys:
        assert c.execute("AI.INFO", k, "RESETSTAT") == "OK"
    assert_ok(c.execute("CONFIG", "SET", "slowlog-log-slower-than", 0))
    assert_ok(c.execute("SLOWLOG", "RESET"))
    usec_before = cmdstat_usec(c, stat)

    reply = c.execute(*cmd)
    assert ok_reply(reply), reply

    run_us = sum(info_field(c, k, "duration") for k in keys)
    assert all(info_field(c, k, "calls") == 1 for k in keys)
    assert run_us > 0
    entries = slowlog_entries(c, stat)
    assert len(entries) == 1, entries
    assert entries[0][2] >= run_us, \
        f"{name}: SLOWLOG says {entries[0][2]} us, the run alone took {run_us} us (AI.INFO)"
    grown = cmdstat_usec(c, stat) - usec_before
    assert grown >= run_us, f"{name}: commandstats usec grew by {grown}, run took {run_us} us"


def test_each_request_of_a_batch_counts_the_batch_run(c, srv):
    """Two requests batched into one run (BATCHSIZE model, queued behind a gate): each
    command's SLOWLOG entry includes the whole batch's run, which AI.INFO adds to the
    model's duration once per request."""
    assert_ok(c.execute("AI.MODELSTORE", "bm", "TORCH", "CPU", "BATCHSIZE", 4, "BLOB",
                        em.torch_batch_size_model()))
    assert_ok(c.execute("AI.TENSORSET", "x1", "FLOAT", 1, 2, "VALUES", 1, 2))
    assert_ok(c.execute("AI.TENSORSET", "x2", "FLOAT", 1, 2, "VALUES", 3, 4))
    assert_ok(c.execute("CONFIG", "SET", "slowlog-log-slower-than", 0))
    assert_ok(c.execute("SLOWLOG", "RESET"))
    with Gate(srv) as g, RawClient(srv.port) as w1, RawClient(srv.port) as w2:
        w1.send("AI.MODELEXECUTE", "bm", "INPUTS", 1, "x1", "OUTPUTS", 2, "y1", "z1")
        w2.send("AI.MODELEXECUTE", "bm", "INPUTS", 1, "x2", "OUTPUTS", 2, "y2", "z2")
        g.wait_blocked(3)
        g.release()
        assert w1.read() == "OK" and w2.read() == "OK"
    assert info_field(c, "bm", "calls") == 2
    batch_us = info_field(c, "bm", "duration") // 2
    # the model's first output is its input's dim 0: 2 proves one run of both requests
    assert c.execute("AI.TENSORGET", "y1", "VALUES") == [b"2", b"2"]
    entries = slowlog_entries(c, "ai.modelexecute")
    assert len(entries) == 2, entries
    assert all(e[2] >= batch_us for e in entries), (batch_us, entries)


# --------------------------------------------------------------------------------------
# TIMEOUT of a request queued behind a running script (item 5)
# --------------------------------------------------------------------------------------

class Gate:
    """Holds the CPU queue's only worker with the `gate` script until release()."""

    def __init__(self, srv: RedisServer) -> None:
        self.blocker = RawClient(srv.port)
        self.watch = RawClient(srv.port)

    def __enter__(self) -> "Gate":
        self.watch.execute("DEL", "g")
        self.blocker.send("AI.SCRIPTEXECUTE", "gs", "gate", "KEYS", 1, "g", "INPUTS", 1, "a",
                          "ARGS", 1, 100000, "OUTPUTS", 1, "gated")
        self.wait_blocked(1)
        self.released = False
        return self

    def wait_blocked(self, n: int) -> None:
        assert em.wait_until_blocked(self.watch, n, timeout=20), \
            f"{em.blocked_clients(self.watch)} blocked clients, expected {n}"
        assert not self.blocker.pending(), "the gate script ended before it was released"

    def release(self) -> None:
        if not self.released:
            self.released = True
            assert_ok(self.watch.execute("SET", "g", "go"))
            assert self.blocker.read() == "OK"

    def __exit__(self, *exc: object) -> None:
        try:
            self.release()
        finally:
            self.blocker.close()
            self.watch.close()


def behind_gate(srv: RedisServer, cmd: list, pause: float) -> Any:
    """Sends cmd while the gate runs, lets it wait at least `pause` s in the queue (the
    request is queued once its client is blocked), then opens the gate."""
    with Gate(srv) as g, RawClient(srv.port) as w:
        w.send(*cmd)
        g.wait_blocked(2)
        time.sleep(pause)
        g.release()
        return w.read()


SE = ["AI.SCRIPTEXECUTE", "s", "spin", "INPUTS", 2, "a", "ns", "OUTPUTS", 1, "c"]
ME = ["AI.MODELEXECUTE", "m", "INPUTS", 2, "a", "b", "OUTPUTS", 1, "c"]
QUEUED = {
    "SCRIPTEXECUTE": (SE + ["TIMEOUT", "{t}"], "s", Status("OK")),
    "SCRIPTRUN": (["AI.SCRIPTRUN", "s", "spin_t", "TIMEOUT", "{t}", "INPUTS", "a", "ns", "OUTPUTS",
                   "c"], "s", Status("OK")),
    "MODELEXECUTE": (ME + ["TIMEOUT", "{t}"], "m", Status("OK")),
    "MODELRUN": (["AI.MODELRUN", "m", "TIMEOUT", "{t}", "INPUTS", "a", "b", "OUTPUTS", "c"], "m",
                 Status("OK")),
    "DAGEXECUTE": (["AI.DAGEXECUTE", "LOAD", 3, "a", "b", "ns", "PERSIST", 1, "c", "TIMEOUT", "{t}",
                    "|>", *ME, "|>", *SE], "m", [Status("OK"), Status("OK")]),
    "DAGEXECUTE_RO": (["AI.DAGEXECUTE_RO", "LOAD", 2, "a", "b", "TIMEOUT", "{t}", "|>", *ME],
                      "m", [Status("OK")]),
    "DAGRUN": (["AI.DAGRUN", "TIMEOUT", "{t}", "LOAD", 2, "a", "b", "PERSIST", 1, "c",
                "|>", "AI.MODELRUN", "m", "INPUTS", "a", "b", "OUTPUTS", "c"], "m", [Status("OK")]),
    "DAGRUN_RO": (["AI.DAGRUN_RO", "LOAD", 2, "a", "b", "TIMEOUT", "{t}", "|>", "AI.MODELRUN",
                   "m", "INPUTS", "a", "b", "OUTPUTS", "c"], "m", [Status("OK")]),
}


def with_timeout(cmd: list, t: int) -> list:
    return [t if a == "{t}" else a for a in cmd]


@pytest.mark.parametrize("name", list(QUEUED))
def test_timeout_passed_in_the_queue_behind_a_running_script(c, srv, name):
    cmd, key, _ = QUEUED[name]
    calls_before = info_field(c, key, "calls")
    reply = behind_gate(srv, with_timeout(cmd, 50), pause=0.2)
    assert isinstance(reply, Status) and reply == TIMEDOUT, f"{name}: {reply!r}"
    assert c.execute("EXISTS", "c") == 0, f"{name}: a timed-out request wrote its output"
    assert info_field(c, key, "calls") == calls_before, f"{name}: a timed-out request counted"


@pytest.mark.parametrize("name", list(QUEUED))
def test_timeout_long_enough_runs_behind_a_running_script(c, srv, name):
    cmd, key, ok = QUEUED[name]
    calls_before = info_field(c, key, "calls")
    reply = behind_gate(srv, with_timeout(cmd, 60000), pause=0.1)
    assert reply == ok, f"{name}: {reply!r}"
    assert info_field(c, key, "calls") == calls_before + 1
    if name != "DAGEXECUTE_RO" and name != "DAGRUN_RO":
        assert c.execute("EXISTS", "c") == 1
