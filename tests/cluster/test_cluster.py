"""OSS Redis Cluster (docs/persistence.md, "Cluster"): a real 3-master cluster of our own
redis-server processes, each with the module and all three backends, slots assigned with CLUSTER
ADDSLOTSRANGE and joined with CLUSTER MEET. The module reports key positions through
getkeys-api; Redis derives MOVED and CROSSSLOT from them, and redis-py's RedisCluster routes by
them (it asks COMMAND GETKEYS for movable-key commands).

* tensors, models (TORCH, ONNX, TF) and scripts spread over the three nodes by hash tag;
* MODELEXECUTE / SCRIPTEXECUTE with every key in one slot run on the owner;
* a key in another slot gets Redis's CROSSSLOT, an input, an output, a trailing OUTPUTS
  section of SCRIPTEXECUTE and a SCRIPTEXECUTE KEYS item alike;
* a command sent to the wrong node gets MOVED to the owner of its slot;
* DAGEXECUTE routes by LOAD / PERSIST keys, or by ROUTING when it has none, and a DAG with
  keys in two slots is refused with CROSSSLOT;
* a script's redis.execute reaches the key declared in KEYS on the node it was routed to;
* failover: a replica of master 0 takes over with CLUSTER FAILOVER and runs its models;
* a bare command name (the getkeys handler called with argc 1) gets its argument error
  (this did not fail before the argc fix: what Redis read past argv happened to be
  harmless here; test_command_keys shows the crash through ACL key patterns).
"""
from __future__ import annotations

import time
from typing import Iterator

import numpy as np
import pytest
import redis
from redis.cluster import ClusterNode, RedisCluster

import onnx_models as om
import tf_graphs
import torch_models as tm
from cluster_nodes import Cluster, role, start_cluster
from helpers import assert_ok
from model_io import assert_same, get, put
from redis_server import RedisServer, backend_args
from resp import RawClient, RespError

CROSSSLOT = "CROSSSLOT Keys in request don't hash to the same slot"


@pytest.fixture(scope="module")
def cluster(module_path, all_backend_paths) -> Iterator[Cluster]:
    nodes: list[RedisServer] = []
    try:
        yield start_cluster(module_path, backend_args(all_backend_paths), nodes)
        for n in nodes:
            assert n.alive(), n.log()
    finally:
        for n in nodes:
            n.stop()


@pytest.fixture(scope="module")
def rc(cluster: Cluster) -> Iterator[RedisCluster]:
    client = RedisCluster(startup_nodes=[ClusterNode("127.0.0.1", n.port) for n in cluster.nodes])
    yield client
    client.close()


@pytest.fixture(scope="module")
def stored(cluster: Cluster, rc: RedisCluster) -> Cluster:
    """Models and scripts on each node, stored through the cluster client: TORCH add on node
    0, ONNX add on node 1, TF mul and the script on node 2, and their input tensors."""
    k = cluster.key
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    b = np.full((2, 3), 2, np.float32)
    rc.execute_command("AI.MODELSTORE", k(0, "m"), "TORCH", "CPU", "BLOB", tm.add().blob)
    rc.execute_command("AI.MODELSTORE", k(1, "m"), "ONNX", "CPU", "BLOB", om.add().blob)
    rc.execute_command("AI.MODELSTORE", k(2, "m"), "TF", "CPU", "INPUTS", 2, "a", "b",
                       "OUTPUTS", 1, "mul", "BLOB", tf_graphs.mul_graph())
    for node in range(3):
        rc.execute_command("AI.SCRIPTSTORE", k(node, "s"), "CPU", "ENTRY_POINTS",
                           len(tm.REDIS_ENTRY_POINTS) + 1, "bar", *tm.REDIS_ENTRY_POINTS,
                           "SOURCE", tm.SCRIPT + tm.REDIS_SCRIPT)
        for name, arr in (("a", a), ("b", b)):
            rc.execute_command("AI.TENSORSET", k(node, name), "FLOAT", *arr.shape, "BLOB",
                               arr.tobytes())
    return cluster


A = np.arange(6, dtype=np.float32).reshape(2, 3)
B = np.full((2, 3), 2, np.float32)


def _tensor(rc: RedisCluster, key: str) -> np.ndarray:
    reply = rc.execute_command("AI.TENSORGET", key, "META", "BLOB")
    fields = dict(zip(reply[::2], reply[1::2]))
    assert fields[b"dtype"] == b"FLOAT", reply
    return np.frombuffer(fields[b"blob"], np.float32).reshape(tuple(fields[b"shape"]))


def test_values_live_on_the_node_of_their_slot(stored: Cluster):
    for node in range(3):
        with stored.raw(node) as c:
            for name, type_ in (("a", "AI_TENSOR"), ("m", "AI__MODEL"), ("s", "AI_SCRIPT")):
                assert c.execute("TYPE", stored.key(node, name)) == type_
            assert c.execute("DBSIZE") == 4
            assert_same(get(c, stored.key(node, "a")), A)


def test_modelexecute_same_slot_runs_on_owner(stored: Cluster, rc: RedisCluster):
    k = stored.key
    want = {0: A + B, 1: A + B, 2: A * B}  # TORCH add, ONNX add, TF mul
    for node in range(3):
        assert rc.execute_command("AI.MODELEXECUTE", k(node, "m"), "INPUTS", 2, k(node, "a"),
                                  k(node, "b"), "OUTPUTS", 1, k(node, "out")) == b"OK"
        assert_same(_tensor(rc, k(node, "out")), want[node])
        with stored.raw(node) as c:  # stored on the owner itself
            assert_same(get(c, k(node, "out")), want[node])
    # the deprecated form routes the same way
    assert rc.execute_command("AI.MODELRUN", k(0, "m"), "INPUTS", k(0, "a"), k(0, "b"),
                              "OUTPUTS", k(0, "out2")) == b"OK"
    assert_same(_tensor(rc, k(0, "out2")), A + B)


def test_scriptexecute_same_slot_runs_on_owner(stored: Cluster, rc: RedisCluster):
    k = stored.key
    for node in range(3):
        assert rc.execute_command("AI.SCRIPTEXECUTE", k(node, "s"), "bar", "INPUTS", 2,
                                  k(node, "a"), k(node, "b"), "OUTPUTS", 1, k(node, "sum")) == b"OK"
        assert_same(_tensor(rc, k(node, "sum")), A + B)


def test_script_redis_execute_reaches_declared_key(stored: Cluster, rc: RedisCluster):
    """KEYS routes the command to the node holding the key that redis.execute writes."""
    k = stored.key
    assert rc.execute_command("AI.SCRIPTEXECUTE", k(1, "s"), "set_get", "KEYS", 1, k(1, "kv"),
                              "ARGS", 1, 41, "OUTPUTS", 1, k(1, "got")) == b"OK"
    with stored.raw(1) as c:
        assert c.execute("GET", k(1, "kv")) == b"41"
        reply = c.execute("AI.TENSORGET", k(1, "got"), "VALUES")
        assert reply == [41], reply


@pytest.mark.parametrize("shape", [
    "input", "output", "model-vs-inputs", "modelrun-output"])
def test_modelexecute_keys_in_two_slots_crossslot(stored: Cluster, shape: str):
    k = stored.key
    args = {
        "input": ("AI.MODELEXECUTE", k(0, "m"), "INPUTS", 2, k(0, "a"), k(1, "b"),
                  "OUTPUTS", 1, k(0, "o")),
        "output": ("AI.MODELEXECUTE", k(0, "m"), "INPUTS", 2, k(0, "a"), k(0, "b"),
                   "OUTPUTS", 1, k(2, "o")),
        "model-vs-inputs": ("AI.MODELEXECUTE", k(0, "m"), "INPUTS", 2, k(1, "a"), k(1, "b"),
                            "OUTPUTS", 1, k(1, "o")),
        "modelrun-output": ("AI.MODELRUN", k(0, "m"), "INPUTS", k(0, "a"), k(0, "b"),
                            "OUTPUTS", k(1, "o")),
    }[shape]
    for node in range(3):  # Redis answers CROSSSLOT before looking at who owns the slots
        with stored.raw(node) as c:
            reply = c.execute(*args)
            assert isinstance(reply, RespError) and str(reply) == CROSSSLOT, reply
    with stored.raw(0) as c:
        assert c.execute("EXISTS", k(0, "o")) == 0


@pytest.mark.parametrize("shape", ["trailing-outputs", "keys", "input", "scriptrun-output"])
def test_scriptexecute_keys_in_two_slots_crossslot(stored: Cluster, shape: str):
    """The trailing OUTPUTS section (not reported by 1.2) and KEYS count as keys."""
    k = stored.key
    args = {
        "trailing-outputs": ("AI.SCRIPTEXECUTE", k(0, "s"), "bar", "INPUTS", 2, k(0, "a"),
                             k(0, "b"), "OUTPUTS", 1, k(1, "o")),
        "keys": ("AI.SCRIPTEXECUTE", k(0, "s"), "set_get", "KEYS", 1, k(2, "kv"), "ARGS", 1, 5),
        "input": ("AI.SCRIPTEXECUTE", k(0, "s"), "bar", "ARGS", 1, "x", "INPUTS", 2, k(0, "a"),
                  k(1, "b")),
        "scriptrun-output": ("AI.SCRIPTRUN", k(0, "s"), "bar", "INPUTS", k(0, "a"), k(0, "b"),
                             "OUTPUTS", k(2, "o")),
    }[shape]
    with stored.raw(0) as c:
        reply = c.execute(*args)
        assert isinstance(reply, RespError) and str(reply) == CROSSSLOT, reply
        assert c.execute("EXISTS", k(0, "o")) == 0


def test_cluster_client_refuses_cross_slot(stored: Cluster, rc: RedisCluster):
    """redis-py learns the keys from COMMAND GETKEYS and refuses to send a cross-slot call."""
    k = stored.key
    with pytest.raises(redis.exceptions.RedisClusterException, match="same key slot"):
        rc.execute_command("AI.SCRIPTEXECUTE", k(0, "s"), "bar", "INPUTS", 2, k(0, "a"),
                           k(0, "b"), "OUTPUTS", 1, k(1, "o"))


def test_wrong_node_gets_moved(stored: Cluster):
    k = stored.key
    cases = [
        (0, ("AI.TENSORGET", k(0, "a"), "VALUES")),
        (1, ("AI.MODELGET", k(1, "m"), "META")),
        (2, ("AI.SCRIPTGET", k(2, "s"))),
        (0, ("AI.MODELEXECUTE", k(0, "m"), "INPUTS", 2, k(0, "a"), k(0, "b"),
             "OUTPUTS", 1, k(0, "o"))),
        (2, ("AI.SCRIPTEXECUTE", k(2, "s"), "bar", "INPUTS", 2, k(2, "a"), k(2, "b"),
             "OUTPUTS", 1, k(2, "o"))),
        (1, ("AI.INFO", k(1, "m"))),
        (2, ("AI.TENSORSET", k(2, "new"), "FLOAT", 1, "VALUES", 1)),
    ]
    for owner, args in cases:
        for node in range(3):
            if node == owner:
                continue
            with stored.raw(node) as c:
                reply = c.execute(*args)
                assert isinstance(reply, RespError), (node, args, reply)
                assert str(reply) == stored.moved(owner, args[1]), (node, args, reply)


def test_dag_routes_by_load_and_persist(stored: Cluster, rc: RedisCluster):
    k = stored.key
    dag = ("AI.DAGEXECUTE", "LOAD", 2, k(0, "a"), k(0, "b"), "PERSIST", 1, k(0, "dag_out"),
           "|>", "AI.MODELEXECUTE", k(0, "m"), "INPUTS", 2, k(0, "a"), k(0, "b"),
           "OUTPUTS", 1, k(0, "dag_out"), "|>", "AI.TENSORGET", k(0, "dag_out"), "VALUES")
    for node in (1, 2):
        with stored.raw(node) as c:
            assert str(c.execute(*dag)) == stored.moved(0, k(0, "a"))
    reply = rc.execute_command(*dag)
    assert reply[0] == b"OK", reply
    assert [float(v) for v in reply[1]] == list((A + B).ravel()), reply
    with stored.raw(0) as c:
        assert_same(get(c, k(0, "dag_out")), A + B)
    # PERSIST alone routes too; DAGEXECUTE_RO by LOAD
    dag = ("AI.DAGEXECUTE", "PERSIST", 1, k(2, "p"), "|>", "AI.TENSORSET", k(2, "p"), "FLOAT", 1,
           "VALUES", 7)
    with stored.raw(0) as c:
        assert str(c.execute(*dag)) == stored.moved(2, k(2, "p"))
    assert rc.execute_command(*dag) == [b"OK"]
    with stored.raw(2) as c:
        assert c.execute("AI.TENSORGET", k(2, "p"), "VALUES") == [b"7"]
    ro = ("AI.DAGEXECUTE_RO", "LOAD", 1, k(1, "a"), "|>", "AI.TENSORGET", k(1, "a"), "VALUES")
    with stored.raw(2) as c:
        assert str(c.execute(*ro)) == stored.moved(1, k(1, "a"))
    assert [float(v) for v in rc.execute_command(*ro)[0]] == list(A.ravel())


def test_dag_routes_by_routing_without_keys(stored: Cluster, rc: RedisCluster):
    """ROUTING is how a DAG whose keyspace access is inside a script gets to its node."""
    k = stored.key
    dag = ("AI.DAGEXECUTE", "ROUTING", f"{{{stored.tags[2]}}}", "|>", "AI.TENSORSET", "x",
           "FLOAT", 1, "VALUES", 3, "|>", "AI.SCRIPTEXECUTE", k(2, "s"), "set_incr", "KEYS", 1,
           k(2, "counter"), "ARGS", 1, 10, "OUTPUTS", 1, "y", "|>", "AI.TENSORGET", "y", "VALUES")
    for node in (0, 1):
        with stored.raw(node) as c:
            assert str(c.execute(*dag)) == stored.moved(2, f"{{{stored.tags[2]}}}")
    assert rc.execute_command(*dag) == [b"OK", b"OK", [11]]
    with stored.raw(2) as c:
        assert c.execute("GET", k(2, "counter")) == b"11"


@pytest.mark.parametrize("shape", ["load-persist", "load-routing", "persist-model", "load-load"])
def test_dag_keys_in_two_slots_crossslot(stored: Cluster, shape: str):
    k = stored.key
    tg = ("|>", "AI.TENSORGET", "t", "VALUES")
    args = {
        "load-persist": ("AI.DAGEXECUTE", "LOAD", 1, k(0, "a"), "PERSIST", 1, k(1, "t"),
                         "|>", "AI.TENSORSET", k(1, "t"), "FLOAT", 1, "VALUES", 1),
        "load-routing": ("AI.DAGEXECUTE_RO", "LOAD", 1, k(0, "a"), "ROUTING", k(2, "r"),
                         "|>", "AI.TENSORGET", k(0, "a"), "VALUES"),
        "persist-model": ("AI.DAGEXECUTE", "PERSIST", 1, k(0, "t"), "|>", "AI.MODELEXECUTE",
                          k(1, "m"), "INPUTS", 2, "x", "x", "OUTPUTS", 1, "t"),
        "load-load": ("AI.DAGRUN", "LOAD", 2, k(0, "a"), k(1, "a"), *tg),
    }[shape]
    with stored.raw(0) as c:
        reply = c.execute(*args)
        assert isinstance(reply, RespError) and str(reply) == CROSSSLOT, reply
        assert c.execute("EXISTS", k(0, "t")) == 0


def test_dag_without_keys_runs_where_sent(stored: Cluster):
    dag = ("AI.DAGRUN", "|>", "AI.TENSORSET", "x", "FLOAT", 2, "VALUES", 1, 2,
           "|>", "AI.TENSORGET", "x", "VALUES")
    for node in range(3):
        with stored.raw(node) as c:
            assert c.execute(*dag) == ["OK", [b"1", b"2"]]


@pytest.mark.parametrize("name", ["AI.MODELEXECUTE", "AI.MODELRUN", "AI.SCRIPTEXECUTE",
                                  "AI.SCRIPTRUN", "AI.DAGEXECUTE", "AI.DAGRUN_RO"])
def test_bare_command_name_is_an_error(stored: Cluster, name: str):
    """Cluster routing asks the getkeys handler with argc 1: no key, so the node runs the
    command itself and answers an arity error."""
    with stored.raw(0) as c:
        reply = c.execute(name)
        # the command's own argument error: a MOVED or CROSSSLOT here would mean Redis
        # hashed a key read beyond the end of argv
        assert isinstance(reply, RespError) and str(reply).startswith("ERR "), reply
        assert "argument" in str(reply), reply
        assert c.execute("PING") == "PONG"
    assert stored.nodes[0].alive(), stored.nodes[0].log()


# --------------------------------------------------------------------------------------
# Failover: a replica of a master takes over, with runnable models
# --------------------------------------------------------------------------------------

def test_failover_keeps_models_runnable(module_path, all_backend_paths):
    """A fourth node replicates master 0 (full sync of its models and scripts), takes over
    with CLUSTER FAILOVER, and runs every model and script of the slot range it now serves;
    the cluster client follows the MOVED to it. Stats on the new master start from its own
    runs: the replica never ran anything while it was one."""
    nodes: list[RedisServer] = []
    try:
        cl = start_cluster(module_path, backend_args(all_backend_paths), nodes,
                           replicas=(0,))
        [replica] = cl.replicas
        k = cl.key
        with cl.raw(0) as c:
            assert_ok(c.execute("AI.MODELSTORE", k(0, "pt"), "TORCH", "CPU", "BLOB",
                                tm.add().blob))
            assert_ok(c.execute("AI.MODELSTORE", k(0, "ox"), "ONNX", "CPU", "BLOB",
                                om.add().blob))
            assert_ok(c.execute("AI.MODELSTORE", k(0, "tf"), "TF", "CPU", "INPUTS", 2, "a", "b",
                                "OUTPUTS", 1, "mul", "BLOB", tf_graphs.mul_graph()))
            assert_ok(c.execute("AI.SCRIPTSTORE", k(0, "s"), "CPU", "ENTRY_POINTS", 1, "bar",
                                "SOURCE", tm.SCRIPT))
            put(c, k(0, "a"), A)
            put(c, k(0, "b"), B)
            assert_ok(c.execute("AI.MODELEXECUTE", k(0, "pt"), "INPUTS", 2, k(0, "a"), k(0, "b"),
                                "OUTPUTS", 1, k(0, "before")))
            deadline = time.monotonic() + 30
            while c.execute("WAIT", 1, 1000) < 1:
                assert time.monotonic() < deadline, replica.log()[-2000:]
        with RawClient(replica.port) as r:
            assert_ok(r.execute("READONLY"))  # reads of its master's slots, here
            info = r.execute("AI.INFO", k(0, "pt"))
            assert isinstance(info, list) and info[15] == 0, info  # replicated, never run
            assert_same(get(r, k(0, "before")), A + B)
            assert_ok(r.execute("CLUSTER", "FAILOVER"))
        deadline = time.monotonic() + 30
        while role(replica) != b"master" or role(nodes[0]) != b"slave":
            assert time.monotonic() < deadline, replica.log()[-2000:]
            time.sleep(0.1)
        rc = RedisCluster(startup_nodes=[ClusterNode("127.0.0.1", n.port) for n in nodes[1:]])
        try:
            want = {"pt": A + B, "ox": A + B, "tf": A * B}
            for name, expect in want.items():
                out = k(0, f"out_{name}")
                assert rc.execute_command("AI.MODELEXECUTE", k(0, name), "INPUTS", 2, k(0, "a"),
                                          k(0, "b"), "OUTPUTS", 1, out) == b"OK"
                assert_same(_tensor(rc, out), expect)
            assert rc.execute_command("AI.SCRIPTEXECUTE", k(0, "s"), "bar", "INPUTS", 2,
                                      k(0, "a"), k(0, "b"), "OUTPUTS", 1, k(0, "sum")) == b"OK"
            assert_same(_tensor(rc, k(0, "sum")), A + B)
            assert_same(_tensor(rc, k(0, "before")), A + B)
        finally:
            rc.close()
        with RawClient(replica.port) as r:  # the runs above happened on the new master
            for key in ("pt", "ox", "tf", "s"):
                info = r.execute("AI.INFO", k(0, key))
                assert isinstance(info, list) and info[15] == 1, (key, info)
        with cl.raw(0) as old:  # the old master is now its replica: redirects writes
            reply = old.execute("AI.TENSORSET", k(0, "x"), "FLOAT", 1, "VALUES", 1)
            assert isinstance(reply, RespError) and str(reply).startswith("MOVED"), reply
        for n in nodes:
            assert n.alive(), n.log()[-2000:]
    finally:
        for n in nodes:
            n.stop()
