"""The benchmark tools of issue 14 work, and the performance changes keep behaviour.

* bench/floor/rai_floor.c runs each backend through backend_abi.h with no Redis and returns
  the framework's result (what the in-process floor measures is the real run);
* bench/floor/rai_load.c interleaves commands on its connections and stops at an error;
* the ONNX watchdog, which is no longer woken for every run, still terminates a run that
  starts after many short ones (its alarm then belongs to a run long gone);
* the default intra-op thread count leaves results unchanged (every model checked here is
  compared with the framework's own output).

No timing is asserted (figures belong to bench/); the tools print them, the tests only check
that they are produced and sane.
"""
from __future__ import annotations

import json
import pathlib
import subprocess
import sys
import time

import numpy as np
import pytest

import engine_models as em
from helpers import assert_ok
from paths import ROOT, build_dir
from redis_server import RedisServer, StartServer
from resp import RawClient, RespError

sys.path.insert(0, str(ROOT / "bench"))
import floor_tools  # noqa: E402

ORT_TERMINATED = "Exiting due to terminate flag being set to true."


@pytest.fixture(scope="module")
def tools() -> tuple[pathlib.Path, pathlib.Path]:
    return floor_tools.build(build_dir())


def _raw(tmp: pathlib.Path, name: str, a: np.ndarray) -> str:
    path = tmp / name
    path.write_bytes(np.ascontiguousarray(a).tobytes())
    return str(path)


# --------------------------------------------------------------------------------------
# rai_floor

def test_rai_floor_runs_onnx_through_the_abi(tools, install_dir, tmp_path):
    import onnx_models

    floor, _ = tools
    so = em.require_backend(install_dir, "ONNX")
    a = np.array([[1, 2], [3, 4]], np.float32)
    b = np.array([[10, 20], [30, 40]], np.float32)
    model = tmp_path / "add.onnx"
    model.write_bytes(onnx_models.add().blob)
    out = tmp_path / "out.bin"
    res = subprocess.run([str(floor), "--so", str(so), "--kind", "ONNX", "--model", str(model),
                          "--input", f"FLOAT:2x2:{_raw(tmp_path, 'a', a)}",
                          "--input", f"FLOAT:2x2:{_raw(tmp_path, 'b', b)}",
                          "--iters", "50", "--warmup", "5", "--timeout-ms", "5000",
                          "--dump-output", str(out)], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    fig = json.loads(res.stdout)
    assert fig["kind"] == "ONNX" and fig["framework"] == "ONNX Runtime" and fig["iters"] == 50
    assert 0 < fig["min_us"] <= fig["p50_us"] <= fig["p99_us"] and fig["rps"] > 0
    np.testing.assert_array_equal(np.fromfile(out, np.float32).reshape(2, 2), a + b)


def test_rai_floor_runs_tf_with_names(tools, install_dir, tmp_path):
    import tf_graphs

    floor, _ = tools
    so = em.require_backend(install_dir, "TF")
    a = np.array([[2, 3], [4, 5]], np.float32)
    model = tmp_path / "mul.pb"
    model.write_bytes(tf_graphs.mul_graph())
    out = tmp_path / "out.bin"
    ai = _raw(tmp_path, "a", a)
    res = subprocess.run([str(floor), "--so", str(so), "--kind", "TF", "--model", str(model),
                          "--input", f"FLOAT:2x2:{ai}", "--input", f"FLOAT:2x2:{ai}",
                          "--in-name", "a", "--in-name", "b", "--out-name", "mul",
                          "--iters", "20", "--dump-output", str(out)],
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    np.testing.assert_array_equal(np.fromfile(out, np.float32).reshape(2, 2), a * a)


def test_rai_floor_names_the_file_it_cannot_use(tools, install_dir, tmp_path):
    floor, _ = tools
    so = em.require_backend(install_dir, "ONNX")
    bad = tmp_path / "not-a-model.onnx"
    bad.write_bytes(b"garbage")
    x = _raw(tmp_path, "x", np.zeros((2, 2), np.float32))
    res = subprocess.run([str(floor), "--so", str(so), "--kind", "ONNX", "--model", str(bad),
                          "--input", f"FLOAT:2x2:{x}"], capture_output=True, text=True, timeout=60)
    assert res.returncode == 2 and str(bad) in res.stderr and "model_create failed" in res.stderr
    res = subprocess.run([str(floor), "--so", str(so), "--kind", "ONNX", "--model", str(bad),
                          "--input", f"FLOAT:3x3:{x}"], capture_output=True, text=True, timeout=60)
    assert res.returncode == 2 and "the shape needs 36" in res.stderr, res.stderr


# --------------------------------------------------------------------------------------
# rai_load

def test_rai_load_interleaves_commands_and_counts_them(tools, server):
    _, load_exe = tools
    load = floor_tools.Load(load_exe, server.port, pathlib.Path(server.dir))
    ping, incr = floor_tools.resp("PING"), floor_tools.resp("INCR", "counter")
    res = load.run([ping, incr], clients=4, requests=200, warmup=5)
    assert [r["count"] for r in res] and all(r["clients"] == 4 for r in res)
    total = sum(r["count"] for r in res)
    assert total >= 400 and all(r["count"] >= 150 for r in res), res  # both ran, alternating
    with RawClient(server.port) as c:
        counter = int(c.execute("GET", "counter"))
    # every INCR sent was answered once: warm-up and unrecorded last replies included
    assert counter >= res[1]["count"] + 4 * 5 // 2
    for r in res:
        assert 0 < r["p50_us"] <= r["p99_us"] and r["rps"] > 0


def test_rai_load_without_warm_up_records_from_the_first_reply(tools, server):
    # --warmup 0 once waited for a warm-up that never ended (a hang).
    _, load_exe = tools
    load = floor_tools.Load(load_exe, server.port, pathlib.Path(server.dir))
    (res,) = load.run([floor_tools.resp("PING")], clients=2, requests=50, warmup=0)
    assert res["count"] >= 50 and res["rps"] > 0, res


def test_rai_load_stops_at_an_error_reply(tools, server):
    _, load_exe = tools
    load = floor_tools.Load(load_exe, server.port, pathlib.Path(server.dir))
    with pytest.raises(RuntimeError, match="error reply: -ERR unknown command"):
        load.run([floor_tools.resp("NO.SUCH.COMMAND")], requests=10)


# --------------------------------------------------------------------------------------
# ONNX watchdog: woken only for an earlier deadline

@pytest.fixture(scope="module")
def onnx_two_workers(start_server: StartServer, install_dir) -> RedisServer:
    so = em.require_backend(install_dir, "ONNX")
    return start_server(["ONNX", str(so), "MODEL_EXECUTION_TIMEOUT", "1000",
                         "THREADS_PER_QUEUE", "2"])


def test_onnx_long_run_after_many_short_ones_is_terminated(onnx_two_workers):
    srv = onnx_two_workers
    with RawClient(srv.port, timeout=30) as c, RawClient(srv.port, timeout=30) as runner:
        assert_ok(c.execute("AI.MODELSTORE", "loop", "ONNX", "CPU", "BLOB", em.onnx_loop_model()))
        assert_ok(c.execute("AI.TENSORSET", "short", "INT64", 1, "VALUES", 10))
        # far more than a second of work: the run lasts until it is terminated
        assert_ok(c.execute("AI.TENSORSET", "long", "INT64", 1, "VALUES", 10**10))
        for _ in range(200):  # each registers and leaves; the watchdog's alarm stays the first's
            assert_ok(c.execute("AI.MODELEXECUTE", "loop", "INPUTS", 1, "short", "OUTPUTS", 1,
                                "o"))
        t0 = time.perf_counter()
        runner.send("AI.MODELEXECUTE", "loop", "INPUTS", 1, "long", "OUTPUTS", 1, "out")
        # the other worker keeps serving short runs while the long one is watched
        for _ in range(20):
            assert_ok(c.execute("AI.MODELEXECUTE", "loop", "INPUTS", 1, "short", "OUTPUTS", 1,
                                "o"))
        assert runner.pending(wait=20.0), "the long run was not terminated within 20 s"
        reply = runner.read()
        elapsed = time.perf_counter() - t0
    assert isinstance(reply, RespError) and ORT_TERMINATED in str(reply), reply
    # bounded loosely: a watchdog that missed the run would let it go on for minutes
    assert elapsed < 15, f"terminated only after {elapsed:.1f} s (timeout 1 s)"
    assert srv.alive(), srv.log()


# --------------------------------------------------------------------------------------
# bench_threads.py: fixed settings and the docs' table

def test_bench_threads_fixed_settings_and_table() -> None:
    """"TxN" fixes THREADS_PER_QUEUE too (so a fixed setting has no helper), a bare N is
    INTRA_OP_PARALLELISM alone; --markdown's table puts the defaults against the best fixed."""
    sys.path.insert(0, str(ROOT / "bench"))
    import bench_threads  # noqa: PLC0415

    assert bench_threads.fixed_setting("2x1") == (
        "tpq2-intra1", ["THREADS_PER_QUEUE", "2", "INTRA_OP_PARALLELISM", "1"])
    assert bench_threads.fixed_setting(" 3 ") == ("intra3", ["INTRA_OP_PARALLELISM", "3"])

    def fig(rps: float, helper: float = 0.0) -> dict:
        one = {"median": 10.0, "min": 10.0, "max": 10.0}
        return {"rps": {"median": rps, "min": rps, "max": rps}, "p50_us": one,
                "server_cpu_us_per_req": one, "main_cpu_us_per_req": one,
                "helper_share": {"median": helper, "min": helper, "max": helper}}

    doc = {"trees": {"this": "/t"}, "servers": [["this:defaults", []], ["this:tpq1-intra1", []],
                                                ["this:tpq2-intra1", []]],
           "backends": {"ONNX": {"cnn_32": {"this:defaults": fig(1940.0, 0.41),
                                            "this:tpq1-intra1": fig(1500.0),
                                            "this:tpq2-intra1": fig(2000.0)}}}}
    table = bench_threads.markdown(doc)
    assert "| ONNX | CNN, 32 | 1,940 | 10 | 10 / 10 | 41% | 1,500 | 2,000 | 0.97 | - |" in table

    # paired: the ratio repetition by repetition, against the fixed setting of the best median
    cell = doc["backends"]["ONNX"]["cnn_32"]
    cell["this:defaults"]["rounds"] = [{"rps": v} for v in (1000.0, 2000.0, 3000.0, 1900.0)]
    cell["this:tpq2-intra1"]["rounds"] = [{"rps": v} for v in (1000.0, 1000.0, 3000.0, 2000.0)]
    cell["this:tpq1-intra1"]["rounds"] = [{"rps": v} for v in (9000.0,) * 4]
    pr = bench_threads.paired_ratio(cell["this:defaults"], cell["this:tpq2-intra1"])
    assert pr is not None and pr["median"] == 1.0 and pr["q3"] > 1.0 > pr["q1"]
    assert "| 0.97 | 1.00 [" in bench_threads.markdown(doc)
    assert bench_threads.paired_ratio({"rounds": [{"rps": 1.0}]}, {"rounds": []}) is None
