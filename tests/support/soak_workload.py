"""The fault soak's workload (bench/soak_isolation.py, tests/isolation/test_soak_isolation.py):
the models it stores, the requests its clients send, and what each answer must be.

Three backends at once: ONNX Runtime (in-process unless the session isolates ONNX), Torch
(isolated by the module argument `ISOLATE TORCH`: its models, a batched model and a
TorchScript script) and the fault-injection backend (tests/fault_backend/, isolated by
`AI.CONFIG LOADBACKEND ... ISOLATED`: an identity model and one whose re-creation the soak
holds with `slow-if-exists`). Each request template names the backends it touches, so a
request is "affected" by a fault only when one of them is isolated and was hit while the
request was in flight; every other request must be answered right and in its normal time.

A client records every request: its template, when it was sent and answered, and whether
the answer was right, wrong (the values differ from numpy's) or an error (kept with its text
for soak_checks.py). Inputs are [1, 4] float tensors of values from 10 to 1000 (never a
magic value of the fault backend) made anew every 32 requests; every answer's values are
compared with numpy's float32 arithmetic in the model's order of operations.
"""
from __future__ import annotations

import dataclasses
import random
import socket
import threading
import time
from array import array
from typing import Any, Callable

import numpy as np

import engine_models as em
import onnx_models
from resp import RawClient, RespError

FAULT_BACKEND = "fault-1.0-cpu"   # the name of the fault backend's folder (fault_injection)
ONNX_BATCH, TORCH_BATCH = 8, 4    # BATCHSIZE of the two batched models
OUT_PREFIX = "soak:o:"            # keys the requests write, one per request: counted at the end


@dataclasses.dataclass(frozen=True)
class Template:
    """One kind of request: `build(x, w, out)` -> the commands to send (the first is the
    request, the others read its output back), `expect(x, w)` -> the values the read-back
    must hold; `scratch` takes an output nobody checks (a batched model's batch size).
    `backends` are the soak's backend labels it runs on; `models` the keys an error may
    name."""
    name: str
    backends: frozenset[str]
    models: frozenset[str]
    build: Callable[[str, str, str, str], list[tuple[Any, ...]]]
    expect: Callable[[np.ndarray, np.ndarray], np.ndarray]


def _f32(v: float) -> np.float32:
    return np.float32(v)


def _exec(model: str, ins: list[str], outs: list[str]) -> tuple[Any, ...]:
    return ("AI.MODELEXECUTE", model, "INPUTS", len(ins), *ins, "OUTPUTS", len(outs), *outs)


def _get(key: str) -> tuple[Any, ...]:
    return ("AI.TENSORGET", key, "BLOB")


def _templates() -> list[Template]:
    t = []

    def add(name, backends, models, build, expect):
        t.append(Template(name, frozenset(backends), frozenset(models), build, expect))

    add("onnx_add", {"onnx"}, {"onnx_add"},
        lambda x, w, o, s: [_exec("onnx_add", [x, w], [o]), _get(o)], lambda x, w: x + w)
    add("onnx_batch", {"onnx"}, {"onnx_batch"},
        lambda x, w, o, s: [_exec("onnx_batch", [x], [s, o]), _get(o)],
        lambda x, w: x * _f32(2))
    add("torch_mul3", {"torch"}, {"torch_mul3"},
        lambda x, w, o, s: [_exec("torch_mul3", [x], [o]), _get(o)], lambda x, w: x * _f32(3))
    add("torch_batch", {"torch"}, {"torch_batch"},
        lambda x, w, o, s: [_exec("torch_batch", [x], [s, o]), _get(o)],
        lambda x, w: x * _f32(2))
    add("script", {"torch"}, {"script"},
        lambda x, w, o, s: [("AI.SCRIPTEXECUTE", "script", "add_ten", "INPUTS", 1, x,
                          "OUTPUTS", 1, o), _get(o)], lambda x, w: x + _f32(10))
    add("fault_id", {"fault"}, {"fault_id"},
        lambda x, w, o, s: [_exec("fault_id", [x], [o]), _get(o)], lambda x, w: x)
    add("fault_held", {"fault"}, {"fault_held"},
        lambda x, w, o, s: [_exec("fault_held", [x], [o]), _get(o)], lambda x, w: x)
    # DAGs mixing backends: in-process ONNX -> isolated Torch model -> isolated script; the
    # fault backend feeding ONNX; a batched ONNX member with a later script op; ONNX only.
    add("dag_mix", {"onnx", "torch"}, {"onnx_add", "torch_mul3", "script"},
        lambda x, w, o, s: [("AI.DAGEXECUTE", "LOAD", 2, x, w, "PERSIST", 1, o,
                          "|>", *_exec("onnx_add", [x, w], ["t"]),
                          "|>", *_exec("torch_mul3", ["t"], ["u"]),
                          "|>", "AI.SCRIPTEXECUTE", "script", "add_ten", "INPUTS", 1, "u",
                          "OUTPUTS", 1, o, "|>", *_get(o))],
        lambda x, w: (x + w) * _f32(3) + _f32(10))
    add("dag_fault_onnx", {"fault", "onnx"}, {"fault_id", "onnx_add"},
        lambda x, w, o, s: [("AI.DAGEXECUTE", "LOAD", 1, x, "PERSIST", 1, o,
                          "|>", *_exec("fault_id", [x], ["t"]),
                          "|>", *_exec("onnx_add", ["t", "t"], [o]), "|>", *_get(o))],
        lambda x, w: x + x)
    add("dag_batch_script", {"onnx", "torch"}, {"onnx_batch", "script"},
        lambda x, w, o, s: [("AI.DAGEXECUTE", "LOAD", 1, x, "PERSIST", 1, o,
                          "|>", *_exec("onnx_batch", [x], [s, "y"]),
                          "|>", "AI.SCRIPTEXECUTE", "script", "add_ten", "INPUTS", 1, "y",
                          "OUTPUTS", 1, o, "|>", *_get(o))],
        lambda x, w: x * _f32(2) + _f32(10))
    add("dag_onnx", {"onnx"}, {"onnx_add", "onnx_batch"},
        lambda x, w, o, s: [("AI.DAGEXECUTE", "LOAD", 2, x, w, "PERSIST", 1, o,
                          "|>", *_exec("onnx_add", [x, w], ["t"]),
                          "|>", *_exec("onnx_batch", ["t"], [s, o]), "|>", *_get(o))],
        lambda x, w: (x + w) * _f32(2))
    # Redis itself: a plain write and its read, on the main thread every run shares.
    add("redis_set", set(), set(),
        lambda x, w, o, s: [("SET", o, "v"), ("GET", o)], lambda x, w: np.array([]))
    return t


TEMPLATES = _templates()
BY_NAME = {t.name: t for t in TEMPLATES}
CLASS = {t.name: i for i, t in enumerate(TEMPLATES)}


def store_models(c: RawClient, hold_path: str) -> None:
    """Stores the soak's models and script (the held model first: the restarter re-creates
    in creation order, so a held re-creation holds the fault backend's other model too)."""
    blobs = [
        ("fault_held", "ONNX", ["BACKEND", FAULT_BACKEND], f"identity\nslow-if-exists {hold_path}"),
        ("fault_id", "ONNX", ["BACKEND", FAULT_BACKEND], "identity"),
        ("onnx_add", "ONNX", [], onnx_models.add().blob),
        ("onnx_batch", "ONNX", ["BATCHSIZE", ONNX_BATCH], em.onnx_batch_size_model()),
        ("torch_mul3", "TORCH", [], em.torch_times_three_model()),
        ("torch_batch", "TORCH", ["BATCHSIZE", TORCH_BATCH], em.torch_batch_size_model()),
    ]
    for key, kind, opts, blob in blobs:
        _ok(c.execute("AI.MODELSTORE", key, kind, "CPU", *opts, "BLOB", blob), key)
    _ok(c.execute("AI.SCRIPTSTORE", "script", "CPU", "ENTRY_POINTS", 2, "add_ten", "sub_pair",
                  "SOURCE", em.TORCH_SCRIPT), "script")


def _ok(reply: Any, what: str) -> None:
    if reply != "OK":
        raise RuntimeError(f"storing {what}: {reply!r}")


# What a store/delete cycle stores, by backend label: (kind, options, blob, template to run).
def churn_models() -> dict[str, tuple[str, list[Any], Any]]:
    return {"onnx": ("ONNX", [], onnx_models.add().blob),
            "torch": ("TORCH", [], em.torch_times_three_model()),
            "fault": ("ONNX", ["BACKEND", FAULT_BACKEND], "identity")}


class Records:
    """One client's requests, compact: template index, send time, latency (perf_counter
    seconds), outcome (0 right, 1 error, 2 wrong, 3 no answer); details of the others."""

    def __init__(self) -> None:
        self.cls = array("b")
        self.t0 = array("d")
        self.dt = array("d")
        self.outcome = array("b")
        self.details: list[tuple[int, float, float, int, str]] = []  # cls, t0, t1, outcome, text

    def add(self, cls: int, t0: float, t1: float, outcome: int, text: str = "") -> None:
        self.cls.append(cls)
        self.t0.append(t0)
        self.dt.append(t1 - t0)
        self.outcome.append(outcome)
        if outcome:
            self.details.append((cls, t0, t1, outcome, text))


def count_missing(c: RawClient, keys: list[str]) -> int:
    missing = 0
    for i in range(0, len(keys), 1000):
        chunk = keys[i:i + 1000]
        missing += len(chunk) - int(c.execute("EXISTS", *chunk))
    return missing


def first_error(reply: Any) -> str | None:
    """The error of a reply: the reply itself, or a DAG's first failed op."""
    if isinstance(reply, RespError):
        return str(reply)
    if isinstance(reply, list):
        for r in reply:
            if isinstance(r, RespError):
                return str(r)
    return None


class Client(threading.Thread):
    """One of the soak's clients: random templates (seeded) until `stop`, each request
    recorded; the keys it wrote (and was told OK for) are kept for the end's count."""

    def __init__(self, port: int, index: int, seed: int, stop: threading.Event,
                 reply_timeout: float, keep_keys: int) -> None:
        super().__init__(name=f"soak-client-{index}", daemon=True)
        self.port, self.index, self.stop_event = port, index, stop
        self.reply_timeout, self.keep_keys = reply_timeout, keep_keys
        self.checked = self.missing = 0   # keys counted (and unlinked) by sweeps
        self.rng = random.Random(seed * 1000 + index)
        self.records = Records()
        self.written: list[str] = []
        self.seq = 0
        self.error: BaseException | None = None
        self.x_key, self.w_key = f"soak:in:{index}:x", f"soak:in:{index}:w"

    def _inputs(self, c: RawClient) -> tuple[np.ndarray, np.ndarray]:
        x = np.array([[self.rng.uniform(10, 1000) for _ in range(4)]], dtype=np.float32)
        w = np.array([[self.rng.uniform(10, 1000) for _ in range(4)]], dtype=np.float32)
        for key, v in ((self.x_key, x), (self.w_key, w)):
            reply = c.execute("AI.TENSORSET", key, "FLOAT", 1, 4, "BLOB", v.tobytes())
            if reply != "OK":
                raise RuntimeError(f"AI.TENSORSET {key}: {reply!r}")
        return x, w

    def run(self) -> None:
        try:
            self._loop()
        except BaseException as exc:  # noqa: BLE001 - a failure of the soak, reported
            self.error = exc

    def _loop(self) -> None:
        c = RawClient(self.port, timeout=self.reply_timeout)
        x, w = self._inputs(c)
        while not self.stop_event.is_set():
            if self.seq % 32 == 31:
                x, w = self._inputs(c)
            t = TEMPLATES[self.rng.randrange(len(TEMPLATES))]
            out = f"{OUT_PREFIX}{self.index}:{self.seq}"
            self.seq += 1
            cmds = t.build(self.x_key, self.w_key, out, f"soak:bs:{self.index}")
            t0 = time.perf_counter()
            try:
                replies = [c.execute(*cmds[0])]
                err = first_error(replies[0])
                if err is None:
                    replies += [c.execute(*cmd) for cmd in cmds[1:]]
            except (socket.timeout, ConnectionError, OSError) as exc:
                self.records.add(CLASS[t.name], t0, time.perf_counter(), 3,
                                 f"no answer within {self.reply_timeout:.0f} s: {exc!r}")
                c.close()
                c = RawClient(self.port, timeout=self.reply_timeout)
                continue
            t1 = time.perf_counter()
            if err is not None:
                self.records.add(CLASS[t.name], t0, t1, 1, err)
                continue
            wrong = _wrong(t, replies, x, w)
            self.records.add(CLASS[t.name], t0, t1, 2 if wrong else 0, wrong or "")
            if not wrong:
                self.written.append(out)
                if len(self.written) >= self.keep_keys:
                    self._sweep(c)
        c.close()

    def _sweep(self, c: RawClient) -> None:
        """Counts the keys written so far, then unlinks them: a long soak's keys would
        outgrow the machine's memory. A key lost before its sweep is counted missing."""
        self.checked += len(self.written)
        self.missing += count_missing(c, self.written)
        for i in range(0, len(self.written), 1000):
            c.execute("UNLINK", *self.written[i:i + 1000])
        self.written.clear()


def _wrong(t: Template, replies: list[Any], x: np.ndarray, w: np.ndarray) -> str | None:
    """None when the answer is right, else what differs."""
    if t.name == "redis_set":
        return None if replies == ["OK", b"v"] else f"SET/GET answered {replies!r}"
    last = replies[-1]
    blob = last[-1] if isinstance(last, list) else last   # a DAG's reply: its TENSORGET last
    if not isinstance(blob, bytes):
        return f"answered {replies!r}"
    got = np.frombuffer(blob, dtype=np.float32)
    want = t.expect(x, w).reshape(-1)
    if got.shape != want.shape or not np.allclose(got, want, rtol=1e-6, atol=0):
        return f"got {got.tolist()} for {want.tolist()}"
    return None
