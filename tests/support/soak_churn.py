"""The fault soak's store/delete churn (bench/soak_isolation.py): beside the clients and the
faults, models stored on each backend (in-process and isolated), run once and checked, and
deleted (`AI.MODELDEL` or `DEL`), each command recorded as the clients' requests are: a store
on a host inside its fault must fail with the failure table's error, anywhere else succeed."""
from __future__ import annotations

import random
import threading
import time
from typing import Any

import numpy as np

from resp import RawClient, RespError
from soak_workload import Records


class Churn(threading.Thread):
    """Stores a model on a random backend, runs it once, deletes it (AI.MODELDEL or DEL),
    until `stop`; each command is recorded as the clients' requests are."""

    def __init__(self, port: int, stop: threading.Event, seed: int, labels: list[str],
                 models: dict[str, tuple[str, list[Any], Any]], classes: dict[str, int],
                 reply_timeout: float) -> None:
        super().__init__(name="soak-churn", daemon=True)
        self.port, self.stop_event, self.labels = port, stop, labels
        self.models, self.classes = models, classes
        self.rng = random.Random(seed + 7)
        self.records = Records()
        self.stores = self.deletes = 0
        self.reply_timeout = reply_timeout

    def _do(self, label: str, *cmd: Any) -> Any:
        t0 = time.perf_counter()
        try:
            r = self.c.execute(*cmd)
        except OSError as exc:   # a timeout, or the connection lost: no answer
            self.records.add(self.classes[label], t0, time.perf_counter(), 3,
                             f"{cmd[0]}: no answer within {self.reply_timeout:.0f} s: {exc!r}")
            self.c.close()
            self.c = RawClient(self.port, timeout=self.reply_timeout)
            return None
        t1 = time.perf_counter()
        outcome = 1 if isinstance(r, RespError) else 0
        self.records.add(self.classes[label], t0, t1, outcome, str(r) if outcome else "")
        return r

    def run(self) -> None:
        self.c = RawClient(self.port, timeout=self.reply_timeout)
        x = np.array([[20.5, 21, 22, 23]], dtype=np.float32)
        assert self.c.execute("AI.TENSORSET", "soak:churn:x", "FLOAT", 1, 4, "BLOB",
                              x.tobytes()) == "OK"
        want = {"onnx": x + x, "torch": x * np.float32(3), "fault": x}
        n = 0
        while not self.stop_event.wait(self.rng.uniform(0.2, 0.6)):
            label = self.rng.choice(self.labels)
            kind, opts, blob = self.models[label]
            key = f"soak:churn:{n}"
            n += 1
            self.stores += 1
            if self._do(label, "AI.MODELSTORE", key, kind, "CPU", *opts, "BLOB", blob) != "OK":
                continue
            ins = ["soak:churn:x"] * (2 if label == "onnx" else 1)
            r = self._do(label, "AI.MODELEXECUTE", key, "INPUTS", len(ins), *ins,
                         "OUTPUTS", 1, "soak:churn:y")
            if r == "OK":
                got = np.frombuffer(self.c.execute("AI.TENSORGET", "soak:churn:y", "BLOB"),
                                    dtype=np.float32)
                if not np.array_equal(got, want[label].reshape(-1)):
                    self.records.add(self.classes[label], time.perf_counter(),
                                     time.perf_counter(), 2,
                                     f"{key} answered {got.tolist()} for {want[label].tolist()}")
            self.deletes += 1
            self._do(label, *(("AI.MODELDEL", key) if n % 2 else ("DEL", key)))
        self.c.close()
