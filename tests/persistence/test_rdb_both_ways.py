"""RDB both ways (docs/persistence.md, "Files for RedisAI 1.2"): every value this module writes,
in a DUMP payload and in an RDB file written by SAVE and DEBUG RELOAD, is encoding 4 byte for
byte as RedisAI 1.2 writes it; a model stored with `BACKEND <name>` differs only in its device
field, which 1.2 reads as a C string, so 1.2 sees exactly the model without the name while
this module loads the name back. Values of encoding 5 (what earlier builds wrote for every
type) still RESTORE and load from a file.

There is no RedisAI 1.2 server here: 1.2's side is its documented layout. The expected fields
come from tests/support/rdb_layouts.py, built from what the client sent; its `read_as_12` reads
fields as 1.2's loader does and is shown to refuse the layout 1.2 could not load.
"""
from __future__ import annotations

import dataclasses
import pathlib
import shutil
import tempfile
from typing import Any

import numpy as np
import pytest

import onnx_models as om
import rdb_files as rf
import rdb_layouts as rl
import rdb_payloads as rp
import tf_graphs
import torch_models as tm
from helpers import LogMark, assert_error, assert_ok
from model_io import get, put
from persist_servers import backend_name
from rdb_payloads import U, cstr
from redis_server import Connect, RedisServer, StartServer, backend_args
from resp import RawClient

CHUNK = 1000  # MODEL_CHUNK_SIZE: every model but the smallest is saved in several chunks
BAD_DATA = "ERR Bad data format"


# --------------------------------------------------------------------------------------
# What is stored, and the fields RedisAI 1.2 writes for it
# --------------------------------------------------------------------------------------

def _arr(values: Any, dtype: Any) -> np.ndarray:
    return np.array(values, dtype=dtype)


# key -> (dtype, dims, data), stored with AI.TENSORSET key dtype dims... BLOB data
TENSORS: dict[str, tuple[str, tuple[int, ...], bytes]] = {
    "t:float": ("FLOAT", (2, 3), _arr([[1.5, -0.0, np.inf], [-1, 2, 3]], np.float32).tobytes()),
    "t:double": ("DOUBLE", (3,), _arr([np.pi, -1e300, 5e-324], np.float64).tobytes()),
    "t:int8": ("INT8", (4,), _arr([-128, -1, 0, 127], np.int8).tobytes()),
    "t:int16": ("INT16", (2, 1), _arr([[-32768], [32767]], np.int16).tobytes()),
    "t:int32": ("INT32", (1, 1, 2), _arr([[[-(1 << 31), 7]]], np.int32).tobytes()),
    "t:int64": ("INT64", (2,), _arr([-(1 << 63), (1 << 63) - 1], np.int64).tobytes()),
    "t:uint8": ("UINT8", (3,), _arr([0, 128, 255], np.uint8).tobytes()),
    "t:uint16": ("UINT16", (2,), _arr([1, 65535], np.uint16).tobytes()),
    "t:bool": ("BOOL", (2, 2), _arr([[1, 0], [0, 1]], np.uint8).tobytes()),
    "t:string": ("STRING", (3,), b"hello\0w\xc3\xb6rld\0x y\0"),
    "t:scalar": ("FLOAT", (), _arr(3.5, np.float32).tobytes()),
}


@dataclasses.dataclass(frozen=True)
class Stored:
    """A model as stored by command (`pieces`: the BLOB arguments) and its expected layout."""
    model: rl.Model
    pieces: tuple[bytes, ...]

    def command(self, key: str) -> list[Any]:
        m = self.model
        cmd: list[Any] = ["AI.MODELSTORE", key, m.backend, m.device]
        if m.name is not None:
            cmd += ["BACKEND", m.name]
        cmd += ["TAG", m.tag]
        if m.batch:
            cmd += ["BATCHSIZE", m.batch]
        if m.minbatch:
            cmd += ["MINBATCHSIZE", m.minbatch, "MINBATCHTIMEOUT", m.timeout]
        if m.backend == "TF":
            cmd += ["INPUTS", len(m.inputs), *m.inputs, "OUTPUTS", len(m.outputs), *m.outputs]
        return [*cmd, "BLOB", *self.pieces]


def _thirds(blob: bytes) -> tuple[bytes, ...]:
    a, b = len(blob) // 3, 2 * len(blob) // 3
    return blob[:a], blob[a:b], blob[b:]


@pytest.fixture(scope="module")
def names(install_dir: pathlib.Path) -> dict[str, str]:
    return {kind: backend_name(install_dir, fw)
            for kind, fw in (("ONNX", "onnxruntime"), ("TORCH", "torch"), ("TF", "tensorflow"))}


@pytest.fixture(scope="module")
def models(names: dict[str, str]) -> dict[str, Stored]:
    tf = tf_graphs.mul_graph()
    add, linear, ocnn, oadd = tm.add(), tm.linear(), om.cnn(), om.add()
    torch_out = ("",) * (add.outputs or 0)
    out: dict[str, rl.Model] = {
        "m:tf": rl.Model("TF", "CPU", tf, b"tf v1", inputs=("a", "b"), outputs=("mul",)),
        "m:tf_batch": rl.Model("TF", "CPU", tf, b"", 4, 2, 10, ("a", "b"), ("mul",)),
        "m:torch": rl.Model("TORCH", "CPU", add.blob, inputs=add.inputs, outputs=torch_out),
        "m:torch_opts": rl.Model("TORCH", "cpu", linear.blob, b"torch", 4, 2, 20,
                                 linear.inputs, ("",) * (linear.outputs or 0)),
        "m:onnx": rl.Model("ONNX", "CPU", ocnn.blob, b"chunked\nbinary\0tag",
                           inputs=ocnn.inputs, outputs=ocnn.outputs),
        "m:onnx_named": rl.Model("ONNX", "CPU", oadd.blob, b"n", inputs=oadd.inputs,
                                 outputs=oadd.outputs, name=names["ONNX"]),
        "m:torch_named": rl.Model("TORCH", "CPU:0", add.blob, b"", 2, inputs=add.inputs,
                                  outputs=torch_out, name=names["TORCH"]),
        "m:tf_named": rl.Model("TF", "CPU", tf, b"t", 2, 1, 5, ("a", "b"), ("mul",),
                               name=names["TF"]),
    }
    return {k: Stored(m, _thirds(m.blob) if k == "m:onnx" else (m.blob,))
            for k, m in out.items()}


LEGACY_SCRIPT = "def add(a, b):\n    return a + b\n"
SCRIPTS: dict[str, tuple[str, str, tuple[str, ...], str]] = {
    "s:eps": ("CPU", "sc", tm.ENTRY_POINTS, tm.SCRIPT),
    "s:set": ("CPU", "", (), LEGACY_SCRIPT),  # AI.SCRIPTSET: no entry points
}


def expected(models: dict[str, Stored]) -> dict[str, tuple[str, list[rp.Field]]]:
    """key -> (type name, the v4 fields 1.2 writes; a named model: with its name)."""
    out: dict[str, tuple[str, list[rp.Field]]] = {}
    for key, (dtype, dims, data) in TENSORS.items():
        out[key] = ("AI_TENSOR", rl.tensor_v4(dtype, dims, data))
    for key, s in models.items():
        out[key] = ("AI__MODEL", rl.model_v4(s.model, CHUNK))
    for key, (device, tag, eps, source) in SCRIPTS.items():
        out[key] = ("AI_SCRIPT", rl.script_v4(device, tag, source, eps))
    return out


def store_all(c: RawClient, models: dict[str, Stored]) -> None:
    for key, (dtype, dims, data) in TENSORS.items():
        assert_ok(c.execute("AI.TENSORSET", key, dtype, *dims, "BLOB", data))
    for key, s in models.items():
        assert_ok(c.execute(*s.command(key)))
    device, tag, eps, source = SCRIPTS["s:eps"]
    assert_ok(c.execute("AI.SCRIPTSTORE", "s:eps", device, "TAG", tag, "ENTRY_POINTS", len(eps),
                        *eps, "SOURCE", source))
    assert_ok(c.execute("AI.SCRIPTSET", "s:set", "CPU", "SOURCE", SCRIPTS["s:set"][3]))


def snapshot(c: RawClient, key: str) -> Any:
    kind = c.execute("TYPE", key)
    if kind == "AI_TENSOR":
        return kind, c.execute("AI.TENSORGET", key, "META", "BLOB")
    if kind == "AI__MODEL":
        return kind, c.execute("AI.MODELGET", key, "META", "BLOB")
    if kind == "AI_SCRIPT":
        return kind, c.execute("AI.SCRIPTGET", key)
    raise AssertionError(f"{key}: type {kind!r}")


def meta(c: RawClient, key: str) -> dict[str, Any]:
    reply = c.execute("AI.MODELGET", key, "META")
    return {k.decode(): v for k, v in zip(reply[::2], reply[1::2])}


def run_models(c: RawClient, keys: dict[str, str]) -> None:
    """Runs each model (key -> the key it was stored as) and checks the framework's result."""
    a = np.array([[1.5, 2], [3, -4]], np.float32)
    put(c, "in:a", a)
    put(c, "in:b", a + 1)
    for key, orig in keys.items():
        if orig.startswith("m:tf"):
            assert_ok(c.execute("AI.MODELEXECUTE", key, "INPUTS", 2, "in:a", "in:b",
                                "OUTPUTS", 1, "out"))
            np.testing.assert_array_equal(get(c, "out"), a * (a + 1))
            continue
        built = {"m:torch": tm.add(), "m:torch_named": tm.add(), "m:torch_opts": tm.linear(),
                 "m:onnx": om.cnn(), "m:onnx_named": om.add()}[orig]
        ins = [f"in:{i}" for i in range(len(built.sample))]
        for n, x in zip(ins, built.sample):
            put(c, n, x)
        assert_ok(c.execute("AI.MODELEXECUTE", key, "INPUTS", len(ins), *ins, "OUTPUTS", 1,
                            "out"))
        np.testing.assert_allclose(get(c, "out"), built.run(*built.sample)[0], rtol=1e-5,
                                   atol=1e-6)


def run_script(c: RawClient, key: str) -> None:
    a = np.array([[1, 2]], np.float32)
    put(c, "in:a", a)
    assert_ok(c.execute("AI.SCRIPTEXECUTE", key, "bar", "INPUTS", 2, "in:a", "in:a",
                        "OUTPUTS", 1, "out"))
    np.testing.assert_array_equal(get(c, "out"), a * 2)


# --------------------------------------------------------------------------------------
# Servers
# --------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def module_args(all_backend_paths: dict[str, pathlib.Path]) -> list[str]:
    return [*backend_args(all_backend_paths), "MODEL_CHUNK_SIZE", str(CHUNK)]


@pytest.fixture(scope="module")
def srv(start_server: StartServer, module_args: list[str]) -> RedisServer:
    # Uncompressed strings: the payloads are compared byte for byte with rdb_payloads' writer.
    return start_server(module_args, extra=["--rdbcompression", "no"])


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


# --------------------------------------------------------------------------------------
# What is written: DUMP payloads and RDB files
# --------------------------------------------------------------------------------------

def test_rdb_version_in_info_is_4(c):
    info = c.execute("INFO", "ai_versions").decode()
    assert "ai_rdb_version:4\r\n" in info, info


def test_dump_payloads_are_1_2s_bytes(c, models, rdb_version):
    store_all(c, models)
    for key, (type_name, fields) in expected(models).items():
        dump = c.execute("DUMP", key)
        assert rp.parse_dump(dump).fields == fields, key
        assert dump == rp.dump_payload(type_name, 4, fields, rdb_version), key
        rl.read_as_12(type_name, 4, fields)  # every value reads with 1.2's layout
    # Several chunks where the blob is longer than MODEL_CHUNK_SIZE.
    assert rp.parse_dump(c.execute("DUMP", "m:onnx")).fields[11] == \
        U(len(om.cnn().blob) // CHUNK + 1)


def _rdb_values(srv: RedisServer) -> dict[bytes, rf.ModuleValue]:
    f = rf.read_rdb(pathlib.Path(srv.dir) / "dump.rdb")
    assert not f.module_aux, "module aux data: RedisAI 1.2 has no aux_load for it"
    return {k: v for (_, k), v in f.keys.items() if isinstance(v, rf.ModuleValue)}


def test_save_and_debug_reload_write_1_2s_bytes(c, srv, models):
    store_all(c, models)
    want = {key.encode(): rf.ModuleValue(t, 4, fields)
            for key, (t, fields) in expected(models).items()}
    before = {k: snapshot(c, k) for k in expected(models)}
    assert_ok(c.execute("SAVE"))
    assert _rdb_values(srv) == want
    for v in want.values():
        rl.read_as_12(v.type_name, v.encver, v.fields)
    # DEBUG RELOAD saves the file and loads it back: the same bytes, the same objects, twice.
    for _ in range(2):
        assert_ok(c.execute("DEBUG", "RELOAD"))
        assert _rdb_values(srv) == want
        assert {k: snapshot(c, k) for k in before} == before
    run_models(c, {k: k for k in models})
    run_script(c, "s:eps")


def test_chunk_count_follows_1_2s_rule_at_an_exact_multiple(c, rdb_version):
    """A blob of exactly k chunks is saved as k + 1, the last one empty (1.2's rule)."""
    built = om.add()
    assert len(built.blob) % 2 == 0
    half = len(built.blob) // 2
    model = rl.Model("ONNX", "CPU", built.blob, inputs=built.inputs, outputs=built.outputs)
    assert_ok(c.execute("AI.MODELSTORE", "m", "ONNX", "CPU", "BLOB", built.blob))
    assert_ok(c.execute("AI.CONFIG", "MODEL_CHUNK_SIZE", half))
    try:
        dump = c.execute("DUMP", "m")
    finally:
        assert_ok(c.execute("AI.CONFIG", "MODEL_CHUNK_SIZE", CHUNK))
    fields = rl.model_v4(model, half)
    assert fields[-3:] == [built.blob[:half], built.blob[half:], b""]
    assert dump == rp.dump_payload("AI__MODEL", 4, fields, rdb_version)
    assert_ok(c.execute("RESTORE", "copy", 0, dump))
    assert snapshot(c, "copy") == snapshot(c, "m")


# --------------------------------------------------------------------------------------
# A model with a backend name, as RedisAI 1.2 reads it
# --------------------------------------------------------------------------------------

def test_named_model_is_its_unnamed_twin_to_1_2(c, models, names, rdb_version):
    """1.2 reads the name's device field as the device alone: the model it sees, and the
    fields it saves back, are those of the same model stored without a name."""
    store_all(c, models)
    for key in ("m:onnx_named", "m:torch_named", "m:tf_named"):
        m = models[key].model
        twin = dataclasses.replace(m, name=None)
        fields = rp.parse_dump(c.execute("DUMP", key)).fields
        assert fields[1] == cstr(m.device) + b"backend=" + cstr(m.name)
        assert fields == rl.model_v4(m, CHUNK)
        assert [f for i, f in enumerate(fields) if i != 1] == \
            [f for i, f in enumerate(rl.model_v4(twin, CHUNK)) if i != 1]
        seen = rl.read_as_12("AI__MODEL", 4, fields)
        assert seen == rl.read_as_12("AI__MODEL", 4, rl.model_v4(twin, CHUNK))
        assert seen.device == m.device.encode()
        assert rl.saved_by_12(seen, CHUNK) == rl.model_v4(twin, CHUNK)
        # What 1.2 would save back loads here as the model without a name.
        assert_ok(c.execute("RESTORE", "back", 0, rp.dump_payload(
            "AI__MODEL", 4, rl.saved_by_12(seen, CHUNK), rdb_version), "REPLACE"))
        assert "backend_name" not in meta(c, "back")
        assert meta(c, key)["backend_name"] == m.name.encode()
        run_models(c, {"back": key, key: key})


def test_the_1_2_reader_refuses_what_1_2_could_not_load(models):
    """The check above can fail: the layout earlier builds wrote (encoding 5, and the name as
    a field of its own) is what 1.2 could not load, and the reader says so."""
    m = models["m:onnx_named"].model
    with pytest.raises(rl.NotReadable, match="version 5"):
        rl.read_as_12("AI__MODEL", 5, rl.model_v5(m, CHUNK))
    with pytest.raises(rl.NotReadable):
        rl.read_as_12("AI__MODEL", 4, rl.model_v5(m, CHUNK))
    with pytest.raises(rl.NotReadable, match="left over"):
        rl.read_as_12("AI_SCRIPT", 4, [*rl.script_v4("CPU", "", "x", ()), U(0)])


# --------------------------------------------------------------------------------------
# Encoding 5, as earlier builds wrote it
# --------------------------------------------------------------------------------------

def v5_values(models: dict[str, Stored]) -> dict[str, tuple[str, list[rp.Field]]]:
    """Every value as earlier builds wrote it: encoding 5, models with the name field."""
    out = expected(models)
    for key, s in models.items():
        out[key] = ("AI__MODEL", rl.model_v5(s.model, CHUNK))
    return out


def test_v5_payloads_restore(c, models, rdb_version):
    store_all(c, models)
    for key, (type_name, fields) in v5_values(models).items():
        assert_ok(c.execute("RESTORE", f"v5{key}", 0,
                            rp.dump_payload(type_name, 5, fields, rdb_version)))
        assert snapshot(c, f"v5{key}") == snapshot(c, key), key
        # Saved again, it is 1.2's encoding 4, the name in the device field.
        assert c.execute("DUMP", f"v5{key}") == c.execute("DUMP", key), key
    assert meta(c, "v5m:onnx_named")["backend_name"] == models["m:onnx_named"].model.name.encode()
    run_models(c, {f"v5{k}": k for k in models})
    run_script(c, "v5s:eps")


def test_v5_rdb_file_loads(c, srv, models, module_path, module_args, rdb_version):
    """An RDB file with every type at encoding 5 loads at startup, and is saved as 4."""
    store_all(c, models)
    before = {k: snapshot(c, k) for k in expected(models)}
    keys: dict[tuple[int, bytes], rf.Value] = {
        (0, k.encode()): rf.ModuleValue(t, 5, fields)
        for k, (t, fields) in v5_values(models).items()}
    keys[(0, b"plain")] = b"a string key"
    # The magic of the server's own files: REDIS, or VALKEY on Valkey 9 (RDB version 80).
    assert_ok(c.execute("SAVE"))
    magic, saved_version = rf.file_header(pathlib.Path(srv.dir) / "dump.rdb")
    assert saved_version == rdb_version
    data_dir = tempfile.mkdtemp(prefix="redisai-v5-")
    (pathlib.Path(data_dir) / "dump.rdb").write_bytes(rf.write_rdb(rdb_version, keys, magic))
    second = RedisServer(module_path, module_args,
                         extra=["--dir", data_dir, "--rdbcompression", "no"])
    try:
        with RawClient(second.port) as c2:
            assert {k: snapshot(c2, k) for k in before} == before
            assert c2.execute("GET", "plain") == b"a string key"
            run_models(c2, {k: k for k in models})
            run_script(c2, "s:eps")
            assert_ok(c2.execute("SAVE"))
        saved = rf.read_rdb(pathlib.Path(data_dir) / "dump.rdb").keys
        for k, (t, fields) in expected(models).items():
            assert saved[(0, k.encode())] == rf.ModuleValue(t, 4, fields), k
    finally:
        second.stop()
        shutil.rmtree(data_dir, ignore_errors=True)


# --------------------------------------------------------------------------------------
# The device field: what this module tells apart, and refuses
# --------------------------------------------------------------------------------------

def _onnx_add_v4(device_field: bytes) -> list[rp.Field]:
    built = om.add()
    fields = rl.model_v4(rl.Model("ONNX", "CPU", built.blob, inputs=built.inputs,
                                  outputs=built.outputs), CHUNK)
    fields[1] = device_field
    return fields


def test_device_field_with_a_name_loads_named(c, names, rdb_version):
    """The name's record without the field's last NUL reads the same (as a plain device
    without its NUL does)."""
    name = names["ONNX"].encode()
    for key, field in (("a", b"CPU\0backend=" + name + b"\0"), ("b", b"CPU\0backend=" + name),
                       ("plain", b"CPU")):
        assert_ok(c.execute("RESTORE", key, 0,
                            rp.dump_payload("AI__MODEL", 4, _onnx_add_v4(field), rdb_version)))
        assert meta(c, key).get("backend_name") == (None if key == "plain" else name)
        assert meta(c, key)["device"] == b"CPU"
    run_models(c, {"a": "m:onnx_named", "plain": "m:onnx_named"})


BAD_DEVICE_FIELDS = {
    "empty name": b"CPU\0backend=\0",
    "unknown record": b"CPU\0tag=x\0",
    "two names": b"CPU\0backend=a\0backend=b\0",
    "a NUL after the name": b"CPU\0backend=a\0\0",
    "nothing after the NUL": b"CPU\0\0",
}


@pytest.mark.parametrize("case", list(BAD_DEVICE_FIELDS))
def test_device_field_holding_anything_else_is_refused(c, srv, rdb_version, case):
    mark = LogMark(srv.logfile)
    payload = rp.dump_payload("AI__MODEL", 4, _onnx_add_v4(BAD_DEVICE_FIELDS[case]), rdb_version)
    assert_error(c.execute("RESTORE", "bad", 0, payload), BAD_DATA)
    mark.wait_for_line("Failed loading AI__MODEL bad: its device field holds more than a device")
    mark.wait_for_line("while reading a model", "bad", "encoding version 4")
    assert c.execute("EXISTS", "bad") == 0


def test_v5_value_with_a_name_in_both_places_is_refused(c, names, rdb_version):
    built = om.add()
    m = rl.Model("ONNX", "CPU", built.blob, inputs=built.inputs, outputs=built.outputs,
                 name=names["ONNX"])
    fields = rl.model_v5(m, CHUNK)
    assert_ok(c.execute("RESTORE", "ok", 0, rp.dump_payload("AI__MODEL", 5, fields, rdb_version)))
    fields[1] = rl.device_field("CPU", names["ONNX"])
    assert_error(c.execute("RESTORE", "bad", 0,
                           rp.dump_payload("AI__MODEL", 5, fields, rdb_version)), BAD_DATA)
    assert c.execute("EXISTS", "bad") == 0
