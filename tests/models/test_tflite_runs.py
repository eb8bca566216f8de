"""TFLITE models (docs/commands.md, "Models", with the TFLITE backend: LiteRT's C library),
as RedisAI 1.2 serves them: AI.MODELSTORE m TFLITE CPU BLOB (no INPUTS/OUTPUTS), AI.MODELGET
reporting the interpreter's tensor names, AI.MODELEXECUTE binding inputs and outputs by
POSITION in the model's subgraph order, AI.INFO, DAGs, a TorchScript script's
redisAI.model_execute, and auto-batching.

The models are made at test time by TensorFlow's converter (tests/support/tflite_models.py):
a float CNN, its full-integer uint8 and int8 versions (raw integer tensors in and out, as
1.2), a dynamic-range model with a float and an int64 output, and a 2-input/2-output model
whose subgraph order is neither its argument order nor its signature's. Every output is
compared bit for bit (np.array_equal) with tf.lite.Interpreter's on the same blob and input.

One server per module, with the TFLITE backend given at load time.
"""
from __future__ import annotations

import numpy as np
import pytest

import tflite_models as tm
from helpers import assert_error, assert_ok, info_field
from model_io import ai_info, assert_exact, execute, get, model_meta, put
from redis_server import Connect, RedisServer
from resp import RawClient

MODELS = list(tm.MODELS)


@pytest.fixture
def c(tflite_server: RedisServer, connect: Connect) -> RawClient:
    return connect(tflite_server)


def store(c: RawClient, key: str, built: tm.Built, *opts) -> None:
    assert_ok(c.execute("AI.MODELSTORE", key, "TFLITE", "CPU", *opts, "BLOB", built.blob))


def check_run(c: RawClient, key: str, built: tm.Built, inputs: tuple[np.ndarray, ...],
              prefix: str = "") -> list[np.ndarray]:
    got = execute(c, key, list(inputs), len(built.outputs), prefix)
    want = tm.reference(built, inputs)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert_exact(g, w)
    return got


# --------------------------------------------------------------------------------------
# Store, describe, run
# --------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", MODELS)
def test_modelstore_and_modelget(c, name):
    built = tm.MODELS[name]()
    store(c, "m", built, "TAG", name)
    assert c.execute("TYPE", "m") == "AI__MODEL"
    meta = model_meta("TFLITE", [n.encode() for n in built.inputs],
                      [n.encode() for n in built.outputs], tag=name.encode())
    assert c.execute("AI.MODELGET", "m", "META") == meta
    assert c.execute("AI.MODELGET", "m", "BLOB") == built.blob
    assert c.execute("AI.MODELGET", "m") == meta + [b"blob", built.blob]


@pytest.mark.parametrize("name", MODELS)
def test_modelexecute_matches_the_interpreter(c, name):
    built = tm.MODELS[name]()
    store(c, "m", built)
    for seed in (1, 2):
        got = check_run(c, "m", built, built.sample(seed))
        assert tuple(g.dtype for g in got) == built.output_dtypes


def test_quantized_models_take_and_give_raw_integers(c):
    """UINT8 and INT8 tensors in, UINT8 and INT8 out (1.2 does not dequantize)."""
    for key, built, dtype in (("u", tm.cnn_uint8(), "UINT8"), ("i", tm.cnn_int8(), "INT8")):
        store(c, key, built)
        [x] = built.sample(5)
        put(c, f"{key}x", x)
        assert_ok(c.execute("AI.MODELEXECUTE", key, "INPUTS", 1, f"{key}x", "OUTPUTS", 1,
                            f"{key}y"))
        meta = c.execute("AI.TENSORGET", f"{key}y", "META")
        assert meta == [b"dtype", dtype.encode(), b"shape", [1, 10]], meta
        [want] = tm.reference(built, (x,))
        values = c.execute("AI.TENSORGET", f"{key}y", "VALUES")
        assert values == [int(v) for v in want.ravel()]


def test_int64_argmax_and_float_values(c):
    """The dynamic-range model's outputs in subgraph order: the argmax (INT64), then the
    probabilities (FLOAT); VALUES as well as BLOB."""
    built = tm.dynamic_range()
    store(c, "m", built)
    [x] = built.sample(7, batch=3)
    put(c, "x", x)
    assert_ok(c.execute("AI.MODELEXECUTE", "m", "INPUTS", 1, "x", "OUTPUTS", 2, "am", "p"))
    argmax, probs = tm.reference(built, (x,))
    assert c.execute("AI.TENSORGET", "am", "META") == [b"dtype", b"INT64", b"shape", [3]]
    assert c.execute("AI.TENSORGET", "am", "VALUES") == [int(v) for v in argmax]
    assert c.execute("AI.TENSORGET", "am", "BLOB") == argmax.tobytes()
    floats = np.array([float(v) for v in c.execute("AI.TENSORGET", "p", "VALUES")], np.float32)
    assert np.array_equal(floats, probs.ravel())
    assert_exact(get(c, "p"), probs)


def test_subgraph_order_binds_inputs_and_outputs(c):
    """two_in_two_out: the subgraph's inputs are (a_second, z_first) and its outputs
    (z * a + z, z - a) -- the reverse of the returned order, which the SignatureDef keeps.
    A backend binding by argument or signature order gives other values."""
    built = tm.two_in_two_out()
    store(c, "m", built)
    a = np.array([[1, 2, 3, 4]], np.float32)
    z = np.array([[10, 20, 30, 40]], np.float32)
    first, second = check_run(c, "m", built, (a, z))
    assert np.array_equal(first, z * a + z) and np.array_equal(second, z - a)


@pytest.mark.parametrize("name", ["cnn_float", "cnn_int8", "dynamic_range"])
def test_a_batch_of_rows_runs_resized(c, name):
    """The batch dimension is dynamic: [5, ...] runs as one input, each row as the
    interpreter resized to [5, ...] gives it."""
    built = tm.MODELS[name]()
    store(c, "m", built)
    got = check_run(c, "m", built, built.sample(9, batch=5))
    assert got[0].shape[0] == 5
    check_run(c, "m", built, built.sample(10, batch=1))  # and back to one row


def test_modelrun_and_modelset(c):
    """The deprecated forms: AI.MODELSET without BATCHSIZE stores; AI.MODELRUN runs."""
    built = tm.cnn_float()
    assert_ok(c.execute("AI.MODELSET", "m", "TFLITE", "CPU", "TAG", "old", "BLOB", built.blob))
    assert c.execute("AI.MODELGET", "m", "BLOB") == built.blob
    [x] = built.sample(11)
    put(c, "x", x)
    assert_ok(c.execute("AI.MODELRUN", "m", "INPUTS", "x", "OUTPUTS", "y"))
    [want] = tm.reference(built, (x,))
    assert_exact(get(c, "y"), want)


def test_ai_info_counts_runs(c):
    built = tm.cnn_int8()
    store(c, "m", built, "TAG", "v1")
    check_run(c, "m", built, built.sample(1))
    check_run(c, "m", built, built.sample(2, batch=3))
    s = ai_info(c, "m")
    assert (s["key"], s["type"], s["backend"], s["device"], s["tag"]) == \
        (b"m", b"MODEL", b"TFLITE", b"CPU", b"v1"), s
    assert (s["calls"], s["samples"], s["errors"]) == (2, 4, 0), s
    assert s["duration"] > 0, s


def test_info_modules_reports_litert(c):
    info = c.execute("INFO", "MODULES")
    assert info_field(info, "ai_TensorFlowLite_version") == tm.tflite_runtime_version(), info


# --------------------------------------------------------------------------------------
# DAGs and scripts
# --------------------------------------------------------------------------------------

@pytest.mark.parametrize("command", ["AI.DAGEXECUTE", "AI.DAGEXECUTE_RO"])
def test_dag_tensorset_modelexecute_tensorget(c, command):
    built = tm.two_in_two_out()
    store(c, "m", built)
    a, z = built.sample(12)
    want = tm.reference(built, (a, z))
    reply = c.execute(command, "ROUTING", "m",
                      "|>", "AI.TENSORSET", "a", "FLOAT", 1, 4, "BLOB", a.tobytes(),
                      "|>", "AI.TENSORSET", "z", "FLOAT", 1, 4, "BLOB", z.tobytes(),
                      "|>", "AI.MODELEXECUTE", "m", "INPUTS", 2, "a", "z", "OUTPUTS", 2, "o1", "o2",
                      "|>", "AI.TENSORGET", "o1", "BLOB", "|>", "AI.TENSORGET", "o2", "BLOB")
    assert reply == ["OK", "OK", "OK", want[0].tobytes(), want[1].tobytes()], reply
    assert c.execute("EXISTS", "a", "z", "o1", "o2") == 0  # nothing persisted


def test_dag_persists_a_quantized_output(c):
    built = tm.cnn_uint8()
    store(c, "m", built)
    [x] = built.sample(13)
    reply = c.execute("AI.DAGEXECUTE", "PERSIST", 1, "y",
                      "|>", "AI.TENSORSET", "x", "UINT8", 1, 28, 28, 1, "BLOB", x.tobytes(),
                      "|>", "AI.MODELEXECUTE", "m", "INPUTS", 1, "x", "OUTPUTS", 1, "y")
    assert reply == ["OK", "OK"], reply
    [want] = tm.reference(built, (x,))
    assert_exact(get(c, "y"), want)


SCRIPT = '''
def run_tflite(tensors: List[Tensor], keys: List[str], args: List[str]):
    out = redisAI.model_execute(keys[0], [tensors[0], tensors[1]], 2)
    return out[0], out[1]
'''


def test_script_model_execute_runs_a_tflite_model(c, torch_backend_path):
    """A TorchScript script (the TORCH backend loads lazily from the install tree) runs the
    TFLITE model through redisAI.model_execute, positionally as AI.MODELEXECUTE does."""
    built = tm.two_in_two_out()
    store(c, "m", built)
    assert_ok(c.execute("AI.SCRIPTSTORE", "s", "CPU", "ENTRY_POINTS", 1, "run_tflite",
                        "SOURCE", SCRIPT))
    a, z = built.sample(14)
    put(c, "a", a)
    put(c, "z", z)
    assert_ok(c.execute("AI.SCRIPTEXECUTE", "s", "run_tflite", "KEYS", 1, "m", "INPUTS", 2, "a",
                        "z", "OUTPUTS", 2, "o1", "o2"))
    want = tm.reference(built, (a, z))
    assert_exact(get(c, "o1"), want[0])
    assert_exact(get(c, "o2"), want[1])


# --------------------------------------------------------------------------------------
# Auto-batching
# --------------------------------------------------------------------------------------

def test_modelset_refuses_batchsize(c):
    """1.2's AI.MODELSET refuses auto-batching for TFLITE (its MODELSTORE does not)."""
    assert_error(c.execute("AI.MODELSET", "m", "TFLITE", "CPU", "BATCHSIZE", 4, "BLOB",
                           tm.cnn_float().blob),
                 "ERR Auto-batching not supported by the TFLITE backend")
    assert c.execute("EXISTS", "m") == 0


@pytest.mark.parametrize("name", ["cnn_float", "cnn_int8"])
def test_two_clients_are_batched_and_get_their_own_rows(c, tflite_server, name):
    """BATCHSIZE 4 MINBATCHSIZE 2 (1.2.7's flow test): the first client's [1, 28, 28, 1]
    request waits, unanswered, until a second client's arrives; then both run as one batch
    and each gets exactly its own row."""
    built = tm.MODELS[name]()
    store(c, "m", built, "BATCHSIZE", 4, "MINBATCHSIZE", 2)
    inputs = [built.sample(20 + k)[0] for k in range(2)]
    with RawClient(tflite_server.port) as first, RawClient(tflite_server.port) as second:
        put(first, "x0", inputs[0])
        put(second, "x1", inputs[1])
        first.send("AI.MODELEXECUTE", "m", "INPUTS", 1, "x0", "OUTPUTS", 1, "y0")
        assert not first.pending(wait=0.5), "a lone request ran below MINBATCHSIZE"
        assert_ok(second.execute("AI.MODELEXECUTE", "m", "INPUTS", 1, "x1", "OUTPUTS", 1, "y1"))
        assert_ok(first.read())
    for k in range(2):
        assert_exact(get(c, f"y{k}"), tm.reference(built, (inputs[k],))[0])
    s = ai_info(c, "m")
    assert (s["calls"], s["samples"], s["errors"]) == (2, 2, 0), s
