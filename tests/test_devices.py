"""Devices and TFLITE (spec sections 4, 4.1, 8.1, 10, 12.1) with all three real backends.

* CPU, CPU:n, GPU, GPU:n are parsed and kept exactly as typed (MODELGET, SCRIPTGET,
  AI.INFO); on these CPU builds a GPU model or script fails with the spec's "couldn't find
  CUDA" text of its backend, and nothing is stored.
* TFLITE is parsed everywhere the spec names it, but no TFLite C library is installable
  here: loading or using it fails with an error that says so, and the log says why.

One server for the module with TF, TORCH and ONNX loaded at load time.
"""
from __future__ import annotations

from typing import Iterator

import numpy as np
import pytest

import onnx_models as om
import tf_graphs
import torch_models as tm
from conftest import RedisServer, start_expecting_failure
from helpers import LOAD_ERR, LogMark, assert_error, assert_error_startswith, assert_ok
from model_io import assert_same, get, put
from resp import RawClient

CUDA = {
    "TF": "ERR GPU requested but TF couldn't find CUDA",
    "TORCH": "GPU requested but Torch couldn't find CUDA",
    "ONNX": "ERR GPU requested but ONNX couldn't find CUDA",
}
GPU_DEVICES = ["GPU", "GPU:0", "gpu", "gpu:1", "GPU:12345"]
CPU_DEVICES = ["CPU", "CPU:0", "cpu", "Cpu:1", "CPU:12345"]
NO_TFLITE = "ERR Could not load backend"


@pytest.fixture(scope="module")
def srv(module_path, all_backend_paths) -> Iterator[RedisServer]:
    args: list[str] = []
    for kind, path in all_backend_paths.items():
        args += [kind, str(path)]
    server = RedisServer(module_path, args)
    yield server
    server.stop()


@pytest.fixture
def c(srv: RedisServer) -> Iterator[RawClient]:
    client = RawClient(srv.port)
    assert_ok(client.execute("FLUSHALL"))
    yield client
    client.close()
    assert srv.alive(), srv.log()


def store_args(kind: str) -> list:
    if kind == "TF":
        return ["INPUTS", 2, "a", "b", "OUTPUTS", 1, "mul", "BLOB", tf_graphs.mul_graph()]
    if kind == "TORCH":
        return ["BLOB", tm.add().blob]
    return ["BLOB", om.add().blob]


def set_args(kind: str) -> list:
    if kind == "TF":
        return ["INPUTS", "a", "b", "OUTPUTS", "mul", "BLOB", tf_graphs.mul_graph()]
    return store_args(kind)


# --------------------------------------------------------------------------------------
# GPU on a CPU build
# --------------------------------------------------------------------------------------

@pytest.mark.parametrize("kind", list(CUDA))
@pytest.mark.parametrize("device", GPU_DEVICES)
def test_gpu_model_without_cuda(c, kind, device):
    assert_error(c.execute("AI.MODELSTORE", "m", kind, device, *store_args(kind)), CUDA[kind])
    assert_error(c.execute("AI.MODELSET", "m", kind, device, *set_args(kind)), CUDA[kind])
    assert c.execute("EXISTS", "m") == 0
    assert c.execute("PING") == "PONG"


@pytest.mark.parametrize("device", ["GPU", "GPU:0", "gpu:3"])
def test_gpu_script_without_cuda(c, device):
    cuda = CUDA["TORCH"]
    assert_error(c.execute("AI.SCRIPTSTORE", "s", device, "ENTRY_POINTS", 1, "bar", "SOURCE",
                           tm.SCRIPT), cuda)
    assert_error(c.execute("AI.SCRIPTSTORE", "s", device, "TAG", "t", "ENTRY_POINTS", 1, "bar",
                           "SOURCE", tm.SCRIPT), cuda)
    assert_error(c.execute("AI.SCRIPTSET", "s", device, "SOURCE", tm.SCRIPT), cuda)
    assert c.execute("EXISTS", "s") == 0
    assert c.execute("PING") == "PONG"


def test_gpu_failure_leaves_existing_model(c):
    assert_ok(c.execute("AI.MODELSTORE", "m", "TORCH", "CPU", *store_args("TORCH")))
    assert_error(c.execute("AI.MODELSTORE", "m", "TORCH", "GPU", *store_args("TORCH")), CUDA["TORCH"])
    assert c.execute("AI.MODELGET", "m", "META")[3] == b"CPU"


# --------------------------------------------------------------------------------------
# CPU devices kept as typed
# --------------------------------------------------------------------------------------

@pytest.mark.parametrize("kind", list(CUDA))
@pytest.mark.parametrize("device", CPU_DEVICES)
def test_cpu_device_kept_as_typed(c, kind, device):
    assert_ok(c.execute("AI.MODELSTORE", "m", kind, device, "TAG", "t", *store_args(kind)))
    assert c.execute("AI.MODELGET", "m", "META")[:4] == [b"backend", kind.encode(), b"device",
                                                         device.encode()]
    info = c.execute("AI.INFO", "m")
    assert dict(zip(info[::2], info[1::2]))[b"device"] == device.encode(), info
    x = np.array([1.5, 2, 3], np.float32)
    put(c, "a", x)
    put(c, "b", x)
    assert_ok(c.execute("AI.MODELEXECUTE", "m", "INPUTS", 2, "a", "b", "OUTPUTS", 1, "o"))
    assert_same(get(c, "o"), x * x if kind == "TF" else x + x)
    assert_ok(c.execute("AI.MODELSET", "m2", kind, device, *set_args(kind)))
    assert c.execute("AI.MODELGET", "m2", "META")[3] == device.encode()


@pytest.mark.parametrize("device", CPU_DEVICES + ["CPUX"])
def test_script_cpu_device_kept_as_typed(c, device):
    assert_ok(c.execute("AI.SCRIPTSTORE", "s", device, "ENTRY_POINTS", 1, "bar", "SOURCE", tm.SCRIPT))
    assert c.execute("AI.SCRIPTGET", "s", "META")[:2] == [b"device", device.encode()]
    x = np.array([1, 2], np.float32)
    put(c, "a", x)
    assert_ok(c.execute("AI.SCRIPTEXECUTE", "s", "bar", "INPUTS", 2, "a", "a", "OUTPUTS", 1, "o"))
    assert_same(get(c, "o"), x + x)


@pytest.mark.parametrize("kind", list(CUDA))
def test_bad_devices(c, kind):
    for device in ("XPU", "CPU:x", "GPU:12345678", "CPUU"):
        assert_error(c.execute("AI.MODELSTORE", "m", kind, device, *store_args(kind)),
                     "ERR Invalid DEVICE")
    assert_error(c.execute("AI.MODELSET", "m", kind, "XPU", *set_args(kind)), "ERR unsupported device")
    assert c.execute("EXISTS", "m") == 0


def test_bad_script_devices(c):
    for device in ("XPU", "GPUX", "TPU:0"):
        assert_error(c.execute("AI.SCRIPTSTORE", "s", device, "ENTRY_POINTS", 1, "bar", "SOURCE",
                               tm.SCRIPT), "ERR unsupported device")
        assert_error(c.execute("AI.SCRIPTSET", "s", device, "SOURCE", tm.SCRIPT), "ERR unsupported device")
    assert c.execute("EXISTS", "s") == 0


# --------------------------------------------------------------------------------------
# TFLITE: parsed, never loadable here
# --------------------------------------------------------------------------------------

def check_tflite_why(text: str) -> None:
    """The reply names TFLITE and says why it cannot load (no TensorFlow Lite library)."""
    assert "TFLITE" in text, text
    assert "TensorFlow Lite" in text, text


def test_tflite_modelstore_and_modelset(c, srv):
    for cmd in (("AI.MODELSTORE", "m", "TFLITE", "CPU", "BLOB", b"tflite model"),
                ("AI.MODELSTORE", "m", "tflite", "CPU", "TAG", "t", "BLOB", b"a", b"b"),
                ("AI.MODELSET", "m", "TFLITE", "CPU", "BLOB", b"tflite model"),
                ("AI.MODELSET", "m", "TFLITE", "CPU", "TAG", "t", "BLOB", b"x")):
        mark = LogMark(srv.logfile)
        text = assert_error_startswith(c.execute(*cmd), NO_TFLITE)
        check_tflite_why(text)
        assert "\n" not in text
        line = mark.wait_for_line("TFLITE", "redisai_tflite")
        assert "TensorFlow Lite" in line or "No such file" in line or "dlopen" in line, line
        assert c.execute("EXISTS", "m") == 0
        assert c.execute("PING") == "PONG"


def test_tflite_parse_errors_still_apply(c):
    assert_error(c.execute("AI.MODELSTORE", "m", "TFLITE", "XPU", "BLOB", b"x"), "ERR Invalid DEVICE")
    assert_error(c.execute("AI.MODELSTORE", "m", "TFLITE", "CPU", "INPUTS", 1, "a", "BLOB", b"x"),
                 "ERR INPUTS argument should not be specified for this backend")
    assert_error(c.execute("AI.MODELSTORE", "m", "TFLITE", "CPU", "TAG", "t"),
                 "ERR Insufficient arguments, missing model BLOB")
    assert_error(c.execute("AI.MODELSET", "m", "TFLITE", "CPU", "BATCHSIZE", 2, "BLOB", b"x"),
                 "ERR Auto-batching not supported by the TFLITE backend")
    assert_error(c.execute("AI.MODELSET", "m", "TFLITE", "XPU", "BLOB", b"x"), "ERR Unsupported device")


def test_tflite_loadbackend(c, srv, install_dir, tmp_path):
    for path in (install_dir / "backends" / "redisai_tflite" / "redisai_tflite.so",
                 "redisai_tflite/redisai_tflite.so", tmp_path / "anything.so"):
        mark = LogMark(srv.logfile)
        reason = assert_error_startswith(c.execute("AI.CONFIG", "LOADBACKEND", "TFLITE", str(path)),
                                         LOAD_ERR)
        assert "TFLITE" in reason and "TensorFlow Lite" in reason, reason
        mark.wait_for_line(str(path).split("/")[-1], "TensorFlow Lite")
    assert c.execute("PING") == "PONG"


def test_tflite_load_time_argument_fails_with_reason(module_path, install_dir):
    path = install_dir / "backends" / "redisai_tflite" / "redisai_tflite.so"
    log = start_expecting_failure(module_path, ["TFLITE", str(path)])
    assert f"ERR error processing argument: TFLITE {path}" in log, log
    assert "TensorFlow Lite" in log, log
