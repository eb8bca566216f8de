"""The Markdown tables of a bench/bench_compare.py results file (README and docs include them).

    bench/run compare --markdown bench/results/compare-STAMP.json

headline(): req/s per model, clients and stack, and the module's ratio to the best other
stack (and to RedisAI 1.2.7's DAG when the run had it); details(): every stack's req/s (min-max
over repetitions), p50, p99, server CPU per request and the ratio "module DAG / this stack" in
req/s; versus_peer(): the module against RedisAI 1.2.7 (--peer) per cell and way of serving.
"""
from __future__ import annotations

import pathlib
from typing import Any

import peer as peers
import ratios

REFERENCE = "module DAG"  # the like-for-like module figure the ratios divide
WAYS = ("DAG", "DAG, ref in Redis", "MODELEXECUTE")  # how the module and RedisAI 1.2.7 serve
ORDER = (*(f"module {w}" for w in WAYS), *(f"{peers.LABEL} {w}" for w in WAYS),
         "FastAPI + uvicorn", "Triton (python backend)", "PyTriton")
PEER_REFERENCE = f"{peers.LABEL} DAG"
MODEL_NAMES = {"cnn": "CNN (MNIST-sized)", "fraud": "fraud MLP (1x30 + 1x256)", "big": "128 MiB Gather"}


def _rank(label: str) -> int:
    return ORDER.index(label) if label in ORDER else len(ORDER)


def _cells(doc: dict[str, Any]) -> dict[tuple[str, int], dict[str, dict[str, Any]]]:
    """(model, clients) -> stack label -> cell, in the document's model order."""
    out: dict[tuple[str, int], dict[str, dict[str, Any]]] = {}
    for c in doc["cells"]:
        out.setdefault((c["model"], c["clients"]), {})[c["stack"]] = c
    return out


def _model(name: str, doc: dict[str, Any]) -> str:
    if name == "big":
        mib = doc.get("settings", {}).get("big_mib")
        return f"{mib} MiB Gather" if mib else MODEL_NAMES[name]
    return MODEL_NAMES.get(name, name)


def _is_setting(label: str) -> bool:
    """A module row served with a --module-setting ("module DAG @tpq1"), not the defaults."""
    return " @" in label


def _is_peer(label: str) -> bool:
    return label.startswith(peers.LABEL + " ")


def headline(doc: dict[str, Any]) -> str:
    """"best other" is the best of the other serving stacks; RedisAI 1.2.7, when measured, has
    its own ratio column."""
    cells = _cells(doc)
    labels = sorted({c["stack"] for c in doc["cells"] if not _is_setting(c["stack"])}, key=_rank)
    others = [lab for lab in labels if not lab.startswith("module") and not _is_peer(lab)]
    with_peer = PEER_REFERENCE in labels
    head = ("| model | clients | " + " | ".join(labels) + " | module DAG / best other |"
            + (f" module DAG / {peers.NAME} DAG |" if with_peer else ""))
    rows = [head, "|" + "---|" * (len(labels) + 3 + with_peer)]
    for (model, clients), row in cells.items():
        vals = [f"{row[lab]['rps']['median']:,.0f}" if lab in row else "-" for lab in labels]
        best = max((row[lab]["rps"]["median"] for lab in others if lab in row), default=0.0)
        ratio = f"{row[REFERENCE]['rps']['median'] / best:.2f}x" if best and REFERENCE in row else "-"
        if with_peer:
            pr = peers.ratio(row.get(REFERENCE), row.get(PEER_REFERENCE))
            ratio += f" | {pr:.2f}x" if pr is not None else " | -"
        rows.append(f"| {_model(model, doc)} | {clients} | " + " | ".join(vals) + f" | {ratio} |")
    return "\n".join(rows)


def versus_peer(doc: dict[str, Any]) -> str:
    """The module at its defaults against RedisAI 1.2.7 at its own, per model, clients and way
    of serving: req/s median (min-max), server CPU ms per request, module / RedisAI (ratio of
    the medians) and paired (the median of the repetitions' ratios); "" without the peer."""
    if not any(_is_peer(c["stack"]) for c in doc["cells"]):
        return ""
    rows = [f"| model | clients | way | module req/s | {peers.NAME} req/s | module CPU ms/req | "
            f"{peers.NAME} CPU ms/req | module / {peers.NAME} | paired |",
            "|---|---|---|---|---|---|---|---|---|"]
    for (model, clients), row in _cells(doc).items():
        for way in WAYS:
            m, p = row.get(f"module {way}"), row.get(f"{peers.LABEL} {way}")
            if not m or not p:
                continue
            r, pr = peers.ratio(m, p), paired(m, p)
            rows.append(f"| {_model(model, doc)} | {clients} | {way} | {_range(m)} | {_range(p)} | "
                        f"{m['cpu_ms_per_req']['median']:.3f} | {p['cpu_ms_per_req']['median']:.3f} | "
                        f"{r:.2f}x | " + (f"{pr:.2f}x" if pr is not None else "-") + " |")
    return "\n".join(rows)


def _range(c: dict[str, Any]) -> str:
    rps = c["rps"]
    return f"{rps['median']:,.0f} ({rps['min']:,.0f}-{rps['max']:,.0f})"


def details(doc: dict[str, Any]) -> str:
    rows = ["| model | clients | stack | req/s (min-max) | p50 us | p99 us | server CPU ms/req "
            "| server cores busy | module DAG / this |",
            "|---|---|---|---|---|---|---|---|---|"]
    for (model, clients), row in _cells(doc).items():
        ref = row.get(REFERENCE, {}).get("rps", {}).get("median")
        for lab in sorted(row, key=_rank):
            c = row[lab]
            rps = c["rps"]
            ratio = f"{ref / rps['median']:.2f}x" if ref and lab != REFERENCE else ""
            cores = f"{c['server_cores']['median']:.2f}" if "server_cores" in c else ""
            rows.append(f"| {_model(model, doc)} | {clients} | {lab} | {rps['median']:,.0f} "
                        f"({rps['min']:,.0f}-{rps['max']:,.0f}) | {c['p50_us']['median']:,.0f} | "
                        f"{c['p99_us']['median']:,.0f} | {c['cpu_ms_per_req']['median']:.3f} | {cores} | {ratio} |")
    return "\n".join(rows)


def latency(doc: dict[str, Any]) -> str:
    """One row per model and client count: each stack's p50 / p99 us and server CPU ms per
    request (medians), the compact form of details() for the manual."""
    labels = sorted({c["stack"] for c in doc["cells"] if not _is_setting(c["stack"])}, key=_rank)
    rows = ["| model | clients | " + " | ".join(labels) + " |", "|" + "---|" * (len(labels) + 2)]
    for (model, clients), row in _cells(doc).items():
        vals = [f"{row[lab]['p50_us']['median']:,.0f} / {row[lab]['p99_us']['median']:,.0f} / "
                f"{row[lab]['cpu_ms_per_req']['median']:.3f}" if lab in row else "-"
                for lab in labels]
        rows.append(f"| {_model(model, doc)} | {clients} | " + " | ".join(vals) + " |")
    return "\n".join(rows)


def settings(doc: dict[str, Any]) -> str:
    """The module at its defaults against each --module-setting, per model, clients and way
    of serving (req/s medians), and defaults / the best of them; "" without settings."""
    labels = list(doc.get("module_settings", {}))
    if not labels:
        return ""
    rows = ["| model | clients | module | defaults | " + " | ".join(f"@{lab}" for lab in labels)
            + " | defaults / best fixed | paired |", "|" + "---|" * (len(labels) + 6)]
    for (model, clients), row in _cells(doc).items():
        for base in [lab for lab in ORDER if lab.startswith("module") and lab in row]:
            fixed = [row.get(f"{base} @{lab}", {}).get("rps", {}).get("median") for lab in labels]
            best = max((f for f in fixed if f), default=0.0)
            ratio = f"{row[base]['rps']['median'] / best:.2f}" if best else "-"
            top = row.get(f"{base} @{labels[fixed.index(best)]}", {}) if best else {}
            pr = paired(row[base], top)
            rows.append(f"| {_model(model, doc)} | {clients} | {base.removeprefix('module ')} | "
                        f"{row[base]['rps']['median']:,.0f} | "
                        + " | ".join(f"{f:,.0f}" if f else "-" for f in fixed) + f" | {ratio} | "
                        + (f"{pr:.2f}" if pr is not None else "-") + " |")
    return "\n".join(rows)


def paired(a: dict[str, Any], b: dict[str, Any]) -> float | None:
    """The median of a's req/s over b's, repetition by repetition (ratios.py)."""
    pr = ratios.paired_ratios(a.get("reps"), b.get("reps"))
    return pr["median"] if pr else None


def markdown(doc: dict[str, Any], path: pathlib.Path | None = None) -> str:
    m, s = doc["machine"], doc["settings"]
    source = f"`{path.as_posix()}`" if path is not None else "this run"
    lines = [
        f"Figures from {source} (`{doc['command']}`), {m['cores']} cores ({m['cpu_model']}), "
        f"kernel {m['kernel']}; closed-loop clients, {s['reps']} repetitions of {s['seconds']:g} s "
        "per cell, medians. Every stack serves the same ONNX files; its answers were checked "
        "against ONNX Runtime's before timing.",
        "",
        "Throughput (req/s):",
        "",
        headline(doc),
        "",
        "Every stack (req/s median and min-max over repetitions; latency medians; server CPU: "
        "all the server's processes):",
        "",
        details(doc),
    ]
    if versus_peer(doc):
        lines += ["", f"The module against {peers.NAME}, both at their defaults (req/s median "
                  "and min-max over repetitions; paired: the median of the repetitions' ratios):",
                  "", versus_peer(doc)]
    if doc.get("module_settings"):
        lines += ["", "The module at its defaults and with fixed settings ("
                  + "; ".join(f"@{k}: {' '.join(v)}" for k, v in doc["module_settings"].items())
                  + "), req/s:", "", settings(doc)]
    if doc.get("left_out"):
        lines += ["", "Left out:"] + [f"- {k}: {v.splitlines()[0] if v else ''}"
                                       for k, v in doc["left_out"].items()]
    return "\n".join(lines)


# --- the blocks of README.md and docs/performance.md ------------------------------------------
# Each page holds its tables between two markers naming the results file; `update_docs` rewrites
# them from that file and tests/repo/test_compare_figures.py checks that they match it, so the
# figures are never typed by hand.
ROOT = pathlib.Path(__file__).resolve().parent.parent  # the repository
PAGES = {"README.md": "headline", "docs/performance.md": "full"}
BLOCK_START = "<!-- compare: "
BLOCK_END = "<!-- /compare -->"


def block(kind: str, doc: dict[str, Any], results: str) -> str:
    """What a page's block holds for the results file `results` (relative to the repository)."""
    if kind == "headline":
        return (f"Requests per second on this project's 2-core machine, from `{results}` "
                "([docs/performance.md](docs/performance.md#against-other-serving-stacks) has "
                "latency and CPU per request; `bench/run compare` reruns it):\n\n" + headline(doc))
    m, st = doc["machine"], doc["settings"]
    return (f"From `{results}` (`{doc['command']}`), {m['cores']} cores ({m['cpu_model']}); "
            f"closed-loop clients, {st['reps']} repetitions of {st['seconds']:g} s per cell, "
            "medians; `--markdown` on the file prints every repetition's range.\n\n"
            "Requests per second:\n\n" + headline(doc) + "\n\n"
            "p50 / p99 latency (us) / server CPU per request (ms, all the server's processes):\n\n"
            + latency(doc) + peer_block(doc) + settings_block(doc))


def peer_block(doc: dict[str, Any]) -> str:
    """The module against RedisAI 1.2.7, when the run had it."""
    table = versus_peer(doc)
    return (f"\n\nThe module against {peers.NAME}, both at their defaults (req/s median and "
            "min-max; paired: the median of the repetitions' ratios):\n\n" + table) if table else ""


def settings_block(doc: dict[str, Any]) -> str:
    """The module's defaults against its fixed settings, when the run had any."""
    if not doc.get("module_settings"):
        return ""
    named = "; ".join(f"`@{k}`: `{' '.join(v)}`" for k, v in doc["module_settings"].items())
    return ("\n\nThe module at its defaults and with fixed module arguments (" + named
            + "), req/s:\n\n" + settings(doc))


def rewrite(text: str, kind: str, results: str, doc: dict[str, Any]) -> str:
    start = text.index(BLOCK_START)
    head_end = text.index("-->", start) + 3
    end = text.index(BLOCK_END, head_end)
    return (text[:start] + f"{BLOCK_START}{results} -->\n" + block(kind, doc, results) + "\n"
            + text[end:])


def named_results(text: str) -> str:
    """The results file a page's block names."""
    start = text.index(BLOCK_START) + len(BLOCK_START)
    return text[start:text.index(" -->", start)].strip()


def update_docs(results: pathlib.Path) -> list[pathlib.Path]:
    import json  # noqa: PLC0415

    rel = results.resolve().relative_to(ROOT).as_posix()
    doc = json.loads(results.read_text())
    done = []
    for page, kind in PAGES.items():
        path = ROOT / page
        path.write_text(rewrite(path.read_text(), kind, rel, doc))
        done.append(path)
    return done
