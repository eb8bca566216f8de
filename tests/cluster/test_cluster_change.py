"""Scaling out on a cluster that changes under load (docs/cluster.md): 3 masters with a
replica each, every node with the module, a 100 MiB ONNX model, a script and tensors stored
once per shard under the shard's hash tag, as SmartRedis and RedisAI's users lay them out.

* a model on every shard: stored through redis-py's RedisCluster and through the PyPI
  `redisai` client (connected to each shard's master, as SmartRedis does), and run from
  clients whose inputs live on each shard;
* resharding under load: slots holding the large model, the script and tensors move
  (CLUSTER SETSLOT + MIGRATE, as redis-cli --cluster reshard does) while 4 clients run
  AI.MODELEXECUTE and AI.DAGEXECUTE through RedisCluster: every answer is right, none fails
  (the client follows MOVED/ASK/TRYAGAIN), and AI.MODELGET BLOB, the script and the tensors
  are the same afterwards;
* manual failovers (CLUSTER FAILOVER) under load: no node aborts (the tree before aborted
  the old master in 7 of 10), no answer is wrong, and every model runs on the new master;
* kill -9 of a master under load: its replica takes over; the failed requests are the
  killed node's (connection errors), none wrong; the killed node rejoins as a replica and
  serves its models again after a failover back.

Figures (requests, failures, redirects, MIGRATE times) are printed: run with -s to see them;
docs/cluster.md quotes them. Nothing here asserts a time.
"""
from __future__ import annotations

import hashlib
import subprocess
import time
from typing import Iterator

import numpy as np
import pytest
from redis.crc import key_slot

import onnx_models as om
import torch_models as tm
from cluster_load import Load, big_gather_model, cluster_client, expected
from cluster_nodes import (Cluster, begin_move, end_move, fail_over_to, migrate_keys, node_id,
                           role, start_cluster, wait_caught_up, wait_cluster_ok,
                           wait_synced)
from helpers import info_field, wait_until
from model_io import assert_same, get
from paths import ROOT
from redis_server import RedisServer, backend_args
from resp import RawClient

BIG_MIB = 100
A = np.arange(6, dtype=np.float32).reshape(2, 3)
CLIENT_PYTHON = ROOT / ".venv-client" / "bin" / "python"
CHECK = ROOT / "tests" / "support" / "cluster_client_check.py"


class Shards:
    def __init__(self, cluster: Cluster, blob: bytes) -> None:
        self.cluster = cluster
        self.blob_sha = hashlib.sha256(blob).hexdigest()
        self.killed: list[RedisServer] = []

    def tag(self, shard: int) -> str:
        return "{" + self.cluster.tags[shard] + "}"

    def master_of(self, shard: int) -> RedisServer:
        """The node that serves the shard's slot now (roles change with failovers)."""
        slot = key_slot(self.tag(shard).encode())
        for n in self.cluster.nodes:
            if not n.alive() or role(n) != b"master":
                continue
            with RawClient(n.port) as c:
                if c.execute("CLUSTER", "COUNTKEYSINSLOT", slot) > 0:
                    return n
        raise AssertionError(f"no master holds shard {shard}'s keys")

    def replica_of(self, master: RedisServer) -> RedisServer:
        mid = node_id(master)
        for n in self.cluster.nodes:
            if n.alive() and n is not master and role(n) == b"slave":
                with RawClient(n.port) as c:
                    me = [ln for ln in c.execute("CLUSTER", "NODES").decode().splitlines()
                          if "myself" in ln][0]
                if me.split()[3] == mid:
                    return n
        raise AssertionError("no replica")


def delta(before: dict[str, int], after: dict[str, int]) -> dict[str, int]:
    return {k: after[k] - before[k] for k in after}


def errorstats(nodes) -> dict[str, int]:
    """MOVED/ASK/TRYAGAIN errors the nodes answered, and the module's own redirects."""
    total = {"MOVED": 0, "ASK": 0, "TRYAGAIN": 0, "ai_redirects": 0, "ai_paused": 0}
    for n in nodes:
        if not n.alive():
            continue
        with RawClient(n.port) as c:
            stats = c.execute("INFO", "errorstats").decode()
            mods = c.execute("INFO", "MODULES")
        for kind in ("MOVED", "ASK", "TRYAGAIN"):
            v = info_field(stats, f"errorstat_{kind}")
            total[kind] += int(v.split("=")[1]) if v else 0
        total["ai_redirects"] += int(info_field(mods, "ai_completion_redirects") or 0)
        total["ai_paused"] += int(info_field(mods, "ai_completion_paused_refusals") or 0)
    return total


@pytest.fixture(scope="module")
def shards(module_path, onnx_backend_path, torch_backend_path) -> Iterator[Shards]:
    nodes: list[RedisServer] = []
    blob = big_gather_model(BIG_MIB)
    try:
        cl = start_cluster(module_path, backend_args({"ONNX": onnx_backend_path,
                                                      "TORCH": torch_backend_path}),
                           nodes, replicas=(0, 1, 2),
                           extra=["--repl-diskless-sync-delay", "0"])
        rc = cluster_client(cl.startup())
        for shard in range(3):
            t = "{" + cl.tags[shard] + "}"
            assert rc.execute_command("AI.MODELSTORE", f"{t}big", "ONNX", "CPU", "BLOB",
                                      blob) == b"OK"
            assert rc.execute_command("AI.SCRIPTSTORE", f"{t}s", "CPU", "ENTRY_POINTS", 1,
                                      "bar", "SOURCE", tm.SCRIPT) == b"OK"
            assert rc.execute_command("AI.TENSORSET", f"{t}a", "FLOAT", 2, 3, "BLOB",
                                      A.tobytes()) == b"OK"
        rc.close()
        for m, r in zip(cl.masters, cl.replicas):
            wait_caught_up(m, r)
        yield Shards(cl, blob)
        for n in nodes:
            assert n.alive(), n.log()[-3000:]
    finally:
        for n in nodes:
            n.stop()


def check_values(sh: Shards) -> None:
    """Every shard's model, script and tensor as stored, and runnable on its master."""
    rc = cluster_client([("127.0.0.1", n.port) for n in sh.cluster.nodes if n.alive()])
    try:
        for shard in range(3):
            t = sh.tag(shard)
            blob = rc.execute_command("AI.MODELGET", f"{t}big", "BLOB")
            assert hashlib.sha256(blob).hexdigest() == sh.blob_sha, shard
            src = rc.execute_command("AI.SCRIPTGET", f"{t}s", "SOURCE")
            assert src.decode() == tm.SCRIPT, shard
            raw = rc.execute_command("AI.TENSORGET", f"{t}a", "BLOB")
            assert_same(np.frombuffer(raw, np.float32).reshape(2, 3), A)
            for j in (1, 12345, 9_999_999):
                rc.execute_command("AI.TENSORSET", f"{t}chk", "INT64", 1, "VALUES", j)
                assert rc.execute_command("AI.MODELEXECUTE", f"{t}big", "INPUTS", 1, f"{t}chk",
                                          "OUTPUTS", 1, f"{t}chk_out") == b"OK"
                [v] = rc.execute_command("AI.TENSORGET", f"{t}chk_out", "VALUES")
                assert float(v) == expected(j), (shard, j, v)
            assert rc.execute_command("AI.SCRIPTEXECUTE", f"{t}s", "bar", "INPUTS", 2, f"{t}a",
                                      f"{t}a", "OUTPUTS", 1, f"{t}sum") == b"OK"
            raw = rc.execute_command("AI.TENSORGET", f"{t}sum", "BLOB")
            assert_same(np.frombuffer(raw, np.float32).reshape(2, 3), A + A)
    finally:
        rc.close()


def test_model_on_every_shard_runs_from_each_shard(shards: Shards) -> None:
    cl = shards.cluster
    for shard in range(3):  # stored on the shard's master, replicated to its replica
        t = shards.tag(shard)
        with cl.raw(shard) as c:
            assert c.execute("TYPE", f"{t}big") == "AI__MODEL"
        with RawClient(cl.replicas[shard].port) as r:
            assert r.execute("READONLY") == "OK"
            assert r.execute("TYPE", f"{t}big") == "AI__MODEL", cl.replicas[shard].log()[-3000:]
    check_values(shards)


def test_model_per_shard_through_the_redisai_client(shards: Shards, tmp_path) -> None:
    """The PyPI client (no cluster support) stores `name{tag}` on each shard's master,
    as SmartRedis does, and runs it there with inputs on that shard."""
    if not CLIENT_PYTHON.exists():
        pytest.skip(f"{CLIENT_PYTHON} is missing: `python3 -m build_tools setup` makes it")
    model = tmp_path / "add.onnx"
    model.write_bytes(om.add().blob)
    targets = [f"{shards.master_of(s).port}:{shards.cluster.tags[s]}" for s in range(3)]
    done = subprocess.run([str(CLIENT_PYTHON), str(CHECK), str(model), *targets],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.strip().endswith("ALL OK"), done.stdout


def moving(sh: Shards, src: RedisServer, dst: RedisServer, slot: int) -> tuple[int, float]:
    """Moves slot from src to dst; returns (keys moved, seconds spent in MIGRATE)."""
    begin_move(src, dst, slot)
    t0 = time.perf_counter()
    n = migrate_keys(src, dst, slot)
    spent = time.perf_counter() - t0
    end_move(sh.cluster.nodes, src, dst, slot)
    return n, spent


def test_resharding_under_load(shards: Shards) -> None:
    cl = shards.cluster
    before = errorstats(cl.nodes)
    load = Load(cl.startup(), cl.tags, workers=4).start()
    try:
        assert wait_until(lambda: load.snapshot()[0] > 50, 60), load.counts.errors
        figures = []
        # shard 0's model slot to master 1, shard 2's to master 0, then back
        for shard, to in ((0, 1), (2, 0), (0, 0), (2, 2)):
            src, dst = shards.master_of(shard), cl.masters[to]
            slot = key_slot(shards.tag(shard).encode())
            ok0 = load.snapshot()[0]
            moved, spent = moving(shards, src, dst, slot)
            figures.append((slot, moved, round(spent, 3), load.snapshot()[0] - ok0))
            time.sleep(0.5)
        # and a batch of other slots of master 1's range, some with the clients' keys
        lo, _ = cl.ranges[1]
        for slot in range(lo, lo + 20):
            moving(shards, cl.masters[1], cl.masters[2], slot)
        time.sleep(0.5)
    finally:
        counts = load.stop()
    after = errorstats(cl.nodes)
    print(f"\nresharding under load: {counts.ok} right, {counts.wrong} wrong, {counts.failed} "
          f"failed; moves (slot, keys, MIGRATE s, requests answered meanwhile): {figures}; "
          f"redirects: {delta(before, after)}")
    assert counts.wrong == 0, counts.errors
    assert counts.failed == 0, counts.errors
    assert counts.ok > 100
    for n in cl.nodes:
        assert n.alive(), n.log()[-3000:]
    check_values(shards)


def wait_master(n: RedisServer, timeout: float = 30.0) -> None:
    assert wait_until(lambda: n.alive() and role(n) == b"master", timeout, 0.1), \
        n.log()[-3000:]


def test_manual_failovers_under_load(shards: Shards) -> None:
    cl = shards.cluster
    before = errorstats(cl.nodes)
    load = Load(cl.startup(), cl.tags, workers=4).start()
    switches = []
    try:
        assert wait_until(lambda: load.snapshot()[0] > 50, 60), load.counts.errors
        for i in range(6):
            master = shards.master_of(i % 3)
            replica = shards.replica_of(master)
            t0 = time.perf_counter()
            fail_over_to(replica)
            assert wait_until(lambda: role(master) == b"slave", 30, 0.1), master.log()[-3000:]
            switches.append(round(time.perf_counter() - t0, 2))
            time.sleep(0.5)
    finally:
        counts = load.stop()
    after = errorstats(cl.nodes)
    print(f"\nmanual failovers under load: {len(switches)} switches in {switches} s; "
          f"{counts.ok} right, {counts.wrong} wrong, {counts.failed} failed "
          f"{counts.errors[:5]}; refusals and redirects: "
          f"{delta(before, after)}")
    for n in cl.nodes:  # the tree before aborted the old master here
        assert n.alive(), n.log()[-3000:]
    assert counts.wrong == 0, counts.errors
    wait_cluster_ok(cl.nodes)
    check_values(shards)


def test_kill_master_under_load(shards: Shards) -> None:
    cl = shards.cluster
    victim = shards.master_of(1)
    heir = shards.replica_of(victim)
    load = Load(cl.startup(), cl.tags, workers=4).start()
    try:
        assert wait_until(lambda: load.snapshot()[0] > 50, 60), load.counts.errors
        killed_at = time.monotonic()
        victim.kill()
        wait_master(heir, 30)
        promoted = time.monotonic() - killed_at
        ok0 = load.snapshot()[0]
        assert wait_until(lambda: load.snapshot()[0] > ok0 + 50, 60), load.counts.errors
    finally:
        counts = load.stop()
    last_failure = max(counts.failed_at, default=killed_at) - killed_at
    print(f"\nkill -9 of a master under load: replica promoted after {promoted:.1f} s; "
          f"{counts.ok} right, {counts.wrong} wrong, {counts.failed} failed, the last "
          f"{last_failure:.1f} s after the kill; {counts.errors[:3]}")
    assert counts.wrong == 0, counts.errors
    for n in cl.nodes:
        if n is not victim:
            assert n.alive(), n.log()[-3000:]
    # the killed node comes back as the replica of its heir, with every model again
    victim.restart()
    assert wait_until(lambda: role(victim) == b"slave", 60, 0.2), victim.log()[-3000:]
    wait_synced(victim)
    wait_cluster_ok(cl.nodes)
    with RawClient(victim.port) as c:
        assert c.execute("READONLY") == "OK"
        assert c.execute("TYPE", f"{shards.tag(1)}big") == "AI__MODEL"
        assert_same(get(c, f"{shards.tag(1)}a"), A)
    fail_over_to(victim)  # and takes over again
    wait_cluster_ok(cl.nodes)
    check_values(shards)
