"""TorchScript models the tests store, made at test time with the real torch package.

torch is imported lazily (the first builder call). Each builder is cached, so a pytest
session builds every model once. A builder returns a `Built`: the serialized TorchScript
blob (torch.jit.save), the names MODELGET must report, sample inputs, and `run`, which
loads the SAME blob with torch.jit.load and computes the framework's own output
in-process (flattened like RedisAI flattens Tuple and List outputs).

The module definitions live at module level: torch.jit.script needs their source file.
"""
from __future__ import annotations

import dataclasses
import functools
import io
from typing import Any, Callable

import numpy as np


@functools.cache
def _torch() -> Any:
    import torch  # noqa: PLC0415 - lazy on purpose: importing takes seconds

    torch.set_num_threads(1)  # in-process reference runs; the server has its own threads
    return torch


@dataclasses.dataclass(frozen=True)
class Built:
    blob: bytes
    inputs: tuple[str, ...]        # MODELGET "inputs" (forward's argument names)
    outputs: int | None            # MODELGET "outputs" count of "" names; None: a List output
    sample: tuple[np.ndarray, ...]
    run: Callable[..., list[np.ndarray]]


def flatten(result: Any) -> list[np.ndarray]:
    torch = _torch()
    if isinstance(result, torch.Tensor):
        return [result.detach().contiguous().numpy()]
    if isinstance(result, (tuple, list)):
        out: list[np.ndarray] = []
        for r in result:
            out += flatten(r)
        return out
    raise TypeError(f"not a tensor result: {type(result)!r}")


def _save(module: Any) -> bytes:
    buf = io.BytesIO()
    _torch().jit.save(module, buf)
    return buf.getvalue()


def _runner(blob: bytes) -> Callable[..., list[np.ndarray]]:
    torch = _torch()
    loaded = torch.jit.load(io.BytesIO(blob))
    loaded.eval()

    def run(*arrays: np.ndarray) -> list[np.ndarray]:
        with torch.no_grad():
            return flatten(loaded(*[torch.from_numpy(np.array(a)) for a in arrays]))
    return run


def _built(module: Any, inputs: tuple[str, ...], outputs: int | None,
           sample: tuple[np.ndarray, ...]) -> Built:
    blob = _save(module)
    return Built(blob=blob, inputs=inputs, outputs=outputs, sample=sample, run=_runner(blob))


def _f32(*shape: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


@functools.cache
def defs() -> Any:
    """tests/support/torch_defs.py, the nn.Module classes (imports torch)."""
    _torch()
    import torch_defs  # noqa: PLC0415

    return torch_defs


@functools.cache
def cnn_module() -> Any:
    """The MNIST-sized CNN of torch_defs with fixed weights (seed 0), in eval mode. Shared
    with onnx_models (exported there with torch.onnx.export)."""
    torch = _torch()
    torch.manual_seed(0)
    return defs().CNN().eval()


def cnn_sample(batch: int = 1, seed: int = 7) -> np.ndarray:
    return np.random.default_rng(seed).random((batch, 1, 28, 28), dtype=np.float32)


# --- builders -------------------------------------------------------------------------------

@functools.cache
def add() -> Built:
    """torch.jit.script: forward(a, b) -> a + b (any dtype)."""
    return _built(_torch().jit.script(defs().Add()), ("a", "b"), 1,
                  (_f32(2, 3, seed=1), _f32(2, 3, seed=2)))


@functools.cache
def linear() -> Built:
    """torch.jit.trace of nn.Linear(4, 3) (seed 0): forward(x), x float [n, 4]."""
    torch = _torch()
    torch.manual_seed(0)
    m = defs().Linear().eval()
    traced = torch.jit.trace(m, torch.zeros(2, 4))
    return _built(traced, ("x",), 1, (_f32(2, 4, seed=3),))


@functools.cache
def three_inputs() -> Built:
    """torch.jit.trace: forward(a, b, c) -> a * b + c."""
    torch = _torch()
    z = torch.zeros(2, 2)
    traced = torch.jit.trace(defs().ThreeInputs(), (z, z, z))
    return _built(traced, ("a", "b", "c"), 1,
                  (_f32(2, 2, seed=4), _f32(2, 2, seed=5), _f32(2, 2, seed=6)))


@functools.cache
def tuple_out() -> Built:
    """torch.jit.script: forward(a, b) -> (a + b, a * b)."""
    return _built(_torch().jit.script(defs().TupleOut()), ("a", "b"), 2,
                  (_f32(3, seed=7), _f32(3, seed=8)))


@functools.cache
def list_out() -> Built:
    """torch.jit.script: forward(a, b) -> [a + b, a - b, a * b] (List[Tensor])."""
    return _built(_torch().jit.script(defs().ListOut()), ("a", "b"), None,
                  (_f32(2, 2, seed=9), _f32(2, 2, seed=10)))


@functools.cache
def int64_affine() -> Built:
    """torch.jit.trace with an int64 example: forward(x) -> x * 3 + 1."""
    torch = _torch()
    traced = torch.jit.trace(defs().IntAffine(), torch.zeros(2, 3, dtype=torch.int64))
    x = np.array([[0, 1, 2], [-5, 1 << 40, 7]], dtype=np.int64)
    return _built(traced, ("x",), 1, (x,))


@functools.cache
def bool_xor() -> Built:
    """torch.jit.script: forward(a, b) -> logical_xor(a, b) (bool in, bool out)."""
    a = np.array([True, False, True, False])
    b = np.array([True, True, False, False])
    return _built(_torch().jit.script(defs().BoolXor()), ("a", "b"), 1, (a, b))


@functools.cache
def flip() -> Built:
    """torch.jit.script: forward(x) -> flip(x, [0]); keeps any dtype (dtype tests)."""
    return _built(_torch().jit.script(defs().Flip()), ("x",), 1, (_f32(3, 2),))


@functools.cache
def half_out() -> Built:
    """torch.jit.script: forward(x) -> x.half(), a float16 output (BLOB only)."""
    return _built(_torch().jit.script(defs().Half()), ("x",), 1, (_f32(3),))


@functools.cache
def int_arg() -> Built:
    """torch.jit.script: forward(x, n: int) -> x * n; a run with two tensors is refused."""
    return _built(_torch().jit.script(defs().IntArg()), ("x", "n"), 1,
                  (_f32(3, seed=11), _f32(3, seed=12)))


@functools.cache
def optional_arg() -> Built:
    """torch.jit.script: forward(x, y: Optional[Tensor]) -> x + y."""
    return _built(_torch().jit.script(defs().OptionalArg()), ("x", "y"), 1,
                  (_f32(2, 2, seed=13), _f32(2, 2, seed=14)))


@functools.cache
def cnn() -> Built:
    """torch.jit.trace of cnn_module(): forward(x) [n,1,28,28] -> [n,10]."""
    torch = _torch()
    traced = torch.jit.trace(cnn_module(), torch.zeros(1, 1, 28, 28))
    return _built(traced, ("x",), 1, (cnn_sample(),))


def stateful_model_blob() -> bytes:
    """A model that keeps its input past the run (a module attribute) and changes the kept
    one in place in the next run: what a backend may do with an input it was given
    (scripts/test_torch_inputs.py, isolation/test_isolation_host_scripts.py)."""
    import torch  # noqa: PLC0415

    class Keep(torch.nn.Module):
        """Keeps its input in an attribute and changes the kept one in the next run."""

        def __init__(self) -> None:
            super().__init__()
            self.keep = torch.zeros(3)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            old = self.keep
            old.add_(1)
            self.keep = x
            return old * 1

    buf = io.BytesIO()
    torch.jit.save(torch.jit.script(Keep()), buf)
    return buf.getvalue()


def torch_version() -> str:
    return _torch().__version__


# --- TorchScript scripts (sources; compiled by the server's TORCH backend) -----------------

# Entry points (the (List[Tensor], List[str], List[str]) signature) and legacy functions.
SCRIPT = '''
def bar(tensors: List[Tensor], keys: List[str], args: List[str]):
    a = tensors[0]
    b = tensors[1]
    return a + b

def bar_variadic(tensors: List[Tensor], keys: List[str], args: List[str]):
    a = tensors[0]
    l = tensors[1:]
    return a + l[0]

def counts(tensors: List[Tensor], keys: List[str], args: List[str]):
    return torch.tensor([len(tensors), len(keys), len(args)])

def add_args(tensors: List[Tensor], keys: List[str], args: List[str]):
    s = tensors[0]
    for x in args:
        s = s + int(x)
    return s

def tuple_out(tensors: List[Tensor], keys: List[str], args: List[str]) -> Tuple[Tensor, Tensor]:
    return tensors[0] + tensors[1], tensors[0] - tensors[1]

def list_out(tensors: List[Tensor], keys: List[str], args: List[str]) -> List[Tensor]:
    return [tensors[0], tensors[1], tensors[0] * tensors[1]]

def ret_int(tensors: List[Tensor], keys: List[str], args: List[str]) -> int:
    return 1

def calls_helper(tensors: List[Tensor], keys: List[str], args: List[str]):
    return helper_double(tensors[0])

def helper_double(x: Tensor):
    return x * 2

def legacy_add(a, b):
    return a + b

def legacy_var(a: Tensor, rest: List[Tensor]):
    s = a
    for t in rest:
        s = s + t
    return s

def legacy_int_param(a: Tensor, n: int):
    return a
'''

# One entry point, `empty`: an output with a dim of 0, which no client could TENSORSET.
EMPTY_SCRIPT = """
def empty(tensors: List[Tensor], keys: List[str], args: List[str]):
    return tensors[0][0:0]
"""

ENTRY_POINTS = ("bar", "bar_variadic", "counts", "add_args", "tuple_out", "list_out", "ret_int",
                "calls_helper")

# redis.execute and redisAI.model_execute inside scripts.
REDIS_SCRIPT = '''
def _to_int_tensor(v: Any):
    return torch.tensor(int(str(v)))

def set_get(tensors: List[Tensor], keys: List[str], args: List[str]):
    redis.execute("SET", keys[0], args[0])
    return _to_int_tensor(redis.execute("GET", keys[0]))

def set_incr(tensors: List[Tensor], keys: List[str], args: List[str]):
    redis.execute("SET", keys[0], args[0])
    return _to_int_tensor(redis.execute("INCR", keys[0]))

def list_range(tensors: List[Tensor], keys: List[str], args: List[str]):
    for a in args:
        redis.execute("RPUSH", keys[0], a)
    values = redis.asList(redis.execute("LRANGE", keys[0], "0", "-1"))
    out: List[int] = []
    for v in values:
        out.append(int(str(v)))
    return torch.tensor(out)

def missing_get(tensors: List[Tensor], keys: List[str], args: List[str]):
    v = redis.execute("GET", keys[0])
    # TorchScript folds `v is None` to False for a value typed Any, so test None-ness by
    # what it prints and that it is not a string.
    if str(v) == "None" and not isinstance(v, str):
        return torch.tensor([1])
    return torch.tensor([0])

def redis_error(tensors: List[Tensor], keys: List[str], args: List[str]):
    redis.execute("SET", keys[0])

def model_run(tensors: List[Tensor], keys: List[str], args: List[str]):
    out = redisAI.model_execute(keys[0], [tensors[0], tensors[1]], 1)
    return out[0] * 2
'''

REDIS_ENTRY_POINTS = ("set_get", "set_incr", "list_range", "missing_get", "redis_error",
                      "model_run")
