"""The module against the serving stacks a user would pick instead: same ONNX files, same inputs.

    bench/run compare [--quick] [--reps N] [--seconds S] [--out DIR] [--peer PATH]
    bench/run compare --markdown bench/results/compare-STAMP.json

Run after the project's build (`python -m build_tools build`). It sets up what it needs,
idempotently: .venv-compare/ (FastAPI, uvicorn, nvidia-pytriton and the project's ONNX
Runtime pin, build_tools/pins.py) and Debian's wrk. Then, on this machine:

* models (compare_models.py, in a child process): the MNIST-sized CNN, a fraud-detection
  MLP shaped like RedisAI's 2020 benchmark (a 1x30 transaction and a 1x256 reference in),
  and a Gather model over a 128 MiB initializer (a file over 100 MB). Every stack serves
  these very files, and every stack's answer to every model is checked against ONNX
  Runtime's own before any timing.
* stacks:
  - the module: redis-server with the module and its ONNX backend at their defaults,
    driven by bench/floor/rai_load.c (C, one thread, epoll). "module DAG" is one
    AI.DAGEXECUTE per request: TENSORSET of the inputs |> MODELEXECUTE |> TENSORGET BLOB,
    the like-for-like of an HTTP request. For the fraud model also "module DAG, ref in
    Redis": the 1x256 reference kept in Redis and LOADed by the DAG, as RedisAI's
    benchmark did. "module MODELEXECUTE": the inputs already in Redis, the output left
    there (what a pipeline whose data lives in Redis pays; not a like-for-like figure);
  - with --peer PATH, RedisAI 1.2.7 (stack "redisai-1.2.7"): its redisai.so at PATH and its
    ONNX backend beside it (bench/peer.py), at its defaults, served and driven exactly like
    the module, the same DAGs and MODELEXECUTE (1.2.7 has both); the table of the module
    against it per cell. PATH is your own build of RedisAI's source at tag v1.2.7 against the
    same ONNX Runtime wheel;
  - FastAPI + uvicorn, 2 workers (the machine's 2 cores), an ONNX Runtime session per
    worker; raw float32/int64 bytes in and out rather than JSON (fairer: no JSON parse);
  - Triton: the tritonserver that the nvidia-pytriton wheel bundles, run directly on a
    model repository of Python-backend models calling ONNX Runtime (2 instances each);
  - PyTriton: nvidia-pytriton's Triton binding, an infer_func calling ONNX Runtime (2
    instances); both Triton stacks speak KServe v2 with binary tensors over HTTP;
  the HTTP stacks are driven by wrk (Debian's, one thread) with a Lua script for the body.
* measurement: 1 and 16 clients (connections, closed loop), every stack in turn within a
  repetition, repetitions alternating (--reps, default 3; --seconds per cell, default 5,
  after a 1 s warm-up); req/s, p50/p99 latency and server CPU per request (utime+stime
  of the server's processes and all their descendants: uvicorn's workers, tritonserver
  and its python stubs, PyTriton's process). Medians over repetitions, with min-max.
  Results: <out>/compare-<UTC stamp>.json (machine, versions, settings, every
  repetition; --out DIR, by default a folder outside the repository: bench/README.md), and
  the table printed (--markdown prints it again from a results file; the README's and docs'
  figures come from a file under bench/results/, made with --out bench/results).

With --stacks naming only module stacks (module, redisai-1.2.7) neither .venv-compare/ nor
wrk is set up.

Not measured here:
* Triton's ONNX Runtime backend (libtriton_onnxruntime.so): no package of PyPI, Debian or
  npm carries it. nvidia-pytriton 0.7.0's wheel bundles tritonserver 2.51.0 with the python
  backend only (backends/python); PyPI's `tritonserver` 2.73.0 is the in-process Python
  API alone (bindings for CPython 3.12 on glibc 2.39, no libtritonserver.so, no backend),
  and its only installable release here (0.0.1.dev0) is a placeholder that points to NGC
  containers; `tritonclient` is a client; Debian and npm have no Triton package. So
  Triton runs ONNX Runtime from its Python backend, as the Python-backend docs show.
"""
from __future__ import annotations

import argparse
import datetime
import json
import pathlib
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import bench as base  # noqa: E402  (Client, find_install, med; puts tests/support/ on sys.path)
import compare_env  # noqa: E402
import compare_http  # noqa: E402
import compare_report  # noqa: E402
import floor_tools  # noqa: E402
import peer as peers  # noqa: E402

from paths import backend_file  # noqa: E402
from redis_server import RedisServer  # noqa: E402

MODELS = ("cnn", "fraud", "big")
CLIENTS = (1, 16)
RTOL, ATOL = 1e-4, 1e-5


@dataclass
class Target:
    """One row of the table: a stack's way of serving one model."""
    label: str
    server: Any                                  # the stack: pids(), alive(), name
    model: str
    run: Callable[[int, float], dict[str, Any]]  # (clients, seconds) -> count, rps, p50_us, p99_us
    check: Callable[[], np.ndarray]              # one request, its output


def expected(entry: dict[str, Any]) -> np.ndarray:
    return np.fromfile(entry["output"]["expected"], np.float32)


# --- the module ---------------------------------------------------------------------------

class ModuleStack:
    """redis-server with the module and the ONNX backend at their defaults, or with the module
    arguments of a --module-setting (its targets' labels then end in " @LABEL"); or with
    RedisAI 1.2.7 at its defaults (peer: its targets' labels begin "redisai-1.2.7", not
    "module")."""

    def __init__(self, install: pathlib.Path, load_exe: pathlib.Path, work: pathlib.Path,
                 setting: str = "", args: list[str] | None = None,
                 peer: peers.Peer | None = None) -> None:
        self.name = f"module@{setting}" if setting else "module"
        self.prefix = "module"
        self.suffix = f" @{setting}" if setting else ""
        self.description = ("redis-server + this module, ONNX backend at "
                            + (f"{' '.join(args or [])}" if setting else "its defaults")
                            + ", rai_load (RESP, C)")
        module, backend = install / "redisai.so", backend_file(install, "onnxruntime")
        if peer is not None:
            self.name = self.prefix = peers.LABEL
            self.description = (f"redis-server + {peers.NAME} ({peer.module}), ONNX backend at "
                                "its defaults, rai_load (RESP, C)")
            module, backend = peer.module, peer.backends["ONNX"]
        self.srv = RedisServer(module, ["ONNX", str(backend), *(args or [])])
        self.client = base.Client(self.srv.port)
        self.load = floor_tools.Load(load_exe, self.srv.port, work)

    def pids(self) -> list[int]:
        return [self.srv.proc.pid]

    def alive(self) -> bool:
        return self.srv.alive()

    def stop(self) -> None:
        base.stop_checked(self.client, self.srv, self.name)

    def _store(self, name: str, entry: dict[str, Any]) -> list[str]:
        """The model and its inputs (for MODELEXECUTE and the DAG's LOAD); the input keys."""
        self.client.call("AI.MODELSTORE", f"{name}:m", "ONNX", "CPU", "BLOB",
                         pathlib.Path(entry["file"]).read_bytes())
        keys = []
        for n, i in enumerate(entry["inputs"]):
            keys.append(f"{name}:in{n}")
            self.client.call("AI.TENSORSET", keys[-1], i["dtype"], *i["shape"], "BLOB",
                             pathlib.Path(i["file"]).read_bytes())
        return keys

    def helper_runs(self) -> int | None:
        """INFO's count of requests the CPU queue's helper ran (engine/run_queue.c); None on a
        server without it (RedisAI 1.2.7)."""
        text = bytes(self.client.call("INFO", "MODULES")).decode()
        for line in text.splitlines():
            if line.startswith("ai_helper_runs:"):
                return int(line.split(":", 1)[1])
        return None

    def _run(self, cmd: bytes) -> Callable[[int, float], dict[str, Any]]:
        def run(clients: int, seconds: float) -> dict[str, Any]:
            before = self.helper_runs()
            (res,) = self.load.run([cmd], clients=clients, seconds=seconds, warmup=0)
            after = self.helper_runs()
            res["helper_share"] = (None if before is None or after is None
                                   else (after - before) / max(1, res["count"]))
            return res
        return run

    def _dag(self, name: str, entry: dict[str, Any], keys: list[str], sent: list[int]) -> list[Any]:
        """AI.DAGEXECUTE: TENSORSET of the inputs in `sent`, the others LOADed from keys."""
        inputs = entry["inputs"]
        names = [f"a{n}" if n in sent else keys[n] for n in range(len(inputs))]
        loaded = [keys[n] for n in range(len(inputs)) if n not in sent]
        args: list[Any] = ["AI.DAGEXECUTE"]
        args += ["LOAD", len(loaded), *loaded] if loaded else ["ROUTING", f"{name}:m"]
        for n in sent:
            i = inputs[n]
            args += ["|>", "AI.TENSORSET", names[n], i["dtype"], *i["shape"], "BLOB",
                     pathlib.Path(i["file"]).read_bytes()]
        args += ["|>", "AI.MODELEXECUTE", f"{name}:m", "INPUTS", len(names), *names, "OUTPUTS", 1, "y",
                 "|>", "AI.TENSORGET", "y", "BLOB"]
        return args

    def targets(self, name: str, entry: dict[str, Any]) -> list[Target]:
        keys = self._store(name, entry)
        out: list[Target] = []
        everything = list(range(len(entry["inputs"])))
        dags = [(f"{self.prefix} DAG", everything)]
        if name == "fraud":
            dags.append((f"{self.prefix} DAG, ref in Redis", [0]))
        for label, sent in dags:
            args = self._dag(name, entry, keys, sent)
            out.append(Target(label + self.suffix, self, name, self._run(floor_tools.resp(*args)),
                              lambda a=args: np.frombuffer(bytes(self.client.call(*a)[-1]), np.float32)))
        exe = ["AI.MODELEXECUTE", f"{name}:m", "INPUTS", len(keys), *keys, "OUTPUTS", 1, f"{name}:out"]

        def check_exec() -> np.ndarray:
            self.client.call(*exe)
            return np.frombuffer(bytes(self.client.call("AI.TENSORGET", f"{name}:out", "BLOB")), np.float32)

        out.append(Target(f"{self.prefix} MODELEXECUTE" + self.suffix, self, name,
                          self._run(floor_tools.resp(*exe)), check_exec))
        return out


def http_targets(stack: compare_http.HttpStack, label: str, wrk_exe: str, name: str,
                 entry: dict[str, Any], work: pathlib.Path) -> list[Target]:
    req = stack.request(name, entry)
    wrk = compare_http.Wrk(wrk_exe, stack.port, req, work, f"{stack.name}-{name}")

    def check() -> np.ndarray:
        return compare_http.answer_floats(*compare_http.post(stack.port, req))

    return [Target(label, stack, name, wrk.run, check)]


# --- measurement --------------------------------------------------------------------------

def measure(t: Target, clients: int, seconds: float, warm_s: float, others: list[Any]) -> dict[str, Any]:
    """A warm-up, then one timed run with the server's CPU time around it."""
    t.run(clients, warm_s)
    cpu0 = compare_env.tree_cpu_seconds(t.server.pids())
    bg0 = compare_env.tree_cpu_seconds([p for s in others for p in s.pids()])
    t0 = time.perf_counter()
    res = t.run(clients, seconds)
    wall = time.perf_counter() - t0
    cpu = compare_env.tree_cpu_seconds(t.server.pids()) - cpu0
    bg = compare_env.tree_cpu_seconds([p for s in others for p in s.pids()]) - bg0
    return {"rps": res["rps"], "p50_us": res["p50_us"], "p99_us": res["p99_us"],
            "helper_share": res.get("helper_share", 0.0),
            "count": res["count"], "cpu_s": cpu, "cpu_ms_per_req": 1000 * cpu / max(1, res["count"]),
            "server_cores": cpu / wall, "others_cpu_s": bg}


def summarize(reps: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key in ("rps", "p50_us", "p99_us", "cpu_ms_per_req", "server_cores"):
        xs = [r[key] for r in reps]
        out[key] = {"median": base.med(xs), "min": min(xs), "max": max(xs)}
    return out


def check_target(t: Target, entry: dict[str, Any]) -> None:
    got, want = t.check(), expected(entry)
    np.testing.assert_allclose(got, want, rtol=RTOL, atol=ATOL,
                               err_msg=f"{t.label} {t.model}: the answer differs from ONNX Runtime's")


# --- setup of the stacks ------------------------------------------------------------------

def start_stacks(names: list[str], install: pathlib.Path, load_exe: pathlib.Path,
                 manifest_path: pathlib.Path, work: pathlib.Path, left_out: dict[str, str],
                 module_settings: dict[str, list[str]] | None = None,
                 peer: peers.Peer | None = None) -> dict[str, Any]:
    """module_settings: LABEL -> module arguments, a module stack "module@LABEL" each; peer:
    RedisAI 1.2.7, the stack "redisai-1.2.7" when names has it."""
    stacks: dict[str, Any] = {}
    classes = {"fastapi": compare_http.FastAPIStack, "triton": compare_http.TritonStack,
               "pytriton": compare_http.PyTritonStack}
    settings = module_settings or {}
    for name in names + [f"module@{label}" for label in settings]:
        print(f"starting {name} ...", flush=True)
        t0 = time.perf_counter()
        try:
            if name == "module":
                stacks[name] = ModuleStack(install, load_exe, work)
            elif name == peers.LABEL:
                stacks[name] = ModuleStack(install, load_exe, work, peer=peer)
                peer.learn_version(stacks[name].client.call("MODULE", "LIST"))
            elif name.startswith("module@"):
                label = name.partition("@")[2]
                stacks[name] = ModuleStack(install, load_exe, work, label, settings[label])
            else:
                stack = classes[name](work)
                stacks[name] = stack
                stack.start(manifest_path)
        except Exception as exc:  # noqa: BLE001  (a stack that cannot start is left out, with why)
            left_out[name] = f"did not start: {str(exc).strip()[:2000]}"
            print(f"  {name} LEFT OUT: {left_out[name][:600]}", flush=True)
            if name in stacks and hasattr(stacks[name], "stop"):
                stacks.pop(name).stop()
            continue
        print(f"  {name} up in {time.perf_counter() - t0:.1f} s", flush=True)
    return stacks


LABELS = {"fastapi": "FastAPI + uvicorn", "triton": "Triton (python backend)", "pytriton": "PyTriton"}


def build_targets(stacks: dict[str, Any], models: dict[str, Any], wrk_exe: str, work: pathlib.Path,
                  left_out: dict[str, str]) -> dict[str, list[Target]]:
    """Every stack's targets per model, each answer checked against ONNX Runtime's."""
    out: dict[str, list[Target]] = {}
    for name, entry in models.items():
        out[name] = []
        for sname, stack in stacks.items():
            ts = (stack.targets(name, entry) if isinstance(stack, ModuleStack)
                  else http_targets(stack, LABELS[sname], wrk_exe, name, entry, work))
            for t in ts:
                try:
                    check_target(t, entry)
                except Exception as exc:  # noqa: BLE001
                    left_out[f"{t.label} / {name}"] = f"wrong or no answer: {str(exc).strip()[:1000]}"
                    print(f"  {t.label} {name} LEFT OUT: {str(exc)[:300]}", flush=True)
                    continue
                out[name].append(t)
                print(f"  {t.label} {name}: answer matches ONNX Runtime's", flush=True)
    return out


def versions(stacks: dict[str, Any], manifest: dict[str, Any], wrk_exe: str | None,
             peer: peers.Peer | None = None) -> dict[str, str]:
    v: dict[str, str] = {"module": compare_env.git_commit(), "onnxruntime (module)": manifest["onnxruntime"],
                         "redis-server": compare_env.tool_version(["redis-server", "--version"])}
    if wrk_exe:
        v["wrk"] = compare_env.tool_version([wrk_exe, "-v"])
    if peer is not None and peers.LABEL in stacks:
        v[peers.LABEL] = peer.version or "unknown"
    if wrk_exe:  # the HTTP stacks ran
        v.update({f"{k} (.venv-compare)": val for k, val in compare_env.venv_versions().items()})
    for name in ("triton", "pytriton"):
        if name in stacks:
            try:
                v[f"tritonserver ({name})"] = compare_http.server_version(stacks[name].port)
            except Exception as exc:  # noqa: BLE001
                v[f"tritonserver ({name})"] = f"unknown: {exc}"
    return v


# --- main ---------------------------------------------------------------------------------

def run_all(targets: dict[str, list[Target]], stacks: dict[str, Any], clients: list[int], reps: int,
            seconds: float, warm_s: float, left_out: dict[str, str]) -> list[dict[str, Any]]:
    cells: dict[tuple[str, int, str], list[dict[str, Any]]] = {}
    failed: set[tuple[str, int, str]] = set()
    for rep in range(reps):
        for model, ts in targets.items():
            for c in clients:
                k = rep % max(1, len(ts))
                for t in ts[k:] + ts[:k]:  # each repetition starts with another stack
                    if (model, c, t.label) in failed:
                        continue
                    others = [s for s in stacks.values() if s is not t.server]
                    try:
                        if not t.server.alive():
                            raise RuntimeError(f"the {t.server.name} server is not running")
                        r = measure(t, c, seconds, warm_s, others)
                    except Exception as exc:  # noqa: BLE001  (one cell fails: the others still run)
                        failed.add((model, c, t.label))
                        cells.pop((model, c, t.label), None)
                        left_out[f"{t.label} / {model} / {c} clients"] = f"failed: {str(exc).strip()[:1000]}"
                        print(f"  {t.label} {model} {c} clients FAILED: {str(exc)[:300]}", flush=True)
                        continue
                    cells.setdefault((model, c, t.label), []).append(r)
                    print(f"  rep {rep + 1}/{reps} {model:<5} {c:>2} clients {t.label:<26} "
                          f"{r['rps']:9.0f} req/s  p50 {r['p50_us']:8.0f} us  p99 {r['p99_us']:8.0f} us  "
                          f"{r['cpu_ms_per_req']:6.3f} ms CPU/req", flush=True)
    return [{"model": m, "clients": c, "stack": label, "reps": rs, **summarize(rs)}
            for (m, c, label), rs in cells.items()]


def stack_names(stacks: str, peer: str | None) -> list[str]:
    """The stacks of --stacks, with the peer's added when --peer is given; a stack name that is
    not known, or the peer's without --peer, stops the run."""
    names = [n.strip() for n in stacks.split(",") if n.strip()]
    known = ["module", *LABELS, peers.LABEL]
    for n in names:
        if n not in known:
            raise SystemExit(f"--stacks: no stack {n!r} (known: {', '.join(known)})")
    if peers.LABEL in names and not peer:
        raise SystemExit(f"--stacks {peers.LABEL} needs --peer PATH (its redisai.so)")
    if peer and peers.LABEL not in names:
        names.append(peers.LABEL)
    return names


def _shown(path: pathlib.Path) -> pathlib.Path:
    """path relative to the repository when inside it (how the docs name a results file)."""
    try:
        return path.resolve().relative_to(HERE.parent)
    except ValueError:
        return path


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="1 repetition of 1 s per cell")
    ap.add_argument("--reps", type=int, default=3, help="repetitions (alternating stacks), default 3")
    ap.add_argument("--seconds", type=float, default=5.0, help="timed seconds per cell, default 5")
    ap.add_argument("--clients", default=",".join(map(str, CLIENTS)), help="connections, default 1,16")
    ap.add_argument("--models", default=",".join(MODELS), help="default cnn,fraud,big")
    ap.add_argument("--stacks", default="module,fastapi,triton,pytriton",
                    help=f"default module,fastapi,triton,pytriton, and {peers.LABEL} with --peer")
    ap.add_argument("--big-mib", type=int, default=128, help="size of the big model's initializer")
    ap.add_argument("--install", help="install tree (default: newest install/redisai-*/)")
    ap.add_argument("--build", default=str(HERE.parent / "build"), help="configured build folder")
    base.add_out_option(ap)
    ap.add_argument("--module-setting", action="append", default=[], metavar='LABEL="ARGS"',
                    help="also serve with these module arguments (e.g. "
                         'tpq1="THREADS_PER_QUEUE 1 INTRA_OP_PARALLELISM 1"): the module\'s rows '
                         "again, labelled @LABEL, and the defaults against the best of them")
    peers.add_options(ap)
    ap.add_argument("--markdown", metavar="RESULTS.json", help="print the tables of a results file, run nothing")
    ap.add_argument("--update-docs", metavar="RESULTS.json",
                    help="rewrite the tables of README.md and docs/performance.md from a results file")
    return ap


def main() -> int:
    opts = parser().parse_args()
    if opts.update_docs:
        results = pathlib.Path(opts.update_docs)
        if not results.resolve().is_relative_to(HERE.parent):
            raise SystemExit(f"--update-docs {results}: the pages name their results file, so it "
                             "must be in the repository: run with --out bench/results, or copy "
                             "the file there")
        for page in compare_report.update_docs(results):
            print(f"rewrote {page}")
        return 0
    if opts.markdown:
        path = pathlib.Path(opts.markdown)
        print(compare_report.markdown(json.loads(path.read_text()), _shown(path)))
        return 0
    reps, seconds, warm_s = (1, 1.0, 1.0) if opts.quick else (opts.reps, opts.seconds, 1.0)
    module_settings: dict[str, list[str]] = {}
    for v in opts.module_setting:
        label, sep, args = v.partition("=")
        if not sep or not label or "@" in label:
            raise SystemExit(f"--module-setting {v}: expected LABEL=\"ARGS\"")
        module_settings[label] = args.split()
    clients = [int(c) for c in opts.clients.split(",")]
    names = stack_names(opts.stacks, opts.peer)
    peer = peers.from_options(opts, ["ONNX"])
    t_start = time.perf_counter()
    install = base.find_install(opts.install)
    wrk_exe = None
    if any(n in LABELS for n in names):  # an HTTP stack: its venv and the HTTP client
        compare_env.ensure_venv()
        wrk_exe = compare_env.ensure_wrk()
    _, load_exe = floor_tools.build(pathlib.Path(opts.build))
    work = pathlib.Path(tempfile.mkdtemp(prefix="bench-compare-"))
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    left_out: dict[str, str] = {}
    stacks: dict[str, Any] = {}
    try:
        print("building the models (child process) ...", flush=True)
        subprocess.run([sys.executable, str(HERE / "compare_models.py"), str(work / "models"),
                        "--big-mib", str(opts.big_mib)], check=True)
        manifest_path = work / "models" / "manifest.json"
        manifest = json.loads(manifest_path.read_text())
        models = {m: manifest["models"][m] for m in opts.models.split(",")}
        stacks = start_stacks(names, install, load_exe, manifest_path, work,
                              left_out, module_settings, peer)
        targets = build_targets(stacks, models, wrk_exe or "", work, left_out)
        vers = versions(stacks, manifest, wrk_exe, peer)
        print(f"measuring: {reps} repetitions x {seconds:g} s per cell, clients {clients} ...", flush=True)
        cells = run_all(targets, stacks, clients, reps, seconds, warm_s, left_out)
    finally:
        for s in stacks.values():
            s.stop()
        shutil.rmtree(work, ignore_errors=True)
    doc = {
        "stamp": stamp, "command": " ".join(["bench/bench_compare.py", *sys.argv[1:]]),
        "settings": {"reps": reps, "seconds": seconds, "warmup_s": warm_s, "clients": clients,
                     "quick": opts.quick, "big_mib": opts.big_mib,
                     "load": "closed loop; rai_load (RESP) and wrk -t1 (HTTP), one client thread"},
        "machine": compare_env.machine(), "versions": vers,
        "models": {m: {"bytes": e["bytes"], "inputs": [[i["name"], i["dtype"], i["shape"]] for i in e["inputs"]],
                       "output": [e["output"]["name"], e["output"]["shape"]]} for m, e in models.items()},
        "stacks": {n: s.description if isinstance(s, ModuleStack) else type(s).description
                   for n, s in stacks.items()},
        "module_settings": module_settings,
        **({"peer": peer.describe()} if peer is not None else {}),
        "left_out": left_out, "cells": cells, "seconds_total": round(time.perf_counter() - t_start),
    }
    path = base.write_result(opts.out, f"compare-{stamp}", doc)
    print()
    print(compare_report.markdown(doc, _shown(path)))
    print(f"total {time.perf_counter() - t_start:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
