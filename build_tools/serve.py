"""`python -m build_tools serve [--port N]`: exec redis-server with RedisAI.

Loads install/redisai-<version>/redisai.so and passes every backend present
in the tree at load time (TF, TORCH, ONNX, TFLITE <path>). Prints the exact command
line, then replaces this process with redis-server.
"""
from __future__ import annotations

import os
import shlex
import shutil
import sys
from pathlib import Path
from typing import Sequence

from .errors import BuildError
from .frameworks import FRAMEWORKS


def server_command(install: Path, port: int, extra: Sequence[str] = (),
                   exe: str = "redis-server") -> list[str]:
    """redis-server's argv: port, bind, extra arguments, then --loadmodule and backends."""
    install = install.resolve()
    core = install / "redisai.so"
    if not core.is_file():
        raise BuildError(f"no {core}: run `python -m build_tools build` first")
    cmd = [exe, "--port", str(port)]
    if "--bind" not in extra:
        cmd += ["--bind", "127.0.0.1"]
    cmd += list(extra)
    cmd += ["--loadmodule", str(core)]
    for spec in FRAMEWORKS:
        lib = install / "backends" / f"redisai_{spec.backend}" / f"redisai_{spec.backend}.so"
        if lib.is_file():
            cmd += [spec.serve_keyword, str(lib)]
    return cmd


def serve(install: Path, port: int, extra: Sequence[str] = ()) -> None:
    exe = shutil.which("redis-server")
    if exe is None:
        raise BuildError("redis-server not found: run `python3 -m build_tools setup`")
    cmd = server_command(install, port, extra, exe=exe)
    # Frameworks log on load unless told not to; the core may set these too.
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")
    print(f"[serve] {shlex.join(cmd)}", flush=True)
    print(f"[serve] listening on 127.0.0.1:{port}", flush=True)
    sys.stderr.flush()
    os.execv(exe, cmd)
