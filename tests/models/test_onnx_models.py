"""ONNX models (docs/commands.md, "Models", with the ONNX Runtime backend): models made at test time
with the `onnx` helper API and with torch.onnx.export (tests/support/onnx_models.py), including an
MNIST-sized CNN; stored, described by MODELGET (input/output names from the graph), run
and compared with onnxruntime's own output in-process. ORT tensor types; ORT's status
texts for bad input; models with external initializers and models from a newer opset are
refused; the server keeps answering.

One server per module, with the ONNX backend given at load time.
"""
from __future__ import annotations

import re
import threading
from typing import Any, Callable

import numpy as np
import pytest

import onnx_models as om
from helpers import assert_error, assert_ok, info_field
from model_io import DTYPES, assert_clean_error, assert_same, get, model_meta, put
from redis_server import Connect, RedisServer
from resp import RawClient, RespError

MODELS = ["add", "sum_and_product", "int64_affine", "bool_and", "mul_add_export", "cnn"]


@pytest.fixture
def c(onnx_server: RedisServer, connect: Connect) -> RawClient:
    return connect(onnx_server)


def store(c: RawClient, key: str, blob: bytes, device: str = "CPU", *opts) -> None:
    assert_ok(c.execute("AI.MODELSTORE", key, "ONNX", device, *opts, "BLOB", blob))


def execute(c: RawClient, key: str, inputs: list[np.ndarray], nout: int) -> list[np.ndarray]:
    in_keys = [f"in{i}" for i in range(len(inputs))]
    out_keys = [f"out{i}" for i in range(nout)]
    for k, a in zip(in_keys, inputs):
        put(c, k, a)
    assert_ok(c.execute("AI.MODELEXECUTE", key, "INPUTS", len(in_keys), *in_keys,
                        "OUTPUTS", nout, *out_keys))
    return [get(c, k) for k in out_keys]


_ORT_PREFIX = re.compile(r"^\[ONNXRuntimeError\] : \d+ : [A-Z_]+ : ")


def ort_error(fn: Callable[[], Any]) -> str:
    """onnxruntime's own status text for what fn() does in-process: the Python binding's
    '[ONNXRuntimeError] : n : CODE : ' prefix removed, CR/LF as spaces (as the server
    sends every error)."""
    try:
        fn()
    except Exception as e:  # noqa: BLE001 - onnxruntime's exception classes
        return _ORT_PREFIX.sub("", str(e)).replace("\r", " ").replace("\n", " ")
    raise AssertionError("onnxruntime accepted what the server must refuse")


def ort_session(blob: bytes) -> Any:
    import onnxruntime  # noqa: PLC0415

    return onnxruntime.InferenceSession(blob, providers=["CPUExecutionProvider"])


# --------------------------------------------------------------------------------------
# Store, describe, run
# --------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", MODELS)
def test_modelstore_and_modelget(c, name):
    built = getattr(om, name)()
    store(c, "m", built.blob, "CPU", "TAG", name)
    assert c.execute("TYPE", "m") == "AI__MODEL"
    meta = model_meta("ONNX", [n.encode() for n in built.inputs],
                      [n.encode() for n in built.outputs], tag=name.encode())
    assert c.execute("AI.MODELGET", "m", "META") == meta
    assert c.execute("AI.MODELGET", "m", "BLOB") == built.blob
    assert c.execute("AI.MODELGET", "m") == meta + [b"blob", built.blob]


@pytest.mark.parametrize("name", MODELS)
def test_modelexecute_matches_onnxruntime(c, name):
    built = getattr(om, name)()
    store(c, "m", built.blob)
    want = built.run(*built.sample)
    got = execute(c, "m", list(built.sample), len(built.outputs))
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert_same(g, w)


def test_cnn_dynamic_batch_and_modelrun(c):
    built = om.cnn()
    store(c, "cnn", built.blob)
    x = np.random.default_rng(3).random((6, 1, 28, 28), dtype=np.float32)
    [got] = execute(c, "cnn", [x], 1)
    [want] = built.run(x)
    assert got.shape == (6, 10)
    assert_same(got, want)
    assert_ok(c.execute("AI.MODELRUN", "cnn", "INPUTS", "in0", "OUTPUTS", "o"))
    assert_same(get(c, "o"), want)


def test_one_session_per_model(c):
    """Two keys from one blob, and a re-store, each run on their own."""
    built = om.cnn()
    store(c, "m1", built.blob)
    store(c, "m2", built.blob)
    x = built.sample[0]
    [want] = built.run(x)
    [g1] = execute(c, "m1", [x], 1)
    [g2] = execute(c, "m2", [x], 1)
    assert_same(g1, want)
    assert_same(g2, want)
    store(c, "m1", om.add().blob)  # replace m1 with another model
    assert c.execute("AI.MODELGET", "m1", "META")[11] == [b"a", b"b"]
    [g2] = execute(c, "m2", [x], 1)
    assert_same(g2, want)
    assert_ok(c.execute("AI.MODELDEL", "m2"))
    a, b = om.add().sample
    [got] = execute(c, "m1", [a, b], 1)
    assert_same(got, a + b)


def test_io_counts_checked_against_graph(c):
    store(c, "add", om.add().blob)
    store(c, "sp", om.sum_and_product().blob)
    put(c, "a", np.ones(2, np.float32))
    assert_error(c.execute("AI.MODELEXECUTE", "add", "INPUTS", 1, "a", "OUTPUTS", 1, "o"),
                 "Number of keys given as INPUTS here does not match model definition")
    assert_error(c.execute("AI.MODELEXECUTE", "sp", "INPUTS", 2, "a", "a", "OUTPUTS", 1, "o"),
                 "Number of keys given as OUTPUTS here does not match model definition")
    assert c.execute("EXISTS", "o") == 0


@pytest.mark.parametrize("token", list(om.ONNX_ELEM), ids=str)
def test_ort_tensor_types(c, token):
    built = om.identity(token)
    store(c, "m", built.blob)
    dtype = DTYPES[token]
    x = (np.arange(6).reshape(2, 3) % (2 if token == "BOOL" else 100)).astype(dtype)
    [got] = execute(c, "m", [x], 1)
    [want] = built.run(x)
    assert_same(got, want)
    assert_same(got, x)


def test_int64_and_bool_values(c):
    store(c, "i", om.int64_affine().blob)
    x = np.array([-(1 << 50), -1, 0, 1 << 50], np.int64)
    [got] = execute(c, "i", [x], 1)
    assert_same(got, x * 3 + 1)
    store(c, "b", om.bool_and().blob)
    a = np.array([[True, False], [True, True]])
    b = np.array([[False, False], [True, False]])
    [got] = execute(c, "b", [a, b], 1)
    assert_same(got, np.logical_and(a, b))


def test_info_modules_reports_onnxruntime(c):
    info = c.execute("INFO", "MODULES")
    assert info_field(info, "ai_onnxruntime_version") == om.onnxruntime_version(), info


# --------------------------------------------------------------------------------------
# Bad input: ORT's status text, one line; the server answers
# --------------------------------------------------------------------------------------

def test_wrong_input_dtype(c):
    built = om.add()
    store(c, "m", built.blob)
    a = np.ones(3, np.int32)
    b = np.ones(3, np.float32)
    put(c, "a", a)
    put(c, "b", b)
    text = assert_clean_error(c.execute("AI.MODELEXECUTE", "m", "INPUTS", 2, "a", "b",
                                        "OUTPUTS", 1, "o"))
    want = ort_error(lambda: ort_session(built.blob).run(None, {"a": a, "b": b}))
    assert want in text, f"onnxruntime says {want!r}; the reply is {text!r}"
    assert c.execute("EXISTS", "o") == 0
    assert c.execute("PING") == "PONG"


def test_wrong_input_shape(c):
    built = om.cnn()
    store(c, "m", built.blob)
    x = np.zeros((1, 1, 28, 27), np.float32)
    put(c, "x", x)
    text = assert_clean_error(c.execute("AI.MODELEXECUTE", "m", "INPUTS", 1, "x", "OUTPUTS", 1, "o"))
    want = ort_error(lambda: ort_session(built.blob).run(None, {"input": x}))
    assert want in text, f"onnxruntime says {want!r}; the reply is {text!r}"
    assert c.execute("EXISTS", "o") == 0
    assert c.execute("PING") == "PONG"


@pytest.mark.parametrize("blob", [b"this is not an onnx model", b""], ids=["garbage", "empty"])
def test_corrupt_blob_gives_ort_status_text(c, onnx_server, blob):
    want = ort_error(lambda: ort_session(blob))
    assert_error(c.execute("AI.MODELSTORE", "m", "ONNX", "CPU", "BLOB", blob), want)
    assert c.execute("EXISTS", "m") == 0
    assert c.execute("PING") == "PONG"
    assert onnx_server.alive()


def test_truncated_blob(c):
    blob = om.cnn().blob
    assert_clean_error(c.execute("AI.MODELSTORE", "m", "ONNX", "CPU", "BLOB", blob[: len(blob) // 3]))
    assert c.execute("EXISTS", "m") == 0
    assert c.execute("PING") == "PONG"


def test_external_initializer_refused(c, onnx_server):
    assert_error(c.execute("AI.MODELSTORE", "m", "ONNX", "CPU", "BLOB", om.external_initializer()),
                 "Initializer tensors with external data is not allowed.")
    assert c.execute("EXISTS", "m") == 0
    assert c.execute("PING") == "PONG"
    # also through MODELSET, and the server still stores good models
    assert_error(c.execute("AI.MODELSET", "m", "ONNX", "CPU", "BLOB", om.external_initializer()),
                 "Initializer tensors with external data is not allowed.")
    store(c, "m", om.add().blob)
    assert onnx_server.alive()


def test_newer_opset_refused(c, onnx_server):
    blob = om.future_opset()
    text = assert_clean_error(c.execute("AI.MODELSTORE", "m", "ONNX", "CPU", "BLOB", blob))
    assert f"Opset {om.FUTURE_OPSET}" in text, text
    want = ort_error(lambda: ort_session(blob))
    assert want in text, f"onnxruntime says {want!r}; the reply is {text!r}"
    assert c.execute("EXISTS", "m") == 0
    assert c.execute("PING") == "PONG"
    assert onnx_server.alive()


# --------------------------------------------------------------------------------------
# Persistence and concurrency
# --------------------------------------------------------------------------------------

def test_debug_reload_rebuilds_onnx_models(c):
    built = om.sum_and_product()
    store(c, "m", built.blob, "CPU", "TAG", "kept")
    before = c.execute("AI.MODELGET", "m")
    assert_ok(c.execute("DEBUG", "RELOAD"))
    assert c.execute("AI.MODELGET", "m") == before
    want = built.run(*built.sample)
    got = execute(c, "m", list(built.sample), 2)
    for g, w in zip(got, want):
        assert_same(g, w)


def test_concurrent_clients(c, onnx_server):
    built = om.cnn()
    store(c, "cnn", built.blob)
    rng = np.random.default_rng(5)
    xs = [rng.random((1, 1, 28, 28), dtype=np.float32) for _ in range(4)]
    wants = [built.run(x)[0] for x in xs]
    errors: list[str] = []

    def worker(i: int) -> None:
        try:
            with RawClient(onnx_server.port) as cc:
                put(cc, f"x{i}", xs[i])
                for _ in range(10):
                    reply = cc.execute("AI.MODELEXECUTE", "cnn", "INPUTS", 1, f"x{i}",
                                       "OUTPUTS", 1, f"y{i}")
                    if isinstance(reply, RespError):
                        errors.append(str(reply))
                        return
                    np.testing.assert_allclose(get(cc, f"y{i}"), wants[i], rtol=1e-5, atol=1e-6)
        except Exception as e:  # noqa: BLE001
            errors.append(repr(e))

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not errors, errors
