"""The fault soak's faults (bench/soak_isolation.py): what hits the backend hosts, and when
each host is back.

* `kill`: `kill -9` of a host (its pid from INFO's ai_isolation section);
* `spawn_fail`: the host binary (redisai-backend-host beside the soak's copy of redisai.so)
  made non-executable, the host killed, the mode restored after `spawn_fail_s`, in a
  `finally`: every restart attempt meanwhile fails its spawn;
* `hold`: the fault backend's host killed while the file of `slow-if-exists` exists, so its
  restart holds in the re-creation of the held model for `hold_s`; meanwhile the Torch host
  is killed too (a host restarts on its own, never behind another host's re-creation);
(soak_churn.py stores and deletes models meanwhile.)

Each fault opens a `Window` on the host(s) it hits, closed when INFO shows the host back
(`state=ready`, a new pid, nothing left to re-create): soak_checks.py excuses a request's
error only inside a window of a host it runs on. Each fault records how long its host took
to come back and the bound it had: the back-off of docs/isolation.md ("The restart policy":
at once after a healthy host, then 100 ms doubling to 30 s per failure in a row) plus
`restart_factor` times that host's normal restart (measured in the warm-up, under load),
plus `restart_slack_s` (a Torch host's restart under load varied from 0.25 to 1.5 s in one run).
"""
from __future__ import annotations

import contextlib
import dataclasses
import os
import pathlib
import random
import signal
import threading
import time
from typing import Any, Iterator

import numpy as np

from helpers import isolated_hosts
from resp import RawClient
from soak_workload import FAULT_BACKEND

BACKOFF_FIRST_S, BACKOFF_MAX_S = 0.1, 30.0
PROBE = {"torch": "torch_mul3", "fault": "fault_id", "onnx": "onnx_add"}


def label_of(field: str, fields: dict[str, str]) -> str:
    """The soak's label of an ai_isolation line: fault, torch or onnx."""
    if FAULT_BACKEND.replace("-", "_").replace(".", "_") in field:
        return "fault"
    return fields["kind"].lower()


def hosts(c: RawClient) -> dict[str, dict[str, str]]:
    """INFO's isolated hosts by label."""
    return {label_of(f, v): v for f, v in isolated_hosts(c.execute("INFO", "MODULES")).items()}


def is_back(info: dict[str, str] | None, old_pid: int) -> bool:
    return bool(info) and info["state"] == "ready" and int(info["pid"]) not in (0, old_pid) \
        and info.get("recreating", "0") == "0"


def first_attempt_after(restored_s: float) -> float:
    """When, counted from a healthy host's death, the restarter's first spawn at or after
    restored_s is due: at once, then after 100 ms, 200 ms, ... (30 s at most) per failure."""
    t, delay = 0.0, BACKOFF_FIRST_S
    while t < restored_s:
        t += delay
        delay = min(delay * 2, BACKOFF_MAX_S)
    return t


@contextlib.contextmanager
def unexecutable(path: pathlib.Path) -> Iterator[None]:
    """path without its execute bits for the with-block; its mode back whatever happens."""
    mode = path.stat().st_mode
    os.chmod(path, mode & ~0o111)
    try:
        yield
    finally:
        os.chmod(path, mode)


@dataclasses.dataclass
class Window:
    label: str
    fault: str
    start: float
    end: float | None = None


@dataclasses.dataclass
class Fault:
    kind: str          # kill, spawn_fail, hold (the held host), kill_during_hold, calibration
    label: str
    at: float          # perf_counter of the kill
    bound_s: float     # back within this, counted from `at`
    back_s: float | None = None   # None: not back by the end of its wait


class Injector:
    """Injects faults and watches the hosts come back; shared by the warm-up (calibration)
    and the fault thread."""

    def __init__(self, port: int, host_exe: pathlib.Path, hold: pathlib.Path, cfg: Any) -> None:
        self.c = RawClient(port, timeout=cfg.reply_timeout)
        self.host_exe, self.hold_path, self.cfg = host_exe, hold, cfg
        self.lock = threading.Lock()
        self.windows: list[Window] = []
        self.faults: list[Fault] = []
        self.normal: dict[str, float] = {}   # label -> normal restart, seconds
        self.lost: set[str] = set()          # hosts that never came back: no more faults
        x = np.array([[10.5, 11, 12, 13]], dtype=np.float32)
        assert self.c.execute("AI.TENSORSET", "soak:probe", "FLOAT", 1, 4, "BLOB",
                              x.tobytes()) == "OK"

    def close(self) -> None:
        self.c.close()

    def labels(self) -> list[str]:
        return sorted(hosts(self.c))

    # -- watching -------------------------------------------------------------------
    def _open(self, label: str, fault: str, start: float) -> Window:
        w = Window(label, fault, start)
        with self.lock:
            self.windows.append(w)
        return w

    def wait_back(self, waits: dict[str, tuple[int, float, Window, Fault]]) -> None:
        """Polls INFO until each host (label -> old pid, give-up time, its window, its fault)
        is back; closes its window and records its time. A host not back by its give-up time
        is lost: its window stays open and the soak stops hitting it."""
        left = dict(waits)
        while left:
            now_hosts = hosts(self.c)
            now = time.perf_counter()
            for label, (old, give_up, window, fault) in list(left.items()):
                if is_back(now_hosts.get(label), old):
                    window.end = now
                    fault.back_s = now - fault.at
                    del left[label]
                elif now > give_up:
                    self.lost.add(label)
                    del left[label]
            time.sleep(0.01)

    def probe(self, label: str, timeout: float = 30.0) -> bool:
        """Runs the host's probe model until it answers: a host that answered a run is
        healthy, and its next death restarts it at once (the back-off starts over)."""
        deadline = time.perf_counter() + timeout
        while time.perf_counter() < deadline:
            r = self.c.execute("AI.MODELEXECUTE", PROBE[label], "INPUTS", *(
                (2, "soak:probe", "soak:probe") if label == "onnx" else (1, "soak:probe")),
                "OUTPUTS", 1, "soak:probe:out")
            if r == "OK":
                return True
            time.sleep(0.05)
        return False

    def _give_up(self, bound: float) -> float:
        return time.perf_counter() + max(2 * bound, bound + 10.0)

    def _bound(self, label: str, backoff_s: float) -> float:
        return backoff_s + self.cfg.restart_factor * self.normal.get(label, 0.0) + \
            self.cfg.restart_slack_s

    def _kill(self, label: str) -> tuple[int, float]:
        pid = int(hosts(self.c)[label]["pid"])
        at = time.perf_counter()
        os.kill(pid, signal.SIGKILL)
        return pid, at

    # -- the faults -----------------------------------------------------------------
    def calibrate(self, label: str) -> float:
        """One kill of a healthy host under load: its normal restart time, the scale of its
        bounds. Its window excuses its requests' errors as any kill's does; it must be back
        within 60 s."""
        self.probe(label)
        pid, at = self._kill(label)
        fault = Fault("calibration", label, at, 60.0)
        w = self._open(label, "calibration", at)
        self.wait_back({label: (pid, at + 60.0, w, fault)})
        self.faults.append(fault)
        if fault.back_s is not None:
            self.normal[label] = fault.back_s
        return fault.back_s or 60.0

    def kill(self, label: str) -> None:
        pid, at = self._kill(label)
        fault = Fault("kill", label, at, self._bound(label, 0.0))
        w = self._open(label, "kill", at)
        self.faults.append(fault)
        self.wait_back({label: (pid, self._give_up(fault.bound_s), w, fault)})

    def spawn_fail(self, label: str) -> None:
        with unexecutable(self.host_exe):
            pid, at = self._kill(label)
            w = self._open(label, "spawn_fail", at)
            time.sleep(self.cfg.spawn_fail_s)
        restored = time.perf_counter() - at
        fault = Fault("spawn_fail", label, at, self._bound(label, first_attempt_after(restored)))
        self.faults.append(fault)
        self.wait_back({label: (pid, self._give_up(fault.bound_s), w, fault)})

    def hold(self, others: list[str]) -> None:
        """The fault backend's re-creation held for hold_s; each other host killed 0.5 s into
        the hold must come back on its own time meanwhile."""
        started = pathlib.Path(f"{self.hold_path}.started")
        done = pathlib.Path(f"{self.hold_path}.done")
        for p in (started, done):
            p.unlink(missing_ok=True)
        self.hold_path.touch()
        waits = {}
        try:
            pid, at = self._kill("fault")
            w = self._open("fault", "hold", at)
            deadline = time.perf_counter() + 30
            while not started.exists() and time.perf_counter() < deadline:
                time.sleep(0.01)
            time.sleep(0.5)
            for label in others:
                opid, oat = self._kill(label)
                of = Fault("kill_during_hold", label, oat, self._bound(label, 0.0))
                self.faults.append(of)
                waits[label] = (opid, self._give_up(of.bound_s), self._open(label, "kill", oat),
                                of)
            # Watch the others while the hold lasts: each must be back on its own time.
            end = at + self.cfg.hold_s
            self._watch_until(waits, end)
        finally:
            self.hold_path.unlink(missing_ok=True)
        released = time.perf_counter() - at
        fault = Fault("hold", "fault", at, self._bound("fault", released))
        self.faults.append(fault)
        waits["fault"] = (pid, self._give_up(fault.bound_s), w, fault)
        self.wait_back({k: v for k, v in waits.items() if v[3].back_s is None
                        and k not in self.lost})

    def _watch_until(self, waits: dict[str, tuple[int, float, Window, Fault]],
                     until: float) -> None:
        """wait_back's polling, but only until `until`: whatever is not back by then is left
        to the caller's wait_back."""
        while time.perf_counter() < until:
            left = {k: v for k, v in waits.items() if v[3].back_s is None}
            if not left:
                time.sleep(min(0.05, max(0.0, until - time.perf_counter())))
                continue
            now_hosts = hosts(self.c)
            now = time.perf_counter()
            for label, (old, _, window, fault) in left.items():
                if is_back(now_hosts.get(label), old):
                    window.end = now
                    fault.back_s = now - fault.at
            time.sleep(0.01)


class FaultThread(threading.Thread):
    """Injects one fault after another until `stop`: a fixed cycle (kill each host, the
    held create with a kill of the others, a failed spawn of each host), with random gaps
    of gap_s; a host must be back and have answered a run before the next fault."""

    def __init__(self, inj: Injector, stop: threading.Event, seed: int) -> None:
        super().__init__(name="soak-faults", daemon=True)
        self.inj, self.stop_event = inj, stop
        self.rng = random.Random(seed)
        self.error: BaseException | None = None

    def plan(self) -> list[tuple[str, str]]:
        """The cycle, limited to cfg.faults and cfg.hosts (all by default)."""
        cfg = self.inj.cfg
        labels = [x for x in self.inj.labels() if not cfg.hosts or x in cfg.hosts]
        out = [("kill", label) for label in labels]
        if "fault" in labels:
            out.append(("hold", "fault"))
        out += [("spawn_fail", label) for label in reversed(labels)]
        return [(k, x) for k, x in out if not cfg.faults or k in cfg.faults]

    def run(self) -> None:
        try:
            steps = self.plan()
            if not steps:
                return
            i = 0
            while not self.stop_event.is_set():
                kind, label = steps[i % len(steps)]
                i += 1
                live = [x for x in self.inj.labels() if x not in self.inj.lost]
                if label not in live:   # lost: the soak stops hitting it
                    self.stop_event.wait(0.2)
                    continue
                for x in live:
                    self.inj.probe(x)
                if self.stop_event.is_set():
                    break
                if kind == "kill":
                    self.inj.kill(label)
                elif kind == "spawn_fail":
                    self.inj.spawn_fail(label)
                else:
                    hosts = self.inj.cfg.hosts
                    self.inj.hold([x for x in live if x != "fault" and (not hosts or x in hosts)])
                self.stop_event.wait(self.rng.uniform(*self.inj.cfg.gap_s))
        except BaseException as exc:  # noqa: BLE001 - reported as a failure of the soak
            self.error = exc
