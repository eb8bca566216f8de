"""TFLITE models that must be refused, with RedisAI 1.2's words where it pins them
(docs/commands.md; the spec's TFLITE rows): devices, blobs that are no model, input counts,
dtypes (an INT32 tensor of the float model's byte size is refused, never run: LiteRT itself
runs it), shapes; the backend loaded by AI.CONFIG LOADBACKEND and lazily by the first TFLITE
MODELSTORE; ACL users refused TFLITE stores and runs as for every backend. After every
refusal no output key exists and the server answers.

One TFLITE server per module for the refusals; the loading tests start servers of their own.
"""
from __future__ import annotations

from typing import Iterator

import numpy as np
import pytest

import tflite_models as tm
from acl_wording import AclWording, learn
from helpers import assert_error, assert_ok, info_field
from model_io import ai_info, assert_clean_error, assert_exact, execute, get, put
from redis_server import Connect, RedisServer, StartServer
from resp import RawClient, RespError
from server_facts import ServerFacts

TYPE_MISMATCH = "Input tensor type doesn't match the type expected by the model definition"
INPUTS_COUNT = "Number of keys given as INPUTS here does not match model definition"
OUTPUTS_COUNT = "Number of keys given as OUTPUTS here does not match model definition"


def assert_1_2_error(reply, text: str) -> None:
    """RedisAI 1.2's TFLite text, word for word, optionally followed by ` (<why>)`: the
    backend may say more, after what 1.2's clients match."""
    got = assert_clean_error(reply)
    assert got == text or got.startswith(text + " ("), f"\nexpected: {text!r}\n     got: {got!r}"


@pytest.fixture
def c(tflite_server: RedisServer, connect: Connect) -> RawClient:
    return connect(tflite_server)


def store(c: RawClient, key: str, built: tm.Built) -> None:
    assert_ok(c.execute("AI.MODELSTORE", key, "TFLITE", "CPU", "BLOB", built.blob))


def run_refused(c: RawClient, key: str, n_out: int, *in_keys: str) -> str:
    outs = [f"o{i}" for i in range(n_out)]
    text = assert_clean_error(c.execute("AI.MODELEXECUTE", key, "INPUTS", len(in_keys),
                                        *in_keys, "OUTPUTS", n_out, *outs))
    assert c.execute("EXISTS", *outs) == 0
    assert c.execute("PING") == "PONG"
    return text


def still_runs(c: RawClient, key: str, built: tm.Built) -> None:
    got = execute(c, key, list(built.sample(3)), len(built.outputs), prefix="ok")
    for g, w in zip(got, tm.reference(built, built.sample(3))):
        assert_exact(g, w)


# --------------------------------------------------------------------------------------
# Devices and blobs
# --------------------------------------------------------------------------------------

def test_gpu_on_a_cpu_build(c):
    """This build has no GPU accelerator: 1.2's TFLite text for a GPU it cannot set up."""
    for device in ("GPU", "GPU:0"):
        assert_1_2_error(c.execute("AI.MODELSTORE", "m", "TFLITE", device, "BLOB",
                                   tm.cnn_float().blob), "Failed to set GPU delegate")
    assert c.execute("EXISTS", "m") == 0


def test_unsupported_device(c):
    """A device the core lets through (AI.MODELSET checks only its length and keywords) is the
    backend's to refuse: `ERR Unsupported device`, capital U, as 1.2's TFLite backend words it
    (the other backends: `ERR unsupported device`). MODELSTORE's own check comes first."""
    blob = tm.cnn_float().blob
    assert_error(c.execute("AI.MODELSET", "m", "TFLITE", "TPU", "BLOB", blob),
                 "ERR Unsupported device")
    assert_error(c.execute("AI.MODELSTORE", "m", "TFLITE", "TPU", "BLOB", blob),
                 "ERR Invalid DEVICE")
    assert c.execute("EXISTS", "m") == 0


@pytest.mark.parametrize("blob", [b"this is not a tflite model", b"\x00" * 64,
                                  None], ids=["text", "zeros", "truncated"])
def test_a_blob_that_is_no_model(c, blob):
    if blob is None:
        blob = tm.cnn_float().blob[: len(tm.cnn_float().blob) // 2]
    assert_1_2_error(c.execute("AI.MODELSTORE", "m", "TFLITE", "CPU", "BLOB", blob),
                     "Failed to load model from buffer")
    assert c.execute("EXISTS", "m") == 0
    assert c.execute("PING") == "PONG"


def test_a_refused_store_keeps_the_model_there(c):
    built = tm.cnn_int8()
    store(c, "m", built)
    assert isinstance(c.execute("AI.MODELSTORE", "m", "TFLITE", "CPU", "BLOB", b"junk"),
                      RespError)
    assert c.execute("AI.MODELGET", "m", "BLOB") == built.blob
    still_runs(c, "m", built)


def test_inputs_outputs_not_taken(c):
    """Non-TF backends take no INPUTS/OUTPUTS at MODELSTORE (1.2's text)."""
    assert_error(c.execute("AI.MODELSTORE", "m", "TFLITE", "CPU", "INPUTS", 1, "a", "OUTPUTS", 1,
                           "b", "BLOB", tm.cnn_float().blob),
                 "ERR INPUTS argument should not be specified for this backend")


# --------------------------------------------------------------------------------------
# Runs: counts, dtypes, shapes
# --------------------------------------------------------------------------------------

def test_wrong_number_of_inputs_or_outputs(c):
    """The core checks the counts against the model's, as for every backend (1.2's TFLite
    text `Inconsistent number of inputs` is never reached)."""
    two = tm.two_in_two_out()
    store(c, "m", two)
    put(c, "a", two.sample(1)[0])
    assert_error(c.execute("AI.MODELEXECUTE", "m", "INPUTS", 1, "a", "OUTPUTS", 2, "o0", "o1"),
                 INPUTS_COUNT)
    assert_error(c.execute("AI.MODELEXECUTE", "m", "INPUTS", 3, "a", "a", "a", "OUTPUTS", 2,
                           "o0", "o1"), INPUTS_COUNT)
    assert_error(c.execute("AI.MODELEXECUTE", "m", "INPUTS", 2, "a", "a", "OUTPUTS", 1, "o0"),
                 OUTPUTS_COUNT)
    assert c.execute("EXISTS", "o0", "o1") == 0
    still_runs(c, "m", two)


@pytest.mark.parametrize("model, dtype", [
    ("cnn_float", np.int32),    # the same byte size: LiteRT would run it as floats
    ("cnn_float", np.float64),
    ("cnn_float", np.uint8),
    ("cnn_uint8", np.int8),     # the same byte size again
    ("cnn_uint8", np.float32),
    ("cnn_int8", np.uint8),     # and again
    ("dynamic_range", np.int32),
], ids=lambda v: v if isinstance(v, str) else np.dtype(v).name)
def test_wrong_input_dtype_is_refused_not_run(c, model, dtype):
    built = tm.MODELS[model]()
    store(c, "m", built)
    [x] = built.sample(4)
    put(c, "x", x.astype(dtype))
    assert run_refused(c, "m", len(built.outputs), "x") == TYPE_MISMATCH
    still_runs(c, "m", built)


def test_one_wrong_input_of_two(c):
    two = tm.two_in_two_out()
    store(c, "m", two)
    a, z = two.sample(5)
    put(c, "a", a)
    put(c, "z", z.view(np.int32))  # same bytes, wrong type
    assert run_refused(c, "m", 2, "a", "z") == TYPE_MISMATCH


@pytest.mark.parametrize("shape", [(1, 28, 27, 1), (28, 28, 1), (1, 28, 28, 3), (1, 784)],
                         ids=str)
def test_wrong_input_shape(c, shape):
    """A shape the model cannot take (tf.lite.Interpreter refuses it too): a clear one-line
    error, no crash, nothing written. A rank-3 image must not run as something else."""
    built = tm.cnn_float()
    x = np.zeros(shape, np.float32)
    assert tm.interpreter_refuses(built, (x,)), shape
    store(c, "m", built)
    put(c, "x", x)
    run_refused(c, "m", 1, "x")
    still_runs(c, "m", built)


def test_fixed_shape_model_takes_another_batch_as_the_interpreter(c):
    """two_in_two_out() was converted with [1, 4] fixed; as 1.2 (and tf.lite.Interpreter's
    non-strict resize) [2, 4] runs, element-wise, with the interpreter's outputs."""
    two = tm.two_in_two_out()
    store(c, "m", two)
    inputs = tuple(np.arange(8 * k, 8 * k + 8, dtype=np.float32).reshape(2, 4) for k in (1, 2))
    got = execute(c, "m", list(inputs), 2)
    for g, w in zip(got, tm.reference(two, inputs)):
        assert_exact(g, w)


def test_refusals_count_as_errors(c):
    built = tm.cnn_float()
    store(c, "m", built)
    put(c, "x", np.zeros((1, 28, 28, 1), np.int32))
    run_refused(c, "m", 1, "x")
    s = ai_info(c, "m")
    assert (s["calls"], s["errors"]) == (1, 1), s


# --------------------------------------------------------------------------------------
# Loading the backend
# --------------------------------------------------------------------------------------

VERSION_FIELD = "ai_TensorFlowLite_version"


def test_loadbackend_at_runtime(start_server: StartServer, tflite_backend_path,
                                server_facts: ServerFacts):
    if not server_facts.checks_acl:
        pytest.skip("this server refuses runtime AI.CONFIG LOADBACKEND (Redis 6.2: no "
                    "RedisModule_ACLCheckCommandPermissions; tests/compat/)")
    srv = start_server()
    with RawClient(srv.port) as c:
        assert info_field(c.execute("INFO", "MODULES"), VERSION_FIELD) is None
        assert_ok(c.execute("AI.CONFIG", "LOADBACKEND", "TFLITE", str(tflite_backend_path)))
        assert info_field(c.execute("INFO", "MODULES"), VERSION_FIELD) == \
            tm.tflite_runtime_version()
        built = tm.cnn_float()
        store(c, "m", built)
        still_runs(c, "m", built)


def test_lazy_loading_by_the_first_store(start_server: StartServer, tflite_backend_path):
    """No TFLITE argument: the first TFLITE MODELSTORE loads BACKENDSPATH's
    redisai_tflite/redisai_tflite.so (the install tree's backends/)."""
    srv = start_server()
    with RawClient(srv.port) as c:
        assert info_field(c.execute("INFO", "MODULES"), VERSION_FIELD) is None
        built = tm.dynamic_range()
        store(c, "m", built)
        assert info_field(c.execute("INFO", "MODULES"), VERSION_FIELD) == \
            tm.tflite_runtime_version()
        still_runs(c, "m", built)


# --------------------------------------------------------------------------------------
# ACL: TFLITE stores and runs are refused as any command on a key
# --------------------------------------------------------------------------------------

USERS = {
    "other_keys": "+@all -@admin -@dangerous ~other:*",
    "no_run": "+@all -ai.modelexecute -ai.modelrun -@admin -@dangerous ~*",
    "no_store": "+@all -ai.modelstore -ai.modelset -@admin -@dangerous ~*",
}


@pytest.fixture(scope="module")
def wording(tflite_server: RedisServer) -> AclWording:
    with RawClient(tflite_server.port) as admin:
        for name, rules in USERS.items():
            assert_ok(admin.execute("ACL", "SETUSER", name, "on", ">pw", *rules.split()))
    return learn(tflite_server.port)


@pytest.fixture
def users(tflite_server: RedisServer, wording: AclWording) -> Iterator[dict[str, RawClient]]:
    clients = {}
    for name in USERS:
        clients[name] = RawClient(tflite_server.port)
        assert_ok(clients[name].execute("AUTH", name, "pw"))
    yield clients
    for cl in clients.values():
        cl.close()


def test_acl_refuses_tflite_stores_and_runs(c, users, wording):
    built = tm.cnn_float()
    store(c, "m", built)
    [x] = built.sample(6)
    put(c, "x", x)
    blob = built.blob
    u = users["other_keys"]
    assert_error(u.execute("AI.MODELSTORE", "m2", "TFLITE", "CPU", "BLOB", blob), wording.key)
    assert_error(u.execute("AI.MODELEXECUTE", "m", "INPUTS", 1, "x", "OUTPUTS", 1, "other:y"),
                 wording.key)
    assert_error(u.execute("AI.MODELGET", "m", "META"), wording.key)
    assert_ok(u.execute("AI.MODELSTORE", "other:m", "TFLITE", "CPU", "BLOB", blob))
    u = users["no_run"]
    assert_error(u.execute("AI.MODELEXECUTE", "m", "INPUTS", 1, "x", "OUTPUTS", 1, "y"),
                 wording.command("no_run", "ai.modelexecute"))
    assert_error(u.execute("AI.MODELRUN", "m", "INPUTS", "x", "OUTPUTS", "y"),
                 wording.command("no_run", "ai.modelrun"))
    assert u.execute("AI.MODELGET", "m", "BLOB") == blob
    u = users["no_store"]
    assert_error(u.execute("AI.MODELSTORE", "m2", "TFLITE", "CPU", "BLOB", blob),
                 wording.command("no_store", "ai.modelstore"))
    assert_ok(u.execute("AI.MODELEXECUTE", "m", "INPUTS", 1, "x", "OUTPUTS", 1, "y"))
    [want] = tm.reference(built, (x,))
    assert_exact(get(c, "y"), want)
    assert c.execute("EXISTS", "m2", "other:y") == 0  # y: no_store's run
    assert c.execute("EXISTS", "other:m") == 1
