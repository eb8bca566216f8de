"""What the benchmarks of bench/ print and where they write, read from their sources (no
benchmark runs here): no text of theirs cites the project's issues, which no page explains; the
floor's targets point at the section of docs/performance.md that explains them; and without
--out a benchmark writes outside the repository, so that a run never changes a committed
result of bench/results/ (bench/README.md)."""
from __future__ import annotations

import argparse
import ast
import pathlib
import re
import sys

import pytest

from paths import ROOT

BENCH = ROOT / "bench"
sys.path.insert(0, str(BENCH))
import bench as base  # noqa: E402

SOURCES = sorted(BENCH.glob("*.py")) + [BENCH / "run"]
# "issue 14", "issue #22", "issue 22's target", "the issue's setting"
ISSUE = re.compile(r"\bissues?(?:'s)?\s*(?:#\s*)?\d+|\bthe issue's\b", re.I)


def _texts(path: pathlib.Path) -> list[tuple[int, str]]:
    """Every string literal of a script with its line: docstrings (--help and bench/run print
    them), help texts, print()ed text, the literal parts of f-strings."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return [(node.lineno, node.value) for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str)]


def test_the_scan_sees_printed_text_and_would_catch_an_issue_number() -> None:
    texts = [t for _, t in _texts(BENCH / "bench_floor.py")]
    assert any("Targets (" in t for t in texts)  # the f-string's literal part
    assert ISSUE.search("Targets of issue 14") and ISSUE.search("(the issue's setting)")
    assert not ISSUE.search("a client issues a request")


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: p.name)
def test_no_bench_text_cites_an_issue(path: pathlib.Path) -> None:
    found = [f"{path.name}:{line}: {text.strip()[:80]!r}" for line, text in _texts(path)
             if ISSUE.search(text)]
    assert not found, "a benchmark's text cites an issue; say what the figure is instead:\n" + \
        "\n".join(found)


def _anchors(page: pathlib.Path) -> set[str]:
    heads = re.findall(r"^#+\s+(.*)$", page.read_text(encoding="utf-8"), re.M)
    return {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-") for h in heads}


def test_the_floor_targets_point_at_the_section_explaining_them() -> None:
    import bench_floor  # noqa: PLC0415

    page, _, anchor = bench_floor.TARGETS_DOC.partition("#")
    assert anchor in _anchors(ROOT / page), f"{bench_floor.TARGETS_DOC}: no such heading"
    result = {"backends": {"ONNX": {
        "cnn_1client": {"run_p50_us": 110.0, "ping_p50_us": 50.0, "floor_p50_us": 50.0},
        "trivial_1client": {"run_p50_us": 70.0, "ping_p50_us": 50.0},
        "cnn_32clients": {"rps": 800.0, "floor_rps": 1000.0}}}}
    head, *rows = bench_floor.target_lines(result)
    assert bench_floor.TARGETS_DOC in head
    # each row: the figure, its value, the target, met or missed (1.10x meets <= 1.10x)
    assert [r.split()[-1] for r in rows] == ["met", "missed", "missed"], rows
    assert "1.10x  target <= 1.10x" in rows[0] and "0.80x  target >= 0.85x" in rows[2]


def test_without_out_results_go_outside_the_repository(tmp_path: pathlib.Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    assert base.default_out() == tmp_path / ".cache" / "redisai-bench"
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    assert base.default_out() == tmp_path / "cache" / "redisai-bench"
    # a cache folder set inside the checkout does not bring the results into it
    monkeypatch.setenv("XDG_CACHE_HOME", str(ROOT / "build" / "cache"))
    assert not base.default_out().resolve().is_relative_to(ROOT.resolve())

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    ap = argparse.ArgumentParser()
    base.add_out_option(ap)
    assert ap.parse_args([]).out == tmp_path / "cache" / "redisai-bench"
    assert ap.parse_args(["--out", "bench/results"]).out == pathlib.Path("bench/results")


def test_write_result_names_the_file_it_wrote(tmp_path: pathlib.Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    path = base.write_result(tmp_path / "new", "x-1", {"machine": {}})
    assert path == tmp_path / "new" / "x-1.json" and path.is_file()
    assert f"wrote {path}" in capsys.readouterr().out


def test_every_benchmark_that_writes_results_takes_out() -> None:
    for path in SOURCES:
        text = path.read_text(encoding="utf-8")
        assert '/ "results"' not in text, f"{path.name} writes into bench/results by default"
        if path.name != "bench.py" and ("write_result(" in text or "savefig(" in text):
            assert "add_out_option(ap" in text or path.name == "floor_sections.py", \
                f"{path.name} writes result files without --out (bench.add_out_option)"
