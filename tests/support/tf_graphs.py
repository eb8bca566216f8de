"""TensorFlow graphs the tests store as models, built with the real tensorflow package.

TensorFlow is imported lazily (the first builder call) and only once per process; each
builder caches its serialized GraphDef, so a pytest session builds every graph once.
All graphs are TF1-style GraphDefs (tf.compat.v1 placeholders), the format AI.MODELSTORE
takes for the TF backend.
"""
from __future__ import annotations

import functools
import os
from typing import Any


@functools.cache
def _tf() -> Any:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")
    import tensorflow as tf  # noqa: PLC0415 - lazy on purpose: importing takes seconds

    return tf


def _serialize(graph: Any) -> bytes:
    return graph.as_graph_def().SerializeToString()


@functools.cache
def mul_graph() -> bytes:
    """The seed graph: float placeholders `a`, `b`; op `mul` = a * b."""
    tf = _tf()
    g = tf.Graph()
    with g.as_default():
        a = tf.compat.v1.placeholder(tf.float32, name="a")
        b = tf.compat.v1.placeholder(tf.float32, name="b")
        tf.multiply(a, b, name="mul")
    return _serialize(g)


@functools.cache
def multi_output_graph() -> bytes:
    """Placeholders `a`, `b`; three outputs `mul` = a*b, `add` = a+b, `sub` = a-b."""
    tf = _tf()
    g = tf.Graph()
    with g.as_default():
        a = tf.compat.v1.placeholder(tf.float32, name="a")
        b = tf.compat.v1.placeholder(tf.float32, name="b")
        tf.multiply(a, b, name="mul")
        tf.add(a, b, name="add")
        tf.subtract(a, b, name="sub")
    return _serialize(g)


@functools.cache
def many_inputs_graph() -> bytes:
    """Five float placeholders `i0`..`i4`; output `sum` = their element-wise sum."""
    tf = _tf()
    g = tf.Graph()
    with g.as_default():
        ins = [tf.compat.v1.placeholder(tf.float32, name=f"i{k}") for k in range(5)]
        tf.add_n(ins, name="sum")
    return _serialize(g)


@functools.cache
def const_input_graph() -> bytes:
    """Placeholder `a`, a Const op `k` (not a placeholder) and `mul` = a * k."""
    tf = _tf()
    g = tf.Graph()
    with g.as_default():
        a = tf.compat.v1.placeholder(tf.float32, name="a")
        k = tf.constant(3.0, dtype=tf.float32, name="k")
        tf.multiply(a, k, name="mul")
    return _serialize(g)


@functools.cache
def half_output_graph() -> bytes:
    """Placeholder `a` (float); output `half` = cast(a, float16), a dtype the tensor layer
    cannot name (DLPack float/16)."""
    tf = _tf()
    g = tf.Graph()
    with g.as_default():
        a = tf.compat.v1.placeholder(tf.float32, name="a")
        tf.cast(a, tf.float16, name="half")
    return _serialize(g)


@functools.cache
def slow_graph() -> bytes:
    """A graph whose run time is set by an input: int32 placeholder `n` (a scalar or one
    element) is the iteration count of a while loop whose body does a small matmul.
    Output `out` (float 8x8)."""
    tf = _tf()
    g = tf.Graph()
    with g.as_default():
        n = tf.compat.v1.placeholder(tf.int32, name="n")
        n_scalar = tf.reshape(n, [])
        w = tf.constant([[0.125] * 8] * 8, dtype=tf.float32)
        x0 = tf.eye(8, dtype=tf.float32)
        i0 = tf.constant(0, dtype=tf.int32)

        def cond(i, x):
            return tf.less(i, n_scalar)

        def body(i, x):
            return tf.add(i, 1), tf.tanh(tf.matmul(x, w) + x0)

        _, xf = tf.compat.v1.while_loop(cond, body, [i0, x0])
        tf.identity(xf, name="out")
    return _serialize(g)


def tensorflow_version() -> str:
    return _tf().__version__
