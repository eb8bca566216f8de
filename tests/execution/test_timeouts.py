"""Timeouts and limits (docs/commands.md: AI.MODELEXECUTE, AI.SCRIPTEXECUTE, the DAGs, "How
commands run", shared errors):

* the TIMEOUT argument of MODELEXECUTE, MODELRUN, SCRIPTEXECUTE, SCRIPTRUN and the DAG
  commands: +TIMEDOUT when a request waited longer than that in its queue (counted from
  enqueue, checked when a worker takes it), a running op is never interrupted, a DAG's
  TIMEOUT is checked before each op, TIMEOUT 0 or negative in a DAG means none (QUIRK),
  timed-out requests write nothing and are not counted in AI.INFO;
* MODEL_EXECUTION_TIMEOUT for ONNX: an ONNX run that lasts longer (a Loop with a huge trip
  count) is terminated and fails with ORT's `Exiting due to terminate flag being set to
  true.` (ORT wraps it: `Non-zero status code returned while running Loop node. ...
  Status Message: Exiting due to terminate flag being set to true.`, so the text is checked
  as a part of the one-line error, as upstream's own test does), and the server stays
  responsive;
* BACKEND_MEMORY_LIMIT for ONNX: allocations over the limit fail with
  `Onnxruntime memory limit exceeded, memory allocation failed.` (checked as a part of the
  error, which ORT may wrap);
* blocking commands inside MULTI/EXEC, Lua (EVAL) and functions (FCALL) are refused with
  `ERR Cannot run RedisAI command within a transaction or a LUA script`, before anything
  else is checked.

The queue is held by a slow TF run (engine_models.HeldQueue) so that requests wait behind
it. Servers: a TF server with THREADS_PER_QUEUE 1 (one worker, no helper); an ONNX server with MODEL_EXECUTION_TIMEOUT 1000 and
BACKEND_MEMORY_LIMIT 32 (MB), skipped while the ONNX backend is not built. When this file
was written the two ONNX limits were not implemented yet: those tests run and report."""
from __future__ import annotations

import time

import pytest

import engine_models as em
import tf_graphs
from helpers import assert_error, assert_ok
from redis_server import Connect, RedisServer, StartServer
from resp import RawClient, RespError, Status

TIMEDOUT = Status("TIMEDOUT")
REFUSED = "ERR Cannot run RedisAI command within a transaction or a LUA script"
ORT_TERMINATED = "Exiting due to terminate flag being set to true."
ORT_MEMORY = "Onnxruntime memory limit exceeded, memory allocation failed."
HOLD_S = 0.4


@pytest.fixture(scope="module")
def tf_server(tf_one_worker_server: RedisServer) -> RedisServer:
    """One worker (conftest.py): the tests hold it with a slow run so that requests wait."""
    return tf_one_worker_server


@pytest.fixture
def c(tf_server: RedisServer, slow_n, connect: Connect) -> RawClient:
    client = connect(tf_server)
    em.store_slow_and_mul(client)
    return client


def calls(c: RawClient, key: str) -> tuple[int, int]:
    reply = c.execute("AI.INFO", key)
    assert isinstance(reply, list) and len(reply) == 18, reply
    return reply[15], reply[17]


def behind_slow(server: RedisServer, slow_n, *cmd, seconds: float = HOLD_S):
    """Sends `cmd` on its own connection while the CPU worker runs a slow model; returns
    the reply and whether the slow run had answered before it (the request waited for the
    worker rather than being answered from the main thread)."""
    with RawClient(server.port) as w:
        with em.HeldQueue(server.port, slow_n(seconds)) as h:
            w.send(*cmd)
            h.wait_queued(2)
            reply = w.read()
            # Both replies are written by the main thread, in the order the runs ended.
            slow_first = h.blocker.pending(wait=0.5)
        return reply, slow_first


ME = ["AI.MODELEXECUTE", "m", "INPUTS", 2, "a", "b", "OUTPUTS", 1, "c"]
DAG_OPS = ["|>", "AI.MODELEXECUTE", "m", "INPUTS", 2, "a", "b", "OUTPUTS", 1, "c",
           "|>", "AI.TENSORGET", "c", "VALUES"]
DAGRUN_OPS = ["|>", "AI.MODELRUN", "m", "INPUTS", "a", "b", "OUTPUTS", "c",
              "|>", "AI.TENSORGET", "c", "VALUES"]

QUEUED_TIMEOUT_CASES = {
    "MODELEXECUTE": ME + ["TIMEOUT", 100],
    "MODELRUN": ["AI.MODELRUN", "m", "TIMEOUT", 100, "INPUTS", "a", "b", "OUTPUTS", "c"],
    "DAGEXECUTE": ["AI.DAGEXECUTE", "LOAD", 2, "a", "b", "PERSIST", 1, "c", "TIMEOUT", 100, *DAG_OPS],
    "DAGEXECUTE_RO": ["AI.DAGEXECUTE_RO", "LOAD", 2, "a", "b", "TIMEOUT", 100, *DAG_OPS],
    "DAGRUN": ["AI.DAGRUN", "TIMEOUT", 100, "LOAD", 2, "a", "b", "PERSIST", 1, "c", *DAGRUN_OPS],
    "DAGRUN_RO": ["AI.DAGRUN_RO", "LOAD", 2, "a", "b", "TIMEOUT", 100, *DAGRUN_OPS],
    "DAG-tensor-ops-only": ["AI.DAGEXECUTE", "PERSIST", 1, "c", "TIMEOUT", 100, "|>",
                            "AI.TENSORSET", "c", "FLOAT", 1, "VALUES", 1],
}


# --------------------------------------------------------------------------------------
# TIMEOUT: requests that waited too long in the queue
# --------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", list(QUEUED_TIMEOUT_CASES))
def test_queued_request_times_out_behind_a_slow_one(c, tf_server, slow_n, name):
    reply, slow_first = behind_slow(tf_server, slow_n, *QUEUED_TIMEOUT_CASES[name])
    assert isinstance(reply, Status) and reply == TIMEDOUT, f"{name}: {reply!r}"
    assert slow_first, f"{name}: answered before the slow run ended"
    assert c.execute("EXISTS", "c") == 0, f"{name}: a timed-out request wrote its output"
    assert calls(c, "m") == (0, 0), f"{name}: a timed-out request was counted"
    # the server goes on normally
    assert_ok(c.execute(*ME))
    assert calls(c, "m") == (1, 0)


def test_timeout_long_enough_is_not_hit(c, tf_server, slow_n):
    reply, _ = behind_slow(tf_server, slow_n, *ME, "TIMEOUT", 20000)
    assert reply == "OK"
    assert c.execute("AI.TENSORGET", "c", "VALUES") == [b"8", b"15"]
    reply, _ = behind_slow(tf_server, slow_n, "AI.DAGEXECUTE", "LOAD", 2, "a", "b", "TIMEOUT",
                           20000, *DAG_OPS)
    assert reply == [Status("OK"), [b"8", b"15"]]


@pytest.mark.parametrize("t", [0, -1])
def test_dag_timeout_zero_or_negative_means_none(c, tf_server, slow_n, t):
    """QUIRK (docs/commands.md, AI.DAGEXECUTE): accepted, and no timeout applies
    (MODELEXECUTE refuses them)."""
    reply, slow_first = behind_slow(tf_server, slow_n, "AI.DAGEXECUTE", "LOAD", 2, "a", "b",
                                    "TIMEOUT", t, *DAG_OPS)
    assert reply == [Status("OK"), [b"8", b"15"]], reply
    assert slow_first
    assert_error(c.execute(*ME, "TIMEOUT", t), "ERR Invalid value for TIMEOUT")


def test_a_running_op_is_not_interrupted(c, slow_n):
    assert_ok(c.execute("AI.TENSORSET", "n", "INT32", "VALUES",
                        em.slow_at_least(c, slow_n(0.5), 0.3)))
    t0 = time.perf_counter()
    reply = c.execute("AI.MODELEXECUTE", "slow", "INPUTS", 1, "n", "OUTPUTS", 1, "o", "TIMEOUT", 50)
    elapsed = time.perf_counter() - t0
    assert reply == "OK", reply
    assert elapsed >= 0.25, elapsed
    assert c.execute("AI.TENSORGET", "o", "META") == [b"dtype", b"FLOAT", b"shape", [8, 8]]


def test_dag_timeout_is_checked_before_each_op(c, slow_n):
    """docs/commands.md, AI.DAGEXECUTE: counted from enqueue and checked before each op is
    dequeued. The first op
    (slow, ~0.5 s) is not interrupted; the op after it is not started: +TIMEDOUT, nothing
    persisted, nothing counted."""
    assert_ok(c.execute("AI.TENSORSET", "n", "INT32", "VALUES",
                        em.slow_at_least(c, slow_n(0.5), 0.3)))
    t0 = time.perf_counter()
    reply = c.execute("AI.DAGEXECUTE", "LOAD", 3, "n", "a", "b", "PERSIST", 2, "o", "c",
                      "TIMEOUT", 200,
                      "|>", "AI.MODELEXECUTE", "slow", "INPUTS", 1, "n", "OUTPUTS", 1, "o",
                      "|>", "AI.MODELEXECUTE", "m", "INPUTS", 2, "a", "b", "OUTPUTS", 1, "c")
    elapsed = time.perf_counter() - t0
    assert isinstance(reply, Status) and reply == TIMEDOUT, \
        f"expected +TIMEDOUT (the DAG's 200 ms passed before its second op), got {reply!r}"
    assert elapsed >= 0.25
    assert c.execute("EXISTS", "o", "c") == 0
    assert calls(c, "m") == (0, 0)


def test_timed_out_request_of_a_disconnected_client(c, tf_server, slow_n):
    """A client that leaves while its request waits: nothing is written or counted, the
    server goes on."""
    with em.HeldQueue(tf_server.port, slow_n(0.4)) as h:
        gone = RawClient(tf_server.port)
        gone.send(*ME, "TIMEOUT", 50)
        h.wait_queued(2)
        gone.close()
    time.sleep(0.1)
    assert c.execute("EXISTS", "c") == 0
    assert calls(c, "m") == (0, 0)
    assert_ok(c.execute(*ME, "TIMEOUT", 1000))


@pytest.fixture
def script(c, install_dir):
    em.require_backend(install_dir, "TORCH")
    assert_ok(c.execute("AI.SCRIPTSTORE", "s", "CPU", "ENTRY_POINTS", 2, "add_ten", "sub_pair",
                        "SOURCE", em.TORCH_SCRIPT))
    return c


@pytest.mark.parametrize("cmd", [
    ["AI.SCRIPTEXECUTE", "s", "add_ten", "INPUTS", 1, "a", "OUTPUTS", 1, "c", "TIMEOUT", 100],
    ["AI.SCRIPTRUN", "s", "add_ten", "TIMEOUT", 100, "INPUTS", "a", "OUTPUTS", "c"],
    ["AI.SCRIPTRUN", "s", "add_ten", "INPUTS", "a", "OUTPUTS", "c", "TIMEOUT", 100],
    ["AI.DAGEXECUTE", "LOAD", 1, "a", "PERSIST", 1, "c", "TIMEOUT", 100, "|>", "AI.SCRIPTEXECUTE",
     "s", "add_ten", "INPUTS", 1, "a", "OUTPUTS", 1, "c"],
], ids=["SCRIPTEXECUTE", "SCRIPTRUN-timeout-first", "SCRIPTRUN-timeout-last", "DAG-script"])
def test_script_request_times_out_behind_a_slow_one(script, tf_server, slow_n, cmd):
    c = script
    reply, _ = behind_slow(tf_server, slow_n, *cmd)
    assert isinstance(reply, Status) and reply == TIMEDOUT, reply
    assert c.execute("EXISTS", "c") == 0
    assert calls(c, "s") == (0, 0)
    rerun = c.execute(*cmd)
    assert rerun == ([Status("OK")] if cmd[0].startswith("AI.DAG") else Status("OK")), rerun
    assert c.execute("AI.TENSORGET", "c", "VALUES") == [b"12", b"13"]
    assert calls(c, "s") == (1, 0)


# --------------------------------------------------------------------------------------
# MULTI / EXEC, Lua and functions: blocking commands are refused
# --------------------------------------------------------------------------------------

BLOCKING = {
    "AI.MODELEXECUTE": ME,
    "AI.MODELRUN": ["AI.MODELRUN", "m", "INPUTS", "a", "b", "OUTPUTS", "c"],
    "AI.SCRIPTEXECUTE": ["AI.SCRIPTEXECUTE", "s", "add_ten", "INPUTS", 1, "a", "OUTPUTS", 1, "c"],
    "AI.SCRIPTRUN": ["AI.SCRIPTRUN", "s", "add_ten", "INPUTS", "a", "OUTPUTS", "c"],
    "AI.DAGEXECUTE": ["AI.DAGEXECUTE", "LOAD", 2, "a", "b", "PERSIST", 1, "c", *DAG_OPS],
    "AI.DAGEXECUTE_RO": ["AI.DAGEXECUTE_RO", "LOAD", 2, "a", "b", *DAG_OPS],
    "AI.DAGRUN": ["AI.DAGRUN", "LOAD", 2, "a", "b", "PERSIST", 1, "c", *DAGRUN_OPS],
    "AI.DAGRUN_RO": ["AI.DAGRUN_RO", "LOAD", 2, "a", "b", *DAGRUN_OPS],
}


def _lua_call(cmd: list) -> tuple[str, list]:
    args = ", ".join(f"ARGV[{i + 1}]" for i in range(len(cmd)))
    return f"return redis.pcall({args})", [str(a) for a in cmd]


@pytest.mark.parametrize("name", list(BLOCKING))
@pytest.mark.parametrize("form", ["valid", "bad-args", "lower-case"])
def test_refused_inside_multi(c, name, form):
    cmd = BLOCKING[name] if form != "bad-args" else [name, "x"]
    if form == "lower-case":
        cmd = [cmd[0].lower(), *cmd[1:]]
    assert_ok(c.execute("MULTI"))
    assert c.execute(*cmd) == "QUEUED"
    assert c.execute("AI.TENSORSET", "t", "FLOAT", 1, "VALUES", 1) == "QUEUED"
    replies = c.execute("EXEC")
    assert isinstance(replies, list) and len(replies) == 2, replies
    assert_error(replies[0], REFUSED)
    assert_ok(replies[1])  # non-blocking AI commands run inside a transaction
    assert c.execute("EXISTS", "c") == 0
    assert calls(c, "m") == (0, 0)
    assert c.execute("PING") == "PONG"


@pytest.mark.parametrize("name", list(BLOCKING))
@pytest.mark.parametrize("form", ["valid", "bad-args"])
def test_refused_inside_lua(c, name, form):
    cmd = BLOCKING[name] if form == "valid" else [name]
    body, argv = _lua_call(cmd)
    assert_error(c.execute("EVAL", body, 0, *argv), REFUSED)
    assert c.execute("EXISTS", "c") == 0
    assert calls(c, "m") == (0, 0)
    # non-blocking AI commands work from Lua
    body, argv = _lua_call(["AI.TENSORGET", "a", "VALUES"])
    assert c.execute("EVAL", body, 0, *argv) == [b"2", b"3"]


def test_refused_inside_a_function(c):
    lib = ("#!lua name=rai_refusal\n"
           "redis.register_function('run_it', function(keys, args) "
           "return redis.pcall(unpack(args)) end)")
    reply = c.execute("FUNCTION", "LOAD", "REPLACE", lib)
    if isinstance(reply, RespError):
        pytest.skip(f"this redis-server has no FUNCTION LOAD: {reply}")
    try:
        for name, cmd in BLOCKING.items():
            assert_error(c.execute("FCALL", "run_it", 0, *[str(a) for a in cmd]), REFUSED)
        assert c.execute("EXISTS", "c") == 0
    finally:
        c.execute("FUNCTION", "DELETE", "rai_refusal")


def test_refused_inside_multi_with_a_script_of_torch(script):
    """With a stored script, SCRIPTEXECUTE/SCRIPTRUN in MULTI are refused, and run after."""
    c = script
    assert_ok(c.execute("MULTI"))
    assert c.execute(*BLOCKING["AI.SCRIPTEXECUTE"]) == "QUEUED"
    assert c.execute(*BLOCKING["AI.SCRIPTRUN"]) == "QUEUED"
    replies = c.execute("EXEC")
    for rep in replies:
        assert_error(rep, REFUSED)
    assert c.execute("EXISTS", "c") == 0
    assert calls(c, "s") == (0, 0)
    assert_ok(c.execute(*BLOCKING["AI.SCRIPTEXECUTE"]))


# --------------------------------------------------------------------------------------
# ONNX: MODEL_EXECUTION_TIMEOUT and BACKEND_MEMORY_LIMIT
# --------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def onnx_server(start_server: StartServer, install_dir) -> RedisServer:
    """This file's ONNX server (not conftest's): runs end after 1 s, 32 MB per backend."""
    onnx_so = em.require_backend(install_dir, "ONNX")
    return start_server(["ONNX", str(onnx_so), "MODEL_EXECUTION_TIMEOUT", "1000",
                         "BACKEND_MEMORY_LIMIT", "32"])


@pytest.fixture
def oc(onnx_server: RedisServer, connect: Connect) -> RawClient:
    return connect(onnx_server)


def store_loop(oc: RawClient) -> None:
    assert_ok(oc.execute("AI.MODELSTORE", "loop", "ONNX", "CPU", "BLOB", em.onnx_loop_model()))


@pytest.fixture(scope="module")
def loop_n(onnx_server: RedisServer):
    """n(seconds) -> the Loop trip count of a run lasting about that long (measured on
    runs of ~0.1-0.3 s, under the limit). A run meant to be terminated lasts ~3 s if it is
    not, so a missing kill switch fails the test instead of hanging the queue."""
    with RawClient(onnx_server.port) as c:
        store_loop(c)

        def run(n: int) -> float:
            assert_ok(c.execute("AI.TENSORSET", "n", "INT64", 1, "VALUES", n))
            t0 = time.perf_counter()
            assert_ok(c.execute("AI.MODELEXECUTE", "loop", "INPUTS", 1, "n", "OUTPUTS", 1, "out"))
            return time.perf_counter() - t0

        run(10)
        n, t = 20_000, run(20_000)
        while t < 0.1:
            n *= 2
            t = run(n)
        per_iter = max((run(3 * n) - t) / (2 * n), 1e-9)
        assert_ok(c.execute("FLUSHALL", "SYNC"))
    return lambda seconds: max(10, int(seconds / per_iter))


def test_onnx_short_loop_runs(oc):
    store_loop(oc)
    assert_ok(oc.execute("AI.TENSORSET", "n", "INT64", 1, "VALUES", 10))
    assert_ok(oc.execute("AI.MODELEXECUTE", "loop", "INPUTS", 1, "n", "OUTPUTS", 1, "out"))
    assert oc.execute("AI.TENSORGET", "out", "META") == [b"dtype", b"FLOAT", b"shape", [16, 16]]


def test_onnx_run_is_terminated_at_model_execution_timeout(oc, onnx_server, loop_n):
    store_loop(oc)
    assert_ok(oc.execute("AI.TENSORSET", "n", "INT64", 1, "VALUES", loop_n(3.0)))
    with RawClient(onnx_server.port, timeout=30) as runner:
        t0 = time.perf_counter()
        runner.send("AI.MODELEXECUTE", "loop", "INPUTS", 1, "n", "OUTPUTS", 1, "out")
        # the server answers while the run goes on
        time.sleep(0.3)
        t1 = time.perf_counter()
        assert oc.execute("PING") == "PONG"
        assert time.perf_counter() - t1 < 0.25
        assert runner.pending(wait=15.0), "no reply within 15 s"
        reply = runner.read()
        elapsed = time.perf_counter() - t0
    assert isinstance(reply, RespError), f"expected an error, got {reply!r}"
    assert ORT_TERMINATED in str(reply), f"\nexpected text containing: {ORT_TERMINATED!r}\n got: {str(reply)!r}"
    assert "\n" not in str(reply)
    assert 0.9 <= elapsed < 2.5, f"terminated after {elapsed:.3f} s (MODEL_EXECUTION_TIMEOUT 1000 ms)"
    assert oc.execute("EXISTS", "out") == 0
    assert calls(oc, "loop") == (1, 1)
    # the backend and the server are fine afterwards
    assert_ok(oc.execute("AI.TENSORSET", "n", "INT64", 1, "VALUES", 10))
    assert_ok(oc.execute("AI.MODELEXECUTE", "loop", "INPUTS", 1, "n", "OUTPUTS", 1, "out"))
    assert calls(oc, "loop") == (2, 1)


def test_onnx_timeout_inside_a_dag(oc, loop_n):
    store_loop(oc)
    assert_ok(oc.execute("AI.TENSORSET", "n", "INT64", 1, "VALUES", loop_n(3.0)))
    reply = oc.execute("AI.DAGEXECUTE", "LOAD", 1, "n", "PERSIST", 1, "out",
                       "|>", "AI.MODELEXECUTE", "loop", "INPUTS", 1, "n", "OUTPUTS", 1, "out",
                       "|>", "AI.TENSORGET", "out", "META")
    assert isinstance(reply, list) and len(reply) == 2, reply
    assert isinstance(reply[0], RespError) and ORT_TERMINATED in str(reply[0]), reply
    assert reply[1] == Status("NA")
    assert oc.execute("EXISTS", "out") == 0


def test_onnx_runs_under_the_timeout_are_not_terminated(oc, loop_n):
    store_loop(oc)
    # about 0.2 s on an idle machine, well under the 1000 ms limit even on a loaded one
    # (a busy 2-core machine stretched 0.4 s past the limit once)
    assert_ok(oc.execute("AI.TENSORSET", "n", "INT64", 1, "VALUES", loop_n(0.2)))
    for _ in range(2):
        assert_ok(oc.execute("AI.MODELEXECUTE", "loop", "INPUTS", 1, "n", "OUTPUTS", 1, "out"))


def test_onnx_run_over_backend_memory_limit(oc):
    assert_ok(oc.execute("AI.MODELSTORE", "alloc", "ONNX", "CPU", "BLOB", em.onnx_alloc_model()))
    assert_ok(oc.execute("AI.TENSORSET", "small", "INT64", 2, "VALUES", 2, 2))
    assert_ok(oc.execute("AI.MODELEXECUTE", "alloc", "INPUTS", 1, "small", "OUTPUTS", 1, "o"))
    assert oc.execute("AI.TENSORGET", "o", "VALUES") == [b"1"] * 4
    # 4096 x 4096 floats = 64 MiB, over the 32 MB limit
    assert_ok(oc.execute("AI.TENSORSET", "big", "INT64", 2, "VALUES", 4096, 4096))
    reply = oc.execute("AI.MODELEXECUTE", "alloc", "INPUTS", 1, "big", "OUTPUTS", 1, "o2")
    assert isinstance(reply, RespError), f"expected an error, got {reply!r}"
    assert ORT_MEMORY in str(reply), f"\nexpected text containing: {ORT_MEMORY!r}\n got: {str(reply)!r}"
    assert oc.execute("EXISTS", "o2") == 0
    # memory is given back: small runs keep working
    for _ in range(3):
        assert_ok(oc.execute("AI.MODELEXECUTE", "alloc", "INPUTS", 1, "small", "OUTPUTS", 1, "o"))
    assert oc.execute("PING") == "PONG"


def test_onnx_store_over_backend_memory_limit(oc):
    blob = em.onnx_big_initializer_model(48)  # a 48 MiB initializer, over the 32 MB limit
    reply = oc.execute("AI.MODELSTORE", "bigm", "ONNX", "CPU", "BLOB", blob)
    assert isinstance(reply, RespError), f"expected an error, got {reply!r}"
    assert ORT_MEMORY in str(reply), f"\nexpected text containing: {ORT_MEMORY!r}\n got: {str(reply)!r}"
    assert oc.execute("EXISTS", "bigm") == 0
    assert_ok(oc.execute("AI.MODELSTORE", "m1", "ONNX", "CPU", "BLOB", em.onnx_minus_one_model()))
    assert_ok(oc.execute("AI.TENSORSET", "x", "FLOAT", 1, 2, "VALUES", 1, 2))
    assert_ok(oc.execute("AI.MODELEXECUTE", "m1", "INPUTS", 1, "x", "OUTPUTS", 1, "y"))
    assert oc.execute("AI.TENSORGET", "y", "VALUES") == [b"0", b"1"]
