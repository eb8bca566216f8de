"""RedisAI's low-level API (LLAPI, docs/llapi.md), driven by a module of our own.

tests/llapi/ is a Redis module, `llapitest`, written only against include/redisai_llapi.h and
redismodule.h, as RedisGears is. It is built on first use (`cmake --build <build dir> --target
llapitest`; the target is EXCLUDE_FROM_ALL, so installs never carry it) and loaded after
redisai.so and its three backends. Its LLAPI.* commands call the API and reply with what it
returned; here the results are compared with numpy, with what the frameworks compute
in-process, and with RedisAI's own commands:

* OnLoad fetches all 76 functions; loading it before redisai.so fails with a log line;
* tensors made, filled (BOOL data of bytes other than 0 and 1 refused), read, concatenated,
  sliced, copied, and stored in keys;
* models (TF, TORCH, ONNX) from the keyspace and from a blob, run synchronously (ONNX refuses,
  as in 1.2), as a batch of run contexts and asynchronously (batching with the commands' runs
  on the same queue); ModelSerialize; scripts stored by AI.SCRIPTSTORE and made by ScriptCreate;
* DAGs built op by op and from a string; DAGs refused while built, failing while run, run twice;
  bad DAG strings;
* errors: codes (by their number), messages (the commands' own texts), one-line messages,
  clone and clear; the return value of every call the module makes is checked (LLAPI.CHECK);
* AI.INFO counts the LLAPI's runs of stored models and scripts like the commands' runs, the
  failing ones as errors (a run context that does not fit its model too), also with many
  clients at once on two devices.

Reference counts are exercised on purpose (shallow copies outliving keys, objects freed while
their run is queued): run it under AddressSanitizer with ci/asan-tests.sh tests/lowlevel_api/test_llapi.py.
"""
from __future__ import annotations

import dataclasses
import pathlib
import re
from typing import Any, Callable, Iterator

import numpy as np
import pytest

import engine_models
import onnx_models as om
import tf_graphs
import tflite_models
import torch_models as tm
from helpers import assert_error, assert_error_startswith, assert_ok, wait_until
from model_io import get, put
from paths import ROOT
from native import build_target
from redis_server import Connect, RedisServer, StartServer, backend_args
from resp import RawClient, RespError

HEADER = ROOT / "include" / "redisai" / "llapi.h"
SOURCES = ROOT / "tests" / "llapi"

# DLPack (code, bits) of every numeric type (docs/commands.md, "Data types"); lanes are 1.
DLPACK: dict[str, tuple[int, int, Any]] = {
    "FLOAT": (2, 32, np.float32), "DOUBLE": (2, 64, np.float64),
    "INT8": (0, 8, np.int8), "INT16": (0, 16, np.int16), "INT32": (0, 32, np.int32),
    "INT64": (0, 64, np.int64), "UINT8": (1, 8, np.uint8), "UINT16": (1, 16, np.uint16),
}
BY_CODE = {(code, bits): dt for code, bits, dt in DLPACK.values()}
BY_CODE[(6, 8)] = np.bool_  # BOOL: one byte, 0 or 1

SCRIPT = '''
def add_list(a: Tensor, rest: List[Tensor]):
    s = a
    for t in rest:
        s = s + t
    return s

def reshape_fails(tensors: List[Tensor], keys: List[str], args: List[str]):
    return tensors[0].reshape([7, 7])

def add_all(tensors: List[Tensor], keys: List[str], args: List[str]):
    s = tensors[0]
    for t in tensors[1:]:
        s = s + t
    return s

def two_out(tensors: List[Tensor], keys: List[str], args: List[str]):
    return tensors[0] * 2, tensors[1] - tensors[0]
'''


# --- building and loading the module ----------------------------------------------------

@pytest.fixture(scope="session")
def llapitest_so() -> pathlib.Path:
    return build_target("llapitest", "llapitest.so")


@pytest.fixture(scope="module")
def srv(start_server: StartServer, module_path: pathlib.Path,
        all_backend_paths: dict[str, pathlib.Path], llapitest_so: pathlib.Path) -> RedisServer:
    """redisai.so with TF, TORCH and ONNX, then llapitest.so."""
    return start_server(module=llapitest_so, extra=["--loadmodule", str(module_path),
                                                    *backend_args(all_backend_paths)])


@pytest.fixture
def c(srv: RedisServer, connect: Connect) -> Iterator[RawClient]:
    client = connect(srv)
    yield client
    # every call whose return value the module only checks returned what the API promises
    assert client.execute("LLAPI.CHECK")[3] == 0, [ln for ln in srv.log().splitlines()
                                                   if "llapitest:" in ln]


# --- replies ----------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class LTensor:
    """A tensor as llapitest replies it, checked for consistency on the way."""

    array: np.ndarray
    dlpack: tuple[int, int, int]
    getter_rcs: list[int]   # GetValueAsDouble, GetValueAsLongLong on element 0


def tensor(reply: Any) -> LTensor:
    assert isinstance(reply, list) and len(reply) == 8, reply
    dims, dlpack, length, datasize, bytesize, blob, values, rcs = reply
    code, bits, lanes = dlpack
    dtype = np.dtype(BY_CODE[(code, bits)])
    assert lanes == 1
    assert length == int(np.prod(dims)), (length, dims)
    assert datasize == dtype.itemsize and bytesize == length * datasize == len(blob)
    array = np.frombuffer(blob, dtype=dtype).reshape(dims)
    # the values read one by one with TensorGetValueAs* are the bytes of TensorData
    got = np.array([float(v) for v in values] if code == 2 else values, dtype=dtype)
    np.testing.assert_array_equal(got, array.reshape(-1))
    return LTensor(array=array, dlpack=(code, bits, lanes), getter_rcs=rcs)


def outputs(reply: Any) -> list[np.ndarray]:
    assert isinstance(reply, list), reply
    return [tensor(t).array for t in reply]


def llapi_error(reply: Any, code: str) -> str:
    """An error reply "<CODE> <message>" of llapitest; returns the message."""
    text = assert_error_startswith(reply, code + " ")
    return text[len(code) + 1:]


def stats(c: RawClient, key: str) -> tuple[int, int, int]:
    """AI.INFO's (calls, errors, samples) of a stored model or script."""
    info = c.execute("AI.INFO", key)
    assert isinstance(info, list), info
    fields = dict(zip(info[::2], info[1::2]))
    return fields[b"calls"], fields[b"errors"], fields[b"samples"]


# --- the models of each backend: two inputs a, b and one output -------------------------

@dataclasses.dataclass(frozen=True)
class TwoInputModel:
    backend: str
    blob: Callable[[], bytes]
    output: str                       # the output's name (TF needs it)
    fn: Callable[[np.ndarray, np.ndarray], np.ndarray]


MODELS = {
    "TF": TwoInputModel("TF", tf_graphs.mul_graph, "mul", lambda a, b: a * b),
    "TORCH": TwoInputModel("TORCH", lambda: tm.add().blob, "c", lambda a, b: a + b),
    "ONNX": TwoInputModel("ONNX", lambda: om.add().blob, "c", lambda a, b: a + b),
    # RAI_LLAPI_BACKEND_TFLITE: inputs by position, loaded lazily from BACKENDSPATH
    "TFLITE": TwoInputModel("TFLITE", lambda: tflite_models.mul(3), "c", lambda a, b: a * b),
}
A = np.array([[1.5, -2.0, 3.0], [4.0, 0.25, -6.0]], np.float32)
B = np.array([[2.0, 3.0, -1.0], [0.5, 8.0, 2.0]], np.float32)


def store(c: RawClient, m: TwoInputModel, key: str = "m") -> None:
    io = ["INPUTS", 2, "a", "b", "OUTPUTS", 1, m.output] if m.backend == "TF" else []
    assert_ok(c.execute("AI.MODELSTORE", key, m.backend, "CPU", *io, "BLOB", m.blob()))


@pytest.fixture(params=sorted(MODELS))
def model(request: pytest.FixtureRequest) -> TwoInputModel:
    return MODELS[request.param]


# --- the API itself ---------------------------------------------------------------------

def test_all_functions_fetched(c: RawClient) -> None:
    assert c.execute("LLAPI.CHECK")[:3] == [1, 76, 76]


def _header_names() -> list[str]:
    return re.findall(r"^\s*X\([^,]+,\s*(RedisAI_\w+),", HEADER.read_text(), re.M)


def test_every_function_is_called_by_the_test_module() -> None:
    names = _header_names()
    assert len(names) == len(set(names)) == 76
    source = "\n".join(p.read_text() for p in sorted(SOURCES.glob("*.c")))
    source = re.sub(r"/\*.*?\*/", "", source, flags=re.S)  # calls, not comments
    uncalled = [n for n in names if not re.search(rf"\b{n}\s*\(", source)]
    assert uncalled == []


def test_loading_before_redisai_fails_naming_the_function(
        module_path: pathlib.Path, llapitest_so: pathlib.Path) -> None:
    try:
        s = RedisServer(module_path, extra=["--loadmodule", str(llapitest_so)])
    except RuntimeError as e:
        log = str(e)
    else:
        s.stop()
        raise AssertionError("llapitest loaded before redisai.so")
    assert ("llapitest: RedisAI's low-level API is not available (RedisAI_InitError not "
            "found or not version 1): load redisai.so before this module") in log, log


# --- errors -----------------------------------------------------------------------------

def test_error_object_life(c: RawClient) -> None:
    code, msg, oneline, clone_code, clone_msg, cleared_code, cleared_msg = c.execute(
        "LLAPI.ERRORS", "CPU", "def f(a):\n    return a +\n")
    assert code == clone_code == "ESCRIPTCREATE"
    assert msg and clone_msg == msg
    assert b"\n" not in oneline and oneline == msg.replace(b"\n", b" ")
    assert cleared_code == "OK" and cleared_msg is None   # NULL once cleared, as in 1.2


# --- tensors ----------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", sorted(DLPACK))
def test_tensor_create_values_and_blob(c: RawClient, dtype: str) -> None:
    code, bits, np_type = DLPACK[dtype]
    want = np.array([[1, 2, 3], [4, 5, 100]], np_type)
    if code == 2:
        want[0, 0] = -1.25
    values = [repr(float(v)) if code == 2 else int(v) for v in want.reshape(-1)]
    by_values = tensor(c.execute("LLAPI.TENSORCREATE", dtype, 2, 2, 3, "VALUES", *values))
    by_blob = tensor(c.execute("LLAPI.TENSORCREATE", dtype, 2, 2, 3, "BLOB", want.tobytes()))
    for t in (by_values, by_blob):
        assert t.dlpack == (code, bits, 1)
        np.testing.assert_array_equal(t.array, want)
        assert t.array.dtype == want.dtype
        # RedisAI 1.2's getters answer 1 when they read the value, 0 for the other kind
        assert t.getter_rcs == ([1, 0] if code == 2 else [0, 1])


def test_tensor_create_errors(c: RawClient) -> None:
    assert_error(c.execute("LLAPI.TENSORCREATE", "NOPE", 1, 2), "ERR TensorCreate returned NULL for NOPE")
    empty = tensor(c.execute("LLAPI.TENSORCREATE", "INT64", 1, 0))
    assert empty.array.shape == (0,) and empty.getter_rcs == [-1, -1]


def test_tensor_set_data_refuses_bool_bytes_other_than_0_and_1(c: RawClient) -> None:
    """TensorSetData answers 0 (as for its other refusals) and copies nothing when a BOOL
    tensor's bytes are not all 0 or 1, the last byte included; 1 for 0s and 1s."""
    good = np.array([[1, 0, 1], [0, 0, 1]], np.uint8)
    t = tensor(c.execute("LLAPI.TENSORCREATE", "BOOL", 2, 2, 3, "BLOB", good.tobytes()))
    assert t.dlpack == (6, 8, 1)
    np.testing.assert_array_equal(t.array, good.astype(bool))
    for at in (0, 2, 5):
        for byte in (2, 0x80, 0xFF):
            bad = good.reshape(-1).copy()
            bad[at] = byte
            assert_error(c.execute("LLAPI.TENSORCREATE", "BOOL", 2, 2, 3, "BLOB", bad.tobytes()),
                         "ERR TensorSetData returned 0, the data unchanged")
    # other dtypes take any bytes
    raw = np.array([2, 0x80, 0xFF], np.uint8)
    np.testing.assert_array_equal(
        tensor(c.execute("LLAPI.TENSORCREATE", "UINT8", 1, 3, "BLOB", raw.tobytes())).array, raw)


def test_tensor_in_keys(c: RawClient) -> None:
    assert_ok(c.execute("LLAPI.TENSORSET", "t", "FLOAT", 2, 2, 2, "VALUES", 1, 2, 3, 4.5))
    assert c.execute("AI.TENSORGET", "t", "VALUES") == [b"1", b"2", b"3", b"4.5"]
    assert c.execute("TYPE", "t") == "AI_TENSOR"
    put(c, "u", np.arange(6, dtype=np.int32).reshape(3, 2))
    np.testing.assert_array_equal(tensor(c.execute("LLAPI.TENSORGET", "u")).array,
                                  np.arange(6, dtype=np.int32).reshape(3, 2))
    # a key set with the API replaces what was there, and goes away like any key
    assert_ok(c.execute("SET", "s", "x"))
    assert_ok(c.execute("LLAPI.TENSORSET", "s", "INT8", 1, 1, "VALUES", 7))
    assert c.execute("AI.TENSORGET", "s", "VALUES") == [7]
    assert c.execute("DEL", "t", "s") == 2
    assert c.execute("LLAPI.KEYTYPE", "t") == "none"
    assert_error(c.execute("LLAPI.TENSORGET", "t"), "ERR tensor key is empty: t")
    assert_ok(c.execute("SET", "s", "x"))
    assert_error_startswith(c.execute("LLAPI.TENSORGET", "s"), "WRONGTYPE")


def test_key_types(c: RawClient) -> None:
    put(c, "t", A)
    store(c, MODELS["ONNX"], "m")
    assert_ok(c.execute("AI.SCRIPTSTORE", "s", "CPU", "ENTRY_POINTS", 1, "add_all", "SOURCE", SCRIPT))
    assert_ok(c.execute("SET", "str", "x"))
    got = [c.execute("LLAPI.KEYTYPE", k) for k in ("t", "m", "s", "str", "nothing")]
    assert got == ["tensor", "model", "script", "other", "none"]


def test_concatenate_and_slice(c: RawClient) -> None:
    x = np.arange(6, dtype=np.float64).reshape(2, 3)
    y = np.arange(6, 9, dtype=np.float64).reshape(1, 3)
    put(c, "x", x)
    put(c, "y", y)
    both = np.concatenate([x, y, x])
    np.testing.assert_array_equal(tensor(c.execute("LLAPI.TENSORCONCAT", "x", "y", "x")).array, both)
    put(c, "both", both)
    np.testing.assert_array_equal(tensor(c.execute("LLAPI.TENSORSLICE", "both", 1, 2)).array, both[1:3])
    np.testing.assert_array_equal(tensor(c.execute("LLAPI.TENSORSLICE", "both", 4, 1)).array, both[4:5])


def test_shallow_copy_outlives_the_key(c: RawClient) -> None:
    put(c, "t", A)
    same, t = c.execute("LLAPI.TENSORKEEP", "t")
    assert same == 1   # a shallow copy is the same tensor, one more reference
    np.testing.assert_array_equal(tensor(t).array, A)
    assert c.execute("EXISTS", "t") == 0


# --- models -----------------------------------------------------------------------------

def _io(m: TwoInputModel) -> list[Any]:
    return ["INPUTS", 2, "a", "b", "OUTPUTS", 1, m.output]


# RedisAI 1.2's refusal of a synchronous ONNX run (ONNX Runtime runs only on RedisAI's threads).
ONNX_SYNC = "Cannot execute onnxruntime model synchronously, use async execution instead"


def test_model_from_keyspace_sync_and_async(c: RawClient, model: TwoInputModel) -> None:
    store(c, model)
    put(c, "a", A)
    put(c, "b", B)
    want = model.fn(A, B)
    [got] = outputs(c.execute("LLAPI.MODELRUN_ASYNC", "m", *_io(model)))
    np.testing.assert_allclose(got, want, rtol=1e-6)
    if model.backend == "ONNX":
        for cmd in ("LLAPI.MODELRUN", "LLAPI.MODELRUN_BATCH"):
            assert llapi_error(c.execute(cmd, "m", *_io(model)), "EMODELRUN") == ONNX_SYNC
    else:
        [got] = outputs(c.execute("LLAPI.MODELRUN", "m", *_io(model)))
        np.testing.assert_allclose(got, want, rtol=1e-6)
        # two run contexts in one ModelRun: one batch, each gets its own outputs
        first, second = c.execute("LLAPI.MODELRUN_BATCH", "m", *_io(model))
        for reply in (first, second):
            [got] = outputs(reply)
            np.testing.assert_allclose(got, want, rtol=1e-6)
    # the model a command stored is the model the API ran
    assert_ok(c.execute("AI.MODELEXECUTE", "m", "INPUTS", 2, "a", "b", "OUTPUTS", 1, "out"))
    np.testing.assert_allclose(get(c, "out"), want, rtol=1e-6)


def test_model_from_a_blob(c: RawClient, model: TwoInputModel) -> None:
    put(c, "a", A)
    put(c, "b", B)
    want = model.fn(A, B)
    blob = model.blob()
    for opts in ([], ["ASYNC"], ["ROUNDTRIP"], ["ROUNDTRIP", "ASYNC"], ["BATCHSIZE", 4, "ASYNC"]):
        reply = c.execute("LLAPI.MODELCREATE", model.backend, "CPU", blob, *opts, *_io(model))
        if model.backend == "ONNX" and "ASYNC" not in opts:
            assert llapi_error(reply, "EMODELRUN") == ONNX_SYNC
            continue
        [got] = outputs(reply)
        np.testing.assert_allclose(got, want, rtol=1e-6, err_msg=str(opts))


def test_model_serialize(c: RawClient, model: TwoInputModel) -> None:
    store(c, model)
    assert c.execute("LLAPI.MODELSERIALIZE", "m") == c.execute("AI.MODELGET", "m", "BLOB")


def test_model_create_errors(c: RawClient) -> None:
    put(c, "a", A)
    put(c, "b", B)
    io = ["INPUTS", 2, "a", "b", "OUTPUTS", 1, "c"]
    for backend in ("TF", "TFLITE", "TORCH", "ONNX"):
        msg = llapi_error(c.execute("LLAPI.MODELCREATE", backend, "CPU", b"not a model", *io), "EMODELCREATE")
        # the message AI.MODELSTORE gives for the same blob
        names = io if backend == "TF" else []
        stored = c.execute("AI.MODELSTORE", "x", backend, "CPU", *names, "BLOB", b"not a model")
        assert isinstance(stored, RespError) and msg == str(stored), (backend, msg, stored)
    assert llapi_error(c.execute("LLAPI.MODELCREATE", 7, "CPU", b"x", *io),
                       "EUNSUPPORTEDBACKEND") == "ERR unsupported backend"
    assert llapi_error(c.execute("LLAPI.MODELCREATE", "TORCH", "NOSUCHDEVICE", tm.add().blob, *io),
                       "EMODELCREATE") == "ERR Invalid DEVICE"


def test_backend_not_loaded(module_path: pathlib.Path, llapitest_so: pathlib.Path,
                            tmp_path: pathlib.Path) -> None:
    """Nothing where RedisAI looks for backends: creating a model or a script says so."""
    s = RedisServer(llapitest_so, extra=["--loadmodule", str(module_path), "BACKENDSPATH", str(tmp_path)])
    try:
        with RawClient(s.port) as c:
            put(c, "a", A)
            llapi_error(c.execute("LLAPI.MODELCREATE", "TORCH", "CPU", b"x", "INPUTS", 1, "a",
                                  "OUTPUTS", 1, "c"), "EBACKENDNOTLOADED")
            llapi_error(c.execute("LLAPI.SCRIPTCREATE", "CPU", SCRIPT, "add_all", "INPUTS", 1, "a",
                                  "OUTPUTS", 1), "EBACKENDNOTLOADED")
    finally:
        s.stop()


def test_model_run_errors(c: RawClient) -> None:
    put(c, "a", A)
    store(c, MODELS["TORCH"])
    for cmd in ("LLAPI.MODELRUN", "LLAPI.MODELRUN_ASYNC"):
        # the model takes two inputs; one is given
        assert llapi_error(c.execute(cmd, "m", "INPUTS", 1, "a", "OUTPUTS", 1, "c"), "EMODELRUN")
    for cmd in ("LLAPI.MODELRUN", "LLAPI.MODELSERIALIZE"):
        args = ["INPUTS", 1, "a", "OUTPUTS", 1, "c"] if cmd == "LLAPI.MODELRUN" else []
        err = c.execute(cmd, "nothing", *args)
        assert isinstance(err, RespError) and str(err).endswith(" ERR model key is empty"), err
        err = c.execute(cmd, "a", *args)
        assert isinstance(err, RespError) and "WRONGTYPE" in str(err), err


def test_cnn_async_on_torch_and_onnx(c: RawClient) -> None:
    """A real network: the async runs agree with the frameworks in-process."""
    x = tm.cnn_sample(batch=2, seed=3)
    put(c, "x", x)
    for backend, built in (("TORCH", tm.cnn()), ("ONNX", om.cnn())):
        assert_ok(c.execute("AI.MODELSTORE", "cnn", backend, "CPU", "BLOB", built.blob))
        [want] = built.run(x)
        [got] = outputs(c.execute("LLAPI.MODELRUN_ASYNC", "cnn", "INPUTS", 1, "x", "OUTPUTS", 1, "y"))
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def test_model_key_deleted_during_async_runs(srv: RedisServer, c: RawClient) -> None:
    """A run context holds its own reference to the model: runs queued (held back by
    MINBATCHSIZE) when the key is deleted still run, together, once MINBATCHTIMEOUT passes."""
    assert_ok(c.execute("AI.MODELSTORE", "bm", "ONNX", "CPU", "BATCHSIZE", 16, "MINBATCHSIZE", 16,
                        "MINBATCHTIMEOUT", 1000, "BLOB", engine_models.onnx_batch_size_model()))
    rows = [np.full((1, 3), i, np.float32) for i in range(4)]
    runners = [RawClient(srv.port) for _ in rows]
    try:
        for i, (r, x) in enumerate(zip(runners, rows)):
            put(c, f"x{i}", x)
            r.send("LLAPI.MODELRUN_ASYNC", "bm", "INPUTS", 1, f"x{i}", "OUTPUTS", 2, "bs", "y")
        assert wait_until(lambda: engine_models.blocked_clients(c) == len(rows), timeout=10)
        assert c.execute("DEL", "bm") == 1
        for r, x in zip(runners, rows):
            bs, y = outputs(r.read())
            np.testing.assert_array_equal(bs, np.full_like(x, len(rows)))  # one batch of all
            np.testing.assert_array_equal(y, 2 * x)
    finally:
        for r in runners:
            r.close()


def test_async_runs_batch_with_commands(srv: RedisServer, c: RawClient) -> None:
    """ModelRunAsync goes through RedisAI's run queue: with MINBATCHSIZE 2, an LLAPI run and
    an AI.MODELEXECUTE of one row each run as one batch (the model outputs the batch size it
    saw, and each caller gets its own rows back)."""
    assert_ok(c.execute("AI.MODELSTORE", "bm", "ONNX", "CPU", "BATCHSIZE", 4, "MINBATCHSIZE", 2,
                        "MINBATCHTIMEOUT", 10000, "BLOB", engine_models.onnx_batch_size_model()))
    x1, x2 = A[:1], B[:1]
    put(c, "x1", x1)
    put(c, "x2", x2)
    with RawClient(srv.port) as other:
        c.send("LLAPI.MODELRUN_ASYNC", "bm", "INPUTS", 1, "x1", "OUTPUTS", 2, "bs", "y")
        assert_ok(other.execute("AI.MODELEXECUTE", "bm", "INPUTS", 1, "x2", "OUTPUTS", 2, "bs2", "y2"))
        bs, y = outputs(c.read())
    np.testing.assert_array_equal(bs, np.full_like(x1, 2))
    np.testing.assert_array_equal(y, 2 * x1)
    np.testing.assert_array_equal(get(c, "bs2"), np.full_like(x2, 2))
    np.testing.assert_array_equal(get(c, "y2"), 2 * x2)


# --- scripts ----------------------------------------------------------------------------

def test_stored_script_sync_and_async(c: RawClient) -> None:
    assert_ok(c.execute("AI.SCRIPTSTORE", "s", "CPU", "ENTRY_POINTS", 2, "add_all", "two_out",
                        "SOURCE", SCRIPT))
    put(c, "a", A)
    put(c, "b", B)
    put(c, "d", A * 3)
    for cmd in ("LLAPI.SCRIPTRUN", "LLAPI.SCRIPTRUN_ASYNC"):
        [got] = outputs(c.execute(cmd, "s", "add_all", "INPUTS", 1, "a", "LIST", 2, "b", "d",
                                  "OUTPUTS", 1))
        np.testing.assert_allclose(got, A + B + A * 3)
        first, second = outputs(c.execute(cmd, "s", "two_out", "INPUTS", 2, "a", "b", "OUTPUTS", 2))
        np.testing.assert_allclose(first, A * 2)
        np.testing.assert_allclose(second, B - A)
        assert llapi_error(c.execute(cmd, "s", "no_such_fn", "INPUTS", 1, "a", "OUTPUTS", 1),
                           "ESCRIPTRUN")
    err = c.execute("LLAPI.SCRIPTRUN", "nothing", "add_all", "INPUTS", 1, "a", "OUTPUTS", 1)
    assert isinstance(err, RespError) and str(err).endswith(" ERR script key is empty"), err


def test_script_from_source(c: RawClient) -> None:
    put(c, "a", A)
    put(c, "b", B)
    # no entry points declared: a function shaped as one, f(tensors, keys, args), gets the
    # inputs as its list; any other takes them in its Tensor and List[Tensor] parameters
    for fn in ("add_all", "add_list"):
        for opts in ([], ["ASYNC"]):
            [got] = outputs(c.execute("LLAPI.SCRIPTCREATE", "CPU", SCRIPT, fn, *opts,
                                      "INPUTS", 2, "a", "b", "LIST", 1, "a", "OUTPUTS", 1))
            np.testing.assert_allclose(got, A + B + A, err_msg=f"{fn} {opts}")
    msg = llapi_error(c.execute("LLAPI.SCRIPTCREATE", "CPU", "def f(:", "f", "INPUTS", 1, "a", "OUTPUTS", 1),
                      "ESCRIPTCREATE")
    # the message AI.SCRIPTSTORE gives for the same source
    stored = c.execute("AI.SCRIPTSTORE", "x", "CPU", "ENTRY_POINTS", 1, "f", "SOURCE", "def f(:")
    assert isinstance(stored, RespError) and msg == str(stored), (msg, stored)


# --- DAGs -------------------------------------------------------------------------------

def _store_model_and_script(c: RawClient, m: TwoInputModel) -> None:
    store(c, m)
    assert_ok(c.execute("AI.SCRIPTSTORE", "s", "CPU", "ENTRY_POINTS", 2, "add_all", "reshape_fails",
                        "SOURCE", SCRIPT))
    put(c, "a", A)


def test_dag_built_op_by_op(c: RawClient, model: TwoInputModel) -> None:
    _store_model_and_script(c, model)
    numops, outs, rerun = c.execute("LLAPI.DAGRUN", "m", "s", "a", "add_all")
    assert numops == 5   # TENSORSET b, the model, the script, two TENSORGETs
    assert rerun == "EDAGRUN ERR the DAG was already run"
    want_c = model.fn(A, np.full_like(A, 2))
    got_c, got_d = outputs(outs)
    np.testing.assert_allclose(got_c, want_c, rtol=1e-6)
    np.testing.assert_allclose(got_d, A + want_c, rtol=1e-6)


# DAGAddRunOp's refusals of a model op's counts: RedisAI 1.2's texts, which clients compare whole.
DAG_INPUT_KEYS = "Number of keys given as INPUTS does not match model definition"
DAG_OUTPUT_KEYS = "Number of keys given as OUTPUTS does not match model definition"


def test_refused_model_op_stays_usable(c: RawClient, model: TwoInputModel) -> None:
    """Refused for its inputs, then (the missing input added) for its outputs, then (the
    output added) accepted: the same op, and the DAG runs."""
    _store_model_and_script(c, model)
    numops, outs, rerun, refused = c.execute("LLAPI.DAGRUN", "m", "s", "a", "add_all", "RETRY")
    assert refused == [f"EDAGBUILDER {DAG_INPUT_KEYS}", f"EDAGBUILDER {DAG_OUTPUT_KEYS}"]
    assert numops == 5 and rerun == "EDAGRUN ERR the DAG was already run"
    want_c = model.fn(A, np.full_like(A, 2))
    got_c, got_d = outputs(outs)
    np.testing.assert_allclose(got_c, want_c, rtol=1e-6)
    np.testing.assert_allclose(got_d, A + want_c, rtol=1e-6)


def test_failing_dags(c: RawClient) -> None:
    _store_model_and_script(c, MODELS["TORCH"])
    # refused while it is built: RedisAI 1.2's text, whole
    assert llapi_error(c.execute("LLAPI.DAGRUN", "m", "s", "a", "add_all", "FAIL"),
                       "EDAGBUILDER") == DAG_INPUT_KEYS
    # fails while it runs: DAGRunError, and DAGGetError has the failed op's code and message
    msg = llapi_error(c.execute("LLAPI.DAGRUN", "m", "s", "a", "reshape_fails"), "ESCRIPTRUN")
    assert "shape '[7, 7]' is invalid for input of size 6" in msg, msg
    store(c, MODELS["TF"], "tf")
    put(c, "i", A.astype(np.int64))
    msg = llapi_error(c.execute("LLAPI.DAGSTRING", "|> AI.MODELEXECUTE tf INPUTS 2 i i OUTPUTS 1 c "
                                "|> AI.TENSORGET c", "i"), "EMODELRUN")
    assert msg


def test_dag_from_a_string(c: RawClient, model: TwoInputModel) -> None:
    _store_model_and_script(c, model)
    dag = ("|> AI.TENSORSET b FLOAT 2 3 VALUES 2 3 -1 0.5 8 2 "
           "|> AI.MODELEXECUTE m INPUTS 2 a b OUTPUTS 1 c "
           "|> AI.SCRIPTEXECUTE s add_all INPUTS 2 a c OUTPUTS 1 d "
           "|> AI.TENSORGET c |> AI.TENSORGET d")
    numops, outs = c.execute("LLAPI.DAGSTRING", dag, "a")
    assert numops == 5
    got_c, got_d = outputs(outs)
    np.testing.assert_allclose(got_c, model.fn(A, B), rtol=1e-6)
    np.testing.assert_allclose(got_d, A + model.fn(A, B), rtol=1e-6)


def test_bad_dag_strings(c: RawClient) -> None:
    put(c, "a", A)
    assert llapi_error(c.execute("LLAPI.DAGSTRING", "bad string", "a"), "EDAGBUILDER")
    assert llapi_error(c.execute("LLAPI.DAGSTRING", "|> AI.NOSUCHCOMMAND a", "a"), "EDAGBUILDER")
    assert llapi_error(c.execute("LLAPI.DAGSTRING", "|> AI.MODELEXECUTE nothing INPUTS 1 a OUTPUTS 1 b",
                                 "a"), "EDAGBUILDER")
    # nothing added: DAGRun refuses an empty DAG
    assert llapi_error(c.execute("LLAPI.DAGSTRING", ""), "EDAGBUILDER")


# --- statistics -------------------------------------------------------------------------

def test_info_counts_llapi_runs(c: RawClient, model: TwoInputModel) -> None:
    """Every run of a stored model or script counts in its AI.INFO, sync or async, alone, in a
    batch of run contexts or in a DAG, like a command's run; a run the backend refuses or
    fails counts as a call and an error."""
    _store_model_and_script(c, model)
    put(c, "b", B)
    io = _io(model)
    rows = A.shape[0]
    assert stats(c, "m") == (0, 0, 0) and stats(c, "s") == (0, 0, -1)
    for _ in range(2):
        outputs(c.execute("LLAPI.MODELRUN_ASYNC", "m", *io))
    assert stats(c, "m") == (2, 0, 2 * rows)
    c.execute("LLAPI.MODELRUN", "m", *io)         # ONNX refuses a synchronous run
    c.execute("LLAPI.MODELRUN_BATCH", "m", *io)   # two run contexts: two calls
    if model.backend == "ONNX":
        assert stats(c, "m") == (5, 3, 2 * rows)
    else:
        assert stats(c, "m") == (5, 0, 5 * rows)
    before = stats(c, "m")
    c.execute("LLAPI.DAGRUN", "m", "s", "a", "add_all")
    assert stats(c, "m") == (before[0] + 1, before[1], before[2] + rows)
    assert stats(c, "s") == (1, 0, -1)
    outputs(c.execute("LLAPI.SCRIPTRUN_ASYNC", "s", "add_all", "INPUTS", 1, "a", "OUTPUTS", 1))
    outputs(c.execute("LLAPI.SCRIPTRUN", "s", "add_all", "INPUTS", 1, "a", "OUTPUTS", 1))
    llapi_error(c.execute("LLAPI.SCRIPTRUN_ASYNC", "s", "reshape_fails", "INPUTS", 1, "a", "OUTPUTS", 1),
                "ESCRIPTRUN")
    assert stats(c, "s") == (4, 1, -1)
    # and a command's run counts in the same entry
    assert_ok(c.execute("AI.MODELEXECUTE", "m", "INPUTS", 2, "a", "b", "OUTPUTS", 1, "out"))
    assert stats(c, "m") == (before[0] + 2, before[1], before[2] + 2 * rows)


def test_info_counts_a_run_whose_context_does_not_fit(c: RawClient, model: TwoInputModel) -> None:
    """A run context with no inputs at all: ModelRunAsync queues it, it fails, and it counts a
    call and an error, as a failed command run does (RedisAI 1.2: that run and one good run of
    a TF model on 2x2 inputs give calls 2, errors 1, samples 2). ModelRun counts it too, once
    per run context."""
    if model.backend == "TFLITE":
        pytest.skip("counts runs on 2x2 inputs, a shape the 3-column TFLITE model refuses "
                    "(LiteRT cannot resize it: docs/backends.md, TFLITE)")
    store(c, model)
    put(c, "a", A[:, :2])
    put(c, "b", B[:, :2])
    unfit = ["INPUTS", 0, "OUTPUTS", 1, model.output]
    assert llapi_error(c.execute("LLAPI.MODELRUN_ASYNC", "m", *unfit), "EMODELRUN")
    assert stats(c, "m") == (1, 1, 0)
    outputs(c.execute("LLAPI.MODELRUN_ASYNC", "m", *_io(model)))
    assert stats(c, "m") == (2, 1, 2)
    # one input of two, asynchronously; then synchronously, alone and as a batch of two contexts
    assert llapi_error(c.execute("LLAPI.MODELRUN_ASYNC", "m", "INPUTS", 1, "a", "OUTPUTS", 1,
                                 model.output), "EMODELRUN")
    assert llapi_error(c.execute("LLAPI.MODELRUN", "m", *unfit), "EMODELRUN")
    assert llapi_error(c.execute("LLAPI.MODELRUN_BATCH", "m", *unfit), "EMODELRUN")
    assert stats(c, "m") == (6, 5, 2)


def test_info_counts_failing_script_runs_and_dag_ops(c: RawClient, model: TwoInputModel) -> None:
    """Queued script runs and DAG ops that fail count a call and an error each; an op a failed
    op keeps from running counts nothing, as in a command's DAG."""
    _store_model_and_script(c, model)
    rows = A.shape[0]
    for fn in ("no_such_fn", "reshape_fails"):
        llapi_error(c.execute("LLAPI.SCRIPTRUN_ASYNC", "s", fn, "INPUTS", 1, "a", "OUTPUTS", 1),
                    "ESCRIPTRUN")
    # two outputs asked of a function that returns one
    llapi_error(c.execute("LLAPI.SCRIPTRUN_ASYNC", "s", "add_all", "INPUTS", 1, "a", "OUTPUTS", 2),
                "ESCRIPTRUN")
    assert stats(c, "s") == (3, 3, -1)
    # the model op runs, the script op after it fails
    llapi_error(c.execute("LLAPI.DAGRUN", "m", "s", "a", "reshape_fails"), "ESCRIPTRUN")
    assert stats(c, "m") == (1, 0, rows) and stats(c, "s") == (4, 4, -1)
    # the model op fails (inputs of shapes that do not combine), so the script op after it
    # never runs
    put(c, "i", np.ones((5, 7), np.float32))
    llapi_error(c.execute("LLAPI.DAGSTRING", "|> AI.MODELEXECUTE m INPUTS 2 a i OUTPUTS 1 c "
                          "|> AI.SCRIPTEXECUTE s add_all INPUTS 1 c OUTPUTS 1 d |> AI.TENSORGET d",
                          "a", "i"), "EMODELRUN")
    assert stats(c, "m") == (2, 1, rows) and stats(c, "s") == (4, 4, -1)


def test_info_counts_llapi_runs_of_many_clients_on_two_devices(
        srv: RedisServer, c: RawClient) -> None:
    """Clients at once, each with good and failing runs of models and scripts on CPU and CPU:1
    (the CPU:1 model batching the clients' runs), and DAGs whose ops cross the two queues:
    every run and op counts once, each failure as an error."""
    clients = 6
    for d, device in enumerate(("CPU", "CPU:1")):
        batching = ["BATCHSIZE", 4] if d == 1 else []
        assert_ok(c.execute("AI.MODELSTORE", f"m{d}", "TORCH", device, *batching,
                            "BLOB", MODELS["TORCH"].blob()))
        assert_ok(c.execute("AI.SCRIPTSTORE", f"s{d}", device, "ENTRY_POINTS", 2, "add_all",
                            "reshape_fails", "SOURCE", SCRIPT))
    put(c, "a", A)
    put(c, "b", B)
    rows = A.shape[0]
    runs: list[list[Any]] = []
    for d in (0, 1):
        m, s, other_s = f"m{d}", f"s{d}", f"s{1 - d}"
        runs += [
            ["LLAPI.MODELRUN_ASYNC", m, "INPUTS", 2, "a", "b", "OUTPUTS", 1, "c"],  # good
            ["LLAPI.MODELRUN_ASYNC", m, "INPUTS", 0, "OUTPUTS", 1, "c"],            # unfit
            ["LLAPI.SCRIPTRUN_ASYNC", s, "add_all", "INPUTS", 1, "a", "OUTPUTS", 1],  # good
            ["LLAPI.SCRIPTRUN_ASYNC", s, "reshape_fails", "INPUTS", 1, "a", "OUTPUTS", 1],
            ["LLAPI.DAGRUN", m, other_s, "a", "add_all"],        # model op, script op: good
            ["LLAPI.DAGRUN", m, other_s, "a", "reshape_fails"],  # the script op fails
        ]
    conns = [RawClient(srv.port) for _ in range(clients)]
    try:
        for conn in conns:
            for run in runs:
                conn.send(*run)
        failed = sum(isinstance(conn.read(), RespError) for conn in conns for _ in runs)
    finally:
        for conn in conns:
            conn.close()
    assert failed == 3 * 2 * clients
    for d in (0, 1):
        # per client: good run, unfit run, two DAG model ops; the script: good, failing, and
        # the script ops of the other device's DAGs, one good and one failing
        assert stats(c, f"m{d}") == (4 * clients, clients, 3 * rows * clients)
        assert stats(c, f"s{d}") == (4 * clients, 2 * clients, -1)


# --- the test module's own commands declare their keys ----------------------------------

def test_commands_declare_their_keys(srv: RedisServer, c: RawClient) -> None:
    getkeys = [
        (["LLAPI.MODELRUN", "m", "INPUTS", 2, "a", "b", "OUTPUTS", 1, "c"], [b"m", b"a", b"b"]),
        (["LLAPI.SCRIPTRUN_ASYNC", "s", "f", "INPUTS", 1, "a", "LIST", 2, "b", "d", "OUTPUTS", 1],
         [b"s", b"a", b"b", b"d"]),
        (["LLAPI.MODELCREATE", "ONNX", "CPU", "blob", "INPUTS", 1, "x", "OUTPUTS", 1, "y"], [b"x"]),
        (["LLAPI.DAGRUN", "m", "s", "a", "add_all"], [b"m", b"s", b"a"]),
        (["LLAPI.DAGSTRING", "|> AI.TENSORGET a", "a", "b"], [b"a", b"b"]),
        (["LLAPI.TENSORCONCAT", "x", "y"], [b"x", b"y"]),
    ]
    for cmd, keys in getkeys:
        assert c.execute("COMMAND", "GETKEYS", *cmd) == keys, cmd
    # so ACL key patterns apply to them
    put(c, "a", A)
    put(c, "x", A)
    assert_ok(c.execute("ACL", "SETUSER", "limited", "on", "nopass", "~a*", "+@all"))
    with RawClient(srv.port) as limited:
        assert_ok(limited.execute("AUTH", "limited", "x"))
        tensor(limited.execute("LLAPI.TENSORGET", "a"))
        assert_error_startswith(limited.execute("LLAPI.TENSORGET", "x"), "NOPERM")
        assert_error_startswith(limited.execute("LLAPI.MODELRUN", "m", "INPUTS", 1, "a",
                                                "OUTPUTS", 1, "c"), "NOPERM")
    assert c.execute("ACL", "DELUSER", "limited") == 1
