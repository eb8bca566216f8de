"""ONNX models the tests store, made at test time: with the `onnx` helper API and with
torch.onnx.export (the TorchScript exporter, dynamo=False).

onnx, onnxruntime and torch are imported lazily (the first builder call). Each builder is
cached, so a pytest session builds every model once. A builder returns a `Built`: the
serialized ModelProto, the graph's input and output names (what MODELGET must report),
sample inputs, and `run`, which computes the framework's own output in-process with an
onnxruntime.InferenceSession over the SAME blob.

Two blobs are made to be refused: one whose initializer points at external data, and one
stamped with an opset newer than the runtime supports.
"""
from __future__ import annotations

import dataclasses
import functools
import io
from typing import Any, Callable, Sequence

import numpy as np

# An opset far beyond any released ONNX opset (onnxruntime 1.32 supports up to 28).
FUTURE_OPSET = 99
IR_VERSION = 8  # understood by every onnxruntime of the last years


@functools.cache
def _onnx() -> Any:
    import onnx  # noqa: PLC0415 - lazy on purpose

    return onnx


@functools.cache
def _ort() -> Any:
    import onnxruntime  # noqa: PLC0415 - lazy on purpose

    return onnxruntime


@dataclasses.dataclass(frozen=True)
class Built:
    blob: bytes
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    sample: tuple[np.ndarray, ...]
    run: Callable[..., list[np.ndarray]]


def _runner(blob: bytes, inputs: Sequence[str]) -> Callable[..., list[np.ndarray]]:
    ort = _ort()
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.inter_op_num_threads = 1
    sess = ort.InferenceSession(blob, so, providers=["CPUExecutionProvider"])

    def run(*arrays: np.ndarray) -> list[np.ndarray]:
        return list(sess.run(None, dict(zip(inputs, arrays))))
    return run


def _built(blob: bytes, inputs: tuple[str, ...], outputs: tuple[str, ...],
           sample: tuple[np.ndarray, ...]) -> Built:
    return Built(blob=blob, inputs=inputs, outputs=outputs, sample=sample,
                 run=_runner(blob, inputs))


def _model(nodes: list[Any], inputs: list[Any], outputs: list[Any], initializers: list[Any] = (),
           opset: int = 13) -> bytes:
    onnx = _onnx()
    h = onnx.helper
    graph = h.make_graph(nodes, "g", inputs, outputs, initializer=list(initializers))
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", opset)])
    model.ir_version = IR_VERSION
    return model.SerializeToString()


def _vi(name: str, elem: int, shape: Sequence[Any] | None = None) -> Any:
    return _onnx().helper.make_tensor_value_info(name, elem, shape)


def _f32(*shape: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


# --- onnx helper models ----------------------------------------------------------------------

@functools.cache
def add() -> Built:
    """helper: c = Add(a, b), float, any shape."""
    T = _onnx().TensorProto
    blob = _model([_onnx().helper.make_node("Add", ["a", "b"], ["c"])],
                  [_vi("a", T.FLOAT), _vi("b", T.FLOAT)], [_vi("c", T.FLOAT)])
    return _built(blob, ("a", "b"), ("c",), (_f32(2, 3, seed=1), _f32(2, 3, seed=2)))


@functools.cache
def sum_and_product() -> Built:
    """helper: two outputs, s = Add(x, y) and p = Mul(x, y)."""
    h, T = _onnx().helper, _onnx().TensorProto
    blob = _model([h.make_node("Add", ["x", "y"], ["s"]), h.make_node("Mul", ["x", "y"], ["p"])],
                  [_vi("x", T.FLOAT), _vi("y", T.FLOAT)], [_vi("s", T.FLOAT), _vi("p", T.FLOAT)])
    return _built(blob, ("x", "y"), ("s", "p"), (_f32(4, seed=3), _f32(4, seed=4)))


@functools.cache
def int64_affine() -> Built:
    """helper: y = x * 3 + 1 on int64, with embedded initializers k = 3, one = 1."""
    h, T = _onnx().helper, _onnx().TensorProto
    inits = [h.make_tensor("k", T.INT64, [], [3]), h.make_tensor("one", T.INT64, [], [1])]
    blob = _model([h.make_node("Mul", ["x", "k"], ["t"]), h.make_node("Add", ["t", "one"], ["y"])],
                  [_vi("x", T.INT64)], [_vi("y", T.INT64)], inits)
    x = np.array([[0, 1, 2], [-5, 1 << 40, 7]], dtype=np.int64)
    return _built(blob, ("x",), ("y",), (x,))


@functools.cache
def bool_and() -> Built:
    """helper: c = And(a, b), bool."""
    h, T = _onnx().helper, _onnx().TensorProto
    blob = _model([h.make_node("And", ["a", "b"], ["c"])],
                  [_vi("a", T.BOOL), _vi("b", T.BOOL)], [_vi("c", T.BOOL)])
    a = np.array([True, False, True, False])
    b = np.array([True, True, False, False])
    return _built(blob, ("a", "b"), ("c",), (a, b))


ONNX_ELEM = {"FLOAT": "FLOAT", "DOUBLE": "DOUBLE", "INT8": "INT8", "INT16": "INT16",
             "INT32": "INT32", "INT64": "INT64", "UINT8": "UINT8", "UINT16": "UINT16",
             "BOOL": "BOOL"}


@functools.cache
def identity(dtype_token: str) -> Built:
    """helper: y = Identity(x) for one RedisAI dtype (ORT tensor types)."""
    h, T = _onnx().helper, _onnx().TensorProto
    elem = getattr(T, ONNX_ELEM[dtype_token])
    blob = _model([h.make_node("Identity", ["x"], ["y"])], [_vi("x", elem)], [_vi("y", elem)])
    return Built(blob=blob, inputs=("x",), outputs=("y",), sample=(), run=_runner(blob, ("x",)))


# --- torch.onnx.export models ------------------------------------------------------------------

def _export(module: Any, args: tuple[Any, ...], inputs: list[str], outputs: list[str],
            dynamic_axes: dict[str, dict[int, str]] | None = None) -> bytes:
    import torch  # noqa: PLC0415

    buf = io.BytesIO()
    torch.onnx.export(module, args, buf, input_names=inputs, output_names=outputs,
                      dynamic_axes=dynamic_axes, opset_version=17, dynamo=False)
    return buf.getvalue()


@functools.cache
def mul_add_export() -> Built:
    """torch.onnx.export of z = x * y + 1 (shapes [2, 3])."""
    import torch  # noqa: PLC0415

    import torch_models  # noqa: PLC0415

    z = torch.zeros(2, 3)
    blob = _export(torch_models.defs().MulAddOne(), (z, z), ["x", "y"], ["z"])
    return _built(blob, ("x", "y"), ("z",), (_f32(2, 3, seed=5), _f32(2, 3, seed=6)))


@functools.cache
def cnn() -> Built:
    """torch.onnx.export of the MNIST-sized CNN (torch_models.cnn_module()), dynamic
    batch: input [n,1,28,28] -> output [n,10]."""
    import torch  # noqa: PLC0415

    import torch_models  # noqa: PLC0415

    blob = _export(torch_models.cnn_module(), (torch.zeros(1, 1, 28, 28),), ["input"], ["output"],
                   dynamic_axes={"input": {0: "n"}, "output": {0: "n"}})
    return _built(blob, ("input",), ("output",), (torch_models.cnn_sample(),))


# --- blobs that must be refused ----------------------------------------------------------------

@functools.cache
def external_initializer() -> bytes:
    """y = Mul(x, w) where the initializer w lives in an external file (weights.bin)."""
    onnx = _onnx()
    h, T = onnx.helper, onnx.TensorProto
    w = T()
    w.name = "w"
    w.data_type = T.FLOAT
    w.dims.append(1)
    w.data_location = T.EXTERNAL
    for key, value in (("location", "weights.bin"), ("offset", "0"), ("length", "4")):
        entry = w.external_data.add()
        entry.key, entry.value = key, value
    return _model([h.make_node("Mul", ["x", "w"], ["y"])], [_vi("x", T.FLOAT)], [_vi("y", T.FLOAT)],
                  [w])


@functools.cache
def future_opset() -> bytes:
    """y = Relu(x) stamped with opset FUTURE_OPSET of the default domain."""
    h, T = _onnx().helper, _onnx().TensorProto
    return _model([h.make_node("Relu", ["x"], ["y"])], [_vi("x", T.FLOAT)], [_vi("y", T.FLOAT)],
                  opset=FUTURE_OPSET)


def onnxruntime_version() -> str:
    return _ort().__version__
