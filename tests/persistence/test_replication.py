"""Replication (docs/persistence.md, "Replication"): a replica that starts from a full sync of
the corpus (tests/support/persistence_corpus.py) holds every object byte for byte and runnable models,
and after REPLICAOF NO ONE everything is there and runs with the master's results. The store
commands (TENSORSET, MODELSTORE/SET, MODELDEL, SCRIPTSTORE/SET, SCRIPTDEL) replicate verbatim;
execution commands (MODELEXECUTE/RUN, SCRIPTEXECUTE/RUN, DAGEXECUTE/DAGRUN with PERSIST)
replicate only their outputs, as AI.TENSORSET ... BLOB, so the replica never runs a model: its
AI.INFO shows no calls and its command stats no execution command. A replica refuses writes with
Redis's READONLY error and serves the read-only DAG; a writable replica (`replica-read-only no`)
runs models, scripts and DAGs with persisted outputs as it takes SET, and a run in flight when
it becomes read-only is refused with the same READONLY error.

Every test starts its own master and replica with the three backends and the corpus's
MODEL_CHUNK_SIZE (the chunk size is not replicated: docs/configuration.md).
"""
from __future__ import annotations

import pathlib

import pytest

import engine_models as em
import onnx_models as om
import persistence_corpus as pc
import rdb_files as rf
import torch_models as tm
from helpers import assert_error, assert_ok, info_field, wait_until
from persist_servers import backend_name, wait_info
from resp import RawClient

READONLY = "READONLY You can't write against a read only replica."
NO_INFO = "ERR cannot find run info for key"
EXECUTION_COMMANDS = ("ai.modelexecute", "ai.modelrun", "ai.scriptexecute", "ai.scriptrun",
                      "ai.dagexecute", "ai.dagrun")
MASTER = ["--repl-diskless-sync-delay", "0"]


def attach(master, replica_srv, rc: RawClient, mc: RawClient) -> None:
    assert_ok(rc.execute("REPLICAOF", "127.0.0.1", master.port))
    wait_info(rc, "replication", {"master_link_status": "up", "master_sync_in_progress": "0"})
    sync(mc)


def sync(mc: RawClient) -> None:
    """Every write so far has reached the (one) replica."""
    assert mc.execute("WAIT", 1, 30000) == 1


def stats(c: RawClient, key: str) -> dict[str, object]:
    reply = c.execute("AI.INFO", key)
    assert isinstance(reply, list) and len(reply) == 18, f"AI.INFO {key}: {reply!r}"
    return {reply[i].decode(): reply[i + 1] for i in range(0, 18, 2)}


def calls(c: RawClient) -> dict[str, int]:
    return {key: stats(c, key)["calls"] for key in [*pc.MODELS, *pc.SCRIPTS]}


def cmdstats(c: RawClient) -> dict[str, int]:
    """calls per command name from INFO commandstats."""
    out = {}
    for line in c.execute("INFO", "commandstats").decode().splitlines():
        if line.startswith("cmdstat_"):
            name, rest = line[len("cmdstat_"):].split(":", 1)
            fields = dict(kv.split("=") for kv in rest.split(","))
            out[name] = int(fields["calls"])
    return out


@pytest.mark.parametrize("sync_mode", ["disk", "diskless"])
def test_full_sync_then_promotion(servers, sync_mode):
    """The replica loads the master's RDB (written to disk, or streamed to a replica that
    loads it into a swapped db), holds the corpus byte for byte with fresh stats, runs the
    models in a read-only DAG, and after promotion runs everything with the same results."""
    if sync_mode == "disk":
        master_extra, replica_extra = MASTER + ["--repl-diskless-sync", "no"], []
    else:
        master_extra = MASTER + ["--repl-diskless-sync", "yes"]
        replica_extra = ["--repl-diskless-load", "swapdb"]
    master = servers.start(extra=master_extra)
    mc = RawClient(master.port)
    pc.store(mc)
    before = pc.snapshot(mc)
    pc.assert_matches_source(before)
    before_ro = pc.snapshot(mc, run="ro")

    replica = servers.start(extra=replica_extra)
    rc = RawClient(replica.port)
    attach(master, replica, rc, mc)
    assert info_field(rc.execute("INFO", "replication"), "role") == "slave"
    assert calls(rc) == {k: 0 for k in [*pc.MODELS, *pc.SCRIPTS]}
    pc.assert_same(before_ro, pc.snapshot(rc, run="ro"))

    assert_ok(rc.execute("REPLICAOF", "NO", "ONE"))
    assert info_field(rc.execute("INFO", "replication"), "role") == "master"
    after = pc.snapshot(rc)
    pc.assert_same(before, after)
    # The promoted server takes writes: store and run a model of its own.
    assert_ok(rc.execute("AI.MODELSTORE", "m:new", "TORCH", "CPU", "BLOB", pc.torch_blob()))
    assert_ok(rc.execute("AI.MODELEXECUTE", "m:new", "INPUTS", 1, "in:x", "OUTPUTS", 1, "o:new"))
    assert rc.execute("AI.TENSORGET", "o:new", "BLOB") == rc.execute("AI.TENSORGET", "out:torch",
                                                                     "BLOB")
    assert master.alive() and replica.alive(), replica.log()


@pytest.mark.parametrize("sync_mode", ["disk", "diskless"])
def test_named_models_keep_their_name_on_a_replica(servers, install_dir, sync_mode):
    """Models stored with `BACKEND <name>` reach a replica with their name, by the full sync's
    RDB (the name in the device field, docs/persistence.md) and by the command stream; the
    replica's DUMP is the master's, and after promotion the models run."""
    extra = MASTER + ["--repl-diskless-sync", "no" if sync_mode == "disk" else "yes"]
    master = servers.start(extra=extra)
    replica = servers.start()
    mc, rc = RawClient(master.port), RawClient(replica.port)
    onnx, torch = backend_name(install_dir, "onnxruntime"), backend_name(install_dir, "torch")
    stores = {
        "synced:onnx": ("ONNX", onnx, om.add().blob),
        "synced:torch": ("TORCH", torch, tm.add().blob),
        "streamed:onnx": ("ONNX", onnx, om.add().blob),
    }

    def store(key: str) -> None:
        kind, name, blob = stores[key]
        assert_ok(mc.execute("AI.MODELSTORE", key, kind, "CPU", "BACKEND", name, "TAG", key,
                             "BLOB", blob))

    store("synced:onnx")
    store("synced:torch")
    attach(master, replica, rc, mc)
    if sync_mode == "disk":
        # The file the master wrote for the sync holds the names in the device fields.
        saved = rf.read_rdb(pathlib.Path(master.data_dir) / "dump.rdb").values_of("AI__MODEL")
        assert saved[b"synced:onnx"].fields[1] == b"CPU\0backend=" + onnx.encode() + b"\0"
        assert saved[b"synced:onnx"].encver == 4
    store("streamed:onnx")
    sync(mc)
    for key, (_, name, _) in stores.items():
        reply = rc.execute("AI.MODELGET", key, "META")
        assert reply[-2:] == [b"backend_name", name.encode()], (key, reply)
        assert reply == mc.execute("AI.MODELGET", key, "META"), key
        assert rc.execute("DUMP", key) == mc.execute("DUMP", key), key
    assert_ok(rc.execute("REPLICAOF", "NO", "ONE"))
    built = om.add()
    for n, a in zip(("ra", "rb"), built.sample):
        assert_ok(rc.execute("AI.TENSORSET", n, "FLOAT", *a.shape, "BLOB", a.tobytes()))
    for key in stores:
        assert_ok(rc.execute("AI.MODELEXECUTE", key, "INPUTS", 2, "ra", "rb", "OUTPUTS", 1, "o"))
    assert master.alive() and replica.alive(), replica.log()


def test_store_commands_replicate_verbatim(servers):
    """A replica attached to an empty master receives the corpus through the command stream:
    the store commands as themselves, the executions as AI.TENSORSET of their outputs.
    Deletes and overwrites follow."""
    master = servers.start(extra=MASTER)
    replica = servers.start()
    mc, rc = RawClient(master.port), RawClient(replica.port)
    attach(master, replica, rc, mc)
    pc.store(mc)
    sync(mc)
    pc.assert_same(pc.snapshot(mc, run="ro"), pc.snapshot(rc, run="ro"))
    seen = cmdstats(rc)
    for name in ("ai.tensorset", "ai.modelstore", "ai.modelset", "ai.scriptstore",
                 "ai.scriptset"):
        assert seen.get(name, 0) > 0, f"{name} did not reach the replica: {seen}"
    assert not set(seen) & set(EXECUTION_COMMANDS), seen

    assert_ok(mc.execute("AI.MODELDEL", "m:tfset"))
    assert_ok(mc.execute("AI.SCRIPTDEL", "s:legacy"))
    assert mc.execute("DEL", "t:big") == 1
    assert_ok(mc.execute("AI.TENSORSET", "t:int8", "INT8", 2, "VALUES", 1, 2))
    assert_ok(mc.execute("AI.MODELSTORE", "m:tf", "TF", "CPU", "TAG", "v2", "INPUTS", 2, "a", "b",
                         "OUTPUTS", 1, "mul", "BLOB", pc.tf_blob()))
    assert_ok(mc.execute("AI.SCRIPTSTORE", "s:eps", "CPU", "TAG", "v2", "ENTRY_POINTS", 1, "bar",
                         "SOURCE", tm.SCRIPT))
    sync(mc)
    want = pc.snapshot(mc, run=False)
    assert b"m:tfset" not in want["keys"] and b"s:legacy" not in want["keys"]
    pc.assert_same(want, pc.snapshot(rc, run=False))
    seen = cmdstats(rc)
    assert seen.get("ai.modeldel") == 1 and seen.get("ai.scriptdel") == 1, seen
    # The deleted objects' stats went with them, on the replica too.
    assert_error(rc.execute("AI.INFO", "m:tfset"), NO_INFO)
    assert_error(rc.execute("AI.INFO", "s:legacy"), NO_INFO)
    assert stats(rc, "m:tf")["tag"] == b"v2"


def test_execution_replicates_only_outputs(servers):
    """MODELEXECUTE, SCRIPTEXECUTE, a DAG with PERSIST and their deprecated forms reach the
    replica as one AI.TENSORSET per stored output; the replica's stats show no runs."""
    master = servers.start(extra=MASTER)
    replica = servers.start()
    mc, rc = RawClient(master.port), RawClient(replica.port)
    attach(master, replica, rc, mc)
    pc.store_tensors(mc)
    pc.store_models(mc)
    pc.store_scripts(mc)
    eps = list(tm.REDIS_ENTRY_POINTS)
    assert_ok(mc.execute("AI.SCRIPTSTORE", "s:redis", "CPU", "ENTRY_POINTS", len(eps), *eps,
                         "SOURCE", tm.REDIS_SCRIPT))
    sync(mc)
    tensorsets = cmdstats(rc)["ai.tensorset"]

    pc.execute_all(mc)
    assert_ok(mc.execute("AI.MODELRUN", "m:tfset", "INPUTS", "in:a", "in:b", "OUTPUTS", "out:run"))
    assert_ok(mc.execute("AI.SCRIPTRUN", "s:legacy", "add", "INPUTS", "in:a", "in:b", "OUTPUTS",
                         "out:srun"))
    assert mc.execute("AI.DAGRUN", "PERSIST", 1, "out:dagrun", "|>", "AI.TENSORSET", "t",
                      "FLOAT", 1, "VALUES", 2, "|>", "AI.MODELRUN", "m:tf", "INPUTS", "t", "t",
                      "OUTPUTS", "out:dagrun") == [pc.OK, pc.OK]
    # A write made by redis.execute inside a script is replicated by Redis itself.
    assert_ok(mc.execute("AI.SCRIPTEXECUTE", "s:redis", "set_incr", "KEYS", 1, "counter",
                         "ARGS", 1, 41, "OUTPUTS", 1, "out:incr"))
    # A read-only DAG and a DAG without PERSIST store nothing, so send nothing.
    assert len(mc.execute("AI.DAGEXECUTE_RO", "LOAD", 2, "in:a", "in:b", "|>", "AI.MODELEXECUTE",
                          "m:tf", "INPUTS", 2, "in:a", "in:b", "OUTPUTS", 1, "ro:out")) == 1
    assert len(mc.execute("AI.DAGEXECUTE", "LOAD", 2, "in:a", "in:b", "|>", "AI.MODELEXECUTE",
                          "m:tf", "INPUTS", 2, "in:a", "in:b", "OUTPUTS", 1, "rw:out")) == 1
    sync(mc)

    outputs = [*pc.EXEC_OUTPUTS, "out:run", "out:srun", "out:dagrun", "out:incr"]
    for key in outputs:
        want = mc.execute("AI.TENSORGET", key, "META", "BLOB")
        assert isinstance(want, list), f"{key} on the master: {want!r}"
        assert rc.execute("AI.TENSORGET", key, "META", "BLOB") == want, key
    assert rc.execute("GET", "counter") == b"42"
    for local in ("dag:local", "t", "ro:out", "rw:out"):
        assert rc.execute("EXISTS", local) == 0, f"DAG-local {local} reached the replica"
    assert sorted(rc.execute("KEYS", "*")) == sorted(mc.execute("KEYS", "*"))

    master_calls = calls(mc)
    assert all(n > 0 for n in master_calls.values()), master_calls
    assert calls(rc) == {k: 0 for k in master_calls}
    assert stats(rc, "s:redis")["calls"] == 0
    seen = cmdstats(rc)
    assert not set(seen) & set(EXECUTION_COMMANDS), seen
    # One AI.TENSORSET per stored output, nothing else.
    assert seen["ai.tensorset"] - tensorsets == len(outputs)
    assert seen.get("set") == 1 and seen.get("incr") == 1  # the script's own writes


def test_replica_refuses_writes_and_serves_reads(servers):
    master = servers.start(extra=MASTER)
    replica = servers.start()
    mc, rc = RawClient(master.port), RawClient(replica.port)
    attach(master, replica, rc, mc)
    pc.store(mc)
    sync(mc)
    writes = [
        ["AI.TENSORSET", "w", "FLOAT", 1, "VALUES", 1],
        ["AI.MODELSTORE", "w", "TORCH", "CPU", "BLOB", pc.torch_blob()],
        ["AI.MODELSET", "w", "TORCH", "CPU", "BLOB", pc.torch_blob()],
        ["AI.MODELDEL", "m:tf"],
        ["AI.MODELEXECUTE", "m:tf", "INPUTS", 2, "in:a", "in:b", "OUTPUTS", 1, "w"],
        ["AI.MODELRUN", "m:tf", "INPUTS", "in:a", "in:b", "OUTPUTS", "w"],
        ["AI.SCRIPTSTORE", "w", "CPU", "ENTRY_POINTS", 1, "bar", "SOURCE", tm.SCRIPT],
        ["AI.SCRIPTSET", "w", "CPU", "SOURCE", pc.LEGACY_SCRIPT],
        ["AI.SCRIPTDEL", "s:eps"],
        ["AI.SCRIPTEXECUTE", "s:eps", "bar", "INPUTS", 2, "in:a", "in:b", "OUTPUTS", 1, "w"],
        ["AI.SCRIPTRUN", "s:legacy", "add", "INPUTS", "in:a", "in:b", "OUTPUTS", "w"],
        ["AI.DAGEXECUTE", "PERSIST", 1, "w", "|>", "AI.TENSORSET", "w", "FLOAT", 1, "VALUES", 1],
        ["AI.DAGRUN", "|>", "AI.TENSORSET", "w", "FLOAT", 1, "VALUES", 1],
    ]
    for cmd in writes:
        assert_error(rc.execute(*cmd), READONLY)
    assert rc.execute("EXISTS", "w") == 0
    assert calls(rc) == {k: 0 for k in [*pc.MODELS, *pc.SCRIPTS]}
    # Reads and the read-only DAG are served.
    assert rc.execute("AI.TENSORGET", "out:tf", "META", "BLOB") == \
        mc.execute("AI.TENSORGET", "out:tf", "META", "BLOB")
    assert rc.execute("AI.MODELGET", "m:onnx", "META") == mc.execute("AI.MODELGET", "m:onnx",
                                                                      "META")
    assert rc.execute("AI.SCRIPTGET", "s:eps", "SOURCE") == tm.SCRIPT.encode()
    reply = rc.execute("AI.DAGEXECUTE_RO", "LOAD", 2, "in:a", "in:b", "|>", "AI.MODELEXECUTE",
                       "m:tf", "INPUTS", 2, "in:a", "in:b", "OUTPUTS", 1, "o", "|>",
                       "AI.TENSORGET", "o", "BLOB")
    assert reply == [pc.OK, mc.execute("AI.TENSORGET", "out:tf", "BLOB")]
    assert stats(rc, "m:tf")["calls"] == 1  # a run the replica was asked for, itself
    assert replica.alive(), replica.log()


def test_outputs_no_client_could_send_reach_the_replica(servers):
    """A float16 output (no dtype token) and an output with a dim of 0 (refused from
    clients) are replicated in the internal form AI.TENSORSET accepts from the master."""
    master = servers.start(extra=MASTER)
    replica = servers.start()
    mc, rc = RawClient(master.port), RawClient(replica.port)
    attach(master, replica, rc, mc)
    assert_ok(mc.execute("AI.MODELSTORE", "h", "TORCH", "CPU", "BLOB", tm.half_out().blob))
    assert_ok(mc.execute("AI.TENSORSET", "x", "FLOAT", 3, "VALUES", 1, 2, 3))
    assert_ok(mc.execute("AI.MODELEXECUTE", "h", "INPUTS", 1, "x", "OUTPUTS", 1, "o"))
    assert_ok(mc.execute("AI.SCRIPTSTORE", "s", "CPU", "ENTRY_POINTS", 1, "empty", "SOURCE",
                         tm.EMPTY_SCRIPT))
    assert_ok(mc.execute("AI.SCRIPTEXECUTE", "s", "empty", "INPUTS", 1, "x", "OUTPUTS", 1, "e"))
    sync(mc)
    want = mc.execute("AI.TENSORGET", "o", "BLOB")
    assert isinstance(want, bytes) and len(want) == 6
    assert rc.execute("AI.TENSORGET", "o", "BLOB") == want
    assert mc.execute("AI.TENSORGET", "e", "META", "BLOB") == \
        [b"dtype", b"FLOAT", b"shape", [0], b"blob", b""]
    assert rc.execute("AI.TENSORGET", "e", "META", "BLOB") == \
        mc.execute("AI.TENSORGET", "e", "META", "BLOB")
    assert mc.execute("DUMP", "o") == rc.execute("DUMP", "o")


def test_writable_replica_runs_and_persists(servers):
    """With replica-read-only no a replica takes AI.* writes as it takes SET (docs/persistence.md,
    "Replication"): models, scripts and DAGs it is asked to run store their outputs there, with
    the master's results; back to replica-read-only yes, the same commands get READONLY."""
    master = servers.start(extra=MASTER)
    replica = servers.start(extra=["--replica-read-only", "no"])
    mc, rc = RawClient(master.port), RawClient(replica.port)
    attach(master, replica, rc, mc)
    pc.store(mc)
    sync(mc)
    assert_ok(rc.execute("SET", "plain", "write"))
    for key in pc.EXEC_OUTPUTS:
        assert rc.execute("DEL", key) == 1, key
    pc.execute_all(rc)  # each command's reply is OK
    assert_ok(rc.execute("AI.MODELRUN", "m:tf", "INPUTS", "in:a", "in:b", "OUTPUTS", "out:run"))
    assert rc.execute("AI.DAGRUN", "LOAD", 2, "in:a", "in:b", "PERSIST", 1, "out:dagrun", "|>",
                      "AI.MODELRUN", "m:tf", "INPUTS", "in:a", "in:b", "OUTPUTS",
                      "out:dagrun") == [pc.OK]
    for key in pc.EXEC_OUTPUTS:
        assert rc.execute("AI.TENSORGET", key, "META", "BLOB") == \
            mc.execute("AI.TENSORGET", key, "META", "BLOB"), key
    for key in ("out:run", "out:dagrun"):
        assert rc.execute("AI.TENSORGET", key, "BLOB") == mc.execute("AI.TENSORGET", "out:tf",
                                                                     "BLOB"), key
    assert all(stats(rc, key)["calls"] > 0 for key in ("m:tf", "m:torch", "m:onnx", "s:eps"))

    assert_ok(rc.execute("CONFIG", "SET", "replica-read-only", "yes"))
    for cmd in (("AI.MODELEXECUTE", "m:tf", "INPUTS", 2, "in:a", "in:b", "OUTPUTS", 1, "w"),
                ("AI.SCRIPTEXECUTE", "s:eps", "bar", "INPUTS", 2, "in:a", "in:b", "OUTPUTS", 1,
                 "w"),
                ("AI.DAGEXECUTE", "LOAD", 2, "in:a", "in:b", "PERSIST", 1, "w", "|>",
                 "AI.MODELEXECUTE", "m:tf", "INPUTS", 2, "in:a", "in:b", "OUTPUTS", 1, "w")):
        assert_error(rc.execute(*cmd), READONLY)
    assert rc.execute("EXISTS", "w") == 0
    assert master.alive() and replica.alive(), replica.log()


def test_run_in_flight_when_the_replica_turns_read_only_is_refused(servers):
    """A run a writable replica took, still running when replica-read-only becomes yes, is
    answered READONLY at its end and writes nothing (engine/write_gate.h)."""
    master = servers.start(extra=MASTER)
    replica = servers.start(extra=["--replica-read-only", "no"])
    mc, rc = RawClient(master.port), RawClient(replica.port)
    attach(master, replica, rc, mc)
    n = em.calibrate_slow(mc, "slow")(1.5)
    sync(mc)
    assert_ok(rc.execute("AI.TENSORSET", "n", "INT32", "VALUES", 10))
    assert_ok(rc.execute("AI.MODELEXECUTE", "slow", "INPUTS", 1, "n", "OUTPUTS", 1, "warm"))
    assert_ok(rc.execute("AI.TENSORSET", "n", "INT32", "VALUES", n))
    with RawClient(replica.port) as held:
        held.send("AI.MODELEXECUTE", "slow", "INPUTS", 1, "n", "OUTPUTS", 1, "late")
        assert wait_until(lambda: em.blocked_clients(rc) == 1, 10.0)
        assert_ok(rc.execute("CONFIG", "SET", "replica-read-only", "yes"))
        assert_error(held.read(), READONLY)
    assert rc.execute("EXISTS", "late") == 0
    assert replica.alive(), replica.log()
