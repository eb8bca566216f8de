"""Where the CPU time of AI.MODELEXECUTE goes, by thread and step (perf; needs perf_event_paranoid <= 1).

Starts one redis-server per backend with the CNN of bench/floor_models.py, drives it
with bench/floor/rai_load.c (N clients, closed loop) and samples the server with
`perf record --call-graph dwarf` (Linux perf; needs root or perf_event_paranoid <= 1).
Each sample is charged to one step of the execute path by the frames on its stack:

  main thread    read+parse   reading the socket, Redis parsing the command
                 command      the module's handler: argument parsing, key lookups, the DAG
                 hand-off     waking the worker (pthread_cond_signal in RunQueue_Push)
                 reply        the reply callback, writing replies, the unblock pipe
                 loop/other   epoll and the rest of the event loop
  worker thread  wait/wake    sleeping and being woken on the queue's condition variable
                 input conv   the backend's input conversion (core tensor -> framework)
                 framework    the framework's run
                 output conv  the backend's output conversion (framework -> core tensor)
                 unblock      RedisModule_UnblockClient and the rest of the core's glue
  pool threads   framework    the framework's own intra-op threads (spinning included)

Figures are CPU microseconds per request (samples / rate / requests) and the share of
all samples. Kernel time of a step (syscalls, futexes, TCP) stays with that step.

Beside the steps, every sample is also charged to one owner by the libraries (DSOs) of its
frames, walked from the leaf outwards; the C library, libstdc++, the kernel and frames perf
could not name decide nothing, the first frame in one of these does:

  framework  a backend .so (install/backends/redisai_*) or a framework library
             (libonnxruntime, libtorch*, libc10, libtensorflow*, libgomp, MKL, ...)
  module     redisai.so: the module's own CPU, main thread and workers
             together; but a worker asleep in its queue's condition variable (workerMain's
             pthread_cond_wait) is "idle", not the module's
  redis      no frame of either: Redis's own socket I/O, RESP parsing, event loop, and what
             it does around a module's callbacks (on a framework's pool threads, a stack
             of C-library frames only is the framework's)
The module's CPU is also split by the innermost redisai.so function of each sample
("module_top" in the JSON), to see where it goes, and by the Redis module API function the
module was inside ("module_api": the outermost RM_* frame below that redisai.so frame, or "own
code" when none: the module's own instructions and the C library and system calls it makes
itself). What RM_* calls cost is Redis's code run on the module's behalf: a floor for any
module that must block the client, open its keys, replicate and reply through that API.

    bench/run profile_execute [--kinds ONNX,TORCH,TF] [--clients 32] [--seconds 4]
        [--module-args "INTRA_OP_PARALLELISM 1"]
"""
from __future__ import annotations

import argparse
import collections
import json
import os
import pathlib
import signal
import subprocess
import sys
import tempfile
import time
from typing import Iterable

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import bench as base  # noqa: E402
import floor_tools  # noqa: E402

from paths import backend_file  # noqa: E402
from redis_server import RedisServer  # noqa: E402

BACKEND_DIRS = {"TF": "tensorflow", "TORCH": "torch", "ONNX": "onnxruntime"}
RATE = 999

# Innermost match wins: the categories are tried from the leaf of the stack outwards.
INPUT_CONV = ("ort_tensor_from_core", "tensor_from_core", "tf_tensor_from_core", "tf_input")
OUTPUT_CONV = ("ort_tensor_to_core", "tensor_to_core", "tf_tensor_to_core", "tf_output")
FRAMEWORK_RUN = ("OrtApis::Run", "onnxruntime::InferenceSession::Run", "TF_SessionRun",
                 "torch::jit::", "forward")
MAIN_STEPS = (
    ("hand-off", ("RunQueue_Push",)),
    ("reply", ("Dag_ReplyCallback", "moduleHandleBlockedClients", "writeToClient",
               "handleClientsWithPendingWrites", "_writeToClient", "Dag_FreeCallback",
               "moduleBlockedClientPipeReadable", "sendReplyToClient")),
    ("command", ("ModelExecute_RedisCommand", "RedisModuleCommandDispatcher")),
    ("read+parse", ("readQueryFromClient", "processInputBuffer", "processCommand")),
)


def _steps_worker(frames: list[str]) -> str:
    for f in frames:  # leaf first
        if any(s in f for s in INPUT_CONV):
            return "input conv"
        if any(s in f for s in OUTPUT_CONV):
            return "output conv"
        if "RedisModule_UnblockClient" in f or "RM_UnblockClient" in f:
            return "unblock"
        if any(s in f for s in ("pthread_cond_wait", "pthread_cond_timedwait")):
            return "wait/wake"
    joined = " ".join(frames)
    # Frameworks' own frames often cannot be unwound (no symbols): a stack that
    # stops at an unknown leaf is the framework's run.
    if not frames or "[unknown]" in frames[0]:
        return "framework"
    if any(s in joined for s in FRAMEWORK_RUN) or "model_run" in joined:
        return "framework"
    if "workerMain" in joined and not any(s in joined for s in ("Dag_RunBatch",)):
        return "wait/wake"
    # A stack that never reaches the core's frames was cut inside the framework
    # (MKL's kernels, for one, cannot be unwound).
    if "Dag_" not in joined and "workerMain" not in joined:
        return "framework"
    return "core glue"


def _steps_main(frames: list[str]) -> str:
    for f in frames:
        for name, marks in MAIN_STEPS:
            if any(m in f for m in marks):
                return name
    return "loop/other"


def _samples(script: str) -> Iterable[tuple[int, list[str]]]:
    """(tid, frames leaf first) from `perf script` text; each frame is "sym+off (dso)"."""
    tid, frames = None, []
    for line in script.splitlines():
        if not line.strip():
            if tid is not None:
                yield tid, frames
            tid, frames = None, []
            continue
        if not line.startswith((" ", "\t")):
            parts = line.split()
            # "redis-server  4939 12345.678901:   1001001 cpu-clock:"
            try:
                tid = int(parts[1].split("/")[-1])
            except (IndexError, ValueError):
                tid = None
            frames = []
        else:
            bits = line.strip().split(None, 1)
            frames.append(bits[1] if len(bits) > 1 else bits[0])
    if tid is not None:
        yield tid, frames


FRAMEWORK_LIBS = ("libonnxruntime", "libtorch", "libc10", "libtensorflow", "libgomp", "libiomp",
                  "libmkl", "libdnnl", "libtbb", "libopenblas", "libprotobuf", "libshm")
MODULE_DSO = "redisai.so"


def _dso(frame: str) -> str:
    """The DSO's base name of a frame "sym+0x12 (/path/lib.so)"."""
    if not frame.endswith(")") or " (" not in frame:
        return ""
    return frame[frame.rindex(" (") + 2:-1].rsplit("/", 1)[-1]


def _sym(frame: str) -> str:
    name = frame[:frame.rindex(" (")] if frame.endswith(")") and " (" in frame else frame
    return name.split("+0x", 1)[0]


def _is_framework(frame: str, dso: str) -> bool:
    return ("/backends/redisai_" in frame or dso.startswith("redisai_")
            or dso.startswith(FRAMEWORK_LIBS))


def module_api(frames: list[str]) -> str:
    """The Redis API function (RM_*) a module-owned sample was inside, or "own code"."""
    api = "own code"
    for f in frames:  # leaf first: the last RM_* before the module's frame is the call it made
        if _dso(f) == MODULE_DSO:
            return api
        if _sym(f).startswith("RM_"):
            api = _sym(f)
    return api


def owner(frames: list[str], role: str) -> tuple[str, str]:
    """(owner, innermost redisai.so function) of one sample; role: main, worker, pool."""
    waited = False
    for f in frames:  # leaf first
        dso = _dso(f)
        if dso == MODULE_DSO:
            sym = _sym(f)
            if waited and sym == "workerMain":
                return "idle", sym
            return "module", sym
        if _is_framework(f, dso):
            return "framework", ""
        if "pthread_cond_wait" in f or "pthread_cond_timedwait" in f:
            waited = True
    return ("framework" if role == "pool" else "redis"), ""


def _by_role(script: str, main_tid: int) -> Iterable[tuple[str, list[list[str]]]]:
    """Each thread's stacks with its role: main, worker (a run-queue worker: workerMain on
    one of its stacks) or pool (every other thread)."""
    by_tid: dict[int, list[list[str]]] = collections.defaultdict(list)
    for tid, frames in _samples(script):
        by_tid[tid].append(frames)
    for tid, stacks in by_tid.items():
        if tid == main_tid:
            yield "main", stacks
        elif any("workerMain" in " ".join(f) for f in stacks):
            yield "worker", stacks
        else:
            yield "pool", stacks


def owners(script: str, main_tid: int
           ) -> tuple[dict[str, dict[str, int]], dict[str, int], dict[str, int]]:
    """Samples by owner and thread role, and the module's samples by innermost function and
    by the Redis API function they were inside."""
    out: dict[str, dict[str, int]] = collections.defaultdict(collections.Counter)
    top: dict[str, int] = collections.Counter()
    api: dict[str, int] = collections.Counter()
    for role, stacks in _by_role(script, main_tid):
        for frames in stacks:
            who, sym = owner(frames, role)
            out[who][role] += 1
            if who == "module":
                top[f"{role}:{sym}"] += 1
                api[f"{role}:{module_api(frames)}"] += 1
    return out, top, api


def classify(script: str, main_tid: int) -> tuple[dict[str, dict[str, int]], int]:
    out: dict[str, dict[str, int]] = collections.defaultdict(collections.Counter)
    total = 0
    for role, stacks in _by_role(script, main_tid):
        for frames in stacks:
            total += 1
            if role == "main":
                out["main"][_steps_main(frames)] += 1
            elif role == "worker":
                out["worker"][_steps_worker(frames)] += 1
            else:
                out["pool/other"]["framework"] += 1
    return out, total


def profile(kind: str, install: pathlib.Path, manifest: dict, load_exe: pathlib.Path,
            clients: int, seconds: float, module_args: list[str], work: pathlib.Path,
            model: str = "cnn") -> dict:
    so = backend_file(install, BACKEND_DIRS[kind])
    srv = RedisServer(install / "redisai.so", [kind, str(so), "THREADS_PER_QUEUE", "1", *module_args])
    try:
        c = base.Client(srv.port)
        e = manifest[model][kind]
        io: list = []
        if e["named"]:
            io = ["INPUTS", len(e["inputs"]), *[i["name"] for i in e["inputs"]],
                  "OUTPUTS", 1, e["outputs"][0]]
        c.call("AI.MODELSTORE", "m", kind, "CPU", *io, "BLOB", pathlib.Path(e["blob"]).read_bytes())
        keys = []
        for n, i in enumerate(e["inputs"]):
            c.call("AI.TENSORSET", f"x{n}", i["dtype"], *i["shape"], "BLOB",
                   pathlib.Path(i["file"]).read_bytes())
            keys.append(f"x{n}")
        cmd = floor_tools.resp("AI.MODELEXECUTE", "m", "INPUTS", len(keys), *keys, "OUTPUTS", 1, "y")
        load = floor_tools.Load(load_exe, srv.port, work)
        load.run([cmd], clients=clients, requests=500)
        data = work / f"perf-{kind}.data"
        # -N: no copies of the sampled libraries in ~/.debug (libtorch alone is 400 MB)
        perf = subprocess.Popen(["perf", "record", "-N", "-F", str(RATE), "-e", "cpu-clock",
                                 "--call-graph", "dwarf,32768", "-o", str(data), "-p",
                                 str(srv.proc.pid)], stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)
        time.sleep(1.0)
        (res,) = load.run([cmd], clients=clients, seconds=seconds, warmup=5)
        perf.send_signal(signal.SIGINT)
        perf.wait(timeout=120)
        # --no-inline: addr2line over libtorch's debug info takes minutes
        script = subprocess.run(["perf", "script", "--no-inline", "-i", str(data),
                                 "-F", "comm,tid,ip,sym,dso"],
                                capture_output=True, text=True, timeout=600).stdout
        data.unlink(missing_ok=True)
        if os.environ.get("PROFILE_KEEP"):
            pathlib.Path(os.environ["PROFILE_KEEP"], f"perf-{kind}.txt").write_text(script)
        steps, total = classify(script, srv.proc.pid)
        own, top, api = owners(script, srv.proc.pid)
        return {"owners": {k: dict(v) for k, v in own.items()},
                "module_top": dict(top.most_common(40)),
                "module_api": dict(api.most_common()),
                "kind": kind, "model": model, "main_tid": srv.proc.pid, "clients": clients, "rps": res["rps"], "p50_us": res["p50_us"],
                "requests": res["count"], "seconds": seconds, "samples": total,
                "module_args": module_args, "steps": {k: dict(v) for k, v in steps.items()}}
    finally:
        srv.stop()


def report(p: dict) -> None:
    # perf also ran 1 s before the window, with the server idle (no samples to speak of)
    per_req = 1e6 / RATE / p["requests"]
    print(f"\n{p['kind']} {p['model']}  {p['clients']} clients  {p['rps']:.0f} req/s  p50 {p['p50_us']:.0f} us  "
          f"module args {' '.join(p['module_args']) or '-'}  ({p['samples']} samples)")
    print(f"  {'thread':<11} {'step':<12} {'share':>6} {'CPU us/req':>10}")
    for role in ("main", "worker", "pool/other"):
        for step, n in sorted(p["steps"].get(role, {}).items(), key=lambda kv: -kv[1]):
            print(f"  {role:<11} {step:<12} {n / p['samples']:6.1%} {n * per_req:10.1f}")
    own = p.get("owners", {})
    print(f"  {'owner':<11} {'main':>6} {'worker':>6} {'pool':>6} {'all':>6}   CPU us/req")
    for who in ("module", "redis", "framework", "idle"):
        by = own.get(who, {})
        print(f"  {who:<11} " + " ".join(f"{by.get(r, 0) * per_req:6.1f}"
                                         for r in ("main", "worker", "pool"))
              + f" {sum(by.values()) * per_req:6.1f}")
    for name, n in list(p.get("module_top", {}).items())[:15]:
        print(f"    module {name:<40} {n * per_req:6.2f}")
    api = p.get("module_api", {})
    if api:
        own_code = sum(n for k, n in api.items() if k.endswith(":own code"))
        print(f"  module CPU by what runs: own code {own_code * per_req:.2f}, Redis API "
              f"{(sum(api.values()) - own_code) * per_req:.2f} us/req")
        for name, n in list(api.items())[:12]:
            print(f"    {name:<47} {n * per_req:6.2f}")


def owner_us(p: dict, who: str) -> float:
    """CPU us per request of one owner (module, redis, framework, idle)."""
    return sum(p.get("owners", {}).get(who, {}).values()) * 1e6 / RATE / p["requests"]


def markdown(before: list[dict], after: list[dict]) -> str:
    """CPU us per request by thread and step, before and after, per backend."""
    kinds = [p["kind"] for p in before]
    lines = ["| thread | step | " + " | ".join(f"{k} before | {k} after" for k in kinds) + " |",
             "|---|---|" + "---:|---:|" * len(kinds)]
    steps = [("main", s) for s in ("read+parse", "command", "hand-off", "reply", "loop/other")]
    steps += [("worker", s) for s in ("wait/wake", "input conv", "framework", "output conv",
                                      "unblock", "core glue")]
    steps += [("pool/other", "framework")]
    by = {(p["kind"], which): p for which, runs in (("b", before), ("a", after)) for p in runs}

    def cell(p: dict, role: str, step: str) -> str:
        return f"{p['steps'].get(role, {}).get(step, 0) * 1e6 / RATE / p['requests']:.1f}"

    for role, step in steps:
        cells = " | ".join(f"{cell(by[k, 'b'], role, step)} | {cell(by[k, 'a'], role, step)}"
                           for k in kinds)
        lines.append(f"| {role} | {step} | {cells} |")
    total = " | ".join(
        f"{by[k, w]['samples'] * 1e6 / RATE / by[k, w]['requests']:.1f}" for k in kinds
        for w in ("b", "a"))
    lines.append(f"| all | CPU us per request | {total} |")
    for who in ("module", "redis", "framework", "idle"):
        cells = " | ".join(f"{owner_us(by[k, w], who):.1f}" for k in kinds for w in ("b", "a"))
        lines.append(f"| owner | {who} | {cells} |")
    rps = " | ".join(f"{by[k, w]['rps']:,.0f}" for k in kinds for w in ("b", "a"))
    lines.append(f"| | req/s during the profile | {rps} |")
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--install")
    ap.add_argument("--build", default=str(HERE.parent / "build"))
    ap.add_argument("--kinds", default="ONNX,TORCH,TF")
    ap.add_argument("--clients", type=int, default=32)
    ap.add_argument("--seconds", type=float, default=4.0)
    ap.add_argument("--module-args", default="")
    ap.add_argument("--model", choices=("cnn", "trivial"), default="cnn")
    ap.add_argument("--json", help="also write the figures here")
    ap.add_argument("--table", nargs=2, metavar=("BEFORE.json", "AFTER.json"),
                    help="only print a Markdown table of two --json files, and exit")
    opts = ap.parse_args()
    if opts.table:
        print(markdown(*(json.loads(pathlib.Path(f).read_text()) for f in opts.table)))
        return 0
    if os.geteuid() != 0 and pathlib.Path("/proc/sys/kernel/perf_event_paranoid").read_text().strip() > "1":
        sys.exit("perf needs root or kernel.perf_event_paranoid <= 1")
    install = base.find_install(opts.install).resolve()
    _, load_exe = floor_tools.build(pathlib.Path(opts.build))
    work = pathlib.Path(tempfile.mkdtemp(prefix="profile-execute-"))
    subprocess.run([sys.executable, str(HERE / "floor_models.py"), str(work / "models")], check=True)
    manifest = json.loads((work / "models" / "manifest.json").read_text())
    results = []
    for kind in [k.strip().upper() for k in opts.kinds.split(",") if k.strip()]:
        p = profile(kind, install, manifest, load_exe, opts.clients, opts.seconds,
                    opts.module_args.split(), work, opts.model)
        report(p)
        results.append(p)
    if opts.json:
        pathlib.Path(opts.json).write_text(json.dumps(results, indent=1))
        base.wrote(pathlib.Path(opts.json))
    return 0


if __name__ == "__main__":
    sys.exit(main())
