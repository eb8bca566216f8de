"""Models that multiply their one input by a constant k, in every backend, for the memory
tests (test_maxmemory.py), the churn test (test_churn.py) and bench/bench_output_copy.py.

Every model takes one float tensor `x` of rank 2 ([N, K], any sizes) and returns `out` =
k * x of the same shape, so a model's output is exactly as large as its input, and a
result tells which version k of a key produced it. The script's entry point `scale` does
the same. Built with the real frameworks; each blob is cached for the session.
"""
from __future__ import annotations

import functools
from typing import Any

import engine_models as em
import tf_graphs

KINDS = ("TF", "TORCH", "ONNX")


@functools.cache
def tf_scale(k: int) -> bytes:
    """Placeholder `x` (float); `out` = k * x."""
    tf = tf_graphs._tf()
    g = tf.Graph()
    with g.as_default():
        x = tf.compat.v1.placeholder(tf.float32, name="x")
        tf.multiply(x, float(k), name="out")
    return g.as_graph_def().SerializeToString()


@functools.cache
def torch_scale(k: int) -> bytes:
    """forward(x) -> k * x (k a module attribute)."""
    torch = em._torch()

    class Scale(torch.nn.Module):
        def __init__(self, k: float) -> None:
            super().__init__()
            self.k = k

        def forward(self, x):
            return x * self.k

    return em._save_script(Scale(float(k)))


@functools.cache
def onnx_scale(k: int) -> bytes:
    """Input `x` float [N, K]; output `out` = x * k."""
    onnx = em._onnx()
    h, TP = onnx.helper, onnx.TensorProto
    g = h.make_graph([h.make_node("Mul", ["x", "k"], ["out"])], f"scale_{k}",
                     [h.make_tensor_value_info("x", TP.FLOAT, ["N", "K"])],
                     [h.make_tensor_value_info("out", TP.FLOAT, ["N", "K"])],
                     [h.make_tensor("k", TP.FLOAT, [], [float(k)])])
    return em._onnx_model(g)


def script_source(k: int) -> str:
    """A TorchScript source whose entry point `scale` returns k * tensors[0]."""
    return (f"def scale(tensors: List[Tensor], keys: List[str], args: List[str]):\n"
            f"    return tensors[0] * {float(k)}\n")


def store_model(c: Any, key: str, kind: str, k: int) -> Any:
    """AI.MODELSTORE of version k of the scale model of backend `kind` at key."""
    if kind == "TF":
        return c.execute("AI.MODELSTORE", key, "TF", "CPU", "INPUTS", 1, "x", "OUTPUTS", 1, "out",
                         "BLOB", tf_scale(k))
    blob = torch_scale(k) if kind == "TORCH" else onnx_scale(k)
    return c.execute("AI.MODELSTORE", key, kind, "CPU", "BLOB", blob)


def store_script(c: Any, key: str, k: int) -> Any:
    return c.execute("AI.SCRIPTSTORE", key, "CPU", "ENTRY_POINTS", 1, "scale",
                     "SOURCE", script_source(k))


def build_all(versions: range | tuple[int, ...]) -> None:
    """Builds every blob up front (imports the frameworks once, outside timed parts)."""
    for k in versions:
        tf_scale(k)
        torch_scale(k)
        onnx_scale(k)
