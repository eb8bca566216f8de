"""TORCH models (docs/commands.md, "Models", with the PyTorch backend): TorchScript blobs made at
test time with torch.jit.script and torch.jit.trace (tests/support/torch_models.py), stored,
described by MODELGET, run by MODELEXECUTE / MODELRUN and compared with the output torch
computes in-process from the same blob. Tensor, Tuple and List outputs; the dtypes
libtorch takes and the documented errors for the others; libtorch's error texts without their
C++ backtrace; corrupt blobs; the server keeps answering.

One server per module, with the TORCH backend given at load time.
"""
from __future__ import annotations

import threading

import numpy as np
import pytest

import torch_models as tm
from helpers import assert_error, assert_ok
from model_io import (assert_clean_error, assert_same, framework_error, get, model_meta, put)
from redis_server import Connect, RedisServer
from resp import RawClient, RespError

MODELS = ["add", "linear", "three_inputs", "tuple_out", "list_out", "int64_affine", "bool_xor",
          "cnn"]


@pytest.fixture
def c(torch_server: RedisServer, connect: Connect) -> RawClient:
    return connect(torch_server)


def store(c: RawClient, key: str, built: tm.Built, device: str = "CPU", *opts) -> None:
    assert_ok(c.execute("AI.MODELSTORE", key, "TORCH", device, *opts, "BLOB", built.blob))


def execute(c: RawClient, key: str, inputs: list[np.ndarray], nout: int) -> list[np.ndarray]:
    in_keys = [f"in{i}" for i in range(len(inputs))]
    out_keys = [f"out{i}" for i in range(nout)]
    for k, a in zip(in_keys, inputs):
        put(c, k, a)
    assert_ok(c.execute("AI.MODELEXECUTE", key, "INPUTS", len(in_keys), *in_keys,
                        "OUTPUTS", nout, *out_keys))
    return [get(c, k) for k in out_keys]


# --------------------------------------------------------------------------------------
# Store, describe, run
# --------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", MODELS)
def test_modelstore_and_modelget(c, name):
    built = getattr(tm, name)()
    store(c, "m", built, "CPU", "TAG", f"v-{name}")
    assert c.execute("TYPE", "m") == "AI__MODEL"
    meta = c.execute("AI.MODELGET", "m", "META")
    assert isinstance(meta, list) and len(meta) == 16, meta
    want_in = [n.encode() for n in built.inputs]
    if built.outputs is not None:
        assert meta == model_meta("TORCH", want_in, [b""] * built.outputs, tag=f"v-{name}".encode())
    else:
        # A List[Tensor] output: its length is not in the type; the names are all "".
        fields = dict(zip(meta[::2], meta[1::2]))
        assert fields[b"backend"] == b"TORCH" and fields[b"inputs"] == want_in, meta
        assert all(o == b"" for o in fields[b"outputs"]), meta
    assert c.execute("AI.MODELGET", "m", "BLOB") == built.blob
    full = c.execute("AI.MODELGET", "m")
    assert full[:16] == meta and full[16:] == [b"blob", built.blob]


@pytest.mark.parametrize("name", MODELS)
def test_modelexecute_matches_torch(c, name):
    built = getattr(tm, name)()
    store(c, "m", built)
    want = built.run(*built.sample)
    got = execute(c, "m", list(built.sample), len(want))
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert_same(g, w)


def test_cnn_batches_and_modelrun(c):
    built = tm.cnn()
    store(c, "cnn", built)
    x = tm.cnn_sample(batch=5, seed=11)
    [got] = execute(c, "cnn", [x], 1)
    [want] = built.run(x)
    assert got.shape == (5, 10)
    assert_same(got, want)
    # the deprecated form gives the same
    assert_ok(c.execute("AI.MODELRUN", "cnn", "INPUTS", "in0", "OUTPUTS", "o"))
    assert_same(get(c, "o"), want)


def test_outputs_overwrite_and_inputs_bind_by_position(c):
    built = tm.three_inputs()
    store(c, "m", built)
    a, b, d = built.sample
    put(c, "a", a)
    put(c, "b", b)
    put(c, "d", d)
    put(c, "o", np.array([1, 2], np.int8))
    assert_ok(c.execute("AI.MODELEXECUTE", "m", "INPUTS", 3, "d", "a", "b", "OUTPUTS", 1, "o"))
    [want] = built.run(d, a, b)
    assert_same(get(c, "o"), want)


def test_list_output_wrong_count_is_an_error(c):
    built = tm.list_out()
    store(c, "m", built)
    put(c, "a", built.sample[0])
    put(c, "b", built.sample[1])
    for nout in (2, 4):
        outs = [f"o{i}" for i in range(nout)]
        reply = c.execute("AI.MODELEXECUTE", "m", "INPUTS", 2, "a", "b", "OUTPUTS", nout, *outs)
        assert_error(reply, "ERR Model did not generate the expected number of outputs")
        assert c.execute("EXISTS", *outs) == 0
    assert c.execute("PING") == "PONG"


def test_io_counts_checked_against_forward(c):
    store(c, "add", tm.add())
    store(c, "tup", tm.tuple_out())
    put(c, "a", np.ones(2, np.float32))
    assert_error(c.execute("AI.MODELEXECUTE", "add", "INPUTS", 1, "a", "OUTPUTS", 1, "o"),
                 "Number of keys given as INPUTS here does not match model definition")
    assert_error(c.execute("AI.MODELEXECUTE", "add", "INPUTS", 3, "a", "a", "a", "OUTPUTS", 1, "o"),
                 "Number of keys given as INPUTS here does not match model definition")
    assert_error(c.execute("AI.MODELEXECUTE", "tup", "INPUTS", 2, "a", "a", "OUTPUTS", 1, "o"),
                 "Number of keys given as OUTPUTS here does not match model definition")
    assert_error(c.execute("AI.MODELEXECUTE", "add", "INPUTS", 2, "a", "a", "OUTPUTS", 2, "o", "p"),
                 "Number of keys given as OUTPUTS here does not match model definition")
    assert c.execute("EXISTS", "o", "p") == 0


# --------------------------------------------------------------------------------------
# dtypes
# --------------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int8, np.int16, np.int32, np.int64,
                                   np.uint8, np.bool_], ids=lambda d: np.dtype(d).name)
def test_supported_dtypes_round_trip(c, dtype):
    built = tm.flip()
    store(c, "m", built)
    x = (np.arange(6).reshape(3, 2) % (2 if dtype is np.bool_ else 100)).astype(dtype)
    [got] = execute(c, "m", [x], 1)
    [want] = built.run(x)
    assert_same(got, want)
    assert_same(got, x[::-1])


def test_int64_and_bool_values(c):
    store(c, "i", tm.int64_affine())
    x = np.array([-(1 << 50), -1, 0, 1 << 50], np.int64)
    [got] = execute(c, "i", [x], 1)
    assert_same(got, x * 3 + 1)
    store(c, "b", tm.bool_xor())
    a = np.array([[True, False], [True, True]])
    b = np.array([[False, False], [True, False]])
    [got] = execute(c, "b", [a, b], 1)
    assert_same(got, np.logical_xor(a, b))


def test_uint16_and_string_inputs_give_spec_errors(c):
    """libtorch 2.13 has a UInt16 dtype, so UINT16 reaches the model (1.2's libtorch refused it
    with `Unsupported kUInt bits 16`); an op without a UInt16 kernel then answers with
    libtorch's own one-line text. STRING keeps 1.2's text."""
    store(c, "m", tm.flip())
    assert_ok(c.execute("AI.TENSORSET", "u", "UINT16", 2, "VALUES", 1, 2))
    got = c.execute("AI.MODELEXECUTE", "m", "INPUTS", 1, "u", "OUTPUTS", 1, "o")
    assert isinstance(got, RespError) and "UInt16" in str(got), got
    assert "Exception raised from" not in str(got) and "frame #" not in str(got)
    assert_ok(c.execute("AI.TENSORSET", "s", "STRING", 2, "VALUES", "x", "y"))
    assert_error(c.execute("AI.MODELEXECUTE", "m", "INPUTS", 1, "s", "OUTPUTS", 1, "o"),
                 "Unsupported code 7")
    assert c.execute("EXISTS", "o") == 0
    assert c.execute("PING") == "PONG"


def test_float16_output_is_blob_only(c):
    built = tm.half_out()
    store(c, "h", built)
    x = np.array([1.5, 2, -0.25], np.float32)
    put(c, "x", x)
    assert_ok(c.execute("AI.MODELEXECUTE", "h", "INPUTS", 1, "x", "OUTPUTS", 1, "o"))
    assert c.execute("TYPE", "o") == "AI_TENSOR"
    [want] = built.run(x)
    assert c.execute("AI.TENSORGET", "o", "BLOB") == want.tobytes() == x.astype(np.float16).tobytes()
    assert_error(c.execute("AI.TENSORGET", "o", "META"), "ERR unsupported dtype")


# --------------------------------------------------------------------------------------
# Bad input: libtorch's message, one line, no C++ backtrace; the server answers
# --------------------------------------------------------------------------------------

def test_wrong_input_dtype(c):
    built = tm.linear()
    store(c, "m", built)
    x = np.zeros((2, 4), np.int32)
    put(c, "x", x)
    text = assert_clean_error(c.execute("AI.MODELEXECUTE", "m", "INPUTS", 1, "x", "OUTPUTS", 1, "o"))
    want = framework_error(lambda: built.run(x))
    assert want in text, f"libtorch says {want!r}; the reply is {text!r}"
    assert c.execute("EXISTS", "o") == 0
    assert c.execute("PING") == "PONG"


def test_wrong_input_shape(c):
    built = tm.linear()
    store(c, "m", built)
    x = np.zeros((2, 5), np.float32)
    put(c, "x", x)
    text = assert_clean_error(c.execute("AI.MODELEXECUTE", "m", "INPUTS", 1, "x", "OUTPUTS", 1, "o"))
    want = framework_error(lambda: built.run(x))
    assert want in text, f"libtorch says {want!r}; the reply is {text!r}"
    # broadcasting failure in a scripted module
    add = tm.add()
    store(c, "add", add)
    a, b = np.zeros((2, 4), np.float32), np.zeros(3, np.float32)
    put(c, "a", a)
    put(c, "b", b)
    text = assert_clean_error(c.execute("AI.MODELEXECUTE", "add", "INPUTS", 2, "a", "b",
                                        "OUTPUTS", 1, "o"))
    want = framework_error(lambda: add.run(a, b))
    assert want in text, f"libtorch says {want!r}; the reply is {text!r}"
    assert c.execute("EXISTS", "o") == 0
    assert c.execute("PING") == "PONG"


def test_forward_arguments_not_declared_tensor(c):
    """The backend skips libtorch's argument check only when every argument of forward is
    declared Tensor; any other declaration keeps it: an int argument given a tensor is
    libtorch's own error, an Optional[Tensor] one runs."""
    built = tm.int_arg()
    store(c, "m", built)
    x, n = built.sample
    put(c, "x", x)
    put(c, "n", n)
    text = assert_clean_error(c.execute("AI.MODELEXECUTE", "m", "INPUTS", 2, "x", "n",
                                        "OUTPUTS", 1, "o"))
    assert "Expected a value of type 'int' for argument 'n'" in text, text
    assert c.execute("EXISTS", "o") == 0
    opt = tm.optional_arg()
    store(c, "opt", opt)
    (got,) = execute(c, "opt", list(opt.sample), 1)
    assert_same(got, opt.run(*opt.sample)[0])
    assert c.execute("PING") == "PONG"


@pytest.mark.parametrize("blob", [b"this is not a torchscript archive", b"PK\x03\x04garbage",
                                  "truncated"], ids=["text", "zip-magic", "truncated"])
def test_corrupt_blob(c, torch_server, blob):
    if blob == "truncated":
        blob = tm.cnn().blob[: len(tm.cnn().blob) // 2]
    assert_clean_error(c.execute("AI.MODELSTORE", "m", "TORCH", "CPU", "BLOB", blob))
    assert c.execute("EXISTS", "m") == 0
    assert c.execute("PING") == "PONG"
    assert torch_server.alive()
    # a good model still stores and runs afterwards
    store(c, "m", tm.add())
    [got] = execute(c, "m", [np.ones(2, np.float32), np.ones(2, np.float32)], 1)
    assert_same(got, np.full(2, 2, np.float32))


def test_empty_blob(c):
    assert_clean_error(c.execute("AI.MODELSTORE", "m", "TORCH", "CPU", "BLOB", b""))
    assert c.execute("EXISTS", "m") == 0
    assert c.execute("PING") == "PONG"


# --------------------------------------------------------------------------------------
# Persistence and concurrency
# --------------------------------------------------------------------------------------

def test_debug_reload_rebuilds_torch_models(c):
    built = tm.tuple_out()
    store(c, "m", built, "CPU", "TAG", "kept")
    before = c.execute("AI.MODELGET", "m")
    assert_ok(c.execute("DEBUG", "RELOAD"))
    assert c.execute("AI.MODELGET", "m") == before
    want = built.run(*built.sample)
    got = execute(c, "m", list(built.sample), 2)
    for g, w in zip(got, want):
        assert_same(g, w)


def test_concurrent_clients(c, torch_server):
    built = tm.cnn()
    store(c, "cnn", built)
    xs = [tm.cnn_sample(batch=1, seed=100 + i) for i in range(4)]
    wants = [built.run(x)[0] for x in xs]
    errors: list[str] = []

    def worker(i: int) -> None:
        try:
            with RawClient(torch_server.port) as cc:
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
