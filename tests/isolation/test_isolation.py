"""Isolated backends with the real frameworks (issue 13, docs/isolation.md).

`ISOLATE TF ISOLATE TORCH ISOLATE ONNX`: each backend runs in its own `redisai-backend-host`.
What a client sees must not change (the same replies as in-process, scripts' callbacks as the
calling user), and what isolation adds must hold with real frameworks: TF and Torch runs get a
hard deadline, `kill -9` of a host during real runs costs only the runs in flight, INFO and
AI.CONFIG LIST show the hosts.
"""
from __future__ import annotations

import os
import signal
import threading
import time

import numpy as np
import pytest

import onnx_models
import tf_graphs
import torch_models
from helpers import assert_error, assert_ok, isolated_hosts
from redis_server import Connect, RedisServer, StartServer
from resp import RawClient, RespError

ALL = ["ISOLATE", "TF", "ISOLATE", "TORCH", "ISOLATE", "ONNX"]


def _hosts(c: RawClient) -> dict[str, dict]:
    return {d["kind"]: d for d in isolated_hosts(c.execute("INFO", "MODULES")).values()}


def _wait_ready(c: RawClient, kind: str, old_pid: int | None = None) -> dict:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        info = _hosts(c).get(kind)
        if info and info["state"] == "ready" and int(info["pid"]) not in (0, old_pid) \
                and info.get("recreating", "0") == "0":
            return info
        time.sleep(0.02)
    raise AssertionError(f"{kind} host not ready: {_hosts(c)}")


@pytest.fixture(scope="module")
def iso(start_server: StartServer) -> RedisServer:
    return start_server([*ALL, "MODEL_EXECUTION_TIMEOUT", "1000"])


@pytest.fixture
def c(iso: RedisServer, connect: Connect) -> RawClient:
    return connect(iso)


def _set(c: RawClient, key: str, arr: np.ndarray) -> None:
    assert_ok(c.execute("AI.TENSORSET", key, "FLOAT", *arr.shape, "BLOB", arr.tobytes()))


def _get(c: RawClient, key: str) -> np.ndarray:
    meta = c.execute("AI.TENSORGET", key, "META", "BLOB")
    d = dict(zip(meta[::2], meta[1::2]))
    shape = [int(x) for x in d.get(b"shape", d.get("shape"))]
    return np.frombuffer(d.get(b"blob", d.get("blob")), np.float32).reshape(shape)


def test_three_kinds_run_in_hosts_and_answer_as_in_process(c: RawClient, iso: RedisServer) -> None:
    cnn = onnx_models.cnn()
    img = torch_models.cnn_sample()
    assert_ok(c.execute("AI.MODELSTORE", "onnx_cnn", "ONNX", "CPU", "BLOB", cnn.blob))
    assert_ok(c.execute("AI.MODELSTORE", "torch_cnn", "TORCH", "CPU", "BLOB",
                        torch_models.cnn().blob))
    assert_ok(c.execute("AI.MODELSTORE", "tf_mul", "TF", "CPU", "INPUTS", 2, "a", "b",
                        "OUTPUTS", 1, "mul", "BLOB", tf_graphs.mul_graph()))
    _set(c, "img", img)
    assert_ok(c.execute("AI.MODELEXECUTE", "onnx_cnn", "INPUTS", 1, "img", "OUTPUTS", 1, "o1"))
    assert_ok(c.execute("AI.MODELEXECUTE", "torch_cnn", "INPUTS", 1, "img", "OUTPUTS", 1, "o2"))
    np.testing.assert_allclose(_get(c, "o1"), cnn.run(img)[0], rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(_get(c, "o2"), _get(c, "o1"), rtol=1e-4, atol=1e-4)
    a = np.array([[1.5, 2], [3, -4]], np.float32)
    _set(c, "a", a)
    _set(c, "b", a)
    assert_ok(c.execute("AI.MODELEXECUTE", "tf_mul", "INPUTS", 2, "a", "b", "OUTPUTS", 1, "m"))
    np.testing.assert_array_equal(_get(c, "m"), a * a)
    hosts = _hosts(c)
    assert sorted(hosts) == ["ONNX", "TF", "TORCH"], hosts
    pids = {int(h["pid"]) for h in hosts.values()}
    assert len(pids) == 3 and iso.proc.pid not in pids
    for h in hosts.values():
        assert h["state"] == "ready" and int(h["rss"]) > 0 and h["last_exit"] == "none", h
    listing = c.execute("AI.CONFIG", "LIST")
    text = str(listing)
    assert "isolated" in text, listing


def test_script_callbacks_come_back_to_the_core(c: RawClient) -> None:
    # redis.execute runs in Redis as the client's call; model_execute runs a model on the same
    # TORCH host, nested inside the script's own run.
    assert_ok(c.execute("AI.SCRIPTSTORE", "s", "CPU", "ENTRY_POINTS",
                        len(torch_models.REDIS_ENTRY_POINTS), *torch_models.REDIS_ENTRY_POINTS,
                        "SOURCE", torch_models.REDIS_SCRIPT))
    assert_ok(c.execute("AI.SCRIPTEXECUTE", "s", "set_incr", "KEYS", 1, "counter", "ARGS", 1, "41",
                        "OUTPUTS", 1, "out"))
    assert c.execute("GET", "counter") in (b"42", "42")
    assert [int(v) for v in c.execute("AI.TENSORGET", "out", "VALUES")] == [42]
    assert_ok(c.execute("AI.MODELSTORE", "add", "TORCH", "CPU", "BLOB", torch_models.add().blob))
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    _set(c, "x", x)
    _set(c, "y", x)
    assert_ok(c.execute("AI.SCRIPTEXECUTE", "s", "model_run", "KEYS", 1, "add", "INPUTS", 2, "x",
                        "y", "OUTPUTS", 1, "z"))
    # The script's model_run returns the model's output doubled (torch_models.REDIS_SCRIPT).
    np.testing.assert_array_equal(_get(c, "z"), (x + x) * 2)


def test_script_redis_execute_obeys_the_callers_acl(c: RawClient, iso: RedisServer) -> None:
    assert_ok(c.execute("AI.SCRIPTSTORE", "mine:s", "CPU", "ENTRY_POINTS",
                        len(torch_models.REDIS_ENTRY_POINTS), *torch_models.REDIS_ENTRY_POINTS,
                        "SOURCE", torch_models.REDIS_SCRIPT))
    assert_ok(c.execute("ACL", "SETUSER", "iso_limited", "on", ">pw", "+@all", "~mine:*",
                        "-@dangerous"))
    try:
        with RawClient(iso.port) as lim:
            assert_ok(lim.execute("AUTH", "iso_limited", "pw"))
            assert_ok(lim.execute("AI.SCRIPTEXECUTE", "mine:s", "set_get", "KEYS", 1, "mine:k",
                                  "ARGS", 1, "7", "OUTPUTS", 1, "mine:out"))
            reply = lim.execute("AI.SCRIPTEXECUTE", "mine:s", "set_get", "KEYS", 1, "other:k",
                                "ARGS", 1, "7", "OUTPUTS", 1, "mine:out2")
            assert isinstance(reply, RespError) and "NOPERM" in str(reply), reply
        assert c.execute("EXISTS", "other:k") == 0
    finally:
        c.execute("ACL", "DELUSER", "iso_limited")


def test_tf_run_gets_a_hard_deadline(c: RawClient) -> None:
    # In-process a TF run cannot be stopped; isolated, it is killed with its host.
    assert_ok(c.execute("AI.MODELSTORE", "slow", "TF", "CPU", "INPUTS", 1, "n", "OUTPUTS", 1,
                        "out", "BLOB", tf_graphs.slow_graph()))
    assert_ok(c.execute("AI.TENSORSET", "n", "INT32", 1, "VALUES", 10))
    assert_ok(c.execute("AI.MODELEXECUTE", "slow", "INPUTS", 1, "n", "OUTPUTS", 1, "out"))
    before = _wait_ready(c, "TF")
    assert_ok(c.execute("AI.TENSORSET", "n", "INT32", 1, "VALUES", 2_000_000_000))
    t0 = time.monotonic()
    assert_error(c.execute("AI.MODELEXECUTE", "slow", "INPUTS", 1, "n", "OUTPUTS", 1, "out"),
                 "ERR TF backend process exited (killed after slow ran past "
                 "MODEL_EXECUTION_TIMEOUT (1000 ms)) while running slow")
    assert time.monotonic() - t0 < 30
    after = _wait_ready(c, "TF", int(before["pid"]))
    assert after["last_exit"] == "killed_timeout", after
    assert_ok(c.execute("AI.TENSORSET", "n", "INT32", 1, "VALUES", 10))
    assert_ok(c.execute("AI.MODELEXECUTE", "slow", "INPUTS", 1, "n", "OUTPUTS", 1, "out"))


def test_kill_9_during_real_cnn_runs(c: RawClient, iso: RedisServer) -> None:
    cnn = onnx_models.cnn()
    img = torch_models.cnn_sample()
    want = cnn.run(img)[0]
    assert_ok(c.execute("AI.MODELSTORE", "cnn", "ONNX", "CPU", "BLOB", cnn.blob))
    _set(c, "img", img)
    assert_ok(c.execute("AI.MODELEXECUTE", "cnn", "INPUTS", 1, "img", "OUTPUTS", 1, "o"))
    stop = threading.Event()
    errors: list[str] = []
    counts = {"ok": 0, "err": 0}

    def loop(i: int) -> None:
        with RawClient(iso.port) as cl:
            while not stop.is_set():
                r = cl.execute("AI.MODELEXECUTE", "cnn", "INPUTS", 1, "img", "OUTPUTS", 1, f"o{i}")
                if isinstance(r, RespError):
                    if not (str(r).startswith("ERR ONNX backend process exited (signal 9 SIGKILL")
                            or str(r).startswith("ERR ONNX backend process is restarting")):
                        errors.append(str(r))
                    counts["err"] += 1
                    continue
                counts["ok"] += 1
                got = _get(cl, f"o{i}")
                if not np.allclose(got, want, rtol=1e-5, atol=1e-5):
                    errors.append(f"wrong output {got}")

    threads = [threading.Thread(target=loop, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    pid = int(_wait_ready(c, "ONNX")["pid"])
    for _ in range(5):
        time.sleep(0.2)
        os.kill(pid, signal.SIGKILL)
        pid = int(_wait_ready(c, "ONNX", pid)["pid"])
    time.sleep(0.2)
    stop.set()
    for t in threads:
        t.join(60)
    assert not errors, errors[:5]
    assert counts["ok"] > 0, counts
    assert iso.alive()
    assert_ok(c.execute("AI.MODELEXECUTE", "cnn", "INPUTS", 1, "img", "OUTPUTS", 1, "o"))


def test_torch_host_killed_between_script_runs(c: RawClient) -> None:
    assert_ok(c.execute("AI.SCRIPTSTORE", "s", "CPU", "ENTRY_POINTS",
                        len(torch_models.REDIS_ENTRY_POINTS), *torch_models.REDIS_ENTRY_POINTS,
                        "SOURCE", torch_models.REDIS_SCRIPT))
    assert_ok(c.execute("AI.SCRIPTEXECUTE", "s", "set_get", "KEYS", 1, "k", "ARGS", 1, "5",
                        "OUTPUTS", 1, "o"))
    before = _wait_ready(c, "TORCH")
    os.kill(int(before["pid"]), signal.SIGKILL)
    after = _wait_ready(c, "TORCH", int(before["pid"]))
    assert int(after["restarts"]) == int(before["restarts"]) + 1
    # The script was re-created in the new host from the source Redis keeps.
    assert int(after["scripts"]) >= 1, after
    assert_ok(c.execute("AI.SCRIPTEXECUTE", "s", "set_get", "KEYS", 1, "k", "ARGS", 1, "6",
                        "OUTPUTS", 1, "o"))
    assert [int(v) for v in c.execute("AI.TENSORGET", "o", "VALUES")] == [6]
