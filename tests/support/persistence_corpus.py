"""One corpus of RedisAI objects shared by the persistence and replication tests
(docs/persistence.md).

* `module_args(backends)`: the load-time arguments every server of a scenario gets. The
  chunk size is not saved anywhere (docs/configuration.md), so a restarted server or a
  replica must be started with the same MODEL_CHUNK_SIZE to chunk the same way.
* `store(c)`: writes tensors of every dtype (FLOAT, DOUBLE, INT8/16/32/64, UINT8/16, BOOL,
  STRING; a 0-d scalar, a zero-filled one, a VALUES one, a 1 MiB one, one in DB 1), a model
  of each backend (TF by MODELSTORE and by the deprecated MODELSET, TORCH with batching
  options and a lower-case device, ONNX sent as three BLOB chunks and, at CHUNK bytes,
  returned and saved as many), a script with entry points and one by the deprecated
  AI.SCRIPTSET; then runs MODELEXECUTE, SCRIPTEXECUTE (entry point and legacy call) and a
  DAG with PERSIST, whose outputs become part of the corpus.
* `snapshot(c, run=...)`: the raw replies (TYPE, TENSORGET META BLOB, MODELGET META BLOB,
  SCRIPTGET, the key list) and, with run=True, the results of running every model and
  script again (outputs go to `snap:*` keys that are deleted afterwards). run="ro" runs the
  models through AI.DAGEXECUTE_RO only, which a read-only replica accepts.
* `assert_matches_source(snap)`: the snapshot holds what `store` sent (bytes, chunking,
  meta, sources) and the runs agree with the frameworks in-process, so a comparison of two
  snapshots cannot pass on two equally wrong servers.
* `assert_same(before, after)`: equal entry by entry, naming the entries that differ.
"""
from __future__ import annotations

import pathlib
from typing import Any, Mapping

import numpy as np

import onnx_models as om
import tf_graphs
import torch_models as tm
from helpers import assert_ok
from resp import RawClient, RespError, Status

CHUNK = 8192  # MODEL_CHUNK_SIZE of every server: TF/TORCH blobs fit one chunk, ONNX needs 14

OK = Status("OK")


def module_args(backends: Mapping[str, pathlib.Path]) -> list[str]:
    args = ["MODEL_CHUNK_SIZE", str(CHUNK)]
    for kind, path in backends.items():
        args += [kind, str(path)]
    return args


# --- tensors ---------------------------------------------------------------------------------

def _arr(values: Any, dtype: Any) -> np.ndarray:
    return np.array(values, dtype=dtype)


# name -> (dtype token, dims, blob). Extremes, negatives (BLOB only: docs/commands.md,
# "Data types"), NaN/inf/-0.0.
BLOB_TENSORS: dict[str, tuple[str, tuple[int, ...], bytes]] = {
    "t:float": ("FLOAT", (2, 3),
                _arr([[1.5, -0.0, np.inf], [-np.inf, np.nan, 3.25e-38]], np.float32).tobytes()),
    "t:double": ("DOUBLE", (3,), _arr([np.pi, -1e300, 5e-324], np.float64).tobytes()),
    "t:int8": ("INT8", (4,), _arr([-128, -1, 0, 127], np.int8).tobytes()),
    "t:int16": ("INT16", (2, 2), _arr([[-32768, -2], [7, 32767]], np.int16).tobytes()),
    "t:int32": ("INT32", (3,), _arr([-(1 << 31), 0, (1 << 31) - 1], np.int32).tobytes()),
    "t:int64": ("INT64", (2,), _arr([-(1 << 63), (1 << 63) - 1], np.int64).tobytes()),
    "t:uint8": ("UINT8", (1, 3), _arr([[0, 128, 255]], np.uint8).tobytes()),
    "t:uint16": ("UINT16", (3,), _arr([0, 1, 65535], np.uint16).tobytes()),
    "t:bool": ("BOOL", (2, 2), _arr([[1, 0], [0, 1]], np.uint8).tobytes()),
    "t:string": ("STRING", (3,), b"hello\0w\xc3\xb6rld\0x y\0"),
    "t:big": ("FLOAT", (256, 1024),
              np.random.default_rng(5).random((256, 1024), dtype=np.float32).tobytes()),
}
# name -> (AI.TENSORSET args after the key, expected dtype, dims, expected blob)
OTHER_TENSORS: dict[str, tuple[list[Any], str, tuple[int, ...], bytes]] = {
    "t:scalar": (["FLOAT", "VALUES", 3.5], "FLOAT", (), _arr(3.5, np.float32).tobytes()),
    "t:zeros": (["INT32", 2, 2], "INT32", (2, 2), bytes(16)),
    "t:values": (["DOUBLE", 2, "VALUES", 1.5, -2], "DOUBLE", (2,),
                 _arr([1.5, -2], np.float64).tobytes()),
    "t:strvalues": (["STRING", 2, "VALUES", "ab", "c"], "STRING", (2,), b"ab\0c\0"),
}
DB1_TENSOR = ("t:db1", "INT64", (2,), _arr([-7, 1 << 40], np.int64).tobytes())

# Inputs of the runs (also tensors of the corpus).
A = _arr([[1, 2], [3, 4]], np.float32)
B = _arr([[0.5, -1], [2, 8]], np.float32)
X = np.random.default_rng(3).random((2, 4), dtype=np.float32)
IMG = tm.cnn_sample(batch=2, seed=11)
INPUTS = {"in:a": A, "in:b": B, "in:x": X, "in:img": IMG}

# --- models and scripts ----------------------------------------------------------------------

LEGACY_SCRIPT = '''
def add(a, b):
    return a + b

def scale_all(x: Tensor, rest: List[Tensor]):
    s = x
    for t in rest:
        s = s * t
    return s
'''
SCRIPT_EPS = list(tm.ENTRY_POINTS)


def tf_blob() -> bytes:
    return tf_graphs.mul_graph()


def torch_blob() -> bytes:
    return tm.linear().blob


def onnx_blob() -> bytes:
    return om.cnn().blob


def _three(blob: bytes) -> list[bytes]:
    a, b = len(blob) // 3, 2 * len(blob) // 3
    return [blob[:a], blob[a:b], blob[b:]]


# key -> (backend, device, tag, batchsize, minbatchsize, minbatchtimeout, inputs, outputs, blob fn)
MODELS: dict[str, tuple[str, str, str, int, int, int, list[str], list[str], Any]] = {
    "m:tf": ("TF", "CPU", "tf v1", 0, 0, 0, ["a", "b"], ["mul"], tf_blob),
    "m:tfset": ("TF", "CPU", "", 0, 0, 0, ["a", "b"], ["mul"], tf_blob),
    "m:torch": ("TORCH", "cpu", "torch", 4, 2, 20, ["x"], [""], torch_blob),
    "m:onnx": ("ONNX", "CPU", "chunked\nbinary\0tag", 0, 0, 0, ["x"], ["y"], onnx_blob),
}
SCRIPTS: dict[str, tuple[str, str, list[str], str]] = {
    "s:eps": ("CPU", "scripts", SCRIPT_EPS, tm.SCRIPT),
    "s:legacy": ("CPU", "old", [], LEGACY_SCRIPT),
}

# Output keys written by store()'s executions (replicated as AI.TENSORSET ... BLOB).
EXEC_OUTPUTS = ["out:tf", "out:torch", "out:onnx", "out:sum", "out:diff", "out:legacy",
                "out:dag1", "out:dag2"]


def _onnx_names() -> tuple[list[str], list[str]]:
    built = om.cnn()
    return list(built.inputs), list(built.outputs)


def store_models(c: RawClient) -> None:
    assert_ok(c.execute("AI.MODELSTORE", "m:tf", "TF", "CPU", "TAG", "tf v1", "INPUTS", 2, "a",
                        "b", "OUTPUTS", 1, "mul", "BLOB", tf_blob()))
    assert_ok(c.execute("AI.MODELSET", "m:tfset", "TF", "CPU", "INPUTS", "a", "b", "OUTPUTS",
                        "mul", "BLOB", tf_blob()))
    assert_ok(c.execute("AI.MODELSTORE", "m:torch", "TORCH", "cpu", "TAG", "torch", "BATCHSIZE", 4,
                        "MINBATCHSIZE", 2, "MINBATCHTIMEOUT", 20, "BLOB", torch_blob()))
    assert_ok(c.execute("AI.MODELSTORE", "m:onnx", "ONNX", "CPU", "TAG", MODELS["m:onnx"][2],
                        "BLOB", *_three(onnx_blob())))


def store_scripts(c: RawClient) -> None:
    dev, tag, eps, src = SCRIPTS["s:eps"]
    assert_ok(c.execute("AI.SCRIPTSTORE", "s:eps", dev, "TAG", tag, "ENTRY_POINTS", len(eps), *eps,
                        "SOURCE", src))
    dev, tag, _, src = SCRIPTS["s:legacy"]
    assert_ok(c.execute("AI.SCRIPTSET", "s:legacy", dev, "TAG", tag, "SOURCE", src))


def store_tensors(c: RawClient) -> None:
    for key, (dt, dims, blob) in BLOB_TENSORS.items():
        assert_ok(c.execute("AI.TENSORSET", key, dt, *dims, "BLOB", blob))
    for key, (args, _, _, _) in OTHER_TENSORS.items():
        assert_ok(c.execute("AI.TENSORSET", key, *args))
    for key, arr in INPUTS.items():
        assert_ok(c.execute("AI.TENSORSET", key, "FLOAT", *arr.shape, "BLOB", arr.tobytes()))
    key, dt, dims, blob = DB1_TENSOR
    assert_ok(c.execute("SELECT", 1))
    assert_ok(c.execute("AI.TENSORSET", key, dt, *dims, "BLOB", blob))
    assert_ok(c.execute("SELECT", 0))


def execute_all(c: RawClient) -> None:
    """The execution commands whose outputs join the corpus."""
    assert_ok(c.execute("AI.MODELEXECUTE", "m:tf", "INPUTS", 2, "in:a", "in:b", "OUTPUTS", 1,
                        "out:tf"))
    assert_ok(c.execute("AI.MODELEXECUTE", "m:torch", "INPUTS", 1, "in:x", "OUTPUTS", 1,
                        "out:torch"))
    assert_ok(c.execute("AI.MODELEXECUTE", "m:onnx", "INPUTS", 1, "in:img", "OUTPUTS", 1,
                        "out:onnx"))
    assert_ok(c.execute("AI.SCRIPTEXECUTE", "s:eps", "tuple_out", "INPUTS", 2, "in:a", "in:b",
                        "OUTPUTS", 2, "out:sum", "out:diff"))
    assert_ok(c.execute("AI.SCRIPTEXECUTE", "s:legacy", "add", "INPUTS", 2, "in:a", "in:b",
                        "OUTPUTS", 1, "out:legacy"))
    reply = c.execute("AI.DAGEXECUTE", "LOAD", 2, "in:a", "in:b", "PERSIST", 2, "out:dag1",
                      "out:dag2",
                      "|>", "AI.MODELEXECUTE", "m:tf", "INPUTS", 2, "in:a", "in:b", "OUTPUTS", 1,
                      "dag:local",
                      "|>", "AI.SCRIPTEXECUTE", "s:eps", "bar", "INPUTS", 2, "dag:local", "in:b",
                      "OUTPUTS", 1, "out:dag1",
                      "|>", "AI.TENSORSET", "out:dag2", "INT8", 2, "BLOB", b"\xff\x01")
    assert reply == [OK, OK, OK], reply


def store(c: RawClient) -> None:
    store_tensors(c)
    store_models(c)
    store_scripts(c)
    execute_all(c)


def tensor_keys() -> list[str]:
    return [*BLOB_TENSORS, *OTHER_TENSORS, *INPUTS, *EXEC_OUTPUTS]


def all_keys() -> list[str]:
    return sorted([*tensor_keys(), *MODELS, *SCRIPTS])


# --- snapshot --------------------------------------------------------------------------------

def _run_model(c: RawClient, key: str) -> list[Any]:
    ins = {"m:tf": ["in:a", "in:b"], "m:tfset": ["in:a", "in:b"], "m:torch": ["in:x"],
           "m:onnx": ["in:img"]}[key]
    out = f"snap:{key}"
    reply = c.execute("AI.MODELEXECUTE", key, "INPUTS", len(ins), *ins, "OUTPUTS", 1, out)
    got = c.execute("AI.TENSORGET", out, "META", "BLOB")
    c.execute("DEL", out)
    return [reply, got]


def _run_models_ro(c: RawClient) -> list[Any]:
    """Every model in one read-only DAG (accepted by a read-only replica)."""
    cmd = ["AI.DAGEXECUTE_RO", "LOAD", 4, "in:a", "in:b", "in:x", "in:img",
           "|>", "AI.MODELEXECUTE", "m:tf", "INPUTS", 2, "in:a", "in:b", "OUTPUTS", 1, "o1",
           "|>", "AI.MODELEXECUTE", "m:tfset", "INPUTS", 2, "in:a", "in:b", "OUTPUTS", 1, "o2",
           "|>", "AI.MODELEXECUTE", "m:torch", "INPUTS", 1, "in:x", "OUTPUTS", 1, "o3",
           "|>", "AI.MODELEXECUTE", "m:onnx", "INPUTS", 1, "in:img", "OUTPUTS", 1, "o4"]
    for o in ("o1", "o2", "o3", "o4"):
        cmd += ["|>", "AI.TENSORGET", o, "META", "BLOB"]
    return c.execute(*cmd)


def _run_scripts(c: RawClient) -> dict[str, Any]:
    runs = {
        "s:eps bar": ["s:eps", "bar", "INPUTS", 2, "in:a", "in:b", "OUTPUTS", 1, "snap:o1"],
        "s:eps add_args": ["s:eps", "add_args", "INPUTS", 1, "in:a", "ARGS", 2, "3", "4",
                           "OUTPUTS", 1, "snap:o1"],
        "s:eps counts": ["s:eps", "counts", "KEYS", 1, "in:a", "INPUTS", 2, "in:a", "in:b",
                         "ARGS", 1, "z", "OUTPUTS", 1, "snap:o1"],
        "s:eps legacy_var": ["s:eps", "legacy_var", "INPUTS", 3, "in:a", "in:b", "in:b",
                             "OUTPUTS", 1, "snap:o1"],
        "s:legacy add": ["s:legacy", "add", "INPUTS", 2, "in:a", "in:b", "OUTPUTS", 1, "snap:o1"],
        "s:legacy scale_all": ["s:legacy", "scale_all", "INPUTS", 3, "in:a", "in:b", "in:b",
                               "OUTPUTS", 1, "snap:o1"],
    }
    out = {}
    for name, args in runs.items():
        reply = c.execute("AI.SCRIPTEXECUTE", *args)
        out[name] = [reply, c.execute("AI.TENSORGET", "snap:o1", "META", "BLOB")]
        c.execute("DEL", "snap:o1")
    return out


def snapshot(c: RawClient, run: bool | str = True) -> dict[str, Any]:
    snap: dict[str, Any] = {}
    snap["keys"] = sorted(c.execute("KEYS", "*"))
    for key in tensor_keys():
        snap[f"type {key}"] = c.execute("TYPE", key)
        snap[f"tensor {key}"] = c.execute("AI.TENSORGET", key, "META", "BLOB")
    for key in MODELS:
        snap[f"type {key}"] = c.execute("TYPE", key)
        snap[f"model {key}"] = c.execute("AI.MODELGET", key, "META", "BLOB")
    for key in SCRIPTS:
        snap[f"type {key}"] = c.execute("TYPE", key)
        snap[f"script {key}"] = c.execute("AI.SCRIPTGET", key)
    assert_ok(c.execute("SELECT", 1))
    snap["db1 keys"] = sorted(c.execute("KEYS", "*"))
    snap[f"tensor db1 {DB1_TENSOR[0]}"] = c.execute("AI.TENSORGET", DB1_TENSOR[0], "META", "BLOB")
    assert_ok(c.execute("SELECT", 0))
    if run:
        snap["run ro models"] = _run_models_ro(c)
    if run is True:
        for key in MODELS:
            snap[f"run {key}"] = _run_model(c, key)
        for name, result in _run_scripts(c).items():
            snap[f"run {name}"] = result
        assert sorted(c.execute("KEYS", "*")) == snap["keys"], "a snapshot run left keys behind"
    return snap


def _meta_blob(dtype: str, dims: tuple[int, ...], blob: bytes) -> list[Any]:
    return [b"dtype", dtype.encode(), b"shape", list(dims), b"blob", blob]


def _tensor_reply(arr: np.ndarray) -> list[Any]:
    tok = {np.dtype(np.float32): "FLOAT", np.dtype(np.int64): "INT64",
           np.dtype(np.float64): "DOUBLE"}[arr.dtype]
    return _meta_blob(tok, arr.shape, np.ascontiguousarray(arr).tobytes())


def _decode(reply: list[Any]) -> np.ndarray:
    f = dict(zip(reply[::2], reply[1::2]))
    dt = {b"FLOAT": np.float32, b"INT64": np.int64, b"DOUBLE": np.float64}[f[b"dtype"]]
    return np.frombuffer(f[b"blob"], dtype=dt).reshape(tuple(f[b"shape"]))


def _close(reply: Any, want: np.ndarray, what: str) -> None:
    assert isinstance(reply, list) and len(reply) == 6, f"{what}: {reply!r}"
    got = _decode(reply)
    assert got.dtype == want.dtype and got.shape == want.shape, f"{what}: {got!r} vs {want!r}"
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6, err_msg=what)


def expected_blob_reply(blob: bytes) -> bytes | list[bytes]:
    """docs/commands.md, AI.MODELGET: k = L // CHUNK + 1 chunks; one chunk is a plain bulk
    string."""
    k = len(blob) // CHUNK + 1
    return blob if k == 1 else [blob[i * CHUNK:(i + 1) * CHUNK] for i in range(k)]


def assert_matches_source(snap: Mapping[str, Any]) -> None:
    """The snapshot holds what store() sent, and the runs give the frameworks' results."""
    assert snap["keys"] == [k.encode() for k in all_keys()]
    assert snap["db1 keys"] == [DB1_TENSOR[0].encode()]
    for key, (dt, dims, blob) in BLOB_TENSORS.items():
        assert snap[f"tensor {key}"] == _meta_blob(dt, dims, blob), key
        assert snap[f"type {key}"] == Status("AI_TENSOR")
    for key, (_, dt, dims, blob) in OTHER_TENSORS.items():
        assert snap[f"tensor {key}"] == _meta_blob(dt, dims, blob), key
    for key, arr in INPUTS.items():
        assert snap[f"tensor {key}"] == _tensor_reply(arr), key
    _, dt, dims, blob = DB1_TENSOR
    assert snap[f"tensor db1 {DB1_TENSOR[0]}"] == _meta_blob(dt, dims, blob)

    onnx_in, onnx_out = _onnx_names()
    for key, (backend, dev, tag, bs, mbs, mbt, ins, outs, blob_fn) in MODELS.items():
        if backend == "ONNX":
            ins, outs = onnx_in, onnx_out
        want = [b"backend", backend.encode(), b"device", dev.encode(), b"tag", tag.encode(),
                b"batchsize", bs, b"minbatchsize", mbs, b"inputs", [i.encode() for i in ins],
                b"outputs", [o.encode() for o in outs], b"minbatchtimeout", mbt,
                b"blob", expected_blob_reply(blob_fn())]
        got = snap[f"model {key}"]
        assert got[:-1] == want[:-1], f"{key} meta: {got[:-1]!r}"
        assert got[-1] == want[-1], f"{key}: blob differs from the stored one (or chunking)"
        assert snap[f"type {key}"] == Status("AI__MODEL")
    assert isinstance(snap["model m:onnx"][-1], list) and len(snap["model m:onnx"][-1]) > 2, \
        "the ONNX model must span several chunks"
    for key, (dev, tag, eps, src) in SCRIPTS.items():
        assert snap[f"script {key}"] == [b"device", dev.encode(), b"tag", tag.encode(),
                                         b"Entry Points", [e.encode() for e in eps],
                                         b"source", src.encode()], key
        assert snap[f"type {key}"] == Status("AI_SCRIPT")

    # Outputs of store()'s executions.
    [lin] = tm.linear().run(X)
    [cnn] = om.cnn().run(IMG)
    _close(snap["tensor out:tf"], A * B, "out:tf")
    _close(snap["tensor out:torch"], lin, "out:torch")
    _close(snap["tensor out:onnx"], cnn, "out:onnx")
    _close(snap["tensor out:sum"], A + B, "out:sum")
    _close(snap["tensor out:diff"], A - B, "out:diff")
    _close(snap["tensor out:legacy"], A + B, "out:legacy")
    _close(snap["tensor out:dag1"], A * B + B, "out:dag1")
    assert snap["tensor out:dag2"] == _meta_blob("INT8", (2,), b"\xff\x01")

    if "run ro models" in snap:
        ro = snap["run ro models"]
        assert ro[:4] == [OK] * 4, ro[:4]
        for got, want, what in zip(ro[4:], [A * B, A * B, lin, cnn], ["tf", "tfset", "torch", "onnx"]):
            _close(got, want, f"DAGEXECUTE_RO {what}")
    if "run m:tf" in snap:
        for key, want in {"m:tf": A * B, "m:tfset": A * B, "m:torch": lin, "m:onnx": cnn}.items():
            reply, got = snap[f"run {key}"]
            assert reply == OK, f"{key}: {reply!r}"
            _close(got, want, f"run {key}")
        want_scripts = {
            "s:eps bar": A + B, "s:eps add_args": A + 7,
            "s:eps counts": np.array([2, 1, 1], np.int64), "s:eps legacy_var": A + B + B,
            "s:legacy add": A + B, "s:legacy scale_all": A * B * B,
        }
        for name, want in want_scripts.items():
            reply, got = snap[f"run {name}"]
            assert reply == OK, f"{name}: {reply!r}"
            _close(got, want, f"run {name}")


def _short(v: Any) -> str:
    r = repr(v)
    return r if len(r) < 300 else r[:300] + f"... ({len(r)} chars)"


def assert_same(before: Mapping[str, Any], after: Mapping[str, Any]) -> None:
    """Every entry equal, byte for byte; the message names each one that is not."""
    assert set(before) == set(after), f"entries differ: {set(before) ^ set(after)}"
    diff = [k for k in before if before[k] != after[k]]
    assert not diff, "differs after the round trip:\n" + "\n".join(
        f"  {k}: before {_short(before[k])}\n  {' ' * len(k)}  after  {_short(after[k])}"
        for k in diff)


def assert_no_errors(snap: Mapping[str, Any]) -> None:
    bad = {k: v for k, v in snap.items()
           if isinstance(v, RespError) or (isinstance(v, list) and any(isinstance(x, RespError) for x in v))}
    assert not bad, f"error replies in the snapshot: {bad}"
