"""The other benchmarks' results beside bench_floor.py's table and picture.

Each result JSON of bench/ is recognised by its keys and summarised as a Markdown table and a
panel of the picture:

* threads-*.json (bench_threads.py): each tree's defaults and fixed INTRA_OP_PARALLELISM, 1 and
  32 clients, and the ratio of the defaults to the best fixed setting;
* torch-path-*.json (bench_torch_path.py): the Torch backend and the server against libtorch's
  direct call;
* isolation-async-*.json (bench_isolation_async.py): isolated / in-process at 32 clients and the
  trivial model's p50, with and without runs in flight;
* profile-modcpu-*.json (profile_execute.py, before/after): CPU us per request of the module,
  Redis and the framework;
* instructions-*.json (bench_instructions.py): core instructions per request;
* isolation-outputs-*.json (bench_isolation_outputs.py): isolated outputs used in place, p50 of
  each tree and its ratio to the first.

    bench/run floor_table RESULT.json --with bench/results/threads-<stamp>.json ...
    bench/run floor_plot RESULT.json --with ...    # draws <stamp>-all.png too
"""
from __future__ import annotations

import pathlib
import statistics
import sys
from typing import Any, Callable

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import profile_execute  # noqa: E402  (owner_us: CPU us per request of one owner)

Section = tuple[str, list[str]]  # title, Markdown lines


def kind_of(doc: dict[str, Any]) -> str:
    if "per_request" in doc:
        return "instructions"
    if "trees" in doc and "summary" in doc:
        return "threads"
    if "installs" in doc and "models" in doc:
        return "torch-path"
    if "summary" in doc and "cnn_32_ratio" in doc.get("summary", {}):
        return "isolation"
    if isinstance(doc.get("before"), list) and isinstance(doc.get("after"), list):
        return "modcpu"
    if "rows" in doc and "rounds" in doc:
        return "isolation-outputs"
    raise ValueError("not a result of bench_threads, bench_torch_path, bench_isolation_async, "
                     "profile_execute (before/after), bench_instructions or "
                     "bench_isolation_outputs")


def _rng(d: dict[str, float], fmt: str = "{:,.0f}") -> str:
    return f"{fmt.format(d['median'])} [{fmt.format(d['min'])}-{fmt.format(d['max'])}]"


def threads(doc: dict[str, Any]) -> Section:
    trees = list(doc["trees"])
    labels = [s[0] for s in doc["servers"]]
    settings = [lab.split(":", 1)[1] for lab in labels if lab.startswith(trees[0] + ":")]
    lines = ["| backend | model | clients | " + " | ".join(labels) + " | " +
             " | ".join(f"{t} defaults / best fixed" for t in trees) + " |",
             "|---|---|---:|" + "---:|" * (len(labels) + len(trees))]
    for kind, cells in doc["backends"].items():
        for cell, per in cells.items():
            model, clients = cell.rsplit("_", 1)
            ratios = []
            for t in trees:
                med = {s: per[f"{t}:{s}"]["rps"]["median"] for s in settings}
                best = max((med[s] for s in settings if s != "defaults"), default=0.0)
                ratios.append(f"{med['defaults'] / best:.2f}" if best else "-")
            lines.append(f"| {kind} | {model} | {clients} | " +
                         " | ".join(_rng(per[lab]["rps"]) for lab in labels) + " | " +
                         " | ".join(ratios) + " |")
    return (f"Thread settings, req/s, median [range] of {doc['reps']} alternating repetitions "
            f"({doc['timestamp']})", lines)


def torch_path(doc: dict[str, Any]) -> Section:
    labels = list(doc["installs"])
    lines = ["| model | figure | " + " | ".join(labels) + " |",
             "|---|---|" + "---:|" * len(labels)]
    for model, m in doc["models"].items():
        lines.append(f"| {model} | direct call p50 us | " +
                     " | ".join(_rng(m["direct"]["p50_us"], "{:.2f}") for _ in labels) + " |")
        for key, name, fmt in (("backend_over_direct", "backend / direct", "{:.2f}"),
                               ("server_over_ping_plus_direct", "server / (PING + direct)",
                                "{:.2f}")):
            lines.append(f"| {model} | {name} | " +
                         " | ".join(_rng(m[lab][key], fmt) for lab in labels) + " |")
    return (f"Torch run path (target: server / (PING + direct) <= 1.1) ({doc['timestamp']})",
            lines)


def _num(v: float | None) -> str:
    return "-" if v is None else f"{v:.1f}"  # a figure the earliest runs did not measure


def isolation(doc: dict[str, Any]) -> Section:
    s = doc["summary"]
    lines = ["| backend | CNN 32 clients: isolated / in-process, ring | socket, 4 in flight "
             "| worker waits | trivial p50 us: in-process | in-process queued | isolated |",
             "|---|---:|---:|---:|---:|---:|---:|"]
    for kind, r in s["cnn_32_ratio"].items():
        p = s["trivial_p50_us"][kind]
        # results from before the ring have no socket column
        sock = _rng(r["isolated-socket"], "{:.2f}") if "isolated-socket" in r else "-"
        lines.append(f"| {kind} | {_rng(r['isolated'], '{:.2f}')} | {sock} | "
                     f"{_rng(r['isolated-wait'], '{:.2f}')} | {p['in-process']:.1f} | "
                     f"{_num(p.get('in-process-queued'))} | {p['isolated']:.1f} |")
    return (f"Isolated backends (target: >= 0.9 at 32 clients) ({doc['timestamp']})", lines)


def _owner_us(p: dict[str, Any], who: str) -> float:
    return profile_execute.owner_us(p, who)


def modcpu(doc: dict[str, Any]) -> Section:
    lines = ["| CPU us per request | before | after | after / before |", "|---|---:|---:|---:|"]
    for who in ("module", "redis", "framework"):
        b = statistics.median(_owner_us(p, who) for p in doc["before"])
        a = statistics.median(_owner_us(p, who) for p in doc["after"])
        lines.append(f"| {who} | {b:.2f} | {a:.2f} | {a / b:.2f} |")
    kind = doc["before"][0].get("kind", "")
    return (f"Module CPU per request, {kind} CNN at 32 clients, medians of "
            f"{len(doc['before'])} profiles", lines)


def instructions(doc: dict[str, Any]) -> Section:
    per = doc["per_request"][0]
    plain = {w["name"]: w for w in doc["runs"][0].get("no_module", [])}
    lines = ["| workload | core (redisai.so + redis-server) | redisai.so | total |",
             "|---|---:|---:|---:|"]
    for name, r in per.items():
        lines.append(f"| {name} | {r['core']:,.0f} | {r['redisai.so']:,.0f} | "
                     f"{r['total']:,.0f} |")
    for name, w in plain.items():
        g = w["by_group"]
        lines.append(f"| {name}, Redis alone | {g['redis-server'] / w['requests']:,.0f} | | "
                     f"{sum(g.values()) / w['requests']:,.0f} |")
    return (f"Instructions per request, callgrind ({doc['timestamp']}, first run)", lines)


def _output_rows(doc: dict[str, Any]) -> tuple[list[str], list[tuple[str, dict[str, float]]]]:
    """Tree names, and (label, median p50 us per tree) per output size and command."""
    names = [t.split("=", 1)[0] for t in doc["trees"]]
    out = []
    for r in doc["rows"]:
        if "cmd" not in r:
            continue
        b = r["bytes"]
        label = f"{b >> 20} MiB" if b >= 1 << 20 else f"{b >> 10} KiB"
        out.append((f"{label} {r['cmd']}",
                    {n: statistics.median(r["p50_us"][n]) for n in names}))
    return names, out


def isolation_outputs(doc: dict[str, Any]) -> Section:
    names, rows = _output_rows(doc)
    lines = ["| output, command | " + " | ".join(f"{n} p50 us" for n in names) + " | "
             + " | ".join(f"{n} / {names[0]}" for n in names[1:]) + " |",
             "|---|" + "---:|" * (2 * len(names) - 1)]
    for label, med in rows:
        lines.append(f"| {label} | " + " | ".join(f"{med[n]:.1f}" for n in names) + " | "
                     + " | ".join(f"{med[n] / med[names[0]]:.2f}" for n in names[1:]) + " |")
    return (f"Isolated outputs used in place, one client, medians of {doc['rounds']} rounds", lines)


SECTIONS: dict[str, Callable[[dict[str, Any]], Section]] = {
    "threads": threads, "torch-path": torch_path, "isolation": isolation, "modcpu": modcpu,
    "instructions": instructions, "isolation-outputs": isolation_outputs}


def section(doc: dict[str, Any]) -> Section:
    return SECTIONS[kind_of(doc)](doc)


def markdown(docs: list[dict[str, Any]]) -> str:
    out = []
    for doc in docs:
        title, lines = section(doc)
        out += ["", f"**{title}**", ""] + lines
    return "\n".join(out)


# ------------------------------------------------------------------------------------------
# The picture: one panel per result


def _bars(ax: Any, groups: list[str], series: dict[str, list[float]], ylabel: str) -> None:
    n = len(series)
    width = 0.8 / max(n, 1)
    for i, (name, vals) in enumerate(series.items()):
        xs = [g + (i - (n - 1) / 2) * width for g in range(len(groups))]
        ax.bar(xs, vals, width, label=name)
    ax.set_xticks(range(len(groups)), groups, rotation=30, ha="right", fontsize=7)
    ax.set_ylabel(ylabel)
    ax.grid(True, axis="y", alpha=.3)
    ax.legend(fontsize=6.5)


def panel(ax: Any, doc: dict[str, Any]) -> None:
    k = kind_of(doc)
    if k == "threads":
        trees = list(doc["trees"])
        labels = [s[0] for s in doc["servers"]]
        groups, series = [], {lab: [] for lab in labels}
        for kind, cells in doc["backends"].items():
            for cell, per in cells.items():
                groups.append(f"{kind} {cell}")
                ref = max(per[lab]["rps"]["median"] for lab in labels)
                for lab in labels:
                    series[lab].append(per[lab]["rps"]["median"] / ref)
        _bars(ax, groups, series, "req/s / best server of the cell")
        ax.set_title(f"thread settings, {' vs '.join(trees)}", fontsize=9)
    elif k == "isolation":
        s = doc["summary"]["cnn_32_ratio"]
        kinds = list(s)
        bars = {"runs in flight, ring": [s[x]["isolated"]["median"] for x in kinds]}
        if all("isolated-socket" in s[x] for x in kinds):
            bars["socket, 4 in flight"] = [s[x]["isolated-socket"]["median"] for x in kinds]
        bars["worker waits"] = [s[x]["isolated-wait"]["median"] for x in kinds]
        _bars(ax, kinds, bars, "isolated / in-process, CNN, 32 clients")
        ax.axhline(0.9, color="tab:red", ls="-.", lw=.8)
        ax.set_title("isolated backends (target 0.9)", fontsize=9)
    elif k == "modcpu":
        whos = ["module", "redis", "framework"]
        _bars(ax, whos, {w: [statistics.median(_owner_us(p, x) for p in doc[w]) for x in whos]
                         for w in ("before", "after")}, "CPU us per request")
        ax.set_title("CPU per request by owner, ONNX CNN, 32 clients", fontsize=9)
    elif k == "instructions":
        per = doc["per_request"][0]
        names = [n for n in per if "1MB" not in n]
        _bars(ax, names, {"core": [per[n]["core"] for n in names],
                          "total": [per[n]["total"] for n in names]}, "instructions per request")
        ax.set_title(f"instructions per request (callgrind, {doc['timestamp']})", fontsize=9)
    elif k == "torch-path":
        labels = list(doc["installs"])
        models = list(doc["models"])
        _bars(ax, models, {lab: [doc["models"][m][lab]["server_over_ping_plus_direct"]["median"]
                                 for m in models] for lab in labels},
              "server p50 / (PING + direct call)")
        ax.axhline(1.1, color="tab:red", ls="-.", lw=.8)
        ax.set_title("Torch run path (target 1.1)", fontsize=9)
    elif k == "isolation-outputs":
        names, rows = _output_rows(doc)
        _bars(ax, [label for label, _ in rows],
              {n: [med[n] / med[names[0]] for _, med in rows] for n in names[1:]},
              f"p50 / {names[0]}")
        ax.axhline(1.0, color="grey", ls=":", lw=.8)
        ax.set_title("isolated outputs used in place, one client", fontsize=9)


def draw(docs: list[dict[str, Any]], path: Any) -> Any:
    import matplotlib  # noqa: PLC0415  (only when drawing)
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415
    n = len(docs)
    cols = min(n, 2)
    rows = (n + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(7.5 * cols, 4.6 * rows), squeeze=False)
    for i, doc in enumerate(docs):
        panel(axes[i // cols][i % cols], doc)
    for j in range(n, rows * cols):
        axes[j // cols][j % cols].axis("off")
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return path
