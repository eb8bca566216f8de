"""`python -m build_tools serve [--port N] [redis-server arguments] [-- module arguments]`:
exec redis-server with RedisAI.

Loads install/redisai-<version>/redisai.so and passes every backend present
in the tree at load time (TF, TORCH, ONNX, TFLITE <path>), then the module
arguments. The rule is `redisai-server`'s (python/redisai_module/command_line.py):
words before `--` go to redis-server, words after it to the module, and the
server binds 127.0.0.1 unless given `--bind`. Prints the exact command line, then
replaces this process with redis-server.
"""
from __future__ import annotations

import importlib.util
import os
import shlex
import shutil
import sys
from pathlib import Path
from types import ModuleType
from typing import Sequence

from . import paths
from .errors import BuildError
from .frameworks import FRAMEWORKS

_COMMAND_LINE = paths.ROOT / "python" / "redisai_module" / "command_line.py"


def _load_command_line() -> ModuleType:
    """The wheel's command_line.py, by path: importing the package needs the
    _build_info.py that only setup.py writes."""
    spec = importlib.util.spec_from_file_location("redisai_module_command_line", _COMMAND_LINE)
    assert spec is not None and spec.loader is not None, _COMMAND_LINE
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


command_line = _load_command_line()


def server_command(install: Path, port: int, extra: Sequence[str] = (),
                   module_args: Sequence[str] = (), exe: str = "redis-server") -> list[str]:
    """redis-server's argv: port, extra arguments (and bind 127.0.0.1 unless they
    bind), then --loadmodule, the backends, the module arguments."""
    install = install.resolve()
    core = install / "redisai.so"
    if not core.is_file():
        raise BuildError(f"no {core}: run `python -m build_tools build` first")
    backends = []
    for spec in FRAMEWORKS:
        lib = install / "backends" / f"redisai_{spec.backend}" / f"redisai_{spec.backend}.so"
        if lib.is_file():
            backends.append((spec.serve_keyword, str(lib)))
    return command_line.redis_server_argv(exe, ["--port", str(port), *extra], str(core),
                                          backends, module_args)


def serve(install: Path, port: int, extra: Sequence[str] = (),
          module_args: Sequence[str] = ()) -> None:
    exe = shutil.which("redis-server")
    if exe is None:
        raise BuildError("redis-server not found: run `python3 -m build_tools setup`")
    cmd = server_command(install, port, extra, module_args, exe=exe)
    # Frameworks log on load unless told not to; the core may set these too.
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")
    where = ", ".join(f"{a}:{port}" for a in command_line.bind_addresses(cmd)) or f"port {port}"
    print(f"[serve] {shlex.join(cmd)}", flush=True)
    print(f"[serve] listening on {where}", flush=True)
    sys.stderr.flush()
    os.execv(exe, cmd)
