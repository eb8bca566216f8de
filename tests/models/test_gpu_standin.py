"""GPU devices in the core, without a GPU (issue 23, what CI can test): a stand-in backend
(tests/fixtures/backends/onnx_kind.c built with FIXTURE_VARIANT "gpu": variant gpu, every
GPU model an identity, no CUDA touched) takes models on `GPU`, `GPU:<n>` and `CPU`, so the
core's device paths run for real:

* `AI.CONFIG LIST` shows the backend's variant; `MODELGET META` the device as typed;
* a run queue per device string, as RedisAI 1.2 kept them: `GPU` and `GPU:0` are two
  queues, each with its `ai_queue_<device>_...` fields in INFO;
* a DAG whose ops move between CPU and GPU queues; auto-batching on a GPU queue;
* a model deleted while a run of it waits on its GPU queue: the run completes, the key is
  gone;
* a user whose ACL lacks the keys is refused before anything reaches a GPU queue;
* the same fixture as a cpu variant refuses GPU with ONNX Runtime's text.
"""
from __future__ import annotations

import pathlib
import threading

import numpy as np
import pytest

from helpers import assert_error, assert_ok, info_field
from native import FIXTURE_SRC, cc_shared
from redis_server import Connect, RedisServer, StartServer
from resp import RawClient, RespError

pytestmark = pytest.mark.inprocess_only("the stand-in backend is a fixture .so, not a host's")


def build_standin(d: pathlib.Path, variant: str) -> pathlib.Path:
    out = d / f"onnx_kind_{variant}.so"
    cc_shared("-o", str(out), f"-DFIXTURE_VARIANT=\"{variant}\"", str(FIXTURE_SRC / "onnx_kind.c"))
    return out


@pytest.fixture(scope="module")
def standin(tmp_path_factory: pytest.TempPathFactory) -> pathlib.Path:
    return build_standin(tmp_path_factory.mktemp("gpu_standin"), "gpu")


@pytest.fixture(scope="module")
def srv(start_server: StartServer, standin: pathlib.Path) -> RedisServer:
    return start_server(["ONNX", str(standin), "THREADS_PER_QUEUE", "1"])


@pytest.fixture
def c(srv: RedisServer, connect: Connect) -> RawClient:
    return connect(srv)


def vec(*values: float) -> bytes:
    return np.array(values, np.float32).tobytes()


def store(c: RawClient, key: str, device: str, *opts: object) -> None:
    assert_ok(c.execute("AI.MODELSTORE", key, "ONNX", device, *opts, "BLOB", b"stand-in"))


def values(c: RawClient, key: str) -> list[float]:
    return [float(v) for v in c.execute("AI.TENSORGET", key, "VALUES")]


def queue_fields(c: RawClient) -> set[str]:
    info = c.execute("INFO", "MODULES")
    text = info.decode() if isinstance(info, bytes) else str(info)
    # the device is part of the name, colon and all (`ai_queue_GPU:0_...:<value>`), as in 1.2
    return {line.rsplit(":", 1)[0] for line in text.splitlines()
            if line.startswith("ai_queue_") and ":" in line}


def test_the_variant_is_listed(c: RawClient) -> None:
    listed = c.execute("AI.CONFIG", "LIST")
    rows = [dict(zip(r[::2], r[1::2])) for r in listed]
    standin = [r for r in rows if r[b"framework"] == b"FixtureONNX"]  # the loaded one
    assert len(standin) == 1 and standin[0][b"variant"] == b"gpu", listed
    assert standin[0][b"kind"] == b"ONNX"


@pytest.mark.parametrize("device", ["GPU", "GPU:0", "gpu:1", "CPU"])
def test_models_on_every_device_run_and_keep_the_device_as_typed(c: RawClient,
                                                                  device: str) -> None:
    store(c, "m", device)
    meta = c.execute("AI.MODELGET", "m", "META")
    assert meta[meta.index(b"device") + 1] == device.encode()
    assert_ok(c.execute("AI.TENSORSET", "x", "FLOAT", 3, "BLOB", vec(1, 2, 3)))
    assert_ok(c.execute("AI.MODELEXECUTE", "m", "INPUTS", 1, "x", "OUTPUTS", 1, "y"))
    assert values(c, "y") == [1.0, 2.0, 3.0]


def test_gpu_and_gpu0_are_two_queues(c: RawClient) -> None:
    store(c, "g", "GPU")
    store(c, "g0", "GPU:0")
    assert_ok(c.execute("AI.TENSORSET", "x", "FLOAT", 1, "VALUES", 5))
    for key in ("g", "g0"):
        assert_ok(c.execute("AI.MODELEXECUTE", key, "INPUTS", 1, "x", "OUTPUTS", 1, f"y{key}"))
    fields = queue_fields(c)
    assert any(f.startswith("ai_queue_GPU_") for f in fields), sorted(fields)
    assert any(f.startswith("ai_queue_GPU:0_") for f in fields), sorted(fields)


def test_a_dag_moves_between_cpu_and_gpu_queues(c: RawClient) -> None:
    store(c, "on_gpu", "GPU:0")
    store(c, "on_cpu", "CPU")
    store(c, "on_gpu1", "GPU:1")
    reply = c.execute("AI.DAGEXECUTE", "PERSIST", 1, "out", "|>",
                      "AI.TENSORSET", "a", "FLOAT", 2, "VALUES", 7, 8, "|>",
                      "AI.MODELEXECUTE", "on_gpu", "INPUTS", 1, "a", "OUTPUTS", 1, "b", "|>",
                      "AI.MODELEXECUTE", "on_cpu", "INPUTS", 1, "b", "OUTPUTS", 1, "d", "|>",
                      "AI.MODELEXECUTE", "on_gpu1", "INPUTS", 1, "d", "OUTPUTS", 1, "out", "|>",
                      "AI.TENSORGET", "out", "VALUES")
    assert not any(isinstance(r, RespError) for r in reply), reply
    assert [float(v) for v in reply[-1]] == [7.0, 8.0], reply
    assert values(c, "out") == [7.0, 8.0]
    info = c.execute("AI.INFO", "on_gpu1")
    assert info[info.index(b"calls") + 1] == 1


def test_requests_of_several_clients_batch_on_a_gpu_queue(c: RawClient,
                                                          srv: RedisServer) -> None:
    store(c, "mb", "GPU:0", "BATCHSIZE", 4, "MINBATCHSIZE", 2, "MINBATCHTIMEOUT", 2000)
    for i in range(2):
        assert_ok(c.execute("AI.TENSORSET", f"in{i}", "FLOAT", 1, 2, "VALUES", i, i + 10))
    replies: list[object] = [None, None]

    def run(i: int) -> None:
        with RawClient(srv.port) as other:
            replies[i] = other.execute("AI.MODELEXECUTE", "mb", "INPUTS", 1, f"in{i}",
                                       "OUTPUTS", 1, f"out{i}")

    threads = [threading.Thread(target=run, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert replies == ["OK", "OK"]
    for i in range(2):
        assert values(c, f"out{i}") == [float(i), float(i + 10)]
    info = c.execute("AI.INFO", "mb")
    # one batched run of both requests: 2 calls, 2 samples (1.2 counts each request)
    assert info[info.index(b"calls") + 1] == 2
    assert info[info.index(b"samples") + 1] == 2


def test_a_model_deleted_while_its_run_waits_on_the_gpu_queue(c: RawClient,
                                                              srv: RedisServer) -> None:
    # MINBATCHSIZE 2 with one request: it waits MINBATCHTIMEOUT on the queue
    store(c, "mw", "GPU", "BATCHSIZE", 2, "MINBATCHSIZE", 2, "MINBATCHTIMEOUT", 500)
    assert_ok(c.execute("AI.TENSORSET", "w", "FLOAT", 1, 1, "VALUES", 3))
    with RawClient(srv.port) as waiting:
        waiting.send("AI.MODELEXECUTE", "mw", "INPUTS", 1, "w", "OUTPUTS", 1, "wout")
        assert not waiting.pending(0.1)  # held for its batch
        assert_ok(c.execute("AI.MODELDEL", "mw"))
        assert waiting.read() == "OK"  # the run holds the model it was queued with
    assert c.execute("EXISTS", "mw") == 0
    assert values(c, "wout") == [3.0]


def test_a_user_without_the_keys_is_refused_before_the_queue(c: RawClient,
                                                             srv: RedisServer) -> None:
    store(c, "secret_model", "GPU:0")
    assert_ok(c.execute("AI.TENSORSET", "x", "FLOAT", 1, "VALUES", 1))
    assert_ok(c.execute("ACL", "SETUSER", "gpu_user", "on", ">pw", "+@all", "~x*"))
    try:
        with RawClient(srv.port) as u:
            assert_ok(u.execute("AUTH", "gpu_user", "pw"))
            reply = u.execute("AI.MODELEXECUTE", "secret_model", "INPUTS", 1, "x", "OUTPUTS",
                              1, "x_out")
            assert isinstance(reply, RespError) and str(reply).startswith("NOPERM"), reply
        info = c.execute("AI.INFO", "secret_model")
        assert info[info.index(b"calls") + 1] == 0
        assert c.execute("EXISTS", "x_out") == 0
    finally:
        c.execute("ACL", "DELUSER", "gpu_user")


def test_a_cpu_variant_refuses_gpu(start_server: StartServer, connect: Connect,
                                   tmp_path: pathlib.Path) -> None:
    cpu = build_standin(tmp_path, "cpu")
    c = connect(start_server(["ONNX", str(cpu)]))
    for device in ("GPU", "GPU:0"):
        assert_error(c.execute("AI.MODELSTORE", "m", "ONNX", device, "BLOB", b"x"),
                     "ERR GPU requested but ONNX couldn't find CUDA")
    store(c, "m", "CPU")
    assert info_field(c.execute("INFO", "MODULES"), "ai_threads_per_queue") is not None
