"""What the one copy of an output into Redis's allocator costs, per backend and output size.

An execution's outputs are made by the framework, in its own memory; the core copies each
output once into Redis's allocator when it stores it under a key (module/tensor.c
Tensor_ForKeyspace), so that used_memory, maxmemory and eviction see it. Intermediate DAG
tensors and outputs only read by a DAG's TENSORGET are not copied.

For each backend (TF, TORCH, ONNX) and output size (1 KiB, 1 MiB, 16 MiB; the model is
out = 2 * x, so the output is as large as the input), interleaved on one connection:

* `exec`:  AI.MODELEXECUTE m INPUTS 1 x OUTPUTS 1 o       (stores o: copies the output)
* `nostore`: AI.DAGEXECUTE_RO LOAD 1 x |> AI.MODELEXECUTE ... (the same run; the output is
  dropped, nothing copied or stored)

and, in this process, a copy of the same size: `memcpy` into a fresh buffer (allocation and
first touch included, as the server's copy into new memory) and into a reused one. It
prints the medians, `exec - nostore` (everything storing costs: the copy, the key, the
replication arguments, freeing the key's previous value) and the copy's share of `exec`.
Last, what the maxmemory room check (module/memory.c) adds to a 1 KiB ONNX execution.
On a busy machine single rows can be far off (Torch's intra-op threads suffer most): read
the columns of one row together, as they were measured interleaved.

    bench/run output_copy [--install DIR] [--quick]
"""
from __future__ import annotations

import argparse
import pathlib
import statistics
import sys
import time

import numpy as np

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import bench as base  # noqa: E402  (bench/bench.py: Client, find_install; puts tests/support/ on sys.path)

from paths import backend_file  # noqa: E402
from redis_server import RedisServer  # noqa: E402

KiB, MiB = 1 << 10, 1 << 20
SIZES = [1 * KiB, 1 * MiB, 16 * MiB]
KINDS = ("TF", "TORCH", "ONNX")
BACKEND_DIRS = {"TF": "tensorflow", "TORCH": "torch", "ONNX": "onnxruntime"}


def iterations(size: int, quick: bool) -> int:
    n = 400 if size <= 64 * KiB else 150 if size <= 4 * MiB else 40
    return max(10, n // 5) if quick else n


def copy_times(size: int, n: int) -> tuple[float, float]:
    """Median seconds of a memcpy of size bytes: into a fresh buffer, into a reused one."""
    src = np.ones(size, dtype=np.uint8)
    dst = np.empty_like(src)
    fresh, warm = [], []
    for _ in range(n):
        t0 = time.perf_counter()
        out = np.empty_like(src)
        np.copyto(out, src)
        fresh.append(time.perf_counter() - t0)
        del out
        t0 = time.perf_counter()
        np.copyto(dst, src)
        warm.append(time.perf_counter() - t0)
    return statistics.median(fresh), statistics.median(warm)


def store_models(c: base.Client) -> None:
    import scale_models as sm

    sm.build_all((2,))
    c.call("AI.MODELSTORE", "m:TF", "TF", "CPU", "INPUTS", 1, "x", "OUTPUTS", 1, "out",
           "BLOB", sm.tf_scale(2))
    c.call("AI.MODELSTORE", "m:TORCH", "TORCH", "CPU", "BLOB", sm.torch_scale(2))
    c.call("AI.MODELSTORE", "m:ONNX", "ONNX", "CPU", "BLOB", sm.onnx_scale(2))


def measure(c: base.Client, kind: str, n: int) -> tuple[float, float]:
    run = ("AI.MODELEXECUTE", f"m:{kind}", "INPUTS", 1, "x", "OUTPUTS", 1, "o")
    for _ in range(3):  # warm-up: first runs allocate framework state
        c.call(*run)
        c.call("AI.DAGEXECUTE_RO", "LOAD", 1, "x", "|>", *run)
    ex, ns = [], []
    for _ in range(n):
        t0 = time.perf_counter()
        c.call(*run)
        ex.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        c.call("AI.DAGEXECUTE_RO", "LOAD", 1, "x", "|>", *run)
        ns.append(time.perf_counter() - t0)
    return statistics.median(ex), statistics.median(ns)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--install")
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    install = base.find_install(args.install)
    module_args: list[str] = []
    for kind in KINDS:
        module_args += [kind, str(backend_file(install, BACKEND_DIRS[kind]))]
    srv = RedisServer(install / "redisai.so", module_args)
    try:
        c = base.Client(srv.port)
        store_models(c)
        us = 1e6
        print(f"{'backend':7} {'output':>7} {'exec us':>9} {'nostore us':>10} {'store us':>9} "
              f"{'memcpy fresh':>12} {'memcpy warm':>11} {'copy/exec':>9}")
        for size in SIZES:
            x = np.ones((1, size // 4), dtype=np.float32)
            c.call("AI.TENSORSET", "x", "FLOAT", *x.shape, "BLOB", x.tobytes())
            n = iterations(size, args.quick)
            fresh, warm = copy_times(size, n)
            for kind in KINDS:
                ex, ns = measure(c, kind, n)
                label = f"{size // MiB} MiB" if size >= MiB else f"{size // KiB} KiB"
                print(f"{kind:7} {label:>7} {ex * us:9.1f} {ns * us:10.1f} {(ex - ns) * us:9.1f} "
                      f"{fresh * us:12.1f} {warm * us:11.1f} {fresh / ex:9.1%}", flush=True)
        # The room check (module/memory.c) reads INFO memory once maxmemory is set: what
        # that adds to an execution that stores a small output.
        x = np.ones((1, 256), dtype=np.float32)
        c.call("AI.TENSORSET", "x", "FLOAT", *x.shape, "BLOB", x.tobytes())
        n = iterations(KiB, args.quick)
        free_run, _ = measure(c, "ONNX", n)
        c.call("CONFIG", "SET", "maxmemory", 1 << 30)
        limited, _ = measure(c, "ONNX", n)
        c.call("CONFIG", "SET", "maxmemory", 0)
        free_again, _ = measure(c, "ONNX", n)
        base_us = (free_run + free_again) / 2 * us
        print(f"\nONNX 1 KiB exec: {base_us:.1f} us without maxmemory, {limited * us:.1f} us "
              f"with maxmemory 1gb (room check: {limited * us - base_us:+.1f} us)")
        c.call("FLUSHALL")
    finally:
        srv.stop()


if __name__ == "__main__":
    main()
