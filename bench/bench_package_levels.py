"""Packaging: gzip level against packing time and archive size (python -m build_tools package).

Packs one backend folder (default: the TensorFlow one, the largest) the way
`python -m build_tools package` does, once per gzip level, into a temporary
folder, and prints seconds, MB/s and archive size per level, and the ratios
against level 1 (the default of `package`). Then times unpacking the level-1
archive with install-package's unpacker and its manifest check.

    bench/run package_levels [--install DIR] [--backend tensorflow] [--levels 1 6]
"""
from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from build_tools import manifest, package, paths, unpack  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--install", type=Path, default=None)
    ap.add_argument("--backend", default="tensorflow")
    ap.add_argument("--levels", type=int, nargs="+", default=[1, 6])
    args = ap.parse_args()
    install = args.install or paths.newest_install_dir()
    if install is None:
        print("no install tree: run `python -m build_tools build` first", file=sys.stderr)
        return 2
    folders = [f for f in package.backend_folders(install)
               if f.name.startswith(f"redisai_{args.backend}-")]
    if not folders:
        print(f"no {args.backend} folder in {install}/backends", file=sys.stderr)
        return 2
    folder = folders[0]
    entries = package._entries(folder, folder.name, frozenset())
    results: dict[int, tuple[float, int]] = {}
    with tempfile.TemporaryDirectory(prefix="redisai-bench-pack-") as tmp:
        for level in args.levels:
            dest = Path(tmp) / f"level{level}.tar.gz"
            t0 = time.monotonic()
            package._write(dest, entries, level)
            results[level] = (time.monotonic() - t0, dest.stat().st_size)
        raw = package._total_bytes(entries)
        print(f"\n{folder.name}: {raw / 1e6:.1f} MB of files")
        print(f"{'level':>5} {'seconds':>8} {'MB/s':>7} {'archive MB':>11} {'ratio':>6}")
        for level, (secs, size) in results.items():
            print(f"{level:>5} {secs:>8.1f} {raw / 1e6 / secs:>7.1f} {size / 1e6:>11.1f} "
                  f"{size / raw:>6.3f}")
        base = min(results)
        for level, (secs, size) in results.items():
            if level != base:
                print(f"level {level} vs {base}: {secs / results[base][0]:.2f}x the time, "
                      f"{size / results[base][1]:.3f}x the size")
        staging = Path(tmp) / "unpacked"
        staging.mkdir()
        t0 = time.monotonic()
        top = unpack.unpack(Path(tmp) / f"level{base}.tar.gz", staging)
        t1 = time.monotonic()
        problems = manifest.verify(staging / top)
        t2 = time.monotonic()
        print(f"unpack level {base}: {t1 - t0:.1f} s; manifest verify: {t2 - t1:.1f} s; "
              f"problems: {len(problems)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
