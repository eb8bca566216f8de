"""Clients that keep a cluster busy while it changes (tests/cluster/test_cluster_change.py,
bench/bench_scaleout.py): threads, each with its own redis-py RedisCluster, running
AI.MODELEXECUTE and AI.DAGEXECUTE on a large ONNX model stored once per shard, and checking
every answer against what the model must give.

The model gathers one element of a `mib` MiB initializer W (W[j] = j % 9973), so a run is
cheap while the key is as large as a real model: moving or replicating it moves `mib` MiB.
"""
from __future__ import annotations

import functools
import random
import threading
import time
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np
from redis.cluster import ClusterNode, RedisCluster

MODULUS = 9973


@functools.cache
def big_gather_model(mib: int) -> bytes:
    """Input `i` int64 [1]; output `out` float [1] = W[i], W a `mib` MiB initializer."""
    import onnx  # noqa: PLC0415

    h, TP = onnx.helper, onnx.TensorProto
    n = mib * 1024 * 1024 // 4
    w = onnx.numpy_helper.from_array((np.arange(n) % MODULUS).astype(np.float32), name="w")
    g = h.make_graph([h.make_node("Gather", ["w", "i"], ["out"], axis=0)], "big_gather",
                     [h.make_tensor_value_info("i", TP.INT64, [1])],
                     [h.make_tensor_value_info("out", TP.FLOAT, [1])], [w])
    model = h.make_model(g, opset_imports=[h.make_opsetid("", 13)])
    model.ir_version = 8
    return model.SerializeToString()


def expected(j: int) -> float:
    return float(j % MODULUS)


def cluster_client(startup: Sequence[tuple[str, int]]) -> RedisCluster:
    return RedisCluster(startup_nodes=[ClusterNode(h, p) for h, p in startup],
                        socket_timeout=30)


@dataclass
class Counts:
    ok: int = 0
    wrong: int = 0
    failed: int = 0
    errors: list[str] = field(default_factory=list)  # the first few failures, with when
    failed_at: list[float] = field(default_factory=list)


class Load:
    """`workers` threads running requests on the models `model_keys` (one per shard,
    `{tag}big`) until stop(); every answer is checked."""

    def __init__(self, startup: Sequence[tuple[str, int]], tags: Sequence[str],
                 workers: int = 4) -> None:
        self.startup = list(startup)
        self.tags = list(tags)
        self.counts = Counts()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._work, args=(w,), daemon=True)
                         for w in range(workers)]

    def start(self) -> "Load":
        for t in self._threads:
            t.start()
        return self

    def stop(self) -> Counts:
        self._stop.set()
        for t in self._threads:
            t.join(timeout=120)
        assert not any(t.is_alive() for t in self._threads), "a load thread hung"
        return self.counts

    def snapshot(self) -> tuple[int, int, int]:
        with self._lock:
            return self.counts.ok, self.counts.wrong, self.counts.failed

    def _note(self, ok: bool | None, err: str = "") -> None:
        with self._lock:
            if ok is None:
                self.counts.failed += 1
                self.counts.failed_at.append(time.monotonic())
                if len(self.counts.errors) < 20:
                    self.counts.errors.append(err)
            elif ok:
                self.counts.ok += 1
            else:
                self.counts.wrong += 1
                if len(self.counts.errors) < 20:
                    self.counts.errors.append("WRONG " + err)

    def _work(self, w: int) -> None:
        rnd = random.Random(w)
        rc = None
        while not self._stop.is_set():
            tag = "{" + rnd.choice(self.tags) + "}"
            j = rnd.randrange(1, 10_000_000)
            try:
                if rc is None:
                    rc = cluster_client(self.startup)
                if rnd.random() < 0.5:
                    got = self._model(rc, tag, w, j)
                else:
                    got = self._dag(rc, tag, w, j)
                self._note(got == expected(j), f"{tag} j={j} got {got}")
            except Exception as e:  # noqa: BLE001 - every failure is counted and kept
                self._note(None, f"{time.monotonic():.2f} {type(e).__name__}: {e}")
                if rc is not None:
                    rc.close()
                rc = None
                time.sleep(0.05)
        if rc is not None:
            rc.close()

    @staticmethod
    def _model(rc: RedisCluster, tag: str, w: int, j: int) -> float:
        rc.execute_command("AI.TENSORSET", f"{tag}in{w}", "INT64", 1, "VALUES", j)
        reply = rc.execute_command("AI.MODELEXECUTE", f"{tag}big", "INPUTS", 1, f"{tag}in{w}",
                                   "OUTPUTS", 1, f"{tag}out{w}")
        assert reply in (b"OK", "OK"), reply
        [v] = rc.execute_command("AI.TENSORGET", f"{tag}out{w}", "VALUES")
        return float(v)

    @staticmethod
    def _dag(rc: RedisCluster, tag: str, w: int, j: int) -> float:
        reply = rc.execute_command(
            "AI.DAGEXECUTE", "PERSIST", 1, f"{tag}dag{w}", "|>",
            "AI.TENSORSET", "x", "INT64", 1, "VALUES", j, "|>",
            "AI.MODELEXECUTE", f"{tag}big", "INPUTS", 1, "x", "OUTPUTS", 1, f"{tag}dag{w}", "|>",
            "AI.TENSORGET", f"{tag}dag{w}", "VALUES")
        return float(reply[2][0])
