"""Isolated model runs in flight (issue 22 item 3, docs/isolation.md "Runs in flight").

A run-queue worker hands a model run to its backend host and takes the next request at once,
up to ISO_PIPELINE_DEPTH (8) runs in flight per worker; the host serves them one after another
and its answers complete the requests. The fault-injection backend (tests/fault_backend/) makes
the host's one run hang (magic 3), so that the runs sent behind it are provably in flight
(INFO's `inflight`), and then the host is killed, timed out, or the model deleted: the run that
was running gets the failure table's error, the runs behind it (never started) run again on
the new host, nothing hangs and nothing is answered twice. No timing is asserted: every wait
is for a condition, with a generous deadline.
"""
from __future__ import annotations

import os
import pathlib
import signal
import threading
import time
from typing import Iterator

import numpy as np
import pytest

from fault_injection import fault_env
from helpers import assert_ok, isolated_host
from redis_server import RedisServer
from resp import RawClient, RespError

HANG = 3  # fault backend magic: the run never returns
DEPTH = 8  # ISO_PIPELINE_DEPTH


def _info(c: RawClient) -> dict:
    return isolated_host(c.execute("INFO", "MODULES"))


def _wait(cond, what: str, c: RawClient, timeout: float = 60) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        info = _info(c)
        if cond(info):
            return info
        time.sleep(0.01)
    raise AssertionError(f"{what}: {_info(c)}")


def _ready(c: RawClient, old_pid: int | None = None) -> dict:
    return _wait(lambda i: i["state"] == "ready" and int(i["pid"]) and int(i["pid"]) != old_pid
                 and i.get("recreating", "0") == "0",
                 "host not ready", c)


def _server(module_path: pathlib.Path, so: pathlib.Path, timeout_ms: int) -> RedisServer:
    s = RedisServer(module_path, ["ISOLATE", "ONNX", "THREADS_PER_QUEUE", "1",
                                  "MODEL_EXECUTION_TIMEOUT", str(timeout_ms)], env=fault_env())
    with RawClient(s.port) as c:
        assert_ok(c.execute("AI.CONFIG", "LOADBACKEND", "ONNX", str(so)))
        # Runs are measured, not inlined on the main thread: every run goes to the queue.
        assert_ok(c.execute("AI.CONFIG", "INLINE_RUN_MAX_US", "0"))
    return s


@pytest.fixture
def slow_timeout(module_path: pathlib.Path, fault_backend: pathlib.Path) -> Iterator[RedisServer]:
    """A run may take a minute: the tests kill the host themselves."""
    s = _server(module_path, fault_backend, 60000)
    yield s
    s.stop()


def _set(c: RawClient, key: str, values: list[float]) -> None:
    assert_ok(c.execute("AI.TENSORSET", key, "FLOAT", len(values), "VALUES", *values))


def _values(c: RawClient, key: str) -> list[float]:
    return [float(v) for v in c.execute("AI.TENSORGET", key, "VALUES")]


class Call(threading.Thread):
    """One MODELEXECUTE on a connection of its own; the reply, then the output's values."""

    def __init__(self, port: int, model: str, inp: str, values: list[float], out: str) -> None:
        super().__init__(daemon=True)
        self.port, self.model, self.inp, self.values, self.out = port, model, inp, values, out
        self.reply: object = None
        self.got: list[float] | None = None
        self.at = 0.0  # time.monotonic() of the reply

    def run(self) -> None:
        with RawClient(self.port) as cl:
            _set(cl, self.inp, self.values)
            self.reply = cl.execute("AI.MODELEXECUTE", self.model, "INPUTS", 1, self.inp,
                                    "OUTPUTS", 1, self.out)
            self.at = time.monotonic()
            if self.reply == "OK":
                self.got = _values(cl, self.out)


def _hang_then_queue(s: RedisServer, c: RawClient, hang_model: str, model: str,
                     behind: int) -> tuple[Call, list[Call]]:
    """A hanging run, then `behind` runs sent to the host behind it: returns once all are
    in flight on the host (INFO inflight)."""
    hung = Call(s.port, hang_model, "hang_in", [HANG, 0], "hang_out")
    hung.start()
    _wait(lambda i: int(i["inflight"]) == 1, "the hanging run is not in the host", c)
    calls = [Call(s.port, model, f"in{k}", [100.0 + k, -k], f"out{k}") for k in range(behind)]
    for t in calls:
        t.start()
    _wait(lambda i: int(i["inflight"]) == 1 + behind, "runs not in flight behind it", c)
    return hung, calls


def _blocked(c: RawClient) -> int:
    text = c.execute("INFO", "CLIENTS")
    text = text.decode() if isinstance(text, bytes) else text
    return int(text.split("blocked_clients:", 1)[1].split()[0])


def _join(*threads: threading.Thread) -> None:
    for t in threads:
        t.join(90)
        assert not t.is_alive(), "a request hangs"


def _check_behind(calls: list[Call]) -> None:
    for k, t in enumerate(calls):
        assert t.reply == "OK", (k, t.reply)
        assert t.got == [100.0 + k, -k], (k, t.got)


def test_many_clients_get_their_own_outputs(slow_timeout: RedisServer) -> None:
    """16 clients, each its own input, on two models of one host, plain runs and DAGs whose
    intermediate comes from the host: every reply is the client's own."""
    s = slow_timeout
    with RawClient(s.port) as c:
        for m in ("a", "b"):
            assert_ok(c.execute("AI.MODELSTORE", m, "ONNX", "CPU", "BLOB", "identity"))
    errors: list[str] = []

    def client(n: int) -> None:
        with RawClient(s.port) as cl:
            for i in range(40):
                vals = [float(10 + n * 1000 + i), float(n)]
                inp, out = f"x{n}", f"y{n}"
                _set(cl, inp, vals)
                if i % 4 == 3:
                    r = cl.execute("AI.DAGEXECUTE", "LOAD", 1, inp, "PERSIST", 1, out, "|>",
                                   "AI.MODELEXECUTE", "a", "INPUTS", 1, inp, "OUTPUTS", 1, "t",
                                   "|>", "AI.MODELEXECUTE", "b", "INPUTS", 1, "t", "OUTPUTS", 1,
                                   out)
                    ok = isinstance(r, list) and all(x == "OK" for x in r)
                else:
                    r = cl.execute("AI.MODELEXECUTE", "ab"[i % 2], "INPUTS", 1, inp,
                                   "OUTPUTS", 1, out)
                    ok = r == "OK"
                if not ok:
                    errors.append(f"client {n} run {i}: {r}")
                    continue
                got = _values(cl, out)
                if got != vals:
                    errors.append(f"client {n} run {i}: {got} for {vals}")

    threads = [threading.Thread(target=client, args=(n,), daemon=True) for n in range(16)]
    for t in threads:
        t.start()
    _join(*threads)
    assert not errors, errors[:5]
    with RawClient(s.port) as c:
        assert int(_info(c)["inflight"]) == 0
        assert int(_info(c)["restarts"]) == 0


def test_runs_behind_a_hung_run_are_in_flight_on_the_host(slow_timeout: RedisServer) -> None:
    """With one worker, DEPTH - 1 runs go to the host behind a run that does not return:
    the worker did not wait. A further run waits in the core's queue."""
    s = slow_timeout
    with RawClient(s.port) as c:
        assert_ok(c.execute("AI.MODELSTORE", "m", "ONNX", "CPU", "BLOB", "identity"))
        pid = int(_ready(c)["pid"])
        hung, calls = _hang_then_queue(s, c, "m", "m", DEPTH - 1)
        extra = Call(s.port, "m", "in_extra", [7.5, 8.5], "out_extra")
        extra.start()
        # The bound: once the fifth client is blocked, its run waits in the core's queue.
        deadline = time.monotonic() + 60
        while _blocked(c) < DEPTH + 1 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert _blocked(c) == DEPTH + 1
        assert int(_info(c)["inflight"]) == DEPTH
        os.kill(pid, signal.SIGKILL)
        _join(hung, *calls, extra)
        assert isinstance(hung.reply, RespError), hung.reply
        assert str(hung.reply).startswith("ERR ONNX backend process exited (signal 9 SIGKILL"), \
            hung.reply
        assert str(hung.reply).endswith("while running m"), hung.reply
        _check_behind(calls)
        assert extra.reply == "OK" and extra.got == [7.5, 8.5], (extra.reply, extra.got)
        info = _ready(c, pid)
        assert int(info["restarts"]) == 1 and int(info["inflight"]) == 0


def test_an_answer_is_taken_when_it_arrives(slow_timeout: RedisServer) -> None:
    """At the bound of runs in flight, the worker is woken by the oldest run's answer, not by
    a later one: a short run second in line is answered about when it is done, a whole slow
    run before the first slow run behind it (it used to sleep until half the runs in flight
    were answered, and was answered with the fourth: issue 44, defect 5). An order of
    replies, with half a slow run of margin, not a time."""
    s = slow_timeout
    slow_ms = 1500  # long enough for every run to be in flight before the first ends
    with RawClient(s.port) as c:
        assert_ok(c.execute("AI.MODELSTORE", "slow", "ONNX", "CPU", "BLOB",
                            f"identity\nrun-ms {slow_ms}"))
        assert_ok(c.execute("AI.MODELSTORE", "short", "ONNX", "CPU", "BLOB", "identity"))
        _ready(c)
        first = Call(s.port, "slow", "in_first", [10.5, 2.0], "out_first")  # no magic value
        first.start()
        _wait(lambda i: int(i["inflight"]) == 1, "the first slow run is not in the host", c)
        short = Call(s.port, "short", "in_short", [20.5, 4.0], "out_short")
        short.start()
        _wait(lambda i: int(i["inflight"]) == 2, "the short run is not in the host", c)
        behind = [Call(s.port, "slow", f"in{k}", [100.0 + k, -k], f"out{k}")
                  for k in range(DEPTH - 2)]
        for t in behind:
            t.start()
        _wait(lambda i: int(i["inflight"]) == DEPTH, "runs not in flight behind it", c)
        _join(first, short, *behind)
        assert first.reply == "OK" and short.reply == "OK", (first.reply, short.reply)
        assert short.got == [20.5, 4.0]
        _check_behind(behind)
        after_short = min(t.at for t in behind) - short.at
        assert after_short > slow_ms / 2000, \
            f"the short run was answered {after_short * 1000:.0f} ms before the next slow one"


def test_host_crash_with_runs_in_flight(slow_timeout: RedisServer) -> None:
    """The host dies with a run running and three behind it: the running one gets the exit
    error; the three, never started, run on the new host and answer right; each client is
    answered exactly once (its connection is in step: a second reply would be read as the
    answer to its TENSORGET)."""
    s = slow_timeout
    with RawClient(s.port) as c:
        assert_ok(c.execute("AI.MODELSTORE", "m", "ONNX", "CPU", "BLOB", "identity"))
        assert_ok(c.execute("SET", "plain", "kept"))
        pid = int(_ready(c)["pid"])
        hung, calls = _hang_then_queue(s, c, "m", "m", 3)
        os.kill(pid, signal.SIGKILL)
        _join(hung, *calls)
        assert str(hung.reply).startswith("ERR ONNX backend process exited (signal 9 SIGKILL")
        _check_behind(calls)
        assert c.execute("GET", "plain") in (b"kept", "kept")
        assert s.alive()


def test_clients_killed_while_their_runs_are_in_flight(slow_timeout: RedisServer) -> None:
    """A request's life (docs/architecture.md): clients killed while their runs are handed to
    the host, one running (hung) and one behind it. The host's death fails the first and
    sends the second back to the queue; both DAGs finish and are freed with nothing stored
    and nothing left blocked, and the client behind them is answered right."""
    s = slow_timeout
    with RawClient(s.port) as c:
        assert_ok(c.execute("AI.MODELSTORE", "m", "ONNX", "CPU", "BLOB", "identity"))
        pid = int(_ready(c)["pid"])
        victims = [RawClient(s.port) for _ in range(2)]
        try:
            ids = [v.execute("CLIENT", "ID") for v in victims]
            _set(victims[0], "v_hang", [HANG, 0])
            _set(victims[1], "v_in", [5.5, 6.5])
            victims[0].send("AI.MODELEXECUTE", "m", "INPUTS", 1, "v_hang", "OUTPUTS", 1, "v0")
            _wait(lambda i: int(i["inflight"]) == 1, "the hanging run is not in the host", c)
            victims[1].send("AI.MODELEXECUTE", "m", "INPUTS", 1, "v_in", "OUTPUTS", 1, "v1")
            _wait(lambda i: int(i["inflight"]) == 2, "the run is not in flight behind it", c)
            behind = Call(s.port, "m", "in_b", [1.5, 2.5], "out_b")
            behind.start()
            _wait(lambda i: int(i["inflight"]) == 3, "the third run is not in flight", c)
            for vid in ids:
                assert c.execute("CLIENT", "KILL", "ID", vid) == 1
        finally:
            for v in victims:
                v.close()
        os.kill(pid, signal.SIGKILL)
        _join(behind)
        assert behind.reply == "OK" and behind.got == [1.5, 2.5], (behind.reply, behind.got)
        deadline = time.monotonic() + 30
        while _blocked(c) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert _blocked(c) == 0
        assert c.execute("EXISTS", "v0", "v1") == 0
        assert s.alive() and c.execute("PING") == "PONG"


def test_runs_sent_back_to_the_queue_keep_their_order(slow_timeout: RedisServer) -> None:
    """Runs that never started when their host died go back to the run queue in the order
    they were sent, ahead of later requests: each writes the same key, so the key ends with
    the last one's value."""
    s = slow_timeout
    with RawClient(s.port) as c:
        assert_ok(c.execute("AI.MODELSTORE", "m", "ONNX", "CPU", "BLOB", "identity"))
        pid = int(_ready(c)["pid"])
        hung = Call(s.port, "m", "hang_in", [HANG, 0], "hang_out")
        hung.start()
        _wait(lambda i: int(i["inflight"]) == 1, "the hanging run is not in the host", c)
        calls = []
        for k in range(5):
            t = Call(s.port, "m", f"in{k}", [100.0 + k, -k], "same")
            t.start()
            _wait(lambda i, n=k: int(i["inflight"]) == 2 + n, "runs not in flight behind it", c)
            calls.append(t)
        os.kill(pid, signal.SIGKILL)
        _join(hung, *calls)
        assert all(t.reply == "OK" for t in calls), [t.reply for t in calls]
        assert _values(c, "same") == [104.0, -4.0]


def test_timeout_with_runs_in_flight(module_path: pathlib.Path,
                                     fault_backend: pathlib.Path) -> None:
    """The running run passes MODEL_EXECUTION_TIMEOUT: the host is killed, that run gets the
    timeout's exit error and the runs behind it run on the new host. Their own deadlines
    start when the host can start them, so none of them is counted as timed out."""
    s = _server(module_path, fault_backend, 3000)
    try:
        with RawClient(s.port) as c:
            assert_ok(c.execute("AI.MODELSTORE", "m", "ONNX", "CPU", "BLOB", "identity"))
            pid = int(_ready(c)["pid"])
            hung, calls = _hang_then_queue(s, c, "m", "m", 3)
            _join(hung, *calls)
            assert str(hung.reply) == ("ERR ONNX backend process exited (killed after m ran "
                                       "past MODEL_EXECUTION_TIMEOUT (3000 ms)) while running m"), \
                hung.reply
            _check_behind(calls)
            info = _ready(c, pid)
            assert info["last_exit"] == "killed_timeout"
    finally:
        s.stop()


def test_model_deleted_while_its_runs_are_in_flight(slow_timeout: RedisServer) -> None:
    """A model's key is deleted while three of its runs are in flight behind a hung run of
    another model: the runs hold the model, so they complete (after the restart, on the new
    host, which re-created it from its blob), and only then is it freed."""
    s = slow_timeout
    with RawClient(s.port) as c:
        assert_ok(c.execute("AI.MODELSTORE", "h", "ONNX", "CPU", "BLOB", "identity"))
        assert_ok(c.execute("AI.MODELSTORE", "m", "ONNX", "CPU", "BLOB", "identity"))
        pid = int(_ready(c)["pid"])
        hung, calls = _hang_then_queue(s, c, "h", "m", 3)
        assert_ok(c.execute("AI.MODELDEL", "m"))
        assert c.execute("EXISTS", "m") == 0
        os.kill(pid, signal.SIGKILL)
        _join(hung, *calls)
        assert str(hung.reply).endswith("while running h"), hung.reply
        _check_behind(calls)
        _ready(c, pid)
        r = c.execute("AI.MODELEXECUTE", "m", "INPUTS", 1, "in0", "OUTPUTS", 1, "o")
        assert isinstance(r, RespError), r
        _set(c, "z", [11, 12])
        assert c.execute("AI.MODELEXECUTE", "h", "INPUTS", 1, "z", "OUTPUTS", 1, "o") == "OK"
        assert _values(c, "o") == [11.0, 12.0]


def test_model_deleted_with_runs_in_flight_on_a_live_host(slow_timeout: RedisServer) -> None:
    """Runs of a model answered in turn while the worker hands them off, then the model is
    deleted and stored again under the same key: the new model runs, on the same host."""
    s = slow_timeout
    with RawClient(s.port) as c:
        assert_ok(c.execute("AI.MODELSTORE", "m", "ONNX", "CPU", "BLOB", "identity"))
        _set(c, "x", [21, 22])
        for _ in range(DEPTH * 2):
            assert c.execute("AI.MODELEXECUTE", "m", "INPUTS", 1, "x", "OUTPUTS", 1, "y") == "OK"
        assert_ok(c.execute("AI.MODELDEL", "m"))
        assert_ok(c.execute("AI.MODELSTORE", "m", "ONNX", "CPU", "BLOB", "identity"))
        assert c.execute("AI.MODELEXECUTE", "m", "INPUTS", 1, "x", "OUTPUTS", 1, "y") == "OK"
        assert _values(c, "y") == [21.0, 22.0]
        assert int(_info(c)["restarts"]) == 0


def test_large_outputs_are_used_in_place_and_copied_into_keys(slow_timeout: RedisServer) -> None:
    """An output over 1 MiB comes back in a sealed region the core adopts without a copy: a
    DAG passes it to the next op and replies it from there; stored under a key it is copied
    into Redis's memory (MEMORY USAGE counts it) and stays intact when the host that wrote the
    region dies."""
    s = slow_timeout
    with RawClient(s.port) as c:
        assert_ok(c.execute("AI.MODELSTORE", "m", "ONNX", "CPU", "BLOB", "identity"))
        n = 600 * 600  # 1.44 MB of FLOAT
        data = (np.arange(n, dtype=np.float32) % 1000 + 10).astype(np.float32)
        assert_ok(c.execute("AI.TENSORSET", "big", "FLOAT", 600, 600, "BLOB", data.tobytes()))
        r = c.execute("AI.DAGEXECUTE", "LOAD", 1, "big", "PERSIST", 1, "kept", "|>",
                      "AI.MODELEXECUTE", "m", "INPUTS", 1, "big", "OUTPUTS", 1, "t", "|>",
                      "AI.MODELEXECUTE", "m", "INPUTS", 1, "t", "OUTPUTS", 1, "kept", "|>",
                      "AI.TENSORGET", "t", "BLOB")
        assert isinstance(r, list) and r[0] == "OK" and r[1] == "OK", r[:2]
        assert np.frombuffer(bytes(r[2]), np.float32).tolist() == data.tolist()
        assert int(c.execute("MEMORY", "USAGE", "kept")) >= n * 4
        pid = int(_ready(c)["pid"])
        os.kill(pid, signal.SIGKILL)
        _ready(c, pid)
        got = np.frombuffer(bytes(c.execute("AI.TENSORGET", "kept", "BLOB")), np.float32)
        assert got.tolist() == data.tolist()


def _counts(c: RawClient) -> tuple[int, int]:
    info = _info(c)
    return int(info["outputs_in_place"]), int(info["outputs_copied"])


def test_arena_outputs_are_used_in_place_while_their_part_is_pinned(
        slow_timeout: RedisServer) -> None:
    """Outputs of 16 KiB to 1 MiB come back in the host's arena, in their request's part: a DAG
    uses the first ISO_ARENA_PINS_MAX (8) in place, each pinning its part so that no later run
    is sent with it, and copies the rest: of twenty runs in one DAG, the last twelve are sent
    with the parts left free while eight stay pinned, and every output keeps its own run's
    values. A small output is copied, as before."""
    s = slow_timeout
    n_ops, n = 20, 16 * 1024  # 64 KiB of FLOAT each
    with RawClient(s.port) as c:
        assert_ok(c.execute("AI.MODELSTORE", "m", "ONNX", "CPU", "BLOB", "identity"))
        # Not whole numbers: a whole first value in 1-20 is one of the fault backend's magics.
        datas = [np.arange(n, dtype=np.float32) + np.float32(1000 * (i + 1) + 0.25)
                 for i in range(n_ops)]
        for i, d in enumerate(datas):
            assert_ok(c.execute("AI.TENSORSET", f"x{i}", "FLOAT", n, "BLOB", d.tobytes()))
        before = _counts(c)
        cmd: list = ["AI.DAGEXECUTE", "LOAD", n_ops, *[f"x{i}" for i in range(n_ops)]]
        for i in range(n_ops):
            cmd += ["|>", "AI.MODELEXECUTE", "m", "INPUTS", 1, f"x{i}", "OUTPUTS", 1, f"t{i}"]
        for i in range(n_ops):
            cmd += ["|>", "AI.TENSORGET", f"t{i}", "BLOB"]
        r = c.execute(*cmd)
        assert isinstance(r, list) and r[:n_ops] == ["OK"] * n_ops, r[:n_ops]
        for i in range(n_ops):
            got = np.frombuffer(bytes(r[n_ops + i]), np.float32)
            assert got.tolist() == datas[i].tolist(), f"output {i}"
        in_place, copied = _counts(c)
        assert (in_place - before[0], copied - before[1]) == (8, n_ops - 8)
        # The pins went with the DAG: a next DAG's outputs are used in place again.
        r = c.execute("AI.DAGEXECUTE", "LOAD", 1, "x3", "|>",
                      "AI.MODELEXECUTE", "m", "INPUTS", 1, "x3", "OUTPUTS", 1, "t", "|>",
                      "AI.TENSORGET", "t", "BLOB")
        assert np.frombuffer(bytes(r[1]), np.float32).tolist() == datas[3].tolist()
        assert _counts(c) == (in_place + 1, copied)
        # 1 KiB: copied, and not counted.
        _set(c, "small", [v + 0.5 for v in range(256)])
        assert c.execute("AI.MODELEXECUTE", "m", "INPUTS", 1, "small", "OUTPUTS", 1, "o") == "OK"
        assert _values(c, "o") == [v + 0.5 for v in range(256)]
        assert _counts(c) == (in_place + 1, copied)


def test_an_output_used_in_place_is_copied_into_its_key(slow_timeout: RedisServer) -> None:
    """An output used in place and stored under a key is copied into Redis's memory: MEMORY
    USAGE counts it, and it keeps its values while later runs rewrite every part of the arena
    and after the host that wrote it dies."""
    s = slow_timeout
    n = 64 * 1024  # 256 KiB of FLOAT
    with RawClient(s.port) as c:
        assert_ok(c.execute("AI.MODELSTORE", "m", "ONNX", "CPU", "BLOB", "identity"))
        data = np.arange(n, dtype=np.float32) + 0.5
        assert_ok(c.execute("AI.TENSORSET", "x", "FLOAT", n, "BLOB", data.tobytes()))
        before = _counts(c)
        assert c.execute("AI.MODELEXECUTE", "m", "INPUTS", 1, "x", "OUTPUTS", 1, "kept") == "OK"
        assert _counts(c)[0] == before[0] + 1
        assert int(c.execute("MEMORY", "USAGE", "kept")) >= n * 4
        other = np.zeros(n, dtype=np.float32)
        assert_ok(c.execute("AI.TENSORSET", "z", "FLOAT", n, "BLOB", other.tobytes()))
        for _ in range(40):
            assert c.execute("AI.MODELEXECUTE", "m", "INPUTS", 1, "z", "OUTPUTS", 1, "y") == "OK"
        got = np.frombuffer(bytes(c.execute("AI.TENSORGET", "kept", "BLOB")), np.float32)
        assert got.tolist() == data.tolist()
        pid = int(_ready(c)["pid"])
        os.kill(pid, signal.SIGKILL)
        _ready(c, pid)
        got = np.frombuffer(bytes(c.execute("AI.TENSORGET", "kept", "BLOB")), np.float32)
        assert got.tolist() == data.tolist()


def test_outputs_in_place_of_many_clients_keep_their_values(slow_timeout: RedisServer) -> None:
    """Eight clients, each with its own input, run DAGs that reply a 64 KiB output from the
    arena: their runs are in flight together while the main thread replies earlier ones from
    pinned parts, and every reply has its own client's values."""
    s = slow_timeout
    n, clients, rounds = 16 * 1024, 8, 40
    with RawClient(s.port) as c:
        assert_ok(c.execute("AI.MODELSTORE", "m", "ONNX", "CPU", "BLOB", "identity"))
        before = _counts(c)
    datas = [np.arange(n, dtype=np.float32) + np.float32(100 * (i + 1) + 0.5)
             for i in range(clients)]
    bad: list[str] = []

    def client(i: int) -> None:
        with RawClient(s.port) as k:
            assert_ok(k.execute("AI.TENSORSET", f"x{i}", "FLOAT", n, "BLOB", datas[i].tobytes()))
            for r in range(rounds):
                got = k.execute("AI.DAGEXECUTE", "LOAD", 1, f"x{i}", "|>", "AI.MODELEXECUTE",
                                "m", "INPUTS", 1, f"x{i}", "OUTPUTS", 1, "t", "|>",
                                "AI.TENSORGET", "t", "BLOB")
                if np.frombuffer(bytes(got[1]), np.float32).tolist() != datas[i].tolist():
                    bad.append(f"client {i} round {r}")

    threads = [threading.Thread(target=client, args=(i,)) for i in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not any(t.is_alive() for t in threads)
    assert bad == []
    with RawClient(s.port) as c:
        in_place, copied = _counts(c)
    assert in_place + copied - before[0] - before[1] == clients * rounds
    assert in_place > before[0]
