"""TensorFlow Lite models the tests store with the TFLITE backend, made at test time by
TensorFlow's own converter (tf.lite.TFLiteConverter.from_concrete_functions), and their
reference outputs from tf.lite.Interpreter over the SAME blob.

TensorFlow is imported lazily (tf_graphs._tf, the first builder call); each builder is
cached, so a pytest session converts every model once. A builder returns a `Built`: the
.tflite blob, the interpreter's input and output tensor names in subgraph order (what
AI.MODELGET must report: RedisAI 1.2 reports the interpreter's tensor names), their numpy
dtypes, and `sample(seed, batch)`, inputs of the model's own dtypes and shapes.

Order. RedisAI 1.2 binds AI.MODELEXECUTE's INPUTS and OUTPUTS by POSITION, in the order of
the model's (first) subgraph inputs and outputs, not by name and not by SignatureDef. That
order is the converter's, not the concrete function's: TensorFlow 2.21's converter puts the
inputs in the alphabetical order of their argument names (the SignatureDef keys) and the
outputs in the order its graph produces them, which need not be the order of the returned
tuple (dynamic_range() returns (probs, argmax) and the subgraph lists argmax first;
two_in_two_out() lists its second output first). The one source of truth is
tf.lite.Interpreter.get_input_details() / get_output_details(), which list the subgraph's
input and output tensors in subgraph order: `Built` records the names and dtypes in that
order, reference() takes and gives arrays in it, and the builders check the orders the
tests rely on, so a converter that changes them fails here, loudly.

`reference(built, inputs)` runs the interpreter: inputs given positionally, each input
resized to its array's shape (resize_tensor_input: batches), outputs in subgraph order.
An interpreter is not thread-safe: reference() runs one call at a time under a lock, and
the concurrency tests compute their references before their client threads start.
"""
from __future__ import annotations

import dataclasses
import functools
import threading
import warnings
from typing import Any, Callable, Sequence

import numpy as np

from tf_graphs import _tf

CNN_SHAPE = (28, 28, 1)  # one MNIST-sized image, NHWC; the batch dimension is dynamic


@dataclasses.dataclass(frozen=True)
class Built:
    blob: bytes
    inputs: tuple[str, ...]              # interpreter tensor names, subgraph order
    outputs: tuple[str, ...]
    input_dtypes: tuple[np.dtype, ...]
    output_dtypes: tuple[np.dtype, ...]
    sample: Callable[..., tuple[np.ndarray, ...]]   # sample(seed=0, batch=1)


# --- weights and inputs -----------------------------------------------------------------------

def _weights(seed: int, *shape: int, scale: float = 0.1) -> np.ndarray:
    return (np.random.default_rng(seed).standard_normal(shape) * scale).astype(np.float32)


def cnn_images(seed: int = 0, batch: int = 1) -> np.ndarray:
    """Float images in [0, 1), [batch, 28, 28, 1]."""
    return np.random.default_rng(seed).random((batch, *CNN_SHAPE), dtype=np.float32)


def _quantize(x: np.ndarray, scale: float, zero_point: int, dtype: Any) -> np.ndarray:
    info = np.iinfo(dtype)
    return np.clip(np.round(x / scale) + zero_point, info.min, info.max).astype(dtype)


# --- conversion -------------------------------------------------------------------------------

def _cnn_module() -> Any:
    """conv 3x3x8 + relu -> max-pool 2 -> conv 3x3x16 + relu -> max-pool 2 -> dense 10 ->
    softmax; weights from a fixed seed. Input [None, 28, 28, 1] float32, output [None, 10]."""
    tf = _tf()

    class Cnn(tf.Module):
        def __init__(self) -> None:
            super().__init__()
            self.k1 = tf.Variable(_weights(1, 3, 3, 1, 8, scale=0.5))
            self.b1 = tf.Variable(_weights(2, 8))
            self.k2 = tf.Variable(_weights(3, 3, 3, 8, 16, scale=0.3))
            self.b2 = tf.Variable(_weights(4, 16))
            self.w = tf.Variable(_weights(5, 7 * 7 * 16, 10, scale=0.1))
            self.b = tf.Variable(_weights(6, 10))

        @tf.function(input_signature=[tf.TensorSpec([None, *CNN_SHAPE], tf.float32, name="image")])
        def __call__(self, image: Any) -> Any:
            h = tf.nn.relu(tf.nn.conv2d(image, self.k1, 1, "SAME") + self.b1)
            h = tf.nn.max_pool2d(h, 2, 2, "VALID")
            h = tf.nn.relu(tf.nn.conv2d(h, self.k2, 1, "SAME") + self.b2)
            h = tf.nn.max_pool2d(h, 2, 2, "VALID")
            h = tf.reshape(h, [-1, 7 * 7 * 16])
            return tf.nn.softmax(tf.matmul(h, self.w) + self.b)

    return Cnn()


def _converter(module: Any, fn: Any) -> Any:
    tf = _tf()
    return tf.lite.TFLiteConverter.from_concrete_functions([fn.get_concrete_function()], module)


def _interpreter(blob: bytes) -> Any:
    tf = _tf()
    with warnings.catch_warnings():  # "tf.lite.Interpreter is deprecated": still the reference
        warnings.simplefilter("ignore")
        return tf.lite.Interpreter(model_content=blob, num_threads=1)


def _built(blob: bytes, sample: Callable[..., tuple[np.ndarray, ...]],
           n_in: int, n_out: int) -> Built:
    """The Built of a converted blob, its names and dtypes read back from the interpreter."""
    interp = _interpreter(blob)
    ins, outs = interp.get_input_details(), interp.get_output_details()
    if (len(ins), len(outs)) != (n_in, n_out):
        raise AssertionError(f"the converter made {len(ins)} inputs and {len(outs)} outputs, "
                             f"not {n_in} and {n_out}")
    return Built(blob=blob, inputs=tuple(d["name"] for d in ins),
                 outputs=tuple(d["name"] for d in outs),
                 input_dtypes=tuple(np.dtype(d["dtype"]) for d in ins),
                 output_dtypes=tuple(np.dtype(d["dtype"]) for d in outs), sample=sample)


def _representative() -> Any:
    for seed in range(100, 132):
        yield [cnn_images(seed)]


# --- the models -------------------------------------------------------------------------------

@functools.cache
def cnn_float() -> Built:
    """(a) The float32 CNN: [n, 28, 28, 1] float32 -> [n, 10] float32 softmax."""
    module = _cnn_module()
    blob = _converter(module, module.__call__).convert()
    return _built(blob, lambda seed=0, batch=1: (cnn_images(seed, batch),), 1, 1)


def _full_integer(dtype: Any) -> Built:
    tf = _tf()
    module = _cnn_module()
    conv = _converter(module, module.__call__)
    conv.optimizations = [tf.lite.Optimize.DEFAULT]
    conv.representative_dataset = _representative
    conv.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
    conv.inference_input_type = tf.as_dtype(dtype)
    conv.inference_output_type = tf.as_dtype(dtype)
    blob = conv.convert()
    [detail] = _interpreter(blob).get_input_details()
    scale, zero_point = detail["quantization"]

    def sample(seed: int = 0, batch: int = 1) -> tuple[np.ndarray, ...]:
        # Raw integer values, as a client quantizes them with the model's input parameters.
        return (_quantize(cnn_images(seed, batch), scale, zero_point, dtype),)
    built = _built(blob, sample, 1, 1)
    if built.input_dtypes != (np.dtype(dtype),) or built.output_dtypes != (np.dtype(dtype),):
        raise AssertionError(f"full-integer model has {built.input_dtypes} -> {built.output_dtypes}")
    return built


@functools.cache
def cnn_uint8() -> Built:
    """(b) The CNN quantized to full integer, uint8 input and output."""
    return _full_integer(np.uint8)


@functools.cache
def cnn_int8() -> Built:
    """(c) The CNN quantized to full integer, int8 input and output."""
    return _full_integer(np.int8)


@functools.cache
def dynamic_range() -> Built:
    """(d) Dynamic-range quantized (int8 weights, float activations): x [n, 64] float32 ->
    (probs [n, 16] float32, argmax [n] int64). The dense weights have 64 * 16 = 1024
    elements, enough for the converter to quantize them."""
    tf = _tf()

    class Classifier(tf.Module):
        def __init__(self) -> None:
            super().__init__()
            self.w1 = tf.Variable(_weights(11, 64, 64))
            self.w2 = tf.Variable(_weights(12, 64, 16))

        @tf.function(input_signature=[tf.TensorSpec([None, 64], tf.float32, name="x")])
        def __call__(self, x: Any) -> Any:
            logits = tf.matmul(tf.nn.relu(tf.matmul(x, self.w1)), self.w2)
            return tf.nn.softmax(logits), tf.argmax(logits, axis=1, output_type=tf.int64)

    module = Classifier()
    conv = _converter(module, module.__call__)
    conv.optimizations = [tf.lite.Optimize.DEFAULT]
    blob = conv.convert()

    def sample(seed: int = 0, batch: int = 1) -> tuple[np.ndarray, ...]:
        return (np.random.default_rng(seed).standard_normal((batch, 64)).astype(np.float32),)
    built = _built(blob, sample, 1, 2)
    if not any(d["dtype"] == np.int8 for d in _interpreter(blob).get_tensor_details()):
        raise AssertionError("the dynamic-range model has no int8 weights")
    if built.output_dtypes != (np.dtype(np.int64), np.dtype(np.float32)):
        raise AssertionError(f"dynamic-range outputs are {built.output_dtypes} in subgraph "
                             "order, not (int64 argmax, float32 probs) as TensorFlow 2.21 "
                             "converts them: the order the tests document changed")
    return built


@functools.cache
def two_in_two_out() -> Built:
    """(e) Two float inputs [1, 4] and two outputs: the function returns (z - a, z * a + z).
    Neither output is symmetric in its inputs and the two differ, so a swapped input or output
    binding shows. The arguments are `z_first` and `a_second`: their alphabetical order is the
    reverse of the argument order, and the subgraph lists the outputs in the reverse of the
    returned order while the SignatureDef keeps it (output_0 = z - a), so a backend that binds
    by argument or signature order instead of subgraph position gives other values.
    check_two_in_two_out_order pins the subgraph order."""
    tf = _tf()

    class TwoByTwo(tf.Module):
        @tf.function(input_signature=[tf.TensorSpec([1, 4], tf.float32, name="z_first"),
                                      tf.TensorSpec([1, 4], tf.float32, name="a_second")])
        def __call__(self, z_first: Any, a_second: Any) -> Any:
            return z_first - a_second, z_first * a_second + z_first

    module = TwoByTwo()
    blob = _converter(module, module.__call__).convert()

    def sample(seed: int = 0, batch: int = 1) -> tuple[np.ndarray, ...]:
        rng = np.random.default_rng(seed)
        return (rng.standard_normal((1, 4)).astype(np.float32),
                rng.standard_normal((1, 4)).astype(np.float32))
    built = _built(blob, sample, 2, 2)
    check_two_in_two_out_order(built)
    return built


def check_two_in_two_out_order(built: Built) -> None:
    """TensorFlow 2.21's subgraph order for two_in_two_out(): inputs (a_second, z_first),
    alphabetical; outputs (z * a + z, z - a), the second returned first."""
    if not ("a_second" in built.inputs[0] and "z_first" in built.inputs[1]):
        raise AssertionError(f"the converter put the inputs in the order {built.inputs}, "
                             "not alphabetical (a_second, z_first) as documented above")
    a = np.array([[1, 2, 3, 4]], np.float32)
    z = np.array([[10, 20, 30, 40]], np.float32)
    first, second = reference(built, [a, z])
    if not (np.array_equal(first, z * a + z) and np.array_equal(second, z - a)):
        raise AssertionError("the converter's output order is not (z * a + z, z - a) as "
                             f"documented above: {first} {second}")


MODELS: dict[str, Callable[[], Built]] = {
    "cnn_float": cnn_float, "cnn_uint8": cnn_uint8, "cnn_int8": cnn_int8,
    "dynamic_range": dynamic_range, "two_in_two_out": two_in_two_out,
}


# --- reference outputs ------------------------------------------------------------------------

_interpreters: dict[int, Any] = {}
_lock = threading.Lock()


def _run(interp: Any, inputs: Sequence[np.ndarray], allocated: bool) -> list[np.ndarray]:
    details = interp.get_input_details()
    if len(inputs) != len(details):
        raise ValueError(f"{len(inputs)} inputs for a model of {len(details)}")
    resized = False
    for d, x in zip(details, inputs):
        if tuple(d["shape"]) != x.shape:
            interp.resize_tensor_input(d["index"], list(x.shape))
            resized = True
    if resized or not allocated:
        interp.allocate_tensors()
    for d, x in zip(interp.get_input_details(), inputs):
        interp.set_tensor(d["index"], np.ascontiguousarray(x))
    interp.invoke()
    return [interp.get_tensor(d["index"]).copy() for d in interp.get_output_details()]


def reference(built: Built, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    """tf.lite.Interpreter's outputs for `inputs` (positional, subgraph order), each input
    resized to its array's shape; one interpreter per blob, kept for the session (dropped
    if it fails: an interpreter that failed to prepare a shape is not reused)."""
    with _lock:
        interp = _interpreters.pop(id(built.blob), None)
        fresh = interp is None
        if fresh:
            interp = _interpreter(built.blob)
        out = _run(interp, inputs, allocated=not fresh)
        _interpreters[id(built.blob)] = interp
        return out


def interpreter_refuses(built: Built, inputs: Sequence[np.ndarray]) -> str:
    """What a fresh tf.lite.Interpreter says when it cannot run `inputs` (resized as
    reference() does), or "" when it runs them."""
    try:
        _run(_interpreter(built.blob), inputs, allocated=False)
    except (RuntimeError, ValueError) as exc:
        return str(exc) or type(exc).__name__
    return ""


def tflite_runtime_version() -> str:
    """The LiteRT version RedisAI 1.2's INFO reports for its TFLite backend
    (ai_TensorFlowLite_version): the pinned ai-edge-litert, 2.3.0."""
    return "2.3.0"


@functools.cache
def mul(cols: int) -> bytes:
    """a * b on float32 [n, cols] inputs `a` and `b`, in that (subgraph) order, checked; one
    output; n is a batch (converted as None): the install and LLAPI tests' small model."""
    tf = _tf()
    spec = tf.TensorSpec([None, cols], tf.float32)

    @tf.function(input_signature=[spec, spec])
    def fn(a: Any, b: Any) -> Any:
        return tf.multiply(a, b)

    blob = tf.lite.TFLiteConverter.from_concrete_functions([fn.get_concrete_function()], fn).convert()
    names = [d["name"] for d in _interpreter(blob).get_input_details()]
    if len(names) != 2 or "a" not in names[0] or "b" not in names[1]:
        raise AssertionError(f"the converter ordered the inputs {names}, not a, b")
    return blob

