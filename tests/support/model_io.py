"""Helpers for the backend tests (Torch, ONNX, scripts, several backends in one server).

* numpy arrays <-> RedisAI tensors over the exact-reply client (tests/support/resp.py):
  `put(c, key, array)` stores an array with AI.TENSORSET ... BLOB; `get(c, key)` reads it
  back with AI.TENSORGET META BLOB and rebuilds it (dtype and shape included), so a
  model's output can be compared with what the framework computes in-process;
* `model_meta(...)`: the 16-element AI.MODELGET META reply;
* `assert_clean_error(...)`: an error reply of one line, without a C++ backtrace;
* `framework_error(...)`: the message a framework raises in-process, for comparison.
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

from helpers import assert_ok
from resp import RawClient, RespError

DTYPES: dict[str, np.dtype] = {
    "FLOAT": np.dtype(np.float32),
    "DOUBLE": np.dtype(np.float64),
    "INT8": np.dtype(np.int8),
    "INT16": np.dtype(np.int16),
    "INT32": np.dtype(np.int32),
    "INT64": np.dtype(np.int64),
    "UINT8": np.dtype(np.uint8),
    "UINT16": np.dtype(np.uint16),
    "BOOL": np.dtype(np.bool_),
}
TOKENS: dict[np.dtype, str] = {v: k for k, v in DTYPES.items()}


def token(dtype: Any) -> str:
    """The RedisAI type token of a numpy dtype."""
    return TOKENS[np.dtype(dtype)]


def put(c: RawClient, key: str, array: np.ndarray) -> None:
    a = np.ascontiguousarray(array)
    assert_ok(c.execute("AI.TENSORSET", key, token(a.dtype), *a.shape, "BLOB", a.tobytes()))


def get(c: RawClient, key: str) -> np.ndarray:
    reply = c.execute("AI.TENSORGET", key, "META", "BLOB")
    assert not isinstance(reply, RespError), f"AI.TENSORGET {key}: {reply}"
    assert isinstance(reply, list) and len(reply) == 6, reply
    fields = dict(zip(reply[::2], reply[1::2]))
    dtype = DTYPES[fields[b"dtype"].decode()]
    shape = tuple(fields[b"shape"])
    return np.frombuffer(fields[b"blob"], dtype=dtype).reshape(shape)


def assert_same(got: np.ndarray, want: np.ndarray, rtol: float = 1e-5, atol: float = 1e-6) -> None:
    """Same dtype and shape; equal values (floats within rtol/atol)."""
    want = np.asarray(want)
    assert got.dtype == want.dtype, f"dtype {got.dtype} != {want.dtype}"
    assert got.shape == want.shape, f"shape {got.shape} != {want.shape}"
    if np.issubdtype(want.dtype, np.floating):
        np.testing.assert_allclose(got, want, rtol=rtol, atol=atol)
    else:
        np.testing.assert_array_equal(got, want)


def model_meta(backend: str, inputs: list[bytes], outputs: list[bytes], device: bytes = b"CPU",
               tag: bytes = b"", batch: int = 0, minbatch: int = 0,
               minbatchtimeout: int = 0) -> list[Any]:
    return [b"backend", backend.encode(), b"device", device, b"tag", tag, b"batchsize", batch,
            b"minbatchsize", minbatch, b"inputs", inputs, b"outputs", outputs,
            b"minbatchtimeout", minbatchtimeout]


# What a C++ backtrace (c10::Error::what(), glog) looks like in a message.
BACKTRACE_MARKS = ("Exception raised from", "frame #0", "frame #1", "(no backtrace available)")


def assert_clean_error(reply: Any) -> str:
    """An error reply on one line, with no C++ backtrace in it; returns its text."""
    assert isinstance(reply, RespError), f"expected an error reply, got {reply!r}"
    text = str(reply)
    assert text, "empty error text"
    assert "\n" not in text and "\r" not in text, text
    for mark in BACKTRACE_MARKS:
        assert mark not in text, f"the error carries a C++ backtrace ({mark!r}): {text!r}"
    return text


def framework_error(fn: Callable[[], Any]) -> str:
    """The last line of the message `fn()` raises (a framework's own error text, without
    Python/TorchScript traceback lines or the exception class name)."""
    try:
        fn()
    except Exception as e:  # noqa: BLE001 - any framework exception
        lines = [ln.strip() for ln in str(e).splitlines() if ln.strip()]
        msg = lines[-1] if lines else str(e)
        for prefix in ("RuntimeError: ", "builtins.RuntimeError: "):
            if msg.startswith(prefix):
                msg = msg[len(prefix):]
        return msg
    raise AssertionError("the framework accepted what the server must refuse")


def execute(c: RawClient, key: str, inputs: list[np.ndarray], nout: int,
            prefix: str = "") -> list[np.ndarray]:
    """Stores `inputs` as tensors <prefix>in0.., runs AI.MODELEXECUTE with them (positional),
    returns the outputs <prefix>out0.. as arrays."""
    in_keys = [f"{prefix}in{i}" for i in range(len(inputs))]
    out_keys = [f"{prefix}out{i}" for i in range(nout)]
    for k, a in zip(in_keys, inputs):
        put(c, k, a)
    assert_ok(c.execute("AI.MODELEXECUTE", key, "INPUTS", len(in_keys), *in_keys,
                        "OUTPUTS", nout, *out_keys))
    return [get(c, k) for k in out_keys]


def assert_exact(got: np.ndarray, want: np.ndarray) -> None:
    """Same dtype, shape and bits (np.array_equal): a model run by a backend against the
    framework's own run of the same blob on the same input."""
    assert got.dtype == want.dtype, f"dtype {got.dtype} != {want.dtype}"
    assert got.shape == want.shape, f"shape {got.shape} != {want.shape}"
    assert np.array_equal(got, want), f"values differ:\n got {got!r}\nwant {want!r}"


def ai_info(c: RawClient, key: str) -> dict[str, Any]:
    """AI.INFO key as a dict (key, type, backend, device, tag, duration, samples, calls,
    errors)."""
    reply = c.execute("AI.INFO", key)
    assert isinstance(reply, list) and len(reply) == 18, f"AI.INFO {key}: {reply!r}"
    return {reply[i].decode(): reply[i + 1] for i in range(0, 18, 2)}
