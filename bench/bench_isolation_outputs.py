"""Isolated outputs used in place: 4 KiB-1 MiB outputs replied by a DAG or stored, per install tree.

Outputs of isolated runs used in place (benchmark, not a test; docs/isolation.md,
"Tensors in shared memory").

An isolated ONNX model `out = 2 * x` on one client, for outputs of 4 KiB to 1 MiB (the host
writes them into its arena, up to ISO_ARENA_TENSOR_MAX), two commands interleaved:

* `dag`:  AI.DAGEXECUTE_RO LOAD 1 x |> AI.MODELEXECUTE m ... OUTPUTS 1 o |> AI.TENSORGET o BLOB
  (the output is only read by the reply: used in place, it is never copied into the core)
* `exec`: AI.MODELEXECUTE m INPUTS 1 x OUTPUTS 1 o (stored under a key: copied once either way,
  on the worker when it is taken out of the arena, or on the main thread when it is stored)

Every install tree given (`--install NAME=DIR`, the first is the baseline) gets a server of
its own (`ISOLATE ONNX`, `THREADS_PER_QUEUE 1`), fresh every round, all up at once and
measured in turn, the order rotating every round, with the same client. Prints p50 us per tree
(the median of the rounds' medians, with their range), each tree / the first, and how many
outputs each server used in place (INFO `outputs_in_place`). Writes
<out>/isolation-outputs-<stamp>.json (--out DIR; by default a folder outside the repository,
bench/README.md).

    bench/run isolation_outputs --install before=DIR --install after=DIR [--rounds 5]
"""
from __future__ import annotations

import argparse
import datetime
import pathlib
import statistics
import sys
import time

import numpy as np

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import bench as base  # noqa: E402  (Client, find_install; puts tests/support/ on sys.path)

from helpers import isolated_host  # noqa: E402
from paths import backend_file  # noqa: E402
from redis_server import RedisServer  # noqa: E402

KiB, MiB = 1 << 10, 1 << 20
SIZES = [4 * KiB, 16 * KiB, 64 * KiB, 256 * KiB, 1 * MiB]
RUN = ("AI.MODELEXECUTE", "m", "INPUTS", 1, "x", "OUTPUTS", 1, "o")
DAG = ("AI.DAGEXECUTE_RO", "LOAD", 1, "x", "|>", *RUN, "|>", "AI.TENSORGET", "o", "BLOB")


class Tree:
    def __init__(self, name: str, install: pathlib.Path, blob: bytes) -> None:
        self.name = name
        args = ["ISOLATE", "ONNX", "ONNX", str(backend_file(install, "onnxruntime")),
                "THREADS_PER_QUEUE", "1"]
        self.srv = RedisServer(install / "redisai.so", args)
        self.c = base.Client(self.srv.port)
        self.c.call("AI.MODELSTORE", "m", "ONNX", "CPU", "BLOB", blob)

    def set_input(self, x: np.ndarray) -> None:
        self.c.call("AI.TENSORSET", "x", "FLOAT", *x.shape, "BLOB", x.tobytes())
        for _ in range(5):  # warm-up: the first runs of a shape allocate
            self.c.call(*RUN)
            self.c.call(*DAG)

    def measure(self, n: int) -> tuple[float, float]:
        """Median seconds of dag and exec, interleaved."""
        dag, ex = [], []
        for _ in range(n):
            t0 = time.perf_counter()
            self.c.call(*DAG)
            dag.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            self.c.call(*RUN)
            ex.append(time.perf_counter() - t0)
        return statistics.median(dag), statistics.median(ex)

    def in_place(self) -> int:
        info = isolated_host(bytes(self.c.call("INFO", "MODULES")))
        return int(info.get("outputs_in_place", 0))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--install", action="append", default=[],
                    help="NAME=DIR, repeatable (the first is the baseline); default: this tree")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--n", type=int, default=150, help="requests of each command a round")
    ap.add_argument("--sizes", help="output sizes in KiB, comma-separated (default: all)")
    base.add_out_option(ap)
    args = ap.parse_args()
    sizes = [int(k) * KiB for k in args.sizes.split(",")] if args.sizes else SIZES
    specs = args.install or [f"this={base.find_install(None)}"]
    import scale_models as sm

    blob = sm.onnx_scale(2)
    names = [s.split("=", 1)[0] for s in specs]
    dirs = [pathlib.Path(s.split("=", 1)[1]) for s in specs]
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    # got[size][name][cmd]: one median a round; placed[size][name]: outputs in place
    got = {z: {n: {"dag": [], "exec": []} for n in names} for z in sizes}
    placed = {z: {n: 0 for n in names} for z in sizes}
    for r in range(args.rounds):
        # Fresh servers every round, started in a rotating order: where the scheduler puts a
        # server's threads moved one server's figures by 10-20% for a whole run.
        order = list(range(r % len(specs), len(specs))) + list(range(r % len(specs)))
        trees = {names[i]: Tree(names[i], dirs[i], blob) for i in order}
        try:
            for size in sizes:
                x = (np.arange(size // 4, dtype=np.float32) % 97 + 0.5).reshape(1, -1)
                for i in order:
                    t = trees[names[i]]
                    t.set_input(x)
                    before = t.in_place()
                    d, e = t.measure(args.n)
                    got[size][t.name]["dag"].append(d * 1e6)
                    got[size][t.name]["exec"].append(e * 1e6)
                    placed[size][t.name] += t.in_place() - before
        finally:
            for t in trees.values():
                t.srv.stop()
        print(f"round {r + 1}/{args.rounds} done", flush=True)
    rows = []
    head = f"{'output':>8} {'cmd':5} " + " ".join(f"{n + ' p50 us':>24}" for n in names)
    print(head + "".join(f" {n + '/' + names[0]:>14}" for n in names[1:]))
    for size in sizes:
        label = f"{size // MiB} MiB" if size >= MiB else f"{size // KiB} KiB"
        for cmd in ("dag", "exec"):
            meds = [statistics.median(got[size][n][cmd]) for n in names]
            cells = [f"{m:8.1f} ({min(got[size][n][cmd]):.1f}-{max(got[size][n][cmd]):.1f})"
                     for m, n in zip(meds, names)]
            print(f"{label:>8} {cmd:5} " + " ".join(f"{c:>24}" for c in cells)
                  + "".join(f" {m / meds[0]:14.2f}" for m in meds[1:]), flush=True)
            rows.append({"bytes": size, "cmd": cmd,
                         "p50_us": {n: got[size][n][cmd] for n in names}})
        print(f"{'':>8} outputs used in place: "
              + ", ".join(f"{n} {placed[size][n]}" for n in names), flush=True)
        rows.append({"bytes": size, "in_place": placed[size]})
    base.write_result(args.out, f"isolation-outputs-{stamp}",
                      {"trees": specs, "rounds": args.rounds, "n": args.n, "rows": rows})


if __name__ == "__main__":
    main()
