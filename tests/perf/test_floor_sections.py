"""bench/floor_sections.py: the other benchmarks' results beside bench_floor.py's table and
picture. Each committed result of bench/results/ is recognised by its keys and gives a table
whose rows carry its own figures; floor_table.py --with prints them after the floor table, and
floor_plot.py --with draws one panel per result into --out."""
from __future__ import annotations

import json
import pathlib
import statistics
import subprocess
import sys

import pytest

from paths import ROOT

sys.path.insert(0, str(ROOT / "bench"))
import floor_sections  # noqa: E402

RESULTS = ROOT / "bench" / "results"
KINDS = {"threads-": "threads", "torch-path-": "torch-path", "isolation-async-": "isolation",
         "profile-modcpu-": "modcpu", "instructions-": "instructions",
         "isolation-outputs-": "isolation-outputs"}


def results_of(prefix: str) -> list[pathlib.Path]:
    return sorted(RESULTS.glob(f"{prefix}*.json"))


@pytest.mark.parametrize("prefix", list(KINDS))
def test_every_committed_result_is_recognised(prefix: str) -> None:
    files = results_of(prefix)
    assert files, f"no {prefix}*.json in bench/results"
    for path in files:
        doc = json.loads(path.read_text())
        assert floor_sections.kind_of(doc) == KINDS[prefix], path.name
        title, lines = floor_sections.section(doc)
        assert title and len(lines) > 2, path.name
        # a Markdown table: header, separator, rows with the header's column count
        cols = lines[0].count("|")
        assert all(line.count("|") == cols for line in lines), path.name


def test_a_floor_result_is_not_taken_for_another_benchmark() -> None:
    floor = sorted(p for p in RESULTS.glob("2026*.json"))[-1]
    with pytest.raises(ValueError):
        floor_sections.kind_of(json.loads(floor.read_text()))


def test_the_tables_carry_the_results_figures() -> None:
    instr = json.loads(results_of("instructions-")[-1].read_text())
    ping = instr["per_request"][0]["PING"]["core"]
    _, lines = floor_sections.instructions(instr)
    assert f"| PING | {ping:,.0f} |" in "\n".join(lines)
    modcpu = json.loads(results_of("profile-modcpu-")[0].read_text())
    _, lines = floor_sections.modcpu(modcpu)
    module = next(line for line in lines if line.startswith("| module |"))
    before, after = (float(x) for x in module.split("|")[2:4])
    assert 0 < after < before  # the module's share fell in that run (docs/performance.md)
    outputs = json.loads(results_of("isolation-outputs-")[-1].read_text())
    _, lines = floor_sections.isolation_outputs(outputs)
    [row] = [r for r in outputs["rows"] if r.get("bytes") == 1 << 20 and r.get("cmd") == "dag"]
    first = outputs["trees"][0].split("=", 1)[0]
    line = next(line for line in lines if line.startswith("| 1 MiB dag |"))
    assert line.split("|")[2].strip() == f"{statistics.median(row['p50_us'][first]):.1f}"


def test_floor_table_and_plot_take_the_other_results(tmp_path: pathlib.Path) -> None:
    floor = sorted(p for p in RESULTS.glob("2026*.json"))[-1]
    others = [results_of(prefix)[-1] for prefix in KINDS]
    args = [a for p in others for a in ("--with", str(p))]
    res = subprocess.run([sys.executable, str(ROOT / "bench" / "floor_table.py"), str(floor),
                          *args], capture_output=True, text=True, check=True)
    for doc in (json.loads(p.read_text()) for p in others):
        assert floor_sections.section(doc)[0] in res.stdout
    res = subprocess.run([sys.executable, str(ROOT / "bench" / "floor_plot.py"), str(floor),
                          *args, "--out", str(tmp_path)], capture_output=True, text=True,
                         check=True)
    for png in (tmp_path / f"{floor.stem}.png", tmp_path / f"{floor.stem}-all.png"):
        assert png.is_file() and png.read_bytes()[:4] == b"\x89PNG"
        assert f"wrote {png}" in res.stdout  # every file written is named
