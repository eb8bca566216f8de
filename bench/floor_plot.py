"""The pictures of a bench_floor result (and, with --with, a panel per other result).

The picture of bench/bench_floor.py's results: per backend, latency percentiles and
throughput against the client count, with the PING and in-process floors drawn in.

    bench/run floor_plot bench/results/<stamp>.json   # redraws <stamp>.png into --out DIR
    bench/run floor_plot bench/results/<stamp>.json --with OTHER.json ...
                                          # and <stamp>-all.png, a panel per other result

--out DIR is by default a folder outside the repository (bench/README.md); --out bench/results
redraws a committed picture.
"""
from __future__ import annotations

import argparse
import json
import pathlib
import sys
from typing import Any

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import bench as base  # noqa: E402  (add_out_option, wrote)
import floor_sections  # noqa: E402

import matplotlib

matplotlib.use("Agg")  # files only, no display
import matplotlib.pyplot as plt  # noqa: E402

MODELS = (("trivial", "trivial 2x2", "tab:blue"), ("cnn", "MNIST CNN", "tab:red"))


def draw(results: dict[str, Any], path: pathlib.Path) -> pathlib.Path:
    kinds = list(results["backends"])
    fig, axes = plt.subplots(2, len(kinds), figsize=(5.2 * len(kinds), 8.5), squeeze=False)
    for col, kind in enumerate(kinds):
        r = results["backends"][kind]
        sweep = r["sweep"]
        clients = [x["clients"] for x in sweep["ping"]]
        lat, thr = axes[0][col], axes[1][col]
        ping_p50 = r["cnn_1client"]["ping_p50_us"]
        for model, label, color in MODELS:
            rows = sweep[model]
            lat.plot(clients, [x["p50_us"] for x in rows], "o-", color=color, label=f"{label} p50")
            lat.plot(clients, [x["p99_us"] for x in rows], "s--", color=color, alpha=.6,
                     label=f"{label} p99")
            thr.plot(clients, [x["rps"] for x in rows], "o-", color=color, label=label)
            floor = r[f"{model}_1client"]
            lat.axhline(ping_p50 + floor["floor_p50_us"], color=color, lw=1, ls=":",
                        label=f"PING + in-process p50 ({label})")
            thr.axhline(floor["floor_rps"], color=color, lw=1, ls=":",
                        label=f"in-process, 1 thread ({label})")
        lat.plot(clients, [x["p50_us"] for x in sweep["ping"]], "^-", color="gray", label="PING p50")
        thr.plot(clients, [x["rps"] for x in sweep["ping"]], "^-", color="gray", alpha=.6,
                 label="PING")
        lat.axhline(ping_p50, color="gray", lw=1, ls=":", label="PING p50, 1 client")
        thr.axhline(0.85 * r["cnn_1client"]["floor_rps"], color="tab:red", lw=.8, ls="-.",
                    alpha=.5, label="target: 0.85x CNN in-process")
        for ax in (lat, thr):
            ax.set_xscale("log", base=2)
            ax.set_xticks(clients, [str(c) for c in clients])
            ax.set_xlabel("clients (one connection each, closed loop)")
            ax.grid(True, which="both", alpha=.3)
        lat.set_yscale("log")
        lat.set_ylabel("round-trip latency, us")
        thr.set_ylabel("AI.MODELEXECUTE per second")
        thr.set_yscale("log")
        lat.set_title(f"{kind} {results.get('versions', {}).get(kind, '')}: latency")
        thr.set_title(f"{kind}: throughput")
        lat.legend(fontsize=6.5, loc="upper left")
        thr.legend(fontsize=6.5, loc="lower right")
    label = f" ({results['label']})" if results.get("label") else ""
    fig.suptitle(f"RedisAI MODELEXECUTE vs the floors, {results['cores']} cores, THREADS_PER_QUEUE 1, "
                 f"no batching - {results['timestamp']}{label}", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return path


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("result", type=pathlib.Path, help="a bench_floor.py result JSON")
    ap.add_argument("--with", dest="others", action="append", default=[], type=pathlib.Path,
                    metavar="JSON", help="another benchmark's result (repeatable)")
    base.add_out_option(ap, "the pictures")
    opts = ap.parse_args()
    src = opts.result
    doc = json.loads(src.read_text())
    if "runs" in doc:  # several install trees measured in one run: the last one
        doc = list(doc["runs"].values())[-1]
    opts.out.mkdir(parents=True, exist_ok=True)
    base.wrote(draw(doc, opts.out / f"{src.stem}.png"))
    if opts.others:
        others = [json.loads(p.read_text()) for p in opts.others]
        base.wrote(floor_sections.draw(others, opts.out / f"{src.stem}-all.png"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
