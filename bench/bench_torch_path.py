"""The Torch run path against libtorch's own call: direct, through the backend ABI, and in the server.

Three figures of the same TorchScript CNN (bench/floor_models.py), with the same intra-op
threads, measured in one run, in alternating rounds (the order rotates every round):

* direct:  bench/floor/torch_direct.cpp, torch::jit::load and forward in a loop on one
           worker thread (no backend, no Redis): the framework's own cost;
* backend: bench/floor/rai_floor.c, the Torch backend through backend_abi.h (no Redis);
* server:  AI.MODELEXECUTE of the model at 1 client, PING interleaved on the same
           connection (bench/floor/rai_load.c), THREADS_PER_QUEUE 1.

Prints per round and the medians (with their ranges) of p50 and runs/s, and the ratios
server p50 / (PING p50 + direct p50) (target: <= 1.1, docs/performance.md#targets) and
backend / direct.
Every output (direct, backend, server) is checked against the framework's own result.
Writes <out>/torch-path-<UTC stamp>.json (--out DIR; by default a folder outside the
repository, bench/README.md).

With several install trees (`--install before=DIR --install after=DIR`), each round
measures the backend and the server of every tree, alternating; `--env LABEL=KEY=VALUE`
gives one tree's server and rai_floor an environment variable (experiments).

    bench/run torch_path [--install [LABEL=]DIR ...] [--rounds 3] [--quick]
        [--intra N] [--models cnn,trivial]
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile
import time
from typing import Any

import numpy as np

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))  # build_tools, which tests/support/ imports
import bench as base  # noqa: E402  (Client, find_install; puts tests/support/ on sys.path)
import floor_tools  # noqa: E402

from paths import backend_file  # noqa: E402
from redis_server import RedisServer  # noqa: E402
from helpers import info_field  # noqa: E402

PING = floor_tools.resp("PING")


def build_direct(build_dir: pathlib.Path) -> pathlib.Path:
    """bench/floor/torch_direct.cpp, a CMake target of the build folder (only when the Torch
    backend is configured there)."""
    res = subprocess.run(["cmake", "--build", str(build_dir), "--target", "torch_direct"],
                         capture_output=True, text=True)
    if res.returncode != 0:
        raise SystemExit(f"building torch_direct failed:\n{res.stdout}\n{res.stderr}")
    return build_dir / "torch_direct"


def run_json(argv: list[str], env: dict[str, str] | None = None) -> dict[str, Any]:
    res = subprocess.run(argv, capture_output=True, text=True, timeout=600, env=env)
    if res.returncode != 0:
        raise RuntimeError(f"{argv[0]} exited {res.returncode}:\n{res.stderr.strip()}")
    return json.loads(res.stdout)


def check(got: np.ndarray, entry: dict[str, Any], what: str) -> None:
    want = np.fromfile(entry["expected"], np.float32)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5, err_msg=f"{what} differs")


class Direct:
    """torch_direct on one model of the manifest, with the libraries of an install tree."""

    def __init__(self, exe: pathlib.Path, so: pathlib.Path, entry: dict[str, Any],
                 intra: int) -> None:
        self.argv = [str(exe), "--model", entry["blob"], "--intra", str(intra)]
        for i in entry["inputs"]:
            dims = "x".join(str(d) for d in i["shape"])
            self.argv += ["--input", f"{i['dtype']}:{dims}:{i['file']}"]
        # The backend's own copies of libtorch (its RUNPATH, $ORIGIN/lib): the same files.
        self.env = dict(os.environ, LD_LIBRARY_PATH=str(so.parent / "lib"))

    def run(self, iters: int, warmup: int = 200, dump: pathlib.Path | None = None,
            extra: tuple[str, ...] = ()) -> dict[str, Any]:
        argv = self.argv + ["--iters", str(iters), "--warmup", str(warmup), *extra]
        if dump is not None:
            argv += ["--dump-output", str(dump)]
        return run_json(argv, self.env)


class Variant:
    """One install tree: its server (one model per manifest entry) and its rai_floor."""

    def __init__(self, label: str, install: pathlib.Path, env: dict[str, str],
                 manifest: dict[str, Any], models: list[str], intra: int,
                 floor_exe: pathlib.Path, load_exe: pathlib.Path, work: pathlib.Path) -> None:
        self.label = label
        self.install = install
        self.so = backend_file(install, "torch")
        self.env = dict(os.environ, **env)
        self.extra_env = env
        self.configs: dict[str, str] = {}
        self.srv = RedisServer(install / "redisai.so",
                               ["TORCH", str(self.so), "THREADS_PER_QUEUE", "1",
                                "INTRA_OP_PARALLELISM", str(intra)], env=self.env)
        self.client = base.Client(self.srv.port)
        self.load = floor_tools.Load(load_exe, self.srv.port, work)
        self.cmds: dict[str, bytes] = {}
        self.floors: dict[str, floor_tools.Floor] = {}
        for model in models:
            entry = manifest[model]["TORCH"]
            c = self.client
            c.call("AI.MODELSTORE", f"{model}_m", "TORCH", "CPU", "BLOB",
                   pathlib.Path(entry["blob"]).read_bytes())
            ins = []
            for n, i in enumerate(entry["inputs"]):
                c.call("AI.TENSORSET", f"{model}_in{n}", i["dtype"], *i["shape"], "BLOB",
                       pathlib.Path(i["file"]).read_bytes())
                ins.append(f"{model}_in{n}")
            self.cmds[model] = floor_tools.resp("AI.MODELEXECUTE", f"{model}_m", "INPUTS",
                                                len(ins), *ins, "OUTPUTS", 1, f"{model}_out")
            self.floors[model] = floor_tools.Floor(floor_exe, self.so, "TORCH", entry,
                                                   intra=intra)

    def floor(self, model: str, iters: int, warmup: int = 200,
              dump: pathlib.Path | None = None) -> dict[str, Any]:
        argv = self.floors[model].argv + ["--iters", str(iters), "--warmup", str(warmup)]
        if dump is not None:
            argv += ["--dump-output", str(dump)]
        return run_json(argv, self.env)

    def server_output(self, model: str) -> np.ndarray:
        return np.frombuffer(bytes(self.client.call("AI.TENSORGET", f"{model}_out", "BLOB")),
                             np.float32)

    def run_stats(self, model: str) -> tuple[int, int]:
        """AI.INFO's (duration in us, calls) of the model: the run as the core times it."""
        reply = self.client.call("AI.INFO", f"{model}_m")
        fields = {bytes(reply[i]).decode(): reply[i + 1] for i in range(0, len(reply), 2)}
        return int(fields["duration"]), int(fields["calls"])

    def where(self) -> dict[str, int]:
        """Runs so far that went inline, held (engine/held_run.h) and held then blocked."""
        info = bytes(self.client.call("INFO", "MODULES"))
        out = {}
        for name in ("inline_runs", "held_runs", "held_runs_blocked"):
            value = info_field(info, f"ai_{name}")
            out[name] = int(value) if value is not None else 0
        return out

    def stop(self) -> None:
        base.stop_checked(self.client, self.srv, self.label)


def summary(values: list[float]) -> dict[str, float]:
    return {"median": base.med(values), "min": min(values), "max": max(values)}


def measure(direct: dict[str, Direct], variants: list[Variant], models: list[str],
            rounds: int, iters: int, requests: int) -> dict[str, Any]:
    """Alternating rounds; within a round every figure once, the order rotated per round."""
    out: dict[str, Any] = {}
    for model in models:
        steps: list[tuple[str, Any]] = [("direct", None)]
        for v in variants:
            steps += [("backend", v), ("server", v)]
        per: dict[str, list[dict[str, Any]]] = {"direct": []}
        for v in variants:
            per[f"backend:{v.label}"] = []
            per[f"server:{v.label}"] = []
        for r in range(rounds):
            order = steps[r % len(steps):] + steps[:r % len(steps)]
            for what, v in order:
                if what == "direct":
                    per["direct"].append(direct[model].run(iters))
                elif what == "backend":
                    per[f"backend:{v.label}"].append(v.floor(model, iters))
                else:
                    where0 = v.where()
                    dur0, calls0 = v.run_stats(model)
                    ping, run = v.load.run([PING, v.cmds[model]], requests=requests, warmup=100)
                    run.update({k: n - where0[k] for k, n in v.where().items()})
                    run["sent"] = run["count"] + 100 // 2  # warm-up alternates PING / EXEC
                    dur1, calls1 = v.run_stats(model)
                    run["server_run_mean_us"] = (dur1 - dur0) / max(1, calls1 - calls0)
                    per[f"server:{v.label}"].append({"ping": ping, "run": run})
        res: dict[str, Any] = {"rounds": per}
        d_p50 = [x["p50_us"] for x in per["direct"]]
        res["direct"] = {"p50_us": summary(d_p50),
                         "mean_us": summary([x["mean_us"] for x in per["direct"]]),
                         "p99_us": summary([x["p99_us"] for x in per["direct"]]),
                         "rps": summary([x["rps"] for x in per["direct"]])}
        for v in variants:
            b = per[f"backend:{v.label}"]
            s = per[f"server:{v.label}"]
            b_p50 = [x["p50_us"] for x in b]
            ping = [x["ping"]["p50_us"] for x in s]
            run = [x["run"]["p50_us"] for x in s]
            # Ratios within a round (the figures of one round were taken minutes apart at
            # most), then their median and range.
            target = [run[i] / (ping[i] + d_p50[i]) for i in range(rounds)]
            vs_floor = [run[i] / (ping[i] + b_p50[i]) for i in range(rounds)]
            backend_vs_direct = [b_p50[i] / d_p50[i] for i in range(rounds)]
            res[v.label or "tree"] = {
                "backend": {"p50_us": summary(b_p50),
                            "mean_us": summary([x["mean_us"] for x in b]),
                            "p99_us": summary([x["p99_us"] for x in b]),
                            "rps": summary([x["rps"] for x in b])},
                "server": {"ping_p50_us": summary(ping), "run_p50_us": summary(run),
                           "run_p99_us": summary([x["run"]["p99_us"] for x in s]),
                           "run_in_server_mean_us": summary(
                               [x["run"]["server_run_mean_us"] for x in s]),
                           **{f"{k.removesuffix('_runs')}_share":
                              sum(x["run"][k] for x in s) / max(1, sum(x["run"]["sent"] for x in s))
                              for k in ("inline_runs", "held_runs", "held_runs_blocked")}},
                "server_over_ping_plus_direct": summary(target),
                "server_over_ping_plus_backend": summary(vs_floor),
                "backend_over_direct": summary(backend_vs_direct),
                "backend_minus_direct_us": summary([b_p50[i] - d_p50[i]
                                                    for i in range(rounds)]),
            }
        out[model] = res
    return out


def fmt(s: dict[str, float], unit: str = "") -> str:
    return f"{s['median']:.2f}{unit} ({s['min']:.2f}-{s['max']:.2f})"


def report(results: dict[str, Any], variants: list[Variant]) -> None:
    for model, res in results.items():
        print(f"\n{model}: p50 us, median of the rounds (range)")
        print(f"  direct (libtorch, no backend)  p50 {fmt(res['direct']['p50_us'])}  "
              f"p99 {fmt(res['direct']['p99_us'])}  runs/s {res['direct']['rps']['median']:.0f}")
        for v in variants:
            r = res[v.label or "tree"]
            tag = f"[{v.label}] " if v.label else ""
            print(f"  {tag}backend (rai_floor, ABI)  p50 {fmt(r['backend']['p50_us'])}  "
                  f"p99 {fmt(r['backend']['p99_us'])}  runs/s {r['backend']['rps']['median']:.0f}")
            print(f"  {tag}server 1 client  EXEC p50 {fmt(r['server']['run_p50_us'])}  "
                  f"PING p50 {fmt(r['server']['ping_p50_us'])}  "
                  f"inline {100 * r['server']['inline_share']:.0f}%  "
                  f"held {100 * r['server']['held_share']:.0f}% "
                  f"(then blocked {100 * r['server']['held_runs_blocked_share']:.1f}%)")
            print(f"  {tag}the run in the server (AI.INFO mean) "
                  f"{fmt(r['server']['run_in_server_mean_us'])}; backend mean "
                  f"{fmt(r['backend']['mean_us'])}; direct mean {fmt(res['direct']['mean_us'])}")
            print(f"  {tag}server / (PING + direct) = {fmt(r['server_over_ping_plus_direct'], 'x')}"
                  f"  (target <= 1.10x); server / (PING + backend) = "
                  f"{fmt(r['server_over_ping_plus_backend'], 'x')}")
            print(f"  {tag}backend / direct = {fmt(r['backend_over_direct'], 'x')}; "
                  f"backend - direct = {fmt(r['backend_minus_direct_us'], ' us')}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--install", action="append", default=[], metavar="[LABEL=]DIR")
    ap.add_argument("--env", action="append", default=[], metavar="LABEL=KEY=VALUE",
                    help="an environment variable for one tree's server and rai_floor")
    ap.add_argument("--config", action="append", default=[], metavar="LABEL=NAME=VALUE",
                    help="AI.CONFIG NAME VALUE on one tree's server at its start "
                         "(e.g. INLINE_RUN_MAX_US)")
    ap.add_argument("--build", default=str(HERE.parent / "build"), help="configured build folder")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--quick", action="store_true", help="fewer runs and requests per round")
    ap.add_argument("--intra", type=int, default=0,
                    help="intra-op threads of all three (default: the backend default's value "
                         "here, max(1, cores - 1) with THREADS_PER_QUEUE 1)")
    ap.add_argument("--models", default="cnn", help="cnn and/or trivial, comma-separated")
    base.add_out_option(ap)
    opts = ap.parse_args()
    if opts.rounds < 1:
        raise SystemExit("--rounds must be >= 1")

    t_start = time.perf_counter()
    intra = opts.intra or max(1, len(os.sched_getaffinity(0)) - 1)
    iters = 1000 if opts.quick else 4000
    requests = 1000 if opts.quick else 3000
    models = [m.strip() for m in opts.models.split(",") if m.strip()]
    installs = base.parse_installs(opts.install)
    envs: dict[str, dict[str, str]] = {label: {} for label, _ in installs}
    configs: dict[str, dict[str, str]] = {label: {} for label, _ in installs}
    for opt, values, table in (("--env", opts.env, envs), ("--config", opts.config, configs)):
        for e in values:
            label, _, kv = e.partition("=")
            key, sep, value = kv.partition("=")
            if label not in table or not sep:
                raise SystemExit(f"{opt} {e}: expected LABEL=NAME=VALUE with a LABEL of --install")
            table[label][key] = value

    build_dir = pathlib.Path(opts.build)
    floor_exe, load_exe = floor_tools.build(build_dir)
    direct_exe = build_direct(build_dir)
    work = pathlib.Path(tempfile.mkdtemp(prefix="bench-torch-path-"))
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    loadavg_start = os.getloadavg()
    variants: list[Variant] = []
    try:
        print("building the models with the frameworks (child process) ...", flush=True)
        pypath = os.pathsep.join(p for p in (str(HERE.parent), os.environ.get("PYTHONPATH"))
                                 if p)
        subprocess.run([sys.executable, str(HERE / "floor_models.py"), str(work / "models")],
                       check=True, env=dict(os.environ, PYTHONPATH=pypath))
        manifest = json.loads((work / "models" / "manifest.json").read_text())
        for label, inst in installs:
            v = Variant(label, inst, envs[label], manifest, models, intra, floor_exe, load_exe,
                        work)
            variants.append(v)
            for name, value in configs[label].items():
                v.client.call("AI.CONFIG", name, value)
            v.configs = configs[label]
        direct = {m: Direct(direct_exe, variants[0].so, manifest[m]["TORCH"], intra)
                  for m in models}
        for model in models:  # every output against the framework's own, and warm-up
            entry = manifest[model]["TORCH"]
            dump = work / f"direct_{model}.out"
            direct[model].run(1, 0, dump)
            check(np.fromfile(dump, np.float32), entry, f"torch_direct {model}")
            for v in variants:
                dump = work / f"floor_{v.label}_{model}.out"
                v.floor(model, 1, 0, dump)
                check(np.fromfile(dump, np.float32), entry, f"rai_floor {v.label} {model}")
                v.load.run([v.cmds[model]], requests=5, warmup=50)
                check(v.server_output(model), entry, f"server {v.label} {model}")
        print(f"measuring: {opts.rounds} rounds, intra-op threads {intra} ...", flush=True)
        results = measure(direct, variants, models, opts.rounds, iters, requests)
        for model in models:
            for v in variants:
                check(v.server_output(model), manifest[model]["TORCH"],
                      f"server {v.label} {model}")
        versions = manifest["versions"]["TORCH"]
    finally:
        for v in variants:
            v.stop()
        shutil.rmtree(work, ignore_errors=True)

    report(results, variants)
    doc = {"timestamp": stamp, "quick": opts.quick, "rounds": opts.rounds, "iters": iters,
           "requests": requests, "intra": intra, "torch": versions,
           "cores": len(os.sched_getaffinity(0)),
           "loadavg": [loadavg_start, os.getloadavg()],
           "installs": {v.label: {"dir": str(v.install), "env": v.extra_env, "config": v.configs}
                        for v in variants},
           "models": results}
    path = base.write_result(opts.out, f"torch-path-{stamp}", doc)
    print(f"total {time.perf_counter() - t_start:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
