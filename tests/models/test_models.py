"""TF models: AI.MODELSTORE, AI.MODELSET (incl. the keyword-less seed form), AI.MODELGET,
AI.MODELDEL, AI.MODELEXECUTE and AI.MODELRUN (docs/commands.md, "Models"): replies, every
error string in the order docs/commands.md gives, backend error texts, keyspace behaviour,
DEBUG RELOAD.

One server per module, with the TF backend given at load time (conftest's tf_server).
The graphs come from tests/support/tf_graphs.py (built with the real tensorflow package)."""
from __future__ import annotations

import numpy as np
import pytest

import tf_graphs
from helpers import (DEFAULT_CHUNK_SIZE, MODEL_EMPTY, TENSOR_EMPTY, WRONGTYPE, arity,
                     assert_error, assert_error_startswith, assert_ok)
from redis_server import Connect, RedisServer
from resp import RawClient, RespError, Status

PB = "<mul graph>"  # placeholder in parametrized argument lists, replaced by the blob


@pytest.fixture
def c(tf_server: RedisServer, connect: Connect) -> RawClient:
    return connect(tf_server)


def subst(args):
    return [tf_graphs.mul_graph() if a == PB else a for a in args]


def store_mul(c: RawClient, key: str = "m", device: str = "CPU", *opts) -> None:
    assert_ok(c.execute("AI.MODELSTORE", key, "TF", device, *opts, "INPUTS", 2, "a", "b",
                        "OUTPUTS", 1, "mul", "BLOB", tf_graphs.mul_graph()))


def store_multi(c: RawClient, key: str = "m3") -> None:
    assert_ok(c.execute("AI.MODELSTORE", key, "TF", "CPU", "INPUTS", 2, "a", "b",
                        "OUTPUTS", 3, "mul", "add", "sub", "BLOB", tf_graphs.multi_output_graph()))


def store_many_inputs(c: RawClient, key: str = "m5") -> None:
    assert_ok(c.execute("AI.MODELSTORE", key, "TF", "CPU", "INPUTS", 5, "i0", "i1", "i2", "i3",
                        "i4", "OUTPUTS", 1, "sum", "BLOB", tf_graphs.many_inputs_graph()))


def set_ab(c: RawClient) -> None:
    assert_ok(c.execute("AI.TENSORSET", "a", "FLOAT", 2, 2, "VALUES", 2, 3, 2, 3))
    assert_ok(c.execute("AI.TENSORSET", "b", "FLOAT", 2, 2, "VALUES", 2, 3, 2, 3))


def meta16(inputs, outputs, device=b"CPU", tag=b"", batch=0, minbatch=0, minbatchtimeout=0):
    return [b"backend", b"TF", b"device", device, b"tag", tag, b"batchsize", batch,
            b"minbatchsize", minbatch, b"inputs", inputs, b"outputs", outputs,
            b"minbatchtimeout", minbatchtimeout]


# --------------------------------------------------------------------------------------
# MODELSTORE / MODELGET happy paths
# --------------------------------------------------------------------------------------

def test_modelstore_and_modelget(c):
    store_mul(c)
    pb = tf_graphs.mul_graph()
    assert c.execute("TYPE", "m") == "AI__MODEL"
    m = meta16([b"a", b"b"], [b"mul"])
    assert c.execute("AI.MODELGET", "m", "META") == m
    assert c.execute("AI.MODELGET", "m", "BLOB") == pb
    assert c.execute("AI.MODELGET", "m") == m + [b"blob", pb]
    assert c.execute("AI.MODELGET", "m", "META", "BLOB") == m + [b"blob", pb]
    assert c.execute("AI.MODELGET", "m", "BLOB", "META") == m + [b"blob", pb]
    # other tokens are silently ignored
    assert c.execute("AI.MODELGET", "m", "NOTATOKEN") == m + [b"blob", pb]
    assert c.execute("AI.MODELGET", "m", "META", "NOTATOKEN") == m
    assert c.execute("AI.MODELGET", "m", "NOTATOKEN", "BLOB") == pb
    assert c.execute("AI.MODELGET", "m", "meta") == m
    assert c.execute("AI.MODELGET", "m", "blob") == pb


def test_modelstore_options_and_device_as_typed(c):
    store_mul(c, "m", "cpu", "TAG", "v1.0", "BATCHSIZE", 4, "MINBATCHSIZE", 2, "MINBATCHTIMEOUT", 10)
    assert c.execute("AI.MODELGET", "m", "META") == meta16(
        [b"a", b"b"], [b"mul"], device=b"cpu", tag=b"v1.0", batch=4, minbatch=2, minbatchtimeout=10)
    store_mul(c, "m2", "CPU:0", "TAG", "")
    assert c.execute("AI.MODELGET", "m2", "META") == meta16([b"a", b"b"], [b"mul"], device=b"CPU:0")
    # ArgsCursor numbers accept integral doubles
    store_mul(c, "m3", "Cpu", "BATCHSIZE", "2.0")
    assert c.execute("AI.MODELGET", "m3", "META") == meta16([b"a", b"b"], [b"mul"], device=b"Cpu", batch=2)


def test_modelstore_blob_chunks_concatenated(c):
    pb = tf_graphs.mul_graph()
    parts = [pb[:10], pb[10:50], pb[50:]]
    assert_ok(c.execute("AI.MODELSTORE", "m", "TF", "CPU", "INPUTS", 2, "a", "b", "OUTPUTS", 1,
                        "mul", "BLOB", *parts))
    assert c.execute("AI.MODELGET", "m", "BLOB") == pb
    set_ab(c)
    assert_ok(c.execute("AI.MODELEXECUTE", "m", "INPUTS", 2, "a", "b", "OUTPUTS", 1, "c"))
    assert c.execute("AI.TENSORGET", "c", "VALUES") == [b"4", b"9", b"4", b"9"]


def test_modelget_blob_chunking(c):
    store_mul(c)
    pb = tf_graphs.mul_graph()
    L = len(pb)
    try:
        assert_ok(c.execute("AI.CONFIG", "MODEL_CHUNK_SIZE", 50))
        expected = [pb[i:i + 50] for i in range(0, L, 50)]
        if L % 50 == 0:
            expected.append(b"")
        assert c.execute("AI.MODELGET", "m", "BLOB") == expected
        assert c.execute("AI.MODELGET", "m")[-1] == expected
        # QUIRK: an exact multiple of the chunk size ends with an empty chunk
        assert_ok(c.execute("AI.CONFIG", "MODEL_CHUNK_SIZE", L))
        assert c.execute("AI.MODELGET", "m", "BLOB") == [pb, b""]
        assert_ok(c.execute("AI.CONFIG", "MODEL_CHUNK_SIZE", L + 1))
        assert c.execute("AI.MODELGET", "m", "BLOB") == pb
    finally:
        assert_ok(c.execute("AI.CONFIG", "MODEL_CHUNK_SIZE", DEFAULT_CHUNK_SIZE))


def test_modelstore_replaces_existing(c):
    store_mul(c)
    assert c.execute("EXPIRE", "m", 1000) == 1
    store_multi(c, "m")
    assert c.execute("TTL", "m") == -1
    assert c.execute("AI.MODELGET", "m", "META") == meta16([b"a", b"b"], [b"mul", b"add", b"sub"])


# --------------------------------------------------------------------------------------
# MODELSTORE errors, in the order checked (docs/commands.md)
# --------------------------------------------------------------------------------------

MODELSTORE_ERRORS = [
    # 1 arity
    (["m", "TF", "CPU", "BLOB"], arity("ai.modelstore")),
    (["m"], arity("ai.modelstore")),
    # 2 backend (before device)
    (["m", "FOO", "CPU", "BLOB", "x"], "ERR unsupported backend"),
    (["m", "FOO", "XPU", "BLOB", "x"], "ERR unsupported backend"),
    (["m", "tensorflow", "CPU", "BLOB", "x"], "ERR unsupported backend"),
    # 3 device (before options)
    (["m", "TF", "XPU", "BLOB", "x"], "ERR Invalid DEVICE"),
    (["m", "TF", "CPU:x", "BLOB", "x"], "ERR Invalid DEVICE"),
    (["m", "TF", "CPU:123456", "BLOB", "x"], "ERR Invalid DEVICE"),
    (["m", "TF", "CPUU", "BLOB", "x"], "ERR Invalid DEVICE"),
    (["m", "TF", "XPU", "BATCHSIZE", "x", "BLOB", "x"], "ERR Invalid DEVICE"),
    # 4 BATCHSIZE
    (["m", "TF", "CPU", "BATCHSIZE", "x", "BLOB", "x"], "ERR Invalid argument for BATCHSIZE"),
    (["m", "TF", "CPU", "BATCHSIZE", "-1", "BLOB", "x"], "ERR Invalid argument for BATCHSIZE"),
    (["m", "TF", "CPU", "BATCHSIZE", "1.5", "BLOB", "x"], "ERR Invalid argument for BATCHSIZE"),
    (["m", "TF", "CPU", "TAG", "t", "BATCHSIZE", "x", "BLOB", "x"], "ERR Invalid argument for BATCHSIZE"),
    # 5 MINBATCHSIZE
    (["m", "TF", "CPU", "BATCHSIZE", "2", "MINBATCHSIZE", "x", "BLOB", "x"],
     "ERR Invalid argument for MINBATCHSIZE"),
    (["m", "TF", "CPU", "MINBATCHSIZE", "2", "BLOB", "x"], "ERR MINBATCHSIZE specified without BATCHSIZE"),
    # 6 MINBATCHTIMEOUT
    (["m", "TF", "CPU", "BATCHSIZE", "2", "MINBATCHSIZE", "1", "MINBATCHTIMEOUT", "x", "BLOB", "x"],
     "ERR Invalid argument for MINBATCHTIMEOUT"),
    (["m", "TF", "CPU", "BATCHSIZE", "2", "MINBATCHTIMEOUT", "5", "BLOB", "x"],
     "ERR MINBATCHTIMEOUT specified without MINBATCHSIZE"),
    # 7 nothing after the options
    (["m", "TF", "CPU", "TAG", "t"], "ERR Insufficient arguments, missing model BLOB"),
    (["m", "TF", "CPU", "BATCHSIZE", "2"], "ERR Insufficient arguments, missing model BLOB"),
    (["m", "ONNX", "CPU", "TAG", "t", "BLOB"], "ERR Insufficient arguments, missing model BLOB"),
    # 8 TF inputs
    (["m", "TF", "CPU", "BLOB", "x"], "ERR INPUTS not specified for TF"),
    (["m", "TF", "CPU", "BATCHSIZE", "2", "TAG", "t", "INPUTS", "2", "a", "b", "OUTPUTS", "1", "mul",
      "BLOB", "x"], "ERR INPUTS not specified for TF"),
    (["m", "TF", "CPU", "INPUTS", "x", "a", "OUTPUTS", "1", "mul", "BLOB", "x"],
     "ERR Invalid argument for input_count"),
    (["m", "TF", "CPU", "INPUTS", "0", "OUTPUTS", "1", "mul", "BLOB", "x"],
     "ERR Invalid argument for input_count"),
    (["m", "TF", "CPU", "INPUTS", "3", "a", "b"],
     "ERR number of model inputs does not match the number of given arguments"),
    # 9 TF outputs
    (["m", "TF", "CPU", "INPUTS", "3", "a", "b", "OUTPUTS", "1", "mul", "BLOB", "x"],
     "ERR OUTPUTS not specified for TF"),
    (["m", "TF", "CPU", "INPUTS", "2", "a", "b", "BLOB", "x"], "ERR OUTPUTS not specified for TF"),
    (["m", "TF", "CPU", "INPUTS", "1", "a"], "ERR OUTPUTS not specified for TF"),
    (["m", "TF", "CPU", "INPUTS", "2", "a", "b", "OUTPUTS", "x", "mul", "BLOB", "x"],
     "ERR Invalid argument for output_count"),
    (["m", "TF", "CPU", "INPUTS", "2", "a", "b", "OUTPUTS", "0", "BLOB", "x"],
     "ERR Invalid argument for output_count"),
    (["m", "TF", "CPU", "INPUTS", "1", "a", "OUTPUTS"], "ERR Invalid argument for output_count"),
    (["m", "TF", "CPU", "INPUTS", "2", "a", "b", "OUTPUTS", "2", "mul"],
     "ERR number of model outputs does not match the number of given arguments"),
    # 8 non-TF: INPUTS forbidden
    (["m", "TORCH", "CPU", "INPUTS", "1", "a", "BLOB", "x"],
     "ERR INPUTS argument should not be specified for this backend"),
    (["m", "ONNX", "CPU", "INPUTS", "1", "a", "OUTPUTS", "1", "b", "BLOB", "x"],
     "ERR INPUTS argument should not be specified for this backend"),
    (["m", "TFLITE", "CPU", "INPUTS", "1", "a", "BLOB", "x"],
     "ERR INPUTS argument should not be specified for this backend"),
    # 10 BLOB keyword
    (["m", "TF", "CPU", "INPUTS", "2", "a", "b", "OUTPUTS", "1", "mul", "NOTBLOB", "x"],
     "ERR Invalid argument, expected BLOB"),
    (["m", "TF", "CPU", "INPUTS", "2", "a", "b", "OUTPUTS", "1", "mul"], "ERR Invalid argument, expected BLOB"),
    (["m", "ONNX", "CPU", "NOTBLOB", "x"], "ERR Invalid argument, expected BLOB"),
    (["m", "ONNX", "CPU", "BATCHSIZE", "2", "TAG", "t", "BLOB", "x"], "ERR Invalid argument, expected BLOB"),
    # 11 BLOB without a chunk
    (["m", "TF", "CPU", "INPUTS", "2", "a", "b", "OUTPUTS", "1", "mul", "BLOB"],
     "ERR Insufficient arguments, missing model BLOB"),
]


@pytest.mark.parametrize("args,expected", MODELSTORE_ERRORS, ids=[e for _, e in MODELSTORE_ERRORS])
def test_modelstore_errors(c, args, expected):
    assert_error(c.execute("AI.MODELSTORE", *subst(args)), expected)
    assert c.execute("EXISTS", "m") == 0


def _store(c, key, inputs, outputs, blob, device="CPU"):
    return c.execute("AI.MODELSTORE", key, "TF", device, "INPUTS", len(inputs), *inputs,
                     "OUTPUTS", len(outputs), *outputs, "BLOB", blob)


def test_modelstore_input_not_in_graph(c):
    assert_error(_store(c, "m", ["a", "x"], ["mul"], tf_graphs.mul_graph()),
                 'ERR Input node named "x" not found in TF graph.')


def test_modelstore_input_not_a_placeholder(c):
    assert_error(_store(c, "m", ["a", "k"], ["mul"], tf_graphs.const_input_graph()),
                 'ERR Input node named "k" not found in TF graph.')
    # the output may be any op, the Const included
    assert_ok(_store(c, "m", ["a"], ["mul"], tf_graphs.const_input_graph()))
    assert_ok(c.execute("AI.TENSORSET", "a", "FLOAT", 2, "VALUES", 1, 2))
    assert_ok(c.execute("AI.MODELEXECUTE", "m", "INPUTS", 1, "a", "OUTPUTS", 1, "c"))
    assert c.execute("AI.TENSORGET", "c", "VALUES") == [b"3", b"6"]


def test_modelstore_output_not_in_graph(c):
    assert_error(_store(c, "m", ["a", "b"], ["nope"], tf_graphs.mul_graph()),
                 'ERR Output node named "nope" not found in TF graph')


def test_modelstore_corrupt_graph(c):
    assert_error(_store(c, "m", ["a", "b"], ["mul"], b"this is not a graph"), "Invalid GraphDef")
    assert c.execute("EXISTS", "m") == 0
    assert c.execute("PING") == "PONG"


def test_modelstore_gpu_without_cuda(c):
    assert_error(_store(c, "m", ["a", "b"], ["mul"], tf_graphs.mul_graph(), device="GPU"),
                 "ERR GPU requested but TF couldn't find CUDA")


def test_modelstore_wrongtype_checked_after_build(c):
    assert c.execute("SET", "k", "x") == "OK"
    assert_error(_store(c, "k", ["a", "b"], ["mul"], tf_graphs.mul_graph()), WRONGTYPE)
    # the model is built first: a backend error wins over the key type
    assert_error(_store(c, "k", ["a", "b"], ["mul"], b"garbage"), "Invalid GraphDef")
    assert c.execute("GET", "k") == b"x"
    assert_ok(c.execute("AI.TENSORSET", "t", "FLOAT", 1))
    assert_error(_store(c, "t", ["a", "b"], ["mul"], tf_graphs.mul_graph()), WRONGTYPE)


# --------------------------------------------------------------------------------------
# MODELSET (deprecated form, plus the keyword-less seed form)
# --------------------------------------------------------------------------------------

def test_modelset_with_blob_keyword(c):
    assert_ok(c.execute("AI.MODELSET", "m", "TF", "CPU", "INPUTS", "a", "b", "OUTPUTS", "mul",
                        "BLOB", tf_graphs.mul_graph()))
    assert c.execute("AI.MODELGET", "m", "META") == meta16([b"a", b"b"], [b"mul"])
    assert c.execute("AI.MODELGET", "m", "BLOB") == tf_graphs.mul_graph()


def test_modelset_seed_form_without_blob_keyword(c):
    assert_ok(c.execute("AI.MODELSET", "m", "TF", "CPU", "INPUTS", "a", "b", "OUTPUTS", "mul",
                        tf_graphs.mul_graph()))
    assert c.execute("AI.MODELGET", "m", "META") == meta16([b"a", b"b"], [b"mul"])
    assert c.execute("AI.MODELGET", "m", "BLOB") == tf_graphs.mul_graph()
    set_ab(c)
    assert_ok(c.execute("AI.MODELRUN", "m", "INPUTS", "a", "b", "OUTPUTS", "c"))
    assert c.execute("AI.TENSORGET", "c", "VALUES") == [b"4", b"9", b"4", b"9"]


def test_modelset_seed_form_several_outputs(c):
    assert_ok(c.execute("AI.MODELSET", "m", "TF", "CPU", "INPUTS", "a", "b", "OUTPUTS", "mul",
                        "add", "sub", tf_graphs.multi_output_graph()))
    assert c.execute("AI.MODELGET", "m", "META") == meta16([b"a", b"b"], [b"mul", b"add", b"sub"])


def test_modelset_seed_form_missing_blob_is_an_error(c):
    reply = c.execute("AI.MODELSET", "m", "TF", "CPU", "INPUTS", "a", "b", "OUTPUTS", "mul")
    assert isinstance(reply, RespError), reply
    assert c.execute("EXISTS", "m") == 0
    assert c.execute("PING") == "PONG"


def test_modelset_options(c):
    assert_ok(c.execute("AI.MODELSET", "m", "TF", "CPU:1", "TAG", "t1",
                        "BATCHSIZE", 4, "MINBATCHSIZE", 2, "MINBATCHTIMEOUT", 7,
                        "INPUTS", "a", "b", "OUTPUTS", "mul", "BLOB", tf_graphs.mul_graph()))
    assert c.execute("AI.MODELGET", "m", "META") == meta16(
        [b"a", b"b"], [b"mul"], device=b"CPU:1", tag=b"t1", batch=4, minbatch=2, minbatchtimeout=7)


MODELSET_ERRORS = [
    (["m", "TF"], arity("ai.modelset")),
    (["m", "FOO", "CPU"], "ERR unsupported backend"),
    (["m", "TF", "CPU:12345678", "INPUTS", "a", "b", "OUTPUTS", "mul", "BLOB", PB], "ERR Invalid DEVICE"),
    (["m", "TF", "INPUTS", "a", "b", "OUTPUTS", "mul", "BLOB", PB], "ERR Invalid DEVICE"),
    (["m", "TF", "BLOB", PB], "ERR Invalid DEVICE"),
    (["m", "TF", "TAG", "t", "INPUTS", "a", "OUTPUTS", "mul", "BLOB", PB], "ERR Invalid DEVICE"),
    (["m", "TFLITE", "CPU", "BATCHSIZE", "2", "BLOB", "x"],
     "ERR Auto-batching not supported by the TFLITE backend"),
    (["m", "TF", "CPU", "BATCHSIZE", "x", "INPUTS", "a", "b", "OUTPUTS", "mul", "BLOB", PB],
     "ERR Invalid argument for BATCHSIZE"),
    (["m", "TF", "CPU", "MINBATCHSIZE", "x", "INPUTS", "a", "b", "OUTPUTS", "mul", "BLOB", PB],
     "ERR MINBATCHSIZE specified without BATCHSIZE"),
    (["m", "TF", "CPU", "BATCHSIZE", "2", "MINBATCHSIZE", "x", "INPUTS", "a", "b", "OUTPUTS", "mul",
      "BLOB", PB], "ERR Invalid argument for MINBATCHSIZE"),
    (["m", "TF", "CPU", "MINBATCHTIMEOUT", "5", "INPUTS", "a", "b", "OUTPUTS", "mul", "BLOB", PB],
     "ERR MINBATCHTIMEOUT specified without BATCHSIZE"),
    (["m", "TF", "CPU", "BATCHSIZE", "2", "MINBATCHTIMEOUT", "5", "INPUTS", "a", "b", "OUTPUTS", "mul",
      "BLOB", PB], "ERR MINBATCHTIMEOUT specified without MINBATCHSIZE"),
    (["m", "TF", "CPU", "BATCHSIZE", "2", "MINBATCHSIZE", "1", "MINBATCHTIMEOUT", "x", "INPUTS", "a",
      "b", "OUTPUTS", "mul", "BLOB", PB], "ERR Invalid argument for MINBATCHTIMEOUT"),
    (["m", "TF", "CPU"], "ERR Insufficient arguments, missing model BLOB"),
    (["m", "TF", "CPU", "TAG", "t"], "ERR Insufficient arguments, missing model BLOB"),
    (["m", "TF", "CPU", "BLOB", PB], "ERR Insufficient arguments, INPUTS and OUTPUTS not specified"),
    (["m", "TF", "CPU", "NOTINPUTS", "a", "OUTPUTS", "mul", "BLOB", PB], "ERR INPUTS not specified"),
    (["m", "TF", "CPU", "INPUTS", "a", "b", "BLOB", PB], "ERR OUTPUTS not specified"),
    (["m", "TF", "CPU", "INPUTS", "a", "b", "OUTPUTS", "mul", "BLOB"],
     "ERR Insufficient arguments, missing model BLOB"),
    # backend texts
    (["m", "TF", "CPU", "INPUTS", "a", "x", "OUTPUTS", "mul", "BLOB", PB],
     'ERR Input node named "x" not found in TF graph.'),
    (["m", "TF", "CPU", "INPUTS", "a", "b", "OUTPUTS", "nope", "BLOB", PB],
     'ERR Output node named "nope" not found in TF graph'),
    (["m", "TF", "CPU", "INPUTS", "a", "b", "OUTPUTS", "mul", "BLOB", b"garbage"], "Invalid GraphDef"),
    (["m", "TF", "XPU", "INPUTS", "a", "b", "OUTPUTS", "mul", "BLOB", PB], "ERR unsupported device"),
    (["m", "TF", "GPU", "INPUTS", "a", "b", "OUTPUTS", "mul", "BLOB", PB],
     "ERR GPU requested but TF couldn't find CUDA"),
]


@pytest.mark.parametrize("args,expected", MODELSET_ERRORS, ids=[e for _, e in MODELSET_ERRORS])
def test_modelset_errors(c, args, expected):
    assert_error(c.execute("AI.MODELSET", *subst(args)), expected)
    assert c.execute("EXISTS", "m") == 0


def test_modelset_wrongtype(c):
    c.execute("SET", "k", "x")
    assert_error(c.execute("AI.MODELSET", "k", "TF", "CPU", "INPUTS", "a", "b", "OUTPUTS", "mul",
                           "BLOB", tf_graphs.mul_graph()), WRONGTYPE)


# --------------------------------------------------------------------------------------
# MODELGET / MODELDEL errors
# --------------------------------------------------------------------------------------

def test_modelget_errors(c):
    assert_error(c.execute("AI.MODELGET"), arity("ai.modelget"))
    store_mul(c)
    assert_error(c.execute("AI.MODELGET", "m", "META", "BLOB", "META"), arity("ai.modelget"))
    assert_error(c.execute("AI.MODELGET", "nokey"), MODEL_EMPTY)
    assert_error(c.execute("AI.MODELGET", "nokey", "META"), MODEL_EMPTY)
    c.execute("SET", "str", "x")
    assert_error(c.execute("AI.MODELGET", "str", "META"), WRONGTYPE)
    assert_ok(c.execute("AI.TENSORSET", "t", "FLOAT", 1))
    assert_error(c.execute("AI.MODELGET", "t"), WRONGTYPE)


def test_modeldel(c):
    store_mul(c)
    assert_ok(c.execute("AI.MODELDEL", "m"))
    assert c.execute("EXISTS", "m") == 0
    assert_error(c.execute("AI.MODELDEL", "m"), MODEL_EMPTY)
    assert_error(c.execute("AI.MODELGET", "m"), MODEL_EMPTY)
    set_ab(c)
    assert_error(c.execute("AI.MODELEXECUTE", "m", "INPUTS", 2, "a", "b", "OUTPUTS", 1, "c"), MODEL_EMPTY)
    assert_error(c.execute("AI.MODELDEL"), arity("ai.modeldel"))
    assert_error(c.execute("AI.MODELDEL", "a", "b"), arity("ai.modeldel"))
    c.execute("SET", "str", "x")
    assert_error(c.execute("AI.MODELDEL", "str"), WRONGTYPE)
    assert_error(c.execute("AI.MODELDEL", "a"), WRONGTYPE)
    assert c.execute("AI.TENSORGET", "a", "VALUES") == [b"2", b"3", b"2", b"3"]
    # a plain DEL frees a model too
    store_mul(c)
    assert c.execute("DEL", "m") == 1
    assert_error(c.execute("AI.MODELGET", "m"), MODEL_EMPTY)


def test_cross_type_wrongtype(c):
    store_mul(c)
    assert_error(c.execute("AI.TENSORSET", "m", "FLOAT", 1), WRONGTYPE)
    assert_error(c.execute("AI.TENSORGET", "m"), WRONGTYPE)
    assert c.execute("TYPE", "m") == "AI__MODEL"


# --------------------------------------------------------------------------------------
# MODELEXECUTE
# --------------------------------------------------------------------------------------

def test_modelexecute(c):
    store_mul(c)
    set_ab(c)
    reply = c.execute("AI.MODELEXECUTE", "m", "INPUTS", 2, "a", "b", "OUTPUTS", 1, "c")
    assert isinstance(reply, Status) and reply == "OK"
    assert c.execute("AI.TENSORGET", "c", "VALUES") == [b"4", b"9", b"4", b"9"]
    assert c.execute("AI.TENSORGET", "c", "META") == [b"dtype", b"FLOAT", b"shape", [2, 2]]
    assert c.execute("AI.TENSORGET", "c", "BLOB") == np.array([4, 9, 4, 9], np.float32).tobytes()
    assert c.execute("TYPE", "c") == "AI_TENSOR"
    # inputs bind positionally to the declared INPUTS names
    assert_ok(c.execute("AI.TENSORSET", "x", "FLOAT", 3, "VALUES", 1, 2, 3))
    assert_ok(c.execute("AI.TENSORSET", "y", "FLOAT", 3, "VALUES", 4, 5, 6))
    assert_ok(c.execute("AI.MODELEXECUTE", "m", "INPUTS", 2, "x", "y", "OUTPUTS", 1, "z", "TIMEOUT", 10000))
    assert c.execute("AI.TENSORGET", "z", "VALUES") == [b"4", b"10", b"18"]
    # lower-case keywords; the same key as input and output
    assert_ok(c.execute("AI.MODELEXECUTE", "m", "inputs", 2, "x", "x", "outputs", 1, "x", "timeout", 5000))
    assert c.execute("AI.TENSORGET", "x", "VALUES") == [b"1", b"4", b"9"]


def test_modelexecute_several_outputs(c):
    store_multi(c)
    assert_ok(c.execute("AI.TENSORSET", "a", "FLOAT", 2, 2, "VALUES", 2, 3, 2, 3))
    assert_ok(c.execute("AI.TENSORSET", "b", "FLOAT", 2, 2, "VALUES", 1, 1, 2, 2))
    assert_ok(c.execute("AI.MODELEXECUTE", "m3", "INPUTS", 2, "a", "b", "OUTPUTS", 3, "x", "y", "z"))
    assert c.execute("AI.TENSORGET", "x", "VALUES") == [b"2", b"3", b"4", b"6"]
    assert c.execute("AI.TENSORGET", "y", "VALUES") == [b"3", b"4", b"4", b"5"]
    assert c.execute("AI.TENSORGET", "z", "VALUES") == [b"1", b"2", b"0", b"1"]


def test_modelexecute_many_inputs(c):
    store_many_inputs(c)
    for k in range(5):
        assert_ok(c.execute("AI.TENSORSET", f"i{k}", "FLOAT", 2, "VALUES", k, 10 * k))
    assert_ok(c.execute("AI.MODELEXECUTE", "m5", "INPUTS", 5, "i0", "i1", "i2", "i3", "i4",
                        "OUTPUTS", 1, "s"))
    assert c.execute("AI.TENSORGET", "s", "VALUES") == [b"10", b"100"]


def test_modelexecute_scalar_tensors(c):
    store_mul(c)
    assert_ok(c.execute("AI.TENSORSET", "a", "FLOAT", "VALUES", 3))
    assert_ok(c.execute("AI.TENSORSET", "b", "FLOAT", "VALUES", 1.5))
    assert_ok(c.execute("AI.MODELEXECUTE", "m", "INPUTS", 2, "a", "b", "OUTPUTS", 1, "c"))
    assert c.execute("AI.TENSORGET", "c", "META", "VALUES") == [b"dtype", b"FLOAT", b"shape", [],
                                                                b"values", [b"4.5"]]


MODELEXECUTE_ERRORS = [
    (["m", "INPUTS", "2", "a", "b", "OUTPUTS"], "ERR wrong number of arguments for 'AI.MODELEXECUTE' command"),
    (["m"], "ERR wrong number of arguments for 'AI.MODELEXECUTE' command"),
    (["nokey", "INPUTS", "2", "a", "b", "OUTPUTS", "1", "c"], MODEL_EMPTY),
    (["nokey", "NOTINPUTS", "2", "a", "b", "OUTPUTS", "1", "c"], MODEL_EMPTY),
    (["str", "INPUTS", "2", "a", "b", "OUTPUTS", "1", "c"], WRONGTYPE),
    (["a", "INPUTS", "2", "a", "b", "OUTPUTS", "1", "c"], WRONGTYPE),
    (["m", "NOTINPUTS", "2", "a", "b", "OUTPUTS", "1", "c"], "ERR INPUTS not specified"),
    (["m", "INPUTS", "x", "a", "b", "OUTPUTS", "1", "c"], "ERR Invalid argument for input_count"),
    (["m", "INPUTS", "0", "a", "b", "OUTPUTS", "1", "c"], "ERR Input count must be a positive integer"),
    (["m", "INPUTS", "-1", "a", "b", "OUTPUTS", "1", "c"], "ERR Input count must be a positive integer"),
    (["m", "INPUTS", "1", "a", "OUTPUTS", "1", "c"],
     "Number of keys given as INPUTS here does not match model definition"),
    (["m", "INPUTS", "3", "a", "b", "a", "OUTPUTS", "1", "c"],
     "Number of keys given as INPUTS here does not match model definition"),
    (["m5", "INPUTS", "5", "a", "b", "a", "b"],
     "ERR number of input keys to AI.MODELEXECUTE command does not match the number of given arguments"),
    (["m", "INPUTS", "2", "a", "b", "NOTOUTPUTS", "1", "c"], "ERR OUTPUTS not specified"),
    (["m5", "INPUTS", "5", "a", "b", "a", "b", "a"], "ERR OUTPUTS not specified"),
    (["m", "INPUTS", "2", "a", "b", "OUTPUTS", "x", "c"], "ERR Invalid argument for output_count"),
    (["m5", "INPUTS", "5", "a", "b", "a", "b", "a", "OUTPUTS"], "ERR Invalid argument for output_count"),
    (["m", "INPUTS", "2", "a", "b", "OUTPUTS", "0", "c"], "ERR Output count must be a positive integer"),
    (["m", "INPUTS", "2", "a", "b", "OUTPUTS", "-2", "c"], "ERR Output count must be a positive integer"),
    (["m", "INPUTS", "2", "a", "b", "OUTPUTS", "2", "c", "d"],
     "Number of keys given as OUTPUTS here does not match model definition"),
    (["m", "INPUTS", "2", "a", "b", "OUTPUTS", "1"],
     "ERR number of output keys to AI.MODELEXECUTE command does not match the number of given arguments"),
    (["m3", "INPUTS", "2", "a", "b", "OUTPUTS", "3", "x", "y"],
     "ERR number of output keys to AI.MODELEXECUTE command does not match the number of given arguments"),
    (["m", "INPUTS", "2", "a", "b", "OUTPUTS", "1", "c", "FOO"], "Invalid argument: FOO"),
    (["m", "INPUTS", "2", "a", "b", "OUTPUTS", "1", "c", "d"], "Invalid argument: d"),
    (["m", "INPUTS", "2", "a", "b", "OUTPUTS", "1", "c", "TIMEOUT", "100", "BAR"], "Invalid argument: BAR"),
    (["m", "INPUTS", "2", "a", "b", "OUTPUTS", "1", "c", "TIMEOUT"], "ERR No value provided for TIMEOUT"),
    (["m", "INPUTS", "2", "a", "b", "OUTPUTS", "1", "c", "TIMEOUT", "x"], "ERR Invalid value for TIMEOUT"),
    (["m", "INPUTS", "2", "a", "b", "OUTPUTS", "1", "c", "TIMEOUT", "0"], "ERR Invalid value for TIMEOUT"),
    (["m", "INPUTS", "2", "a", "b", "OUTPUTS", "1", "c", "TIMEOUT", "-5"], "ERR Invalid value for TIMEOUT"),
    (["m", "INPUTS", "2", "a", "b", "OUTPUTS", "1", "c", "TIMEOUT", "1.5"], "ERR Invalid value for TIMEOUT"),
    # argument errors come before the input tensors are looked up
    (["m", "INPUTS", "2", "a", "nokey", "OUTPUTS", "1", "c", "FOO"], "Invalid argument: FOO"),
    (["m", "INPUTS", "2", "a", "nokey", "OUTPUTS", "1", "c"], TENSOR_EMPTY),
    (["m", "INPUTS", "2", "nokey", "b", "OUTPUTS", "1", "c"], TENSOR_EMPTY),
    (["m", "INPUTS", "2", "a", "str", "OUTPUTS", "1", "c"], WRONGTYPE),
]


@pytest.mark.parametrize("args,expected", MODELEXECUTE_ERRORS,
                         ids=[f"{i}-{e}" for i, (_, e) in enumerate(MODELEXECUTE_ERRORS)])
def test_modelexecute_errors(c, args, expected):
    store_mul(c)
    store_multi(c)
    store_many_inputs(c)
    set_ab(c)
    c.execute("SET", "str", "x")
    assert_error(c.execute("AI.MODELEXECUTE", *args), expected)
    for out in ("c", "d", "x", "y"):
        assert c.execute("EXISTS", out) == 0
    assert c.execute("PING") == "PONG"


def test_modelexecute_shape_mismatch_backend_error(c):
    store_mul(c)
    assert_ok(c.execute("AI.TENSORSET", "a", "FLOAT", 2, 2, "VALUES", 1, 2, 3, 4))
    assert_ok(c.execute("AI.TENSORSET", "b", "FLOAT", 3, "VALUES", 1, 2, 3))
    reply = c.execute("AI.MODELEXECUTE", "m", "INPUTS", 2, "a", "b", "OUTPUTS", 1, "c")
    text = assert_error_startswith(reply, "Incompatible shapes")
    assert "[2,2]" in text and "[3]" in text and "mul" in text, text
    assert "\n" not in text and "\r" not in text
    assert c.execute("EXISTS", "c") == 0
    # MODELRUN gives the same backend error
    reply = c.execute("AI.MODELRUN", "m", "INPUTS", "a", "b", "OUTPUTS", "c")
    assert_error_startswith(reply, "Incompatible shapes")
    assert c.execute("PING") == "PONG"


def test_modelexecute_output_wrongtype_single_reply(c):
    store_mul(c)
    set_ab(c)
    c.execute("SET", "c", "plain")
    assert_error(c.execute("AI.MODELEXECUTE", "m", "INPUTS", 2, "a", "b", "OUTPUTS", 1, "c"), WRONGTYPE)
    assert not c.pending(wait=0.3), f"a second reply followed the WRONGTYPE error: {c.read()!r}"
    assert c.execute("PING") == "PONG"
    assert c.execute("GET", "c") == b"plain"
    assert_error(c.execute("AI.MODELRUN", "m", "INPUTS", "a", "b", "OUTPUTS", "c"), WRONGTYPE)
    assert not c.pending(wait=0.3), f"a second reply followed the WRONGTYPE error: {c.read()!r}"
    assert c.execute("PING") == "PONG"


def test_modelexecute_outputs_overwrite_tensors(c):
    store_mul(c)
    set_ab(c)
    assert_ok(c.execute("AI.TENSORSET", "c", "INT8", 3, "VALUES", 1, 2, 3))
    assert c.execute("EXPIRE", "c", 1000) == 1
    assert_ok(c.execute("AI.MODELEXECUTE", "m", "INPUTS", 2, "a", "b", "OUTPUTS", 1, "c"))
    assert c.execute("AI.TENSORGET", "c", "META") == [b"dtype", b"FLOAT", b"shape", [2, 2]]
    assert c.execute("AI.TENSORGET", "c", "VALUES") == [b"4", b"9", b"4", b"9"]
    assert c.execute("TTL", "c") == -1


def test_modelexecute_in_multi_and_lua(c):
    store_mul(c)
    set_ab(c)
    msg = "ERR Cannot run RedisAI command within a transaction or a LUA script"
    assert_ok(c.execute("MULTI"))
    assert c.execute("AI.MODELEXECUTE", "m", "INPUTS", 2, "a", "b", "OUTPUTS", 1, "c") == "QUEUED"
    assert c.execute("AI.MODELRUN", "m", "INPUTS", "a", "b", "OUTPUTS", "c") == "QUEUED"
    replies = c.execute("EXEC")
    assert isinstance(replies, list) and len(replies) == 2, replies
    for rep in replies:
        assert_error(rep, msg)
    assert c.execute("EXISTS", "c") == 0
    script = ("return redis.pcall('AI.MODELEXECUTE', KEYS[1], 'INPUTS', '2', KEYS[2], KEYS[3], "
              "'OUTPUTS', '1', KEYS[4])")
    assert_error(c.execute("EVAL", script, 4, "m", "a", "b", "c"), msg)
    assert c.execute("EXISTS", "c") == 0
    assert c.execute("PING") == "PONG"


def test_unsupported_dtype_from_backend(c):
    """A float16 output (a type the tensor layer cannot name) round-trips as BLOB only."""
    assert_ok(c.execute("AI.MODELSTORE", "h", "TF", "CPU", "INPUTS", 1, "a", "OUTPUTS", 1, "half",
                        "BLOB", tf_graphs.half_output_graph()))
    assert_ok(c.execute("AI.TENSORSET", "a", "FLOAT", 3, "VALUES", 1.5, 2, -0.25))
    assert_ok(c.execute("AI.MODELEXECUTE", "h", "INPUTS", 1, "a", "OUTPUTS", 1, "o"))
    assert c.execute("TYPE", "o") == "AI_TENSOR"
    assert c.execute("AI.TENSORGET", "o", "BLOB") == np.array([1.5, 2, -0.25], np.float16).tobytes()
    assert_error(c.execute("AI.TENSORGET", "o", "META"), "ERR unsupported dtype")
    assert_error(c.execute("AI.TENSORGET", "o"), "ERR unsupported dtype")
    assert_error(c.execute("AI.TENSORGET", "o", "META", "BLOB"), "ERR unsupported dtype")


# --------------------------------------------------------------------------------------
# MODELRUN
# --------------------------------------------------------------------------------------

def test_modelrun(c):
    store_mul(c)
    set_ab(c)
    assert_ok(c.execute("AI.MODELRUN", "m", "INPUTS", "a", "b", "OUTPUTS", "c"))
    assert c.execute("AI.TENSORGET", "c", "VALUES") == [b"4", b"9", b"4", b"9"]
    assert_ok(c.execute("AI.MODELRUN", "m", "TIMEOUT", 5000, "INPUTS", "a", "c", "OUTPUTS", "d"))
    assert c.execute("AI.TENSORGET", "d", "VALUES") == [b"8", b"27", b"8", b"27"]
    store_multi(c)
    assert_ok(c.execute("AI.MODELRUN", "m3", "INPUTS", "a", "b", "OUTPUTS", "x", "y", "z"))
    assert c.execute("AI.TENSORGET", "z", "VALUES") == [b"0", b"0", b"0", b"0"]


MODELRUN_ERRORS = [
    (["m", "INPUTS", "a", "OUTPUTS"], "ERR wrong number of arguments for 'AI.MODELRUN' command"),
    (["m"], "ERR wrong number of arguments for 'AI.MODELRUN' command"),
    (["m", "TIMEOUT", "x", "INPUTS", "a", "b", "OUTPUTS", "c"], "ERR Invalid value for TIMEOUT"),
    (["m", "TIMEOUT", "0", "INPUTS", "a", "b", "OUTPUTS", "c"], "ERR Invalid value for TIMEOUT"),
    (["m", "NOTINPUTS", "a", "b", "OUTPUTS", "c"], "ERR INPUTS not specified"),
    (["m", "INPUTS", "a", "OUTPUTS", "c", "d"],
     "Number of keys given as INPUTS here does not match model definition"),
    (["m", "INPUTS", "a", "b", "OUTPUTS", "c", "d"],
     "Number of keys given as OUTPUTS here does not match model definition"),
    (["m", "INPUTS", "a", "b", "OUTPUTS", "c", "OUTPUTS"],
     "Number of keys given as OUTPUTS here does not match model definition"),
    (["nokey", "INPUTS", "a", "b", "OUTPUTS", "c"], MODEL_EMPTY),
    (["str", "INPUTS", "a", "b", "OUTPUTS", "c"], WRONGTYPE),
    (["m", "INPUTS", "a", "nokey", "OUTPUTS", "c"], TENSOR_EMPTY),
    (["m", "INPUTS", "str", "b", "OUTPUTS", "c"], WRONGTYPE),
]


@pytest.mark.parametrize("args,expected", MODELRUN_ERRORS,
                         ids=[f"{i}-{e}" for i, (_, e) in enumerate(MODELRUN_ERRORS)])
def test_modelrun_errors(c, args, expected):
    store_mul(c)
    set_ab(c)
    c.execute("SET", "str", "x")
    assert_error(c.execute("AI.MODELRUN", *args), expected)
    assert c.execute("EXISTS", "c") == 0
    assert c.execute("PING") == "PONG"


# --------------------------------------------------------------------------------------
# Persistence (quick check; deeper persistence is a later issue)
# --------------------------------------------------------------------------------------

def test_debug_reload_keeps_models_and_tensors(c):
    store_mul(c, "m", "CPU", "TAG", "kept", "BATCHSIZE", 3)
    store_multi(c)
    set_ab(c)
    before = {k: c.execute("AI.MODELGET", k) for k in ("m", "m3")}
    tensors = {k: c.execute("AI.TENSORGET", k) for k in ("a", "b")}
    assert_ok(c.execute("DEBUG", "RELOAD"))
    for k, v in before.items():
        assert c.execute("AI.MODELGET", k) == v, k
        assert c.execute("TYPE", k) == "AI__MODEL"
    for k, v in tensors.items():
        assert c.execute("AI.TENSORGET", k) == v, k
    assert_ok(c.execute("AI.MODELEXECUTE", "m", "INPUTS", 2, "a", "b", "OUTPUTS", 1, "c"))
    assert c.execute("AI.TENSORGET", "c", "VALUES") == [b"4", b"9", b"4", b"9"]
    assert_ok(c.execute("AI.MODELEXECUTE", "m3", "INPUTS", 2, "a", "b", "OUTPUTS", 3, "x", "y", "z"))
    assert c.execute("AI.TENSORGET", "y", "VALUES") == [b"4", b"6", b"4", b"6"]
