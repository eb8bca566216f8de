#!/usr/bin/env python3
"""Scaling out on Redis Cluster: 1-3 shards' throughput and CPU per request, and MIGRATE of a 100 MiB model.

Scaling out on Redis Cluster (docs/cluster.md, "Scaling out"): throughput and CPU per
request with 1, 2 and 3 shards, and what a MIGRATE of a large model costs the source.

Part `scale`: per shard count N (and a standalone server, the baseline), a cluster of N
masters on this machine, every node with the module and one backend (default ONNX), the
2x2 model and the MNIST-sized CNN of bench/floor_models.py stored once per shard under the
shard's hash tag with its inputs. One rai_load per shard (bench/floor/rai_load.c, C, one
thread, `--clients` connections) sends AI.MODELEXECUTE straight to the shard's master, as a
cluster client does once it knows the slots; all shards at once. Per cell: requests/s of
each shard and together, and each node's CPU seconds per request (all its threads, from
/proc/<pid>/task/*/schedstat). On this 2-core machine the sum cannot grow with N: the figure
that carries over is CPU per request per node, and the projection for N machines is N times
one node's throughput (a request touches one node; the cluster adds a redirect only when a
client's slot map is stale).

Part `migrate`: a 2-master cluster; a `--mib` MiB ONNX model (tests/support/cluster_load.py)
and a STRING of the same size, each moved from one master to the other and back `--reps`
times with CLUSTER SETSLOT + MIGRATE, alternating. Per move: the MIGRATE's time, and the
longest time the source, then the target, left a PING unanswered meanwhile (a pinger thread
per node).

    bench/run scaleout [--part scale|migrate|all]
        [--kind ONNX] [--clients 4] [--seconds 3] [--reps 3] [--mib 100] [--shards 1,2,3]

Writes <out>/scaleout-<stamp>.json (--out DIR; by default a folder outside the repository,
bench/README.md).
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import pathlib
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))
import bench as base  # noqa: E402  (puts tests/support/ on sys.path)
import floor_tools  # noqa: E402
from bench_threads import on_cpu_s  # noqa: E402
from cluster_load import big_gather_model  # noqa: E402
from cluster_nodes import begin_move, end_move, migrate_keys, start_cluster, tag_in  # noqa: E402
from redis.crc import key_slot  # noqa: E402
from redis_server import RedisServer  # noqa: E402
from resp import RawClient  # noqa: E402

from bench_floor import BACKEND_DIRS  # noqa: E402
from paths import backend_file  # noqa: E402

MODELS = ("trivial", "cnn")


def backend_so(install: pathlib.Path, kind: str) -> pathlib.Path:
    return backend_file(install, BACKEND_DIRS[kind])


# --- scale ---------------------------------------------------------------------------------

def store_shard(port: int, tag: str, kind: str, manifest: dict[str, Any]) -> dict[str, bytes]:
    """Stores both models with their inputs under {tag}; returns each model's command."""
    c = base.Client(port)
    cmds = {}
    for model in MODELS:
        entry = manifest[model][kind]
        io: list[Any] = []
        if entry["named"]:
            io = ["INPUTS", len(entry["inputs"]), *[i["name"] for i in entry["inputs"]],
                  "OUTPUTS", len(entry["outputs"]), *entry["outputs"]]
        key = f"{{{tag}}}{model}"
        c.call("AI.MODELSTORE", key, kind, "CPU", *io, "BLOB",
               pathlib.Path(entry["blob"]).read_bytes())
        ins = []
        for n, i in enumerate(entry["inputs"]):
            tkey = f"{{{tag}}}{model}_in{n}"
            c.call("AI.TENSORSET", tkey, i["dtype"], *i["shape"], "BLOB",
                   pathlib.Path(i["file"]).read_bytes())
            ins.append(tkey)
        cmds[model] = floor_tools.resp("AI.MODELEXECUTE", key, "INPUTS", len(ins), *ins,
                                       "OUTPUTS", 1, f"{{{tag}}}{model}_out")
    c.sock.close()
    return cmds


def drive(loads: list[floor_tools.Load], cmds: list[bytes], pids: list[int], clients: int,
          seconds: float) -> dict[str, Any]:
    """Runs one rai_load per node at once; per node rps and CPU ms per request."""
    cpu0 = [on_cpu_s(p)[0] for p in pids]
    with ThreadPoolExecutor(len(loads)) as ex:
        results = list(ex.map(lambda lc: lc[0].run([lc[1]], clients=clients, seconds=seconds,
                                                   warmup=20)[0], zip(loads, cmds)))
    cpu1 = [on_cpu_s(p)[0] for p in pids]
    nodes = []
    for r, a, b in zip(results, cpu0, cpu1):
        # rai_load reports rps over the measured window; CPU over the whole call
        n = r["count"] or 1
        nodes.append({"rps": round(r["rps"], 1), "p50_us": r["p50_us"],
                      "cpu_ms_per_req": round((b - a) * 1000 / n, 4)})
    return {"nodes": nodes, "rps_total": round(sum(n["rps"] for n in nodes), 1)}


def scale_cell(install: pathlib.Path, kind: str, shards: int, manifest: dict[str, Any],
               load_exe: pathlib.Path, work: pathlib.Path, clients: int,
               seconds: float) -> dict[str, Any]:
    so = backend_so(install, kind)
    args = [kind, str(so)]
    nodes: list[RedisServer] = []
    try:
        if shards == 0:  # standalone baseline
            nodes.append(RedisServer(install / "redisai.so", args))
            masters, tags = nodes, ["s0"]
        else:
            cl = start_cluster(install / "redisai.so", args, nodes, masters=shards)
            masters, tags = cl.masters, cl.tags
        cmds = [store_shard(m.port, t, kind, manifest) for m, t in zip(masters, tags)]
        loads = [floor_tools.Load(load_exe, m.port, work / f"n{i}")
                 for i, m in enumerate(masters)]
        for ld in loads:
            ld.workdir.mkdir(exist_ok=True)
        pids = [m.proc.pid for m in masters]
        out: dict[str, Any] = {}
        for model in MODELS:
            out[model] = drive(loads, [c[model] for c in cmds], pids, clients, seconds)
        for m in masters:
            assert m.alive(), m.log()[-2000:]
        return out
    finally:
        for n in nodes:
            n.stop()


def print_scale(cells: dict[str, dict[str, Any]]) -> None:
    print("\nscale-out (one rai_load per shard, straight to its master)")
    print(f"{'shards':>10} {'model':>8} {'rps total':>10} {'rps per node':>24} "
          f"{'CPU ms/req per node':>28} {'p50 us':>16}")
    for label, cell in cells.items():
        for model in MODELS:
            c = cell[model]
            per = ", ".join(f"{n['rps']:.0f}" for n in c["nodes"])
            cpu = ", ".join(f"{n['cpu_ms_per_req']:.3f}" for n in c["nodes"])
            p50 = ", ".join(f"{n['p50_us']:.0f}" for n in c["nodes"])
            print(f"{label:>10} {model:>8} {c['rps_total']:>10.0f} {per:>24} {cpu:>28} {p50:>16}")
    one = cells.get("1")
    if one:
        print("\nprojection (a request runs on one node, so N machines like this one serve N x one "
              "shard's rps; the CPU ceiling is the machine's cores over one request's CPU)")
        cores = os.cpu_count() or 1
        for model in MODELS:
            rps = one[model]["rps_total"]
            cpu = one[model]["nodes"][0]["cpu_ms_per_req"]
            print(f"  {model}: one shard {rps:.0f} rps, 3 machines {3 * rps:.0f}, 10 machines "
                  f"{10 * rps:.0f}; CPU ceiling {cores * 1000 / cpu:.0f} rps per {cores}-core "
                  f"machine at {cpu:.3f} CPU ms per request")


# --- migrate -------------------------------------------------------------------------------

class Pinger:
    """The longest a PING to a node waited, while running."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.worst = 0.0
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> "Pinger":
        self._t.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._t.join()

    def _run(self) -> None:
        with RawClient(self.port) as c:
            while not self._stop.is_set():
                t0 = time.perf_counter()
                c.execute("PING")
                self.worst = max(self.worst, time.perf_counter() - t0)
                time.sleep(0.002)


def migrate_part(install: pathlib.Path, mib: int, reps: int) -> dict[str, Any]:
    so = backend_so(install, "ONNX")
    nodes: list[RedisServer] = []
    blob = big_gather_model(mib)
    payload = os.urandom(len(blob))
    out: dict[str, list[dict[str, float]]] = {"model": [], "string": []}
    try:
        cl = start_cluster(install / "redisai.so", ["ONNX", str(so)], nodes, masters=2,
                           extra=["--proto-max-bulk-len", "1gb"])
        a, b = cl.masters
        tag_m, tag_s = "{" + cl.tags[0] + "}", "{" + tag_in(*cl.ranges[0], prefix="s") + "}"
        slot_m, slot_s = key_slot(tag_m.encode()), key_slot(tag_s.encode())
        assert slot_m != slot_s
        c = base.Client(a.port)
        c.call("AI.MODELSTORE", f"{tag_m}big", "ONNX", "CPU", "BLOB", blob)
        c.call("SET", f"{tag_s}str", payload)
        c.sock.close()
        where = {"model": a, "string": a}
        for _ in range(reps):
            for what, slot in (("model", slot_m), ("string", slot_s)):
                src = where[what]
                dst = b if src is a else a
                begin_move(src, dst, slot)
                with Pinger(src.port) as ps, Pinger(dst.port) as pd:
                    t0 = time.perf_counter()
                    assert migrate_keys(src, dst, slot, timeout_ms=120000) == 1
                    spent = time.perf_counter() - t0
                    time.sleep(0.3)  # the target may still be building the model
                end_move(cl.nodes, src, dst, slot)
                out[what].append({"migrate_s": round(spent, 3),
                                  "source_stall_s": round(ps.worst, 3),
                                  "target_stall_s": round(pd.worst, 3)})
                where[what] = dst
        for n in nodes:
            assert n.alive(), n.log()[-2000:]
        return {"mib": mib, "bytes": len(blob), "reps": reps, "moves": out}
    finally:
        for n in nodes:
            n.stop()


def print_migrate(m: dict[str, Any]) -> None:
    print(f"\nMIGRATE of a {m['mib']} MiB value between two masters, {m['reps']} moves each "
          "(median [min-max] s)")
    med = {}
    for what, moves in m["moves"].items():
        cols = []
        for f in ("migrate_s", "source_stall_s", "target_stall_s"):
            xs = [x[f] for x in moves]
            med[(what, f)] = statistics.median(xs)
            cols.append(f"{f} {statistics.median(xs):.3f} [{min(xs):.3f}-{max(xs):.3f}]")
        print(f"  {what:>6}: " + "; ".join(cols))
    print(f"  model/string source stall: "
          f"{med[('model', 'source_stall_s')] / max(med[('string', 'source_stall_s')], 1e-9):.2f}x")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--install", default=None, help="install tree (default: newest)")
    ap.add_argument("--build", default=str(HERE.parent / "build"))
    ap.add_argument("--part", choices=("scale", "migrate", "all"), default="all")
    ap.add_argument("--kind", default="ONNX", choices=sorted(BACKEND_DIRS))
    ap.add_argument("--clients", type=int, default=4, help="connections per shard")
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--shards", default="0,1,2,3", help="0 is a standalone server")
    ap.add_argument("--mib", type=int, default=100)
    ap.add_argument("--reps", type=int, default=3)
    base.add_out_option(ap)
    opts = ap.parse_args()
    install = base.find_install(opts.install).resolve()
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    doc: dict[str, Any] = {"timestamp": stamp, "install": str(install), "cores": os.cpu_count(),
                           "kind": opts.kind, "clients_per_shard": opts.clients,
                           "seconds": opts.seconds, "loadavg_start": os.getloadavg()}
    work = pathlib.Path(tempfile.mkdtemp(prefix="bench-scaleout-"))
    try:
        if opts.part in ("scale", "all"):
            _, load_exe = floor_tools.build(pathlib.Path(opts.build))
            print("building the models with the frameworks (child process) ...", flush=True)
            subprocess.run([sys.executable, str(HERE / "floor_models.py"), str(work / "models")],
                           check=True)
            manifest = json.loads((work / "models" / "manifest.json").read_text())
            cells = {}
            for n in (int(s) for s in opts.shards.split(",")):
                label = "standalone" if n == 0 else str(n)
                print(f"{label} shard(s): measuring ...", flush=True)
                cells[label] = scale_cell(install, opts.kind, n, manifest, load_exe, work,
                                          opts.clients, opts.seconds)
            doc["scale"] = cells
            print_scale(cells)
        if opts.part in ("migrate", "all"):
            print(f"MIGRATE of a {opts.mib} MiB model and string: measuring ...", flush=True)
            doc["migrate"] = migrate_part(install, opts.mib, opts.reps)
            print_migrate(doc["migrate"])
    finally:
        shutil.rmtree(work, ignore_errors=True)
    doc["loadavg_end"] = os.getloadavg()
    path = base.write_result(opts.out, f"scaleout-{stamp}", doc)
    return 0


if __name__ == "__main__":
    sys.exit(main())
