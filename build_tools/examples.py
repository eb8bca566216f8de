"""`python -m build_tools examples [--out DIR]`: make the model files the docs' examples use.

Each file is made by the project's own frameworks (the pinned wheels of `.venv`), so the
examples of README.md and docs/ run as written after one command:

    addmul.pt   TorchScript module, forward(a, b) returns (a + b, a * b)
    graph.pb    TensorFlow GraphDef: float placeholders `a`, `b`; operation `mul` = a * b
    add.onnx    ONNX graph: float inputs `x`, `y`; output `z` = x + y
    mul.tflite  TensorFlow Lite model: float input [1, 2] times [2, 3], elementwise

A file that is already there is made again (the frameworks' output is small and fast to make).
"""
from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path
from typing import Callable

from .errors import BuildError

FILES = ("addmul.pt", "graph.pb", "add.onnx", "mul.tflite")


def _need(module: str) -> None:
    if importlib.util.find_spec(module) is None:
        raise BuildError(f"{module} is not installed for {sys.executable}: run "
                         "`.venv/bin/python -m build_tools examples` (setup makes .venv/)")


def _addmul_pt(path: Path) -> None:
    _need("torch")
    import torch  # noqa: PLC0415 - the frameworks load only for this command

    class AddMul(torch.nn.Module):
        def forward(self, a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            return a + b, a * b

    torch.jit.save(torch.jit.script(AddMul()), str(path))


def _tf() -> object:
    _need("tensorflow")
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")
    import tensorflow as tf  # noqa: PLC0415

    return tf


def _graph_pb(path: Path) -> None:
    tf = _tf()
    graph = tf.Graph()
    with graph.as_default():
        a = tf.compat.v1.placeholder(tf.float32, name="a")
        b = tf.compat.v1.placeholder(tf.float32, name="b")
        tf.multiply(a, b, name="mul")
    path.write_bytes(graph.as_graph_def().SerializeToString())


def _add_onnx(path: Path) -> None:
    _need("onnx")
    import onnx  # noqa: PLC0415
    from onnx import TensorProto, helper  # noqa: PLC0415

    shape = ["n"]
    graph = helper.make_graph(
        [helper.make_node("Add", ["x", "y"], ["z"])], "add",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape),
         helper.make_tensor_value_info("y", TensorProto.FLOAT, shape)],
        [helper.make_tensor_value_info("z", TensorProto.FLOAT, shape)])
    # IR 8 and opset 13: what every ONNX Runtime of the last years reads.
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)
    onnx.checker.check_model(model)
    path.write_bytes(model.SerializeToString())


def _mul_tflite(path: Path) -> None:
    tf = _tf()

    @tf.function(input_signature=[tf.TensorSpec([1, 2], tf.float32, name="x")])
    def mul(x: object) -> object:
        return x * tf.constant([[2.0, 3.0]])

    converter = tf.lite.TFLiteConverter.from_concrete_functions([mul.get_concrete_function()], mul)
    path.write_bytes(converter.convert())


MAKERS: dict[str, Callable[[Path], None]] = {
    "addmul.pt": _addmul_pt,
    "graph.pb": _graph_pb,
    "add.onnx": _add_onnx,
    "mul.tflite": _mul_tflite,
}


def make_examples(out: Path) -> list[Path]:
    for module in ("torch", "tensorflow", "onnx"):
        _need(module)
    out.mkdir(parents=True, exist_ok=True)
    made = []
    for name in FILES:
        path = out / name
        print(f"[examples] {path}", flush=True)
        MAKERS[name](path)
        made.append(path)
    return made
