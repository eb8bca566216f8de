"""AI.CONFIG LOADBACKEND: what the manifest check adds to loading each backend.

For each backend (TF, TORCH, ONNX) and each of two folders, the install tree's own (with
its redisai_backend.manifest: SHA-256 of the backend .so, sizes of every other file) and
a hard-linked clone of it without the manifest, a fresh redis-server per sample runs
`AI.CONFIG LOADBACKEND <kind> <folder>/redisai_<name>.so`. Two figures per sample:

* the LOADBACKEND round trip seen by the client (dominated by the framework's own
  initialisation);
* the loader's "file checks" time from its log line: everything before dlopen (real path,
  ELF inspection, manifest), the part the manifest changes.

Samples alternate between the two folders to cancel drift; medians are printed with the
difference.

    bench/run loadbackend [--install DIR] [--samples N] [--kinds TF,ONNX]
"""
from __future__ import annotations

import argparse
import os
import pathlib
import re
import shutil
import statistics
import sys
import tempfile
import time

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import bench as base  # noqa: E402  (puts tests/support/ on sys.path)

from redis_server import RedisServer  # noqa: E402
from helpers import LogMark  # noqa: E402
from resp import RawClient  # noqa: E402

NAMES = {"TF": "tensorflow", "TORCH": "torch", "ONNX": "onnxruntime"}
MANIFEST = "redisai_backend.manifest"
CHECKS_RE = re.compile(r"file checks (\d+(?:\.\d+)?) ms")


def _link_or_copy(src: str, dst: str) -> None:
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)


def clone_without_manifest(folder: pathlib.Path, dst: pathlib.Path) -> pathlib.Path:
    shutil.copytree(folder, dst, symlinks=True, copy_function=_link_or_copy)
    (dst / MANIFEST).unlink()
    return dst


def one_load(module: pathlib.Path, kind: str, so: pathlib.Path) -> tuple[float, float]:
    """(round trip s, file checks ms) of one LOADBACKEND on a fresh server."""
    srv = RedisServer(module)
    try:
        with RawClient(srv.port) as c:
            mark = LogMark(srv.logfile)
            t0 = time.perf_counter()
            reply = c.execute("AI.CONFIG", "LOADBACKEND", kind, str(so))
            elapsed = time.perf_counter() - t0
            if reply != "OK":
                raise RuntimeError(f"LOADBACKEND {kind} {so}: {reply!r}")
            line = mark.wait_for_line("Loaded", str(so))
            m = CHECKS_RE.search(line)
            if m is None:
                raise RuntimeError(f"no 'file checks' figure in {line!r}")
            return elapsed, float(m.group(1))
    finally:
        srv.stop()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--install", help="install tree (default: the newest install/redisai-*)")
    ap.add_argument("--samples", type=int, default=5, help="samples per folder (default 5)")
    ap.add_argument("--kinds", default="TF,TORCH,ONNX")
    args = ap.parse_args()
    install = base.find_install(args.install)
    module = install / "redisai.so"
    print(f"install: {install}; {args.samples} sample(s) per folder, a fresh server each")
    print(f"{'backend':8} {'folder':12} {'LOADBACKEND p50':>16} {'file checks p50':>16}"
          f" {'.so size':>10}")
    with tempfile.TemporaryDirectory(prefix="bench-loadbackend-", dir=install.parent) as tmp:
        for kind in args.kinds.split(","):
            name = NAMES[kind]
            folder = (install / "backends" / f"redisai_{name}").resolve()
            if not (folder / MANIFEST).is_file():
                print(f"{kind}: skipped, {folder}/{MANIFEST} is absent")
                continue
            bare = clone_without_manifest(folder, pathlib.Path(tmp) / folder.name)
            so_name = f"redisai_{name}.so"
            runs: dict[str, list[tuple[float, float]]] = {"manifest": [], "no manifest": []}
            for _ in range(args.samples):
                runs["manifest"].append(one_load(module, kind, folder / so_name))
                runs["no manifest"].append(one_load(module, kind, bare / so_name))
            med = {}
            for label, xs in runs.items():
                rt = statistics.median(x[0] for x in xs)
                ck = statistics.median(x[1] for x in xs)
                med[label] = (rt, ck)
                size = (folder / so_name).stat().st_size
                print(f"{kind:8} {label:12} {rt * 1e3:13.1f} ms {ck:13.3f} ms {size / 1e6:8.2f} MB")
            d_rt = (med["manifest"][0] - med["no manifest"][0]) * 1e3
            d_ck = med["manifest"][1] - med["no manifest"][1]
            print(f"{kind:8} {'difference':12} {d_rt:+13.1f} ms {d_ck:+13.3f} ms"
                  f"   (manifest check = {d_ck / (med['manifest'][0] * 1e3) * 100:.2f}%"
                  " of the load)")
            shutil.rmtree(bare)
    return 0


if __name__ == "__main__":
    sys.exit(main())
