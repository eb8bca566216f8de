#!/usr/bin/env python3
"""A lone AI client beside plain traffic: GET at 32 clients while one client runs a model back to back.

A lone AI client beside plain Redis traffic (a benchmark, not a test): what the spins of a lone
client's request (docs/performance.md, "Main-thread spin") cost the server's other clients.

Per install tree (`--install LABEL=DIR`, repeatable; the first is the one compared with), one
redis-server (THREADS_PER_QUEUE 1) with one backend and the models of bench/floor_models.py. Each
round, on every server in turn (the order rotating): `GET` of a 100-byte value at 32 clients for
`--seconds`, and meanwhile one client running AI.MODELEXECUTE of `--model` back to back, both with
bench/floor/rai_load.c (two processes). Prints the medians and ranges of both throughputs and
their ratios to the first tree; writes <out>/mixed-<stamp>.json
(--out DIR; by default a folder outside the repository, bench/README.md).

    bench/run mixed_load --install before=OLD --install after=NEW
        [--kind TORCH] [--model cnn] [--rounds 7] [--seconds 3]
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import pathlib
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from typing import Any

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))  # build_tools, for tests/support/redis_server.py
import bench as base  # noqa: E402  (puts tests/support/ on sys.path)
import bench_floor  # noqa: E402
import floor_tools  # noqa: E402

GET = floor_tools.resp("GET", "k")


def summarize(values: list[float]) -> dict[str, float]:
    return {"median": float(statistics.median(values)), "min": min(values), "max": max(values)}


def one_round(b: bench_floor.Backend, ai_load: floor_tools.Load, model: str,
              seconds: float) -> tuple[float, float]:
    """GET req/s at 32 clients and AI req/s of the lone client, measured at the same time."""
    ai: dict[str, Any] = {}
    errors: list[BaseException] = []

    def lone_client() -> None:
        try:
            (ai["res"],) = ai_load.run([b.cmds[model]], clients=1, seconds=seconds + 0.5,
                                       warmup=10)
        except BaseException as exc:  # reported below, on the main thread
            errors.append(exc)

    th = threading.Thread(target=lone_client)
    th.start()
    (get,) = b.load.run([GET], clients=32, seconds=seconds, warmup=10)
    th.join()
    if errors:
        raise errors[0]
    return get["rps"], ai["res"]["rps"]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--install", action="append", default=[], metavar="LABEL=DIR")
    ap.add_argument("--build", default=str(HERE.parent / "build"))
    ap.add_argument("--kind", default="TORCH")
    ap.add_argument("--model", default="cnn", choices=["cnn", "trivial"])
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--models", default="", help="folder of floor_models.py's output, reused "
                    "when it holds a manifest (else made there)")
    base.add_out_option(ap)
    opts = ap.parse_args()
    trees: list[tuple[str, pathlib.Path]] = []
    for v in opts.install:
        label, sep, path = v.partition("=")
        if not sep or not label:
            raise SystemExit(f"--install {v}: expected LABEL=DIR")
        trees.append((label, pathlib.Path(path).resolve()))
    if not trees:
        trees = [("this", base.find_install(None))]

    t0 = time.perf_counter()
    floor_exe, load_exe = floor_tools.build(pathlib.Path(opts.build))
    work = pathlib.Path(tempfile.mkdtemp(prefix="bench-mixed-"))
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    doc: dict[str, Any] = {"timestamp": stamp, "cores": os.cpu_count(), "kind": opts.kind,
                           "model": opts.model, "rounds": opts.rounds, "seconds": opts.seconds,
                           "trees": {label: str(path) for label, path in trees},
                           "loadavg_start": os.getloadavg()}
    up: dict[str, tuple[bench_floor.Backend, floor_tools.Load]] = {}
    raw: dict[str, dict[str, list[float]]] = {label: {"get": [], "ai": []} for label, _ in trees}
    try:
        models = pathlib.Path(opts.models) if opts.models else work / "models"
        if not (models / "manifest.json").is_file():
            print("building the models with the frameworks (child process) ...", flush=True)
            subprocess.run([sys.executable, str(HERE / "floor_models.py"), str(models)],
                           check=True)
        manifest = json.loads((models / "manifest.json").read_text())
        for label, tree in trees:
            # two command folders: each Load names its files cmd0, cmd1, ...
            get_dir, ai_dir = work / f"{label}-get", work / f"{label}-ai"
            get_dir.mkdir()
            ai_dir.mkdir()
            b = bench_floor.Backend(opts.kind, tree, manifest, load_exe, floor_exe, get_dir)
            up[label] = (b, floor_tools.Load(load_exe, b.srv.port, ai_dir))
            b.client.call("SET", "k", "x" * 100)
            b.load.run([b.cmds[opts.model]], requests=5, warmup=50)
            b.check_output(opts.model)
        labels = [label for label, _ in trees]
        for r in range(opts.rounds):
            for label in labels[r % len(labels):] + labels[:r % len(labels)]:
                b, ai_load = up[label]
                get_rps, ai_rps = one_round(b, ai_load, opts.model, opts.seconds)
                raw[label]["get"].append(get_rps)
                raw[label]["ai"].append(ai_rps)
            print(f"  round {r + 1}/{opts.rounds} done", flush=True)
        for b, _ in up.values():
            b.check_output(opts.model)
    finally:
        for b, _ in up.values():
            b.stop()
        shutil.rmtree(work, ignore_errors=True)
    doc["loadavg_end"] = os.getloadavg()
    doc["results"] = {label: {"get_rps": summarize(v["get"]), "ai_rps": summarize(v["ai"]),
                              "rounds": v} for label, v in raw.items()}
    first = trees[0][0]
    print(f"\n{opts.kind} {opts.model}: GET at 32 clients beside one AI client, req/s, median "
          f"[min-max] of {opts.rounds} rounds; ratios to {first}")
    for label, res in doc["results"].items():
        g, a = res["get_rps"], res["ai_rps"]
        gr = g["median"] / doc["results"][first]["get_rps"]["median"]
        ar = a["median"] / doc["results"][first]["ai_rps"]["median"]
        print(f"  {label:>10}: GET {g['median']:>9,.0f} [{g['min']:,.0f}-{g['max']:,.0f}] "
              f"{gr:.2f}x   AI {a['median']:>7,.0f} [{a['min']:,.0f}-{a['max']:,.0f}] {ar:.2f}x")
    path = base.write_result(opts.out, f"mixed-{stamp}", doc)
    print(f"total {time.perf_counter() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
