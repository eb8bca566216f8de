"""Auto-batching and DAGs: BATCHSIZE 0 against 32, a 3-op DAG against 3 commands (CNN, 32 clients).

For the MNIST-sized CNN ([N,1,28,28] -> [N,10], PyTorch's MNIST example network, the same
weights for both backends) on TORCH and on ONNX, with 32 concurrent clients (threads, one
connection each, closed loop; the GIL is free while a thread waits on its socket):

1. auto-batching: AI.MODELEXECUTE of one sample per request against a model stored with
   BATCHSIZE 0 and against the same model stored with BATCHSIZE 32;
2. a three-operation DAG (AI.TENSORSET, AI.MODELEXECUTE, AI.TENSORGET in one
   AI.DAGEXECUTE) against the same three commands sent one after the other.

Each figure is requests (or three-command sequences) per second over a fixed window after
a warm-up, with p50/p99 latency of a request (of a whole sequence for part 2). Every client
sends its own input, and every 25th reply is checked against the framework's own output
for that input, so a batch sliced wrongly would be caught. One worker thread per queue
(the default); the benchmark starts its own redis-server on a free port and stops it.
Bounded: about a minute (--quick: about half).

    bench/run batching_dag [--install DIR] [--quick] [--clients N] [--seconds S]
"""
from __future__ import annotations

import argparse
import os
import pathlib
import sys
import threading
import time
from typing import Any, Callable

import numpy as np

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import bench as base  # noqa: E402  (bench/bench.py: Client, find_install; puts tests/support/ on sys.path)

from redis_server import RedisServer  # noqa: E402
import engine_models as em  # noqa: E402

KINDS = ("TORCH", "ONNX")


def pct(xs: list[float], q: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, int(q * len(s)))] if s else float("nan")


def closed_loop(port: int, clients: int, seconds: float, warm: float,
                setup: Callable[[base.Client, int], Any],
                step: Callable[[base.Client, int, Any], None],
                check: Callable[[base.Client, int, Any], None]) -> dict[str, float]:
    """`clients` threads run `step` in a closed loop; counts what completed in the window
    [start + warm, start + warm + seconds]. `check` runs every 25th step, outside timing."""
    lat: list[list[tuple[float, float]]] = [[] for _ in range(clients)]
    errors: list[str] = []
    barrier = threading.Barrier(clients + 1)
    window = [0.0, 0.0]

    def worker(i: int) -> None:
        try:
            c = base.Client(port)
            state = setup(c, i)
            step(c, i, state)
            check(c, i, state)
            barrier.wait()
            mine = lat[i]
            while True:
                t0 = time.perf_counter()
                if t0 >= window[1]:
                    break
                step(c, i, state)
                t1 = time.perf_counter()
                mine.append((t1, t1 - t0))
                if len(mine) % 25 == 0:
                    check(c, i, state)
            c.sock.close()
        except Exception as e:  # noqa: BLE001
            errors.append(f"client {i}: {e!r}")
            try:
                barrier.abort()
            except threading.BrokenBarrierError:
                pass

    threads = [threading.Thread(target=worker, args=(i,), daemon=True) for i in range(clients)]
    for t in threads:
        t.start()
    window[0] = time.perf_counter() + 1.0 + warm  # 1 s for every client to connect and set up
    window[1] = window[0] + seconds
    try:
        barrier.wait()
    except threading.BrokenBarrierError:
        pass
    for t in threads:
        t.join(timeout=seconds + warm + 60)
    if errors:
        raise RuntimeError("; ".join(errors[:3]))
    done = [d for mine in lat for (end, d) in mine if window[0] <= end <= window[1]]
    return {"reqs": len(done), "rps": len(done) / seconds, "p50": pct(done, .5), "p99": pct(done, .99)}


class Setup:
    """The CNN blobs, one input per client and the framework's output for each."""

    def __init__(self, clients: int) -> None:
        import torch  # noqa: PLC0415

        self.blobs = {"TORCH": em.mnist_torch(), "ONNX": em.mnist_onnx()}
        rng = np.random.default_rng(7)
        self.x = [rng.standard_normal((1, 1, 28, 28), dtype=np.float32) for _ in range(clients)]
        net = em._mnist_module()
        with torch.no_grad():
            self.want = [net(torch.from_numpy(x)).numpy() for x in self.x]
        self.versions = {k: v for k, v in em.framework_versions().items() if k in KINDS}


def check_output(got: Any, want: np.ndarray, who: str) -> None:
    arr = np.frombuffer(bytes(got), np.float32).reshape(want.shape)
    if not np.allclose(arr, want, rtol=1e-3, atol=1e-4):
        raise AssertionError(f"{who}: output differs from the framework's: {arr} vs {want}")


def bench_execute(port: int, s: Setup, key: str, clients: int, seconds: float, warm: float):
    def setup(c: base.Client, i: int):
        x = s.x[i]
        c.call("AI.TENSORSET", f"x{i}", "FLOAT", *x.shape, "BLOB", x.tobytes())
        return ("AI.MODELEXECUTE", key, "INPUTS", 1, f"x{i}", "OUTPUTS", 1, f"y{i}")

    def step(c: base.Client, i: int, cmd) -> None:
        c.call(*cmd)

    def check(c: base.Client, i: int, cmd) -> None:
        check_output(c.call("AI.TENSORGET", f"y{i}", "BLOB"), s.want[i], f"{key} client {i}")

    return closed_loop(port, clients, seconds, warm, setup, step, check)


def bench_separate(port: int, s: Setup, key: str, clients: int, seconds: float, warm: float):
    def setup(c: base.Client, i: int):
        x = s.x[i]
        return {"set": ("AI.TENSORSET", f"x{i}", "FLOAT", *x.shape, "BLOB", x.tobytes()),
                "run": ("AI.MODELEXECUTE", key, "INPUTS", 1, f"x{i}", "OUTPUTS", 1, f"y{i}"),
                "get": ("AI.TENSORGET", f"y{i}", "BLOB"), "last": None}

    def step(c: base.Client, i: int, st) -> None:
        c.call(*st["set"])
        c.call(*st["run"])
        st["last"] = bytes(c.call(*st["get"]))

    def check(c: base.Client, i: int, st) -> None:
        check_output(st["last"], s.want[i], f"separate client {i}")

    return closed_loop(port, clients, seconds, warm, setup, step, check)


def bench_dag(port: int, s: Setup, key: str, clients: int, seconds: float, warm: float):
    def setup(c: base.Client, i: int):
        x = s.x[i]
        return {"cmd": ("AI.DAGEXECUTE", "ROUTING", f"x{i}",
                        "|>", "AI.TENSORSET", "x", "FLOAT", *x.shape, "BLOB", x.tobytes(),
                        "|>", "AI.MODELEXECUTE", key, "INPUTS", 1, "x", "OUTPUTS", 1, "y",
                        "|>", "AI.TENSORGET", "y", "BLOB"), "last": None}

    def step(c: base.Client, i: int, st) -> None:
        reply = c.call(*st["cmd"])
        st["last"] = bytes(reply[2])

    def check(c: base.Client, i: int, st) -> None:
        check_output(st["last"], s.want[i], f"DAG client {i}")

    return closed_loop(port, clients, seconds, warm, setup, step, check)


def ms(v: float) -> str:
    return f"{v * 1e3:8.2f}"


def row(label: str, r: dict[str, float]) -> str:
    return f"   {label:<26} | {r['rps']:9.0f} | {ms(r['p50'])} {ms(r['p99'])} | {r['reqs']:7d}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--install", help="install tree (default: newest install/redisai-*/)")
    ap.add_argument("--quick", action="store_true", help="shorter measuring windows")
    ap.add_argument("--clients", type=int, default=32)
    ap.add_argument("--seconds", type=float, default=None, help="measuring window per figure")
    opts = ap.parse_args()
    seconds = opts.seconds or (1.5 if opts.quick else 3.0)
    warm = 0.5

    t_start = time.perf_counter()
    install = base.find_install(opts.install)
    paths = {k: em.backend_path(install, k) for k in KINDS}
    missing = [str(p) for p in paths.values() if not p.is_file()]
    if missing:
        sys.exit("backends missing from the install tree: " + ", ".join(missing))
    print("building the CNN with torch (TorchScript and ONNX export) ...", flush=True)
    s = Setup(opts.clients)
    args: list[str] = []
    for k in KINDS:
        args += [k, str(paths[k])]
    srv = RedisServer(install / "redisai.so", args)
    results: dict[str, dict[str, dict[str, float]]] = {}
    try:
        c = base.Client(srv.port)
        for kind in KINDS:
            c.call("AI.MODELSTORE", f"cnn_{kind}", kind, "CPU", "BLOB", s.blobs[kind])
            c.call("AI.MODELSTORE", f"cnn_{kind}_b32", kind, "CPU", "BATCHSIZE", 32, "BLOB",
                   s.blobs[kind])
        c.sock.close()
        print(f"redisai: {install}  server port {srv.port}  cores {os.cpu_count()}  "
              f"threads per queue 1  clients {opts.clients}  window {seconds:.1f} s "
              f"(+{warm:.1f} s warm-up) per figure")
        print("frameworks: " + ", ".join(f"{k} {v}" for k, v in s.versions.items()))
        for kind in KINDS:
            res = results[kind] = {}
            print()
            print(f"{kind}: MNIST-sized CNN, one [1,1,28,28] sample per request")
            print(f"   {'':<26} | {'req/s':>9} | {'p50 ms':>8} {'p99 ms':>8} | {'reqs':>7}")
            res["bs0"] = bench_execute(srv.port, s, f"cnn_{kind}", opts.clients, seconds, warm)
            print(row("MODELEXECUTE, BATCHSIZE 0", res["bs0"]), flush=True)
            res["bs32"] = bench_execute(srv.port, s, f"cnn_{kind}_b32", opts.clients, seconds, warm)
            print(row("MODELEXECUTE, BATCHSIZE 32", res["bs32"]), flush=True)
            res["sep"] = bench_separate(srv.port, s, f"cnn_{kind}", opts.clients, seconds, warm)
            print(row("SET+EXECUTE+GET, 3 cmds", res["sep"]), flush=True)
            res["dag"] = bench_dag(srv.port, s, f"cnn_{kind}", opts.clients, seconds, warm)
            print(row("the same as one DAGEXECUTE", res["dag"]), flush=True)
            b0, b32, sep, dag = res["bs0"], res["bs32"], res["sep"], res["dag"]
            print(f"   batching: throughput x{b32['rps'] / b0['rps']:.2f}, p50 x{b32['p50'] / b0['p50']:.2f}, "
                  f"p99 x{b32['p99'] / b0['p99']:.2f} (BATCHSIZE 32 / BATCHSIZE 0)")
            print(f"   DAG:      throughput x{dag['rps'] / sep['rps']:.2f}, p50 x{dag['p50'] / sep['p50']:.2f}, "
                  f"p99 x{dag['p99'] / sep['p99']:.2f} (one DAGEXECUTE / three commands)")
        with RawStats(srv.port) as st:
            print()
            print("AI.INFO after the runs (calls = requests; samples = rows):")
            for kind in KINDS:
                for key in (f"cnn_{kind}", f"cnn_{kind}_b32"):
                    i = st.info(key)
                    print(f"   {key:<14} calls {i['calls']:>7}  samples {i['samples']:>7}  "
                          f"errors {i['errors']}  mean run time credited {i['duration'] / max(1, i['calls']) / 1e3:.2f} ms")
    finally:
        srv.stop()
    print()
    print(f"done in {time.perf_counter() - t_start:.1f} s")
    return 0


class RawStats:
    """AI.INFO through the exact-reply client."""

    def __init__(self, port: int) -> None:
        from resp import RawClient  # noqa: PLC0415

        self.c = RawClient(port)

    def __enter__(self) -> "RawStats":
        return self

    def __exit__(self, *exc: object) -> None:
        self.c.close()

    def info(self, key: str) -> dict[str, Any]:
        r = self.c.execute("AI.INFO", key)
        return {r[k].decode(): r[k + 1] for k in range(0, len(r), 2)}


if __name__ == "__main__":
    sys.exit(main())
