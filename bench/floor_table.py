"""Markdown tables of a bench_floor result (and, with --with, of the other benchmarks' results).

A Markdown table of a bench_floor.py result: every figure with its floor, the ratio and its
target (docs/performance.md#targets), one column group per install tree measured (--install
LABEL=DIR in bench_floor.py); with --with, the tables of the other benchmarks' results after it
(bench/floor_sections.py: thread settings, Torch run path, isolation, module CPU, instructions
per request).

    bench/run floor_table bench/results/<stamp>.json [--with bench/results/OTHER.json ...]
"""
from __future__ import annotations

import argparse
import json
import pathlib
import sys
from typing import Any, Callable

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import floor_sections  # noqa: E402

MB = 1024 * 1024

Row = tuple[str, Callable[[dict[str, Any]], float], Callable[[dict[str, Any]], float], str]


def _rows(kind: str) -> list[Row]:
    """(figure, value, floor it is compared with, target) for one backend."""
    def b(r: dict[str, Any]) -> dict[str, Any]:
        return r["backends"][kind]

    return [
        (f"{kind} trivial, 1 client, p50 us (floor: PING p50)",
         lambda r: b(r)["trivial_1client"]["run_p50_us"],
         lambda r: b(r)["trivial_1client"]["ping_p50_us"], "<= 1.20x"),
        (f"{kind} CNN, 1 client, p50 us (floor: PING + in-process p50)",
         lambda r: b(r)["cnn_1client"]["run_p50_us"],
         lambda r: b(r)["cnn_1client"]["ping_p50_us"] + b(r)["cnn_1client"]["floor_p50_us"],
         "<= 1.10x"),
        (f"{kind} CNN, 32 clients, req/s (floor: in-process, 1 thread)",
         lambda r: b(r)["cnn_32clients"]["rps"],
         lambda r: b(r)["cnn_32clients"]["floor_rps"], ">= 0.85x"),
    ]


def _blob_rows(run: dict[str, Any]) -> list[Row]:
    rows: list[Row] = []
    for i, row in enumerate(run.get("blobs", [])):
        size = row["size"]
        human = f"{size // MB} MB" if size >= MB else f"{size // 1024} KB"
        # throughput ratio = time of the plain command / time of ours
        rows.append((f"TENSORSET BLOB {human}, us (floor: SET)",
                     lambda r, i=i: r["blobs"][i]["TENSORSET"]["p50_us"],
                     lambda r, i=i: r["blobs"][i]["SET"]["p50_us"], ">= 0.95x (SET/TENSORSET)"))
        rows.append((f"TENSORGET BLOB {human}, us (floor: GET)",
                     lambda r, i=i: r["blobs"][i]["TENSORGET"]["p50_us"],
                     lambda r, i=i: r["blobs"][i]["GET"]["p50_us"], ">= 0.95x (GET/TENSORGET)"))
    return rows


def table(doc: dict[str, Any]) -> str:
    runs = doc["runs"] if "runs" in doc else {doc.get("label") or "run": doc}
    labels = list(runs)
    first = runs[labels[0]]
    head = "| figure | " + " | ".join(f"{lab} | floor | ratio" for lab in labels) + " | target |"
    sep = "|---|" + "---:|---:|---:|" * len(labels) + "---|"
    lines = [head, sep]
    rows: list[Row] = []
    for kind in first["backends"]:
        rows += _rows(kind)
    rows += _blob_rows(first)
    for name, value, floor, target in rows:
        cells = []
        for lab in labels:
            v, f = value(runs[lab]), floor(runs[lab])
            # time figures: ours / floor; the BLOB ones and throughput: as the target reads
            if "req/s" in name:
                ratio = v / f
            elif "BLOB" in name:
                ratio = f / v
            else:
                ratio = v / f
            cells.append(f"{v:,.1f} | {f:,.1f} | {ratio:.2f}x")
        lines.append(f"| {name} | " + " | ".join(cells) + f" | {target} |")
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("result", type=pathlib.Path, help="a bench_floor.py result JSON")
    ap.add_argument("--with", dest="others", action="append", default=[], type=pathlib.Path,
                    metavar="JSON", help="another benchmark's result (repeatable)")
    opts = ap.parse_args()
    print(table(json.loads(opts.result.read_text())))
    others = [json.loads(p.read_text()) for p in opts.others]
    if others:
        print(floor_sections.markdown(others))
    return 0


if __name__ == "__main__":
    sys.exit(main())
