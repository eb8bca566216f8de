"""Isolated against in-process backends (Python client): trivial model p50, CNN at 32 clients, host restart time.

Two servers from the same build side by side, one with every backend in-process and one with
`ISOLATE TF ISOLATE TORCH ISOLATE ONNX`, the same models, measured in the same run with the same
client, interleaved so that drift affects both alike:

* trivial model p50/p99 (ONNX Add and TorchScript add on [2,2] FLOAT), sequential
  AI.MODELEXECUTE over one connection; the difference of the p50s is the isolation overhead
  (target: at most 30 us, docs/performance.md#targets);
* the MNIST-sized CNN (ONNX and TorchScript) at 32 clients: runs per second of each server and
  the ratio (target: at least 0.9);
* host restart time per kind (TF, TORCH, ONNX): from SIGKILL of the host to the first
  successful run of a stored model, and the supervisor's own spawn-to-hello figure.

    bench/run isolation [--install DIR] [--quick]
"""
from __future__ import annotations

import argparse
import os
import signal
import statistics
import sys
import threading
import time
import pathlib

import numpy as np

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import bench as base  # noqa: E402  (Client, find_install; puts tests/support/ on sys.path)

from redis_server import RedisServer  # noqa: E402
import onnx_models  # noqa: E402
import tf_graphs  # noqa: E402
import torch_models  # noqa: E402

ALL = ["ISOLATE", "TF", "ISOLATE", "TORCH", "ISOLATE", "ONNX"]


def pct(xs: list[float], q: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, int(q * len(s)))]


def store_models(c: base.Client) -> None:
    c.call("AI.MODELSTORE", "onnx_add", "ONNX", "CPU", "BLOB", onnx_models.add().blob)
    c.call("AI.MODELSTORE", "torch_add", "TORCH", "CPU", "BLOB", torch_models.add().blob)
    c.call("AI.MODELSTORE", "onnx_cnn", "ONNX", "CPU", "BLOB", onnx_models.cnn().blob)
    c.call("AI.MODELSTORE", "torch_cnn", "TORCH", "CPU", "BLOB", torch_models.cnn().blob)
    c.call("AI.MODELSTORE", "tf_mul", "TF", "CPU", "INPUTS", 2, "a", "b", "OUTPUTS", 1, "mul",
           "BLOB", tf_graphs.mul_graph())
    x = np.arange(4, dtype=np.float32).reshape(2, 2)
    for k in ("a", "b"):
        c.call("AI.TENSORSET", k, "FLOAT", 2, 2, "BLOB", x.tobytes())
    t = np.arange(6, dtype=np.float32).reshape(2, 3)
    for k in ("ta", "tb"):
        c.call("AI.TENSORSET", k, "FLOAT", 2, 3, "BLOB", t.tobytes())
    img = torch_models.cnn_sample()
    c.call("AI.TENSORSET", "img", "FLOAT", *img.shape, "BLOB", img.tobytes())


RUNS = {
    "onnx_add": ("AI.MODELEXECUTE", "onnx_add", "INPUTS", 2, "a", "b", "OUTPUTS", 1, "c"),
    "torch_add": ("AI.MODELEXECUTE", "torch_add", "INPUTS", 2, "ta", "tb", "OUTPUTS", 1, "tc"),
    "onnx_cnn": ("AI.MODELEXECUTE", "onnx_cnn", "INPUTS", 1, "img", "OUTPUTS", 1, "o1"),
    "torch_cnn": ("AI.MODELEXECUTE", "torch_cnn", "INPUTS", 1, "img", "OUTPUTS", 1, "o2"),
    "tf_mul": ("AI.MODELEXECUTE", "tf_mul", "INPUTS", 2, "a", "b", "OUTPUTS", 1, "m"),
}


def latency(clients: dict[str, base.Client], run: tuple, rounds: int) -> dict[str, list[float]]:
    times: dict[str, list[float]] = {k: [] for k in clients}
    for _ in range(rounds // 100):
        for name, c in clients.items():
            for _ in range(100):
                t0 = time.perf_counter()
                c.call(*run)
                times[name].append(time.perf_counter() - t0)
    return times


def throughput(port: int, run: tuple, nclients: int, seconds: float) -> float:
    stop = threading.Event()
    counts = [0] * nclients

    def worker(i: int) -> None:
        c = base.Client(port)
        while not stop.is_set():
            c.call(*run)
            counts[i] += 1

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(nclients)]
    for t in threads:
        t.start()
    time.sleep(0.5)
    start = sum(counts)
    t0 = time.perf_counter()
    time.sleep(seconds)
    done = sum(counts) - start
    elapsed = time.perf_counter() - t0
    stop.set()
    for t in threads:
        t.join()
    return done / elapsed


def host_pid(c: base.Client, kind: str) -> tuple[int, dict]:
    text = bytes(c.call("INFO", "MODULES")).decode()
    for line in text.splitlines():
        if f"kind={kind}," in line:
            d = dict(kv.split("=", 1) for kv in line.split(":", 1)[1].split(","))
            return int(d["pid"]), d
    raise SystemExit(f"no isolated {kind} backend in INFO")


def restart_time(c: base.Client, kind: str, run: tuple, rounds: int) -> list[float]:
    out = []
    for _ in range(rounds):
        c.call(*run)
        pid, _ = host_pid(c, kind)
        t0 = time.perf_counter()
        os.kill(pid, signal.SIGKILL)
        while True:
            try:
                c.call(*run)
                newpid, _ = host_pid(c, kind)
                if newpid != pid:
                    break
            except Exception:  # noqa: BLE001  (the exit error while it restarts)
                time.sleep(0.001)
        out.append(time.perf_counter() - t0)
        time.sleep(0.3)  # a healthy pause: the back-off starts over
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--install", help="install tree (default: newest install/redisai-*/)")
    ap.add_argument("--quick", action="store_true", help="fewer requests, shorter runs")
    ap.add_argument("--only", choices=["latency", "throughput", "restart"],
                    help="measure only this (default: all three)")
    ap.add_argument("--threads-per-queue", type=int, default=1,
                    help="THREADS_PER_QUEUE of both servers (default 1: one worker each, so "
                         "that the servers differ in isolation only)")
    args = ap.parse_args()
    want = {args.only} if args.only else {"latency", "throughput", "restart"}
    install = base.find_install(args.install)
    rounds = 2000 if args.quick else 20000
    seconds = 3.0 if args.quick else 10.0
    tpq = ["THREADS_PER_QUEUE", str(args.threads_per_queue)]
    servers = {"in-process": RedisServer(install / "redisai.so", tpq),
               "isolated": RedisServer(install / "redisai.so", [*ALL, *tpq])}
    try:
        clients = {k: base.Client(s.port) for k, s in servers.items()}
        for c in clients.values():
            store_models(c)
            for run in RUNS.values():
                for _ in range(20):
                    c.call(*run)  # warm up: sessions, channels, arenas
        print(f"# isolated vs in-process, same run ({rounds} sequential runs each, "
              f"interleaved by 100)")
        print(f"{'model':12} {'in-proc p50':>12} {'isolated p50':>13} {'overhead':>9} "
              f"{'in-proc p99':>12} {'isolated p99':>13}")
        for name in ("onnx_add", "torch_add", "tf_mul", "onnx_cnn", "torch_cnn") \
                if "latency" in want else ():
            t = latency(clients, RUNS[name], rounds if "cnn" not in name else rounds // 4)
            a, b = pct(t["in-process"], 0.5) * 1e6, pct(t["isolated"], 0.5) * 1e6
            a99, b99 = pct(t["in-process"], 0.99) * 1e6, pct(t["isolated"], 0.99) * 1e6
            print(f"{name:12} {a:10.1f}us {b:11.1f}us {b - a:7.1f}us {a99:10.1f}us {b99:11.1f}us")
        print(f"\n# CNN, 32 clients, {seconds:.0f} s each, THREADS_PER_QUEUE "
              f"{args.threads_per_queue}")
        for name in ("onnx_cnn", "torch_cnn") if "throughput" in want else ():
            r = {k: throughput(s.port, RUNS[name], 32, seconds) for k, s in servers.items()}
            print(f"{name:12} in-process {r['in-process']:8.0f}/s  isolated "
                  f"{r['isolated']:8.0f}/s  ratio {r['isolated'] / r['in-process']:.3f}")
        print("\n# host restart: SIGKILL -> first successful run (median of 5)")
        iso = clients["isolated"]
        for kind, name in (("ONNX", "onnx_add"), ("TORCH", "torch_add"), ("TF", "tf_mul")) \
                if "restart" in want else ():
            ts = restart_time(iso, kind, RUNS[name], 5)
            print(f"{kind:6} median {statistics.median(ts) * 1e3:8.1f} ms  "
                  f"min {min(ts) * 1e3:8.1f} ms  max {max(ts) * 1e3:8.1f} ms")
    finally:
        for s in servers.values():
            s.stop()


if __name__ == "__main__":
    main()
