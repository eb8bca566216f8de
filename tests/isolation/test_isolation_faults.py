"""Isolated backends under faults (issue 13, docs/isolation.md "The failure table").

The fault-injection backend (tests/fault_backend/) runs in a backend host process
(`ISOLATE ONNX`): each magic input crashes, aborts, hangs, exhausts memory, exits or writes
garbage on the host's control connection. Whatever it does, the request gets exactly the failure
table's error, Redis stays up with every key intact, the host comes back by itself (a new pid,
`restarts` + 1, the right `last_exit`) and the next run succeeds. Also: `kill -9` of the host
under 8 clients, 100 times.
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
from helpers import assert_error, assert_ok, isolated_host, isolated_hosts, wait_isolated_ready
from redis_server import Connect, RedisServer
from resp import RawClient, RespError

KEY_ERR = "ERR ONNX backend process exited ({}) while running {}"


def _info(c: RawClient) -> dict:
    """The ai_isolation dictionary of the one isolated backend."""
    return isolated_host(c.execute("INFO", "MODULES"))


def _server(module_path: pathlib.Path, so: pathlib.Path, *args: str) -> RedisServer:
    s = RedisServer(module_path, ["ISOLATE", "ONNX", *args], env=fault_env())
    with RawClient(s.port) as c:
        assert_ok(c.execute("AI.CONFIG", "LOADBACKEND", "ONNX", str(so)))
    return s


@pytest.fixture(scope="module")
def iso(module_path: pathlib.Path, fault_backend: pathlib.Path) -> Iterator[RedisServer]:
    s = _server(module_path, fault_backend, "MODEL_EXECUTION_TIMEOUT", "1000")
    yield s
    s.stop()


@pytest.fixture
def c(iso: RedisServer, connect: Connect) -> RawClient:
    cl = connect(iso)
    wait_isolated_ready(cl)
    return cl


def _set(c: RawClient, key: str, values: list[float]) -> None:
    assert_ok(c.execute("AI.TENSORSET", key, "FLOAT", len(values), "VALUES", *values))


def _run(c: RawClient, model: str, inp: str, out: str) -> object:
    return c.execute("AI.MODELEXECUTE", model, "INPUTS", 1, inp, "OUTPUTS", 1, out)


def _values(c: RawClient, key: str) -> list[float]:
    return [float(v) for v in c.execute("AI.TENSORGET", key, "VALUES")]


def test_identity_runs_in_the_host(c: RawClient, iso: RedisServer) -> None:
    assert_ok(c.execute("AI.MODELSTORE", "m", "ONNX", "CPU", "BLOB", "identity"))
    _set(c, "x", [0.5, 2, 3])
    assert_ok(_run(c, "m", "x", "y"))
    assert _values(c, "y") == [0.5, 2, 3]
    info = _info(c)
    assert info["kind"] == "ONNX" and int(info["pid"]) != iso.proc.pid
    # The host is Redis's child, hardened as the design says.
    pid = int(info["pid"])
    status = pathlib.Path(f"/proc/{pid}/status").read_text()
    assert f"PPid:\t{iso.proc.pid}" in status, status
    assert "NoNewPrivs:\t1" in status, status
    assert pathlib.Path(f"/proc/{pid}/oom_score_adj").read_text().strip() == "1000"
    # No descriptor of Redis's (listening socket, clients, files) leaked into it: only its
    # standard streams, the control connection, its channels' sockets and arenas.
    for fd in os.listdir(f"/proc/{pid}/fd"):
        target = os.readlink(f"/proc/{pid}/fd/{fd}")
        assert target.startswith(("socket:", "/memfd:", "/dev/null", "pipe:", "/dev/pts",
                                  "anon_inode:")) or int(fd) <= 2, (fd, target)


def test_injected_error_keeps_the_host(c: RawClient) -> None:
    assert_ok(c.execute("AI.MODELSTORE", "m", "ONNX", "CPU", "BLOB", "identity\nerror ERR boom"))
    pid = _info(c)["pid"]
    _set(c, "x", [7])
    assert_error(_run(c, "m", "x", "y"), "ERR boom")
    assert _info(c)["pid"] == pid


@pytest.mark.parametrize("magic,reason,token", [
    (1, "signal 11 SIGSEGV", "signal_11_SIGSEGV"),
    (2, "signal 6 SIGABRT", "signal_6_SIGABRT"),
    (5, "exit status 3", "exit_3"),
    (8, "signal 8 SIGFPE", "signal_8_SIGFPE"),
    (9, "signal 9 SIGKILL", "signal_9_SIGKILL"),
])
def test_fatal_magic_costs_one_request(c: RawClient, iso: RedisServer, magic: int, reason: str,
                                       token: str) -> None:
    assert_ok(c.execute("AI.MODELSTORE", "m", "ONNX", "CPU", "BLOB", "identity"))
    _set(c, "ok", [0.5, 2])  # a first element of 1-9 would be a magic
    _set(c, "bad", [magic, 0])
    assert_ok(c.execute("SET", "plain", "value"))
    before = _info(c)
    assert_error(_run(c, "m", "bad", "y"), KEY_ERR.format(reason, "m"))
    assert iso.alive()
    after = wait_isolated_ready(c, int(before["pid"]))
    assert int(after["restarts"]) == int(before["restarts"]) + 1
    assert after["last_exit"] == token
    # Nothing lost: the keys, and the model, which the new host re-created from its blob.
    assert c.execute("GET", "plain") == b"value" or c.execute("GET", "plain") == "value"
    assert_ok(_run(c, "m", "ok", "y"))
    assert _values(c, "y") == [0.5, 2]


def test_garbage_on_the_control_connection_is_a_protocol_error(c: RawClient) -> None:
    assert_ok(c.execute("AI.MODELSTORE", "m", "ONNX", "CPU", "BLOB", "identity"))
    _set(c, "bad", [6])
    before = _info(c)
    reply = _run(c, "m", "bad", "y")
    # The garbage and the run's reply race: the run may still answer before the core kills
    # the host, but the host is killed for the garbage either way.
    if isinstance(reply, RespError):
        assert str(reply).startswith("ERR ONNX backend process exited (killed: protocol error: "), reply
    after = wait_isolated_ready(c, int(before["pid"]))
    assert after["last_exit"] == "killed_protocol", after
    _set(c, "ok", [0.5])
    assert_ok(_run(c, "m", "ok", "y"))


def test_hang_is_killed_at_the_execution_timeout(c: RawClient) -> None:
    assert_ok(c.execute("AI.MODELSTORE", "m", "ONNX", "CPU", "BLOB", "identity"))
    _set(c, "bad", [3])
    before = _info(c)
    # MODEL_EXECUTION_TIMEOUT 1000 plus the second of grace ONNX gets for its own watchdog.
    assert_error(_run(c, "m", "bad", "y"), KEY_ERR.format(
        "killed after m ran past MODEL_EXECUTION_TIMEOUT (1000 ms)", "m"))
    after = wait_isolated_ready(c, int(before["pid"]))
    assert after["last_exit"] == "killed_timeout"
    _set(c, "ok", [10])
    assert_ok(_run(c, "m", "ok", "y"))


def test_memory_limit_fails_the_allocation_not_the_host(module_path: pathlib.Path,
                                                        fault_backend: pathlib.Path) -> None:
    # A server of its own: under AddressSanitizer (ci/asan-tests.sh) a host cannot start under
    # RLIMIT_DATA at all, so only this test carries a memory limit.
    s = _server(module_path, fault_backend, "BACKEND_MEMORY_LIMIT", "512")
    try:
        with RawClient(s.port) as c:
            assert_ok(c.execute("AI.MODELSTORE", "m", "ONNX", "CPU", "BLOB", "identity"))
            _set(c, "bad", [4])
            pid = wait_isolated_ready(c)["pid"]
            reply = _run(c, "m", "bad", "y")
            assert isinstance(reply, RespError) and str(reply).startswith(
                "ERR fault backend: out of memory after "), reply
            assert _info(c)["pid"] == pid  # RLIMIT_DATA made malloc fail: the host lives on
    finally:
        s.stop()


def test_crash_on_create_keeps_the_old_value(c: RawClient) -> None:
    assert_ok(c.execute("AI.MODELSTORE", "m", "ONNX", "CPU", "BLOB", "identity"))
    before = _info(c)
    assert_error(c.execute("AI.MODELSTORE", "m", "ONNX", "CPU", "BLOB", "crash-on-create"),
                 "ERR ONNX backend process exited (signal 11 SIGSEGV) while creating m")
    wait_isolated_ready(c, int(before["pid"]))
    blob = c.execute("AI.MODELGET", "m", "BLOB")
    assert blob in (b"identity", "identity"), blob
    _set(c, "ok", [11])
    assert_ok(_run(c, "m", "ok", "y"))


def test_hang_on_create_is_killed_at_the_start_timeout(module_path: pathlib.Path,
                                                      fault_backend: pathlib.Path) -> None:
    # BACKEND_START_TIMEOUT bounds a create as it bounds a hello: how long a host may take to
    # load something.
    s = _server(module_path, fault_backend, "BACKEND_START_TIMEOUT", "2000")
    try:
        with RawClient(s.port) as c:
            assert_ok(c.execute("AI.MODELSTORE", "m", "ONNX", "CPU", "BLOB", "identity"))
            assert_ok(c.execute("AI.MODELSTORE", "other", "ONNX", "CPU", "BLOB", "identity"))
            before = wait_isolated_ready(c)
            assert_error(c.execute("AI.MODELSTORE", "m", "ONNX", "CPU", "BLOB", "hang-on-create"),
                         "ERR ONNX backend process exited (killed after the create of m took "
                         "over 2000 ms) while creating m")
            after = wait_isolated_ready(c, int(before["pid"]))
            assert after["last_exit"] == "killed_create_timeout", after
            assert c.execute("AI.MODELGET", "m", "BLOB") in (b"identity", "identity")
            for key in ("m", "other"):
                _set(c, "x", [10])
                assert_ok(_run(c, key, "x", "y"))
                assert _values(c, "y") == [10.0]
    finally:
        s.stop()


def test_entry_that_never_returns_fails_the_load_at_the_start_timeout(
        module_path: pathlib.Path, fault_backend: pathlib.Path) -> None:
    s = RedisServer(module_path, ["ISOLATE", "ONNX", "BACKEND_START_TIMEOUT", "1000"],
                    env=fault_env(REDISAI_FAULT_HANG_ENTRY="1"))
    try:
        with RawClient(s.port) as c:
            reply = c.execute("AI.CONFIG", "LOADBACKEND", "ONNX", str(fault_backend))
            assert isinstance(reply, RespError), reply
            assert f"ONNX backend host for {fault_backend} did not answer within 1000 ms" in \
                str(reply), reply
            assert s.alive()
            # The hung host was killed and nothing of it is left in INFO; the kind is free.
            assert "ai_isolated_backends" not in str(c.execute("INFO", "MODULES"))
            assert "redisai_fault.so" not in pathlib.Path(
                f"/proc/{s.proc.pid}/maps").read_text()
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:
                children = pathlib.Path(
                    f"/proc/{s.proc.pid}/task/{s.proc.pid}/children").read_text().split()
                if not children:
                    break
                time.sleep(0.05)
            assert not children, children
    finally:
        s.stop()


def test_a_model_whose_re_creation_crashes_twice_is_quarantined(
        module_path: pathlib.Path, fault_backend: pathlib.Path,
        tmp_path: pathlib.Path) -> None:
    trigger = tmp_path / "crash-now"
    s = _server(module_path, fault_backend)
    try:
        with RawClient(s.port) as c:
            assert_ok(c.execute("AI.MODELSTORE", "poison", "ONNX", "CPU", "BLOB",
                                f"identity\ncrash-if-exists {trigger}"))
            assert_ok(c.execute("AI.MODELSTORE", "good", "ONNX", "CPU", "BLOB", "identity"))
            _set(c, "x", [10])
            assert_ok(_run(c, "poison", "x", "y"))
            before = wait_isolated_ready(c)
            # From now on every create of "poison" crashes its host: the restart re-creates
            # it first, crashes, restarts, crashes again, and then leaves it out.
            trigger.touch()
            os.kill(int(before["pid"]), signal.SIGKILL)
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                info = _info(c)
                if info["state"] == "ready" and int(info["restarts"]) >= \
                        int(before["restarts"]) + 3:
                    break
                time.sleep(0.05)
            reply = _run(c, "poison", "x", "y")
            assert_error(reply, "ERR ONNX backend process exited (signal 11 SIGSEGV) while "
                                "creating poison; the model is disabled until stored again")
            # The others were re-created and run; storing the key again brings it back.
            assert_ok(_run(c, "good", "x", "y"))
            assert _values(c, "y") == [10.0]
            trigger.unlink()
            assert_ok(c.execute("AI.MODELSTORE", "poison", "ONNX", "CPU", "BLOB", "identity"))
            assert_ok(_run(c, "poison", "x", "y"))
            assert s.alive()
    finally:
        s.stop()


def _hosts(c: RawClient) -> dict[str, dict]:
    """Every isolated backend's ai_isolation fields, by field name."""
    return isolated_hosts(c.execute("INFO", "MODULES"))


def _wait_host(c: RawClient, name: str, old_pid: int | None = None,
               timeout: float = 30) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        info = _hosts(c)[name]
        if info["state"] == "ready" and int(info["pid"]) and int(info["pid"]) != old_pid \
                and info.get("recreating", "0") == "0":
            return info
        time.sleep(0.02)
    raise AssertionError(f"{name} not ready again: {_hosts(c)}")


def _runner(port: int, model: str, stop: threading.Event, results: list, errors: list) -> None:
    """Loops MODELEXECUTE + TENSORGET; every reply must be right or exactly a fault error."""
    with RawClient(port) as cl:
        me = threading.get_ident()
        inp, out = f"in{me}", f"out{me}"
        vals = [float(10 + me % 1000), 1.0]  # never a magic of the fault backend
        assert_ok(cl.execute("AI.TENSORSET", inp, "FLOAT", 2, "VALUES", *vals))
        while not stop.is_set():
            r = cl.execute("AI.MODELEXECUTE", model, "INPUTS", 1, inp, "OUTPUTS", 1, out)
            if isinstance(r, RespError):
                text = str(r)
                if not (text.startswith("ERR ONNX backend process exited (signal 9 SIGKILL")
                        and text.endswith(f"while running {model}")) and \
                        not text.startswith("ERR ONNX backend process is restarting"):
                    errors.append(text)
                results.append("err")
                continue
            got = [float(v) for v in cl.execute("AI.TENSORGET", out, "VALUES")]
            if got != vals:
                errors.append(f"wrong output {got} for {vals}")
            results.append("ok")


def test_kill_9_under_8_clients_100_times(module_path: pathlib.Path,
                                          fault_backend: pathlib.Path) -> None:
    """Two isolated ONNX backends: the real ONNX Runtime (the kind's default) and the fault
    backend beside it by name; 8 clients run 4 models (2 on each) while each host in turn is
    killed 100 times in all."""
    import onnx_models  # noqa: PLC0415
    s = RedisServer(module_path, ["ISOLATE", "ONNX"], env=fault_env())
    try:
        with RawClient(s.port) as c:
            ident = onnx_models.identity("FLOAT").blob
            for k in (0, 1):
                assert_ok(c.execute("AI.MODELSTORE", f"m{k}", "ONNX", "CPU", "BLOB", ident))
            assert_ok(c.execute("AI.CONFIG", "LOADBACKEND", "ONNX", str(fault_backend),
                                "ISOLATED"))
            for k in (2, 3):
                assert_ok(c.execute("AI.MODELSTORE", f"m{k}", "ONNX", "CPU", "BACKEND",
                                    "fault-1.0-cpu", "BLOB", "identity"))
            assert_ok(c.execute("SET", "plain", "kept"))
            names = sorted(_hosts(c))
            assert len(names) == 2, names
            stop = threading.Event()
            results: list = []
            errors: list = []
            threads = [threading.Thread(target=_runner,
                                        args=(s.port, f"m{i % 4}", stop, results, errors))
                       for i in range(8)]
            for t in threads:
                t.start()
            first = {n: _wait_host(c, n) for n in names}
            pids = {n: int(first[n]["pid"]) for n in names}
            for cycle in range(100):
                name = names[cycle % 2]
                # Let some runs through on the new hosts, then kill one.
                target = len(results) + 8
                deadline = time.monotonic() + 30
                while len(results) < target and time.monotonic() < deadline:
                    time.sleep(0.002)
                os.kill(pids[name], signal.SIGKILL)
                pids[name] = int(_wait_host(c, name, pids[name])["pid"])
            stop.set()
            for t in threads:
                t.join(60)
            assert not errors, errors[:10]
            after = _hosts(c)
            assert sum(int(after[n]["restarts"]) - int(first[n]["restarts"])
                       for n in names) == 100, after
            assert all(int(after[n]["restarts"]) - int(first[n]["restarts"]) == 50
                       for n in names), after
            assert results.count("ok") > 100, (results.count("ok"), results.count("err"))
            assert s.alive(), s.log()
            assert c.execute("GET", "plain") in (b"kept", "kept")
            assert c.execute("DBSIZE") >= 5
            for k in range(4):
                assert_ok(c.execute("AI.TENSORSET", "x", "FLOAT", 1, "VALUES", 10))
                reply = c.execute("AI.MODELEXECUTE", f"m{k}", "INPUTS", 1, "x", "OUTPUTS", 1, "y")
                assert reply == "OK", (reply, _hosts(c), s.log()[-3000:])
                assert _values(c, "y") == [10.0]
    finally:
        s.stop()
