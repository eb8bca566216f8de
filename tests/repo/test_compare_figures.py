"""The comparison tables of README.md and docs/performance.md are made from the results file
they name (bench/compare_report.py), never typed by hand: each block between its markers is
what `bench/bench_compare.py --update-docs <that file>` writes."""
from __future__ import annotations

import json
import sys

import pytest

from paths import ROOT

sys.path.insert(0, str(ROOT / "bench"))
import compare_report  # noqa: E402


@pytest.mark.parametrize("page", sorted(compare_report.PAGES))
def test_comparison_block_matches_its_results_file(page: str) -> None:
    text = (ROOT / page).read_text()
    results = compare_report.named_results(text)
    path = ROOT / results
    assert path.is_file(), f"{page} names {results}, which does not exist"
    doc = json.loads(path.read_text())
    want = compare_report.rewrite(text, compare_report.PAGES[page], results, doc)
    assert text == want, (f"{page}'s comparison tables differ from {results}: run "
                          f"`PYTHONPATH=. .venv/bin/python bench/bench_compare.py --update-docs "
                          f"{results}`")


def test_the_block_would_catch_a_typed_figure() -> None:
    text = (ROOT / "README.md").read_text()
    results = compare_report.named_results(text)
    doc = json.loads((ROOT / results).read_text())
    doc["cells"][0]["rps"]["median"] += 1000
    assert compare_report.rewrite(text, "headline", results, doc) != text
