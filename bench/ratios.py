"""Paired ratios: one setting's throughput over another's, repetition by repetition.

Both benchmarks that compare settings (bench_threads.py, the comparison's compare_report.py)
measure every setting in turn within a repetition, seconds apart. On a shared machine whose
speed drifts by 20-40% over a run the ratio of two medians drifts with it; the median of the
per-repetition ratios does not.
"""
from __future__ import annotations

import statistics
from typing import Any


def paired_ratios(ra: list[dict[str, Any]] | None,
                  rb: list[dict[str, Any]] | None) -> dict[str, float] | None:
    """The median and quartiles of ra[i]["rps"] / rb[i]["rps"]; None when the repetitions do
    not pair up (missing, or not as many on each side) or no ratio can be taken."""
    if not ra or not rb or len(ra) != len(rb):
        return None
    ratios = [x["rps"] / y["rps"] for x, y in zip(ra, rb) if y.get("rps")]
    if not ratios:
        return None
    q = statistics.quantiles(ratios, n=4) if len(ratios) > 1 else [ratios[0]] * 3
    return {"median": float(statistics.median(ratios)), "q1": q[0], "q3": q[2]}
