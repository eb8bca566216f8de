"""The three small TensorFlow Lite models the TFLITE fuzz test damages, made at test time by
TensorFlow's converter: a float CNN and its full-integer uint8 and int8 versions (the two
crash classes of LiteRT 2.3.0 live in full-integer models: a SIGSEGV in compile for a uint8
model, a std::logic_error for an int8 one).

Small on purpose: [1, 12, 12, 1] -> conv 3x3x4 + relu -> max-pool 2 -> dense 10 -> softmax,
a few KB, so that random damage lands in the flatbuffer's structure (tables, vtables,
offsets, quantization parameters) more often than in weights, and each validator run is short.

A `Base` carries the blob, its input (raw bytes of the model's own dtype and shape, what
AI.TENSORSET sends) and tf.lite.Interpreter's output for that input, the exact output a
server must still give after the fuzz.
"""
from __future__ import annotations

import dataclasses
import functools
import warnings
from typing import Any

import numpy as np

from tf_graphs import _tf

SHAPE = (1, 12, 12, 1)
CLASSES = 10


@dataclasses.dataclass(frozen=True)
class Base:
    name: str
    blob: bytes
    dtype: str           # AI.TENSORSET's name of the input's and output's type
    input: bytes         # one valid input, raw
    output: bytes        # tf.lite.Interpreter's output for it, raw

    def tensorset(self, key: str) -> list[Any]:
        return ["AI.TENSORSET", key, self.dtype, *SHAPE, "BLOB", self.input]


def _weights(seed: int, *shape: int, scale: float) -> np.ndarray:
    return (np.random.default_rng(seed).standard_normal(shape) * scale).astype(np.float32)


def _images(seed: int) -> np.ndarray:
    return np.random.default_rng(seed).random(SHAPE, dtype=np.float32)


def _converter() -> Any:
    tf = _tf()

    class Cnn(tf.Module):
        def __init__(self) -> None:
            super().__init__()
            self.k = tf.Variable(_weights(1, 3, 3, 1, 4, scale=0.5))
            self.kb = tf.Variable(_weights(2, 4, scale=0.1))
            self.w = tf.Variable(_weights(3, 6 * 6 * 4, CLASSES, scale=0.2))
            self.b = tf.Variable(_weights(4, CLASSES, scale=0.1))

        @tf.function(input_signature=[tf.TensorSpec(SHAPE, tf.float32, name="image")])
        def __call__(self, image: Any) -> Any:
            h = tf.nn.relu(tf.nn.conv2d(image, self.k, 1, "SAME") + self.kb)
            h = tf.reshape(tf.nn.max_pool2d(h, 2, 2, "VALID"), [1, 6 * 6 * 4])
            return tf.nn.softmax(tf.matmul(h, self.w) + self.b)

    module = Cnn()
    fn = module.__call__.get_concrete_function()
    return tf.lite.TFLiteConverter.from_concrete_functions([fn], module)


def _interpreter(blob: bytes) -> Any:
    with warnings.catch_warnings():  # "tf.lite.Interpreter is deprecated": still the reference
        warnings.simplefilter("ignore")
        interp = _tf().lite.Interpreter(model_content=blob, num_threads=1)
    interp.allocate_tensors()
    return interp


def _base(name: str, blob: bytes, dtype: str, x: np.ndarray) -> Base:
    interp = _interpreter(blob)
    [i], [o] = interp.get_input_details(), interp.get_output_details()
    if i["dtype"] != x.dtype or tuple(i["shape"]) != SHAPE or o["dtype"] != x.dtype:
        raise AssertionError(f"{name}: the converter made {i['dtype']} {i['shape']} -> "
                             f"{o['dtype']}, not {x.dtype} {SHAPE}")
    interp.set_tensor(i["index"], x)
    interp.invoke()
    out = interp.get_tensor(o["index"])
    return Base(name, blob, dtype, x.tobytes(), out.tobytes())


def _full_integer(name: str, np_type: Any, dtype: str) -> Base:
    tf = _tf()
    conv = _converter()
    conv.optimizations = [tf.lite.Optimize.DEFAULT]
    conv.representative_dataset = lambda: ([_images(seed)] for seed in range(100, 116))
    conv.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
    conv.inference_input_type = tf.as_dtype(np_type)
    conv.inference_output_type = tf.as_dtype(np_type)
    blob = conv.convert()
    [detail] = _interpreter(blob).get_input_details()
    scale, zero_point = detail["quantization"]
    info = np.iinfo(np_type)
    x = np.clip(np.round(_images(0) / scale) + zero_point, info.min, info.max).astype(np_type)
    return _base(name, blob, dtype, x)


@functools.cache
def bases() -> tuple[Base, ...]:
    """(float, uint8, int8), converted once per process."""
    return (_base("cnn_float", _converter().convert(), "FLOAT", _images(0)),
            _full_integer("cnn_uint8", np.uint8, "UINT8"),
            _full_integer("cnn_int8", np.int8, "INT8"))
