"""The TFLITE fuzz run (tests/models/test_tflite_fuzz.py): damaged models stored in a real
server, the replies sorted into classes, every accepted model run once, the server checked
after each batch.

What a store may answer: OK, or an error that starts with one of the backend's texts
(STORE_TEXTS, tflite's tfl_model.c and tfl_check.c). What a run of an accepted model may
answer: OK, or one of RUN_TEXTS. Anything else (another text, no reply within
REPLY_TIMEOUT, a closed connection) is a finding, recorded with the mutation that caused it
(tflite_mutations.py reproduces it from base, kind, seed and index).

The validator (redisai_tflite_check, beside the backend) is also run alone, to find at test
time the seeds of the two crash classes of LiteRT 2.3.0: one that kills it with a signal,
one that makes LiteRT throw.
"""
from __future__ import annotations

import collections
import dataclasses
import pathlib
import re
import resource
import socket
import subprocess
import time
from typing import Any, Iterable, Sequence

from fuzz_harness import CRASH_MARKS
from resp import RawClient, RespError
from tflite_fuzz_models import Base
from tflite_mutations import Mutation, mutate

STORE_TEXTS = (
    "Failed to load model from buffer",
    "Failed to construct interpreter",
    "Unsupported input data type",
    "Unsupported output data type",
    "Float16 not currently supported as input tensor data type",
    "Float16 not currently supported as output tensor data type",
)
RUN_TEXTS = (
    "Failed to invoke TfLite",
    "Failed to resize input tensors",
    "Failed to construct interpreter",
    "Input tensor type doesn't match the type expected by the model definition",
    "Number of keys given as INPUTS here does not match model definition",
    "Number of keys given as OUTPUTS here does not match model definition",
)
# A store waits for the validator (its own deadline is 30 s); more than this is a hang.
REPLY_TIMEOUT = 60.0


def store_class(text: str) -> str:
    """The class of a refused store, for the counts: the validator's deaths and LiteRT's
    exceptions apart from the clean refusals."""
    m = re.search(r"crashed LiteRT in the validator: signal (\d+ \w+)", text)
    if m:
        return f"validator killed ({m.group(1)})"
    if "LiteRT threw" in text:
        return "LiteRT threw (caught)"
    if "did not finish in time" in text:
        return "validator timed out"
    if "out of memory" in text:
        return text.split(" (", 1)[0] + " (out of memory)"
    return text.split(" (", 1)[0]


@dataclasses.dataclass
class Validator:
    """redisai_tflite_check run alone, as the backend runs it: the model on fd 0."""
    exe: pathlib.Path
    lib: pathlib.Path

    @classmethod
    def beside(cls, backend: pathlib.Path) -> "Validator":
        return cls(backend.parent / "redisai_tflite_check", backend.parent / "lib" / "libLiteRt.so")

    def verdict(self, blob: bytes) -> tuple[int, str]:
        """(the signal that killed it or 0, its line)."""
        p = subprocess.run([str(self.exe), str(self.lib)], input=blob, capture_output=True,
                           timeout=REPLY_TIMEOUT, preexec_fn=_limit_self)
        return (-p.returncode if p.returncode < 0 else 0), p.stdout.decode(errors="replace").strip()

    def search(self, base: Base, kind: str, seed: int, want: str, tries: int) -> Mutation:
        """The first mutation of `kind` (indices 0, 1, ...) whose verdict is `want`: "signal"
        (killed) or "threw" (LiteRT threw). AssertionError after `tries`."""
        seen: collections.Counter = collections.Counter()
        for i in range(tries):
            blob = mutate(base.blob, kind, seed, i)
            sig, line = self.verdict(blob)
            if (want == "signal" and sig) or (want == "threw" and "LiteRT threw" in line):
                return Mutation(base.name, kind, seed, i, blob)
            seen[f"signal {sig}" if sig else line.split(" (", 1)[0]] += 1
        raise AssertionError(f"no {kind} mutation of {base.name} (seed {seed}, {tries} tries) "
                             f"gave '{want}' in the validator alone: {dict(seen)}; LiteRT "
                             "changed, or the crash class moved")


# --- memory -----------------------------------------------------------------------------------

# Each process of a fuzz run (the server, its backend host, the validators they spawn) may
# map this much: a mutation that declares a tensor of gigabytes fails to allocate it at once
# instead of taking a shared machine's memory. A server with the backend maps ~110 MB.
ADDRESS_SPACE = 1 << 30


def _limit_self() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_SPACE, ADDRESS_SPACE))


def _descendants(pid: int) -> list[int]:
    out = []
    for task in pathlib.Path(f"/proc/{pid}/task").glob("*"):
        try:
            children = (task / "children").read_text().split()
        except OSError:
            continue
        for c in map(int, children):
            out += [c, *_descendants(c)]
    return out


def limit_address_space(pid: int, size: int = ADDRESS_SPACE) -> None:
    """`size` bytes of address space for a running server and the processes it started (a
    backend host); what they spawn later inherits it."""
    for p in [pid, *_descendants(pid)]:
        resource.prlimit(p, resource.RLIMIT_AS, (size, size))


# --- the run ----------------------------------------------------------------------------------

@dataclasses.dataclass
class Counts:
    stores: collections.Counter = dataclasses.field(default_factory=collections.Counter)
    runs: collections.Counter = dataclasses.field(default_factory=collections.Counter)
    by_kind: dict = dataclasses.field(default_factory=lambda: collections.defaultdict(
        collections.Counter))
    findings: list[str] = dataclasses.field(default_factory=list)
    slowest: tuple[float, str] = (0.0, "")

    def report(self) -> str:
        total = sum(self.stores.values())
        lines = [f"{total} stores, slowest {self.slowest[0]:.2f} s ({self.slowest[1]}):"]
        lines += [f"  {n:6}  {c}" for c, n in self.stores.most_common()]
        lines.append(f"{sum(self.runs.values())} runs of accepted models:")
        lines += [f"  {n:6}  {c}" for c, n in self.runs.most_common()]
        lines.append("by kind: " + "; ".join(
            f"{k} {dict(v)}" for k, v in sorted(self.by_kind.items())))
        lines += [f"FINDING {f}" for f in self.findings[:20]]
        return "\n".join(lines)


class Target:
    """The server under test: one client, its log, its process and (isolated) its host."""

    def __init__(self, server: Any) -> None:
        self.server = server
        self.client = RawClient(server.port, timeout=REPLY_TIMEOUT)
        self.pid = int(self.info("server")["process_id"])
        self.host = self.host_fields()

    def info(self, section: str) -> dict[str, str]:
        text = self.client.execute("INFO", section).decode()
        return dict(line.split(":", 1) for line in text.splitlines() if ":" in line)

    def host_fields(self) -> dict[str, str] | None:
        """The TFLITE backend host's INFO fields (pid, restarts, ...), None in-process."""
        for key, value in self.info("modules").items():
            if key.startswith("ai_host_") and "kind=TFLITE" in value:
                return dict(kv.split("=", 1) for kv in value.split(","))
        return None

    def alive_problems(self) -> list[str]:
        """What is wrong with the server now: nothing, when it runs with the same pid (and,
        isolated, the same host that never restarted) and its log shows no crash."""
        problems = []
        if not self.server.alive():
            return [f"the server exited ({self.server.proc.returncode})"]
        log = self.server.log()
        problems += [f"the log says {m!r}" for m in CRASH_MARKS if m in log]
        if int(self.info("server")["process_id"]) != self.pid:
            problems.append("the server's pid changed")
        host = self.host_fields()
        if self.host is not None and host is not None and (
                host["pid"] != self.host["pid"] or host["restarts"] != self.host["restarts"]):
            problems.append(f"the TFLITE host changed: {self.host} -> {host}")
        return problems

    def execute(self, *args: Any) -> Any:
        return self.client.execute(*args)


def known_good_problem(t: Target, base: Base, key: str) -> str:
    """'' when PING answers and the stored `key` (a model of `base`) gives its exact output."""
    if t.execute("PING") != "PONG":
        return "PING did not answer PONG"
    t.execute(*base.tensorset("good:in"))
    reply = t.execute("AI.MODELEXECUTE", key, "INPUTS", 1, "good:in", "OUTPUTS", 1, "good:out")
    if reply != "OK":
        return f"the known-good model's run answered {reply!r}"
    out = t.execute("AI.TENSORGET", "good:out", "BLOB")
    return "" if out == base.output else "the known-good model's output changed"


def _allowed(reply: Any, texts: Sequence[str]) -> bool:
    return reply == "OK" or (isinstance(reply, RespError) and str(reply).startswith(texts))


def run_one(t: Target, m: Mutation, base: Base, key: str, counts: Counts) -> None:
    """Stores the mutation at `key`; if accepted, runs it once on the base's input."""
    started = time.monotonic()
    reply = t.execute("AI.MODELSTORE", key, "TFLITE", "CPU", "BLOB", m.blob)
    took = time.monotonic() - started
    if took > counts.slowest[0]:
        counts.slowest = (took, str(m))
    cls = "OK" if reply == "OK" else store_class(str(reply))
    counts.stores[cls] += 1
    counts.by_kind[m.kind][cls] += 1
    if not _allowed(reply, STORE_TEXTS):
        counts.findings.append(f"store of {m}: {reply!r}")
    if reply != "OK":
        return
    t.execute(*base.tensorset(f"{key}:in"))
    ran = t.execute("AI.MODELEXECUTE", key, "INPUTS", 1, f"{key}:in", "OUTPUTS", 1, f"{key}:out")
    counts.runs["OK" if ran == "OK" else str(ran).split(" (", 1)[0]] += 1
    if not _allowed(ran, RUN_TEXTS):
        counts.findings.append(f"run of {m}: {ran!r}")


def fuzz(t: Target, mutations: Iterable[Mutation], bases: dict[str, Base], good: Base,
         good_key: str, batch: int, counts: Counts) -> None:
    """Every mutation stored (and run if accepted); after each `batch` of them the server
    must be the same process, answer PING and give the known-good model's exact output.
    Stops at the first mutation or batch that breaks it (the findings say which)."""
    keys = [f"fuzz:{k}" for k in range(4)]
    done = 0
    for m in mutations:
        try:
            run_one(t, m, bases[m.base], keys[done % len(keys)], counts)
        except (socket.timeout, TimeoutError, ConnectionError, OSError) as exc:
            counts.findings.append(f"{m}: no reply ({exc!r}); {t.alive_problems()}")
            return
        done += 1
        if done % batch == 0:
            problem = known_good_problem(t, good, good_key)
            problems = t.alive_problems() + ([problem] if problem else [])
            if problems:
                counts.findings.append(f"after the batch ending with {m}: {problems}")
                return
            t.execute("DEL", *keys)
