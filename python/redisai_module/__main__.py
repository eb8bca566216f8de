"""`python -m redisai_module [--json]`: where the module and its backends are."""
from __future__ import annotations

import argparse
import json
import shutil
import sys
from typing import Sequence

from . import VERSION, backend_folders, backend_paths, backends_path, install_dir, module_path


def paths_report() -> dict[str, object]:
    """What `python -m redisai_module` prints."""
    return {
        "version": VERSION,
        "install_dir": str(install_dir()),
        "module": str(module_path()),
        "backends_path": str(backends_path()),
        "backends": {name: str(so) for name, so in backend_paths().items()},
        "backend_folders": [str(f) for f in backend_folders()],
        "redis_server": shutil.which("redis-server"),
    }


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m redisai_module",
                                description=f"Paths of RedisAI {VERSION} in this environment.")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    args = p.parse_args(argv)
    report = paths_report()
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    print(f"RedisAI {VERSION}")
    print(f"module         {report['module']}")
    print(f"backends path  {report['backends_path']}")
    for name, so in backend_paths().items():
        print(f"backend        {name:<12} {so}")
    for folder in backend_folders():
        print(f"folder         {folder.name}")
    server = report["redis_server"] or "not found on PATH (redisai-server needs it)"
    print(f"redis-server   {server}")
    print("start a server: redisai-server [redis-server arguments] [-- module arguments]")
    return 0


if __name__ == "__main__":
    sys.exit(main())
