"""The thread policy of a run (docs/performance.md, "Thread defaults";
module/engine/thread_policy.c, applied by module/engine/run_threads.c): a lone client's run of a
model whose recent runs took at least the crossover (INFO `ai_lone_heavy_run_min_us`) is given
one intra-op thread per physical core (RAI_RunInfo.intra_op_threads), and INFO counts it
(`ai_lone_heavy_runs`); a light model's runs are not; INTRA_OP_PARALLELISM or
INTER_OP_PARALLELISM given, no run is, and no second session is built. INFO `ai_cpus_logical` / `ai_cpus_physical` are this
process's CPUs (its affinity) and the cores among them. ONNX Runtime runs a lone heavy run on the
model's second session (backends/onnxruntime/ort_lone.c, which logs its thread count once when it
builds it), with the same outputs, where the physical cores are not the shared count (none on 1
core).

The policy itself, over fake topologies and loads, is tests/unit/c/test_thread_policy.c; here
the engine's side: that the model's run time and the worker's load reach it. The heavy model is
tf_graphs.slow_graph() (engine_models.calibrate_slow) at about 20 ms a run, forty times the
crossover; no timing is asserted. Isolated runs are handed to their host, which the policy does
not reach yet (its backend gets 0: its own default)."""
from __future__ import annotations

import functools
import os

import pytest

import engine_models as em
from helpers import LogMark
from redis_server import ISOLATE_ENV, RedisServer
from resp import RawClient

ISOLATED = bool(os.environ.get(ISOLATE_ENV, "").strip())


def info_fields(c: RawClient) -> dict[str, str]:
    text = c.execute("INFO", "MODULES")
    text = text.decode() if isinstance(text, bytes) else text
    return dict(line.split(":", 1) for line in text.splitlines() if ":" in line)


def lone_heavy_runs_of(fields: dict[str, str]) -> int:
    return int(fields["ai_lone_heavy_runs"])


def lone_heavy_runs(c: RawClient) -> int:
    return lone_heavy_runs_of(info_fields(c))


def run_times(c: RawClient, key: str, inputs: list[str], times: int) -> int:
    """Runs `key` `times` times in a row from one client: the lone heavy runs it added."""
    before = lone_heavy_runs(c)
    for _ in range(times):
        reply = c.execute("AI.MODELEXECUTE", key, "INPUTS", len(inputs), *inputs,
                          "OUTPUTS", 1, "__tp_out")
        assert reply == "OK", reply
    return lone_heavy_runs(c) - before


def store_models(c: RawClient) -> None:
    """`slow` (calibrated: already run several times) with its input `n` at about 20 ms a
    run, and the 2x2 `m` never run."""
    assert c.execute("FLUSHALL", "SYNC") == "OK"
    em.store_slow_and_mul(c)
    n = em.slow_at_least(c, em.calibrate_slow(c)(0.02), 0.02)
    assert c.execute("AI.TENSORSET", "n", "INT32", "VALUES", n) == "OK"


def shared_threads(fields: dict[str, str]) -> int:
    """backend_threads.h's count with no setting given: max(1, (logical - 1) / 1)."""
    return max(1, int(fields["ai_cpus_logical"]) - 1)


@functools.cache
def onnx_matmul_chain() -> bytes:
    """Input `x` float [256, 256]; output `out` = x @ W @ W @ W @ W with W = 0.5 I: four
    256x256 products (tens of milliseconds on one thread), out = x / 16 exactly."""
    onnx = em._onnx()
    import numpy as np  # noqa: PLC0415

    h, TP = onnx.helper, onnx.TensorProto
    w = onnx.numpy_helper.from_array(np.eye(256, dtype=np.float32) * 0.5, name="w")
    names = ["x", "y1", "y2", "y3", "out"]
    nodes = [h.make_node("MatMul", [names[i], "w"], [names[i + 1]]) for i in range(4)]
    g = h.make_graph(nodes, "chain", [h.make_tensor_value_info("x", TP.FLOAT, [256, 256])],
                     [h.make_tensor_value_info("out", TP.FLOAT, [256, 256])], [w])
    return em._onnx_model(g)


@pytest.fixture(scope="module")
def default_server(start_server, tf_backend_path) -> RedisServer:
    return start_server(["TF", str(tf_backend_path)])


def test_topology_in_info(default_server: RedisServer) -> None:
    with RawClient(default_server.port) as c:
        fields = info_fields(c)
    logical, physical = int(fields["ai_cpus_logical"]), int(fields["ai_cpus_physical"])
    assert logical == len(os.sched_getaffinity(default_server.proc.pid))
    assert 1 <= physical <= logical
    assert int(fields["ai_lone_heavy_run_min_us"]) > 0


def lone_sessions(mark: LogMark, framework: str, key: str) -> list[str]:
    """The backend's log lines since mark: a second session built for lone runs of key."""
    return [line for line in mark.lines()
            if f"{framework}: a " in line and f"session for lone runs of '{key}'" in line]


def check_second_session(mark: LogMark, framework: str, key: str, fields: dict[str, str]) -> None:
    """One second session of one thread per physical core was built for key, logged once;
    none where that count is the shared one."""
    physical = int(fields["ai_cpus_physical"])
    built = lone_sessions(mark, framework, key)
    if physical == shared_threads(fields):
        assert built == []
    else:
        assert len(built) == 1 and f"a {physical}-thread session" in built[0], built


@pytest.mark.skipif(ISOLATED, reason="isolated runs go to their host, outside the policy")
def test_lone_heavy_runs_get_every_core(default_server: RedisServer) -> None:
    """TensorFlow runs them on a second session over the model's graph, one intra-op thread
    per physical core, built once (at the first lone heavy run of calibration) and logged;
    none when that is the shared count."""
    mark = LogMark(default_server.logfile)
    with RawClient(default_server.port) as c:
        store_models(c)
        assert run_times(c, "slow", ["n"], 4) == 4
        fields = info_fields(c)
    check_second_session(mark, "TensorFlow", "slow", fields)


def test_light_model_keeps_the_shared_count(default_server: RedisServer) -> None:
    """The 2x2 model's first run (TF's warm-up, milliseconds) is no figure; its runs after it
    take tens of microseconds. One may count on a loaded machine (a run preempted for a
    millisecond weighs a quarter of the average), not more."""
    with RawClient(default_server.port) as c:
        store_models(c)
        assert run_times(c, "m", ["a", "b"], 8) <= 1


@pytest.mark.parametrize("setting", ["INTRA_OP_PARALLELISM", "INTER_OP_PARALLELISM"])
def test_user_setting_keeps_its_meaning(start_server, tf_backend_path, setting: str) -> None:
    srv = start_server(["TF", str(tf_backend_path), setting, "1"])
    mark = LogMark(srv.logfile)
    with RawClient(srv.port) as c:
        store_models(c)
        assert run_times(c, "slow", ["n"], 4) == 0
    assert lone_sessions(mark, "TensorFlow", "slow") == []


@pytest.mark.skipif(ISOLATED, reason="isolated runs go to their host, outside the policy")
def test_onnx_lone_heavy_runs_use_the_second_session(start_server, onnx_backend_path) -> None:
    """Five runs from one client: the first is the warm-up, the second gives the model its
    time, the next three are lone heavy, on a second session of one thread per physical core
    (built once, logged) when that is not the shared count; every output is x / 16."""
    import numpy as np  # noqa: PLC0415

    srv = start_server(["ONNX", str(onnx_backend_path)])
    x = np.arange(256 * 256, dtype=np.float32).reshape(256, 256) % 97
    with RawClient(srv.port) as c:
        assert c.execute("AI.MODELSTORE", "chain", "ONNX", "CPU", "BLOB",
                         onnx_matmul_chain()) == "OK"
        assert c.execute("AI.TENSORSET", "x", "FLOAT", 256, 256, "BLOB", x.tobytes()) == "OK"
        mark = LogMark(srv.logfile)
        heavy_before = lone_heavy_runs(c)
        for _ in range(5):
            assert c.execute("AI.MODELEXECUTE", "chain", "INPUTS", 1, "x",
                             "OUTPUTS", 1, "out") == "OK"
            out = np.frombuffer(c.execute("AI.TENSORGET", "out", "BLOB"), dtype=np.float32)
            assert np.array_equal(out.reshape(256, 256), x / 16)
        fields = info_fields(c)
    assert lone_heavy_runs_of(fields) - heavy_before == 3
    check_second_session(mark, "ONNX Runtime", "chain", fields)
