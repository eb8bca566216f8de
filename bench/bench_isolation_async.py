"""Isolated runs in flight against in-process (rai_load): 1 and 32 clients, the ring against the socket.

Isolated runs in flight (a benchmark, not a test): isolated vs in-process, in one run, with
one client program.

Four servers from the same install tree, all `THREADS_PER_QUEUE 1`, TORCH and ONNX loaded:

* `in-process`: the backends in Redis;
* `isolated`: `ISOLATE TORCH ISOLATE ONNX`, runs in flight (a worker hands up to 8 runs to its
  host and takes the next request at once: docs/isolation.md "Runs in flight"), messages
  through each channel's shared-memory ring, the worker woken by its oldest run's answer
  ("The ring");
* `isolated-socket`: the same with `REDISAI_ISOLATED_RING=0 REDISAI_ISOLATED_IN_FLIGHT=4` in
  its environment: every message through the channel's socket, at most 4 runs in flight, the
  worker woken for each answer: the isolated runs as they were before the ring;
* `isolated-wait`: with `REDISAI_ISOLATED_IN_FLIGHT=0 REDISAI_ISOLATED_RING=0`: the worker
  waits for each run over the socket, as before runs could be in flight.

Measured with bench/floor/rai_load.c (a C closed-loop client), the models of
bench/floor_models.py, in `--rounds` (>= 3) alternating rounds, the servers' order rotating
each round:

1. the MNIST-sized CNN (TORCH, ONNX) at 32 clients: runs per second; ratio to in-process per
   round (target: isolated >= 0.9x);
2. the trivial 2x2 model (TORCH, ONNX) at 1 client, PING interleaved on the connection: p50;
   overhead = isolated p50 - in-process p50 per round (target: <= 30 us). With
   `INLINE_RUN_MAX_US` set, in-process runs of the trivial model are answered on the main
   thread, which isolated runs never are (a host that hangs must not hold Redis's main
   thread), so the in-process server is measured a second time with `INLINE_RUN_MAX_US 0`
   (`in-process-queued`: every run through its run queue; at the default, 0, the same code).

Every server's output is compared with the framework's own result. Writes
<out>/isolation-async-<UTC timestamp>.json (--out DIR; by default a folder outside the
repository, bench/README.md) and prints medians and ranges.

    bench/run isolation_async [--install DIR] [--build DIR] [--rounds 3]
        [--seconds 4] [--requests 4000] [--sweep 1,2,4,8]

With --sweep, the CNN is also measured at each of those client counts, every round, and the
ratios to in-process are printed and written per count.
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
from typing import Any

import numpy as np

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import bench as base  # noqa: E402  (Client, find_install; puts tests/support/ on sys.path)
import floor_tools  # noqa: E402
from paths import backend_file  # noqa: E402
from redis_server import RedisServer  # noqa: E402

KINDS = ("TORCH", "ONNX")
BACKEND_DIRS = {"TORCH": "torch", "ONNX": "onnxruntime"}
SERVERS = ("in-process", "isolated", "isolated-socket", "isolated-wait")
ISOLATED = SERVERS[1:]
PING = floor_tools.resp("PING")


def _children(pid: int) -> list[int]:
    out: list[int] = []
    for task in pathlib.Path(f"/proc/{pid}/task").iterdir():
        try:
            out += [int(c) for c in (task / "children").read_text().split()]
        except OSError:
            pass
    return out


def _cpu_s(pid: int) -> float:
    """User + system CPU seconds of redis-server and its children (the backend hosts)."""
    ticks = 0
    for p in [pid, *_children(pid)]:
        try:
            fields = pathlib.Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        ticks += int(fields[11]) + int(fields[12])
    return ticks / os.sysconf("SC_CLK_TCK")


class Server:
    """One server with both kinds' trivial and CNN models stored, and their commands."""

    def __init__(self, label: str, install: pathlib.Path, manifest: dict[str, Any],
                 load_exe: pathlib.Path, work: pathlib.Path) -> None:
        self.label = label
        args: list[str] = []
        for kind in KINDS:
            args += [kind, str(backend_file(install, BACKEND_DIRS[kind]))]
        if label != "in-process":
            args = ["ISOLATE", "TORCH", "ISOLATE", "ONNX", *args]
        args += ["THREADS_PER_QUEUE", "1"]
        env = dict(os.environ)
        env.pop("REDISAI_ISOLATED_IN_FLIGHT", None)
        env.pop("REDISAI_ISOLATED_RING", None)
        if label == "isolated-wait":
            env["REDISAI_ISOLATED_IN_FLIGHT"] = "0"
        if label == "isolated-socket":
            env["REDISAI_ISOLATED_IN_FLIGHT"] = "4"
        if label in ("isolated-socket", "isolated-wait"):
            env["REDISAI_ISOLATED_RING"] = "0"
        self.srv = RedisServer(install / "redisai.so", args, env=env)
        self.client = base.Client(self.srv.port)
        self.load = floor_tools.Load(load_exe, self.srv.port, work / label)
        (work / label).mkdir()
        self.cmds: dict[tuple[str, str], bytes] = {}
        self.expected: dict[tuple[str, str], np.ndarray] = {}
        for model in ("trivial", "cnn"):
            for kind in KINDS:
                self._store(model, kind, manifest[model][kind])

    def _store(self, model: str, kind: str, entry: dict[str, Any]) -> None:
        c = self.client
        key = f"{model}_{kind}"
        blob = pathlib.Path(entry["blob"]).read_bytes()
        c.call("AI.MODELSTORE", key, kind, "CPU", "BLOB", blob)
        ins = []
        for n, i in enumerate(entry["inputs"]):
            tkey = f"{key}_in{n}"
            c.call("AI.TENSORSET", tkey, i["dtype"], *i["shape"], "BLOB",
                   pathlib.Path(i["file"]).read_bytes())
            ins.append(tkey)
        self.cmds[(model, kind)] = floor_tools.resp("AI.MODELEXECUTE", key, "INPUTS", len(ins),
                                                    *ins, "OUTPUTS", 1, f"{key}_out")
        self.expected[(model, kind)] = np.fromfile(entry["expected"], np.float32)

    def check(self, model: str, kind: str) -> None:
        got = np.frombuffer(bytes(self.client.call("AI.TENSORGET", f"{model}_{kind}_out",
                                                   "BLOB")), np.float32)
        np.testing.assert_allclose(got, self.expected[(model, kind)], rtol=1e-4, atol=1e-5,
                                   err_msg=f"{self.label} {kind} {model}: output differs")

    def stop(self) -> None:
        base.stop_checked(self.client, self.srv, self.label)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--install")
    ap.add_argument("--build", default=str(HERE.parent / "build"), help="configured build folder")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=4.0, help="per 32-client measurement")
    ap.add_argument("--requests", type=int, default=4000, help="per 1-client measurement")
    ap.add_argument("--sweep", default="",
                    help="more client counts for the CNN cell, e.g. 1,2,4,8 (ratios per count)")
    base.add_out_option(ap)
    opts = ap.parse_args()
    if opts.rounds < 3:
        raise SystemExit("--rounds: at least 3")
    sweep = [int(x) for x in opts.sweep.split(",") if x]
    install = base.find_install(opts.install)
    _floor_exe, load_exe = floor_tools.build(pathlib.Path(opts.build))
    work = pathlib.Path(tempfile.mkdtemp(prefix="bench-iso-async-"))
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    rounds: list[dict[str, Any]] = []
    loadavg_start = os.getloadavg()
    servers: dict[str, Server] = {}
    try:
        print("building the models with the frameworks (child process) ...", flush=True)
        subprocess.run([sys.executable, str(HERE / "floor_models.py"), str(work / "models")],
                       check=True)
        manifest = json.loads((work / "models" / "manifest.json").read_text())
        for label in SERVERS:
            servers[label] = Server(label, install, manifest, load_exe, work)
        default_inline = int(servers["in-process"].client.call("AI.CONFIG", "GET",
                                                               "INLINE_RUN_MAX_US"))
        for s in servers.values():  # warm up, and every output checked once
            for (model, kind), cmd in s.cmds.items():
                s.load.run([cmd], clients=4, requests=200, warmup=20)
                s.check(model, kind)
        for r in range(opts.rounds):
            order = SERVERS[r % len(SERVERS):] + SERVERS[:r % len(SERVERS)]
            rnd: dict[str, Any] = {"order": list(order), "cnn_32": {}, "trivial_1": {},
                                   "cnn_sweep": {}}
            for kind in KINDS:
                rnd["cnn_32"][kind] = {}
                for label in order:
                    s = servers[label]
                    cpu0 = _cpu_s(s.srv.proc.pid)
                    res = s.load.run([s.cmds[("cnn", kind)]], clients=32, seconds=opts.seconds,
                                     warmup=10)
                    cpu = _cpu_s(s.srv.proc.pid) - cpu0
                    res[0]["server_cpu_us_per_request"] = cpu * 1e6 / max(1, res[0]["count"])
                    rnd["cnn_32"][kind][label] = res[0]
                    s.check("cnn", kind)
                    print(f"round {r + 1} CNN {kind:5} 32 clients {label:15} "
                          f"{res[0]['rps']:8.0f}/s, server CPU "
                          f"{res[0]['server_cpu_us_per_request']:5.1f} us/request", flush=True)
            for kind in KINDS:
                rnd["cnn_sweep"][kind] = {}
                for n in sweep:
                    rnd["cnn_sweep"][kind][str(n)] = {}
                    for label in order:
                        s = servers[label]
                        res = s.load.run([s.cmds[("cnn", kind)]], clients=n,
                                         seconds=opts.seconds, warmup=10)
                        rnd["cnn_sweep"][kind][str(n)][label] = res[0]
                        print(f"round {r + 1} CNN {kind:5} {n:2} clients {label:15} "
                              f"{res[0]['rps']:8.0f}/s", flush=True)
            for kind in KINDS:
                rnd["trivial_1"][kind] = {}
                for label in order:
                    s = servers[label]
                    variants = [(label, None)]
                    if label == "in-process":
                        variants.append(("in-process-queued", 0))
                    for shown, inline in variants:
                        if inline is not None:
                            s.client.call("AI.CONFIG", "INLINE_RUN_MAX_US", inline)
                        run, ping = s.load.run([s.cmds[("trivial", kind)], PING], clients=1,
                                               requests=opts.requests, warmup=200)
                        if inline is not None:
                            s.client.call("AI.CONFIG", "INLINE_RUN_MAX_US", default_inline)
                        rnd["trivial_1"][kind][shown] = {"run": run, "ping": ping}
                        s.check("trivial", kind)
                        print(f"round {r + 1} trivial {kind:5} 1 client {shown:17} p50 "
                              f"{run['p50_us']:7.1f} us (PING {ping['p50_us']:5.1f} us)",
                              flush=True)
            rounds.append(rnd)
    finally:
        for s in servers.values():
            s.stop()
        shutil.rmtree(work, ignore_errors=True)

    summary: dict[str, Any] = {"cnn_32_ratio": {}, "cnn_32_rps": {}, "trivial_p50_us": {},
                               "trivial_overhead_us": {}}
    print(f"\n# medians over {opts.rounds} alternating rounds [min .. max]")
    for kind in KINDS:
        rps = {lab: [rd["cnn_32"][kind][lab]["rps"] for rd in rounds] for lab in SERVERS}
        summary["cnn_32_rps"][kind] = {lab: base.med(v) for lab, v in rps.items()}
        summary["cnn_32_ratio"][kind] = {}
        for lab in ISOLATED:
            ratios = [a / b for a, b in zip(rps[lab], rps["in-process"])]
            summary["cnn_32_ratio"][kind][lab] = {"median": base.med(ratios), "min": min(ratios),
                                                  "max": max(ratios)}
            print(f"CNN {kind:5} 32 clients  {lab:15}/in-process {base.med(ratios):.3f} "
                  f"[{min(ratios):.3f} .. {max(ratios):.3f}]  ({base.med(rps[lab]):.0f}/s vs "
                  f"{base.med(rps['in-process']):.0f}/s)")
        cpu = {lab: base.med([rd["cnn_32"][kind][lab]["server_cpu_us_per_request"]
                              for rd in rounds]) for lab in SERVERS}
        summary.setdefault("cnn_32_server_cpu_us_per_request", {})[kind] = cpu
        print(f"CNN {kind:5} 32 clients  server CPU us/request (redis-server + hosts): "
              + ", ".join(f"{lab} {v:.1f}" for lab, v in cpu.items()))
    summary["cnn_sweep_ratio"] = {}
    for kind in KINDS:
        summary["cnn_sweep_ratio"][kind] = {}
        for n in sweep:
            rps = {lab: [rd["cnn_sweep"][kind][str(n)][lab]["rps"] for rd in rounds]
                   for lab in SERVERS}
            summary["cnn_sweep_ratio"][kind][str(n)] = {
                lab: base.med([a / b for a, b in zip(rps[lab], rps["in-process"])])
                for lab in ISOLATED}
            print(f"CNN {kind:5} {n:2} clients  isolated / in-process: " + ", ".join(
                f"{lab} {v:.2f}" for lab, v in summary["cnn_sweep_ratio"][kind][str(n)].items())
                + f"  (in-process {base.med(rps['in-process']):.0f}/s)")
    for kind in KINDS:
        p50 = {lab: [rd["trivial_1"][kind][lab]["run"]["p50_us"] for rd in rounds]
               for lab in (*SERVERS, "in-process-queued")}
        summary["trivial_p50_us"][kind] = {lab: base.med(v) for lab, v in p50.items()}
        summary["trivial_overhead_us"][kind] = {}
        for base_lab in ("in-process", "in-process-queued"):
            for lab in ISOLATED:
                over = [a - b for a, b in zip(p50[lab], p50[base_lab])]
                summary["trivial_overhead_us"][kind][f"{lab} - {base_lab}"] = {
                    "median": base.med(over), "min": min(over), "max": max(over)}
                print(f"trivial {kind:5} 1 client p50 {lab:15} - {base_lab:17} "
                      f"{base.med(over):6.1f} us [{min(over):.1f} .. {max(over):.1f}]  "
                      f"({base_lab} p50 {base.med(p50[base_lab]):.1f} us)")
    doc = {"timestamp": stamp, "install": str(install), "cores": os.cpu_count(),
           "rounds": rounds, "summary": summary, "loadavg": [loadavg_start, os.getloadavg()],
           "settings": {"THREADS_PER_QUEUE": 1, "seconds": opts.seconds,
                        "requests": opts.requests, "clients_cnn": 32, "sweep": sweep}}
    path = base.write_result(opts.out, f"isolation-async-{stamp}", doc)
    return 0


if __name__ == "__main__":
    sys.exit(main())
