"""Inline runs (module/inline_run.h, docs/performance.md "Inline runs"): a short model's
AI.MODELEXECUTE / AI.MODELRUN runs on Redis's main thread and is answered at once when
nothing else waits for the engine; otherwise it is queued as always.

Checked here, each against INFO's `ai_inline_runs` counter:
* repeated runs of a short model go inline and answer exactly what queued runs answer
  (outputs, errors, AI.INFO counts, replication to a replica);
* the first run of a model (no time known yet), a larger input than the latest run's, a
  BATCHSIZE model, a busy queue (held by a slow TF run), every request after the first
  of one event-loop pass (a pipeline), and an isolated backend are never inline;
* a model slower inline than on its worker (three inline runs over the limit) is queued,
  then tried inline again a second later;
* INLINE_RUN_MAX_US: 0, the default, turns it off, as a module argument and with AI.CONFIG,
  bad values are refused, AI.CONFIG GET reads it;
* a restricted ACL user neither runs a model on keys it may not touch nor changes the
  setting.
"""
from __future__ import annotations

import time
from typing import Iterator

import pytest

import engine_models as em
from helpers import assert_error, assert_ok, info_field, wait_until
from redis_server import RedisServer, StartServer, start_expecting_failure
from resp import RawClient, RespError, encode_command

pytestmark = pytest.mark.inprocess_only("isolated backends never run inline")

RUNS = 20


@pytest.fixture(scope="module")
def srv(start_server: StartServer, tf_backend_path, onnx_backend_path) -> RedisServer:
    s = start_server(["TF", str(tf_backend_path), "ONNX", str(onnx_backend_path)])
    admin = RawClient(s.port)
    assert_ok(admin.execute("ACL", "SETUSER", "limited", "on", ">pw", "-@all", "+ai.modelexecute",
                            "+ai.tensorset", "+ai.tensorget", "+ai.config", "~in*", "~out*",
                            "~m"))
    admin.close()
    return s


@pytest.fixture(scope="module")
def slow_n(srv: RedisServer):
    with RawClient(srv.port) as c:
        return em.calibrate_slow(c)


@pytest.fixture
def c(srv: RedisServer) -> Iterator[RawClient]:
    client = RawClient(srv.port)
    assert_ok(client.execute("AI.CONFIG", "INLINE_RUN_MAX_US", 200))
    for key in client.execute("KEYS", "*"):
        if key not in (b"slow", "slow"):
            client.execute("DEL", key)
    assert_ok(client.execute("AI.MODELSTORE", "m", "ONNX", "CPU", "BLOB",
                             em.onnx_minus_one_model()))
    assert_ok(client.execute("AI.TENSORSET", "in", "FLOAT", 2, 2, "VALUES", 1, 2, 3, 4))
    yield client
    client.execute("AI.CONFIG", "INLINE_RUN_MAX_US", 200)
    client.close()


def inline_runs(c: RawClient) -> int:
    return int(info_field(c.execute("INFO", "MODULES"), "ai_inline_runs"))


def run(c: RawClient, inp: str = "in", out: str = "out") -> object:
    return c.execute("AI.MODELEXECUTE", "m", "INPUTS", 1, inp, "OUTPUTS", 1, out)


def values(c: RawClient, key: str) -> list[float]:
    return [float(v) for v in c.execute("AI.TENSORGET", key, "VALUES")]


def calls(c: RawClient, key: str = "m") -> int:
    info = c.execute("AI.INFO", key)
    return int(info[info.index(b"calls") + 1])


def test_repeated_runs_go_inline_with_the_same_replies(c: RawClient) -> None:
    before = inline_runs(c)
    assert_ok(run(c))  # no time known yet: queued, and measured there
    assert inline_runs(c) == before
    for i in range(RUNS - 1):
        assert_ok(c.execute("AI.TENSORSET", "in", "FLOAT", 2, 2, "VALUES", i, 1, 2, 3))
        assert_ok(run(c))
        assert values(c, "out") == [i - 1, 0, 1, 2]
    # A run may take longer than 200 us on a loaded machine and go to the queue once.
    assert inline_runs(c) - before >= (RUNS - 1) // 2
    assert calls(c) == RUNS
    # AI.MODELRUN (1.2's spelling) takes the same path.
    mid = inline_runs(c)
    assert_ok(c.execute("AI.MODELRUN", "m", "INPUTS", "in", "OUTPUTS", "out2"))
    assert values(c, "out2") == [RUNS - 3, 0, 1, 2]
    assert calls(c) == RUNS + 1
    assert inline_runs(c) - mid <= 1


def test_off_when_zero_and_the_setting_is_checked(c: RawClient) -> None:
    assert c.execute("AI.CONFIG", "GET", "INLINE_RUN_MAX_US") == 200
    assert_ok(c.execute("AI.CONFIG", "INLINE_RUN_MAX_US", 0))
    assert c.execute("AI.CONFIG", "GET", "INLINE_RUN_MAX_US") == 0
    assert info_field(c.execute("INFO", "MODULES"), "ai_inline_run_max_us") == "0"
    before = inline_runs(c)
    for _ in range(RUNS):
        assert_ok(run(c))
    assert inline_runs(c) == before
    assert values(c, "out") == [0, 1, 2, 3]
    bad = "ERR INLINE_RUN_MAX_US: expected microseconds, an integer from 0 to 100000"
    for value in (-1, 100001, "abc", "1.5"):
        assert_error(c.execute("AI.CONFIG", "INLINE_RUN_MAX_US", value), bad)
    assert c.execute("AI.CONFIG", "GET", "INLINE_RUN_MAX_US") == 0
    assert isinstance(c.execute("AI.CONFIG", "INLINE_RUN_MAX_US"), RespError)


def test_larger_input_than_the_latest_run_goes_to_the_queue(c: RawClient) -> None:
    for _ in range(5):
        assert_ok(run(c))
    big = list(range(128))
    assert_ok(c.execute("AI.TENSORSET", "in_big", "FLOAT", 64, 2, "VALUES", *big))
    before = inline_runs(c)
    assert_ok(run(c, "in_big", "out_big"))
    assert inline_runs(c) == before
    assert values(c, "out_big") == [v - 1 for v in big]


def test_a_failed_inline_run_answers_as_a_queued_one(c: RawClient) -> None:
    # INT32 [2, 2]: as many bytes as the latest FLOAT run, so it may go inline.
    assert_ok(c.execute("AI.TENSORSET", "in_int", "INT32", 2, 2, "VALUES", 1, 2, 3, 4))
    answers = {}
    for limit in (0, 200):
        assert_ok(c.execute("AI.CONFIG", "INLINE_RUN_MAX_US", limit))
        for _ in range(3):
            assert_ok(run(c))
        before = inline_runs(c)
        reply = run(c, "in_int", "out_int")
        assert isinstance(reply, RespError), reply
        answers[limit] = (str(reply), inline_runs(c) - before)
    assert answers[0][0] == answers[200][0]
    assert answers[0][1] == 0
    assert c.execute("EXISTS", "out_int") == 0
    info = c.execute("AI.INFO", "m")
    assert int(info[info.index(b"errors") + 1]) == 2


def test_batching_models_and_the_first_run_are_never_inline(c: RawClient) -> None:
    assert_ok(c.execute("AI.MODELSTORE", "mb", "ONNX", "CPU", "BATCHSIZE", 4, "BLOB",
                        em.onnx_batch_size_model()))
    before = inline_runs(c)
    for _ in range(10):
        assert_ok(c.execute("AI.MODELEXECUTE", "mb", "INPUTS", 1, "in", "OUTPUTS", 2, "bs", "y"))
    assert inline_runs(c) == before
    assert values(c, "y") == [2, 4, 6, 8]


def test_a_pipeline_runs_inline_at_most_its_first_request_of_a_pass(c: RawClient) -> None:
    for _ in range(3):
        assert_ok(run(c))
    before = inline_runs(c)
    n = 10
    c.sock.sendall(b"".join(encode_command("AI.MODELEXECUTE", "m", "INPUTS", 1, "in", "OUTPUTS", 1,
                                           f"out{i}") for i in range(n)))
    assert [c.read() for _ in range(n)] == ["OK"] * n
    for i in range(n):
        assert values(c, f"out{i}") == [0, 1, 2, 3]
    # The request after an inline one in the same pass is queued; the client then waits
    # for it, so at most every other request of the pipeline can be inline.
    assert inline_runs(c) - before <= (n + 1) // 2


@pytest.fixture(scope="module")
def one_worker(start_server: StartServer, tf_backend_path, onnx_backend_path) -> RedisServer:
    """THREADS_PER_QUEUE 1: a request behind the slow run waits for it (the default helper,
    engine/run_queue.c, would run it beside; tests/execution/test_helper_workers.py)."""
    return start_server(["TF", str(tf_backend_path), "ONNX", str(onnx_backend_path),
                         "THREADS_PER_QUEUE", "1"])


def test_a_busy_queue_keeps_requests_queued(one_worker: RedisServer, connect, slow_n) -> None:
    srv = one_worker
    c = connect(srv)
    em.calibrate_slow(c)  # stores `slow` here (the calibration itself is kept per process)
    assert_ok(c.execute("AI.CONFIG", "INLINE_RUN_MAX_US", 200))
    assert_ok(c.execute("AI.MODELSTORE", "m", "ONNX", "CPU", "BLOB", em.onnx_minus_one_model()))
    assert_ok(c.execute("AI.TENSORSET", "in", "FLOAT", 2, 2, "VALUES", 1, 2, 3, 4))
    for _ in range(3):
        assert_ok(run(c))
    before = inline_runs(c)
    other = RawClient(srv.port)
    try:
        with em.HeldQueue(srv.port, slow_n(0.6)) as hold:
            other.send("AI.MODELEXECUTE", "m", "INPUTS", 1, "in", "OUTPUTS", 1, "out_held")
            hold.wait_queued(2)  # the slow run and this request: the model waits its turn
            assert not other.pending()
        assert other.read() == "OK"
    finally:
        other.close()
    assert inline_runs(c) == before
    assert values(c, "out_held") == [0, 1, 2, 3]


def test_three_inline_runs_over_the_limit_keep_a_model_queued_for_a_second(
        c: RawClient, slow_n) -> None:
    # The slow TF graph (stored as `slow` by slow_n) lasts as long as its INT32 input says,
    # on inputs of the same size: a short run leads the decision to an inline run that
    # then takes longer than the limit, as a model slower on the main thread does.
    assert_ok(c.execute("AI.CONFIG", "INLINE_RUN_MAX_US", 20000))
    assert_ok(c.execute("AI.TENSORSET", "in_short", "INT32", "VALUES", 1))
    assert_ok(c.execute("AI.TENSORSET", "in_long", "INT32", "VALUES", slow_n(0.15)))

    def slow(inp: str) -> int:
        before = inline_runs(c)
        assert_ok(c.execute("AI.MODELEXECUTE", "slow", "INPUTS", 1, inp, "OUTPUTS", 1, "out_s"))
        return inline_runs(c) - before

    slow("in_short")
    assert slow("in_short") == 1  # a short latest run: inline
    for _ in range(3):
        assert slow("in_long") == 1  # decided by the short run before it; over the limit
        assert slow("in_short") == 0  # the latest run was over the limit: queued
    # Three over the limit in a row: queued, though every latest run is short again.
    assert slow("in_short") == 0
    assert slow("in_short") == 0
    time.sleep(1.1)
    assert slow("in_short") == 1  # a second later: tried inline again
    assert slow("in_short") == 1


def test_inline_outputs_reach_a_replica(c: RawClient, srv: RedisServer, module_path,
                                        onnx_backend_path) -> None:
    replica = RedisServer(module_path, ["ONNX", str(onnx_backend_path)])
    try:
        with RawClient(replica.port) as r:
            assert_ok(r.execute("REPLICAOF", "127.0.0.1", srv.port))
            assert wait_until(lambda: info_field(r.execute("INFO", "replication"),
                                                 "master_link_status") == "up", 20)
            for _ in range(3):
                assert_ok(run(c))
            before = inline_runs(c)
            for i in range(5):
                assert_ok(c.execute("AI.TENSORSET", "in", "FLOAT", 2, 2, "VALUES", i, i, i, i))
                assert_ok(run(c))
            assert inline_runs(c) > before
            assert c.execute("WAIT", 1, 5000) == 1
            assert [float(v) for v in r.execute("AI.TENSORGET", "out", "VALUES")] == [3.0] * 4
    finally:
        replica.stop()


def test_acl_user_may_run_only_its_keys_and_not_change_the_setting(c: RawClient,
                                                                  srv: RedisServer) -> None:
    for _ in range(3):
        assert_ok(run(c))
    assert_ok(c.execute("AI.TENSORSET", "secret", "FLOAT", 2, 2, "VALUES", 1, 2, 3, 4))
    with RawClient(srv.port) as u:
        assert_ok(u.execute("AUTH", "limited", "pw"))
        assert_ok(u.execute("AI.MODELEXECUTE", "m", "INPUTS", 1, "in", "OUTPUTS", 1, "out_u"))
        assert values(c, "out_u") == [0, 1, 2, 3]
        before = inline_runs(c)
        reply = u.execute("AI.MODELEXECUTE", "m", "INPUTS", 1, "secret", "OUTPUTS", 1, "out_s")
        assert isinstance(reply, RespError) and str(reply).startswith("NOPERM"), reply
        reply = u.execute("AI.MODELEXECUTE", "m", "INPUTS", 1, "in", "OUTPUTS", 1, "secret")
        assert isinstance(reply, RespError) and str(reply).startswith("NOPERM"), reply
        assert inline_runs(c) == before
        assert c.execute("EXISTS", "out_s") == 0
        # ai.config is allowed to this user, but not CONFIG SET's category (@admin): the
        # setting decides what may stall Redis's main thread, so it is an operator's.
        reply = u.execute("AI.CONFIG", "INLINE_RUN_MAX_US", 100000)
        assert isinstance(reply, RespError) and str(reply).startswith("NOPERM"), reply
    assert c.execute("AI.CONFIG", "GET", "INLINE_RUN_MAX_US") == 200


@pytest.mark.parametrize("args,want", [([], 0), (["INLINE_RUN_MAX_US", "0"], 0),
                                       (["INLINE_RUN_MAX_US", "50"], 50)])
def test_module_argument_and_the_default_of_0(module_path, onnx_backend_path, args,
                                              want) -> None:
    """Unset, the limit is 0 (every run queued, as RedisAI 1.2: core/config.h says why);
    the module argument sets it."""
    s = RedisServer(module_path, ["ONNX", str(onnx_backend_path), *args])
    try:
        with RawClient(s.port) as c:
            assert c.execute("AI.CONFIG", "GET", "INLINE_RUN_MAX_US") == want
            assert_ok(c.execute("AI.MODELSTORE", "m", "ONNX", "CPU", "BLOB",
                                em.onnx_minus_one_model()))
            assert_ok(c.execute("AI.TENSORSET", "in", "FLOAT", 2, 2, "VALUES", 1, 2, 3, 4))
            for _ in range(10):
                assert_ok(run(c))
            if want == 0:
                assert inline_runs(c) == 0
            else:
                # a run may take longer than 50 us on a loaded machine and stay queued
                assert inline_runs(c) >= 1
    finally:
        s.stop()


def test_a_bad_module_argument_fails_the_load(module_path) -> None:
    log = start_expecting_failure(module_path, ["INLINE_RUN_MAX_US", "-5"])
    assert "INLINE_RUN_MAX_US -5" in log


def test_isolated_backends_never_run_inline(module_path, onnx_backend_path) -> None:
    s = RedisServer(module_path, ["ISOLATE", "ONNX", "ONNX", str(onnx_backend_path),
                                  "INLINE_RUN_MAX_US", "200"])
    try:
        with RawClient(s.port) as c:
            assert c.execute("AI.CONFIG", "GET", "INLINE_RUN_MAX_US") == 200
            assert_ok(c.execute("AI.MODELSTORE", "m", "ONNX", "CPU", "BLOB",
                                em.onnx_minus_one_model()))
            assert_ok(c.execute("AI.TENSORSET", "in", "FLOAT", 2, 2, "VALUES", 1, 2, 3, 4))
            for _ in range(10):
                assert_ok(run(c))
            assert values(c, "out") == [0, 1, 2, 3]
            assert inline_runs(c) == 0
    finally:
        s.stop()
