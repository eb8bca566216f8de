"""Models for the DAG, statistics, batching and timeout tests (test_dag.py,
test_stats_info.py, test_batching.py, test_timeouts.py) and bench/bench_batching_dag.py.

* TF graphs, built with the real tensorflow package (via tests/support/tf_graphs.py's lazy import);
* TorchScript modules, built with the real torch package (torch.jit.script / trace);
* ONNX graphs, built with the `onnx` helper package (and torch.onnx.export for the CNN).

Every builder caches its serialized blob, so a pytest session builds each model once.
A builder whose framework package is missing raises pytest's Skipped with the reason.

The "batch revealing" models have one float input `x` (any shape with dim 0 >= 1) and two
outputs: output 0 `bs` = zeros_like(x) + dim0(x) (each element is the batch size the model
ran with: a client sees the size of the batch it was part of), output 1 `y` = 2 * x (each
client must get exactly its own rows back). The "wrong batch" models return
sum(x, axis=0, keepdims) (dim 0 is always 1), which a batched run must refuse.
"""
from __future__ import annotations

import functools
import io
import pathlib
import time
import warnings
from typing import Any

import pytest

import tf_graphs
from resp import RawClient

# --------------------------------------------------------------------------------------
# Backend files (the Torch and ONNX backends are written separately and may be missing)
# --------------------------------------------------------------------------------------

BACKEND_FILES = {
    "TF": "redisai_tensorflow/redisai_tensorflow.so",
    "TORCH": "redisai_torch/redisai_torch.so",
    "ONNX": "redisai_onnxruntime/redisai_onnxruntime.so",
}


def backend_path(install_dir: pathlib.Path, kind: str) -> pathlib.Path:
    return install_dir / "backends" / BACKEND_FILES[kind]


def require_backend(install_dir: pathlib.Path, kind: str) -> pathlib.Path:
    """The backend's .so path, or skip the test (with the reason) when it is not built."""
    p = backend_path(install_dir, kind)
    if not p.exists():
        pytest.skip(f"{kind} backend not built yet: {p} is missing "
                    "(build it with `.venv/bin/python -m build_tools build`)")
    return p


# --------------------------------------------------------------------------------------
# TF
# --------------------------------------------------------------------------------------

@functools.cache
def tf_batch_size_graph() -> bytes:
    """Placeholder `x` (float); `bs` = zeros_like(x) + dim0(x), `y` = 2 * x."""
    tf = tf_graphs._tf()
    g = tf.Graph()
    with g.as_default():
        x = tf.compat.v1.placeholder(tf.float32, name="x")
        n = tf.cast(tf.shape(x)[0], tf.float32)
        tf.add(tf.zeros_like(x), n, name="bs")
        tf.multiply(x, 2.0, name="y")
    return g.as_graph_def().SerializeToString()


@functools.cache
def tf_wrong_batch_graph() -> bytes:
    """Placeholder `x` (float); `out` = reduce_sum(x, axis=0, keepdims=True): dim 0 is 1."""
    tf = tf_graphs._tf()
    g = tf.Graph()
    with g.as_default():
        x = tf.compat.v1.placeholder(tf.float32, name="x")
        tf.reduce_sum(x, axis=0, keepdims=True, name="out")
    return g.as_graph_def().SerializeToString()


@functools.cache
def tf_add_one_graph() -> bytes:
    """Placeholder `x` (float); `out` = x + 1."""
    tf = tf_graphs._tf()
    g = tf.Graph()
    with g.as_default():
        x = tf.compat.v1.placeholder(tf.float32, name="x")
        tf.add(x, 1.0, name="out")
    return g.as_graph_def().SerializeToString()


def store_tf(c: Any, key: str, graph: bytes, inputs: list[str], outputs: list[str],
             *opts: Any, device: str = "CPU") -> Any:
    return c.execute("AI.MODELSTORE", key, "TF", device, *opts, "INPUTS", len(inputs), *inputs,
                     "OUTPUTS", len(outputs), *outputs, "BLOB", graph)


# --------------------------------------------------------------------------------------
# Torch
# --------------------------------------------------------------------------------------

@functools.cache
def _torch() -> Any:
    try:
        import torch  # noqa: PLC0415
    except ImportError as e:  # pragma: no cover - torch is pinned in build_tools/pins.py
        pytest.skip(f"the torch package is not installed in this environment: {e}")
    return torch


def _save_script(module: Any) -> bytes:
    torch = _torch()
    buf = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        scripted = torch.jit.script(module)
        torch.jit.save(scripted, buf)
    return buf.getvalue()


@functools.cache
def torch_batch_size_model() -> bytes:
    """forward(x) -> (zeros_like(x) + dim0(x), 2 * x)."""
    torch = _torch()

    class BatchSize(torch.nn.Module):
        def forward(self, x):
            return torch.zeros_like(x) + x.shape[0], x * 2

    return _save_script(BatchSize())


@functools.cache
def torch_wrong_batch_model() -> bytes:
    """forward(x) -> x.sum(0, keepdim=True): dim 0 is always 1."""
    torch = _torch()

    class WrongBatch(torch.nn.Module):
        def forward(self, x):
            return x.sum(0, keepdim=True)

    return _save_script(WrongBatch())


@functools.cache
def torch_times_three_model() -> bytes:
    """forward(x) -> 3 * x."""
    torch = _torch()

    class Times3(torch.nn.Module):
        def forward(self, x):
            return x * 3

    return _save_script(Times3())


# A TorchScript source with entry points (new calling convention: docs/commands.md, "How a
# script function is called").
TORCH_SCRIPT = """
def add_ten(tensors: List[Tensor], keys: List[str], args: List[str]):
    return tensors[0] + 10

def sub_pair(tensors: List[Tensor], keys: List[str], args: List[str]):
    return tensors[0] - tensors[1]
"""


# --------------------------------------------------------------------------------------
# ONNX
# --------------------------------------------------------------------------------------

@functools.cache
def _onnx() -> Any:
    try:
        import onnx  # noqa: PLC0415
    except ImportError as e:
        pytest.skip("the `onnx` helper package is not installed in .venv yet (it is being "
                    f"added to build_tools/pins.py): {e}")
    return onnx


def _onnx_model(graph: Any, opset: int = 13) -> bytes:
    onnx = _onnx()
    model = onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", opset)])
    model.ir_version = 8  # readable by every onnxruntime of the last years
    onnx.checker.check_model(model)
    return model.SerializeToString()


@functools.cache
def onnx_batch_size_model() -> bytes:
    """Input `x` float [N, k]; outputs `bs` = x*0 + N, `y` = 2 * x."""
    onnx = _onnx()
    h, TP = onnx.helper, onnx.TensorProto
    nodes = [
        h.make_node("Shape", ["x"], ["shape"]),
        h.make_node("Slice", ["shape", "zero", "one"], ["n_i64"]),
        h.make_node("Cast", ["n_i64"], ["n"], to=TP.FLOAT),
        h.make_node("Mul", ["x", "fzero"], ["zeros"]),
        h.make_node("Add", ["zeros", "n"], ["bs"]),
        h.make_node("Mul", ["x", "ftwo"], ["y"]),
    ]
    inits = [
        h.make_tensor("zero", TP.INT64, [1], [0]),
        h.make_tensor("one", TP.INT64, [1], [1]),
        h.make_tensor("fzero", TP.FLOAT, [], [0.0]),
        h.make_tensor("ftwo", TP.FLOAT, [], [2.0]),
    ]
    g = h.make_graph(nodes, "batch_size", [h.make_tensor_value_info("x", TP.FLOAT, ["N", "K"])],
                     [h.make_tensor_value_info("bs", TP.FLOAT, ["N", "K"]),
                      h.make_tensor_value_info("y", TP.FLOAT, ["N", "K"])], inits)
    return _onnx_model(g)


@functools.cache
def onnx_wrong_batch_model() -> bytes:
    """Input `x` float [N, k]; output `out` = ReduceSum(x, axis 0, keepdims): [1, k]."""
    onnx = _onnx()
    h, TP = onnx.helper, onnx.TensorProto
    nodes = [h.make_node("ReduceSum", ["x", "axes"], ["out"], keepdims=1)]
    g = h.make_graph(nodes, "wrong_batch", [h.make_tensor_value_info("x", TP.FLOAT, ["N", "K"])],
                     [h.make_tensor_value_info("out", TP.FLOAT, [1, "K"])],
                     [h.make_tensor("axes", TP.INT64, [1], [0])])
    return _onnx_model(g)


@functools.cache
def onnx_minus_one_model() -> bytes:
    """Input `x` float [N, k]; output `out` = x - 1."""
    onnx = _onnx()
    h, TP = onnx.helper, onnx.TensorProto
    g = h.make_graph([h.make_node("Sub", ["x", "one"], ["out"])], "minus_one",
                     [h.make_tensor_value_info("x", TP.FLOAT, ["N", "K"])],
                     [h.make_tensor_value_info("out", TP.FLOAT, ["N", "K"])],
                     [h.make_tensor("one", TP.FLOAT, [], [1.0])])
    return _onnx_model(g)


@functools.cache
def onnx_loop_model() -> bytes:
    """A Loop whose trip count is the input: `n` int64 [1]; the body does x = tanh(x @ W + I)
    on a float 16x16 state; output `out` (float 16x16) is the final state. With a large `n`
    it runs for minutes, so MODEL_EXECUTION_TIMEOUT must terminate it."""
    onnx = _onnx()
    h, TP = onnx.helper, onnx.TensorProto
    body = h.make_graph(
        [h.make_node("Identity", ["cond_in"], ["cond_out"]),
         h.make_node("MatMul", ["x_in", "w"], ["xw"]),
         h.make_node("Add", ["xw", "eye"], ["xwi"]),
         h.make_node("Tanh", ["xwi"], ["x_out"])],
        "body",
        [h.make_tensor_value_info("iter", TP.INT64, []),
         h.make_tensor_value_info("cond_in", TP.BOOL, []),
         h.make_tensor_value_info("x_in", TP.FLOAT, [16, 16])],
        [h.make_tensor_value_info("cond_out", TP.BOOL, []),
         h.make_tensor_value_info("x_out", TP.FLOAT, [16, 16])])
    eye = [1.0 if i == j else 0.0 for i in range(16) for j in range(16)]
    nodes = [
        h.make_node("Squeeze", ["n", "axes0"], ["trip"]),
        h.make_node("Loop", ["trip", "cond", "x0"], ["out"], body=body, name="loop"),
    ]
    inits = [
        h.make_tensor("axes0", TP.INT64, [1], [0]),
        h.make_tensor("cond", TP.BOOL, [], [True]),
        h.make_tensor("x0", TP.FLOAT, [16, 16], eye),
        h.make_tensor("w", TP.FLOAT, [16, 16], [0.0625] * 256),
        h.make_tensor("eye", TP.FLOAT, [16, 16], eye),
    ]
    g = h.make_graph(nodes, "loop", [h.make_tensor_value_info("n", TP.INT64, [1])],
                     [h.make_tensor_value_info("out", TP.FLOAT, [16, 16])], inits)
    return _onnx_model(g)


@functools.cache
def onnx_alloc_model() -> bytes:
    """Input `shape` int64 [2]; output `out` = ConstantOfShape(shape, 1.0): the run allocates
    as much as the input asks for (a [4096, 4096] run allocates 64 MiB)."""
    onnx = _onnx()
    h, TP = onnx.helper, onnx.TensorProto
    g = h.make_graph(
        [h.make_node("ConstantOfShape", ["shape"], ["out"],
                     value=h.make_tensor("v", TP.FLOAT, [1], [1.0]))],
        "alloc", [h.make_tensor_value_info("shape", TP.INT64, [2])],
        [h.make_tensor_value_info("out", TP.FLOAT, ["A", "B"])])
    return _onnx_model(g)


@functools.cache
def onnx_big_initializer_model(mib: int = 48) -> bytes:
    """Input `i` int64 [1]; output `out` = W[i] where W is a `mib` MiB float initializer, so
    loading the model allocates at least that much. (Gather on an input: a reduction of W
    alone would be constant-folded at load, leaving a 4-byte initializer.)"""
    onnx = _onnx()
    import numpy as np  # noqa: PLC0415

    h, TP = onnx.helper, onnx.TensorProto
    n = mib * 1024 * 1024 // 4
    w = onnx.numpy_helper.from_array(np.full(n, 1e-9, np.float32), name="w")
    g = h.make_graph(
        [h.make_node("Gather", ["w", "i"], ["out"], axis=0)],
        "big", [h.make_tensor_value_info("i", TP.INT64, [1])],
        [h.make_tensor_value_info("out", TP.FLOAT, [1])], [w])
    return _onnx_model(g)


# --------------------------------------------------------------------------------------
# The MNIST-sized CNN (PyTorch's MNIST example network), for the benchmark
# --------------------------------------------------------------------------------------

@functools.cache
def _mnist_module() -> Any:
    torch = _torch()

    class Net(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv1 = torch.nn.Conv2d(1, 32, 3, 1)
            self.conv2 = torch.nn.Conv2d(32, 64, 3, 1)
            self.fc1 = torch.nn.Linear(9216, 128)
            self.fc2 = torch.nn.Linear(128, 10)

        def forward(self, x):
            x = torch.relu(self.conv1(x))
            x = torch.relu(self.conv2(x))
            x = torch.nn.functional.max_pool2d(x, 2)
            x = torch.flatten(x, 1)
            x = torch.relu(self.fc1(x))
            return torch.log_softmax(self.fc2(x), dim=1)

    torch.manual_seed(0)
    return Net().eval()


@functools.cache
def mnist_torch() -> bytes:
    """TorchScript of the CNN: input float [N, 1, 28, 28], output float [N, 10]."""
    torch = _torch()
    buf = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        traced = torch.jit.trace(_mnist_module(), torch.zeros(1, 1, 28, 28))
        torch.jit.save(traced, buf)
    return buf.getvalue()


@functools.cache
def mnist_onnx() -> bytes:
    """The same CNN exported to ONNX (dynamic dim 0; input `x`, output `y`)."""
    torch = _torch()
    _onnx()
    buf = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(_mnist_module(), (torch.zeros(1, 1, 28, 28),), buf, dynamo=False,
                          input_names=["x"], output_names=["y"],
                          dynamic_axes={"x": {0: "N"}, "y": {0: "N"}}, opset_version=17)
    return buf.getvalue()


def framework_versions() -> dict[str, str]:
    """The versions of the framework packages in this environment (for INFO checks)."""
    out = {}
    try:
        out["TF"] = tf_graphs.tensorflow_version()
    except ImportError:
        pass
    for kind, mod in (("TORCH", "torch"), ("ONNX", "onnxruntime")):
        try:
            out[kind] = __import__(mod).__version__
        except ImportError:
            pass
    return out



# --------------------------------------------------------------------------------------
# A slow TF run to hold the CPU queue's worker (tests/support/tf_graphs.py's slow graph)
# --------------------------------------------------------------------------------------

def calibrate_slow(c: Any, key: str = "slow", tag: str = "") -> Any:
    """Stores tf_graphs.slow_graph() as `key` on CPU (BATCHSIZE 0) and measures it.
    Returns n(seconds) -> the loop count of a run lasting about that long. The model key,
    once stored, must not be deleted by the caller's tests (FLUSHALL would remove it).
    `tag` ("{t}") prefixes its scratch tensors, to keep them in the model's cluster slot."""
    assert c.execute("AI.MODELSTORE", key, "TF", "CPU", "INPUTS", 1, "n", "OUTPUTS", 1, "out",
                     "BLOB", tf_graphs.slow_graph()) == "OK"

    def run(n: int) -> float:
        assert c.execute("AI.TENSORSET", f"{tag}__n_cal", "INT32", "VALUES", n) == "OK"
        t0 = time.perf_counter()
        reply = c.execute("AI.MODELEXECUTE", key, "INPUTS", 1, f"{tag}__n_cal", "OUTPUTS", 1,
                          f"{tag}__o_cal")
        assert reply == "OK", reply
        return time.perf_counter() - t0

    run(10)  # warm-up: the first run of a TF session
    if "per_iter" not in _SLOW_CALIBRATION:
        n, t = 2000, run(2000)
        while t < 0.2 and n < 50_000_000:
            n *= 8 if t < 0.05 else 2
            t = run(n)
        # two points, so the fixed cost of a run (queueing, session setup) cancels out
        t3 = run(3 * n)
        _SLOW_CALIBRATION["per_iter"] = max((t3 - t) / (2 * n), t3 / (3 * n) / 4)
    per_iter = _SLOW_CALIBRATION["per_iter"]
    c.execute("DEL", f"{tag}__n_cal", f"{tag}__o_cal")
    return lambda seconds: max(1, int(seconds / per_iter))


# The machine's speed for the slow graph, measured once per pytest process.
_SLOW_CALIBRATION: dict[str, float] = {}


def slow_at_least(c: Any, n: int, seconds: float, key: str = "slow") -> int:
    """n, scaled up until a run of the slow model `key` lasts at least `seconds` on this
    server now: calibrate_slow measures once per process, and a measure taken while the
    machine was busier makes later runs shorter than asked (a test whose point is a run
    longer than a timeout then fails for the wrong reason)."""
    for _ in range(6):
        assert c.execute("AI.TENSORSET", "__n_chk", "INT32", "VALUES", n) == "OK"
        t0 = time.perf_counter()
        reply = c.execute("AI.MODELEXECUTE", key, "INPUTS", 1, "__n_chk", "OUTPUTS", 1, "__o_chk")
        took = time.perf_counter() - t0
        assert reply == "OK", reply
        if took >= seconds:
            break
        n = int(n * min(8.0, 1.25 * seconds / max(took, 1e-3)))
    c.execute("DEL", "__n_chk", "__o_chk")
    return n


def blocked_clients(c: Any) -> int:
    text = c.execute("INFO", "clients")
    text = text.decode() if isinstance(text, bytes) else text
    for line in text.splitlines():
        if line.startswith("blocked_clients:"):
            return int(line.split(":", 1)[1])
    raise AssertionError(f"no blocked_clients in INFO clients: {text!r}")


def store_slow_and_mul(c: Any) -> None:
    """The setup of the timeout and request-life tests: tf_graphs.slow_graph() as `slow`,
    mul_graph() as `m`, and its inputs `a` = [2, 3], `b` = [4, 5]."""
    assert c.execute("AI.MODELSTORE", "slow", "TF", "CPU", "INPUTS", 1, "n", "OUTPUTS", 1,
                     "out", "BLOB", tf_graphs.slow_graph()) == "OK"
    assert store_tf(c, "m", tf_graphs.mul_graph(), ["a", "b"], ["mul"]) == "OK"
    assert c.execute("AI.TENSORSET", "a", "FLOAT", 2, "VALUES", 2, 3) == "OK"
    assert c.execute("AI.TENSORSET", "b", "FLOAT", 2, "VALUES", 4, 5) == "OK"


class HeldQueue:
    """Holds the CPU queue's only worker with a slow run, so that requests sent meanwhile
    queue up behind it (and, for a BATCHSIZE model, are batched when it ends).

        with HeldQueue(port, slow_n(0.8)) as hold:
            ... send requests on other connections ...
            hold.wait_queued(1 + k)   # blocked clients: the slow run and k requests
            hold.queue(client, "AI.MODELEXECUTE", ...)   # or: send one, wait until queued
        # leaving the block reads the slow run's +OK (the worker is free again)
    """

    def __init__(self, port: int, n: int, key: str = "slow") -> None:
        self.blocker = RawClient(port)
        self.watch = RawClient(port)
        self.n = n
        self.key = key
        self.released = False
        self.queued = 0

    def __enter__(self) -> "HeldQueue":
        assert self.blocker.execute("AI.TENSORSET", "__n_hold", "INT32", "VALUES", self.n) == "OK"
        self.blocker.send("AI.MODELEXECUTE", self.key, "INPUTS", 1, "__n_hold", "OUTPUTS", 1,
                          "__o_hold")
        self.wait_queued(1)
        return self

    def wait_queued(self, total_blocked: int, timeout: float = 5.0) -> None:
        """Waits until `total_blocked` clients are blocked; the slow run must still be on."""
        deadline = time.monotonic() + timeout
        while blocked_clients(self.watch) < total_blocked:
            if time.monotonic() > deadline:
                raise AssertionError(f"only {blocked_clients(self.watch)} blocked clients, "
                                     f"expected {total_blocked}")
            time.sleep(0.002)
        assert not self.blocker.pending(), \
            "the slow run ended before the requests were queued: calibration too short"

    def queue(self, client: RawClient, *command: Any) -> None:
        """Sends command on client and waits until it is blocked behind the slow run, so that
        the queue's order is the order of these calls (for requests sent through queue only)."""
        client.send(*command)
        self.queued += 1
        self.wait_queued(1 + self.queued)

    def release(self) -> None:
        if not self.released:
            self.released = True
            reply = self.blocker.read()
            assert reply == "OK", f"slow run: {reply!r}"

    def __exit__(self, *exc: object) -> None:
        try:
            if exc[0] is None:
                self.release()
        finally:
            self.blocker.close()
            self.watch.close()


def replies_behind(hold: HeldQueue, port: int, commands: list[tuple[Any, ...]]) -> list[Any]:
    """Each command on a connection of its own, queued in this order behind hold's slow run
    (HeldQueue.queue); their replies once it is released."""
    clients = [RawClient(port) for _ in commands]
    try:
        with hold as h:
            for cl, command in zip(clients, commands):
                h.queue(cl, *command)
        return [cl.read() for cl in clients]
    finally:
        for cl in clients:
            cl.close()


def wait_until_blocked(c: Any, n: int, timeout: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if blocked_clients(c) >= n:
            return True
        time.sleep(0.002)
    return blocked_clients(c) >= n
