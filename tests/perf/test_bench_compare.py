"""The pieces of bench/bench_compare.py that need no other serving stack: the fraud model,
the KServe v2 binary request and answer, the Triton model repository, the server CPU
reading and the Markdown tables. The stacks themselves run only in the benchmark."""
from __future__ import annotations

import json
import pathlib
import subprocess
import sys
import time

import numpy as np

from paths import ROOT

sys.path.insert(0, str(ROOT / "bench"))
import compare_env  # noqa: E402
import compare_http  # noqa: E402
import compare_models  # noqa: E402
import compare_report  # noqa: E402


def _entry(tmp: pathlib.Path) -> dict:
    tx, ref = np.arange(30, dtype=np.float32), np.ones(256, np.float32)
    (tmp / "in0").write_bytes(tx.tobytes())
    (tmp / "in1").write_bytes(ref.tobytes())
    return {"file": str(tmp / "fraud.onnx"),
            "inputs": [{"name": "transaction", "dtype": "FLOAT", "shape": [1, 30], "file": str(tmp / "in0")},
                       {"name": "reference", "dtype": "FLOAT", "shape": [1, 256], "file": str(tmp / "in1")}],
            "output": {"name": "score", "dtype": "FLOAT", "shape": [1, 2]}}


def test_fraud_model_takes_a_transaction_and_a_reference() -> None:
    import onnxruntime

    sess = onnxruntime.InferenceSession(compare_models.fraud_model(), providers=["CPUExecutionProvider"])
    assert [i.name for i in sess.get_inputs()] == ["transaction", "reference"]
    rng = np.random.default_rng(0)
    (y,) = sess.run(None, {"transaction": rng.random((1, 30), dtype=np.float32),
                           "reference": rng.random((1, 256), dtype=np.float32)})
    assert y.shape == (1, 2) and abs(float(y.sum()) - 1.0) < 1e-5  # a softmax


def test_kserve_binary_request_and_answer(tmp_path) -> None:
    req = compare_http.kserve_request("fraud", _entry(tmp_path))
    head_len = int(req.headers["Inference-Header-Content-Length"])
    head = json.loads(req.body[:head_len])
    assert [i["parameters"]["binary_data_size"] for i in head["inputs"]] == [120, 1024]
    assert len(req.body) == head_len + 120 + 1024 and req.path == "/v2/models/fraud/infer"
    out = np.array([0.25, 0.75], np.float32)
    ans_head = json.dumps({"outputs": [{"name": "score", "parameters": {"binary_data_size": 8}}]}).encode()
    got = compare_http.answer_floats(ans_head + out.tobytes(),
                                     {"inference-header-content-length": str(len(ans_head))})
    np.testing.assert_array_equal(got, out)
    raw = compare_http.raw_request("fraud", _entry(tmp_path))
    assert len(raw.body) == 120 + 1024 and raw.path == "/v1/fraud"


def test_triton_repository_names_the_onnx_file(tmp_path) -> None:
    stack = compare_http.TritonStack(tmp_path)
    repo = stack._repository({"fraud": _entry(tmp_path)})
    config = (repo / "fraud" / "config.pbtxt").read_text()
    assert 'backend: "python"' in config and "dims: [1, 256]" in config
    assert f'string_value: "{tmp_path / "fraud.onnx"}"' in config
    assert (repo / "fraud" / "1" / "model.py").read_text().startswith('"""model.py of a Triton')


def test_tree_cpu_counts_children() -> None:
    child = subprocess.Popen([sys.executable, "-c", "import subprocess, sys;"
                              "subprocess.run([sys.executable, '-c', 'while True: pass'])"])
    try:
        time.sleep(1.0)
        assert compare_env.tree_cpu_seconds([child.pid]) > 0.3  # the grandchild's spinning
    finally:
        for pid in compare_env.tree_pids(child.pid)[::-1]:
            subprocess.run(["kill", str(pid)], check=False)
        child.wait()


def test_markdown_tables_and_ratios() -> None:
    def cell(model: str, clients: int, stack: str, rps: float) -> dict:
        stat = {"median": rps, "min": rps * 0.9, "max": rps * 1.1}
        one = {"median": 100.0, "min": 90.0, "max": 110.0}
        return {"model": model, "clients": clients, "stack": stack, "rps": stat, "p50_us": one,
                "p99_us": one, "cpu_ms_per_req": {"median": 0.1, "min": 0.1, "max": 0.1}}

    doc = {"command": "bench/bench_compare.py", "settings": {"reps": 3, "seconds": 5, "big_mib": 128},
           "machine": {"cores": 2, "cpu_model": "x", "kernel": "k"}, "left_out": {"pytriton": "no"},
           "cells": [cell("cnn", 1, "FastAPI + uvicorn", 1000.0), cell("cnn", 1, "module DAG", 3000.0),
                     cell("cnn", 1, "Triton (python backend)", 1500.0)]}
    text = compare_report.markdown(doc, pathlib.Path("bench/results/compare-x.json"))
    assert "`bench/results/compare-x.json`" in text
    assert "| CNN (MNIST-sized) | 1 | 3,000 | 1,000 | 1,500 | 2.00x |" in text
    assert "| CNN (MNIST-sized) | 1 | FastAPI + uvicorn | 1,000 (900-1,100) | 100 | 100 | 0.100 |  | 3.00x |" in text
    assert "- pytriton: no" in text


def test_module_settings_table_and_headline_without_them() -> None:
    """--module-setting rows ("module DAG @tpq2") stay out of the headline and the ratios to
    other stacks, and get a table of their own: the defaults against the best of them."""
    def cell(stack: str, rps: float) -> dict:
        one = {"median": 100.0, "min": 90.0, "max": 110.0}
        return {"model": "cnn", "clients": 16, "stack": stack, "rps": {"median": rps, "min": rps, "max": rps},
                "p50_us": one, "p99_us": one, "cpu_ms_per_req": {"median": 0.1, "min": 0.1, "max": 0.1}}

    doc = {"command": "c", "settings": {"reps": 3, "seconds": 5}, "machine": {"cores": 2, "cpu_model": "x",
                                                                            "kernel": "k"},
           "module_settings": {"tpq1": ["THREADS_PER_QUEUE", "1"], "tpq2": ["THREADS_PER_QUEUE", "2"]},
           "cells": [cell("module DAG", 4800.0), cell("module DAG @tpq1", 4000.0),
                     cell("module DAG @tpq2", 5000.0), cell("FastAPI + uvicorn", 1000.0)]}
    head = compare_report.headline(doc)
    assert "@tpq" not in head and "| CNN (MNIST-sized) | 16 | 4,800 | 1,000 | 4.80x |" in head
    table = compare_report.settings(doc)
    assert "| CNN (MNIST-sized) | 16 | DAG | 4,800 | 4,000 | 5,000 | 0.96 | - |" in table
    # paired: repetition by repetition against the best median (@tpq2), not @tpq1
    doc["cells"][0]["reps"] = [{"rps": v} for v in (4000.0, 6000.0, 4800.0)]
    doc["cells"][1]["reps"] = [{"rps": 1.0}] * 3
    doc["cells"][2]["reps"] = [{"rps": v} for v in (4000.0, 5000.0, 5000.0)]
    assert "| 0.96 | 1.00 |" in compare_report.settings(doc)
    del doc["cells"][2]["reps"][0]
    assert "| 0.96 | - |" in compare_report.settings(doc)
    table = compare_report.settings(doc)
    block = compare_report.block("full", doc, "bench/results/compare-x.json")
    assert "`@tpq2`: `THREADS_PER_QUEUE 2`" in block and table in block
    assert compare_report.settings({**doc, "module_settings": {}}) == ""
