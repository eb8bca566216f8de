"""Digests (docs/persistence.md, "Digests"): DEBUG DIGEST-VALUE of a tensor, a model or a
script mixes the fields its RDB value holds, so two values differ in digest exactly when they
would save differently: tensors by dtype, shape and data (STRING ones too), models by blob,
tag, batching options and names, scripts by source, tag and entry points. Equal values digest
the same: under another key, on a replica, after DUMP/RESTORE, on a server of another
MODEL_CHUNK_SIZE. DEBUG DIGEST (the whole keyspace) changes with one AI value. This is what
`redis-cli --cluster fix` compares to tell two copies of a key apart.
"""
from __future__ import annotations

from typing import Any, Iterator

import numpy as np
import pytest

import onnx_models as om
import persistence_corpus as pc
import tf_graphs
import torch_models as tm
from helpers import assert_ok
from persist_servers import wait_info
from redis_server import Connect, RedisServer, StartServer, backend_args
from resp import RawClient, Status

MASTER = ["--repl-diskless-sync-delay", "0"]


@pytest.fixture(scope="module")
def srv(start_server: StartServer, all_backend_paths) -> Iterator[RedisServer]:
    s = start_server(backend_args(all_backend_paths))
    yield s
    assert s.alive(), s.log()


@pytest.fixture
def c(srv: RedisServer, connect: Connect) -> RawClient:
    return connect(srv)


def digest(c: RawClient, key: str) -> bytes:
    reply = c.execute("DEBUG", "DIGEST-VALUE", key)
    assert isinstance(reply, list) and len(reply) == 1 and len(reply[0]) == 40, reply
    return reply[0]


def db_digest(c: RawClient) -> str:
    reply = c.execute("DEBUG", "DIGEST")  # a status reply
    assert isinstance(reply, Status) and len(reply) == 40, repr(reply)
    return str(reply)


def all_distinct(c: RawClient, keys: list[str]) -> dict[str, bytes]:
    got = {k: digest(c, k) for k in keys}
    seen: dict[bytes, str] = {}
    for k, d in got.items():
        assert d not in seen, f"{k} and {seen[d]} digest the same: {d!r}"
        seen[d] = k
    return got


def assert_told_apart(c: RawClient, keys: list[str]) -> None:
    """Two keys digest the same exactly when their DUMP payloads (the RDB value) are the same:
    equal digests above are not those of a type without a digest method, one value for
    every key."""
    by_digest: dict[str, set[bytes]] = {}
    by_payload: dict[bytes, set[str]] = {}
    for k in keys:
        d, payload = str(digest(c, k)), c.execute("DUMP", k)
        by_digest.setdefault(d, set()).add(payload)
        by_payload.setdefault(payload, set()).add(d)
    assert all(len(v) == 1 for v in by_digest.values()), "one digest for different values"
    assert all(len(v) == 1 for v in by_payload.values()), "two digests for one value"
    assert len(by_digest) > len(keys) // 2, by_digest.keys()


def tensorset(c: RawClient, key: str, *args: Any) -> None:
    assert_ok(c.execute("AI.TENSORSET", key, *args))


# --- what tells values apart -----------------------------------------------------------------

def test_tensors_differ_by_dtype_shape_and_data(c):
    four = np.arange(4, dtype=np.float32).tobytes()
    tensorset(c, "t:f32", "FLOAT", 4, "BLOB", four)
    tensorset(c, "t:other", "FLOAT", 4, "BLOB", np.arange(1, 5, dtype=np.float32).tobytes())
    # The same bytes as another dtype, or as another shape.
    tensorset(c, "t:i32", "INT32", 4, "BLOB", four)
    tensorset(c, "t:2x2", "FLOAT", 2, 2, "BLOB", four)
    tensorset(c, "t:1x4", "FLOAT", 1, 4, "BLOB", four)
    # A scalar and one-element tensors of one and two dims.
    tensorset(c, "t:scalar", "FLOAT", "VALUES", 7)
    tensorset(c, "t:one", "FLOAT", 1, "VALUES", 7)
    tensorset(c, "t:1x1", "FLOAT", 1, 1, "VALUES", 7)
    tensorset(c, "t:u8", "UINT8", 4, "VALUES", 0, 1, 2, 3)
    tensorset(c, "t:i8", "INT8", 4, "VALUES", 0, 1, 2, 3)
    tensorset(c, "t:bool", "BOOL", 4, "VALUES", 0, 1, 1, 1)
    tensorset(c, "t:s1", "STRING", 2, "BLOB", b"ab\0c\0")
    tensorset(c, "t:s2", "STRING", 2, "BLOB", b"a\0bc\0")
    tensorset(c, "t:s3", "STRING", 1, "BLOB", b"abc\0")
    tensorset(c, "t:s4", "STRING", 2, "VALUES", "ab", "d")
    all_distinct(c, ["t:f32", "t:other", "t:i32", "t:2x2", "t:1x4", "t:scalar", "t:one",
                     "t:1x1", "t:u8", "t:i8", "t:bool", "t:s1", "t:s2", "t:s3",
                     "t:s4"])
    # Equal values digest the same, however they were written.
    tensorset(c, "t:f32b", "FLOAT", 4, "VALUES", 0, 1, 2, 3)
    tensorset(c, "t:s1b", "STRING", 2, "VALUES", "ab", "c")
    assert digest(c, "t:f32b") == digest(c, "t:f32")
    assert digest(c, "t:s1b") == digest(c, "t:s1")


def test_models_differ_by_blob_tag_batching_and_names(c):
    add, linear = tm.add().blob, tm.linear().blob
    variants = {
        "m:add": ["TORCH", "CPU", "BLOB", add],
        "m:linear": ["TORCH", "CPU", "BLOB", linear],
        "m:tag": ["TORCH", "CPU", "TAG", "v2", "BLOB", add],
        "m:batch": ["TORCH", "CPU", "BATCHSIZE", 4, "BLOB", add],
        "m:minbatch": ["TORCH", "CPU", "BATCHSIZE", 4, "MINBATCHSIZE", 2, "BLOB", add],
        "m:timeout": ["TORCH", "CPU", "BATCHSIZE", 4, "MINBATCHSIZE", 2, "MINBATCHTIMEOUT", 10,
                      "BLOB", add],
        "m:onnx": ["ONNX", "CPU", "BLOB", om.add().blob],
        "m:tf:mul": ["TF", "CPU", "INPUTS", 2, "a", "b", "OUTPUTS", 1, "mul",
                     "BLOB", tf_graphs.multi_output_graph()],
        "m:tf:add": ["TF", "CPU", "INPUTS", 2, "a", "b", "OUTPUTS", 1, "add",
                     "BLOB", tf_graphs.multi_output_graph()],
        "m:tf:ba": ["TF", "CPU", "INPUTS", 2, "b", "a", "OUTPUTS", 1, "add",
                    "BLOB", tf_graphs.multi_output_graph()],
    }
    for key, args in variants.items():
        assert_ok(c.execute("AI.MODELSTORE", key, *args))
    all_distinct(c, list(variants))
    assert_ok(c.execute("AI.MODELSTORE", "m:add2", "TORCH", "CPU", "BLOB", add))
    assert_ok(c.execute("AI.MODELSET", "m:tf:add2", "TF", "CPU", "INPUTS", "a", "b",
                        "OUTPUTS", "add", "BLOB", tf_graphs.multi_output_graph()))
    assert digest(c, "m:add2") == digest(c, "m:add")
    assert digest(c, "m:tf:add2") == digest(c, "m:tf:add")


def test_scripts_differ_by_source_tag_and_entry_points(c):
    eps = list(tm.ENTRY_POINTS)
    variants = {
        "s:all": ["CPU", "ENTRY_POINTS", len(eps), *eps, "SOURCE", tm.SCRIPT],
        "s:one": ["CPU", "ENTRY_POINTS", 1, "bar", "SOURCE", tm.SCRIPT],
        "s:tag": ["CPU", "TAG", "v2", "ENTRY_POINTS", 1, "bar", "SOURCE", tm.SCRIPT],
        "s:src": ["CPU", "ENTRY_POINTS", 1, "bar", "SOURCE", tm.SCRIPT + "\n"],
    }
    for key, args in variants.items():
        assert_ok(c.execute("AI.SCRIPTSTORE", key, *args))
    assert_ok(c.execute("AI.SCRIPTSET", "s:legacy", "CPU", "SOURCE", pc.LEGACY_SCRIPT))
    all_distinct(c, [*variants, "s:legacy"])
    assert_ok(c.execute("AI.SCRIPTSTORE", "s:one2", "CPU", "ENTRY_POINTS", 1, "bar",
                        "SOURCE", tm.SCRIPT))
    assert digest(c, "s:one2") == digest(c, "s:one")


def test_the_keyspace_digest_changes_with_one_ai_value(c):
    """DEBUG DIGEST, which a test or an operator compares across servers, changes when one
    AI value changes, and comes back with the value."""
    pc.store_tensors(c)
    assert_ok(c.execute("AI.MODELSTORE", "m", "TORCH", "CPU", "BLOB", tm.add().blob))
    assert_ok(c.execute("AI.SCRIPTSTORE", "s", "CPU", "ENTRY_POINTS", 1, "bar",
                        "SOURCE", tm.SCRIPT))
    before = db_digest(c)
    for change, undo in [
        (("AI.TENSORSET", "in:a", "FLOAT", 2, 2, "VALUES", 1, 2, 3, 5),
         ("AI.TENSORSET", "in:a", "FLOAT", 2, 2, "BLOB", pc.A.tobytes())),
        (("AI.MODELSTORE", "m", "TORCH", "CPU", "TAG", "v2", "BLOB", tm.add().blob),
         ("AI.MODELSTORE", "m", "TORCH", "CPU", "BLOB", tm.add().blob)),
        (("AI.SCRIPTSTORE", "s", "CPU", "ENTRY_POINTS", 1, "bar", "SOURCE", tm.SCRIPT + " "),
         ("AI.SCRIPTSTORE", "s", "CPU", "ENTRY_POINTS", 1, "bar", "SOURCE", tm.SCRIPT)),
    ]:
        assert_ok(c.execute(*change))
        assert db_digest(c) != before, change
        assert_ok(c.execute(*undo))
        assert db_digest(c) == before, undo


# --- what keeps them equal -------------------------------------------------------------------

def store_one_of_each(c: RawClient) -> list[str]:
    pc.store_tensors(c)
    pc.store_models(c)
    pc.store_scripts(c)
    return sorted(k.decode() for k in c.execute("KEYS", "*"))


def test_dump_restore_under_another_name_keeps_the_digest(c):
    keys = store_one_of_each(c)
    assert len(keys) > 10, keys
    for key in keys:
        payload = c.execute("DUMP", key)
        assert_ok(c.execute("RESTORE", "copy:" + key, 0, payload))
        assert digest(c, "copy:" + key) == digest(c, key), key
    assert_told_apart(c, keys)


def test_another_chunk_size_keeps_the_digest(c, start_server: StartServer, all_backend_paths,
                                            connect: Connect):
    """A model's blob is digested whole: a server that cuts it into other chunks (its own
    MODEL_CHUNK_SIZE) restores the same digest."""
    other = start_server(["MODEL_CHUNK_SIZE", "7", *backend_args(all_backend_paths)])
    o = connect(other)
    keys = store_one_of_each(c)
    for key in keys:
        assert_ok(o.execute("RESTORE", key, 0, c.execute("DUMP", key)))
        assert digest(o, key) == digest(c, key), key
    assert_told_apart(o, keys)
    # The corpus's tensor in DB 1 too: then the whole keyspaces digest the same.
    db1_key = pc.DB1_TENSOR[0]
    for client in (c, o):
        assert_ok(client.execute("SELECT", 1))
    assert_ok(o.execute("RESTORE", db1_key, 0, c.execute("DUMP", db1_key)))
    for client in (c, o):
        assert_ok(client.execute("SELECT", 0))
    assert db_digest(o) == db_digest(c)


def attach(rc: RawClient, mc: RawClient, master: RedisServer) -> None:
    assert_ok(rc.execute("REPLICAOF", "127.0.0.1", master.port))
    wait_info(rc, "replication", {"master_link_status": "up", "master_sync_in_progress": "0"})
    assert mc.execute("WAIT", 1, 30000) == 1


@pytest.mark.parametrize("sync_mode", ["disk", "diskless"])
def test_a_replica_digests_what_its_master_does(servers, sync_mode):
    """Values of the full sync (read from the master's RDB) and of the command stream (stored by
    the replicated commands, outputs by AI.TENSORSET) digest on the replica as on the master."""
    master = servers.start(extra=MASTER + ["--repl-diskless-sync",
                                           "no" if sync_mode == "disk" else "yes"])
    replica = servers.start()
    mc, rc = RawClient(master.port), RawClient(replica.port)
    pc.store(mc)
    attach(rc, mc, master)
    assert_ok(mc.execute("AI.MODELSTORE", "streamed:m", "TORCH", "CPU", "TAG", "x",
                         "BLOB", tm.add().blob))
    assert_ok(mc.execute("AI.TENSORSET", "streamed:t", "INT64", 2, "VALUES", 5, 6))
    assert_ok(mc.execute("AI.MODELEXECUTE", "m:torch", "INPUTS", 1, "in:x",
                         "OUTPUTS", 1, "streamed:out"))
    assert mc.execute("WAIT", 1, 30000) == 1
    keys = sorted(k.decode() for k in mc.execute("KEYS", "*"))
    assert "streamed:out" in keys and len(keys) > 10, keys
    for key in keys:
        assert digest(rc, key) == digest(mc, key), key
    assert_told_apart(rc, keys)
    assert db_digest(rc) == db_digest(mc)
    assert master.alive() and replica.alive(), replica.log()
