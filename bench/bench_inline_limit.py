"""INLINE_RUN_MAX_US against the CNNs (a benchmark, not a test): which limit serves one client
fastest without costing 32 clients their throughput.

For each backend, one redis-server per limit (THREADS_PER_QUEUE 1, the CNN of
bench/floor_models.py stored as `m`), in alternating rounds: 1 client with PING and
AI.MODELEXECUTE interleaved on one connection (p50s), then 32 clients on AI.MODELEXECUTE (req/s),
all with bench/floor/rai_load.c. Prints medians and ranges over the rounds and the ratios to the
first limit given; writes bench/results/inline-limit-<stamp>.json.

    PYTHONPATH=. python bench/bench_inline_limit.py [--limits default,0,300] [--kinds TORCH,TF,ONNX]
                                                    [--rounds 3] [--seconds 2]
"""
from __future__ import annotations

import argparse
import datetime
import json
import pathlib
import statistics
import subprocess
import sys
import tempfile
from typing import Any

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import bench as base  # noqa: E402
import floor_tools  # noqa: E402

from paths import backend_file  # noqa: E402
from redis_server import RedisServer  # noqa: E402

BACKEND_DIRS = {"TF": "tensorflow", "TORCH": "torch", "ONNX": "onnxruntime"}


def start(kind: str, install: pathlib.Path, entry: dict[str, Any], limit: str) -> tuple[RedisServer, bytes]:
    args = [kind, str(backend_file(install, BACKEND_DIRS[kind])), "THREADS_PER_QUEUE", "1"]
    if limit != "default":
        args += ["INLINE_RUN_MAX_US", limit]
    srv = RedisServer(install / "redisai.so", args)
    c = base.Client(srv.port)
    io: list[Any] = []
    if entry["named"]:
        io = ["INPUTS", len(entry["inputs"]), *[i["name"] for i in entry["inputs"]],
              "OUTPUTS", 1, entry["outputs"][0]]
    c.call("AI.MODELSTORE", "m", kind, "CPU", *io, "BLOB", pathlib.Path(entry["blob"]).read_bytes())
    keys = []
    for n, i in enumerate(entry["inputs"]):
        c.call("AI.TENSORSET", f"x{n}", i["dtype"], *i["shape"], "BLOB",
               pathlib.Path(i["file"]).read_bytes())
        keys.append(f"x{n}")
    return srv, floor_tools.resp("AI.MODELEXECUTE", "m", "INPUTS", len(keys), *keys, "OUTPUTS", 1, "y")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--install")
    ap.add_argument("--build", default=str(HERE.parent / "build"))
    ap.add_argument("--limits", default="default,0,300")
    ap.add_argument("--kinds", default="TORCH,TF,ONNX")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=2.0)
    opts = ap.parse_args()
    install = base.find_install(opts.install).resolve()
    _, load_exe = floor_tools.build(pathlib.Path(opts.build))
    work = pathlib.Path(tempfile.mkdtemp(prefix="bench-inline-"))
    subprocess.run([sys.executable, str(HERE / "floor_models.py"), str(work / "models")], check=True)
    manifest = json.loads((work / "models" / "manifest.json").read_text())
    limits = [s.strip() for s in opts.limits.split(",") if s.strip()]
    ping = floor_tools.resp("PING")
    out: dict[str, Any] = {"limits": limits, "rounds": opts.rounds, "results": {}}
    for kind in [k.strip().upper() for k in opts.kinds.split(",") if k.strip()]:
        res = {lim: {"p50_us": [], "ping_p50_us": [], "rps32": [], "inline_runs": []} for lim in limits}
        for r in range(opts.rounds):
            order = limits if r % 2 == 0 else limits[::-1]
            for lim in order:
                srv, cmd = start(kind, install, manifest["cnn"][kind], lim)
                try:
                    load = floor_tools.Load(load_exe, srv.port, work)
                    load.run([cmd], clients=1, requests=300)
                    pr, ex = load.run([ping, cmd], clients=1, seconds=opts.seconds, warmup=50)
                    (t32,) = load.run([cmd], clients=32, seconds=opts.seconds, warmup=5)
                    info = base.Client(srv.port).call("INFO", "ai_inline_runs")
                    text = bytes(info).decode()
                    n_inline = next((int(ln.split(":")[1]) for ln in text.splitlines()
                                     if ln.startswith("ai_inline_runs:")), -1)
                    res[lim]["p50_us"].append(ex["p50_us"])
                    res[lim]["ping_p50_us"].append(pr["p50_us"])
                    res[lim]["rps32"].append(t32["rps"])
                    res[lim]["inline_runs"].append(n_inline)
                finally:
                    srv.stop()
        out["results"][kind] = res
        base_lim = limits[0]
        print(f"\n{kind} CNN (medians over {opts.rounds} rounds [min-max]; ratio to {base_lim})")
        for lim in limits:
            m = res[lim]

            def med(k: str) -> float:
                return statistics.median(m[k])

            print(f"  INLINE_RUN_MAX_US {lim:>8}: 1 client p50 {med('p50_us'):7.1f} us "
                  f"[{min(m['p50_us']):.1f}-{max(m['p50_us']):.1f}] (PING {med('ping_p50_us'):.1f})  "
                  f"p50 ratio {med('p50_us') / statistics.median(res[base_lim]['p50_us']):.2f}  |  "
                  f"32 clients {med('rps32'):8.0f} req/s [{min(m['rps32']):.0f}-{max(m['rps32']):.0f}]  "
                  f"ratio {med('rps32') / statistics.median(res[base_lim]['rps32']):.2f}  "
                  f"inline runs {m['inline_runs']}")
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    path = HERE / "results" / f"inline-limit-{stamp}.json"
    path.write_text(json.dumps(out, indent=1))
    print(f"\nwrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
