"""Instructions per request, counted by callgrind (needs valgrind): a figure that hardly depends on the load.

Times on this 2-core shared machine move by 20-50% from run to run; the number of
instructions a request executes hardly depends on the load. So redis-server runs under
`valgrind --tool=callgrind` with the module and the ONNX backend loaded, and each workload
is measured as:

    warm-up requests; settle; callgrind_control --zero;
    N requests, one at a time on one connection; settle; callgrind_control --dump

The dump holds the instructions executed by every thread of the server between the two
controls (--separate-threads=no: the run-queue worker, ONNX Runtime's and Redis's own threads
too), self cost by ELF object; divided by N it is the figure per request, split into
`redisai.so`, `redis-server` (together: the core), the ONNX backend `.so`, ONNX Runtime,
libc, jemalloc and the rest. Kernel work (the syscalls) is not counted: callgrind sees only
user space.

What would make a count vary, and how it is kept out (the figures: docs/performance.md,
"Instructions per request"):
* `serverCron` (its `cronUpdateMemoryStats` alone runs about 370,000 instructions in jemalloc's
  `mallctl`) is excluded with --toggle-collect, and runs once a second (`hz 1`), so that few
  windows hold one of the event-loop passes it causes; an idle window (no requests) measures
  what is left, reported as a bound per request;
* the settle before each control lets the worker finish the previous request (its return to
  the condition variable after the unblock), so that a window holds exactly N requests;
* no spins (`WORKER_SPIN_US 0`): the run-queue worker and Redis's main thread would otherwise
  poll for a lone client's next request for a time, not for a number of instructions;
* ONNX Runtime with one intra-op and one inter-op thread, and its telemetry off
  (ORT_DISABLE_TELEMETRY=1; see --shipped-runs): a spinning pool or a telemetry upload thread
  counts instructions by the clock, not by the request;
* no SLOWLOG (a request under valgrind can take the 10 ms that make an entry);
* a warm-up of the whole server before the first window, and every workload measured in
  three windows on the same server (--repeats), of which the table shows the smallest (see
  measure()).

What still varies: Redis seeds its hash tables per process, so command and key lookups walk
chains of other lengths in another server (0.9-3.9% between servers for the 1 KB commands:
compare trees over several servers); a queued request takes 2 or 3 passes of the event loop
depending on whether the worker's unblock arrives before the main thread sleeps (1-6% between
windows); a 1 MB write is copied out of the query buffer or adopted depending on how its bytes
arrive (6-17% in the core, up to 60% in libc: not a cost figure); glibc's `rep movsb` copies
count one instruction per byte, so libc's 1 MB figures count bytes moved, not time.

Workloads: PING; SET/GET against AI.TENSORSET/AI.TENSORGET BLOB of the same bytes (1 KB,
1 MB); AI.MODELEXECUTE of the 2x2 ONNX model (bench/floor_models.py's trivial ONNX model,
c = a + b) queued (`INLINE_RUN_MAX_US 0`) and inline (`INLINE_RUN_MAX_US 100000`: set
explicitly, since under valgrind a run takes milliseconds and the default 50 us would queue
it); INFO's `ai_inline_runs` checks which path every request took.

Each run starts a fresh server (Redis hashes its tables with a seed drawn per process, so
runs differ a little where windows of one server do not); --runs 2 (the default) shows how far
the counts repeat. After each, PING, SET and GET of 1 KB on Redis without the module: what
loading it costs every command. Writes <out>/instructions-<UTC timestamp>.json
(--out DIR; by default a folder outside the repository, bench/README.md) and prints the
tables and the ratios. About 2 minutes a run (--quick: 1).

    bench/run instructions [--install DIR] [--runs 2] [--shipped-runs 1] [--quick]
        [--keep-dumps DIR]
"""
from __future__ import annotations

import argparse
import dataclasses
import datetime
import os
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from typing import Any, Sequence

import numpy as np

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import bench as base  # noqa: E402  (Client, find_install; puts tests/support/ on sys.path)
import floor_tools  # noqa: E402

from helpers import info_field  # noqa: E402
from paths import backend_file  # noqa: E402
from redis_server import RedisServer, server_exe  # noqa: E402

KB = 1024
MB = 1024 * KB
SETTLE_S = 0.2  # lets the worker finish the previous request's tail before a control
# Functions whose call counts explain a figure: reads of a query (a 1 MB argument arrives
# in as many reads as the socket hands over) and passes of the event loop.
CALLS_OF_INTEREST = ("readQueryFromClient", "beforeSleep", "writeToClient")
# The columns of the table: the core first, then what it calls.
GROUPS = ("redisai.so", "redis-server", "backend", "onnxruntime", "libc", "jemalloc", "other")
# --keep-dumps: where each window's dump is kept, for callgrind_annotate (by function, by line).
KEEP_DUMPS: pathlib.Path | None = None


# ---------------------------------------------------------------------------------------
# The callgrind dump

@dataclasses.dataclass
class Dump:
    """One callgrind dump: self instructions by ELF object, call counts by callee name."""
    by_object: Counter[str]
    calls: Counter[str]
    totals: int


_NAMED = re.compile(r"\((\d+)\)(?: (.*))?$")


def parse_dump(text: str) -> Dump:
    """Reads callgrind's format (events: Ir, positions: line), with its name compression:
    "(7) /path" defines id 7 of a name space, "(7)" refers to it; ob/cob share one space,
    fn/cfn another, fl/fi/fe/cfi/cfl a third. A cost line right after `calls=` is the inclusive
    cost of that call (already counted as self cost where it was spent), so it is skipped."""
    names: dict[tuple[str, str], str] = {}
    spaces = {"ob": "ob", "cob": "ob", "fn": "fn", "cfn": "fn", "fl": "fl", "fi": "fl",
              "fe": "fl", "cfi": "fl", "cfl": "fl"}

    def name(space: str, rest: str) -> str:
        m = _NAMED.match(rest)
        if m is None:  # written without compression (--compress-strings=no)
            return rest
        key = (space, m.group(1))
        if m.group(2) is not None:
            names[key] = m.group(2)
        return names[key]

    by_object: Counter[str] = Counter()
    calls: Counter[str] = Counter()
    obj = "???"
    callee = ""
    skip_next = False
    totals = -1
    for line in text.splitlines():
        if not line:
            continue
        head = line[0]
        if head.isdigit() or head in "+-*":
            if skip_next:
                skip_next = False
                continue
            parts = line.split()
            if len(parts) > 1:
                by_object[obj] += int(parts[1])
            continue
        key, eq, rest = line.partition("=")
        if eq and key in spaces:
            value = name(spaces[key], rest)
            if key == "ob":
                obj = value
            elif key == "cfn":
                callee = value
        elif eq and key == "calls":
            calls[callee] += int(rest.split()[0])
            skip_next = True
        elif line.startswith("totals:"):
            totals = int(line.split()[1])
        elif line.startswith("events:") and line.split()[1:] != ["Ir"]:
            raise ValueError(f"expected only the Ir event, got {line!r}")
    if totals >= 0 and totals != sum(by_object.values()):
        raise ValueError(f"self costs sum to {sum(by_object.values())}, totals: says {totals}")
    return Dump(by_object, calls, sum(by_object.values()))


def group(by_object: Counter[str], executable: str) -> dict[str, int]:
    """Self instructions by GROUPS. The executable is matched by its real path: Debian's
    redis-server is a link to redis-check-rdb, which is the name callgrind reports. A backend
    is any redisai_<kind>.so (install/.../redisai_onnxruntime/ may be a link to the versioned
    folder the library is loaded from)."""
    exe = os.path.realpath(executable)
    out = dict.fromkeys(GROUPS, 0)
    for obj, ir in by_object.items():
        base_name = os.path.basename(obj)
        if obj == exe or os.path.realpath(obj) == exe:
            key = "redis-server"
        elif base_name == "redisai.so":
            key = "redisai.so"
        elif re.fullmatch(r"redisai_\w+\.so", base_name):
            key = "backend"
        elif base_name.startswith("libonnxruntime"):
            key = "onnxruntime"
        elif base_name.startswith("libc.so"):
            key = "libc"
        elif base_name.startswith("libjemalloc"):
            key = "jemalloc"
        else:
            key = "other"
        out[key] += ir
    return out


# ---------------------------------------------------------------------------------------
# The server under callgrind

class CallgrindServer(RedisServer):
    """redis-server under callgrind, through a wrapper script (RedisServer runs one executable;
    `exec` keeps the server's pid, which callgrind_control addresses)."""

    def __init__(self, install: pathlib.Path | None, work: pathlib.Path,
                 module_args: Sequence[str], env: dict[str, str]) -> None:
        """install None: Redis alone, no module (the baseline of what the module adds)."""
        self.work = work
        self.exe = shutil.which(server_exe()) or server_exe()
        self.vgdb_prefix = str(work / "vgdb")  # our own FIFOs, apart from any other valgrind
        self.out_base = work / "callgrind.out"
        self.dumps = 0
        self.tag = "server"  # names the kept dumps
        wrapper = work / "redis-server-callgrind"
        valgrind = [
            "valgrind", "--tool=callgrind", "--separate-threads=no",
            # --toggle-collect switches collection off at start; --collect-atstart=yes after it
            # switches it back on, so that the toggle excludes serverCron instead of selecting it.
            "--toggle-collect=serverCron", "--collect-atstart=yes",
            f"--vgdb-prefix={self.vgdb_prefix}", f"--callgrind-out-file={self.out_base}",
        ]
        wrapper.write_text("#!/bin/sh\nexec " + " ".join(valgrind) + f' {self.exe} "$@"\n')
        wrapper.chmod(0o755)
        # hz 1: serverCron, excluded above, still wakes the event loop for a pass that is
        # counted (about 2,000 instructions: beforeSleep, epoll, the timer scan); once a second
        # instead of ten times, so that a window of a few hundred requests rarely holds one.
        # No SLOWLOG: under valgrind a request can take the 10 ms that make an entry, natively
        # it does not, and an entry costs instructions (argv copies) only when it is made.
        extra = ["--hz", "1", "--slowlog-log-slower-than", "-1"]
        module = install / "redisai.so" if install is not None else None
        super().__init__(module, list(module_args), extra=extra,
                         exe=str(wrapper), env=env)

    def _wait_ready(self, timeout: float = 300.0) -> None:
        # valgrind translates every block it runs for the first time: the start takes seconds.
        super()._wait_ready(timeout)

    def _control(self, *args: str) -> None:
        subprocess.run(["callgrind_control", f"--vgdb-prefix={self.vgdb_prefix}", *args,
                        str(self.proc.pid)], check=True, capture_output=True, timeout=120)

    def zero(self) -> None:
        self._control("--zero")

    def dump(self, label: str) -> Dump:
        self._control(f"--dump={label}")
        self.dumps += 1
        path = pathlib.Path(f"{self.out_base}.{self.dumps}")
        deadline = time.monotonic() + 60
        # The reply of the control comes when the dump is written; wait for its last line anyway.
        while not (path.is_file() and "\ntotals:" in path.read_text(errors="replace")):
            if time.monotonic() > deadline:
                raise RuntimeError(f"callgrind wrote no {path}")
            time.sleep(0.1)
        dump = parse_dump(path.read_text())
        if KEEP_DUMPS is not None:
            shutil.move(path, KEEP_DUMPS / f"{self.tag}-{self.dumps:02d}-{label}.callgrind")
        else:
            path.unlink()
        return dump


# ---------------------------------------------------------------------------------------
# Workloads

@dataclasses.dataclass
class Workload:
    name: str
    args: list[bytes | str | int]
    requests: int
    warmup: int
    reply: bytes | None = None  # the expected reply, checked on the last request
    inline: int | None = None   # INLINE_RUN_MAX_US to set before; checks the path taken


def workloads(quick: bool) -> list[Workload]:
    small, large, model = (100, 20, 60) if quick else (400, 60, 200)
    rng = np.random.default_rng(1)
    out = [Workload("PING", ["PING"], small, 20, b"PONG")]
    large_ones = []
    for size, n, tag in ((1 * KB, small, "1KB"), (1 * MB, large, "1MB")):
        data = rng.integers(0, 256, size, dtype=np.uint8).tobytes()
        # 1 MB last: after a 1 MB request the client's query and reply buffers stay large
        # until serverCron trims them, on its own time; the small requests would pay for that.
        (out if size < MB else large_ones).extend([
            Workload(f"SET {tag}", ["SET", f"s{tag}", data], n, 10, b"OK"),
            Workload(f"AI.TENSORSET {tag}", ["AI.TENSORSET", f"t{tag}", "UINT8", size, "BLOB",
                                             data], n, 10, b"OK"),
            Workload(f"GET {tag}", ["GET", f"s{tag}"], n, 10, data),
            Workload(f"AI.TENSORGET {tag}", ["AI.TENSORGET", f"t{tag}", "BLOB"], n, 10, data),
        ])
    execute: list[bytes | str | int] = ["AI.MODELEXECUTE", "m", "INPUTS", 2, "a", "b",
                                        "OUTPUTS", 1, "c"]
    out += [Workload("AI.MODELEXECUTE queued", execute, model, 20, b"OK", inline=0),
            Workload("AI.MODELEXECUTE inline", execute, model, 20, b"OK", inline=100000)]
    out += large_ones
    return out


def as_bytes(reply: Any) -> bytes:
    return bytes(reply) if isinstance(reply, (bytes, bytearray, memoryview)) else repr(reply).encode()


def inline_runs(c: base.Client) -> int:
    return int(info_field(bytes(c.call("INFO", "MODULES")), "ai_inline_runs") or 0)


class Caller:
    """One workload's request, encoded once and sent with one write: the server then finds as
    much of a large argument in the socket as the kernel holds, not a header alone."""

    def __init__(self, c: base.Client, w: Workload) -> None:
        self.c = c
        self.w = w
        self.request = floor_tools.resp(*w.args)

    def prepare(self) -> None:
        if self.w.inline is not None:
            self.c.call("AI.CONFIG", "INLINE_RUN_MAX_US", self.w.inline)

    def __call__(self) -> Any:
        self.c.sock.sendall(self.request)
        return self.c.read()


def window(srv: CallgrindServer, call: Caller) -> dict[str, Any]:
    """One measurement: N requests between a zero and a dump of the counters."""
    w, c = call.w, call.c
    inline0 = inline_runs(c)
    time.sleep(SETTLE_S)
    srv.zero()
    t0 = time.perf_counter()
    reply: Any = None
    for _ in range(w.requests):
        reply = call()
    seconds = time.perf_counter() - t0
    time.sleep(SETTLE_S)
    dump = srv.dump(w.name.replace(" ", "_"))
    if w.reply is not None and as_bytes(reply) != w.reply:
        raise AssertionError(f"{w.name}: unexpected reply {as_bytes(reply)[:80]!r}")
    row: dict[str, Any] = {"name": w.name, "requests": w.requests, "seconds": seconds,
                           "total": dump.totals,
                           "by_group": group(dump.by_object, srv.exe),
                           "by_object": dict(dump.by_object.most_common()),
                           "calls": {f: dump.calls.get(f, 0) for f in CALLS_OF_INTEREST}}
    if w.inline is not None:
        got = inline_runs(c) - inline0
        want = w.requests if w.inline else 0
        if got != want:
            raise AssertionError(f"{w.name}: {got} of {w.requests} runs inline, expected {want}")
        row["inline_runs"] = got
    return row


def measure(srv: CallgrindServer, call: Caller, repeats: int) -> dict[str, Any]:
    """The workload `repeats` times on the same server: the figure is the window with the
    fewest instructions, the others are kept. Every disturbance seen adds instructions (an
    idle pass, a table rehashed or a buffer resized by serverCron, a telemetry upload), none
    removes any, so the smallest window is the closest to the request's own cost."""
    call.prepare()
    for _ in range(call.w.warmup):
        call()
    windows = [window(srv, call) for _ in range(repeats)]
    row = dict(min(windows, key=lambda x: x["total"]))
    row["repeats"] = [{k: v for k, v in x.items() if k != "by_object"} for x in windows]
    return row


def idle(srv: CallgrindServer, seconds: float) -> dict[str, Any]:
    """What the server executes with no request: the bound the event loop's idle passes put
    on a figure (per request: this rate times a workload's seconds, over its N)."""
    time.sleep(SETTLE_S)
    srv.zero()
    time.sleep(seconds)
    dump = srv.dump("idle")
    return {"seconds": seconds, "total": dump.totals,
            "by_group": group(dump.by_object, srv.exe),
            "calls": {f: dump.calls.get(f, 0) for f in CALLS_OF_INTEREST}}


def one_run(install: pathlib.Path, quick: bool, index: int, telemetry: bool,
            repeats: int) -> dict[str, Any]:
    import onnx_models  # noqa: PLC0415  (tests/support: the ONNX helper API, made now)

    work = pathlib.Path(tempfile.mkdtemp(prefix="bench-icount-"))
    backend = str(backend_file(install, "onnxruntime"))
    # One intra-op and one inter-op thread: no pool that spins (see the docstring). Loaded at
    # start so that it is in place before the backend loads.
    # No spins either (WORKER_SPIN_US 0): a spinning worker or main thread, like a spinning
    # pool, counts instructions by the clock.
    args = ["THREADS_PER_QUEUE", "1", "INTRA_OP_PARALLELISM", "1", "INTER_OP_PARALLELISM", "1",
            "INLINE_RUN_MAX_US", "0", "WORKER_SPIN_US", "0"]
    env = dict(os.environ)
    # The backend turns telemetry off unless the variable says otherwise (docs/security.md):
    # "0" is ONNX Runtime as shipped.
    env["ORT_DISABLE_TELEMETRY"] = "0" if telemetry else "1"
    t0 = time.perf_counter()
    print(f"run {index}: starting redis-server under callgrind "
          f"(ONNX Runtime telemetry {'on (ORT_DISABLE_TELEMETRY=0), as shipped' if telemetry else 'off'}) ...", flush=True)
    srv = CallgrindServer(install, work, args, env)
    srv.tag = f"run{index}"
    try:
        c = base.Client(srv.port)
        # Loaded after the start, not as a module argument: under valgrind loading ONNX Runtime
        # takes tens of seconds, longer than a start is waited for.
        c.call("AI.CONFIG", "LOADBACKEND", "ONNX", backend)
        built = onnx_models.add()
        a = np.array([[2, 3], [2, 3]], np.float32)  # floor_models.py's trivial inputs
        c.call("AI.MODELSTORE", "m", "ONNX", "CPU", "BLOB", built.blob)
        for key in ("a", "b"):
            c.call("AI.TENSORSET", key, "FLOAT", 2, 2, "BLOB", a.tobytes())
        calls = [Caller(c, w) for w in workloads(quick)]
        # Warm-up of the whole server first: Redis settles for a while after the start (a
        # window of PING right after 1,000 PINGs measured 500 more instructions a request than
        # the next, after 3,000 still 260 more, in every server alike and without the module
        # too: hence also several windows, see measure()); every key is created and every path
        # run (but the 1 MB ones, see workloads()).
        ping = Caller(c, Workload("PING", ["PING"], 0, 0))
        for _ in range(3000):
            ping()
        for call in calls:
            if "1MB" in call.w.name:
                continue
            call.prepare()
            for _ in range(call.w.warmup):
                call()
        rows = []
        for call in calls:
            print(f"run {index}: {call.w.name} ...", flush=True)
            rows.append(measure(srv, call, repeats))
        got = np.frombuffer(as_bytes(c.call("AI.TENSORGET", "c", "BLOB")), np.float32)
        np.testing.assert_array_equal(got, (a + a).ravel(), err_msg="the model's output differs")
        span = max(r["seconds"] for r in rows)
        print(f"run {index}: idle ({span:.1f} s) ...", flush=True)
        idle_row = idle(srv, span)
        c.sock.close()
        alive = srv.alive()
        log = srv.log() if not alive else ""
    finally:
        srv.stop()
        shutil.rmtree(work, ignore_errors=True)
    assert alive, f"the server died:\n{log}"
    return {"workloads": rows, "idle": idle_row, "seconds": time.perf_counter() - t0,
            "ort_telemetry": telemetry, "no_module": no_module(quick, index, repeats)}


def no_module(quick: bool, index: int, repeats: int) -> list[dict[str, Any]]:
    """PING, SET and GET of 1 KB on a server without the module, measured alike: what the
    module costs every command of the server (its event-loop hook runs at every pass)."""
    work = pathlib.Path(tempfile.mkdtemp(prefix="bench-icount-"))
    print(f"run {index}: the same server without the module ...", flush=True)
    srv = CallgrindServer(None, work, [], dict(os.environ))
    srv.tag = f"run{index}-no-module"
    try:
        c = base.Client(srv.port)
        calls = [Caller(c, w) for w in workloads(quick) if w.name in NO_MODULE]
        ping = calls[0]
        for _ in range(3000):
            ping()
        rows = [measure(srv, call, repeats) for call in calls]
        c.sock.close()
    finally:
        srv.stop()
        shutil.rmtree(work, ignore_errors=True)
    return rows


NO_MODULE = ("PING", "SET 1KB", "GET 1KB")


# ---------------------------------------------------------------------------------------
# Report

RATIOS = (("AI.TENSORSET 1KB", "SET 1KB"), ("AI.TENSORGET 1KB", "GET 1KB"),
          ("AI.TENSORSET 1MB", "SET 1MB"), ("AI.TENSORGET 1MB", "GET 1MB"),
          ("AI.MODELEXECUTE queued", "PING"), ("AI.MODELEXECUTE inline", "PING"),
          ("AI.MODELEXECUTE queued", "AI.MODELEXECUTE inline"))


def per_request(row: dict[str, Any]) -> dict[str, float]:
    """Instructions per request by group, with the core (redisai.so + redis-server) and the total."""
    n = row["requests"]
    out = {g: v / n for g, v in row["by_group"].items()}
    out["core"] = out["redisai.so"] + out["redis-server"]
    out["total"] = row["total"] / n
    return out


def ratios(run: dict[str, Any]) -> list[dict[str, Any]]:
    rows = {r["name"]: per_request(r) for r in run["workloads"]}
    return [{"ours": a, "plain": b, "core": rows[a]["core"] / rows[b]["core"],
             "total": rows[a]["total"] / rows[b]["total"]}
            for a, b in RATIOS if a in rows and b in rows]


def idle_bound(run: dict[str, Any], row: dict[str, Any]) -> float:
    """Instructions per request the idle passes can have added to a row (at most)."""
    rate = run["idle"]["total"] / run["idle"]["seconds"]
    return rate * row["seconds"] / row["requests"]


def spread(runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per workload: the largest relative difference between the runs, total and core."""
    out = []
    for i, row in enumerate(runs[0]["workloads"]):
        figures = [per_request(run["workloads"][i]) for run in runs]
        entry: dict[str, Any] = {"name": row["name"]}
        for key in ("total", "core", "redisai.so", "redis-server"):
            vals = [f[key] for f in figures]
            entry[key] = (max(vals) - min(vals)) / max(vals) if max(vals) else 0.0
        out.append(entry)
    return out


def window_spread(run: dict[str, Any]) -> list[dict[str, Any]]:
    """Per workload: the relative difference between its windows on the same server."""
    out = []
    for row in run["workloads"]:
        figures = [per_request(x) for x in row["repeats"]]
        entry: dict[str, Any] = {"name": row["name"]}
        for key in ("total", "core"):
            vals = [f[key] for f in figures]
            entry[key] = (max(vals) - min(vals)) / max(vals) if max(vals) else 0.0
        out.append(entry)
    return out


def print_report(runs: list[dict[str, Any]], repeat: list[dict[str, Any]]) -> None:
    """Every run's table; then how far the runs of `repeat` (same settings) differ."""
    cols = ("redisai.so", "redis-server", "core", "backend", "onnxruntime", "libc", "jemalloc",
            "other", "total")
    for k, run in enumerate(runs, 1):
        print()
        telemetry = "on, as shipped" if run["ort_telemetry"] else "off"
        print(f"Run {k}: instructions per request (callgrind, every thread of the server; "
              f"ONNX Runtime telemetry {telemetry})")
        print(f"  {'workload':<24} {'N':>4} |" + "".join(f" {c:>12}" for c in cols) +
              f" | {'reads':>5} {'passes':>6} {'idle<=':>6}")
        for row in run["workloads"]:
            f = per_request(row)
            n = row["requests"]
            print(f"  {row['name']:<24} {n:>4} |" + "".join(f" {f[c]:12,.0f}" for c in cols) +
                  f" | {row['calls']['readQueryFromClient'] / n:5.1f} "
                  f"{row['calls']['beforeSleep'] / n:6.2f} {idle_bound(run, row):6.0f}")
        i = run["idle"]
        print(f"  idle: {i['total'] / i['seconds']:,.0f} instructions/s "
              f"({i['calls']['beforeSleep']} event-loop passes in {i['seconds']:.1f} s)")
        print("  Windows of the same server: relative difference, core / total")
        print("    " + "; ".join(f"{w['name']} {100 * w['core']:.2f}% / {100 * w['total']:.2f}%"
                                 for w in window_spread(run)))
        plain = {r["name"]: per_request(r)["core"] for r in run.get("no_module", [])}
        if plain:
            print("  Without the module (redis-server alone), core: " + "; ".join(
                f"{r['name']} {plain[r['name']]:,.0f} "
                f"(with it: {per_request(r)['core'] / plain[r['name']]:.3f}x)"
                for r in run["workloads"] if r["name"] in plain))
        print("  Ratios (instructions per request, ours / plain):")
        for r in ratios(run):
            print(f"    {r['ours'] + ' / ' + r['plain']:<50} core {r['core']:6.2f}x   "
                  f"total {r['total']:6.2f}x")
    if len(repeat) > 1:
        print()
        print("Run to run: largest relative difference of the per-request figures "
              f"(runs {', '.join(str(k) for k, r in enumerate(runs, 1) if r in repeat)})")
        print(f"  {'workload':<24} {'total':>8} {'core':>8} {'redisai.so':>11} {'redis-server':>13}")
        for s in spread(repeat):
            print(f"  {s['name']:<24} {100 * s['total']:7.3f}% {100 * s['core']:7.3f}% "
                  f"{100 * s['redisai.so']:10.3f}% {100 * s['redis-server']:12.3f}%")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--install", default=None, help="install tree (default: newest install/redisai-*/)")
    ap.add_argument("--runs", type=int, default=2,
                    help="fresh servers, one after the other, ONNX Runtime telemetry off")
    ap.add_argument("--shipped-runs", type=int, default=1,
                    help="then fresh servers with ONNX Runtime's telemetry left on, as shipped")
    ap.add_argument("--repeats", type=int, default=3,
                    help="windows per workload on the same server (the table shows the smallest)")
    ap.add_argument("--quick", action="store_true", help="fewer requests per workload")
    base.add_out_option(ap)
    ap.add_argument("--keep-dumps", default=None, metavar="DIR",
                    help="keep every window's callgrind dump there "
                         "(callgrind_annotate --threshold=100 FILE)")
    opts = ap.parse_args()
    global KEEP_DUMPS
    if opts.keep_dumps:
        KEEP_DUMPS = pathlib.Path(opts.keep_dumps).resolve()
        KEEP_DUMPS.mkdir(parents=True, exist_ok=True)
    for tool in ("valgrind", "callgrind_control"):
        if shutil.which(tool) is None:
            sys.exit(f"{tool} not found (Debian: apt-get install valgrind)")

    install = base.find_install(opts.install).resolve()
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    t0 = time.perf_counter()
    runs = [one_run(install, opts.quick, k + 1, telemetry=k >= opts.runs, repeats=opts.repeats)
            for k in range(opts.runs + opts.shipped_runs)]
    repeat = [r for r in runs if not r["ort_telemetry"]]
    print_report(runs, repeat)
    doc = {"timestamp": stamp, "install": str(install), "quick": opts.quick,
           "server": shutil.which(server_exe()) or server_exe(),
           "valgrind": subprocess.run(["valgrind", "--version"], capture_output=True,
                                      text=True).stdout.strip(),
           "runs": runs,
           "per_request": [{r["name"]: per_request(r) for r in run["workloads"]} for run in runs],
           "ratios": [ratios(run) for run in runs],
           "spread": spread(repeat) if len(repeat) > 1 else [],
           "window_spread": [window_spread(run) for run in runs]}
    path = base.write_result(opts.out, f"instructions-{stamp}", doc)
    print(f"total {time.perf_counter() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
