"""The channels' shared-memory rings (issue 22 item 3, docs/isolation.md "The ring").

Every message of a data channel goes through a ring in a memfd both processes map, with a
DOORBELL datagram only when the reader sleeps; a message with descriptors or over 16 KiB leaves
a marker in the ring and goes through the socket. These tests run the fault-injection backend
(tests/fault_backend/) in a host: many clients with small and large tensors at once (markers
between ring entries, the ring wrapping many times) get exactly their own outputs; the ring can
be turned off (`REDISAI_ISOLATED_RING=0`); a lone client's worker looks for its answer, and
its host for the next request, for up to WORKER_SPIN_US before they sleep (off, default,
maximum: lone, concurrent and after-sleep requests all answered; the host's spin shows in its
CPU time and ends); and a host that writes an impossible count into its
ring is killed for a protocol error, as for garbage on its socket. No timing is asserted.
"""
from __future__ import annotations

import pathlib
import threading
import time
from typing import Iterator

import numpy as np
import pytest

from fault_injection import fault_env
from helpers import assert_ok, isolated_host, runnable_seconds
from redis_server import RedisServer
from resp import RawClient, RespError

RING_GARBAGE = -6  # fault backend magic: a thread scribbles on the core-to-host ring
LARGE = 300_000    # floats: 1.2 MB, over the arena's 1 MiB per tensor, so a sealed region


def _info(c: RawClient) -> dict:
    return isolated_host(c.execute("INFO", "MODULES"))


def _server(module_path: pathlib.Path, so: pathlib.Path, *args: str, threads: int = 1,
            **env: str) -> RedisServer:
    s = RedisServer(module_path, ["ISOLATE", "ONNX", "THREADS_PER_QUEUE", str(threads), *args],
                    env=fault_env(**env))
    with RawClient(s.port) as c:
        assert_ok(c.execute("AI.CONFIG", "LOADBACKEND", "ONNX", str(so)))
        assert_ok(c.execute("AI.MODELSTORE", "m", "ONNX", "CPU", "BLOB", "identity"))
    return s


def _ring_maps(pid: int) -> int:
    maps = pathlib.Path(f"/proc/{pid}/maps").read_text()
    return sum("redisai-ring" in line for line in maps.splitlines())


@pytest.fixture
def ring_server(module_path: pathlib.Path, fault_backend: pathlib.Path) -> Iterator[RedisServer]:
    s = _server(module_path, fault_backend)
    yield s
    s.stop()


def _client(port: int, n: int, runs: int, errors: list[str]) -> None:
    """Small and large runs in turn; every output must be the client's own input."""
    try:
        with RawClient(port) as c:
            small = np.array([100.0 + n, 1.0, 2.0], dtype=np.float32)
            large = np.full(LARGE, 200.0 + n, dtype=np.float32)
            assert_ok(c.execute("AI.TENSORSET", f"s{n}", "FLOAT", 3, "BLOB", small.tobytes()))
            assert_ok(c.execute("AI.TENSORSET", f"l{n}", "FLOAT", LARGE, "BLOB", large.tobytes()))
            for i in range(runs):
                key, want = (f"l{n}", large) if i % 10 == 9 else (f"s{n}", small)
                r = c.execute("AI.MODELEXECUTE", "m", "INPUTS", 1, key, "OUTPUTS", 1, f"o{n}")
                if r not in ("OK", b"OK"):
                    errors.append(f"client {n} run {i}: {r}")
                    return
                got = np.frombuffer(bytes(c.execute("AI.TENSORGET", f"o{n}", "BLOB")),
                                    dtype=np.float32)
                if not np.array_equal(got, want):
                    errors.append(f"client {n} run {i}: output {got[:3]} of {got.size}")
                    return
    except Exception as e:  # noqa: BLE001 - reported by the test's thread join
        errors.append(f"client {n}: {e!r}")


def _clients(port: int, ns: range, runs: int) -> None:
    """Clients ns at once, each `runs` runs; every one finishes with its own outputs."""
    errors: list[str] = []
    threads = [threading.Thread(target=_client, args=(port, n, runs, errors)) for n in ns]
    for t in threads:
        t.start()
    for t in threads:
        t.join(300)
    assert not errors and not any(t.is_alive() for t in threads), errors[:5]


def test_many_clients_through_the_ring(ring_server: RedisServer) -> None:
    _clients(ring_server.port, range(8), 150)
    with RawClient(ring_server.port) as c:
        info = _info(c)
        assert info["restarts"] == "0", info
        # The one worker's channel (and any other core thread's) has its ring mapped.
        assert _ring_maps(int(info["pid"])) >= 1, info


def test_two_workers_have_a_ring_each(module_path: pathlib.Path,
                                      fault_backend: pathlib.Path) -> None:
    s = _server(module_path, fault_backend, threads=2)
    try:
        _clients(s.port, range(8), 100)
        with RawClient(s.port) as c:
            info = _info(c)
            assert info["restarts"] == "0", info
            assert _ring_maps(int(info["pid"])) >= 2, info
    finally:
        s.stop()


def test_ring_off_uses_the_socket(module_path: pathlib.Path,
                                  fault_backend: pathlib.Path) -> None:
    s = _server(module_path, fault_backend, REDISAI_ISOLATED_RING="0")
    try:
        _clients(s.port, range(4), 40)
        with RawClient(s.port) as c:
            info = _info(c)
            assert _ring_maps(int(info["pid"])) == 0, info
    finally:
        s.stop()


def test_garbage_in_the_ring_is_a_protocol_error(ring_server: RedisServer) -> None:
    with RawClient(ring_server.port) as c:
        assert_ok(c.execute("AI.TENSORSET", "bad", "FLOAT", 2, "VALUES", RING_GARBAGE, 0))
        assert_ok(c.execute("AI.TENSORSET", "ok", "FLOAT", 2, "VALUES", 0.5, 2))
        before = _info(c)
        c.execute("AI.MODELEXECUTE", "m", "INPUTS", 1, "bad", "OUTPUTS", 1, "y")
        # The scribbling thread races with the host's own writes of its count: the core sees
        # the impossible count before one of the next sends, fails that run and kills the host.
        failed = None
        deadline = time.monotonic() + 30
        while failed is None and time.monotonic() < deadline:
            r = c.execute("AI.MODELEXECUTE", "m", "INPUTS", 1, "ok", "OUTPUTS", 1, "y")
            if isinstance(r, RespError):
                failed = str(r)
        assert failed is not None, "the host was never refused"
        assert failed.startswith("ERR ONNX backend process exited (killed: protocol error: "
                                 "ring: the reader's counter is out of range)"), failed
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            after = _info(c)
            if after["state"] == "ready" and after["pid"] != before["pid"] and \
                    after.get("recreating", "0") == "0":
                break
            time.sleep(0.02)
        assert after["last_exit"] == "killed_protocol", after
        assert int(after["restarts"]) == int(before["restarts"]) + 1, after
        # The new host's ring works.
        assert_ok(c.execute("AI.MODELEXECUTE", "m", "INPUTS", 1, "ok", "OUTPUTS", 1, "y"))
        assert [float(v) for v in c.execute("AI.TENSORGET", "y", "VALUES")] == [0.5, 2.0]


@pytest.mark.parametrize("spin", ["0", "200", "10000"])
def test_answers_are_found_alone_together_and_after_sleeping(module_path: pathlib.Path,
                                                             fault_backend: pathlib.Path,
                                                             spin: str) -> None:
    s = _server(module_path, fault_backend, "WORKER_SPIN_US", spin)
    try:
        errors: list[str] = []
        _client(s.port, 0, 200, errors)   # alone: the worker spins for its answers
        assert not errors, errors
        _clients(s.port, range(1, 17), 30)
        time.sleep(0.05)   # past any spin: the worker and the host sleep
        _client(s.port, 0, 3, errors)
        assert not errors, errors
    finally:
        s.stop()


@pytest.mark.parametrize("clients", [1, 2])
def test_the_hosts_spin_happens_and_ends(module_path: pathlib.Path,
                                         fault_backend: pathlib.Path, clients: int) -> None:
    # One client, or two taking turns: with at most two clients waiting, the host looks
    # for the next run (and the worker for the answer) before sleeping.
    spent, wall = {}, {}
    for spin in ("0", "10000"):
        s = _server(module_path, fault_backend, "WORKER_SPIN_US", spin)
        try:
            with RawClient(s.port) as c, RawClient(s.port) as other:
                turns = [c, other][:clients]
                assert_ok(c.execute("AI.TENSORSET", "x", "FLOAT", 2, "VALUES", 0.5, 2))
                assert_ok(c.execute("AI.MODELEXECUTE", "m", "INPUTS", 1, "x", "OUTPUTS", 1, "y"))
                pid = int(_info(c)["pid"])
                time.sleep(0.05)
                before, start_s = runnable_seconds(pid), time.monotonic()
                for i in range(25):
                    assert_ok(turns[i % clients].execute("AI.MODELEXECUTE", "m", "INPUTS", 1,
                                                         "x", "OUTPUTS", 1, "y"))
                    time.sleep(0.02)   # longer than the spin: each ends in sleep
                spent[spin] = runnable_seconds(pid) - before
                wall[spin] = time.monotonic() - start_s
        finally:
            s.stop()
    # 25 spins of up to 10 ms after each answer: about 0.25 s more that the host's channel
    # thread runs or waits to run (its CPU time alone depends on the machine's load), and
    # each spin ends: a host that spun on would be runnable for the whole run of requests
    assert spent["10000"] - spent["0"] > 0.1, (spent, wall)
    assert spent["10000"] < 0.8 * wall["10000"], (spent, wall)
