"""A run whose host cannot take it yet is parked, not waited for (issue 44, docs/isolation.md
"Parked runs", docs/architecture.md "A request's life").

While a restarted host re-creates a model, a run of that model used to hold its run queue's
worker (up to MODEL_EXECUTION_TIMEOUT, then the next one did the same): an in-process Torch
run behind three such runs on the same CPU queue was answered after 14.85 s. Now the worker
parks the run in its queue until the model is runnable and takes the requests behind it.

Each test holds the re-creation with the fault backend's `slow-if-exists <file>` and checks
an order (the Torch run is answered while the hold is in place: `<file>.done` absent), never a
speed. No new command.
"""
from __future__ import annotations

import os
import pathlib
import signal
import threading
import time

import numpy as np
import pytest

import torch_models
from fault_injection import fault_env
from helpers import assert_ok, isolated_host, wait_file, wait_isolated_ready
from redis_server import RedisServer
from resp import RawClient, RespError


def _info(c: RawClient) -> dict:
    return isolated_host(c.execute("INFO", "MODULES"))


@pytest.fixture
def srv(module_path: pathlib.Path, fault_backend: pathlib.Path):
    # THREADS_PER_QUEUE 1: one worker, which a waiting run would hold.
    s = RedisServer(module_path, ["ISOLATE", "ONNX", "THREADS_PER_QUEUE", "1",
                                  "MODEL_EXECUTION_TIMEOUT", "20000"], env=fault_env())
    with RawClient(s.port) as c:
        assert_ok(c.execute("AI.CONFIG", "LOADBACKEND", "ONNX", str(fault_backend)))
    yield s
    s.stop()


def _store_torch(c: RawClient) -> tuple[list[float], list[float]]:
    """An in-process Torch model "t" (a + b) and its inputs "ta", "tb": the expected sum."""
    m = torch_models.add()
    assert_ok(c.execute("AI.MODELSTORE", "t", "TORCH", "CPU", "BLOB", m.blob))
    a, b = m.sample
    assert_ok(c.execute("AI.TENSORSET", "ta", "FLOAT", *a.shape, "BLOB", a.tobytes()))
    assert_ok(c.execute("AI.TENSORSET", "tb", "FLOAT", *b.shape, "BLOB", b.tobytes()))
    return [float(v) for v in (a + b).ravel()], []


def _slow_runner(port: int, k: int, replies: list) -> None:
    with RawClient(port) as cl:
        assert_ok(cl.execute("AI.TENSORSET", f"x{k}", "FLOAT", 2, "VALUES", 10.5 + k, 1))
        replies.append((k, cl.execute("AI.MODELEXECUTE", "slow", "INPUTS", 1, f"x{k}",
                                      "OUTPUTS", 1, f"y{k}")))


def test_an_in_process_run_is_not_held_by_a_model_being_re_created(
        srv: RedisServer, tmp_path: pathlib.Path) -> None:
    hold = tmp_path / "hold"
    with RawClient(srv.port) as c:
        assert_ok(c.execute("AI.MODELSTORE", "slow", "ONNX", "CPU", "BLOB",
                            f"identity\nslow-if-exists {hold}"))
        want, _ = _store_torch(c)
        before = _info(c)
        hold.touch()
        replies: list = []
        runners = []
        try:
            os.kill(int(before["pid"]), signal.SIGKILL)
            wait_file(pathlib.Path(f"{hold}.started"))
            # Three runs of the model being re-created, then one in-process Torch run on the
            # same CPU queue (one worker).
            for k in range(3):
                t = threading.Thread(target=_slow_runner, args=(srv.port, k, replies))
                t.start()
                runners.append(t)
            deadline = time.monotonic() + 10
            time.sleep(0.3)  # the three are queued (parked) before the Torch run
            started = time.monotonic()
            assert_ok(c.execute("AI.MODELEXECUTE", "t", "INPUTS", 2, "ta", "tb", "OUTPUTS", 1,
                                "tc"))
            took = time.monotonic() - started
            got = np.frombuffer(c.execute("AI.TENSORGET", "tc", "BLOB"), dtype=np.float32)
            assert got.tolist() == pytest.approx(want)
            # Answered while the re-creation is still held: the worker did not wait for it.
            assert not pathlib.Path(f"{hold}.done").exists(), took
            assert replies == [], replies
            assert time.monotonic() < deadline
        finally:
            hold.unlink()
            for t in runners:
                t.join(30)
        # The parked runs ran once the model was re-created, each with its own output.
        assert sorted(k for k, _ in replies) == [0, 1, 2], replies
        for k, r in replies:
            assert r in (b"OK", "OK"), (k, r)
            assert [float(v) for v in c.execute("AI.TENSORGET", f"y{k}", "VALUES")] == \
                [10.5 + k, 1.0]
        wait_isolated_ready(c, int(before["pid"]))
        assert srv.alive()


def test_a_parked_run_gives_up_at_the_execution_timeout(
        module_path: pathlib.Path, fault_backend: pathlib.Path, tmp_path: pathlib.Path) -> None:
    """A run parked longer than MODEL_EXECUTION_TIMEOUT fails with the restart's error (as a
    waited-for run did), and the Torch run behind it is not held meanwhile."""
    hold = tmp_path / "hold"
    s = RedisServer(module_path, ["ISOLATE", "ONNX", "THREADS_PER_QUEUE", "1",
                                  "MODEL_EXECUTION_TIMEOUT", "1500"], env=fault_env())
    try:
        with RawClient(s.port) as c:
            assert_ok(c.execute("AI.CONFIG", "LOADBACKEND", "ONNX", str(fault_backend)))
            assert_ok(c.execute("AI.MODELSTORE", "slow", "ONNX", "CPU", "BLOB",
                                f"identity\nslow-if-exists {hold}"))
            _store_torch(c)
            pid = int(_info(c)["pid"])
            hold.touch()
            replies: list = []
            try:
                os.kill(pid, signal.SIGKILL)
                wait_file(pathlib.Path(f"{hold}.started"))
                t = threading.Thread(target=_slow_runner, args=(s.port, 0, replies))
                t.start()
                time.sleep(0.2)
                assert_ok(c.execute("AI.MODELEXECUTE", "t", "INPUTS", 2, "ta", "tb",
                                    "OUTPUTS", 1, "tc"))
                assert replies == []
                t.join(10)
                assert not t.is_alive()
                assert not pathlib.Path(f"{hold}.done").exists()
            finally:
                hold.unlink()
            (k, r), = replies
            assert isinstance(r, RespError), r
            assert str(r) == ("ERR ONNX backend process is restarting after it exited "
                              "(signal 9 SIGKILL); try again"), r
            wait_isolated_ready(c, pid)
            assert_ok(c.execute("AI.MODELEXECUTE", "slow", "INPUTS", 1, "x0", "OUTPUTS", 1,
                                "y0"))
            assert s.alive()
    finally:
        s.stop()


def test_a_dag_parks_between_an_in_process_op_and_an_isolated_one(
        srv: RedisServer, tmp_path: pathlib.Path) -> None:
    """A DAG whose Torch op ran goes on to the model being re-created: it is parked there (the
    next request, a Torch run, is answered first) and finishes once the model is back."""
    hold = tmp_path / "hold"
    with RawClient(srv.port) as c:
        assert_ok(c.execute("AI.MODELSTORE", "slow", "ONNX", "CPU", "BLOB",
                            f"identity\nslow-if-exists {hold}"))
        want, _ = _store_torch(c)
        pid = int(_info(c)["pid"])
        hold.touch()
        replies: list = []

        def dag() -> None:
            with RawClient(srv.port) as cl:
                replies.append(cl.execute(
                    "AI.DAGEXECUTE", "LOAD", 2, "ta", "tb", "|>",
                    "AI.MODELEXECUTE", "t", "INPUTS", 2, "ta", "tb", "OUTPUTS", 1, "s", "|>",
                    "AI.MODELEXECUTE", "slow", "INPUTS", 1, "s", "OUTPUTS", 1, "o", "|>",
                    "AI.TENSORGET", "o", "VALUES"))

        try:
            os.kill(pid, signal.SIGKILL)
            wait_file(pathlib.Path(f"{hold}.started"))
            t = threading.Thread(target=dag)
            t.start()
            time.sleep(0.3)
            assert_ok(c.execute("AI.MODELEXECUTE", "t", "INPUTS", 2, "ta", "tb", "OUTPUTS", 1,
                                "tc"))
            assert replies == []
            assert not pathlib.Path(f"{hold}.done").exists()
        finally:
            hold.unlink()
            t.join(30)
        (r,) = replies
        assert isinstance(r, list) and r[:2] in ([b"OK", b"OK"], ["OK", "OK"]), r
        assert [float(v) for v in r[2]] == pytest.approx(want), r
        assert srv.alive()
