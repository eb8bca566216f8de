"""DUMP / RESTORE / MIGRATE and DEBUG RELOAD of all three types, and MEMORY USAGE
(docs/persistence.md). DUMP, RESTORE and MIGRATE go through the RDB callbacks, so what comes
back must be byte for byte what went in: TENSORGET META BLOB, MODELGET META BLOB, SCRIPTGET.
Restored models and scripts are rebuilt through their backend, so each one is also run.

MEMORY USAGE (RedisAI reported neither): a tensor reports its data size plus a small
overhead, a model at least its blob, a script at least its source.

Two servers with the module and all three backends: `src` and `dst` (the MIGRATE target).
"""
from __future__ import annotations

from typing import Any, Iterator

import numpy as np
import pytest

import onnx_models as om
import rdb_payloads as rp
import tf_graphs
import torch_models as tm
from helpers import assert_error, assert_error_startswith, assert_ok, info_field
from model_io import assert_same, get, put
from persist_servers import backend_name
from redis_server import Connect, RedisServer, StartServer, backend_args
from resp import RawClient, RespError

A = np.arange(6, dtype=np.float32).reshape(2, 3)
B = np.full((2, 3), 2, np.float32)
MIB = 1 << 20


@pytest.fixture(scope="module")
def pair(start_server: StartServer, all_backend_paths
         ) -> Iterator[tuple[RedisServer, RedisServer]]:
    args = backend_args(all_backend_paths)
    src, dst = start_server(args), start_server(args)
    yield src, dst
    for s in (src, dst):
        assert s.alive(), s.log()


@pytest.fixture
def c(pair, connect: Connect) -> RawClient:
    """A client of the source server; both servers are empty."""
    client = connect(pair[0])
    connect(pair[1])
    return client


@pytest.fixture
def d(pair, connect: Connect) -> RawClient:
    """A client of the destination server."""
    return connect(pair[1], flush=False)


# --------------------------------------------------------------------------------------
# What each type looks like from outside, and how to run it
# --------------------------------------------------------------------------------------

TENSORS: dict[str, tuple[Any, ...]] = {
    "t_float": ("FLOAT", 2, 3, "BLOB", A.tobytes()),
    "t_double": ("DOUBLE", 3, "VALUES", 1.5, -2.25, 1e300),
    # negatives go through BLOB (VALUES refuses them: a QUIRK of 1.2, docs/commands.md)
    "t_int8": ("INT8", 4, "BLOB", np.array([-128, -1, 0, 127], np.int8).tobytes()),
    "t_int64": ("INT64", 2, 1, "BLOB", np.array([-2**63, 2**63 - 1], np.int64).tobytes()),
    "t_uint8": ("UINT8", 3, "VALUES", 0, 1, 255),
    "t_uint16": ("UINT16", 2, "VALUES", 0, 65535),
    "t_bool": ("BOOL", 2, 2, "VALUES", 1, 0, 0, 1),
    "t_string": ("STRING", 3, "VALUES", "a", "bc", "d e"),
    "t_scalar": ("INT32", "VALUES", 42),
}

SCRIPT_EPS = ("bar", "tuple_out")


def store_all(c: RawClient) -> None:
    for key, spec in TENSORS.items():
        assert_ok(c.execute("AI.TENSORSET", key, *spec))
    put(c, "a", A)
    put(c, "b", B)
    assert_ok(c.execute("AI.MODELSTORE", "m_torch", "TORCH", "CPU", "TAG", "pt-v1", "BATCHSIZE",
                        4, "MINBATCHSIZE", 2, "MINBATCHTIMEOUT", 7, "BLOB", tm.add().blob))
    assert_ok(c.execute("AI.MODELSTORE", "m_onnx", "ONNX", "CPU", "TAG", "ox", "BLOB",
                        om.add().blob))
    assert_ok(c.execute("AI.MODELSTORE", "m_tf", "TF", "CPU", "TAG", "tf", "INPUTS", 2, "a", "b",
                        "OUTPUTS", 1, "mul", "BLOB", tf_graphs.mul_graph()))
    assert_ok(c.execute("AI.SCRIPTSTORE", "s", "CPU", "TAG", "sc", "ENTRY_POINTS",
                        len(SCRIPT_EPS), *SCRIPT_EPS, "SOURCE", tm.SCRIPT))


def snapshot(c: RawClient, key: str) -> Any:
    """Everything the commands tell about a key's value."""
    kind = c.execute("TYPE", key)
    if kind == "AI_TENSOR":
        return kind, c.execute("AI.TENSORGET", key, "META", "BLOB")
    if kind == "AI__MODEL":
        return kind, c.execute("AI.MODELGET", key, "META", "BLOB")
    if kind == "AI_SCRIPT":
        return kind, c.execute("AI.SCRIPTGET", key)
    raise AssertionError(f"{key}: type {kind!r}")


ALL_KEYS = [*TENSORS, "a", "b", "m_torch", "m_onnx", "m_tf", "s"]
WANT = {"m_torch": A + B, "m_onnx": A + B, "m_tf": A * B}


def run_model(c: RawClient, key: str, out: str = "out") -> np.ndarray:
    assert_ok(c.execute("AI.MODELEXECUTE", key, "INPUTS", 2, "a", "b", "OUTPUTS", 1, out))
    return get(c, out)


def check_runs(c: RawClient, models: dict[str, str]) -> None:
    """Each restored model (new key -> original kind) and the script run."""
    for key, orig in models.items():
        assert_same(run_model(c, key), WANT[orig])


def check_script_runs(c: RawClient, key: str) -> None:
    assert_ok(c.execute("AI.SCRIPTEXECUTE", key, "bar", "INPUTS", 2, "a", "b", "OUTPUTS", 1, "so"))
    assert_same(get(c, "so"), A + B)
    assert_ok(c.execute("AI.SCRIPTEXECUTE", key, "tuple_out", "INPUTS", 2, "a", "b",
                        "OUTPUTS", 2, "p", "q"))
    assert_same(get(c, "p"), A + B)
    assert_same(get(c, "q"), A - B)


# --------------------------------------------------------------------------------------
# DUMP / RESTORE on the same server
# --------------------------------------------------------------------------------------

@pytest.mark.parametrize("key", ALL_KEYS)
def test_dump_restore_same_server(c, key):
    store_all(c)
    before = snapshot(c, key)
    payload = c.execute("DUMP", key)
    assert isinstance(payload, bytes) and payload, payload
    assert_ok(c.execute("RESTORE", "copy", 0, payload))
    assert snapshot(c, "copy") == before
    assert c.execute("TTL", "copy") == -1
    if key in WANT:
        check_runs(c, {"copy": key})
    if key == "s":
        check_script_runs(c, "copy")


def test_restore_busy_replace_and_ttl(c):
    store_all(c)
    for key in ("t_string", "m_onnx", "s"):
        payload = c.execute("DUMP", key)
        # the target holds another value of another type: BUSYKEY unless REPLACE
        assert_ok(c.execute("AI.TENSORSET", "busy", "FLOAT", 1, "VALUES", 9))
        assert_error(c.execute("RESTORE", "busy", 0, payload),
                     "BUSYKEY Target key name already exists.")
        assert snapshot(c, "busy")[0] == "AI_TENSOR"
        assert_ok(c.execute("RESTORE", "busy", 0, payload, "REPLACE"))
        assert snapshot(c, "busy") == snapshot(c, key)
        # a TTL in ms, and an absolute one
        assert_ok(c.execute("RESTORE", "ttl", 100000, payload, "REPLACE"))
        assert 0 < c.execute("PTTL", "ttl") <= 100000
        assert snapshot(c, "ttl") == snapshot(c, key)
        assert_ok(c.execute("RESTORE", "gone", 1, payload, "ABSTTL"))  # long past: not stored
        assert c.execute("EXISTS", "gone") == 0
        assert c.execute("DEL", "busy", "ttl") == 2
    check_runs(c, {"m_onnx": "m_onnx"})


def test_restore_of_a_corrupt_payload_is_an_error(c):
    store_all(c)
    for key in ("t_float", "m_torch", "s"):
        payload = c.execute("DUMP", key)
        # the payload's checksum covers it: one flipped byte is refused by Redis
        bad = bytearray(payload)
        bad[len(bad) // 2] ^= 0xFF
        assert_error_startswith(c.execute("RESTORE", "x", 0, bytes(bad)), "ERR DUMP payload")
        # a cut payload likewise
        assert isinstance(c.execute("RESTORE", "x", 0, payload[: len(payload) // 2]), RespError)
        assert c.execute("EXISTS", "x") == 0
    assert c.execute("PING") == "PONG"


# --------------------------------------------------------------------------------------
# MIGRATE to a second server
# --------------------------------------------------------------------------------------

def test_migrate_copy_keys_form(c, d, pair):
    store_all(c)
    before = {k: snapshot(c, k) for k in ALL_KEYS}
    assert_ok(c.execute("MIGRATE", "127.0.0.1", pair[1].port, "", 0, 20000, "COPY", "KEYS",
                        *ALL_KEYS))
    for k in ALL_KEYS:
        assert snapshot(d, k) == before[k], k
        assert snapshot(c, k) == before[k], k  # COPY leaves the source
    check_runs(d, {k: k for k in WANT})
    check_script_runs(d, "s")
    # again without REPLACE: the keys exist on the target now
    assert_error(c.execute("MIGRATE", "127.0.0.1", pair[1].port, "", 0, 20000, "COPY",
                           "KEYS", "m_tf"),
                 "ERR Target instance replied with error: BUSYKEY Target key name already exists.")
    assert_ok(c.execute("MIGRATE", "127.0.0.1", pair[1].port, "", 0, 20000, "COPY", "REPLACE",
                        "KEYS", "m_tf", "t_string"))
    assert snapshot(d, "m_tf") == before["m_tf"]


def test_migrate_moves_single_key(c, d, pair):
    store_all(c)
    for key in ("t_string", "t_bool", "m_torch", "m_onnx", "m_tf", "s"):
        before = snapshot(c, key)
        assert_ok(c.execute("MIGRATE", "127.0.0.1", pair[1].port, key, 0, 20000))
        assert c.execute("EXISTS", key) == 0, key  # moved, not copied
        assert snapshot(d, key) == before, key
    put(d, "a", A)
    put(d, "b", B)
    check_runs(d, {k: k for k in WANT})
    check_script_runs(d, "s")


def test_named_model_keeps_its_name_through_restore_and_migrate(c, d, pair, install_dir):
    """The name of `MODELSTORE ... BACKEND <name>` rides in the payload's device field
    (docs/persistence.md): RESTORE on another server and MIGRATE keep it."""
    store_all(c)
    name = backend_name(install_dir, "onnxruntime")
    assert_ok(c.execute("AI.MODELSTORE", "named", "ONNX", "CPU", "BACKEND", name, "TAG", "n",
                        "BLOB", om.add().blob))
    payload = c.execute("DUMP", "named")
    assert rp.parse_dump(payload).fields[1] == b"CPU\0backend=" + name.encode() + b"\0"
    before = snapshot(c, "named")
    assert before[1][-2:] == [b"backend_name", name.encode()]
    assert_ok(d.execute("RESTORE", "restored", 0, payload))
    assert snapshot(d, "restored") == before
    assert_ok(c.execute("MIGRATE", "127.0.0.1", pair[1].port, "named", 0, 20000))
    assert c.execute("EXISTS", "named") == 0
    assert snapshot(d, "named") == before
    put(d, "a", A)
    put(d, "b", B)
    for key in ("restored", "named"):
        assert_same(run_model(d, key), A + B)


# --------------------------------------------------------------------------------------
# DEBUG RELOAD
# --------------------------------------------------------------------------------------

def test_debug_reload_all_types(c):
    store_all(c)
    assert c.execute("EXPIRE", "t_int8", 1000) == 1
    before = {k: snapshot(c, k) for k in ALL_KEYS}
    assert_ok(c.execute("DEBUG", "RELOAD"))
    assert c.execute("DBSIZE") == len(ALL_KEYS)
    for k in ALL_KEYS:
        assert snapshot(c, k) == before[k], k
    assert 0 < c.execute("TTL", "t_int8") <= 1000
    check_runs(c, {k: k for k in WANT})
    check_script_runs(c, "s")
    # twice: what was loaded saves the same way
    assert_ok(c.execute("DEBUG", "RELOAD"))
    for k in ALL_KEYS:
        assert snapshot(c, k) == before[k], k


# --------------------------------------------------------------------------------------
# MEMORY USAGE
# --------------------------------------------------------------------------------------

def test_memory_usage_of_tensors_follows_their_data(c):
    sizes = {}
    for n in (1, 1024, 262144):  # FLOAT: 4 B, 4 KiB, 1 MiB of data
        key = f"t{n:06d}"  # keys of one length: the key's own size is the same
        assert_ok(c.execute("AI.TENSORSET", key, "FLOAT", n, "BLOB", bytes(4 * n)))
        sizes[n] = c.execute("MEMORY", "USAGE", key)
        assert isinstance(sizes[n], int), sizes[n]
    assert sizes[262144] >= MIB, sizes
    assert sizes[262144] < 1.1 * MIB + 1024, sizes
    assert 4096 <= sizes[1024] < 4096 + 1024, sizes
    assert sizes[1] < 1024, sizes
    # the per-tensor overhead is the same whatever the data size
    assert sizes[262144] - sizes[1024] == 4 * (262144 - 1024), sizes
    # STRING tensors count their bytes and their offsets too
    assert_ok(c.execute("AI.TENSORSET", "s1", "STRING", 1, "VALUES", "x" * 1000))
    assert_ok(c.execute("AI.TENSORSET", "s2", "STRING", 2, "VALUES", "x" * 1000, "y" * 1000))
    s1, s2 = c.execute("MEMORY", "USAGE", "s1"), c.execute("MEMORY", "USAGE", "s2")
    assert s2 - s1 >= 1000, (s1, s2)


def test_memory_usage_of_models_and_scripts(c):
    store_all(c)
    blobs = {"m_torch": tm.add().blob, "m_onnx": om.add().blob, "m_tf": tf_graphs.mul_graph()}
    for key, blob in blobs.items():
        usage = c.execute("MEMORY", "USAGE", key)
        assert isinstance(usage, int) and usage >= len(blob), (key, usage, len(blob))
    big = tm.cnn().blob  # a bigger model reports more
    assert_ok(c.execute("AI.MODELSTORE", "m_big", "TORCH", "CPU", "BLOB", big))
    assert c.execute("MEMORY", "USAGE", "m_big") >= len(big) > len(blobs["m_torch"])
    assert c.execute("MEMORY", "USAGE", "m_big") > c.execute("MEMORY", "USAGE", "m_torch")
    assert c.execute("MEMORY", "USAGE", "s") >= len(tm.SCRIPT)
    # after a round trip through the RDB the same sizes are reported
    before = {k: c.execute("MEMORY", "USAGE", k) for k in (*blobs, "s", "t_float")}
    assert_ok(c.execute("DEBUG", "RELOAD"))
    after = {k: c.execute("MEMORY", "USAGE", k) for k in before}
    # Redis 6.2 and Valkey 8.1 account a key 16 bytes differently now and then after a reload,
    # a plain string key too (seen: SET k x; MEMORY USAGE 71, after DEBUG RELOAD 87); 7.0 never.
    version = info_field(c.execute("INFO", "server"), "redis_version") or ""
    slack = 0 if version.startswith("7.0.") else 16
    assert all(abs(after[k] - before[k]) <= slack for k in before), (before, after)
