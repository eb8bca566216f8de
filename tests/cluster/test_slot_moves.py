"""A slot that moves under a run (docs/cluster.md, "What a change does to a running request").

Redis routes a command when it arrives; a run queued then may end after its slot moved. The
module then writes nothing on this node and answers what Redis would answer the same command
sent now (engine/write_gate.h), as Redis does for its own blocked commands (a BLPOP blocked
on a slot that moves gets MOVED):

* the slot finished moving while the run was held: `MOVED <slot> <new owner>`, nothing left
  on the old owner (COUNTKEYSINSLOT 0), no output on the new one; resent, it runs there;
* the slot is migrating and the output key already left (or never was here): `ASK <slot>
  <target>`; the old owner keeps nothing, the next MIGRATE of the slot succeeds (before,
  the old owner wrote the output and MIGRATE answered BUSYKEY), and the run followed to the
  target with ASKING runs there;
* the other order: the run ends before the slot moves, or while it migrates with the output
  still here: the output is written here and travels with the slot;
* DAGs with PERSIST alike; INFO counts the redirects (`ai_completion_redirects`);
* a slot left half-moved with a tensor on both nodes: `redis-cli --cluster fix` reports two
  different copies (the types' digests) and merges equal ones.
* a new owner whose CLUSTER NODES line lists more than 4096 slot ranges (every other slot)
  is still found: MOVED to it, not CLUSTERDOWN.

A slow TF graph holds the one worker (THREADS_PER_QUEUE 1) for about RUN_SECONDS while the
test moves the slot with CLUSTER SETSLOT + MIGRATE, as redis-cli --cluster reshard does.
"""
from __future__ import annotations

import itertools
import re
import shutil
import subprocess
from typing import Iterator

import pytest
from redis.crc import key_slot

import engine_models as em
import tf_graphs
from cluster_nodes import (SLOTS, Cluster, begin_move, end_move, migrate_keys, move_slot,
                           node_id, start_cluster, tag_in)
from helpers import assert_ok, info_field, wait_until
from redis_server import RedisServer, backend_args
from resp import RawClient, RespError

pytestmark = pytest.mark.inprocess_only("the in-process run queue's one worker")

RUN_SECONDS = 1.5


class Moves:
    def __init__(self, cluster: Cluster, n: int) -> None:
        self.cluster = cluster
        self.n = n  # the slow graph's loop count for a run of about RUN_SECONDS
        self._tags = (tag_in(*cluster.ranges[0], prefix=f"mv{i}_") for i in itertools.count())

    def fresh_tag(self) -> str:
        """"{tag}" of a slot of master 0 no test used yet."""
        return "{" + next(self._tags) + "}"

    def fresh_slot(self) -> str:
        """A hash tag of a slot of master 0 with the slow model and its input in it."""
        tag = self.fresh_tag()
        with self.cluster.raw(0) as c:
            assert_ok(c.execute("AI.MODELSTORE", f"{tag}slow", "TF", "CPU", "INPUTS", 1, "n",
                                "OUTPUTS", 1, "out", "BLOB", tf_graphs.slow_graph()))
            assert_ok(c.execute("AI.TENSORSET", f"{tag}n", "INT32", "VALUES", self.n))
        return tag


@pytest.fixture(scope="module")
def moves(module_path, tf_backend_path) -> Iterator[Moves]:
    nodes: list[RedisServer] = []
    try:
        cl = start_cluster(module_path, [*backend_args({"TF": tf_backend_path}),
                                         "THREADS_PER_QUEUE", "1"], nodes, masters=2)
        tag = "{" + cl.tags[0] + "}"
        with cl.raw(0) as c:
            n = em.calibrate_slow(c, f"{tag}cal", tag)(RUN_SECONDS)
        yield Moves(cl, n)
        for node in nodes:
            assert node.alive(), node.log()[-3000:]
    finally:
        for node in nodes:
            node.stop()


def run(tag: str) -> tuple:
    return ("AI.MODELEXECUTE", f"{tag}slow", "INPUTS", 1, f"{tag}n", "OUTPUTS", 1, f"{tag}out")


def dag(tag: str) -> tuple:
    return ("AI.DAGEXECUTE", "LOAD", 1, f"{tag}n", "PERSIST", 1, f"{tag}out", "|>",
            "AI.MODELEXECUTE", f"{tag}slow", "INPUTS", 1, f"{tag}n", "OUTPUTS", 1, f"{tag}out")


def blocked(c: RawClient) -> int:
    return int(info_field(c.execute("INFO", "clients"), "blocked_clients"))


def redirects(c: RawClient) -> int:
    return int(info_field(c.execute("INFO", "MODULES"), "ai_completion_redirects"))


def held(port: int, cmd: tuple) -> RawClient:
    """Sends cmd and returns its connection once the run is blocked (running)."""
    conn = RawClient(port)
    with RawClient(port) as watch:
        base = blocked(watch)
        conn.send(*cmd)
        assert wait_until(lambda: blocked(watch) >= base + 1, 5.0)
    return conn


def keys_in_slot(port: int, slot: int) -> int:
    with RawClient(port) as c:
        return c.execute("CLUSTER", "COUNTKEYSINSLOT", slot)


def out_values(port: int, tag: str, asking: bool = False):
    with RawClient(port) as c:
        if asking:
            assert_ok(c.execute("ASKING"))
        return c.execute("AI.TENSORGET", f"{tag}out", "VALUES")


def assert_moved_under_run(nodes: list[RedisServer], src: RedisServer, dst: RedisServer,
                           tag: str, cmd: tuple) -> None:
    """cmd held on src while the tag's slot (the slow model and its input) moves to dst:
    the run answers MOVED to dst and writes its output on neither node."""
    slot = key_slot(tag.encode())
    conn = held(src.port, cmd)
    try:
        assert move_slot(nodes, src, dst, slot) == 2  # the model and its input
        reply = conn.read()
    finally:
        conn.close()
    assert isinstance(reply, RespError), reply
    assert str(reply) == f"MOVED {slot} 127.0.0.1:{dst.port}", reply
    assert keys_in_slot(src.port, slot) == 0  # nothing left behind
    assert keys_in_slot(dst.port, slot) == 2  # and no output written there either


@pytest.mark.parametrize("shape", [run, dag], ids=["modelexecute", "dagexecute"])
def test_slot_moved_under_run_gets_moved(moves: Moves, shape) -> None:
    cl = moves.cluster
    src, dst = cl.masters
    tag = moves.fresh_slot()
    with RawClient(src.port) as c:
        before = redirects(c)
    assert_moved_under_run(cl.nodes, src, dst, tag, shape(tag))
    with RawClient(src.port) as c:
        assert redirects(c) == before + 1
    # resent to the new owner, as a client follows MOVED: it runs there
    with RawClient(dst.port) as c:
        reply = c.execute(*shape(tag))
        assert reply in ("OK", ["OK"]), reply
        assert c.execute("EXISTS", f"{tag}out") == 1


def test_slot_migrating_output_gone_gets_ask(moves: Moves) -> None:
    cl = moves.cluster
    src, dst = cl.masters
    tag = moves.fresh_slot()
    slot = key_slot(tag.encode())
    with RawClient(src.port) as c:  # a key that stays behind until the next MIGRATE
        assert_ok(c.execute("AI.TENSORSET", f"{tag}later", "FLOAT", 1, "VALUES", 5))
    conn = held(src.port, run(tag))
    try:
        begin_move(src, dst, slot)
        with RawClient(src.port) as c:
            reply = c.execute("MIGRATE", "127.0.0.1", dst.port, "", 0, 60000, "KEYS",
                              f"{tag}slow", f"{tag}n")
            assert_ok(reply)
        # a client redirected by ASK writes the output on the target meanwhile
        with RawClient(dst.port) as d:
            assert_ok(d.execute("ASKING"))
            assert_ok(d.execute("AI.TENSORSET", f"{tag}out", "FLOAT", 1, "VALUES", -1))
        reply = conn.read()
    finally:
        conn.close()
    assert isinstance(reply, RespError), reply
    assert str(reply) == f"ASK {slot} 127.0.0.1:{dst.port}", reply
    with RawClient(src.port) as c:  # not written on the old owner
        assert c.execute("CLUSTER", "GETKEYSINSLOT", slot, 10) == [f"{tag}later".encode()]
    # the next MIGRATE of the slot succeeds (no BUSYKEY), and the move completes
    assert migrate_keys(src, dst, slot) == 1
    assert keys_in_slot(src.port, slot) == 0
    assert out_values(dst.port, tag, asking=True) == [b"-1"]
    # the run, followed to the target with ASKING, runs there
    with RawClient(dst.port) as d:
        assert_ok(d.execute("ASKING"))
        assert_ok(d.execute(*run(tag)))
    end_move(cl.nodes, src, dst, slot)
    assert out_values(dst.port, tag) != [b"-1"]
    assert keys_in_slot(dst.port, slot) == 4


@pytest.mark.parametrize("when", ["before-move", "while-migrating"])
def test_run_ends_first_output_travels_with_slot(moves: Moves, when: str) -> None:
    cl = moves.cluster
    src, dst = cl.masters
    tag = moves.fresh_slot()
    slot = key_slot(tag.encode())
    with RawClient(src.port) as c:  # an older output, still on this node
        assert_ok(c.execute("AI.TENSORSET", f"{tag}out", "FLOAT", 1, "VALUES", -1))
    conn = held(src.port, run(tag))
    try:
        if when == "while-migrating":
            begin_move(src, dst, slot)
        reply = conn.read()
    finally:
        conn.close()
    assert reply == "OK", reply
    written = out_values(src.port, tag)
    assert written != [b"-1"], written  # the run's output, here
    if when == "while-migrating":
        assert migrate_keys(src, dst, slot) == 3
        end_move(cl.nodes, src, dst, slot)
    else:
        assert move_slot(cl.nodes, src, dst, slot) == 3
    assert keys_in_slot(src.port, slot) == 0
    assert out_values(dst.port, tag) == written


def test_moves_abort_nothing(moves: Moves) -> None:
    """Both masters alive and agreeing on who serves what after the moves above."""
    cl = moves.cluster
    ids = {node_id(n) for n in cl.masters}
    for n in cl.masters:
        assert n.alive(), n.log()[-3000:]
        with RawClient(n.port) as c:
            info = c.execute("CLUSTER", "INFO").decode()
            assert "cluster_state:ok" in info, info
        assert node_id(n) in ids


def half_moved_copies(moves: Moves, src_value: str, dst_value: str) -> tuple[str, int]:
    """A slot left half-moved (as by an interrupted reshard) with a tensor on both nodes:
    src_value on the source, dst_value written on the target by a client that followed ASK."""
    cl = moves.cluster
    src, dst = cl.masters
    tag = moves.fresh_tag()
    slot = key_slot(tag.encode())
    with RawClient(src.port) as c:
        assert_ok(c.execute("AI.TENSORSET", f"{tag}t", "FLOAT", 2, "VALUES", *src_value.split()))
    begin_move(src, dst, slot)
    with RawClient(dst.port) as d:
        assert_ok(d.execute("ASKING"))
        assert_ok(d.execute("AI.TENSORSET", f"{tag}t", "FLOAT", 2, "VALUES", *dst_value.split()))
    return tag, slot


def cluster_fix(port: int, *opts: str) -> str:
    done = subprocess.run(["redis-cli", "--cluster", "fix", f"127.0.0.1:{port}", *opts],
                          capture_output=True, text=True, timeout=120)
    return re.sub(r"\x1b\[[0-9;]*m", "", done.stdout + done.stderr)


@pytest.mark.skipif(shutil.which("redis-cli") is None, reason="no redis-cli")
def test_cluster_fix_tells_different_copies_apart(moves: Moves) -> None:
    """`redis-cli --cluster fix` compares DEBUG DIGEST-VALUE of the two copies: different
    tensors are reported and left alone (before the types had digests, every AI value
    digested the same and fix kept one copy silently); equal ones are merged."""
    cl = moves.cluster
    src, dst = cl.masters
    tag, slot = half_moved_copies(moves, "2 2", "1 1")
    out = cluster_fix(src.port)
    assert "having different values" in out, out
    # --cluster-replace settles it (redis-cli's fix picks the owner by key count)
    cluster_fix(src.port, "--cluster-replace")
    owners = [n for n in cl.masters if keys_in_slot(n.port, slot)]
    assert len(owners) == 1, out
    tag, slot = half_moved_copies(moves, "3 3", "3 3")
    out = cluster_fix(src.port)
    assert "having different values" not in out, out
    owners = [n for n in cl.masters if keys_in_slot(n.port, slot)]
    assert len(owners) == 1, out
    with RawClient(owners[0].port) as c:
        assert c.execute("AI.TENSORGET", f"{tag}t", "VALUES") == [b"3", b"3"]
    for n in cl.masters:
        with RawClient(n.port) as c:
            assert "cluster_state:ok" in c.execute("CLUSTER", "INFO").decode()


def test_moved_to_a_node_with_thousands_of_slot_ranges(module_path, tf_backend_path) -> None:
    """Master 0 serves the even slots, master 1 the odd ones (8192 ranges on each line of
    CLUSTER NODES). A run held on master 0 in slot 16382, which then moves to master 1 (its
    line's 8191st range, 16381-16383), gets MOVED to master 1: the write gate reads the whole
    line (a table of 4096 ranges answered CLUSTERDOWN Hash slot not served)."""
    slot = 16382
    layout = [range(0, SLOTS, 2), range(1, SLOTS, 2)]
    nodes: list[RedisServer] = []
    try:
        cl = start_cluster(module_path, [*backend_args({"TF": tf_backend_path}),
                                         "THREADS_PER_QUEUE", "1"], nodes, masters=2,
                           slots=[list(r) for r in layout])
        src, dst = cl.masters
        tag = "{" + tag_in(slot, slot) + "}"
        with RawClient(src.port) as c:
            n = em.calibrate_slow(c, f"{tag}slow", tag)(RUN_SECONDS)
            assert_ok(c.execute("AI.TENSORSET", f"{tag}n", "INT32", "VALUES", n))
            line = next(l for l in c.execute("CLUSTER", "NODES").decode().splitlines()
                        if l.startswith(node_id(dst)))
            assert len(line.split()) - 8 == SLOTS // 2, line[:200]
        assert_moved_under_run(cl.nodes, src, dst, tag, run(tag))
        for node in nodes:
            assert node.alive(), node.log()[-3000:]
    finally:
        for node in nodes:
            node.stop()
