#!/usr/bin/env python3
"""Thread settings: defaults against fixed THREADS_PER_QUEUE x INTRA_OP_PARALLELISM (or any module arguments) and RedisAI 1.2.7, 1 to 32 clients.

Thread settings: the defaults against fixed thread settings, for one or more install trees,
in one run.

Per backend (TF, TORCH, ONNX) one redis-server per tree and setting, all up at once
(no batching): the defaults (no THREADS_PER_QUEUE or INTRA_OP_PARALLELISM: one worker and
a helper per queue, engine/run_queue.c, and the intra-op policy of
backends/common/backend_threads.h) and fixed settings (--fixed, default THREADS_PER_QUEUE x
INTRA_OP_PARALLELISM 1x1, 1x2 and 2x1), and with --peer PATH one more: RedisAI 1.2.7's
redisai.so at PATH with its backend found beside it (bench/peer.py), at its own defaults.
Each cell, the 2x2 model and the MNIST-sized CNN of bench/floor_models.py at 1, 8 and 32
clients, is measured on every server in turn, the order rotating from repetition to
repetition, so that trees, settings and the peer alternate at the finest grain and share the
machine's noise. The client is
bench/floor/rai_load.c (C, one thread, epoll). Prints per cell the median throughput of each
server and its range, the server's CPU per request (all its threads, and its main thread),
the share of requests a worker unblocked in pairs (INFO ai_unblocks_paired, trees before the
completion path) and the finished requests per worker unblock (ai_completions /
ai_completion_wakeups; n/a on a server without the counter), the ratio of each
tree's defaults to its best fixed setting, the ratio of every tree to the first one per
setting, and with a peer each tree's defaults and best fixed setting over RedisAI 1.2.7's
defaults; writes <out>/threads-<stamp>.json
(--out DIR; by default a folder outside the repository, bench/README.md).

    bench/run threads [--reps 3] [--kinds TF,TORCH,ONNX]
        [--install LABEL=DIR ...] [--tree-args LABEL="ARGS" ...] [--seconds 2]
        [--cells trivial:1,cnn:1,trivial:8,cnn:8,trivial:32,cnn:32] [--peer PATH]
        [--peer-backend KIND=PATH ...]

Without --install the newest install/redisai-*/ is measured alone (label "this"); with several,
the first given is the one the others are compared with (e.g. --install before=OLD
--install after=install/redisai-1.3.0). --peer PATH is a build of RedisAI 1.2.7 that you made
from its source at tag v1.2.7 against the same framework wheels; --markdown then adds its
column and the defaults' ratio to it.
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
import time
from typing import Any, Callable

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))  # build_tools, for tests/support/redis_server.py
import bench as base  # noqa: E402  (find_install; puts tests/support/ on sys.path)
import bench_floor  # noqa: E402
import floor_tools  # noqa: E402
import peer as peers  # noqa: E402
import ratios  # noqa: E402

CELLS = (("trivial", 1), ("cnn", 1), ("trivial", 8), ("cnn", 8), ("trivial", 32), ("cnn", 32))
# The module's INFO counters a measurement reads (absent on RedisAI 1.2.7 and older trees):
# runs answered on the main thread (INLINE_RUN_MAX_US); pairs of clients a worker unblocked
# together (engine/unblock_batch.c); finished requests and the worker unblocks that announced
# them; DAGs the queue's helper worker took (engine/run_queue.c). Warm-up included.
COUNTERS = ("ai_inline_runs", "ai_unblocks_paired", "ai_completion_wakeups", "ai_completions",
            "ai_helper_runs")
PEER = f"{peers.LABEL}:defaults"  # the peer's one server per backend
# (server label, tree label, setting, install tree, extra module arguments)
Server = tuple[str, str, str, pathlib.Path, list[str]]


def on_cpu_s(pid: int) -> tuple[float, float]:
    """Seconds on a CPU of redis-server's threads together and of its main thread alone (the
    first field of /proc/<pid>/task/<tid>/schedstat: nanoseconds, unlike /proc's ticks)."""
    total = main = 0
    for task in pathlib.Path(f"/proc/{pid}/task").iterdir():
        try:
            ns = int((task / "schedstat").read_text().split()[0])
        except (OSError, ValueError, IndexError):
            continue  # a thread that ended meanwhile
        total += ns
        if task.name == str(pid):
            main = ns
    return total / 1e9, main / 1e9


def measure(b: bench_floor.Backend, model: str, clients: int, seconds: float,
            requests_1: dict[str, int]) -> dict[str, Any]:
    counts_before = b.info_counts(COUNTERS)
    cpu_before = on_cpu_s(b.srv.proc.pid)
    if clients == 1:
        (res,) = b.load.run([b.cmds[model]], clients=1, requests=requests_1[model], warmup=50)
    else:
        (res,) = b.load.run([b.cmds[model]], clients=clients, seconds=seconds, warmup=10)
    res["loadavg1_after"] = os.getloadavg()[0]
    cpu_after = on_cpu_s(b.srv.proc.pid)
    # the warm-up's few requests are in the CPU but not in the count: a slight overestimate
    done = res["count"]
    res["server_cpu_us_per_req"] = (cpu_after[0] - cpu_before[0]) * 1e6 / max(done, 1)
    res["main_cpu_us_per_req"] = (cpu_after[1] - cpu_before[1]) * 1e6 / max(done, 1)
    counts_after = b.info_counts(COUNTERS)
    for field in COUNTERS:  # "inline_runs", ...: None where the server lacks the counter
        before, after = counts_before[field], counts_after[field]
        res[field.removeprefix("ai_")] = (after - before
                                          if before is not None and after is not None else None)
    return res


def summarize(values: list[float]) -> dict[str, float]:
    return {"median": float(statistics.median(values)), "min": min(values), "max": max(values)}


def summarize_share(rounds: list[dict[str, Any]], num: str, den: str | None,
                    scale: float = 1.0) -> dict[str, float] | None:
    """scale * rounds' num / den (den None: the requests counted), summarized; None when a
    server lacks a counter (RedisAI 1.2.7, an older tree): the tables print n/a."""
    values = []
    for r in rounds:
        n, d = r.get(num), (r["count"] if den is None else r.get(den))
        if n is None or d is None:
            return None
        values.append(scale * n / max(d, 1))
    return summarize(values)


def share(m: dict[str, Any], key: str, fmt: str) -> str:
    """A summarized share of a cell, or n/a where the server lacks its counter."""
    s = m.get(key)
    return format(s["median"], fmt) if s else "n/a"


def paired_ratio(a: dict[str, Any], b: dict[str, Any]) -> dict[str, float] | None:
    """a's throughput over b's, repetition by repetition (ratios.py): median and quartiles."""
    return ratios.paired_ratios(a.get("rounds"), b.get("rounds"))


def fixed_setting(spec: str) -> tuple[str, list[str]]:
    """A --fixed entry as (label, module arguments): "N" is INTRA_OP_PARALLELISM N alone
    ("intraN"); "TxN" also fixes THREADS_PER_QUEUE T ("tpqT-intraN"), which turns the
    helper worker of the defaults off (engine/run_queue.c), so the setting is fixed whole."""
    tpq, sep, intra = spec.strip().partition("x")
    if not sep:
        return f"intra{int(tpq)}", ["INTRA_OP_PARALLELISM", str(int(tpq))]
    return (f"tpq{int(tpq)}-intra{int(intra)}",
            ["THREADS_PER_QUEUE", str(int(tpq)), "INTRA_OP_PARALLELISM", str(int(intra))])


def servers_of(trees: list[tuple[str, pathlib.Path]], fixed: list[str],
               tree_args: dict[str, list[str]] | None = None,
               peer: peers.Peer | None = None) -> list[Server]:
    """tree_args: more module arguments for every server of a tree label (--tree-args), so
    that one install tree with and without a setting compares as two trees. peer: RedisAI
    1.2.7, one more server (PEER) with no argument but its backend, last."""
    out: list[Server] = []
    for tree, path in trees:
        more = (tree_args or {}).get(tree, [])
        out.append((f"{tree}:defaults", tree, "defaults", path, list(more)))
        for spec in fixed:
            label, args = fixed_setting(spec)
            out.append((f"{tree}:{label}", tree, label, path, [*args, *more]))
    if peer is not None:
        out.append((PEER, peers.LABEL, "defaults", peer.module.parent, []))
    return out


def start(kind: str, server: Server, manifest: dict[str, Any],
          exes: tuple[pathlib.Path, pathlib.Path], sub: pathlib.Path,
          peer: peers.Peer | None) -> bench_floor.Backend:
    """One server of one backend with both models stored; the peer's from its own module
    and backend."""
    floor_exe, load_exe = exes
    label, tree, _, path, args = server
    if tree == peers.LABEL and peer is not None:
        return bench_floor.Backend(kind, path, manifest, load_exe, floor_exe, sub, base_args=(),
                                   module=peer.module, backend=peer.backends[kind])
    return bench_floor.Backend(kind, path, manifest, load_exe, floor_exe, sub, extra_args=args,
                               base_args=())


def measure_kind(kind: str, servers: list[Server], manifest: dict[str, Any],
                 exes: tuple[pathlib.Path, pathlib.Path], work: pathlib.Path,
                 cells_run: list[tuple[str, int]], opts: argparse.Namespace,
                 peer: peers.Peer | None = None) -> dict[str, dict[str, dict[str, Any]]]:
    requests_1 = {"cnn": opts.requests, "trivial": 3 * opts.requests}
    print(f"{kind}: starting {len(servers)} servers ...", flush=True)
    up: dict[str, bench_floor.Backend] = {}
    labels = [s[0] for s in servers]
    raw: dict[str, dict[str, list[dict[str, Any]]]] = {
        f"{m}_{c}": {label: [] for label in labels} for m, c in cells_run}
    try:
        for server in servers:
            sub = work / f"{kind}-{server[0].replace(':', '-')}"
            sub.mkdir()
            up[server[0]] = start(kind, server, manifest, exes, sub, peer)
        if peer is not None and not peer.version:
            peer.learn_version(up[PEER].client.call("MODULE", "LIST"))
        for b in up.values():
            for model in ("trivial", "cnn"):
                b.load.run([b.cmds[model]], requests=5, warmup=50)
                b.check_output(model)
        for rep in range(opts.reps):
            order = labels[rep % len(labels):] + labels[:rep % len(labels)]
            for model, clients in cells_run:
                for label in order:
                    raw[f"{model}_{clients}"][label].append(
                        measure(up[label], model, clients, opts.seconds, requests_1))
            print(f"  {kind} rep {rep + 1}/{opts.reps} done", flush=True)
        for b in up.values():
            for model in ("trivial", "cnn"):
                b.check_output(model)
    finally:
        for b in up.values():
            b.stop()
    return {cell: {label: {"rps": summarize([r["rps"] for r in rs]),
                           "p50_us": summarize([r["p50_us"] for r in rs]),
                           "server_cpu_us_per_req":
                               summarize([r["server_cpu_us_per_req"] for r in rs]),
                           "main_cpu_us_per_req":
                               summarize([r["main_cpu_us_per_req"] for r in rs]),
                           "per_wakeup": summarize_share(rs, "completions",
                                                         "completion_wakeups"),
                           "paired_share": summarize_share(rs, "unblocks_paired", None, 2.0),
                           "helper_share": summarize_share(rs, "helper_runs", None),
                           "rounds": rs}
                   for label, rs in per.items()}
            for cell, per in raw.items()}


def print_per_server(doc: dict[str, Any], servers: list[Server], cells_run: list[tuple[str, int]],
                     fmt: Callable[[dict[str, Any]], str]) -> None:
    """A table, a row per cell and a column per server, each entry fmt(the cell's figures)."""
    head = "| backend | model | clients | " + " | ".join(s[0] for s in servers) + " |"
    print(head)
    print("|" + "---|" * (head.count("|") - 1))
    for kind, cells in doc["backends"].items():
        for model, clients in cells_run:
            per = cells[f"{model}_{clients}"]
            print(f"| {kind} | {model} | {clients} | "
                  + " | ".join(fmt(per[s[0]]) for s in servers) + " |")


def _rng(m: dict[str, Any]) -> str:
    return f"{m['rps']['median']:,.0f} [{m['rps']['min']:,.0f}-{m['rps']['max']:,.0f}]"


def _num(v: float | None) -> str:
    return f"{v:.2f}" if v is not None else "-"


def versus_peer(per: dict[str, dict[str, Any]], tree: str) -> dict[str, Any]:
    """One cell: a tree's defaults and its best fixed setting (the highest median) over the
    peer's defaults, ratios of the medians and, paired, the median of the repetitions'
    ratios; the keys the results' summary rows carry for the tree ("-" where none)."""
    p, d = per[PEER], per[f"{tree}:defaults"]
    pr = paired_ratio(d, p)
    out: dict[str, Any] = {f"{tree}:defaults/{peers.LABEL}": peers.ratio(d, p),
                           f"{tree}:defaults/{peers.LABEL}, paired": pr["median"] if pr else None}
    fixed = [label for label in per if label.startswith(f"{tree}:")
             and label != f"{tree}:defaults"]
    if fixed:
        top = max(fixed, key=lambda label: per[label]["rps"]["median"])
        pt = paired_ratio(per[top], p)
        out[f"{tree}:best_fixed"] = top.split(":", 1)[1]
        out[f"{tree}:best_fixed/{peers.LABEL}"] = peers.ratio(per[top], p)
        out[f"{tree}:best_fixed/{peers.LABEL}, paired"] = pt["median"] if pt else None
    return out


def peer_table(doc: dict[str, Any]) -> list[str]:
    """Per cell and tree: RedisAI 1.2.7's req/s, the tree's defaults and best fixed setting
    (median [min-max]) and their ratios to it; [] without a peer in the results."""
    if not doc.get("peer"):
        return []
    trees = list(doc["trees"])
    head = "| backend | model | clients | " + peers.NAME + " | " + " | ".join(
        f"{t} defaults | {t} defaults / {peers.NAME} (paired) | {t} best fixed | "
        f"{t} best fixed / {peers.NAME} (paired)" for t in trees) + " |"
    rows = [head, "|" + "---|" * (head.count("|") - 1)]
    for kind, cells in doc["backends"].items():
        for cell, per in cells.items():
            model, clients = cell.rsplit("_", 1)
            vals = [_rng(per[PEER])]
            for t in trees:
                v = versus_peer(per, t)
                vals += [_rng(per[f"{t}:defaults"]),
                         f"{_num(v[f'{t}:defaults/{peers.LABEL}'])} "
                         f"({_num(v[f'{t}:defaults/{peers.LABEL}, paired'])})"]
                top = v.get(f"{t}:best_fixed")
                vals += [f"{top} {_rng(per[f'{t}:{top}'])}" if top else "-",
                         f"{_num(v[f'{t}:best_fixed/{peers.LABEL}'])} "
                         f"({_num(v[f'{t}:best_fixed/{peers.LABEL}, paired'])})" if top else "-"]
            rows.append(f"| {kind} | {model} | {clients} | " + " | ".join(vals) + " |")
    return rows


def report(doc: dict[str, Any], servers: list[Server], trees: list[str], fixed: list[str],
           cells_run: list[tuple[str, int]]) -> list[dict[str, Any]]:
    settings = ["defaults"] + [fixed_setting(spec)[0] for spec in fixed]
    print(f"\nthroughput, req/s: median [min-max] of {doc['reps']} alternating repetitions; "
          f"load {doc['loadavg_start'][0]:.1f} -> {doc['loadavg_end'][0]:.1f}")
    print_per_server(doc, servers, cells_run, _rng)
    summary = []
    for kind, cells in doc["backends"].items():
        for model, clients in cells_run:
            per = cells[f"{model}_{clients}"]
            row: dict[str, Any] = {"kind": kind, "model": model, "clients": clients}
            for tree in trees:
                med = {s: per[f"{tree}:{s}"]["rps"]["median"] for s in settings}
                best = max(med[s] for s in settings[1:]) if fixed else 0.0
                row[f"{tree}:defaults/best_fixed"] = med["defaults"] / best if best else None
                if fixed:
                    top = max(settings[1:], key=lambda s: med[s])
                    pr = paired_ratio(per[f"{tree}:defaults"], per[f"{tree}:{top}"])
                    row[f"{tree}:defaults/best_fixed, paired"] = pr["median"] if pr else None
                if tree != trees[0]:
                    for s in settings:
                        base_med = per[f"{trees[0]}:{s}"]["rps"]["median"]
                        row[f"{tree}/{trees[0]}:{s}"] = med[s] / base_med if base_med else None
                if PEER in per:
                    row.update(versus_peer(per, tree))
            summary.append(row)
    print("\nserver CPU per request, us (all threads / the main thread), medians")
    print_per_server(doc, servers, cells_run,
                     lambda m: f"{m['server_cpu_us_per_req']['median']:.1f} / "
                     f"{m['main_cpu_us_per_req']['median']:.1f}")
    print("\nrequests unblocked in pairs (INFO ai_unblocks_paired x 2 / requests), medians "
          "(n/a: a server without the counter)")
    print_per_server(doc, servers, cells_run, lambda m: share(m, "paired_share", ".0%"))
    print("\nrequests the helper worker ran (INFO ai_helper_runs / requests), medians")
    print_per_server(doc, servers, cells_run, lambda m: share(m, "helper_share", ".0%"))
    print("\nfinished requests per worker unblock (INFO ai_completions / ai_completion_wakeups; "
          "above 1: the rest queued for the spinning main thread), medians")
    print_per_server(doc, servers, cells_run, lambda m: share(m, "per_wakeup", ".2f"))
    print("\nratios of medians (throughput): each tree's defaults / its best fixed setting "
          "(and the median of the two's ratios repetition by repetition, 'paired'); "
          f"each tree / {trees[0]} per setting")
    keys = [k for k in summary[0] if "/" in k and peers.LABEL not in k] if summary else []
    print("| backend | model | clients | " + " | ".join(keys) + " |")
    print("|" + "---|" * (3 + len(keys)))
    for row in summary:
        vals = [_num(row[k]) for k in keys]
        print(f"| {row['kind']} | {row['model']} | {row['clients']} | " + " | ".join(vals) + " |")
    lines = peer_table(doc)
    if lines:
        print(f"\nagainst {peers.NAME} at its defaults ({doc['peer']['module']}, version "
              f"{doc['peer'].get('version') or 'unknown'}): req/s median [min-max]; each tree's "
              "defaults and best fixed setting over it, ratio of the medians (paired: the "
              "median of the repetitions' ratios)")
        print("\n".join(lines))
    return summary


MODEL_NAMES = {"trivial": "2x2", "cnn": "CNN"}


def markdown(doc: dict[str, Any]) -> str:
    """The docs' table of a results file (docs/performance.md): per backend, model and clients,
    the first tree's defaults (req/s, p50, server / main-thread CPU per request, the share of
    requests its helper ran), each fixed setting's req/s, and defaults / the best of them: the
    ratio of the medians, and the median ratio of the repetitions (paired_ratio). With a peer
    (--peer), RedisAI 1.2.7's req/s and CPU per request, and the defaults over it."""
    tree = next(iter(doc["trees"]))
    labels = [label for label, _ in doc["servers"] if label.startswith(f"{tree}:")]
    fixed = [label for label in labels if label != f"{tree}:defaults"]
    names = [label.split(":", 1)[1] for label in fixed]
    with_peer = bool(doc.get("peer"))
    rows = ["| backend | model, clients | req/s | p50 us | CPU us/req (server / main) | helper "
            "| " + " | ".join(names)
            + (" | defaults / best fixed | paired [quartiles] |" if fixed else " |")
            + (f" {peers.NAME} req/s | {peers.NAME} CPU us/req (server / main) | defaults / "
               f"{peers.NAME} | paired [quartiles] |" if with_peer else ""),
            "|" + "---|" * (6 + len(fixed) + (2 if fixed else 0) + (4 if with_peer else 0))]
    kinds = {"TF": "TF", "TORCH": "Torch", "ONNX": "ONNX"}
    for kind, cells in doc["backends"].items():
        for cell, per in cells.items():
            model, clients = cell.rsplit("_", 1)
            d = per[f"{tree}:defaults"]
            vals = [f"{d['rps']['median']:,.0f}", f"{d['p50_us']['median']:,.0f}",
                    _cpu(d), share(d, "helper_share", ".0%")]
            meds = [per[label]["rps"]["median"] for label in fixed]
            vals += [f"{m:,.0f}" for m in meds]
            if fixed:
                vals.append(f"{d['rps']['median'] / max(meds):.2f}")
                vals.append(_quartiles(paired_ratio(d, per[fixed[meds.index(max(meds))]])))
            if with_peer:
                p = per[PEER]
                vals += [f"{p['rps']['median']:,.0f}", _cpu(p), _num(peers.ratio(d, p)),
                         _quartiles(paired_ratio(d, p))]
            rows.append(f"| {kinds.get(kind, kind)} | {MODEL_NAMES.get(model, model)}, {clients} | "
                        + " | ".join(vals) + " |")
    return "\n".join(rows)


def _cpu(m: dict[str, Any]) -> str:
    return (f"{m['server_cpu_us_per_req']['median']:.0f} / "
            f"{m['main_cpu_us_per_req']['median']:.0f}")


def _quartiles(pr: dict[str, float] | None) -> str:
    return f"{pr['median']:.2f} [{pr['q1']:.2f}-{pr['q3']:.2f}]" if pr else "-"


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--install", action="append", default=[], metavar="LABEL=DIR",
                    help="a tree measured at every setting (default: newest install/redisai-*/)")
    ap.add_argument("--build", default=str(HERE.parent / "build"))
    ap.add_argument("--kinds", default="TF,TORCH,ONNX")
    ap.add_argument("--fixed", default="1x1,1x2,2x1",
                    help="fixed settings to compare with the defaults, comma-separated: TxN is "
                         "THREADS_PER_QUEUE T with INTRA_OP_PARALLELISM N, a bare N the latter "
                         "alone")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=2.0,
                    help="per measurement of several clients (one client: --requests)")
    ap.add_argument("--requests", type=int, default=2000, help="per 1-client CNN measurement "
                    "(the 2x2 model gets 3x)")
    ap.add_argument("--cells", default=",".join(f"{m}:{c}" for m, c in CELLS),
                    help="model:clients pairs, comma-separated")
    ap.add_argument("--models", default="", help="folder of floor_models.py's output, reused "
                    "when it holds a manifest (else made there)")
    base.add_out_option(ap)
    ap.add_argument("--markdown", metavar="RESULTS.json",
                    help="print the docs' table of a results file, run nothing")
    ap.add_argument("--tree-args", action="append", default=[], metavar='LABEL="ARGS"',
                    help="module arguments for every server of --install LABEL (e.g. "
                         '--install nospin=DIR --tree-args nospin="WORKER_SPIN_US 0")')
    peers.add_options(ap)
    return ap


def main() -> int:
    opts = parser().parse_args()
    if opts.markdown:
        print(markdown(json.loads(pathlib.Path(opts.markdown).read_text())))
        return 0
    cells_run = [(c.split(":")[0], int(c.split(":")[1])) for c in opts.cells.split(",") if c]

    t0 = time.perf_counter()
    trees: list[tuple[str, pathlib.Path]] = []
    for v in opts.install:
        label, sep, path = v.partition("=")
        if not sep or not label or ":" in label or label == peers.LABEL:
            raise SystemExit(f"--install {v}: expected LABEL=DIR (a label without ':', "
                             f"not {peers.LABEL})")
        trees.append((label, pathlib.Path(path).resolve()))
    if not trees:
        trees = [("this", base.find_install(None))]
    fixed = [x.strip() for x in opts.fixed.split(",") if x.strip()]
    tree_args = {}
    for v in opts.tree_args:
        label, _, args = v.partition("=")
        tree_args[label] = args.split()
    kinds = [k.strip().upper() for k in opts.kinds.split(",") if k.strip()]
    peer = peers.from_options(opts, kinds)
    servers = servers_of(trees, fixed, tree_args, peer)

    exes = floor_tools.build(pathlib.Path(opts.build))
    work = pathlib.Path(tempfile.mkdtemp(prefix="bench-threads-"))
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    doc: dict[str, Any] = {"timestamp": stamp, "cores": os.cpu_count(), "reps": opts.reps,
                           "trees": {label: str(path) for label, path in trees},
                           "servers": [[s[0], s[4]] for s in servers],
                           "loadavg_start": os.getloadavg(), "backends": {}}
    try:
        models = pathlib.Path(opts.models) if opts.models else work / "models"
        if not (models / "manifest.json").is_file():
            print("building the models with the frameworks (child process) ...", flush=True)
            subprocess.run([sys.executable, str(HERE / "floor_models.py"), str(models)], check=True)
        manifest = json.loads((models / "manifest.json").read_text())
        doc["versions"] = manifest["versions"]
        for kind in kinds:
            doc["backends"][kind] = measure_kind(kind, servers, manifest, exes, work, cells_run,
                                                 opts, peer)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    doc["loadavg_end"] = os.getloadavg()
    if peer is not None:
        doc["peer"] = peer.describe()
    doc["summary"] = report(doc, servers, [t[0] for t in trees], fixed, cells_run)
    path = base.write_result(opts.out, f"threads-{stamp}", doc)
    print(f"total {time.perf_counter() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
