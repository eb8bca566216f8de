"""RedisAI 1.2.7 as a peer of the benchmarks (bench/peer.py, `bench/run threads --peer PATH`,
`bench/run compare --peer PATH`), without RedisAI: the options, where its backends are looked
for, the version read from MODULE LIST, and the tables and ratios of results holding a peer.
The peer's own servers run only in the benchmarks (CI has no RedisAI 1.2.7)."""
from __future__ import annotations

import pathlib
import sys

import pytest

from paths import ROOT

sys.path.insert(0, str(ROOT / "bench"))
import bench_compare  # noqa: E402
import bench_threads  # noqa: E402
import compare_report  # noqa: E402
import peer as peers  # noqa: E402


def _layout(root: pathlib.Path, kinds: tuple[str, ...] = peers.KINDS) -> pathlib.Path:
    """RedisAI's layout with empty files: redisai.so and backends/redisai_<name>/*.so."""
    root.mkdir(parents=True, exist_ok=True)
    module = root / "redisai.so"
    module.write_bytes(b"")
    for kind in kinds:
        name = peers.BACKEND_DIRS[kind]
        (root / "backends" / f"redisai_{name}").mkdir(parents=True)
        (root / "backends" / f"redisai_{name}" / f"redisai_{name}.so").write_bytes(b"")
    return module


def test_backends_are_found_beside_the_module(tmp_path: pathlib.Path) -> None:
    module = _layout(tmp_path)
    opts = bench_threads.parser().parse_args(["--peer", str(module), "--kinds", "TORCH,ONNX"])
    peer = peers.from_options(opts, ["TORCH", "ONNX"])
    assert peer is not None and peer.module == module.resolve()
    assert peer.backends == {
        "TORCH": tmp_path / "backends" / "redisai_torch" / "redisai_torch.so",
        "ONNX": tmp_path / "backends" / "redisai_onnxruntime" / "redisai_onnxruntime.so"}
    assert peers.backend_path(module, "TF").parts[-2:] == ("redisai_tensorflow",
                                                           "redisai_tensorflow.so")
    # no setting: the backend alone, so that RedisAI runs at its own defaults
    assert peer.args("ONNX") == ["ONNX", str(peer.backends["ONNX"])]
    assert peers.from_options(bench_threads.parser().parse_args([]), ["TF"]) is None


def test_a_backend_given_by_path_replaces_the_one_beside(tmp_path: pathlib.Path) -> None:
    module = _layout(tmp_path / "rai", ("TORCH",))
    other = tmp_path / "elsewhere.so"
    other.write_bytes(b"")
    opts = bench_threads.parser().parse_args(["--peer", str(module), "--peer-backend",
                                              f"onnx={other}"])
    peer = peers.from_options(opts, ["TORCH", "ONNX"])
    assert peer is not None and peer.backends["ONNX"] == other
    assert peer.backends["TORCH"].name == "redisai_torch.so"


@pytest.mark.parametrize("argv, says", [
    (["--peer-backend", "TF=/x.so"], "--peer-backend needs --peer"),
    (["--peer", "{root}/redisai.so", "--peer-backend", "TFLITE=/x.so"], "expected KIND=PATH"),
    (["--peer", "{root}/redisai.so", "--peer-backend", "TF"], "expected KIND=PATH"),
    (["--peer", "{root}/none.so"], "no such file"),
    (["--peer", "{root}/redisai.so"], "no TF backend at {root}/backends/redisai_tensorflow/"
                                      "redisai_tensorflow.so; give its path with "
                                      "--peer-backend TF=PATH"),
])
def test_a_missing_or_malformed_peer_stops_with_what_it_looked_for(
        tmp_path: pathlib.Path, argv: list[str], says: str) -> None:
    root = tmp_path.resolve()
    _layout(root, ("ONNX",))  # no TF backend beside it
    opts = bench_threads.parser().parse_args([a.format(root=root) for a in argv])
    with pytest.raises(SystemExit) as exc:
        peers.from_options(opts, ["TF", "ONNX"])
    assert says.format(root=root) in str(exc.value)


def test_version_from_module_list() -> None:
    """As bench.Client reads MODULE LIST on Redis 7: bulk strings as memoryviews, integers as
    bytes, and a list of arguments."""
    def mv(b: bytes) -> memoryview:
        return memoryview(bytearray(b))

    reply = [[mv(b"name"), mv(b"other"), mv(b"ver"), b"1"],
             [mv(b"name"), mv(b"ai"), mv(b"ver"), b"10207", mv(b"path"), mv(b"/x/redisai.so"),
              mv(b"args"), [mv(b"TORCH"), mv(b"/x/redisai_torch.so")]]]
    assert peers.version(reply) == "1.2.7"
    assert peers.version(reply[:1]) == ""


def test_threads_cells_and_the_peer_server() -> None:
    """Default cells at 1, 8 and 32 clients; the peer is one more server per backend, last,
    with no argument, and a tree may not take its label."""
    assert {c for _, c in bench_threads.CELLS} == {1, 8, 32}
    peer = peers.Peer(pathlib.Path("/p/redisai.so"), {"TORCH": pathlib.Path("/p/t.so")})
    servers = bench_threads.servers_of([("this", pathlib.Path("/i"))], ["1x1"], {}, peer)
    assert [s[0] for s in servers] == ["this:defaults", "this:tpq1-intra1", bench_threads.PEER]
    assert servers[-1][1:] == (peers.LABEL, "defaults", pathlib.Path("/p"), [])


def _fig(rps: float, reps: list[float] | None = None, helper: float | None = 0.0) -> dict:
    one = {"median": 10.0, "min": 10.0, "max": 10.0}
    out = {"rps": {"median": rps, "min": rps * 0.9, "max": rps * 1.1}, "p50_us": one,
           "server_cpu_us_per_req": one, "main_cpu_us_per_req": one,
           "helper_share": None if helper is None else {"median": helper, "min": helper,
                                                        "max": helper}}
    if reps:
        out["rounds"] = [{"rps": v} for v in reps]
    return out


def _threads_doc() -> dict:
    cell = {"this:defaults": _fig(2000.0, [2000.0, 1800.0, 2400.0], 0.5),
            "this:tpq1-intra1": _fig(1500.0, [1500.0] * 3),
            "this:tpq2-intra1": _fig(2200.0, [2200.0] * 3),
            bench_threads.PEER: _fig(1000.0, [1000.0, 1000.0, 1000.0], helper=None)}
    return {"trees": {"this": "/t"},
            "servers": [["this:defaults", []], ["this:tpq1-intra1", []], ["this:tpq2-intra1", []],
                        [bench_threads.PEER, []]],
            "peer": {"label": peers.LABEL, "module": "/p/redisai.so", "version": "1.2.7"},
            "backends": {"ONNX": {"cnn_8": cell}}}


def test_threads_ratios_to_the_peer() -> None:
    doc = _threads_doc()
    per = doc["backends"]["ONNX"]["cnn_8"]
    v = bench_threads.versus_peer(per, "this")
    assert v[f"this:defaults/{peers.LABEL}"] == 2.0
    assert v[f"this:defaults/{peers.LABEL}, paired"] == 2.0  # of 2.0, 1.8, 2.4
    assert v["this:best_fixed"] == "tpq2-intra1"
    assert v[f"this:best_fixed/{peers.LABEL}"] == pytest.approx(2.2)
    head, _, row = bench_threads.peer_table(doc)
    assert "| RedisAI 1.2.7 | this defaults | this defaults / RedisAI 1.2.7 (paired) |" in head
    assert row == ("| ONNX | cnn | 8 | 1,000 [900-1,100] | 2,000 [1,800-2,200] | 2.00 (2.00) | "
                   "tpq2-intra1 2,200 [1,980-2,420] | 2.20 (2.20) |")
    assert bench_threads.peer_table({**doc, "peer": None}) == []


def test_threads_markdown_has_the_peer_column_and_ratio() -> None:
    doc = _threads_doc()
    head, sep, row = bench_threads.markdown(doc).splitlines()
    assert head.endswith("| RedisAI 1.2.7 req/s | RedisAI 1.2.7 CPU us/req (server / main) | "
                         "defaults / RedisAI 1.2.7 | paired [quartiles] |")
    assert sep.count("|") == head.count("|") == row.count("|")
    assert row.endswith("| 1,000 | 10 / 10 | 2.00 | 2.00 [1.80-2.40] |")
    assert "| ONNX | CNN, 8 | 2,000 | 10 | 10 / 10 | 50% | 1,500 | 2,200 | 0.91 |" in row
    # a share the server has no counter for (RedisAI 1.2.7's INFO) prints n/a
    assert bench_threads.share(doc["backends"]["ONNX"]["cnn_8"][bench_threads.PEER],
                               "helper_share", ".0%") == "n/a"
    del doc["peer"]
    assert "RedisAI" not in bench_threads.markdown(doc)


def test_threads_counters_absent_on_a_server_give_none() -> None:
    rounds = [{"count": 100, "helper_runs": 50}, {"count": 100, "helper_runs": None}]
    assert bench_threads.summarize_share(rounds, "helper_runs", None) is None
    assert bench_threads.summarize_share(rounds[:1], "helper_runs", None)["median"] == 0.5
    paired = [{"count": 10, "unblocks_paired": 2}]
    assert bench_threads.summarize_share(paired, "unblocks_paired", None, 2.0)["median"] == 0.4


def test_compare_stacks_with_and_without_the_peer() -> None:
    assert bench_compare.stack_names("module,fastapi", "/p/redisai.so") == [
        "module", "fastapi", peers.LABEL]
    assert bench_compare.stack_names(f"module,{peers.LABEL}", "/p") == ["module", peers.LABEL]
    assert bench_compare.stack_names("module", None) == ["module"]
    with pytest.raises(SystemExit, match="needs --peer"):
        bench_compare.stack_names(peers.LABEL, None)
    with pytest.raises(SystemExit, match="no stack 'redisai'"):
        bench_compare.stack_names("module,redisai", None)
    opts = bench_compare.parser().parse_args(["--peer", "/p/redisai.so"])
    assert opts.peer == "/p/redisai.so" and opts.peer_backend == []


def test_compare_tables_put_the_module_against_the_peer() -> None:
    def cell(stack: str, rps: float, reps: list[float]) -> dict:
        one = {"median": 100.0, "min": 90.0, "max": 110.0}
        return {"model": "cnn", "clients": 16, "stack": stack, "reps": [{"rps": v} for v in reps],
                "rps": {"median": rps, "min": min(reps), "max": max(reps)}, "p50_us": one,
                "p99_us": one, "cpu_ms_per_req": {"median": 0.1, "min": 0.1, "max": 0.1}}

    doc = {"command": "c", "settings": {"reps": 2, "seconds": 5},
           "machine": {"cores": 2, "cpu_model": "x", "kernel": "k"},
           "cells": [cell("module DAG", 3000.0, [3000.0, 2800.0]),
                     cell(f"{peers.LABEL} DAG", 2000.0, [1000.0, 2000.0]),
                     cell("module MODELEXECUTE", 3300.0, [3300.0, 3300.0]),
                     cell(f"{peers.LABEL} MODELEXECUTE", 3000.0, [3000.0, 3000.0]),
                     cell("FastAPI + uvicorn", 1000.0, [1000.0, 1000.0])]}
    head = compare_report.headline(doc)
    # "best other" stays FastAPI (3.00x); RedisAI 1.2.7 has its own ratio column
    assert head.splitlines()[0].endswith("| module DAG / best other | module DAG / RedisAI 1.2.7 DAG |")
    assert head.splitlines()[2].endswith("| 1,000 | 3.00x | 1.50x |")
    table = compare_report.versus_peer(doc)
    assert ("| CNN (MNIST-sized) | 16 | DAG | 3,000 (2,800-3,000) | 2,000 (1,000-2,000) | 0.100 | "
            "0.100 | 1.50x | 2.20x |") in table  # paired: the median of 3.0 and 1.4
    assert "| MODELEXECUTE | 3,300 (3,300-3,300) | 3,000 (3,000-3,000) |" in table
    assert table in compare_report.markdown(doc)
    assert table in compare_report.block("full", doc, "bench/results/compare-x.json")
    without = {**doc, "cells": [c for c in doc["cells"] if not c["stack"].startswith("redisai")]}
    assert compare_report.versus_peer(without) == ""
    assert "RedisAI" not in compare_report.headline(without)
