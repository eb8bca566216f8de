"""Fault soak: 16 clients on in-process and isolated models while hosts die; exit 1 on a failure.

    bench/run soak_isolation --minutes N [--seed S] [--json FILE]

One server with ONNX Runtime in-process, Torch isolated (`ISOLATE TORCH`: a model, a batched
model, a TorchScript script) and the fault-injection backend isolated (`AI.CONFIG LOADBACKEND
... ISOLATED`), DAGs across them; 16 client threads send random requests for a warm-up without
faults (each request template's p99, each host's normal restart), then for N minutes while a
fault thread kills hosts (`kill -9`), makes their spawns fail (the host binary of the soak's
own copy of the tree non-executable for a second), holds the fault backend's re-creation
(`slow-if-exists`) while it kills the others, and a churn thread stores, runs and deletes
models. The checks (tests/support/soak_checks.py: right answers, errors only of the request's
own faulted host, unaffected requests within 10x their p99, hosts back within their back-off,
nothing lost) are the ones tests/isolation/test_soak_isolation.py asserts for 60 s in CI. It
prints the figures (requests, faults by kind, wrong answers, errors by kind, worst latency of
unaffected requests against their p99, each host's recovery) and every failed check.
"""
from __future__ import annotations

import argparse
import json
import pathlib
import sys

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import bench as base  # noqa: E402  (tests/support/ on sys.path)

from fault_injection import SO  # noqa: E402
from native import build_target  # noqa: E402
from soak_checks import describe  # noqa: E402
from soak_run import Config, run  # noqa: E402


def _words(text: str) -> tuple[str, ...]:
    return tuple(w.strip() for w in text.split(",") if w.strip())


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--minutes", type=float, default=5.0, help="faults for this long (5)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--clients", type=int, default=16)
    ap.add_argument("--warmup", type=float, default=Config.warmup_s, help="seconds (15)")
    ap.add_argument("--faults", default="", help="only these, comma-separated: kill, hold, "
                    "spawn_fail (default: all)")
    ap.add_argument("--hosts", default="", help="hit only these hosts, comma-separated: torch, "
                    "fault (default: every isolated one)")
    ap.add_argument("--install", help="the install tree (default: the newest install/)")
    ap.add_argument("--json", help="also write the figures and failures to this file")
    args = ap.parse_args()
    cfg = Config(seconds=args.minutes * 60, clients=args.clients, seed=args.seed,
                 warmup_s=args.warmup, faults=_words(args.faults), hosts=_words(args.hosts))
    verdict = run(base.find_install(args.install), build_target("redisai_fault", SO), cfg)
    print("\n".join(describe(verdict)))
    if args.json:
        doc = {"config": {k: v for k, v in vars(cfg).items()}, "failures": verdict.failures,
               "figures": verdict.figures, "machine": base.machine_facts()}
        pathlib.Path(args.json).write_text(json.dumps(doc, indent=1))
        base.wrote(pathlib.Path(args.json))
    return 1 if verdict.failures else 0


if __name__ == "__main__":
    sys.exit(main())
