"""Persistence of tensors, models and scripts (docs/persistence.md): RDB restart, DEBUG RELOAD,
AOF rewrite plus restart, plain AOF replay, BGSAVE while objects change, and the content
of a rewritten AOF (the commands of docs/persistence.md, "AOF"; models in MODEL_CHUNK_SIZE chunks, a
SCRIPTSET script rewritten into a command that replays, unlike 1.2's).

Every scenario stores tests/support/persistence_corpus.py's corpus (every dtype, every backend, a
model of many chunks, scripts with and without entry points, execution outputs), takes a
snapshot, brings the data back through the path under test, and compares a second
snapshot byte for byte, including the results of running every model and script again.
Restored models and scripts start with fresh statistics (docs/persistence.md, "Loading").

Each test starts its own servers with the three backends and MODEL_CHUNK_SIZE = CHUNK.
"""
from __future__ import annotations

import time

import numpy as np
import pytest

import persistence_corpus as pc
import torch_models as tm
from helpers import assert_ok
from persist_servers import (Servers, aof_files, by_key, info, names, read_commands, to_bytes,
                             wait_bgsave_done, wait_info, wait_rewrite_done)
from resp import RawClient

AOF = ["--appendonly", "yes", "--aof-use-rdb-preamble", "no"]
EXECUTION_COMMANDS = {"AI.MODELEXECUTE", "AI.MODELRUN", "AI.SCRIPTEXECUTE", "AI.SCRIPTRUN",
                      "AI.DAGEXECUTE", "AI.DAGRUN", "AI.DAGEXECUTE_RO", "AI.DAGRUN_RO"}


def stats(c: RawClient, key: str) -> dict[str, object]:
    reply = c.execute("AI.INFO", key)
    assert isinstance(reply, list) and len(reply) == 18, f"AI.INFO {key}: {reply!r}"
    return {reply[i].decode(): reply[i + 1] for i in range(0, 18, 2)}


def assert_fresh_stats(c: RawClient) -> None:
    """Loaded models and scripts get new stats entries with zero counters (docs/persistence.md)."""
    for key in [*pc.MODELS, *pc.SCRIPTS]:
        s = stats(c, key)
        assert (s["calls"], s["errors"], s["duration"]) == (0, 0, 0), f"{key}: {s}"


def stored(srv) -> tuple[RawClient, dict]:
    c = RawClient(srv.port)
    pc.store(c)
    before = pc.snapshot(c)
    pc.assert_matches_source(before)
    return c, before


def restored(servers: Servers, srv, extra=(), module_args=None) -> tuple[RawClient, dict]:
    srv.stop()
    srv2 = servers.start(srv.data_dir, extra, module_args=module_args)
    c = RawClient(srv2.port)
    assert_fresh_stats(c)
    after = pc.snapshot(c)
    assert srv2.alive(), srv2.log()
    return c, after


# --------------------------------------------------------------------------------------
# RDB
# --------------------------------------------------------------------------------------

@pytest.mark.parametrize("backends", ["given", "lazy"])
def test_rdb_restart(servers, backends):
    """SAVE, stop, start a new server on the same dir. "lazy": the new server loads no
    backend itself; RDB load loads each one from BACKENDSPATH (docs/backends.md)."""
    srv = servers.start()
    c, before = stored(srv)
    assert_ok(c.execute("SAVE"))
    c.close()
    args = None if backends == "given" else ["MODEL_CHUNK_SIZE", str(pc.CHUNK)]
    c2, after = restored(servers, srv, module_args=args)
    pc.assert_same(before, after)
    c2.close()


def test_debug_reload(servers):
    srv = servers.start()
    c, before = stored(srv)
    assert_ok(c.execute("DEBUG", "RELOAD"))
    assert_fresh_stats(c)
    after = pc.snapshot(c)
    pc.assert_same(before, after)
    # A second reload of what the first one loaded.
    assert_ok(c.execute("DEBUG", "RELOAD"))
    pc.assert_same(before, pc.snapshot(c))
    assert srv.alive(), srv.log()
    c.close()


def test_memory_usage_counts_the_data(servers):
    """MEMORY USAGE goes through mem_usage: at least the tensor data, model blob and script
    source (1.2 had no mem_usage and under-reported)."""
    srv = servers.start()
    c = RawClient(srv.port)
    pc.store(c)
    for key, (_, _, blob) in pc.BLOB_TENSORS.items():
        assert c.execute("MEMORY", "USAGE", key) >= len(blob), key
    for key, m in pc.MODELS.items():
        assert c.execute("MEMORY", "USAGE", key) >= len(m[-1]()), key
    for key, s in pc.SCRIPTS.items():
        assert c.execute("MEMORY", "USAGE", key) >= len(s[-1]), key
    big = c.execute("MEMORY", "USAGE", "t:big")
    assert big < 2 * len(pc.BLOB_TENSORS["t:big"][2]), big
    c.close()


def mutate(c: RawClient, round_: int) -> None:
    """Changes some objects of each kind (values depend on the round)."""
    assert_ok(c.execute("AI.TENSORSET", "t:int8", "INT8", 4, "BLOB", bytes([round_, 255, 0, 1])))
    assert_ok(c.execute("AI.TENSORSET", "t:float", "FLOAT", 1, "VALUES", round_ + 0.5))
    assert_ok(c.execute("AI.MODELSTORE", "m:tf", "TF", "CPU", "TAG", f"round {round_}", "INPUTS", 2,
                        "a", "b", "OUTPUTS", 1, "mul", "BLOB", pc.tf_blob()))
    assert_ok(c.execute("AI.SCRIPTSTORE", "s:legacy", "CPU", "TAG", f"round {round_}",
                        "ENTRY_POINTS", 1, "bar", "SOURCE", pc.tm.SCRIPT))
    assert_ok(c.execute("AI.MODELEXECUTE", "m:tf", "INPUTS", 2, "in:a", "in:b", "OUTPUTS", 1,
                        "out:tf"))


def test_repeated_bgsave_while_objects_change(servers):
    """Each BGSAVE writes the state at its fork, while the parent goes on changing,
    deleting and running objects (rdb-key-save-delay keeps the child busy meanwhile). A
    server started on the last file holds the state of the last BGSAVE."""
    srv = servers.start()
    c = RawClient(srv.port)
    pc.store(c)
    assert_ok(c.execute("CONFIG", "SET", "rdb-key-save-delay", 20000))  # 20 ms per key
    at_fork = None
    for round_ in range(1, 4):
        mutate(c, round_)
        at_fork = pc.snapshot(c, run=False)
        saves = int(info(c, "persistence", "rdb_changes_since_last_save") or 0)
        assert saves > 0
        assert c.execute("BGSAVE") == "Background saving started"
        # While the child writes: overwrite, delete, store, run.
        assert info(c, "persistence", "rdb_bgsave_in_progress") == "1"
        mutate(c, round_ + 100)
        assert_ok(c.execute("AI.MODELDEL", "m:tfset"))
        assert_ok(c.execute("AI.SCRIPTDEL", "s:eps"))
        assert c.execute("DEL", "t:big") == 1
        assert_ok(c.execute("AI.TENSORSET", "t:new", "UINT8", 1, "VALUES", round_))
        assert_ok(c.execute("AI.MODELEXECUTE", "m:torch", "INPUTS", 1, "in:x", "OUTPUTS", 1,
                            "out:torch"))
        assert info(c, "persistence", "rdb_bgsave_in_progress") == "1", \
            "the save ended before the changes: raise rdb-key-save-delay"
        wait_bgsave_done(c)
        # Put back what was deleted, for the next round.
        pc.store_models(c)
        pc.store_scripts(c)
        pc.store_tensors(c)
        assert c.execute("DEL", "t:new") == 1
    assert_ok(c.execute("CONFIG", "SET", "rdb-key-save-delay", 0))
    now = pc.snapshot(c, run=False)
    assert now != at_fork  # the changes after the last fork really changed something
    c.close()
    srv.stop()
    srv2 = servers.start(srv.data_dir)
    c2 = RawClient(srv2.port)
    after = pc.snapshot(c2, run=False)
    pc.assert_same(at_fork, after)
    assert after["model m:tf"][5] == b"round 3"
    assert after["tensor t:int8"][-1] == bytes([3, 255, 0, 1])
    c2.close()


# --------------------------------------------------------------------------------------
# AOF
# --------------------------------------------------------------------------------------

@pytest.fixture
def rewritten(servers) -> tuple[object, RawClient, dict]:
    """A server with appendonly (no RDB preamble) that stored the corpus and ran
    BGREWRITEAOF."""
    srv = servers.start(extra=AOF)
    c = RawClient(srv.port)
    wait_rewrite_done(c)
    pc.store(c)
    before = pc.snapshot(c)
    pc.assert_matches_source(before)
    assert c.execute("BGREWRITEAOF") == "Background append only file rewriting started"
    time.sleep(0.05)
    wait_rewrite_done(c)
    return srv, c, before


def test_aof_rewrite_then_restart(servers, rewritten):
    srv, c, before = rewritten
    c.close()
    files = aof_files(srv.data_dir)
    srv.stop()
    # Nothing was written after the rewrite: the base file alone restores everything.
    assert not names(read_commands(files["i"])) & {"AI.TENSORSET", "AI.MODELSTORE",
                                                  "AI.SCRIPTSTORE"}
    srv2 = servers.start(srv.data_dir, AOF)
    c2 = RawClient(srv2.port)
    assert_fresh_stats(c2)
    pc.assert_same(before, pc.snapshot(c2))
    c2.close()


def test_rewritten_aof_holds_the_spec_commands(rewritten):
    """docs/persistence.md, "AOF": tensors as TENSORSET ... BLOB, models as MODELSTORE with
    every option and BLOB chunks of MODEL_CHUNK_SIZE, scripts as SCRIPTSTORE with ENTRY_POINTS
    (0 for a SCRIPTSET script, so that the command replays)."""
    srv, c, _ = rewritten
    files = aof_files(srv.data_dir)
    assert len(files["b"]) == 1 and files["b"][0].name.endswith(".base.aof"), files
    cmds = read_commands(files["b"])
    assert names(cmds) <= {"SELECT", "AI.TENSORSET", "AI.MODELSTORE", "AI.SCRIPTSTORE"}, names(cmds)

    tensors = by_key(cmds, "AI.TENSORSET")
    for key, (dt, dims, blob) in pc.BLOB_TENSORS.items():
        assert tensors[key.encode()] == to_bytes(["AI.TENSORSET", key, dt, *dims, "BLOB", blob])
    assert tensors[b"t:scalar"] == to_bytes(["AI.TENSORSET", "t:scalar", "FLOAT", "BLOB",
                                             pc.OTHER_TENSORS["t:scalar"][3]])
    assert tensors[b"t:zeros"] == to_bytes(["AI.TENSORSET", "t:zeros", "INT32", 2, 2, "BLOB",
                                            bytes(16)])
    assert set(tensors) == {k.encode() for k in [*pc.tensor_keys(), pc.DB1_TENSOR[0]]}

    models = by_key(cmds, "AI.MODELSTORE")
    assert set(models) == {k.encode() for k in pc.MODELS}
    for key, (backend, dev, tag, bs, mbs, mbt, ins, outs, blob_fn) in pc.MODELS.items():
        io = ["INPUTS", len(ins), *ins, "OUTPUTS", len(outs), *outs] if backend == "TF" else []
        blob = blob_fn()
        k = len(blob) // pc.CHUNK + 1
        chunks = [blob[i * pc.CHUNK:(i + 1) * pc.CHUNK] for i in range(k)]
        want = to_bytes(["AI.MODELSTORE", key, backend, dev, "TAG", tag, "BATCHSIZE", bs,
                         "MINBATCHSIZE", mbs, "MINBATCHTIMEOUT", mbt, *io, "BLOB", *chunks])
        assert models[key.encode()] == want, key
    onnx = models[b"m:onnx"]
    nchunks = len(onnx) - onnx.index(b"BLOB") - 1
    assert nchunks == len(pc.onnx_blob()) // pc.CHUNK + 1 > 2
    assert all(len(ch) == pc.CHUNK for ch in onnx[-nchunks:-1])

    scripts = by_key(cmds, "AI.SCRIPTSTORE")
    assert scripts[b"s:eps"] == to_bytes(["AI.SCRIPTSTORE", "s:eps", "CPU", "TAG", "scripts",
                                          "ENTRY_POINTS", len(pc.SCRIPT_EPS), *pc.SCRIPT_EPS,
                                          "SOURCE", pc.tm.SCRIPT])
    assert scripts[b"s:legacy"] == to_bytes(["AI.SCRIPTSTORE", "s:legacy", "CPU", "TAG", "old",
                                             "ENTRY_POINTS", 0, "SOURCE", pc.LEGACY_SCRIPT])
    # The SCRIPTSET form replays: the rewritten command, sent as is, stores the script.
    assert_ok(c.execute(*scripts[b"s:legacy"][:1], "s:replayed", *scripts[b"s:legacy"][2:]))
    assert c.execute("AI.SCRIPTGET", "s:replayed") == c.execute("AI.SCRIPTGET", "s:legacy")
    assert c.execute("DEL", "s:replayed") == 1


def test_plain_aof_replay(servers):
    """No rewrite: the incr file holds the store commands verbatim and the executions as
    AI.TENSORSET ... BLOB of their outputs (docs/persistence.md); replaying it restores
    everything."""
    srv = servers.start(extra=AOF)
    c = RawClient(srv.port)
    wait_rewrite_done(c)
    pc.store(c)
    before = pc.snapshot(c)
    pc.assert_matches_source(before)
    c.close()
    files = aof_files(srv.data_dir)
    srv.stop()
    cmds = read_commands(files["i"])
    seen = names(cmds)
    assert {"AI.TENSORSET", "AI.MODELSTORE", "AI.MODELSET", "AI.SCRIPTSTORE",
            "AI.SCRIPTSET"} <= seen, seen
    assert not seen & EXECUTION_COMMANDS, seen & EXECUTION_COMMANDS
    tensorsets = by_key(cmds, "AI.TENSORSET")
    for key in pc.EXEC_OUTPUTS:
        cmd = tensorsets[key.encode()]
        assert cmd[-2] == b"BLOB", cmd[:6]
        assert cmd[-1] == before[f"tensor {key}"][-1], key
    assert b"dag:local" not in tensorsets  # DAG-local names never reach the keyspace
    assert tensorsets[b"t:values"] == to_bytes(["AI.TENSORSET", "t:values", "DOUBLE", 2,
                                                "VALUES", 1.5, -2])  # verbatim
    srv2 = servers.start(srv.data_dir, AOF)
    c2 = RawClient(srv2.port)
    pc.assert_same(before, pc.snapshot(c2))
    c2.close()


def test_aof_replay_after_deletes_and_overwrites(servers):
    """MODELDEL, SCRIPTDEL, DEL and overwrites in the AOF replay to the same final state,
    with and without a rewrite after them."""
    srv = servers.start(extra=AOF)
    c = RawClient(srv.port)
    wait_rewrite_done(c)
    pc.store(c)
    assert_ok(c.execute("AI.MODELDEL", "m:tfset"))
    assert_ok(c.execute("AI.SCRIPTDEL", "s:legacy"))
    assert c.execute("DEL", "t:big") == 1
    mutate(c, 7)
    want = pc.snapshot(c, run=False)
    assert b"m:tfset" not in want["keys"] and b"t:big" not in want["keys"]
    assert want["script s:legacy"][3] == b"round 7"
    c.close()
    srv.stop()
    srv2 = servers.start(srv.data_dir, AOF)
    c2 = RawClient(srv2.port)
    pc.assert_same(want, pc.snapshot(c2, run=False))
    assert c2.execute("BGREWRITEAOF") == "Background append only file rewriting started"
    time.sleep(0.05)
    wait_rewrite_done(c2)
    c2.close()
    srv2.stop()
    srv3 = servers.start(srv.data_dir, AOF)
    c3 = RawClient(srv3.port)
    pc.assert_same(want, pc.snapshot(c3, run=False))
    c3.close()


def test_blob_of_an_exact_multiple_of_the_chunk_size(servers, all_backend_paths):
    """QUIRK (docs/commands.md, AI.MODELGET): L = k * C gives k + 1 chunks, the last one empty.
    DEBUG RELOAD (RDB), an AOF rewrite (whose MODELSTORE then ends in an empty BLOB chunk) and a
    restart from that AOF all give the model back whole and runnable."""
    blob = pc.tf_blob()
    size = next(d for d in range(len(blob) // 4, 1, -1) if len(blob) % d == 0)
    k = len(blob) // size + 1
    chunks = [blob[i * size:(i + 1) * size] for i in range(k)]
    assert chunks[-1] == b"" and k > 2
    args = ["MODEL_CHUNK_SIZE", str(size)] + [a for kind, p in all_backend_paths.items()
                                             for a in (kind, str(p))]
    srv = servers.start(extra=AOF, module_args=args)
    c = RawClient(srv.port)
    wait_rewrite_done(c)
    assert_ok(c.execute("AI.MODELSTORE", "m", "TF", "CPU", "INPUTS", 2, "a", "b", "OUTPUTS", 1,
                        "mul", "BLOB", blob))
    assert c.execute("AI.MODELGET", "m", "BLOB") == chunks
    assert_ok(c.execute("DEBUG", "RELOAD"))
    assert c.execute("AI.MODELGET", "m", "BLOB") == chunks
    assert c.execute("BGREWRITEAOF") == "Background append only file rewriting started"
    time.sleep(0.05)
    wait_rewrite_done(c)
    cmd = by_key(read_commands(aof_files(srv.data_dir)["b"]), "AI.MODELSTORE")[b"m"]
    assert cmd[cmd.index(b"BLOB") + 1:] == chunks
    c.close()
    srv.stop()
    srv2 = servers.start(srv.data_dir, AOF, module_args=args)
    c2 = RawClient(srv2.port)
    assert c2.execute("AI.MODELGET", "m", "BLOB") == chunks
    a = np.array([2, 3], np.float32)
    assert_ok(c2.execute("AI.TENSORSET", "a", "FLOAT", 2, "BLOB", a.tobytes()))
    assert_ok(c2.execute("AI.MODELEXECUTE", "m", "INPUTS", 2, "a", "a", "OUTPUTS", 1, "o"))
    assert c2.execute("AI.TENSORGET", "o", "BLOB") == (a * a).tobytes()
    c2.close()


@pytest.mark.parametrize("rewrite", [False, True])
def test_outputs_no_client_could_send_survive_the_aof(servers, rewrite):
    """A float16 output and one with a dim of 0 are written to the AOF in the internal
    form (AI.TENSORSET refuses both from clients) and come back on replay."""
    srv = servers.start(extra=AOF)
    c = RawClient(srv.port)
    wait_rewrite_done(c)
    assert_ok(c.execute("AI.MODELSTORE", "h", "TORCH", "CPU", "BLOB", tm.half_out().blob))
    assert_ok(c.execute("AI.SCRIPTSTORE", "s", "CPU", "ENTRY_POINTS", 1, "empty", "SOURCE",
                        tm.EMPTY_SCRIPT))
    assert_ok(c.execute("AI.TENSORSET", "x", "FLOAT", 3, "VALUES", 1, 2, 3))
    assert_ok(c.execute("AI.MODELEXECUTE", "h", "INPUTS", 1, "x", "OUTPUTS", 1, "o"))
    assert_ok(c.execute("AI.SCRIPTEXECUTE", "s", "empty", "INPUTS", 1, "x", "OUTPUTS", 1, "e"))
    want = {k: c.execute("DUMP", k) for k in ("o", "e")}
    assert c.execute("AI.TENSORGET", "e", "META") == [b"dtype", b"FLOAT", b"shape", [0]]
    # Clients cannot send either form.
    reply = c.execute("AI.TENSORSET", "y", "_DTYPE2_16", 3, "BLOB", b"\0" * 6)
    assert str(reply) == "ERR invalid data type", reply
    reply = c.execute("AI.TENSORSET", "y", "FLOAT", 0, "BLOB", b"")
    assert str(reply) == "ERR invalid or negative value found in tensor shape", reply
    if rewrite:
        c.execute("BGREWRITEAOF")
        wait_rewrite_done(c)
    c.close()
    files = aof_files(srv.data_dir)
    srv.stop()
    cmds = read_commands(files["b"] if rewrite else files["i"])
    tensorsets = by_key(cmds, "AI.TENSORSET")
    assert tensorsets[b"o"][2:4] == [b"_DTYPE2_16", b"3"], tensorsets[b"o"][:4]
    assert tensorsets[b"e"][2:4] == [b"FLOAT", b"0"], tensorsets[b"e"][:4]
    srv2 = servers.start(srv.data_dir, AOF)
    c2 = RawClient(srv2.port)
    assert {k: c2.execute("DUMP", k) for k in ("o", "e")} == want
    c2.close()
