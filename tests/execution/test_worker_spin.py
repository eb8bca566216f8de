"""WORKER_SPIN_US (module/engine/run_queue.c, docs/performance.md "Worker spin"): a run-queue
worker with nothing to do waits for the next request, yielding the CPU, for up to this many
microseconds before it sleeps, when at most one client waits for a queued run.

* the default (200) shows in INFO and AI.CONFIG GET; 0 and the maximum are accepted, values
  outside 0..10000 fail the load;
* with the spin off, at the default and at its maximum, queued runs of a lone client, of
  clients at once and after the worker went to sleep all answer what they should (a lost
  wake-up would hang here);
* the spin happens, and ends: with WORKER_SPIN_US 10000 a lone client's requests 20 ms apart
  keep the worker running or waiting to run for about 10 ms each, with 0 they do not, and never
  for the whole run of requests (/proc/<pid>/task/*/schedstat, which a loaded machine does not
  skew as it skews CPU time);
* the main thread spins too (engine/main_spin.c): after a lone client's run is handed off or
  answered, and after an inline run, `ai_main_spin_passes` counts the event loop's passes kept
  from sleeping; with 0 there are none, and the spin ends; a server without
  RedisModule_EventLoopAdd (Redis 6.2) runs the same requests with no main-thread spin;
* only a lone client makes anything spin: the same client's runs one after the other, not
  clients taking turns;
* while the main thread spins, workers only queue their finished clients (engine/completion.h)
  and its passes unblock them (`ai_completions` grows, `ai_completion_wakeups` does not), every
  reply still right; a client gone before its run ends is unblocked as well and the server
  goes on; with 0, and on Redis 6.2 (no main-thread spin), a lone client's every finish is
  unblocked by its worker, a wake-up each;
* a restricted ACL user (no @admin, key patterns) runs queued models on its keys only, reads
  the setting with `AI.CONFIG GET` as it reads the others, cannot load code, and a user
  without `ai.config` cannot read it.
"""
from __future__ import annotations

import time

import pytest

import engine_models as em
from helpers import assert_ok, in_threads, info_field, runnable_seconds_by_thread, wait_until
from redis_server import RedisServer, start_expecting_failure
from resp import RawClient, RespError

pytestmark = pytest.mark.inprocess_only("the in-process run queue's workers")


def start(module_path, onnx_backend_path, *args: str) -> RedisServer:
    # INLINE_RUN_MAX_US 0: every run goes through the queue and its worker
    return RedisServer(module_path, ["ONNX", str(onnx_backend_path), "INLINE_RUN_MAX_US", "0",
                                     *args])


def store(c: RawClient) -> None:
    assert_ok(c.execute("AI.MODELSTORE", "m", "ONNX", "CPU", "BLOB", em.onnx_minus_one_model()))


def run_and_check(c: RawClient, i: int) -> None:
    assert_ok(c.execute("AI.TENSORSET", f"in{i}", "FLOAT", 1, 2, "VALUES", i, 2 * i))
    assert_ok(c.execute("AI.MODELEXECUTE", "m", "INPUTS", 1, f"in{i}", "OUTPUTS", 1, f"out{i}"))
    assert [float(v) for v in c.execute("AI.TENSORGET", f"out{i}", "VALUES")] == [i - 1, 2 * i - 1]




def test_the_default_shows_in_info_and_config_get(module_path, onnx_backend_path) -> None:
    s = start(module_path, onnx_backend_path)
    try:
        with RawClient(s.port) as c:
            assert int(info_field(c.execute("INFO", "MODULES"), "ai_worker_spin_us")) == 200
            assert c.execute("AI.CONFIG", "GET", "WORKER_SPIN_US") == 200
    finally:
        s.stop()


@pytest.mark.parametrize("value", ["-1", "10001", "soon"])
def test_a_bad_value_fails_the_load(module_path, value: str) -> None:
    log = start_expecting_failure(module_path, ["WORKER_SPIN_US", value])
    assert f"ERR error processing argument: WORKER_SPIN_US {value}" in log


@pytest.mark.parametrize("spin", [None, "0", "10000"])
def test_queued_runs_answer_alone_together_and_after_sleeping(module_path, onnx_backend_path,
                                                              spin: str | None) -> None:
    s = start(module_path, onnx_backend_path, *(["WORKER_SPIN_US", spin] if spin else []))
    try:
        with RawClient(s.port) as c:
            assert c.execute("AI.CONFIG", "GET", "WORKER_SPIN_US") == int(spin or 200)
            store(c)
            for i in range(200):   # a lone client: the worker spins between its requests
                run_and_check(c, i)

            def client(k: int) -> None:
                with RawClient(s.port) as other:
                    for i in range(40):
                        run_and_check(other, 1000 * (k + 1) + i)

            in_threads(16, client)
            time.sleep(0.05)   # past any spin: the worker sleeps, the next push wakes it
            run_and_check(c, 7)
            assert int(info_field(c.execute("INFO", "MODULES"), "ai_inline_runs")) == 0
    finally:
        s.stop()


def spin_measured(module_path, onnx_backend_path, spin: str,
                  *args: str) -> tuple[dict[int, float], float, int, int]:
    """A lone client's 25 requests 20 ms apart: the seconds each thread ran or waited to run
    meanwhile, the wall time, main_spin_passes and the main thread's id (Redis's pid)."""
    s = start(module_path, onnx_backend_path, "WORKER_SPIN_US", spin, *args)
    try:
        with RawClient(s.port) as c:
            store(c)
            run_and_check(c, 1)
            time.sleep(0.05)
            before, start_s = runnable_seconds_by_thread(s.proc.pid), time.monotonic()
            for i in range(25):
                run_and_check(c, i)
                time.sleep(0.02)   # longer than the spin: each ends in sleep
            after = runnable_seconds_by_thread(s.proc.pid)
            wall = time.monotonic() - start_s
            fields = c.execute("INFO", "MODULES")
            passes = int(info_field(fields, "ai_main_spin_passes"))
            if spin == "0":   # the main thread slept: the worker unblocked each finish
                completions = int(info_field(fields, "ai_completions"))
                assert int(info_field(fields, "ai_completion_wakeups")) == completions > 0
            return ({tid: sec - before.get(tid, 0.0) for tid, sec in after.items()}, wall,
                    passes, s.proc.pid)
    finally:
        s.stop()


def test_the_spin_happens_and_ends(module_path, onnx_backend_path, server_facts) -> None:
    off, _, off_passes, off_main = spin_measured(module_path, onnx_backend_path, "0")
    on, wall, on_passes, on_main = spin_measured(module_path, onnx_backend_path, "10000")
    # 25 spins of up to 10 ms: about 0.25 s more that the worker runs or waits to run (its
    # CPU time alone depends on the machine's load), and each spin ends: a thread that spun
    # on would be runnable for the whole run of requests
    workers_off = sum(sec for tid, sec in off.items() if tid != off_main)
    workers_on = sum(sec for tid, sec in on.items() if tid != on_main)
    assert workers_on - workers_off > 0.1, (off, on, wall)
    assert max(on.values()) < 0.8 * wall, (on, wall)
    assert off_passes == 0, off_passes
    if not server_facts.has_api("RedisModule_EventLoopAdd"):
        assert on_passes == 0, on_passes   # Redis 6.2: the main thread cannot spin
        return
    # the main thread too (engine/main_spin.c): after each hand-off and each reply
    assert on_passes > 25, on_passes
    assert on[on_main] - off[off_main] > 0.1, (off, on, wall)


def test_the_main_thread_spins_after_inline_runs_too(module_path, onnx_backend_path,
                                                     server_facts) -> None:
    spins = server_facts.has_api("RedisModule_EventLoopAdd")   # not on Redis 6.2
    s = RedisServer(module_path, ["ONNX", str(onnx_backend_path), "INLINE_RUN_MAX_US", "10000"])
    try:
        with RawClient(s.port) as c:
            store(c)
            for i in range(5):
                run_and_check(c, i)
            fields = c.execute("INFO", "MODULES")
            # the first is queued (no time known); the next may find the worker still
            # counted busy for a moment after its finish (RunQueue_Idle): queued too
            assert int(info_field(fields, "ai_inline_runs")) >= 3
            passes = int(info_field(fields, "ai_main_spin_passes"))
            assert passes > 0 if spins else passes == 0, (spins, passes)
            time.sleep(0.05)   # past the spin: the loop sleeps again, no pass is counted
            first = int(info_field(c.execute("INFO", "MODULES"), "ai_main_spin_passes"))
            time.sleep(0.05)
            assert int(info_field(c.execute("INFO", "MODULES"), "ai_main_spin_passes")) == first
    finally:
        s.stop()


def test_clients_taking_turns_do_not_spin(module_path, onnx_backend_path, server_facts) -> None:
    spins = server_facts.has_api("RedisModule_EventLoopAdd")   # not on Redis 6.2
    s = start(module_path, onnx_backend_path, "WORKER_SPIN_US", "10000")
    try:
        with RawClient(s.port) as a, RawClient(s.port) as b:
            store(a)

            def counters() -> int:
                return int(info_field(a.execute("INFO", "MODULES"), "ai_main_spin_passes"))

            before = counters()
            for i in range(20):   # one waits at a time, but never the same one twice
                run_and_check(a if i % 2 else b, i)
            time.sleep(0.05)
            assert counters() == before
            for i in range(5):    # the same client again and again: a lone client
                run_and_check(a, i)
            after = counters()
            assert (after > before) if spins else after == before, (before, after)
    finally:
        s.stop()


def completions(c: RawClient) -> tuple[int, int]:
    """Finished clients, and those a worker unblocked itself (a wake-up each)."""
    fields = c.execute("INFO", "MODULES")
    return (int(info_field(fields, "ai_completions")),
            int(info_field(fields, "ai_completion_wakeups")))


def test_a_spinning_main_thread_takes_finished_runs_without_a_wake_up(
        module_path, onnx_backend_path, tf_backend_path, server_facts) -> None:
    spins = server_facts.has_api("RedisModule_EventLoopAdd")   # not on Redis 6.2
    s = RedisServer(module_path, ["ONNX", str(onnx_backend_path), "TF", str(tf_backend_path),
                                  "INLINE_RUN_MAX_US", "0", "WORKER_SPIN_US", "10000"])
    try:
        with RawClient(s.port) as c:
            store(c)
            before = completions(c)
            for i in range(25):
                run_and_check(c, i)
            after = completions(c)
            assert after[0] - before[0] == 25, (before, after)
            if not spins:   # Redis 6.2: no spin, the worker unblocks each finish
                assert after[1] - before[1] == 25, (before, after)
            else:
                # back to back, each run within the 10 ms spin of its own start: all but
                # maybe the first (a worker that answered before the spin began) queued for
                # the spinning main thread, without a wake-up
                assert after[1] - before[1] <= 5, (before, after)
            # a client that goes away while its run is on the worker: the unblock still
            # comes (from the main thread's pass) and frees the request
            slow_n = em.calibrate_slow(c)
            assert_ok(c.execute("AI.TENSORSET", "n_short", "INT32", "VALUES", slow_n(0.003)))
            before = completions(c)

            def slow_calls() -> int:
                info = c.execute("AI.INFO", "slow")
                return int(info[info.index(b"calls") + 1])

            for k in range(5):
                gone = RawClient(s.port)
                # its first run makes it the lone client (the same client twice in a row)
                assert_ok(gone.execute("AI.MODELEXECUTE", "slow", "INPUTS", 1, "n_short",
                                       "OUTPUTS", 1, "out_gone"))
                done = slow_calls()
                gone.send("AI.MODELEXECUTE", "slow", "INPUTS", 1, "n_short", "OUTPUTS", 1,
                          "out_gone")
                time.sleep(0.0005)   # the command read, its run started
                gone.close()
                # Redis counts a gone client unblocked at once; its run goes on: wait for it
                # alone, as a second client waiting would end the spin
                assert wait_until(lambda: slow_calls() > done, timeout=10)
                run_and_check(c, k)
            after = completions(c)
            assert after[0] >= before[0] + 10, (before, after)
            assert c.execute("PING") == "PONG"
    finally:
        s.stop()


def test_a_restricted_user_runs_its_keys_reads_the_setting_and_loads_nothing(
        module_path, onnx_backend_path, server_facts) -> None:
    if not server_facts.checks_acl:
        pytest.skip("this server cannot check a module caller's ACL (Redis 6.2)")
    s = start(module_path, onnx_backend_path)
    try:
        with RawClient(s.port) as c, RawClient(s.port) as u, RawClient(s.port) as v:
            store(c)
            assert_ok(c.execute("ACL", "SETUSER", "app", "on", ">pw", "-@all", "+ai.config",
                                "+ai.modelexecute", "+ai.tensorset", "+ai.tensorget", "~in*",
                                "~out*", "~m"))
            assert_ok(c.execute("ACL", "SETUSER", "plain", "on", ">pw", "-@all",
                                "+ai.tensorget", "~*"))
            assert_ok(c.execute("AI.TENSORSET", "secret", "FLOAT", 1, 2, "VALUES", 5, 6))
            assert_ok(u.execute("AUTH", "app", "pw"))
            for i in range(20):
                run_and_check(u, i)
            reply = u.execute("AI.MODELEXECUTE", "m", "INPUTS", 1, "secret", "OUTPUTS", 1,
                              "out_s")
            assert isinstance(reply, RespError) and str(reply).startswith("NOPERM"), reply
            assert c.execute("EXISTS", "out_s") == 0
            assert u.execute("AI.CONFIG", "GET", "WORKER_SPIN_US") == 200
            reply = u.execute("AI.CONFIG", "LOADBACKEND", "ONNX", str(onnx_backend_path))
            assert isinstance(reply, RespError) and str(reply).startswith("NOPERM"), reply
            assert_ok(v.execute("AUTH", "plain", "pw"))
            reply = v.execute("AI.CONFIG", "GET", "WORKER_SPIN_US")
            assert isinstance(reply, RespError) and str(reply).startswith("NOPERM"), reply
    finally:
        s.stop()
