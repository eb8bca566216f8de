"""ONNX Runtime's memory figures and BACKEND_MEMORY_LIMIT as RedisAI 1.2 counts them (issue 21,
item 4.6; docs/info.md, docs/configuration.md):

* `ai_onnxruntime_memory` adds, for each allocation made through the module's allocator, the
  bytes asked for plus 64 (the room taken to align the block); `..._memory_access_num` counts
  allocations and frees. A one-node model with one input and one output holds 3 allocations
  from MODELSTORE to MODELDEL: its bytes and its two names (each name's length + 1).
* A run allocates its names and output values and frees them: memory is back where it was.
* BACKEND_MEMORY_LIMIT limits that figure: 1 MB holds 25 sessions of the MNIST model of 1.2's
  tests; a store over it fails as MODELSTORE's texts say, a run with
  `Onnxruntime memory limit exceeded, memory allocation failed.`, and the server goes on.

Every test runs with the backend in-process and isolated (ISOLATE ONNX: the figures come from
the backend host through the core's INFO forwarding), each on a server of its own, since the
figures are process-wide. Models are made at test time with the `onnx` helper API.
"""
from __future__ import annotations

import pathlib
from typing import Iterator

import numpy as np
import pytest

from helpers import assert_error, assert_ok
from redis_server import RedisServer
from resp import RawClient

MEMORY_LIMIT = "Onnxruntime memory limit exceeded, memory allocation failed."
INIT_MEMORY_LIMIT = "Exception during initialization: " + MEMORY_LIMIT
ALIGN = 64  # what each allocation counts beyond the bytes asked for
MB = 1024 * 1024


# --- models ------------------------------------------------------------------------------------

def _onnx():
    return pytest.importorskip("onnx")


def _serialize(graph) -> bytes:
    h = _onnx().helper
    return h.make_model(graph, opset_imports=[h.make_opsetid("", 13)],
                        ir_version=8).SerializeToString()


def square_model(inp: str = "a", out: str = "product") -> bytes:
    """One node, one input, one output: out = inp * inp, float [3, 2]."""
    onnx = _onnx()
    h, tp = onnx.helper, onnx.TensorProto
    return _serialize(h.make_graph([h.make_node("Mul", [inp, inp], [out])], "square",
                                   [h.make_tensor_value_info(inp, tp.FLOAT, [3, 2])],
                                   [h.make_tensor_value_info(out, tp.FLOAT, [3, 2])]))


def mnist_model() -> bytes:
    """The layout of the ONNX model zoo's MNIST (mnist-8, the model of 1.2's memory-limit test;
    ~24 KB): 5x5 conv to 8 channels, ReLU, 2x2 max-pool, 5x5 conv to 16, ReLU, 3x3 max-pool,
    a 256 -> 10 dense layer. Input `Input3` float [N, 1, 28, 28], output `Plus214_Output_0`
    float [N, 10]; fixed random weights."""
    onnx = _onnx()
    h, tp = onnx.helper, onnx.TensorProto
    rng = np.random.default_rng(0)
    shapes = {"w1": (8, 1, 5, 5), "b1": (8,), "w2": (16, 8, 5, 5), "b2": (16,),
              "w3": (256, 10), "b3": (1, 10)}
    inits = [onnx.numpy_helper.from_array(
        (rng.standard_normal(s) * 0.1).astype(np.float32), name=n) for n, s in shapes.items()]
    inits.append(h.make_tensor("flat", tp.INT64, [2], [-1, 256]))
    conv = {"kernel_shape": [5, 5], "auto_pad": "SAME_UPPER"}
    nodes = [h.make_node("Conv", ["Input3", "w1", "b1"], ["c1"], **conv),
             h.make_node("Relu", ["c1"], ["r1"]),
             h.make_node("MaxPool", ["r1"], ["p1"], kernel_shape=[2, 2], strides=[2, 2]),
             h.make_node("Conv", ["p1", "w2", "b2"], ["c2"], **conv),
             h.make_node("Relu", ["c2"], ["r2"]),
             h.make_node("MaxPool", ["r2"], ["p2"], kernel_shape=[3, 3], strides=[3, 3]),
             h.make_node("Reshape", ["p2", "flat"], ["f"]),
             h.make_node("MatMul", ["f", "w3"], ["m"]),
             h.make_node("Add", ["m", "b3"], ["Plus214_Output_0"])]
    return _serialize(h.make_graph(
        nodes, "mnist", [h.make_tensor_value_info("Input3", tp.FLOAT, ["N", 1, 28, 28])],
        [h.make_tensor_value_info("Plus214_Output_0", tp.FLOAT, ["N", 10])], inits))


def expected(blob: bytes, sample: np.ndarray) -> np.ndarray:
    ort = pytest.importorskip("onnxruntime")
    sess = ort.InferenceSession(blob, providers=["CPUExecutionProvider"])
    return sess.run(None, {sess.get_inputs()[0].name: sample})[0]


# --- servers -----------------------------------------------------------------------------------

@pytest.fixture(params=["in-process", "isolated"])
def placement(request: pytest.FixtureRequest) -> list[str]:
    return ["ISOLATE", "ONNX"] if request.param == "isolated" else []


def _server(module_path: pathlib.Path, onnx_backend_path: pathlib.Path, placement: list[str],
            *args: str) -> Iterator[RedisServer]:
    srv = RedisServer(module_path, [*placement, "ONNX", str(onnx_backend_path), *args])
    try:
        yield srv
    finally:
        srv.stop()


@pytest.fixture
def unlimited(module_path, onnx_backend_path, placement) -> Iterator[RedisServer]:
    yield from _server(module_path, onnx_backend_path, placement)


@pytest.fixture
def limited(module_path, onnx_backend_path, placement, install_dir) -> Iterator[RedisServer]:
    if placement and "install-asan" in install_dir.parts:
        # the host gets RLIMIT_DATA with the limit, and ASan's shadow mappings exceed any
        pytest.skip("an isolated host cannot start under RLIMIT_DATA with AddressSanitizer")
    yield from _server(module_path, onnx_backend_path, placement, "BACKEND_MEMORY_LIMIT", "1")


def figures(srv: RedisServer) -> tuple[int, int]:
    """(ai_onnxruntime_memory, ai_onnxruntime_memory_access_num)."""
    info = srv.client().info("modules")
    return int(info["ai_onnxruntime_memory"]), int(info["ai_onnxruntime_memory_access_num"])


def set_float(c: RawClient, key: str, arr: np.ndarray) -> None:
    arr = np.ascontiguousarray(arr, np.float32)
    assert_ok(c.execute("AI.TENSORSET", key, "FLOAT", *arr.shape, "BLOB", arr.tobytes()))


def get_float(c: RawClient, key: str) -> np.ndarray:
    return np.frombuffer(c.execute("AI.TENSORGET", key, "BLOB"), np.float32)


# --- the figures -------------------------------------------------------------------------------

def test_one_node_model_holds_its_bytes_and_names(unlimited):
    blob = square_model("a", "product")
    # the model's bytes, its input name and its output name (NUL included), each aligned
    held = (len(blob) + ALIGN) + (len("a") + 1 + ALIGN) + (len("product") + 1 + ALIGN)
    with RawClient(unlimited.port) as c:
        assert figures(unlimited) == (0, 0)
        assert_ok(c.execute("AI.MODELSTORE", "m", "ONNX", "CPU", "BLOB", blob))
        assert figures(unlimited) == (held, 3)
        assert_ok(c.execute("AI.TENSORSET", "x", "FLOAT", 3, 2, "VALUES", 1, 2, 3, 4, 5, 6))
        # each run: its two names allocated and freed, its output allocated and freed
        for runs in (1, 2):
            assert_ok(c.execute("AI.MODELEXECUTE", "m", "INPUTS", 1, "x", "OUTPUTS", 1, "y"))
            assert c.execute("AI.TENSORGET", "y", "VALUES") == [b"1", b"4", b"9", b"16", b"25",
                                                                  b"36"]
            assert figures(unlimited) == (held, 3 + 6 * runs)
        # MODELDEL frees the three
        assert c.execute("AI.MODELDEL", "m") == "OK"
        assert figures(unlimited) == (0, 18)


def test_runs_give_back_all_they_take(unlimited):
    """A model with intermediate values, run in a DAG whose output stays inside it: the run's
    allocations are all freed by the time the command answers."""
    blob = mnist_model()
    sample = np.random.default_rng(1).random((4, 1, 28, 28), dtype=np.float32)
    with RawClient(unlimited.port) as c:
        assert_ok(c.execute("AI.MODELSTORE", "mnist", "ONNX", "CPU", "BLOB", blob))
        held, accesses = figures(unlimited)
        # at least the model's bytes and names; ONNX Runtime adds what it prepacks
        assert held >= (len(blob) + ALIGN) + (len("Input3") + 1 + ALIGN) + \
            (len("Plus214_Output_0") + 1 + ALIGN), held
        set_float(c, "x", sample)
        reply = c.execute("AI.DAGEXECUTE", "LOAD", 1, "x", "|>",
                          "AI.MODELEXECUTE", "mnist", "INPUTS", 1, "x", "OUTPUTS", 1, "y", "|>",
                          "AI.TENSORGET", "y", "BLOB")
        assert isinstance(reply, list) and reply[0] == "OK", reply
        got = np.frombuffer(reply[1], np.float32).reshape(4, 10)
        np.testing.assert_allclose(got, expected(blob, sample), rtol=1e-4, atol=1e-5)
        after, after_accesses = figures(unlimited)
        assert after == held
        # names, intermediates and the output: as many frees as allocations, at least 6
        assert after_accesses - accesses >= 6 and (after_accesses - accesses) % 2 == 0
        assert c.execute("AI.MODELDEL", "mnist") == "OK"
        assert figures(unlimited)[0] == 0


# --- BACKEND_MEMORY_LIMIT ----------------------------------------------------------------------

def test_one_mb_holds_25_mnist_sessions_and_refuses_more(limited):
    blob = mnist_model()
    sample = np.random.default_rng(2).random((8, 1, 28, 28), dtype=np.float32)
    with RawClient(limited.port) as c:
        for i in range(25):
            assert_ok(c.execute("AI.MODELSTORE", f"mnist_{i}", "ONNX", "CPU", "BLOB", blob))
        held, _ = figures(limited)
        assert held <= MB, held
        # every session counts the same
        assert held % 25 == 0, held
        per_session = held // 25
        # stores go on until the limit refuses one: MODELSTORE's text, nothing stored
        refused = None
        for i in range(25, 25 + MB // per_session + 2):
            reply = c.execute("AI.MODELSTORE", f"mnist_{i}", "ONNX", "CPU", "BLOB", blob)
            if reply != "OK":
                refused = i
                assert_error(reply, INIT_MEMORY_LIMIT)
                break
        assert refused is not None and c.execute("EXISTS", f"mnist_{refused}") == 0
        full, _ = figures(limited)
        assert full == refused * per_session and full + per_session > MB, (full, per_session)
        # a run needing more than the limit leaves (8 images: 200 KB for the first conv's
        # output alone) fails with 1.2's text and gives back what it took
        set_float(c, "x", sample)
        reply = c.execute("AI.MODELEXECUTE", "mnist_0", "INPUTS", 1, "x", "OUTPUTS", 1, "y")
        assert_error(reply, MEMORY_LIMIT)
        assert c.execute("EXISTS", "y") == 0
        assert figures(limited)[0] == full
        # with sessions deleted, the same run has room and succeeds
        for i in range(1, refused):
            assert c.execute("AI.MODELDEL", f"mnist_{i}") == "OK"
        assert figures(limited)[0] == per_session
        assert_ok(c.execute("AI.MODELEXECUTE", "mnist_0", "INPUTS", 1, "x", "OUTPUTS", 1, "y"))
        np.testing.assert_allclose(get_float(c, "y").reshape(8, 10), expected(blob, sample),
                                   rtol=1e-4, atol=1e-5)
        assert figures(limited)[0] == per_session
        assert_ok(c.execute("FLUSHALL", "SYNC"))
        assert figures(limited)[0] == 0
        assert limited.alive()
