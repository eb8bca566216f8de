"""The fault soak's verdict (bench/soak_isolation.py): its checks and its figures. The CI
test (tests/isolation/test_soak_isolation.py) asserts exactly `Verdict.failures`.

The checks:

1. every answer is right: no wrong values, no request left without an answer;
2. every error is a clear error of the request's own model: the request runs on an isolated
   host inside one of that host's fault windows, and the error is the failure table's
   (docs/isolation.md) for a fault the soak injected, naming one of the request's own
   models: `ERR <kind> backend process exited (<reason>) while running|creating <key>` or
   `... is restarting after it exited (<reason>); try again`, with `<reason>` a kill
   (`signal 9 SIGKILL`) or a failed spawn (`start failed: ... not executable`). An error
   outside a window, of another kind or model, or for another reason (a channel that did not
   open, a quarantine, a create past its timeout) is a failure;
3. no request to an unaffected model waits longer than `latency_factor` times its template's
   normal p99 (the warm-up's, before any fault), and never less than `latency_floor_ms`: a
   request is affected when it runs on an isolated host and overlaps one of that host's
   windows, extended by `settle_s` after the host is back (its first runs open channels);
4. every host is back within its bound after each fault (soak_faults.py);
5. nothing is lost: every key a request was told OK for is there at the end, and so are the
   soak's models, script and inputs.
"""
from __future__ import annotations

import bisect
import collections
import dataclasses
import re
from typing import Any

from soak_faults import Fault, Window
from soak_workload import Records, Template

EXITED = re.compile(r"ERR (\w+) backend process exited \((.*)\) while (?:running|creating) (\S+)$")
RESTARTING = re.compile(r"ERR (\w+) backend process is restarting after it exited \((.*)\); "
                        r"try again$")
INJECTED = re.compile(r"signal 9 SIGKILL( \(inferred\))?$|start failed: .*not executable$")
OUTCOME = {2: "wrong answer", 3: "no answer"}


@dataclasses.dataclass
class Verdict:
    failures: list[str]
    figures: dict[str, Any]


def _shape(text: str) -> str:
    """An error text with its numbers and keys blurred, to count errors by kind."""
    text = re.sub(r"soak:[\w:]+", "<key>", text)
    return re.sub(r"\d+", "N", text)


def percentile(xs: list[float], q: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, int(q * len(s)))] if s else 0.0


class Windows:
    """Fault windows by host label, as sorted intervals (an open one ends at `end`)."""

    def __init__(self, windows: list[Window], end: float, settle_s: float) -> None:
        self.by_label: dict[str, list[tuple[float, float, str]]] = collections.defaultdict(list)
        for w in windows:
            self.by_label[w.label].append((w.start, (w.end or end) + settle_s, w.fault))
        for v in self.by_label.values():
            v.sort()

    def during(self, t0: float, t1: float) -> str:
        """The faults whose windows overlap [t0, t1], for a failure's message."""
        found = [f"{label} {fault}" for label, ws in sorted(self.by_label.items())
                 for start, end, fault in ws if start <= t1 and t0 <= end]
        return "during " + ", ".join(found) if found else "during no fault"

    def hit(self, labels: frozenset[str], t0: float, t1: float, settle: bool) -> bool:
        """Whether [t0, t1] overlaps a window of these hosts (with its settle time, or not)."""
        for label in labels:
            ws = self.by_label.get(label, [])
            i = bisect.bisect_right(ws, (t1, float("inf"), ""))
            for start, end, _ in ws[max(0, i - 8):i]:
                if start <= t1 and t0 <= end:
                    return True
        return False


def error_allowed(text: str, kinds: set[str], models: frozenset[str], churn: bool) -> bool:
    """Whether an error inside a window is the failure table's error of this request."""
    m = EXITED.match(text)
    if m:
        kind, reason, key = m.groups()
        own = key in models or (churn and key.startswith("soak:churn:"))
        return kind in kinds and bool(INJECTED.match(reason)) and own
    m = RESTARTING.match(text)
    if m:
        kind, reason = m.groups()
        return kind in kinds and bool(INJECTED.match(reason))
    return False


def judge(templates: list[Template], churn_labels: list[str], clients: list[Records],
          churn: Records, windows: list[Window], faults: list[Fault], isolated: dict[str, str],
          warm_end: float, end: float, cfg: Any, lost: dict[str, int],
          extra_failures: list[str]) -> Verdict:
    """isolated: host label -> its kind; churn records use class len(templates) + the index of
    their label in churn_labels; lost: what the key count found missing."""
    win = Windows(windows, end, cfg.settle_s)
    failures: list[str] = list(extra_failures)
    names = [t.name for t in templates] + [f"churn_{x}" for x in churn_labels]
    hosts_of = [frozenset(t.backends) & set(isolated) for t in templates] + \
        [frozenset({x}) & set(isolated) for x in churn_labels]
    models_of = [t.models for t in templates] + [frozenset()] * len(churn_labels)

    # 1 and 2: answers and errors.
    requests = collections.Counter()
    allowed = collections.Counter()
    bad = collections.Counter()
    examples: dict[str, str] = {}
    for recs in [*clients, churn]:
        for cls in recs.cls:
            requests[names[cls]] += 1
        for cls, t0, t1, outcome, text in recs.details:
            what = OUTCOME.get(outcome)
            if what is None:
                kinds = {isolated[h] for h in hosts_of[cls]}
                if hosts_of[cls] and win.hit(hosts_of[cls], t0, t1, settle=False) and \
                        error_allowed(text, kinds, models_of[cls], cls >= len(templates)):
                    allowed[_shape(text)] += 1
                    continue
                what = "error outside a fault of its own host" if not hosts_of[cls] or \
                    not win.hit(hosts_of[cls], t0, t1, settle=False) else "error not of its fault"
            key = f"{what}: {names[cls]}: {_shape(text)}"
            bad[key] += 1
            examples.setdefault(key, f"{text} (at {t0 - warm_end:+.2f} s)")
    for key, n in sorted(bad.items()):
        failures.append(f"{n} x {key}; first: {examples[key]}")

    # 3: latency of unaffected requests against the warm-up's p99.
    warm: dict[int, list[float]] = collections.defaultdict(list)
    for recs in clients:
        for cls, t0, dt in zip(recs.cls, recs.t0, recs.dt):
            if t0 < warm_end:
                warm[cls].append(dt)
    p99 = {cls: percentile(xs, 0.99) for cls, xs in warm.items()}
    bound = {cls: max(cfg.latency_factor * v, cfg.latency_floor_ms / 1e3) for cls, v in p99.items()}
    worst: dict[int, tuple[float, float]] = {}
    over = collections.Counter()
    over_during: dict[int, collections.Counter] = collections.defaultdict(collections.Counter)
    for recs in clients:
        for cls, t0, dt, outcome in zip(recs.cls, recs.t0, recs.dt, recs.outcome):
            if t0 < warm_end or outcome or cls not in bound or (
                    hosts_of[cls] and win.hit(hosts_of[cls], t0, t0 + dt, settle=True)):
                continue
            if dt > worst.get(cls, (0.0, 0.0))[0]:
                worst[cls] = (dt, t0)
            if dt > bound[cls]:
                over[cls] += 1
                over_during[cls][win.during(t0, t0 + dt)] += 1
    latency = {}
    for cls in sorted(bound):
        w, at = worst.get(cls, (0.0, warm_end))
        latency[names[cls]] = {"p99_ms": round(p99[cls] * 1e3, 2),
                               "bound_ms": round(bound[cls] * 1e3, 1),
                               "worst_unaffected_ms": round(w * 1e3, 1),
                               "over_bound": over[cls], "warm_samples": len(warm[cls]),
                               "over_bound_by_fault": dict(over_during[cls])}
        if over[cls]:
            failures.append(f"{over[cls]} requests of {names[cls]} (no fault on their hosts) "
                            f"waited over {bound[cls] * 1e3:.0f} ms ({cfg.latency_factor:g} x "
                            f"p99 {p99[cls] * 1e3:.1f} ms); worst {w * 1e3:.0f} ms at "
                            f"{at - warm_end:+.2f} s, {win.during(at, at + w)}; over the bound: "
                            + ", ".join(f"{n} {ctx}" for ctx, n in over_during[cls].items()))

    # 4: every host back within its bound.
    recovery = []
    for f in faults:
        recovery.append({"fault": f.kind, "host": f.label, "at_s": round(f.at - warm_end, 2),
                         "back_s": None if f.back_s is None else round(f.back_s, 3),
                         "bound_s": round(f.bound_s, 3)})
        if f.back_s is None:
            failures.append(f"{f.label} host not back after {f.kind} at {f.at - warm_end:+.2f} s "
                            f"(bound {f.bound_s:.2f} s): never, by the end of the soak")
        elif f.back_s > f.bound_s:
            failures.append(f"{f.label} host back {f.back_s:.2f} s after {f.kind} at "
                            f"{f.at - warm_end:+.2f} s: over its bound {f.bound_s:.2f} s")

    # 5: nothing lost.
    for what, n in lost.items():
        if n:
            failures.append(f"{n} {what} missing at the end")

    figures = {
        "requests": sum(requests.values()),
        "requests_by_template": dict(sorted(requests.items())),
        "faults": dict(collections.Counter(f.kind for f in faults)),
        "wrong_answers": sum(1 for r in [*clients, churn] for d in r.details if d[3] == 2),
        "no_answer": sum(1 for r in [*clients, churn] for d in r.details if d[3] == 3),
        "errors_allowed": dict(allowed.most_common()),
        "errors_failed": dict(bad.most_common()),
        "latency": latency,
        "recovery": recovery,
        "lost": lost,
    }
    return Verdict(failures, figures)


def describe(verdict: Verdict) -> list[str]:
    """The verdict as the lines bench/soak_isolation.py prints and the CI test shows."""
    lines: list[str] = []
    out = lines.append
    f = verdict.figures
    out(f"\nsoak: {f['requests']} requests in {f['seconds']} s from {f['clients']} clients "
        f"(seed {f['seed']}); isolated hosts {f['isolated']}")
    out(f"faults injected: {f['faults']}; hosts lost: {f['hosts_lost'] or 'none'}")
    out(f"normal restarts (s): {f['normal_restart_s']}")
    out(f"wrong answers: {f['wrong_answers']}; requests without an answer: {f['no_answer']}")
    out("errors excused (own host's fault):")
    for text, n in f["errors_allowed"].items():
        out(f"  {n:7d}  {text}")
    out("errors failed:")
    for text, n in f["errors_failed"].items():
        out(f"  {n:7d}  {text}")
    out(f"{'template':18} {'requests':>9} {'p99 ms':>8} {'bound ms':>9} {'worst ms':>9} "
        f"{'over':>6}")
    for name, v in f["latency"].items():
        out(f"{name:18} {f['requests_by_template'].get(name, 0):9d} {v['p99_ms']:8.2f} "
            f"{v['bound_ms']:9.1f} {v['worst_unaffected_ms']:9.1f} {v['over_bound']:6d}")
    out("host recovery (s after the fault; bound):")
    for r in f["recovery"]:
        back = "never" if r["back_s"] is None else f"{r['back_s']:.3f}"
        out(f"  {r['at_s']:+8.2f} s  {r['fault']:17} {r['host']:6} back {back:>7}  "
            f"bound {r['bound_s']:.3f}")
    out(f"lost: {f['lost']}")
    if verdict.failures:
        out(f"\nFAILED: {len(verdict.failures)} checks")
        for line in verdict.failures:
            out(f"  - {line}")
        for line in f.get("server_log_host_lines", []):
            out(f"  | {line}")
    else:
        out("\nall checks passed")
    return lines
