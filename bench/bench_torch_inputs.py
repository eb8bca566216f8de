"""What copy-on-first-write Torch inputs cost: reading, writing in place, per input size.

The Torch backend gives scripts and models a view of each input's data whose storage copies
the buffer on its first write access (backends/torch/torch_backend.cpp tensor_from_core,
copy_on_first_write): a run that only reads its inputs copies nothing; the first in-place
write to an input copies that input's buffer once, so keys and DAG slots are never written
through. Interleaved on one connection, per input size:

* `read`:    tensors[0].sum()                       (reads only: no copy)
* `inplace`: tensors[0].add_(1); tensors[0].sum()   (one copy, then the add)
* `fresh`:   (tensors[0] + 1).sum()                 (the same arithmetic into a new buffer)

`inplace - fresh` is what that copy costs beyond the allocation an out-of-place op makes
anyway (near 0: the copy replaces the allocation); `memcpy` is a copy of the same size in this
process (allocation and first touch included): what an unconditional clone of every input
would add to every run, `read` included. The 4-byte row shows the fixed per-run cost.

    bench/run torch_inputs [--install DIR] [--quick]
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
import pathlib

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import bench as base  # noqa: E402  (bench/bench.py: Client, find_install; puts tests/support/ on sys.path)

from paths import backend_file  # noqa: E402
from redis_server import RedisServer  # noqa: E402

SCRIPT = '''
def read(tensors: List[Tensor], keys: List[str], args: List[str]):
    return tensors[0].sum()

def inplace(tensors: List[Tensor], keys: List[str], args: List[str]):
    tensors[0].add_(1)
    return tensors[0].sum()

def fresh(tensors: List[Tensor], keys: List[str], args: List[str]):
    return (tensors[0] + 1).sum()
'''
FNS = ("read", "inplace", "fresh")
SIZES = [4, 1 << 20, 16 << 20]


def memcpy_time(size: int, n: int) -> float:
    src = np.ones(size, dtype=np.uint8)
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        out = np.empty_like(src)
        np.copyto(out, src)
        times.append(time.perf_counter() - t0)
        del out
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--install")
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    install = base.find_install(args.install)
    # One intra-op thread: on a busy machine idle-spinning Torch workers swamp the figures.
    srv = RedisServer(install / "redisai.so", ["TORCH", str(backend_file(install, "torch")),
                                               "INTRA_OP_PARALLELISM", "1"])
    try:
        c = base.Client(srv.port)
        c.call("AI.SCRIPTSTORE", "s", "CPU", "ENTRY_POINTS", len(FNS), *FNS, "SOURCE", SCRIPT)
        print(f"{'input':>7} {'read us':>9} {'inplace us':>10} {'fresh us':>9} "
              f"{'inplace-fresh':>13} {'memcpy us':>9}")
        for size in SIZES:
            x = np.ones(size // 4, dtype=np.float32)
            c.call("AI.TENSORSET", "x", "FLOAT", x.size, "BLOB", x.tobytes())
            n = (200 if size <= (1 << 20) else 40) // (5 if args.quick else 1)
            times: dict[str, list[float]] = {f: [] for f in FNS}
            for i in range(n + 3):
                for f in FNS:
                    t0 = time.perf_counter()
                    c.call("AI.SCRIPTEXECUTE", "s", f, "INPUTS", 1, "x", "OUTPUTS", 1, "o")
                    if i >= 3:  # the first runs warm up the interpreter
                        times[f].append(time.perf_counter() - t0)
            med = {f: statistics.median(v) * 1e6 for f, v in times.items()}
            label = f"{size >> 20} MiB" if size >= 1 << 20 else f"{size} B"
            print(f"{label:>7} {med['read']:9.1f} {med['inplace']:10.1f} {med['fresh']:9.1f} "
                  f"{med['inplace'] - med['fresh']:13.1f} {memcpy_time(size, n) * 1e6:9.1f}",
                  flush=True)
        c.call("FLUSHALL")
    finally:
        srv.stop()


if __name__ == "__main__":
    main()
