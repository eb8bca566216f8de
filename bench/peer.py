"""RedisAI 1.2.7 as a peer that a benchmark measures beside the module, in the same run.

The peer is the user's own build of RedisAI at tag v1.2.7 (its public source, built against the
same framework wheels as this project); a benchmark takes its redisai.so as --peer PATH and never
ships, builds or finds it. Its backends are found beside the module, as RedisAI's own layout has
them (<dir of PATH>/backends/redisai_<torch|onnxruntime|tensorflow>/redisai_<...>.so), or given
one by one with --peer-backend KIND=PATH. It is started with one backend and no other argument:
RedisAI's own defaults (one worker per queue, the frameworks' thread pools).

RedisAI 1.2.7 accepts the commands the benchmarks send (AI.MODELSTORE, AI.TENSORSET,
AI.MODELEXECUTE, AI.TENSORGET, AI.DAGEXECUTE with ROUTING or LOAD); its INFO lacks the module's
counters (ai_helper_runs, ai_completions, ...), which the benchmarks then show as n/a.
"""
from __future__ import annotations

import argparse
import pathlib
from dataclasses import dataclass, field
from typing import Any

LABEL = "redisai-1.2.7"  # its servers' label, and the compare benchmark's stack
NAME = "RedisAI 1.2.7"   # how tables head its column
KINDS = ("TF", "TORCH", "ONNX")
BACKEND_DIRS = {"TF": "tensorflow", "TORCH": "torch", "ONNX": "onnxruntime"}


@dataclass
class Peer:
    """The peer's module and, per backend kind, the backend it loads."""
    module: pathlib.Path
    backends: dict[str, pathlib.Path] = field(default_factory=dict)
    version: str = ""  # what its server said (MODULE LIST), once one ran

    def learn_version(self, module_list: list[Any]) -> None:
        """Records the version a server of the peer reports; warns when it is not 1.2.7 (the
        tables still say RedisAI 1.2.7, the results file the version measured)."""
        self.version = version(module_list)
        if self.version != "1.2.7":
            print(f"warning: --peer {self.module} reports version {self.version or 'none'}, "
                  "not 1.2.7", flush=True)

    def args(self, kind: str) -> list[str]:
        """Its module arguments for a server of one backend: the backend's path, no setting."""
        return [kind, str(self.backends[kind])]

    def describe(self) -> dict[str, Any]:
        """What a results file records of it."""
        return {"label": LABEL, "module": str(self.module), "version": self.version,
                "backends": {k: str(p) for k, p in self.backends.items()}}


def add_options(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--peer", metavar="PATH",
                    help=f"{NAME}'s redisai.so, measured beside the module at its defaults (built "
                         "by you from RedisAI's source at tag v1.2.7); its backends are found in "
                         "backends/redisai_<name>/ beside it")
    ap.add_argument("--peer-backend", action="append", default=[], metavar="KIND=PATH",
                    help="the peer's backend of KIND (TF, TORCH, ONNX) at PATH instead")


def backend_path(module: pathlib.Path, kind: str) -> pathlib.Path:
    """Where RedisAI's layout puts a backend: beside the module, in backends/redisai_<name>/."""
    name = BACKEND_DIRS[kind]
    return module.parent / "backends" / f"redisai_{name}" / f"redisai_{name}.so"


def overrides(values: list[str]) -> dict[str, pathlib.Path]:
    """--peer-backend KIND=PATH entries by kind."""
    out: dict[str, pathlib.Path] = {}
    for v in values:
        kind, sep, path = v.partition("=")
        kind = kind.strip().upper()
        if not sep or kind not in KINDS or not path:
            raise SystemExit(f"--peer-backend {v}: expected KIND=PATH, KIND one of "
                             + ", ".join(KINDS))
        out[kind] = pathlib.Path(path)
    return out


def from_options(opts: argparse.Namespace, kinds: list[str]) -> Peer | None:
    """The peer of --peer and --peer-backend for these backend kinds; None without --peer.
    Stops with the path it looked at when the module or a backend it needs is missing."""
    given = overrides(opts.peer_backend)
    if not opts.peer:
        if given:
            raise SystemExit("--peer-backend needs --peer PATH (the peer's redisai.so)")
        return None
    module = pathlib.Path(opts.peer).resolve()
    if not module.is_file():
        raise SystemExit(f"--peer {opts.peer}: no such file (the redisai.so of {NAME})")
    peer = Peer(module)
    for kind in kinds:
        path = given.get(kind) or backend_path(module, kind)
        if not path.is_file():
            raise SystemExit(f"--peer: no {kind} backend at {path}; give its path with "
                             f"--peer-backend {kind}=PATH")
        peer.backends[kind] = path.resolve()
    return peer


def version(module_list: list[Any]) -> str:
    """The version of the `ai` module in a MODULE LIST reply ("1.2.7" from ver 10207); "" when
    absent."""
    for entry in module_list:
        words = [w if isinstance(w, list) else bytes(w) for w in entry]  # "args" is a list
        pairs = dict(zip(words[::2], words[1::2]))
        if pairs.get(b"name") == b"ai" and b"ver" in pairs:
            ver = int(pairs[b"ver"])
            return f"{ver // 10000}.{ver // 100 % 100}.{ver % 100}"
    return ""


def ratio(a: dict[str, Any] | None, b: dict[str, Any] | None) -> float | None:
    """a's median req/s over b's (cells with "rps": {"median": ...}); None when either lacks it."""
    if not a or not b or not b["rps"]["median"]:
        return None
    return a["rps"]["median"] / b["rps"]["median"]
