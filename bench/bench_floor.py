"""The headline figures: each backend against its floor (in-process run, PING), and TENSORSET/GET against SET/GET.

Floors, per backend (TF, TORCH, ONNX):
* the in-process floor: bench/floor/rai_floor.c runs the model through the backend's
  ABI with no Redis (p50/p99 of one run, single-thread runs per second);
* PING: its p50 on the same connection, interleaved with the command measured.

Measured, one redis-server per backend (THREADS_PER_QUEUE 1, no batching), with
bench/floor/rai_load.c (a C closed-loop client, so that the client is not the
bottleneck on a machine with few cores):
1. the trivial 2x2 model and the MNIST-sized CNN, AI.MODELEXECUTE at 1, 4, 16, 32, 64
   clients: latency percentiles and throughput;
2. 1 client: PING and MODELEXECUTE interleaved, and rai_floor, in alternating rounds;
3. 32 clients on the CNN and rai_floor, in alternating rounds;
4. AI.TENSORSET/TENSORGET BLOB against SET/GET of the same bytes, 1 KB .. 64 MB,
   interleaved on one connection.
Every server output is compared with the framework's own result.

Writes <out>/<UTC timestamp>.json (every figure) and .png (latency and throughput against
clients, floors drawn), --out DIR, by default a folder outside the repository
(bench/README.md), and prints each figure against its target (docs/performance.md#targets).

    bench/run floor [--install DIR] [--build DIR] [--quick] [--kinds TF,ONNX] [--out DIR]
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
from typing import Any, Sequence

import numpy as np

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import bench as base  # noqa: E402  (Client, find_install; puts tests/support/ on sys.path)
import floor_tools  # noqa: E402

from paths import backend_file  # noqa: E402
from redis_server import RedisServer  # noqa: E402
from helpers import info_field  # noqa: E402

KINDS = ("TF", "TORCH", "ONNX")
BACKEND_DIRS = {"TF": "tensorflow", "TORCH": "torch", "ONNX": "onnxruntime"}
CLIENTS = (1, 4, 16, 32, 64)
KB = 1024
MB = 1024 * KB
BLOB_SIZES = (1 * KB, 64 * KB, 1 * MB, 16 * MB, 64 * MB)


class Plan:
    """Loop counts and durations: full, or --quick (a few minutes for all three backends)."""

    def __init__(self, quick: bool) -> None:
        self.quick = quick
        self.rounds = 2 if quick else 3          # alternating floor / server rounds
        self.latency_requests = 1000 if quick else 4000  # per command, 1 client
        self.floor_iters = 2000 if quick else 5000
        self.sweep_seconds = 1.0 if quick else 3.0
        self.target_seconds = 1.5 if quick else 4.0

    def blob_requests(self, size: int) -> int:
        # 64 MB: 32 of each (16 gave +-5% from run to run on this machine)
        n = max(32, min(2000, (2048 * MB) // size))
        return max(10, n // 4) if self.quick else n


# --------------------------------------------------------------------------------------

class Backend:
    """One backend's server, its stored models and the commands of each."""

    def __init__(self, kind: str, install: pathlib.Path, manifest: dict[str, Any],
                 load_exe: pathlib.Path, floor_exe: pathlib.Path, work: pathlib.Path,
                 extra_args: Sequence[str] = (),
                 base_args: Sequence[str] = ("THREADS_PER_QUEUE", "1"),
                 module: pathlib.Path | None = None, backend: pathlib.Path | None = None) -> None:
        """extra_args: more module arguments (bench_threads.py: its settings); base_args: the
        arguments before them, THREADS_PER_QUEUE 1 (one worker, no helper) unless replaced
        (bench_threads.py gives none: its defaults are the module's). module, backend: another
        module and its backend than install's (bench_threads.py's peer, bench/peer.py)."""
        self.kind = kind
        self.so = backend or backend_file(install, BACKEND_DIRS[kind])
        self.srv = RedisServer(module or install / "redisai.so",
                               [kind, str(self.so), *base_args, *extra_args])
        self.client = base.Client(self.srv.port)
        self.load = floor_tools.Load(load_exe, self.srv.port, work)
        self.cmds: dict[str, bytes] = {}
        self.floors: dict[str, floor_tools.Floor] = {}
        self.entries: dict[str, dict[str, Any]] = {}
        for model in ("trivial", "cnn"):
            entry = manifest[model][kind]
            self.entries[model] = entry
            self._store(model, entry)
            self.floors[model] = floor_tools.Floor(floor_exe, self.so, kind, entry)

    def _store(self, model: str, entry: dict[str, Any]) -> None:
        c = self.client
        key = f"{model}_m"
        io: list[Any] = []
        if entry["named"]:
            io = ["INPUTS", len(entry["inputs"]), *[i["name"] for i in entry["inputs"]],
                  "OUTPUTS", len(entry["outputs"]), *entry["outputs"]]
        blob = pathlib.Path(entry["blob"]).read_bytes()
        c.call("AI.MODELSTORE", key, self.kind, "CPU", *io, "BLOB", blob)
        ins = []
        for n, i in enumerate(entry["inputs"]):
            tkey = f"{model}_in{n}"
            c.call("AI.TENSORSET", tkey, i["dtype"], *i["shape"], "BLOB",
                   pathlib.Path(i["file"]).read_bytes())
            ins.append(tkey)
        self.cmds[model] = floor_tools.resp("AI.MODELEXECUTE", key, "INPUTS", len(ins), *ins,
                                            "OUTPUTS", 1, f"{model}_out")

    def check_output(self, model: str) -> None:
        entry = self.entries[model]
        got = np.frombuffer(bytes(self.client.call("AI.TENSORGET", f"{model}_out", "BLOB")),
                            np.float32)
        want = np.fromfile(entry["expected"], np.float32)
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5,
                                   err_msg=f"{self.kind} {model}: server output differs")

    def check_floor_output(self, model: str, work: pathlib.Path) -> None:
        dump = work / f"floor_{self.kind}_{model}.out"
        self.floors[model].run(iters=1, warmup=0, dump=dump)
        got = np.fromfile(dump, np.float32)
        want = np.fromfile(self.entries[model]["expected"], np.float32)
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5,
                                   err_msg=f"{self.kind} {model}: rai_floor output differs")

    def info_count(self, field: str) -> int:
        """One of INFO's counters (0 on a tree without it)."""
        value = info_field(bytes(self.client.call("INFO", "MODULES")), field)
        return int(value) if value is not None else 0

    def info_counts(self, fields: Sequence[str]) -> dict[str, int | None]:
        """Several of INFO's counters from one INFO; None for one the server lacks (an older
        tree, RedisAI 1.2.7)."""
        text = bytes(self.client.call("INFO", "MODULES"))
        values = {f: info_field(text, f) for f in fields}
        return {f: int(v) if v is not None else None for f, v in values.items()}

    def inline_runs(self) -> int:
        """INFO's count of runs answered on the main thread (0 on a tree without it)."""
        return self.info_count("ai_inline_runs")

    def stop(self) -> None:
        base.stop_checked(self.client, self.srv, self.kind)


PING = floor_tools.resp("PING")


def bench_backend(b: Backend, plan: Plan, work: pathlib.Path) -> dict[str, Any]:
    out: dict[str, Any] = {"kind": b.kind}
    for model in ("trivial", "cnn"):
        b.check_floor_output(model, work)
        b.load.run([b.cmds[model]], requests=5, warmup=50)  # first runs: sessions, pools
        b.check_output(model)

    # 1 client: PING and the model interleaved on one connection; rai_floor in between.
    for model in ("trivial", "cnn"):
        rounds = []
        for _ in range(plan.rounds):
            fl = b.floors[model].run(plan.floor_iters)
            inline0 = b.inline_runs()
            ping, run = b.load.run([PING, b.cmds[model]], requests=plan.latency_requests,
                                   warmup=100)
            run["inline_runs"] = b.inline_runs() - inline0
            run["sent"] = run["count"] + 100 // 2  # warm-up round trips alternate PING / EXEC
            rounds.append({"floor": fl, "ping": ping, "run": run})
        out[f"{model}_1client"] = {
            "rounds": rounds,
            "ping_p50_us": base.med([r["ping"]["p50_us"] for r in rounds]),
            "run_p50_us": base.med([r["run"]["p50_us"] for r in rounds]),
            "run_p99_us": base.med([r["run"]["p99_us"] for r in rounds]),
            "floor_p50_us": base.med([r["floor"]["p50_us"] for r in rounds]),
            "floor_p99_us": base.med([r["floor"]["p99_us"] for r in rounds]),
            "floor_rps": base.med([r["floor"]["rps"] for r in rounds]),
        }

    # 32 clients on the CNN against the floor's single-thread throughput, alternating.
    rounds = []
    for _ in range(plan.rounds):
        fl = b.floors["cnn"].run(plan.floor_iters)
        inline0 = b.inline_runs()
        (run,) = b.load.run([b.cmds["cnn"]], clients=32, seconds=plan.target_seconds, warmup=20)
        run["inline_runs"] = b.inline_runs() - inline0
        run["sent"] = run["count"] + 32 * 20  # and the warm-up round trips
        rounds.append({"floor": fl, "run": run})
    out["cnn_32clients"] = {
        "rounds": rounds,
        "rps": base.med([r["run"]["rps"] for r in rounds]),
        "floor_rps": base.med([r["floor"]["rps"] for r in rounds]),
    }

    # The sweep for the pictures: PING and each model at 1..64 clients.
    sweep: dict[str, list[dict[str, Any]]] = {"ping": [], "trivial": [], "cnn": []}
    for clients in CLIENTS:
        for name in sweep:
            cmd = PING if name == "ping" else b.cmds[name]
            (res,) = b.load.run([cmd], clients=clients, seconds=plan.sweep_seconds, warmup=10)
            sweep[name].append(res)
    out["sweep"] = sweep
    for model in ("trivial", "cnn"):
        b.check_output(model)
    return out


def bench_blobs(load: floor_tools.Load, client: base.Client, plan: Plan) -> list[dict[str, Any]]:
    """SET, TENSORSET, GET, TENSORGET of the same bytes, interleaved on one connection."""
    rows = []
    rng = np.random.default_rng(1)
    for size in BLOB_SIZES:
        data = rng.integers(0, 256, size, dtype=np.uint8).tobytes()
        cmds = [floor_tools.resp("SET", "s", data),
                floor_tools.resp("AI.TENSORSET", "t", "UINT8", size, "BLOB", data),
                floor_tools.resp("GET", "s"),
                floor_tools.resp("AI.TENSORGET", "t", "BLOB")]
        n = plan.blob_requests(size)
        res = load.run(cmds, requests=n, warmup=min(20, n))
        load.forget()
        got = client.call("AI.TENSORGET", "t", "BLOB")
        assert bytes(got) == data, f"TENSORGET BLOB of {size} bytes returned other bytes"
        client.call("DEL", "s", "t")
        row: dict[str, Any] = {"size": size, "requests": n}
        for name, r in zip(("SET", "TENSORSET", "GET", "TENSORGET"), res):
            row[name] = r
        row["tensorset_vs_set"] = res[0]["p50_us"] / res[1]["p50_us"]  # throughput ratio
        row["tensorget_vs_get"] = res[2]["p50_us"] / res[3]["p50_us"]
        rows.append(row)
    return rows


# --------------------------------------------------------------------------------------

# Where the targets are explained: printed with them, so that a reader can look them up.
TARGETS_DOC = "docs/performance.md#targets"


def targets(results: dict[str, Any]) -> list[tuple[str, float, str, float]]:
    """(figure, value, op, target) for every target against a floor (TARGETS_DOC)."""
    rows = []
    for kind, r in results["backends"].items():
        c1 = r["cnn_1client"]
        rows.append((f"{kind} CNN, 1 client: p50 / (PING p50 + in-process p50)",
                     c1["run_p50_us"] / (c1["ping_p50_us"] + c1["floor_p50_us"]), "<=", 1.10))
        t1 = r["trivial_1client"]
        rows.append((f"{kind} 2x2, 1 client: p50 / PING p50",
                     t1["run_p50_us"] / t1["ping_p50_us"], "<=", 1.20))
        c32 = r["cnn_32clients"]
        rows.append((f"{kind} CNN, 32 clients: req/s / in-process req/s",
                     c32["rps"] / c32["floor_rps"], ">=", 0.85))
    for row in results.get("blobs", []):
        size = row["size"]
        human = f"{size // MB} MB" if size >= MB else f"{size // KB} KB"
        rows.append((f"TENSORSET BLOB {human}: throughput / SET's", row["tensorset_vs_set"], ">=",
                     0.95))
        rows.append((f"TENSORGET BLOB {human}: throughput / GET's", row["tensorget_vs_get"], ">=",
                     0.95))
    return rows


def met(value: float, op: str, target: float) -> bool:
    shown = round(value, 2)  # judged as printed: 1.104x reads 1.10x, and meets <= 1.10x
    return shown <= target if op == "<=" else shown >= target


def target_lines(results: dict[str, Any]) -> list[str]:
    """The targets as printed: the figure, its value, the target and whether it is met."""
    lines = [f"Targets ({TARGETS_DOC}): each figure against its floor"]
    for name, val, op, target in targets(results):
        lines.append(f"  {name:<56} {val:6.2f}x  target {op} {target:.2f}x  "
                     f"{'met' if met(val, op, target) else 'missed'}")
    return lines


def inline_share(rounds: list[dict[str, Any]]) -> str:
    done = sum(r["run"].get("sent", r["run"]["count"]) for r in rounds)
    inline = sum(r["run"].get("inline_runs", 0) for r in rounds)
    return f"{100.0 * inline / done:.0f}%" if done else "-"


def print_report(results: dict[str, Any]) -> None:
    print()
    print("1 client, p50 (us): PING and MODELEXECUTE interleaved; floor = rai_floor in-process")
    print(f"  {'backend':<6} {'model':<8} | {'PING':>7} {'EXEC':>8} {'EXEC p99':>9} | "
          f"{'floor':>7} {'floor p99':>9} | {'EXEC-PING-floor':>15} {'inline':>7}")
    for kind, r in results["backends"].items():
        for model in ("trivial", "cnn"):
            m = r[f"{model}_1client"]
            over = m["run_p50_us"] - m["ping_p50_us"] - m["floor_p50_us"]
            print(f"  {kind:<6} {model:<8} | {m['ping_p50_us']:7.1f} {m['run_p50_us']:8.1f} "
                  f"{m['run_p99_us']:9.1f} | {m['floor_p50_us']:7.1f} {m['floor_p99_us']:9.1f} | "
                  f"{over:15.1f} {inline_share(m['rounds']):>7}")
    print("  (inline: share of the MODELEXECUTEs answered on the main thread, INFO's "
          "ai_inline_runs)")
    for kind, r in results["backends"].items():
        print(f"  {kind} CNN at 32 clients: {inline_share(r['cnn_32clients']['rounds'])} inline")
    print()
    print("Throughput (req/s) and p50 latency (us) against clients")
    header = "".join(f" {c:>14}" for c in CLIENTS)
    print(f"  {'backend':<6} {'what':<8} |{header}")
    for kind, r in results["backends"].items():
        for name, rows in r["sweep"].items():
            cells = "".join(f" {x['rps']:7.0f}/{x['p50_us']:6.0f}" for x in rows)
            print(f"  {kind:<6} {name:<8} |{cells}")
        print(f"  {kind:<6} {'floor':<8} | cnn {r['cnn_1client']['floor_rps']:.0f} req/s, "
              f"trivial {r['trivial_1client']['floor_rps']:.0f} req/s (one thread, in-process)")
    if results.get("blobs"):
        print()
        print("BLOB vs plain strings, one connection, p50 (us)")
        print(f"  {'size':>6} {'n':>5} | {'SET':>9} {'TENSORSET':>9} {'ratio':>6} | "
              f"{'GET':>9} {'TENSORGET':>9} {'ratio':>6}")
        for row in results["blobs"]:
            size = row["size"]
            human = f"{size // MB}M" if size >= MB else f"{size // KB}K"
            print(f"  {human:>6} {row['requests']:>5} | {row['SET']['p50_us']:9.1f} "
                  f"{row['TENSORSET']['p50_us']:9.1f} {row['tensorset_vs_set']:6.2f} | "
                  f"{row['GET']['p50_us']:9.1f} {row['TENSORGET']['p50_us']:9.1f} "
                  f"{row['tensorget_vs_get']:6.2f}")
    print()
    print("\n".join(target_lines(results)))


def print_comparison(runs: dict[str, dict[str, Any]]) -> None:
    """The targets of every variant side by side."""
    labels = list(runs)
    table = {label: targets(run) for label, run in runs.items()}
    print()
    print(f"Targets ({TARGETS_DOC}), " + " vs ".join(labels))
    head = "".join(f" {lab[:10]:>10}" for lab in labels)
    print(f"  {'':<56}{head}   target")
    for i, (name, _, op, target) in enumerate(table[labels[0]]):
        cells = "".join(f" {table[lab][i][1]:9.2f}x" for lab in labels)
        print(f"  {name:<56}{cells}   {op} {target:.2f}x")
    print()
    print("Figures, " + " vs ".join(labels) + " (us, req/s)")
    print(f"  {'':<56}{head}")
    for kind in runs[labels[0]]["backends"]:
        rows = [
            ("PING p50, 1 client", lambda r: r["cnn_1client"]["ping_p50_us"]),
            ("trivial EXEC p50, 1 client", lambda r: r["trivial_1client"]["run_p50_us"]),
            ("trivial floor p50", lambda r: r["trivial_1client"]["floor_p50_us"]),
            ("CNN EXEC p50, 1 client", lambda r: r["cnn_1client"]["run_p50_us"]),
            ("CNN floor p50", lambda r: r["cnn_1client"]["floor_p50_us"]),
            ("CNN req/s, 32 clients", lambda r: r["cnn_32clients"]["rps"]),
            ("CNN floor req/s (1 thread)", lambda r: r["cnn_32clients"]["floor_rps"]),
        ]
        for name, get in rows:
            cells = "".join(f" {get(runs[lab]['backends'][kind]):10.1f}" for lab in labels)
            print(f"  {kind + ' ' + name:<56}{cells}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--install", action="append", default=[], metavar="[LABEL=]DIR",
                    help="install tree (default: newest install/redisai-*/); repeat with labels "
                         "(before=DIR --install after=DIR) to measure several trees in one run, "
                         "backend by backend, alternating")
    ap.add_argument("--build", default=str(HERE.parent / "build"), help="configured build folder")
    ap.add_argument("--quick", action="store_true", help="fewer iterations, shorter runs")
    ap.add_argument("--kinds", default=",".join(KINDS), help="backends, comma-separated")
    ap.add_argument("--no-blobs", action="store_true", help="skip TENSORSET/TENSORGET vs SET/GET")
    base.add_out_option(ap, "the result JSON and its pictures")
    opts = ap.parse_args()

    t_start = time.perf_counter()
    plan = Plan(opts.quick)
    variants = base.parse_installs(opts.install)
    floor_exe, load_exe = floor_tools.build(pathlib.Path(opts.build))
    kinds = [k.strip().upper() for k in opts.kinds.split(",") if k.strip()]
    work = pathlib.Path(tempfile.mkdtemp(prefix="bench-floor-"))
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    runs: dict[str, dict[str, Any]] = {
        label: {"timestamp": stamp, "label": label, "quick": opts.quick, "install": str(inst),
                "cores": os.cpu_count(), "backends": {}}
        for label, inst in variants}
    loadavg_start = os.getloadavg()
    try:
        print("building the models with the frameworks (child process) ...", flush=True)
        subprocess.run([sys.executable, str(HERE / "floor_models.py"), str(work / "models")],
                       check=True)
        manifest = json.loads((work / "models" / "manifest.json").read_text())
        for kind in kinds:
            for label, inst in variants:
                print(f"{kind} {label}: measuring ...", flush=True)
                run = runs[label]
                run["versions"] = manifest["versions"]
                b = Backend(kind, inst, manifest, load_exe, floor_exe, work)
                try:
                    run["backends"][kind] = bench_backend(b, plan, work)
                finally:
                    b.stop()
        if not opts.no_blobs:
            kind = kinds[0]
            for label, inst in variants:
                print(f"BLOB vs SET/GET {label}: measuring ...", flush=True)
                b = Backend(kind, inst, manifest, load_exe, floor_exe, work)
                try:
                    runs[label]["blobs"] = bench_blobs(b.load, b.client, plan)
                finally:
                    b.stop()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    for run in runs.values():
        run["loadavg"] = [loadavg_start, os.getloadavg()]
        run["targets"] = [{"name": n, "value": v, "op": op, "target": t, "met": met(v, op, t)}
                          for n, v, op, t in targets(run)]
        if len(runs) > 1:
            print(f"\n===== {run['label']}: {run['install']}")
        print_report(run)
    if len(runs) > 1:
        print_comparison(runs)

    out = opts.out
    doc: dict[str, Any] = next(iter(runs.values())) if len(runs) == 1 else {
        "timestamp": stamp, "runs": runs}
    print()
    base.write_result(out, stamp, doc)  # with the machine's facts
    import floor_plot  # noqa: PLC0415  (matplotlib: only now)

    last = list(runs.values())[-1]
    png = base.wrote(floor_plot.draw(last, out / f"{stamp}.png"))
    base.wrote(pathlib.Path(shutil.copyfile(png, out / "latest.png")))
    if len(runs) > 1:
        print(f"(the pictures are of '{last['label']}')")
    print(f"total {time.perf_counter() - t_start:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
