"""TFLITE models survive what every model survives (docs/persistence.md): SAVE and a restart
(the backend given, or loaded lazily by the RDB load), DEBUG RELOAD, an AOF rewrite and a
restart, DUMP/RESTORE, and replication (a read-only replica runs the model in
AI.DAGEXECUTE_RO). After each, AI.MODELGET reports the same backend, tag, names and blob,
and the models still run bit for bit as tf.lite.Interpreter runs their blobs (the quantized
int8 CNN, the dynamic-range model's two outputs, the 2-input/2-output model's subgraph
order).

Each test starts its own servers (tests/support/persist_servers.py).
"""
from __future__ import annotations

import pathlib
import time
from typing import Iterator

import pytest

import tflite_models as tm
from helpers import assert_ok
from model_io import assert_exact, execute, token
from persist_servers import Servers, wait_info, wait_rewrite_done
from resp import RawClient

STORED = {"m:int8": tm.cnn_int8, "m:dyn": tm.dynamic_range, "m:two": tm.two_in_two_out}
AOF = ["--appendonly", "yes", "--aof-use-rdb-preamble", "no"]


@pytest.fixture
def servers(module_path: pathlib.Path, tflite_backend_path: pathlib.Path) -> Iterator[Servers]:
    s = Servers(module_path, ["TFLITE", str(tflite_backend_path)])
    yield s
    s.close()


def store_all(c: RawClient) -> dict[str, list]:
    for key, make in STORED.items():
        assert_ok(c.execute("AI.MODELSTORE", key, "TFLITE", "CPU", "TAG", key, "BLOB",
                            make().blob))
    return {key: c.execute("AI.MODELGET", key) for key in STORED}


def check_all(c: RawClient, before: dict[str, list]) -> None:
    """The same MODELGET replies (blob included), and every model runs as the interpreter."""
    for key, make in STORED.items():
        assert c.execute("AI.MODELGET", key) == before[key], key
        built = make()
        inputs = built.sample(31)
        got = execute(c, key, list(inputs), len(built.outputs), prefix=key)
        for g, w in zip(got, tm.reference(built, inputs)):
            assert_exact(g, w)


@pytest.mark.parametrize("backend", ["given", "lazy"])
def test_save_and_restart(servers, backend):
    srv = servers.start()
    with RawClient(srv.port) as c:
        before = store_all(c)
        assert_ok(c.execute("SAVE"))
    srv.stop()
    srv2 = servers.start(srv.data_dir, module_args=None if backend == "given" else [])
    with RawClient(srv2.port) as c:
        check_all(c, before)


def test_debug_reload(servers):
    srv = servers.start()
    with RawClient(srv.port) as c:
        before = store_all(c)
        assert_ok(c.execute("DEBUG", "RELOAD"))
        check_all(c, before)


def test_aof_rewrite_and_restart(servers):
    srv = servers.start(extra=AOF)
    with RawClient(srv.port) as c:
        wait_rewrite_done(c)
        before = store_all(c)
        assert c.execute("BGREWRITEAOF") == "Background append only file rewriting started"
        time.sleep(0.05)
        wait_rewrite_done(c)
    srv.stop()
    srv2 = servers.start(srv.data_dir, AOF)
    with RawClient(srv2.port) as c:
        check_all(c, before)


def test_dump_restore(servers):
    srv = servers.start()
    with RawClient(srv.port) as c:
        before = store_all(c)
        dumps = {key: c.execute("DUMP", key) for key in STORED}
        assert c.execute("FLUSHALL", "SYNC") == "OK"
        for key, payload in dumps.items():
            assert_ok(c.execute("RESTORE", key, 0, payload))
        check_all(c, before)


def test_a_replica_holds_and_runs_the_models(servers):
    master = servers.start(extra=["--repl-diskless-sync-delay", "0"])
    replica = servers.start()
    with RawClient(master.port) as mc, RawClient(replica.port) as rc:
        assert_ok(mc.execute("AI.MODELSTORE", "m:early", "TFLITE", "CPU", "BLOB",
                             tm.cnn_float().blob))  # reaches the replica by the full sync
        assert_ok(rc.execute("REPLICAOF", "127.0.0.1", master.port))
        wait_info(rc, "replication", {"master_link_status": "up",
                                      "master_sync_in_progress": "0"})
        before = store_all(mc)  # these by the replication stream
        assert mc.execute("WAIT", 1, 30000) == 1
        for key in STORED:
            assert rc.execute("AI.MODELGET", key) == before[key], key
        for key, built in [("m:early", tm.cnn_float()), *((k, m()) for k, m in STORED.items())]:
            inputs = built.sample(32)
            args = []
            for i, x in enumerate(inputs):
                args += ["|>", "AI.TENSORSET", f"x{i}", token(x.dtype), *x.shape, "BLOB",
                         x.tobytes()]
            outs = [f"y{i}" for i in range(len(built.outputs))]
            args += ["|>", "AI.MODELEXECUTE", key, "INPUTS", len(inputs),
                     *(f"x{i}" for i in range(len(inputs))), "OUTPUTS", len(outs), *outs]
            for o in outs:
                args += ["|>", "AI.TENSORGET", o, "BLOB"]
            reply = rc.execute("AI.DAGEXECUTE_RO", "ROUTING", key, *args)
            want = tm.reference(built, inputs)
            assert reply[-len(outs):] == [w.tobytes() for w in want], (key, reply)
