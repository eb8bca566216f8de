"""RDB encodings (docs/persistence.md): our DUMP output read field by field against the v4
layout, and DUMP payloads of encodings 0-3 (what RedisAI 1.2 and older wrote) restored
into a real server, then compared with the same objects stored by command and run.

Payloads are written by tests/support/rdb_payloads.py from the documented layouts; the writer is
first shown to reproduce the server's own DUMP byte for byte.
"""
from __future__ import annotations

import pathlib
import tempfile
from typing import Any

import numpy as np
import pytest

import onnx_models as om
import rdb_payloads as rp
import tf_graphs
import torch_models as tm
from helpers import LogMark, assert_error, assert_ok
from model_io import DTYPES, get, put
from rdb_payloads import U, cstr
from redis_server import Connect, RedisServer, StartServer, backend_args
from resp import RawClient, RespError

CHUNK = 4096
BAD_DATA = "ERR Bad data format"
BACKEND_CODE = {"TF": 0, "TFLITE": 1, "TORCH": 2, "ONNX": 3}
KDLCPU = 1  # DLPack's device type of a CPU tensor, as encodings 0-3 saved it
ENC = 4  # what we write: RedisAI 1.2's encoding (tests/persistence/test_rdb_both_ways.py)
NEWEST_READ = 5  # what earlier builds of this module wrote


@pytest.fixture(scope="module")
def srv(start_server: StartServer, all_backend_paths: dict[str, pathlib.Path]) -> RedisServer:
    return start_server([*backend_args(all_backend_paths), "MODEL_CHUNK_SIZE", str(CHUNK)],
                        extra=["--rdbcompression", "no"])


@pytest.fixture
def c(srv: RedisServer, connect: Connect) -> RawClient:
    return connect(srv)


@pytest.fixture(scope="module")
def rdb_version(srv: RedisServer) -> int:
    with RawClient(srv.port) as c:
        assert_ok(c.execute("AI.TENSORSET", "__v", "INT8", 1, "VALUES", 1))
        version = rp.parse_dump(c.execute("DUMP", "__v")).rdb_version
        c.execute("DEL", "__v")
    return version


def restore(c: RawClient, key: str, payload: bytes) -> Any:
    return c.execute("RESTORE", key, 0, payload, "REPLACE")


# --------------------------------------------------------------------------------------
# The writer, and our v4 layout
# --------------------------------------------------------------------------------------

def test_writer_reproduces_our_dumps(c):
    put(c, "t", np.array([[-1, 0], [1 << 40, 7]], np.int64))
    assert_ok(c.execute("AI.TENSORSET", "s", "STRING", 3, "VALUES", "ab", "z", "cde"))
    assert_ok(c.execute("AI.MODELSTORE", "m", "ONNX", "CPU", "TAG", "v1", "BLOB", om.cnn().blob))
    assert_ok(c.execute("AI.SCRIPTSTORE", "sc", "CPU", "TAG", "123", "ENTRY_POINTS", 2, "bar",
                        "counts", "SOURCE", tm.SCRIPT))
    for key in ("t", "s", "m", "sc"):
        dump = c.execute("DUMP", key)
        p = rp.parse_dump(dump)
        assert p.encver == ENC
        assert rp.dump_payload(p.type_name, p.encver, p.fields, p.rdb_version) == dump, key


def test_v4_tensor_layout(c):
    data = np.arange(6, dtype=np.float32).reshape(2, 3)
    put(c, "t", data)
    p = rp.parse_dump(c.execute("DUMP", "t"))
    assert (p.type_name, p.encver) == ("AI_TENSOR", ENC)
    assert p.fields == [U(2), U(32), U(2), U(2), U(3), data.tobytes()]

    put(c, "i", np.array([[[-3, 4]]], np.int16))
    p = rp.parse_dump(c.execute("DUMP", "i"))
    assert p.fields[:3] == [U(0), U(16), U(3)]
    assert [rp.signed(u) for u in p.fields[3:6]] == [1, 1, 2]
    assert p.fields[6] == np.array([-3, 4], np.int16).tobytes()

    assert_ok(c.execute("AI.TENSORSET", "s", "STRING", 3, "VALUES", "ab", "z", "cde"))
    p = rp.parse_dump(c.execute("DUMP", "s"))
    assert p.fields == [U(7), U(8), U(1), U(3), b"ab\x00z\x00cde\x00", U(0), U(3), U(5)]


def test_v4_model_layout_in_chunks(c):
    blob = om.cnn().blob
    assert len(blob) > 3 * CHUNK
    assert_ok(c.execute("AI.MODELSTORE", "m", "ONNX", "CPU:0", "TAG", "v2", "BATCHSIZE", 8,
                        "MINBATCHSIZE", 2, "MINBATCHTIMEOUT", 5, "BLOB", blob))
    p = rp.parse_dump(c.execute("DUMP", "m"))
    assert (p.type_name, p.encver) == ("AI__MODEL", ENC)
    nchunks = len(blob) // CHUNK + 1
    head = [U(3), cstr("CPU:0"), b"v2", U(8), U(2), U(5), U(1), cstr("input"), U(1),
            cstr("output"), U(len(blob)), U(nchunks)]
    assert p.fields[:len(head)] == head
    chunks = p.fields[len(head):]
    assert len(chunks) == nchunks
    assert all(len(ch) == CHUNK for ch in chunks[:-1])
    assert b"".join(chunks) == blob

    tf = tf_graphs.mul_graph()
    assert_ok(c.execute("AI.MODELSTORE", "tf", "TF", "CPU", "INPUTS", 2, "a", "b", "OUTPUTS", 1,
                        "mul", "BLOB", tf))
    p = rp.parse_dump(c.execute("DUMP", "tf"))
    assert p.fields == [U(0), cstr("CPU"), b"", U(0), U(0), U(0), U(2), cstr("a"), cstr("b"),
                        U(1), cstr("mul"), U(len(tf)), U(1), tf]


def test_v4_script_layout(c):
    assert_ok(c.execute("AI.SCRIPTSTORE", "sc", "CPU", "TAG", "t", "ENTRY_POINTS", 2, "bar",
                        "counts", "SOURCE", tm.SCRIPT))
    p = rp.parse_dump(c.execute("DUMP", "sc"))
    assert (p.type_name, p.encver) == ("AI_SCRIPT", ENC)
    assert p.fields == [cstr("CPU"), b"t", cstr(tm.SCRIPT), U(2), cstr("bar"), cstr("counts")]


# --------------------------------------------------------------------------------------
# Encodings 0-3
# --------------------------------------------------------------------------------------

DTYPE_CODES = {"FLOAT": (2, 32), "DOUBLE": (2, 64), "INT8": (0, 8), "INT16": (0, 16),
               "INT32": (0, 32), "INT64": (0, 64), "UINT8": (1, 8), "UINT16": (1, 16),
               "BOOL": (6, 8)}


def old_tensor(a: np.ndarray, code: int | None = None, bits: int | None = None,
               lanes: int = 1) -> list[rp.Field]:
    """v0-v3: U device type, U device id, U bits, U code, U lanes, U ndims, U shape x n,
    U strides x n, U byte offset, Buf data."""
    tok = next(k for k, v in DTYPES.items() if np.dtype(v) == a.dtype)
    dcode, dbits = DTYPE_CODES[tok]
    strides = [s // a.itemsize for s in a.strides]
    return ([U(KDLCPU), U(0), U(dbits if bits is None else bits), U(dcode if code is None else code),
             U(lanes), U(a.ndim)] + [U(d) for d in a.shape] + [U(s) for s in strides]
            + [U(0), a.tobytes()])


def sample(dtype: str, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    np_dtype = np.dtype(DTYPES[dtype])
    if dtype == "BOOL":
        return rng.integers(0, 2, (2, 3)).astype(bool)
    if np.issubdtype(np_dtype, np.integer):
        info = np.iinfo(np_dtype)
        return rng.integers(info.min, info.max, (2, 3), dtype=np_dtype, endpoint=True)
    return rng.standard_normal((2, 3)).astype(np_dtype)


@pytest.mark.parametrize("encver", [0, 1, 2, 3])
@pytest.mark.parametrize("dtype", list(DTYPE_CODES))
def test_old_tensor_loads(c, rdb_version, encver, dtype):
    a = sample(dtype, seed=encver)
    assert_ok(restore(c, "old", rp.dump_payload("AI_TENSOR", encver, old_tensor(a), rdb_version)))
    put(c, "new", a)
    assert c.execute("AI.TENSORGET", "old", "META", "BLOB") == \
        c.execute("AI.TENSORGET", "new", "META", "BLOB")
    # Saved again, it is the v4 layout.
    assert c.execute("DUMP", "old") == c.execute("DUMP", "new")


def test_old_empty_and_1d_tensors_load(c, rdb_version):
    for a in (np.zeros((0, 3), np.float32), np.ones((4,), np.int32)):
        assert_ok(restore(c, "old", rp.dump_payload("AI_TENSOR", 1, old_tensor(a), rdb_version)))
        np.testing.assert_array_equal(get(c, "old"), a)
        assert get(c, "old").shape == a.shape


def old_model(encver: int, backend: str, blob: bytes, tag: bytes = b"", batch: int = 0,
              minbatch: int = 0, minbatchtimeout: int = 0, inputs: tuple[str, ...] = (),
              outputs: tuple[str, ...] = (), device: str = "CPU") -> list[rp.Field]:
    fields: list[rp.Field] = [U(BACKEND_CODE[backend]), cstr(device),
                              cstr(tag) if encver == 0 else tag, U(batch), U(minbatch)]
    if encver >= 2:
        fields.append(U(minbatchtimeout))
    fields += [U(len(inputs)), *[cstr(n) for n in inputs], U(len(outputs)),
               *[cstr(n) for n in outputs]]
    if encver == 0:
        return fields + [blob]
    chunks = [blob[i:i + CHUNK] for i in range(0, len(blob), CHUNK)] or [b""]
    return fields + [U(len(blob)), U(len(chunks)), *chunks]


def run_tf(c: RawClient, key: str) -> np.ndarray:
    a = np.array([[1.5, 2], [3, -4]], np.float32)
    put(c, "a", a)
    put(c, "b", a + 1)
    assert_ok(c.execute("AI.MODELEXECUTE", key, "INPUTS", 2, "a", "b", "OUTPUTS", 1, "o"))
    return get(c, "o")


def run_one(c: RawClient, key: str, sample_inputs: tuple[np.ndarray, ...]) -> list[np.ndarray]:
    names = [f"in{i}" for i in range(len(sample_inputs))]
    for n, a in zip(names, sample_inputs):
        put(c, n, a)
    assert_ok(c.execute("AI.MODELEXECUTE", key, "INPUTS", len(names), *names, "OUTPUTS", 1, "o"))
    return [get(c, "o")]


@pytest.mark.parametrize("backend", ["ONNX", "TF", "TORCH"])
@pytest.mark.parametrize("encver", [0, 1, 2, 3])
def test_old_model_loads_and_runs(c, rdb_version, encver, backend):
    if backend == "TF":
        blob, names = tf_graphs.mul_graph(), (("a", "b"), ("mul",))
    elif backend == "TORCH":
        built = tm.cnn() if encver % 2 else tm.add()
        blob, names = built.blob, ((), ())
    else:
        built = om.cnn() if encver % 2 else om.add()
        # Non-TF backends ignore saved names (docs/persistence.md): these are not the model's.
        blob, names = built.blob, (("not_it",), ("nor_this",))
    # Without a MINBATCHTIMEOUT (v0, v1), a MINBATCHSIZE would hold the lone run forever.
    batch = 4
    minbatch, mbt = (2, 7) if encver >= 2 else (0, 0)
    tag = b"legacy v%d" % encver
    payload = rp.dump_payload("AI__MODEL", encver,
                              old_model(encver, backend, blob, tag, batch, minbatch, mbt,
                                        *names), rdb_version)
    assert_ok(restore(c, "old", payload))

    store = ["AI.MODELSTORE", "new", backend, "CPU", "TAG", tag, "BATCHSIZE", batch,
             "MINBATCHSIZE", minbatch]
    if mbt:
        store += ["MINBATCHTIMEOUT", mbt]
    if backend == "TF":
        store += ["INPUTS", 2, "a", "b", "OUTPUTS", 1, "mul"]
    assert_ok(c.execute(*store, "BLOB", blob))
    assert c.execute("AI.MODELGET", "old", "META") == c.execute("AI.MODELGET", "new", "META")
    assert c.execute("AI.MODELGET", "old", "BLOB") == c.execute("AI.MODELGET", "new", "BLOB")

    if backend == "TF":
        np.testing.assert_array_equal(run_tf(c, "old"), run_tf(c, "new"))
    else:
        got = run_one(c, "old", built.sample)
        want = built.run(*built.sample)
        np.testing.assert_allclose(got[0], want[0], rtol=1e-5, atol=1e-6)
    # Fresh statistics under its key, as for a model stored by command.
    info = c.execute("AI.INFO", "old")
    assert info[1] == b"old" and info[3] == b"MODEL"


@pytest.mark.parametrize("encver", [0, 1, 2])
def test_old_script_without_entry_points_loads_as_scriptset(c, rdb_version, encver):
    tag = b"s%d" % encver
    fields = [cstr("CPU"), cstr(tag) if encver == 0 else tag, cstr(tm.SCRIPT)]
    assert_ok(restore(c, "old", rp.dump_payload("AI_SCRIPT", encver, fields, rdb_version)))
    assert_ok(c.execute("AI.SCRIPTSET", "new", "CPU", "TAG", tag, "SOURCE", tm.SCRIPT))
    assert c.execute("AI.SCRIPTGET", "old") == c.execute("AI.SCRIPTGET", "new")
    a = np.array([1, 2, 3], np.float32)
    put(c, "a", a)
    put(c, "b", a * 10)
    assert_ok(c.execute("AI.SCRIPTRUN", "old", "legacy_add", "INPUTS", "a", "b", "OUTPUTS", "o"))
    np.testing.assert_array_equal(get(c, "o"), a * 11)


def test_v3_script_with_entry_points_loads(c, rdb_version):
    fields = [cstr("CPU"), b"ep", cstr(tm.SCRIPT), U(2), cstr("bar"), cstr("counts")]
    assert_ok(restore(c, "old", rp.dump_payload("AI_SCRIPT", 3, fields, rdb_version)))
    assert_ok(c.execute("AI.SCRIPTSTORE", "new", "CPU", "TAG", "ep", "ENTRY_POINTS", 2, "bar",
                        "counts", "SOURCE", tm.SCRIPT))
    assert c.execute("AI.SCRIPTGET", "old") == c.execute("AI.SCRIPTGET", "new")
    a = np.array([[1, 2]], np.float32)
    put(c, "a", a)
    put(c, "b", a)
    assert_ok(c.execute("AI.SCRIPTEXECUTE", "old", "bar", "INPUTS", 2, "a", "b", "OUTPUTS", 1, "o"))
    np.testing.assert_array_equal(get(c, "o"), a * 2)
    # The same bytes as the v4 DUMP of the script stored by command, once saved again.
    assert rp.parse_dump(c.execute("DUMP", "old")).fields == \
        rp.parse_dump(c.execute("DUMP", "new")).fields


def test_old_encodings_survive_a_reload(c, rdb_version):
    """Objects loaded from old encodings are saved as v4 and load again."""
    a = sample("INT32", seed=5)
    assert_ok(restore(c, "t", rp.dump_payload("AI_TENSOR", 0, old_tensor(a), rdb_version)))
    built = tm.add()
    assert_ok(restore(c, "m", rp.dump_payload("AI__MODEL", 0, old_model(0, "TORCH", built.blob),
                                              rdb_version)))
    assert_ok(restore(c, "s", rp.dump_payload("AI_SCRIPT", 1, [cstr("CPU"), b"", cstr(tm.SCRIPT)],
                                              rdb_version)))
    assert_ok(c.execute("DEBUG", "RELOAD"))
    np.testing.assert_array_equal(get(c, "t"), a)
    assert c.execute("AI.MODELGET", "m", "BLOB") == built.blob
    np.testing.assert_allclose(run_one(c, "m", built.sample)[0], built.run(*built.sample)[0])
    assert c.execute("AI.SCRIPTGET", "s", "SOURCE") == tm.SCRIPT.encode()
    for key in ("t", "m", "s"):
        assert rp.parse_dump(c.execute("DUMP", key)).encver == ENC


# --------------------------------------------------------------------------------------
# Refusals
# --------------------------------------------------------------------------------------

@pytest.mark.parametrize("type_name", ["AI_TENSOR", "AI__MODEL", "AI_SCRIPT"])
def test_newer_encoding_is_refused_with_a_log_line(c, srv, rdb_version, type_name):
    fields = {"AI_TENSOR": [U(2), U(32), U(1), U(1), b"\x00" * 4],
              "AI__MODEL": old_model(3, "TORCH", tm.add().blob),
              "AI_SCRIPT": [cstr("CPU"), b"", cstr(tm.SCRIPT), U(0)]}[type_name]
    mark = LogMark(srv.logfile)
    assert_error(restore(c, "future", rp.dump_payload(type_name, NEWEST_READ + 1, fields,
                                                      rdb_version)), BAD_DATA)
    mark.wait_for_line("not forward compatible", type_name, "future",
                       f"version {NEWEST_READ + 1}", f"reads versions up to {NEWEST_READ}")
    assert c.execute("EXISTS", "future") == 0
    assert c.execute("PING") == "PONG"


def f32_tensor_v4(ndims_dims: list[int], data: bytes, code: int = 2, bits: int = 32) -> list[rp.Field]:
    return [U(code), U(bits), U(len(ndims_dims)), *[U(d & 0xFFFFFFFFFFFFFFFF) for d in ndims_dims], data]


MALFORMED = {
    "v4 data shorter than the shape": ("AI_TENSOR", 4, f32_tensor_v4([2, 2], b"\x00" * 12)),
    "v4 data longer than the shape": ("AI_TENSOR", 4, f32_tensor_v4([2], b"\x00" * 12)),
    "v4 negative dim": ("AI_TENSOR", 4, f32_tensor_v4([-1, 2], b"")),
    "v4 float of 24 bits": ("AI_TENSOR", 4, f32_tensor_v4([2], b"\x00" * 6, 2, 24)),
    "v4 dtype code 9": ("AI_TENSOR", 4, f32_tensor_v4([2], b"\x00" * 8, 9, 32)),
    "v4 BOOL of 16 bits": ("AI_TENSOR", 4, f32_tensor_v4([2], b"\x00" * 4, 6, 16)),
    "v4 STRING element not terminated": ("AI_TENSOR", 4,
                                         [U(7), U(8), U(1), U(2), b"ab\x00cd", U(0), U(3)]),
    "v4 STRING offsets out of order": ("AI_TENSOR", 4,
                                       [U(7), U(8), U(1), U(2), b"ab\x00c\x00", U(3), U(0)]),
    "v4 STRING offset past the data": ("AI_TENSOR", 4,
                                       [U(7), U(8), U(1), U(2), b"ab\x00c\x00", U(0), U(9)]),
    "v4 tensor missing its data": ("AI_TENSOR", 4, [U(2), U(32), U(1), U(2)]),
    "v0 STRING tensor": ("AI_TENSOR", 0, [U(KDLCPU), U(0), U(8), U(7), U(1), U(1), U(1), U(1),
                                          U(0), b"a\x00"]),
    "v0 tensor with 4 lanes": ("AI_TENSOR", 0,
                               old_tensor(np.zeros(2, np.float32), lanes=4)),
    "model of backend 9": ("AI__MODEL", 4, [U(9), cstr("CPU"), b"", U(0), U(0), U(0), U(0), U(0),
                                            U(1), U(1), b"x"]),
    "model chunks longer than the blob": ("AI__MODEL", 4,
                                          [U(2), cstr("CPU"), b"", U(0), U(0), U(0), U(0), U(0),
                                           U(1), U(2), b"x", b"yz"]),
    "model on device XPU": ("AI__MODEL", 1, None),
    "model blob the backend refuses": ("AI__MODEL", 2, None),
    "script that does not compile": ("AI_SCRIPT", 4, [cstr("CPU"), b"", cstr("def f(:"), U(0)]),
    "script entry point missing": ("AI_SCRIPT", 3, [cstr("CPU"), b"", cstr(tm.SCRIPT), U(2),
                                                     cstr("bar")]),
}


@pytest.mark.parametrize("name", list(MALFORMED))
def test_malformed_payload_is_refused(c, srv, rdb_version, name):
    type_name, encver, fields = MALFORMED[name]
    if name == "model on device XPU":
        fields = old_model(1, "TORCH", tm.add().blob, device="XPU")
    elif name == "model blob the backend refuses":
        fields = old_model(2, "ONNX", b"not an onnx model")
    mark = LogMark(srv.logfile)
    assert_error(restore(c, "bad", rp.dump_payload(type_name, encver, fields, rdb_version)), BAD_DATA)
    mark.wait_for_line("while reading a", "bad", f"encoding version {encver}")
    assert c.execute("EXISTS", "bad") == 0
    assert c.execute("PING") == "PONG"


def test_unloadable_backend_fails_the_load_naming_key_backend_and_reason(
        module_path, srv, rdb_version):
    with RawClient(srv.port) as c:
        assert_ok(c.execute("FLUSHALL", "SYNC"))
        assert_ok(c.execute("AI.MODELSTORE", "pt", "TORCH", "CPU", "BLOB", tm.add().blob))
        assert_ok(c.execute("AI.SCRIPTSTORE", "sc", "CPU", "ENTRY_POINTS", 1, "bar", "SOURCE",
                            tm.SCRIPT))
        model_dump, script_dump = c.execute("DUMP", "pt"), c.execute("DUMP", "sc")
    empty = tempfile.mkdtemp(prefix="redisai-nobackends-")
    bare = RedisServer(module_path, ["BACKENDSPATH", empty])
    try:
        with RawClient(bare.port) as c:
            for key, dump, type_name in (("mymodel", model_dump, "AI__MODEL"),
                                         ("myscript", script_dump, "AI_SCRIPT")):
                mark = LogMark(bare.logfile)
                assert_error(c.execute("RESTORE", key, 0, dump), BAD_DATA)
                line = mark.wait_for_line("the TORCH backend", type_name, key)
                assert empty in line, f"the file tried is not named: {line}"
                assert "No such file" in line or "cannot open" in line, line
                assert c.execute("EXISTS", key) == 0
            assert c.execute("PING") == "PONG"
    finally:
        bare.stop()


def test_unnamed_fixed_width_dtypes_load(c, rdb_version):
    """float16 (what Torch outputs) and bfloat16 tensors live in the keyspace as BLOB-only
    tensors (docs/commands.md, "Data types"), so their RDB values load."""
    for code, bits in ((2, 16), (4, 16), (1, 32), (1, 64)):
        data = bytes(range(2 * bits // 8))
        assert_ok(restore(c, "u", rp.dump_payload("AI_TENSOR", 4, f32_tensor_v4([2], data, code,
                                                                                  bits), rdb_version)))
        assert c.execute("AI.TENSORGET", "u", "BLOB") == data
        assert str(c.execute("AI.TENSORGET", "u", "META")) == "ERR unsupported dtype"


def test_payloads_with_bad_crc_are_refused_by_redis(c, rdb_version):
    good = rp.dump_payload("AI_TENSOR", 0, old_tensor(np.ones(2, np.float32)), rdb_version)
    bad = good[:-1] + bytes([good[-1] ^ 1])
    reply = restore(c, "x", bad)
    assert isinstance(reply, RespError) and "checksum" in str(reply), reply


def test_load_lazily_loads_the_backend_from_backendspath(module_path, srv, rdb_version):
    """A server started with no backend loaded rebuilds restored models and scripts by
    loading the default backend files from BACKENDSPATH (the install tree's)."""
    built = om.add()
    with RawClient(srv.port) as c:
        assert_ok(c.execute("FLUSHALL", "SYNC"))
    payloads = {
        "ox": rp.dump_payload("AI__MODEL", 1, old_model(1, "ONNX", built.blob), rdb_version),
        "sc": rp.dump_payload("AI_SCRIPT", 3, [cstr("CPU"), b"", cstr(tm.SCRIPT), U(1),
                                               cstr("bar")], rdb_version),
    }
    bare = RedisServer(module_path, [])
    try:
        with RawClient(bare.port) as c:
            assert b"ai_onnxruntime_version" not in c.execute("INFO", "MODULES")
            for key, payload in payloads.items():
                assert_ok(c.execute("RESTORE", key, 0, payload))
            info = c.execute("INFO", "MODULES")
            assert b"ai_onnxruntime_version" in info and b"ai_Torch_version" in info, info
            got = run_one(c, "ox", built.sample)
            np.testing.assert_allclose(got[0], built.run(*built.sample)[0], rtol=1e-6)
            a = np.array([1, 2], np.float32)
            put(c, "a", a)
            assert_ok(c.execute("AI.SCRIPTEXECUTE", "sc", "bar", "INPUTS", 2, "a", "a",
                                "OUTPUTS", 1, "o"))
            np.testing.assert_array_equal(get(c, "o"), a * 2)
    finally:
        bare.stop()
