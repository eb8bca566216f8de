"""Devices on these CPU builds: GPU models and scripts fail with the backends' "couldn't find
CUDA" texts (TFLITE: 1.2's "Failed to set GPU delegate"), CPU:n is kept as typed, and TFLITE
loads like the others and refuses a blob that is not a model with 1.2's text."""
from __future__ import annotations

import pytest

import onnx_models
import tf_graphs
import torch_models
from helpers import LOAD_ERR, assert_error, assert_error_startswith, assert_ok, info_field
from redis_server import Connect, RedisServer
from resp import RawClient

TF_IO = ("INPUTS", 2, "a", "b", "OUTPUTS", 1, "mul")


@pytest.fixture
def c(all_backends_server: RedisServer, connect: Connect) -> RawClient:
    return connect(all_backends_server)


def blob_of(kind: str) -> bytes:
    return {"TF": tf_graphs.mul_graph, "TORCH": lambda: torch_models.add().blob,
            "ONNX": lambda: onnx_models.add().blob}[kind]()


CUDA_TEXT = {
    "TF": "ERR GPU requested but TF couldn't find CUDA",
    "TORCH": "GPU requested but Torch couldn't find CUDA",
    "ONNX": "ERR GPU requested but ONNX couldn't find CUDA",
}


@pytest.mark.parametrize("device", ["GPU", "GPU:0", "gpu:1"])
@pytest.mark.parametrize("kind", ["TF", "TORCH", "ONNX"])
def test_gpu_model_needs_cuda(c, kind, device):
    io = TF_IO if kind == "TF" else ()
    assert_error(c.execute("AI.MODELSTORE", "m", kind, device, *io, "BLOB", blob_of(kind)),
                 CUDA_TEXT[kind])
    assert c.execute("EXISTS", "m") == 0
    assert c.execute("PING") == "PONG"


def test_gpu_script_needs_cuda(c):
    src = "def f(tensors: List[Tensor], keys: List[str], args: List[str]):\n    return tensors[0]\n"
    assert_error(c.execute("AI.SCRIPTSTORE", "s", "GPU", "ENTRY_POINTS", 1, "f", "SOURCE", src),
                 CUDA_TEXT["TORCH"])


def test_refused_gpu_stores_create_no_run_queue(c):
    """A store the backend refuses leaves no run queue behind (as 1.2, which made the queue
    only after the model was created): ONNX's run-sessions figure, THREADS_PER_QUEUE x the
    queues, does not move."""
    def sessions() -> str | None:
        return info_field(c.execute("INFO", "MODULES"), "ai_onnxruntime_maximum_run_sessions_number")

    before = sessions()
    assert before is not None
    for kind, device in (("ONNX", "GPU:5"), ("TORCH", "GPU:6"), ("TF", "GPU:7")):
        io = TF_IO if kind == "TF" else ()
        assert_error(c.execute("AI.MODELSTORE", "m", kind, device, *io, "BLOB", blob_of(kind)),
                     CUDA_TEXT[kind])
    src = "def f(tensors: List[Tensor], keys: List[str], args: List[str]):\n    return tensors[0]\n"
    assert_error(c.execute("AI.SCRIPTSTORE", "s", "GPU:8", "ENTRY_POINTS", 1, "f", "SOURCE", src),
                 CUDA_TEXT["TORCH"])
    assert sessions() == before
    assert_ok(c.execute("AI.MODELSTORE", "m", "ONNX", "CPU:9", "BLOB", blob_of("ONNX")))
    assert int(sessions() or 0) > int(before)


@pytest.mark.parametrize("device", ["CPU", "cpu", "CPU:0", "cpu:3"])
@pytest.mark.parametrize("kind", ["TF", "TORCH", "ONNX"])
def test_cpu_device_kept_as_typed(c, kind, device):
    io = TF_IO if kind == "TF" else ()
    assert_ok(c.execute("AI.MODELSTORE", "m", kind, device, *io, "BLOB", blob_of(kind)))
    meta = c.execute("AI.MODELGET", "m", "META")
    assert meta[meta.index(b"device") + 1] == device.encode()


def test_tflite_loads_and_refuses_what_is_not_a_model(c):
    assert_ok(c.execute("AI.CONFIG", "LOADBACKEND", "TFLITE", "redisai_tflite/redisai_tflite.so"))
    assert_error_startswith(c.execute("AI.MODELSTORE", "m", "TFLITE", "CPU", "BLOB", b"x"),
                            "Failed to load model from buffer")
    assert_error_startswith(c.execute("AI.MODELSET", "m", "TFLITE", "CPU", "BLOB", b"x"),
                            "Failed to load model from buffer")
    assert_error(c.execute("AI.MODELSET", "m", "TFLITE", "CPU", "BATCHSIZE", 2, "BLOB", b"x"),
                 "ERR Auto-batching not supported by the TFLITE backend")
    assert_error_startswith(c.execute("AI.MODELSTORE", "m", "TFLITE", "GPU", "BLOB", b"x"),
                            "Failed to set GPU delegate")
    assert_error(c.execute("AI.MODELSET", "m", "TFLITE", "XPU", "BLOB", b"x"), "ERR Unsupported device")
    assert info_field(c.execute("INFO", "MODULES"), "ai_TensorFlowLite_version") == "2.3.0"
    assert c.execute("EXISTS", "m") == 0
