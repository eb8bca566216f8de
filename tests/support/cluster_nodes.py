"""A real OSS Redis Cluster for the tests (docs/cluster.md): masters serving equal slot
ranges, optionally a replica per master, every node with the module and its backends.

Nodes are our own redis-server processes on free loopback ports. Free ports are often above
55535, where the default bus port (+10000) does not exist: each node gets a bus port of its
own, given to CLUSTER MEET too. Slots move with CLUSTER SETSLOT + MIGRATE (`move_slot`), the
same steps `redis-cli --cluster reshard` takes, so the tests can hold a slot half-way.
"""
from __future__ import annotations

import time
from typing import Iterable, Sequence

from redis.crc import key_slot

from persist_servers import wait_info
from redis_server import RedisServer, free_port
from resp import RawClient, RespError

SLOTS = 16384


def ranges(masters: int) -> list[tuple[int, int]]:
    step = SLOTS // masters
    return [(i * step, SLOTS - 1 if i == masters - 1 else (i + 1) * step - 1)
            for i in range(masters)]


def tag_in(lo: int, hi: int, prefix: str = "n") -> str:
    """A hash tag whose slot lies in [lo, hi]."""
    for i in range(100000):
        if lo <= key_slot(f"{prefix}{i}".encode()) <= hi:
            return f"{prefix}{i}"
    raise AssertionError(f"no tag in {lo}-{hi}")


class Cluster:
    """masters[i] serves ranges(len(masters))[i]; replicas[i] (if any) replicates
    masters[i] at start (roles change with failovers: `role` says what a node is now)."""

    def __init__(self, masters: list[RedisServer], replicas: Sequence[RedisServer] = ()) -> None:
        self.masters = masters
        self.replicas = list(replicas)
        self.nodes = [*masters, *self.replicas]
        self.ranges = ranges(len(masters))
        self.tags = [tag_in(lo, hi) for lo, hi in self.ranges]

    def key(self, node: int, name: str) -> str:
        return f"{{{self.tags[node]}}}{name}"

    def moved(self, node: int, key: str) -> str:
        return f"MOVED {key_slot(key.encode())} 127.0.0.1:{self.masters[node].port}"

    def raw(self, node: int) -> RawClient:
        return RawClient(self.masters[node].port)

    def startup(self) -> list[tuple[str, int]]:
        return [("127.0.0.1", n.port) for n in self.nodes]


def node_id(n: RedisServer) -> str:
    with RawClient(n.port) as c:
        return c.execute("CLUSTER", "MYID").decode()


def role(n: RedisServer) -> bytes:
    with RawClient(n.port) as c:
        return c.execute("ROLE")[0]


def cluster_ok(n: RedisServer, known: int) -> bool:
    try:
        with RawClient(n.port) as c:
            info = c.execute("CLUSTER", "INFO").decode()
    except OSError:
        return False
    return "cluster_state:ok" in info and f"cluster_known_nodes:{known}" in info


def wait_cluster_ok(nodes: Sequence[RedisServer], timeout: float = 30.0) -> None:
    """Every node knows all the others and the cluster serves all 16384 slots."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if all(cluster_ok(n, len(nodes)) for n in nodes):
            return
        time.sleep(0.1)
    raise AssertionError("cluster did not reach state ok:\n" +
                         "\n".join(n.log()[-2000:] for n in nodes))


def wait_synced(replica: RedisServer, timeout: float = 60.0) -> None:
    """The replica's link is up and its initial sync done."""
    with RawClient(replica.port) as c:
        wait_info(c, "replication", {"master_link_status": "up", "master_sync_in_progress": "0"},
                  timeout)


def start_cluster(module_path, module_args: list[str], nodes: list[RedisServer],
                  masters: int = 3, replicas: Sequence[int] = (),
                  extra: Iterable[str] = (),
                  slots: Sequence[Sequence[int]] | None = None) -> Cluster:
    """Starts `masters` masters serving equal ranges (or slots[m] each: the Cluster's
    ranges and tags then do not say who serves what) and a replica of master m for each m
    in `replicas` ((0, 1, 2): one per master), appending every server to `nodes` as it
    starts, so that the caller stops them even when a later one fails to start."""
    count = masters + len(replicas)
    bus = [free_port() for _ in range(count)]
    first = len(nodes)
    for i in range(count):
        nodes.append(RedisServer(module_path, module_args, extra=[
            "--cluster-enabled", "yes", "--cluster-node-timeout", "3000",
            "--cluster-port", str(bus[i]), *extra]))
    mine = nodes[first:]
    for i, (n, (lo, hi)) in enumerate(zip(mine, ranges(masters))):
        with RawClient(n.port) as c:
            c.execute("CLUSTER", "SET-CONFIG-EPOCH", i + 1)
            if slots is None:
                c.execute("CLUSTER", "ADDSLOTSRANGE", lo, hi)
            else:
                assert c.execute("CLUSTER", "ADDSLOTS", *slots[i]) == "OK"
    with RawClient(mine[0].port) as c0:
        for n, b in zip(mine[1:], bus[1:]):
            c0.execute("CLUSTER", "MEET", "127.0.0.1", n.port, b)
    wait_cluster_ok(mine)
    ids = [node_id(n) for n in mine[:masters]]
    reps = mine[masters:]
    for m, r in zip(replicas, reps):
        with RawClient(r.port) as c:
            reply = c.execute("CLUSTER", "REPLICATE", ids[m])
            assert reply == "OK", reply
    for r in reps:
        wait_synced(r)
    return Cluster(mine[:masters], reps)


def migrate_keys(src: RedisServer, dst: RedisServer, slot: int, timeout_ms: int = 60000,
                 batch: int = 50) -> int:
    """MIGRATEs every key of `slot` from src to dst (the slot already MIGRATING/IMPORTING).
    Returns how many keys moved; raises on a refused MIGRATE (BUSYKEY and the like)."""
    moved = 0
    with RawClient(src.port) as c:
        while True:
            keys = c.execute("CLUSTER", "GETKEYSINSLOT", slot, batch)
            if not keys:
                return moved
            reply = c.execute("MIGRATE", "127.0.0.1", dst.port, "", 0, timeout_ms, "KEYS", *keys)
            if isinstance(reply, RespError):
                raise AssertionError(f"MIGRATE of slot {slot}: {reply}")
            moved += len(keys)


def begin_move(src: RedisServer, dst: RedisServer, slot: int) -> None:
    with RawClient(dst.port) as d, RawClient(src.port) as s:
        assert d.execute("CLUSTER", "SETSLOT", slot, "IMPORTING", node_id(src)) == "OK"
        assert s.execute("CLUSTER", "SETSLOT", slot, "MIGRATING", node_id(dst)) == "OK"


def end_move(nodes: Sequence[RedisServer], src: RedisServer, dst: RedisServer,
             slot: int) -> None:
    """SETSLOT NODE on the target, then the source, then everyone else (the order
    redis-cli uses, so that no node answers MOVED back to the source)."""
    owner = node_id(dst)
    for n in [dst, src, *(n for n in nodes if n is not src and n is not dst)]:
        with RawClient(n.port) as c:
            reply = c.execute("CLUSTER", "SETSLOT", slot, "NODE", owner)
            if n is dst or n is src:
                assert reply == "OK", (n.port, reply)


def move_slot(nodes: Sequence[RedisServer], src: RedisServer, dst: RedisServer,
              slot: int) -> int:
    """Moves one slot with its keys, as `redis-cli --cluster reshard` does."""
    begin_move(src, dst, slot)
    moved = migrate_keys(src, dst, slot)
    end_move(nodes, src, dst, slot)
    return moved



def fail_over_to(replica: RedisServer, timeout: float = 60.0) -> int:
    """CLUSTER FAILOVER on replica until it is a master; returns the tries it took. A
    failover of the same shard soon after another one times out: masters refuse to vote
    twice for it within two node timeouts (Redis's rule), so it is asked again."""
    deadline = time.monotonic() + timeout
    tries = 0
    while time.monotonic() < deadline:
        tries += 1
        with RawClient(replica.port) as c:
            reply = c.execute("CLUSTER", "FAILOVER")
            assert reply == "OK", reply
        step = time.monotonic() + 7.0  # Redis gives a manual failover 5 s
        while time.monotonic() < min(step, deadline):
            if role(replica) == b"master":
                return tries
            time.sleep(0.1)
    raise AssertionError("failover did not happen:\n" + replica.log()[-3000:])


def _offset(n: RedisServer, field: str) -> int:
    with RawClient(n.port) as c:
        info = c.execute("INFO", "replication").decode()
    for line in info.splitlines():
        if line.startswith(field + ":"):
            return int(line.split(":")[1])
    return -1


def wait_caught_up(master: RedisServer, replica: RedisServer, timeout: float = 60.0) -> None:
    """The replica applied everything the master had written when this was called. (WAIT
    counts only the writes of its own connection; the writes here came from others.)"""
    target = _offset(master, "master_repl_offset")
    deadline = time.monotonic() + timeout
    while _offset(replica, "slave_repl_offset") < target:
        assert time.monotonic() < deadline, replica.log()[-2000:]
        time.sleep(0.05)
