"""`redisai-server [redis-server arguments] [-- module arguments]`.

Replaces itself with redis-server, loading this package's redisai.so and every
backend of its tree (the build's own version of each, see backend_paths()):

    redis-server <arguments> [--bind 127.0.0.1] --loadmodule .../redisai.so
        TF ... TORCH ... ONNX ... TFLITE ... <module arguments>

Every argument before `--` goes to redis-server unchanged (port, bind, dir,
a config file first...); those after `--` are module arguments
(THREADS_PER_QUEUE 4, ISOLATE TORCH, ...). It listens on 127.0.0.1 unless
given `--bind` (or a config file). REDIS_SERVER names another redis-server
executable. The command line is printed to stderr first. The rule is
command_line.py's, which `python -m build_tools serve` follows too.
"""
from __future__ import annotations

import os
import shlex
import shutil
import sys
from typing import Sequence

from . import SERVE_KEYWORDS, backend_paths, module_path
from .command_line import redis_server_argv, split_arguments


def server_command(argv: Sequence[str], exe: str) -> list[str]:
    """redis-server's argv for redisai-server's own arguments."""
    server_args, module_args = split_arguments(argv)
    backends = [(SERVE_KEYWORDS[name], str(so)) for name, so in backend_paths().items()
                if name in SERVE_KEYWORDS]
    return redis_server_argv(exe, server_args, str(module_path()), backends, module_args)


def _usage() -> str:
    return __doc__ or ""


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] in (["-h"], ["--help"]):
        print(_usage())
        return 0
    exe = os.environ.get("REDIS_SERVER") or shutil.which("redis-server")
    if not exe:
        print("redisai-server: redis-server not found on PATH (install Redis 7, e.g. "
              "apt-get install redis-server, or set REDIS_SERVER)", file=sys.stderr)
        return 127
    if not module_path().is_file():
        print(f"redisai-server: {module_path()} is missing: reinstall redisai-module",
              file=sys.stderr)
        return 1
    cmd = server_command(args, exe)
    # Frameworks log on load unless told not to.
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")
    print(f"[redisai-server] {shlex.join(cmd)}", file=sys.stderr, flush=True)
    try:
        os.execv(exe, cmd)
    except OSError as exc:
        print(f"redisai-server: cannot run {exe}: {exc}", file=sys.stderr)
        return 126
    return 0  # not reached


if __name__ == "__main__":
    sys.exit(main())
