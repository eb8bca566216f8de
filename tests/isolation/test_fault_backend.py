"""The fault-injection backend (tests/fault_backend/, docs/isolation.md), in-process.

A backend built for tests only: it poses as ONNX, its model blob is a small text spec, and a
run looks at the first element of its first input (a magic value) to return its input, crash,
abort, hang, allocate without bound, exit, or fail with the model's own text. It is built on
first use (`cmake --build <build dir> --target redisai_fault`, EXCLUDE_FROM_ALL: installs never
carry it) and laid out here in a temporary folder `redisai_fault-1.0-cpu` with its own manifest.

Its entry refuses to load unless the isolation host says it is the host
(`REDISAI_BACKEND_HOST=1`); until the host exists, `REDISAI_FAULT_BACKEND_IN_PROCESS=1` lets it
load in Redis for its non-fatal behaviours (identity, error text) and refuses every fatal
magic with an error, and `=fatal` lets the faults run in Redis itself: the last tests here
record today's behaviour, a crash in a backend takes the whole server down, which isolation
(issue 13) is to fix.
"""
from __future__ import annotations

import os
import pathlib
import shutil
import signal
from typing import Iterator

import numpy as np
import pytest

from fault_injection import HOST_FLAG, IN_PROCESS, fault_env
from helpers import LOAD_ERR, assert_error, assert_error_startswith, assert_ok
from redis_server import Connect, RedisServer, server_exe
from resp import RawClient, RespError

# Every test here loads the fault backend into redis-server itself (or refuses to): what it
# records is in-process behaviour. Its isolated behaviour is test_isolation_faults.py's.
pytestmark = pytest.mark.inprocess_only("loads the fault backend into redis-server itself")

DEFAULT_ERROR = "ERR fault backend: injected error"

# magic -> the name the backend gives it in its refusal text
FATAL = {1: "SIGSEGV", 2: "abort", 3: "hang", 4: "unbounded allocation", 5: "_exit(3)",
         6: "garbage on fd 3", 8: "SIGFPE", 9: "SIGKILL"}


def _loaded(module_path: pathlib.Path, so: pathlib.Path, mode: str) -> RedisServer:
    s = RedisServer(module_path, env=fault_env(**{IN_PROCESS: mode}))
    with RawClient(s.port) as c:
        assert_ok(c.execute("AI.CONFIG", "LOADBACKEND", "ONNX", str(so)))
    return s


@pytest.fixture(scope="module")
def fault_server(module_path: pathlib.Path, fault_backend: pathlib.Path) -> Iterator[RedisServer]:
    """The backend loaded in-process for its non-fatal behaviours."""
    s = _loaded(module_path, fault_backend, "1")
    yield s
    s.stop()


@pytest.fixture
def c(fault_server: RedisServer, connect: Connect) -> RawClient:
    return connect(fault_server)


def _store(c: RawClient, key: str, spec: str) -> object:
    return c.execute("AI.MODELSTORE", key, "ONNX", "CPU", "BLOB", spec)


def _run(c: RawClient, key: str, inputs: list[str], outputs: list[str]) -> object:
    return c.execute("AI.MODELEXECUTE", key, "INPUTS", len(inputs), *inputs,
                     "OUTPUTS", len(outputs), *outputs)


def _dec(x: object) -> object:
    """Bulk strings as str, recursively (RawClient returns bytes)."""
    if isinstance(x, bytes):
        return x.decode()
    if isinstance(x, list):
        return [_dec(v) for v in x]
    return x


def _pairs(reply: object) -> dict:
    items = _dec(reply)
    assert isinstance(items, list), reply
    return dict(zip(items[::2], items[1::2]))


def _values(c: RawClient, key: str) -> list[float]:
    return [float(v) for v in c.execute("AI.TENSORGET", key, "VALUES")]


# ---------------------------------------------------------------------------------------
# Loading


def test_refuses_in_process_without_override(module_path: pathlib.Path,
                                              fault_backend: pathlib.Path) -> None:
    s = RedisServer(module_path, env=fault_env())
    try:
        with RawClient(s.port) as cl:
            reply = cl.execute("AI.CONFIG", "LOADBACKEND", "ONNX", str(fault_backend))
            text = assert_error_startswith(reply, LOAD_ERR)
            assert str(fault_backend) in text, text
            assert ("backend refused the host: the fault-injection backend runs only inside "
                    "the isolation host (REDISAI_BACKEND_HOST=1 is not set)") in text, text
            assert IN_PROCESS in text, text
            # Refused, so ONNX is still free and nothing of the backend answers.
            reply = _store(cl, "m", "identity")
            assert isinstance(reply, RespError), reply
            assert "fault backend" not in str(reply), reply
            assert cl.execute("PING") == "PONG"
    finally:
        s.stop()


def test_an_unknown_override_value_is_no_override(module_path: pathlib.Path,
                                                  fault_backend: pathlib.Path) -> None:
    s = RedisServer(module_path, env=fault_env(**{IN_PROCESS: "yes"}))
    try:
        with RawClient(s.port) as cl:
            reply = cl.execute("AI.CONFIG", "LOADBACKEND", "ONNX", str(fault_backend))
            assert "runs only inside the isolation host" in assert_error_startswith(reply, LOAD_ERR)
    finally:
        s.stop()


def test_loads_where_the_host_flag_is_set(module_path: pathlib.Path,
                                          fault_backend: pathlib.Path) -> None:
    # What the isolation host will set in its own environment; here Redis poses as the host
    # only to see the entry accept it (no fault is run).
    s = RedisServer(module_path, env=fault_env(**{HOST_FLAG: "1"}))
    try:
        with RawClient(s.port) as cl:
            assert_ok(cl.execute("AI.CONFIG", "LOADBACKEND", "ONNX", str(fault_backend)))
        assert "fault-injection backend 1.0 loaded (isolation host)" in s.log()
    finally:
        s.stop()


def test_refused_as_another_kind(server: RedisServer, fault_backend: pathlib.Path) -> None:
    # Its ABI note says ONNX: the core refuses it for another kind before running any of it.
    with RawClient(server.port) as cl:
        text = assert_error_startswith(
            cl.execute("AI.CONFIG", "LOADBACKEND", "TF", str(fault_backend)), LOAD_ERR)
    assert str(fault_backend) in text and "ONNX" in text, text
    assert "fault-injection" not in server.log()


def test_loaded_poses_as_onnx(fault_server: RedisServer, c: RawClient) -> None:
    assert "fault-injection backend 1.0 loaded (in-process, non-fatal behaviours only)" \
        in fault_server.log()
    info = _dec(c.execute("INFO", "MODULES"))
    # The kind's line of 1.2 (ai_onnxruntime_version) carries the fault backend's version.
    assert "ai_onnxruntime_version:1.0\r\n" in info, info
    assert_ok(_store(c, "m", "identity"))
    meta = c.execute("AI.MODELGET", "m", "META")
    d = _pairs(meta)
    assert d["backend"] == "ONNX", meta
    assert d["inputs"] == ["input0"] and d["outputs"] == ["output0"], meta


# ---------------------------------------------------------------------------------------
# Normal runs


def test_identity_float(c: RawClient) -> None:
    assert_ok(_store(c, "m", "identity"))
    assert_ok(c.execute("AI.TENSORSET", "a", "FLOAT", 2, 2, "VALUES", 10, 20, 30, 40.5))
    assert_ok(_run(c, "m", ["a"], ["b"]))
    assert _values(c, "b") == [10, 20, 30, 40.5]
    meta = _dec(c.execute("AI.TENSORGET", "b", "META"))
    assert meta == ["dtype", "FLOAT", "shape", [2, 2]], meta


def test_identity_several_types(c: RawClient) -> None:
    assert_ok(_store(c, "m", "identity\ninputs 3\noutputs 3\n"))
    blob = np.arange(6, dtype=np.int64).reshape(2, 3)
    assert_ok(c.execute("AI.TENSORSET", "a", "INT64", 2, 3, "BLOB", blob.tobytes()))
    assert_ok(c.execute("AI.TENSORSET", "b", "DOUBLE", 1, "VALUES", 0.25))
    assert_ok(c.execute("AI.TENSORSET", "s", "STRING", 2, "VALUES", "x", "hello"))
    assert_ok(_run(c, "m", ["a", "b", "s"], ["oa", "ob", "os"]))
    got = np.frombuffer(c.execute("AI.TENSORGET", "oa", "BLOB"), dtype=np.int64)
    assert got.tolist() == blob.ravel().tolist()
    assert _values(c, "ob") == [0.25]
    assert _dec(c.execute("AI.TENSORGET", "os", "VALUES")) == ["x", "hello"]


def test_identity_is_any_other_magic(c: RawClient) -> None:
    # 0, 10, a fraction and a negative value are no magic: the run is the identity.
    assert_ok(_store(c, "m", "identity"))
    for first in (0, 10, 1.5, -1, 1e30, -1e30, 9.5):
        assert_ok(c.execute("AI.TENSORSET", "a", "FLOAT", 2, "VALUES", first, 1))
        assert_ok(_run(c, "m", ["a"], ["b"]))
        assert _values(c, "b") == [float(np.float32(first)), 1]


def test_fewer_outputs_than_inputs(c: RawClient) -> None:
    assert_ok(_store(c, "m", "identity\ninputs 2\noutputs 1"))
    assert_ok(c.execute("AI.TENSORSET", "a", "FLOAT", 1, "VALUES", 15))
    assert_ok(c.execute("AI.TENSORSET", "z", "FLOAT", 1, "VALUES", 16))
    assert_ok(_run(c, "m", ["a", "z"], ["b"]))
    assert _values(c, "b") == [15]


def test_wrong_counts(c: RawClient) -> None:
    assert_ok(_store(c, "m", "identity\ninputs 2"))
    assert_ok(c.execute("AI.TENSORSET", "a", "FLOAT", 1, "VALUES", 50))
    assert_error(_run(c, "m", ["a"], ["b", "b2"]),
                 "Number of keys given as INPUTS here does not match model definition")
    assert_error(_run(c, "m", ["a", "a"], ["b"]),
                 "Number of keys given as OUTPUTS here does not match model definition")


def test_in_a_dag(c: RawClient) -> None:
    assert_ok(_store(c, "m", "identity"))
    reply = c.execute("AI.DAGEXECUTE", "ROUTING", "m", "|>",
                      "AI.TENSORSET", "a", "FLOAT", 1, "VALUES", 33, "|>",
                      "AI.MODELEXECUTE", "m", "INPUTS", 1, "a", "OUTPUTS", 1, "b", "|>",
                      "AI.TENSORGET", "b", "VALUES")
    assert _dec(reply[:2]) == ["OK", "OK"], reply
    assert [float(v) for v in reply[2]] == [33.0], reply


# ---------------------------------------------------------------------------------------
# Errors


def test_error_text_default(c: RawClient) -> None:
    assert_ok(_store(c, "m", "identity"))
    assert_ok(c.execute("AI.TENSORSET", "a", "FLOAT", 1, "VALUES", 7))
    assert_error(_run(c, "m", ["a"], ["b"]), DEFAULT_ERROR)
    assert c.execute("EXISTS", "b") == 0


def test_error_text_of_the_model(c: RawClient) -> None:
    assert_ok(_store(c, "m", "identity\nerror ERR the framework said no: bad shape [1, 7]\n"))
    assert_ok(c.execute("AI.TENSORSET", "a", "INT32", 1, "VALUES", 7))
    assert_error(_run(c, "m", ["a"], ["b"]), "ERR the framework said no: bad shape [1, 7]")
    # The same model still runs normally on another value.
    assert_ok(c.execute("AI.TENSORSET", "a", "INT32", 1, "VALUES", 70))
    assert_ok(_run(c, "m", ["a"], ["b"]))
    assert _values(c, "b") == [70]
    stats = c.execute("AI.INFO", "m")
    d = _pairs(stats)
    assert d["calls"] == 2 and d["errors"] == 1, stats


@pytest.mark.parametrize("spec, text", [
    ("", "ERR fault backend: empty model spec"),
    ("\n\n", "ERR fault backend: empty model spec"),
    ("segfault", "ERR fault backend: unknown model spec 'segfault' (expected identity, "
                 "crash-on-create or hang-on-create)"),
    ("identity\nbatch 2", "ERR fault backend: unknown directive 'batch' (expected inputs, "
                          "outputs, error, run-ms, crash-if-exists or slow-if-exists)"),
    ("identity\ninputs 0", "ERR fault backend: 'inputs' wants a count from 1 to 16, got '0'"),
    ("identity\noutputs x", "ERR fault backend: 'outputs' wants a count from 1 to 16, got 'x'"),
    ("identity\ninputs 17", "ERR fault backend: 'inputs' wants a count from 1 to 16, got '17'"),
    ("identity\noutputs 2", "ERR fault backend: 2 outputs but only 1 inputs to copy"),
    ("identity\nerror", "ERR fault backend: 'error' wants a text"),
    ("identity\nrun-ms 60001", "ERR fault backend: 'run-ms' wants 0 to 60000, got '60001'"),
    ("identity\0", "ERR fault backend: the model spec is text, it holds a NUL byte"),
])
def test_bad_specs(c: RawClient, spec: str, text: str) -> None:
    assert_error(_store(c, "m", spec), text)
    assert c.execute("EXISTS", "m") == 0


@pytest.mark.parametrize("spec", ["crash-on-create", "hang-on-create"])
def test_fatal_creates_refused_in_process(c: RawClient, spec: str) -> None:
    assert_ok(_store(c, "m", "identity"))
    assert_error(_store(c, "m", spec),
                 f"ERR fault backend: '{spec}' is fatal and runs only inside the isolation host")
    # The key keeps its old model.
    assert_ok(c.execute("AI.TENSORSET", "a", "FLOAT", 1, "VALUES", 0))
    assert_ok(_run(c, "m", ["a"], ["b"]))


@pytest.mark.parametrize("magic", sorted(FATAL))
def test_fatal_magics_refused_in_process(c: RawClient, magic: int) -> None:
    assert_ok(_store(c, "m", "identity"))
    assert_ok(c.execute("AI.TENSORSET", "a", "FLOAT", 2, "VALUES", magic, 0))
    assert_error(_run(c, "m", ["a"], ["b"]),
                 f"ERR fault backend: magic {magic} ({FATAL[magic]}) is fatal and runs only "
                 "inside the isolation host")
    assert c.execute("PING") == "PONG"


# ---------------------------------------------------------------------------------------
# Unbounded allocation under a data limit: what BACKEND_MEMORY_LIMIT will do to a host.

DATA_LIMIT_MB = 768


@pytest.fixture
def limited_exe(tmp_path: pathlib.Path) -> str:
    """redis-server under RLIMIT_DATA (which counts malloc's mmaps since Linux 4.7), so that
    magic 4 meets a failing malloc instead of the machine's OOM killer."""
    real = shutil.which(server_exe())  # the session's server (pytest --server)
    assert real, f"{server_exe()} is not on PATH"
    exe = tmp_path / "redis-server-limited"
    exe.write_text(f"#!/bin/sh\nulimit -d {DATA_LIMIT_MB * 1024}\nexec {real} \"$@\"\n")
    exe.chmod(0o755)
    return str(exe)


@pytest.mark.skipif(bool(os.environ.get("REDISAI_TEST_SERVER_EXE")),
                    reason="AddressSanitizer reserves more address space than the limit")
def test_unbounded_allocation_meets_the_limit(module_path: pathlib.Path,
                                              fault_backend: pathlib.Path,
                                              limited_exe: str) -> None:
    s = RedisServer(module_path, env=fault_env(**{IN_PROCESS: "fatal"}), exe=limited_exe)
    try:
        with RawClient(s.port) as cl:
            assert_ok(cl.execute("AI.CONFIG", "LOADBACKEND", "ONNX", str(fault_backend)))
            assert_ok(_store(cl, "m", "identity"))
            assert_ok(cl.execute("AI.TENSORSET", "a", "FLOAT", 1, "VALUES", 4))
            text = str(assert_error_startswith(_run(cl, "m", ["a"], ["b"]),
                                               "ERR fault backend: out of memory after "))
            mib = int(text.rsplit(" ", 2)[1])
            # It allocated (and touched) blocks until the limit, then gave them all back.
            assert 0 < mib < DATA_LIMIT_MB, text
            print(f"magic 4 under a {DATA_LIMIT_MB} MiB data limit: {text}")
            assert_ok(cl.execute("AI.TENSORSET", "a", "FLOAT", 1, "VALUES", 40))
            assert_ok(_run(cl, "m", ["a"], ["b"]))
            assert_ok(cl.execute("AI.TENSORSET", "a", "FLOAT", 1, "VALUES", 4))
            text2 = str(assert_error_startswith(_run(cl, "m", ["a"], ["b"]),
                                                "ERR fault backend: out of memory after "))
            # Nothing was kept: the second run gets as far, give or take one block.
            assert abs(int(text2.rsplit(" ", 2)[1]) - mib) <= 64, (text, text2)
        assert s.alive(), s.log()
    finally:
        s.stop()


# ---------------------------------------------------------------------------------------
# Today, without isolation: a fault in a backend takes the server down.

# Under ci/asan-tests.sh (another server executable) AddressSanitizer's own handler reports a
# SEGV and exits 1, and its scan counts the report as a failure: these tests need a plain server.
plain_server_only = pytest.mark.skipif(
    bool(os.environ.get("REDISAI_TEST_SERVER_EXE")),
    reason="a crashing server under another executable (AddressSanitizer) ends differently")


@plain_server_only
@pytest.mark.parametrize("magic, sig", [
    (1, signal.SIGSEGV), (2, signal.SIGABRT), (8, signal.SIGFPE)])
def test_crash_in_process_kills_the_server(module_path: pathlib.Path, fault_backend: pathlib.Path,
                                           magic: int, sig: signal.Signals) -> None:
    """What isolation is for: Redis dies with the backend, and its log names the signal."""
    s = _loaded(module_path, fault_backend, "fatal")
    try:
        with RawClient(s.port) as cl:
            assert_ok(_store(cl, "m", "identity"))
            assert_ok(cl.execute("SET", "precious", "data"))
            assert_ok(cl.execute("AI.TENSORSET", "a", "FLOAT", 1, "VALUES", magic))
            cl.send("AI.MODELEXECUTE", "m", "INPUTS", 1, "a", "OUTPUTS", 1, "b")
            with pytest.raises((ConnectionError, OSError, EOFError)):
                cl.read()
        rc = s.proc.wait(timeout=60)
        log = s.log()
        # Redis's crash handler logs the signal, then re-raises it with the default action.
        assert rc == -sig, (rc, log)
        assert f"crashed by signal: {int(sig)}" in log, log
    finally:
        s.stop()


@plain_server_only
@pytest.mark.parametrize("magic, rc", [(9, -signal.SIGKILL), (5, 3)])
def test_kill_or_exit_in_process_ends_the_server(module_path: pathlib.Path,
                                                 fault_backend: pathlib.Path,
                                                 magic: int, rc: int) -> None:
    """SIGKILL and _exit leave no crash report: the server is simply gone."""
    s = _loaded(module_path, fault_backend, "fatal")
    try:
        with RawClient(s.port) as cl:
            assert_ok(_store(cl, "m", "identity"))
            assert_ok(cl.execute("AI.TENSORSET", "a", "FLOAT", 1, "VALUES", magic))
            cl.send("AI.MODELEXECUTE", "m", "INPUTS", 1, "a", "OUTPUTS", 1, "b")
            with pytest.raises((ConnectionError, OSError, EOFError)):
                cl.read()
        assert s.proc.wait(timeout=60) == rc, s.log()
        assert "crashed by signal" not in s.log()
    finally:
        s.stop()


@plain_server_only
def test_crash_on_create_in_process_kills_the_server(module_path: pathlib.Path,
                                                     fault_backend: pathlib.Path) -> None:
    """A framework that crashes while building a model takes Redis down on its main thread."""
    s = _loaded(module_path, fault_backend, "fatal")
    try:
        with RawClient(s.port) as cl:
            cl.send("AI.MODELSTORE", "m", "ONNX", "CPU", "BLOB", "crash-on-create")
            with pytest.raises((ConnectionError, OSError, EOFError)):
                cl.read()
        rc = s.proc.wait(timeout=60)
        assert rc == -signal.SIGSEGV, (rc, s.log())
        assert f"crashed by signal: {int(signal.SIGSEGV)}" in s.log(), s.log()
    finally:
        s.stop()
