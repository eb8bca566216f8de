"""redis-server's command line for RedisAI: the one rule `redisai-server` and
`python -m build_tools serve` both follow.

    <redis-server arguments> [-- <module arguments>]

becomes

    redis-server <redis-server arguments> [--bind 127.0.0.1] --loadmodule <redisai.so>
        <KIND path>... <module arguments>

Words before the first `--` are redis-server's (a config file first, `--port`,
`--dir`, ...); words after it are the module's (THREADS_PER_QUEUE 4, ISOLATE TORCH,
...), put after the backends so that they can name or isolate them. The server
listens on the loopback interface unless the redis-server arguments say where:
a `--bind` of their own, or a config file (its `bind` line would be overridden
by a `--bind` after it, redis-server reads the command line last).

Standard library only: build_tools loads this file by path from the source tree,
where the package's _build_info.py does not exist.
"""
from __future__ import annotations

from typing import Iterable, Sequence

LOOPBACK = "127.0.0.1"


def split_arguments(argv: Sequence[str]) -> tuple[list[str], list[str]]:
    """(redis-server arguments, module arguments): the words before the first `--`
    and after it."""
    args = list(argv)
    if "--" not in args:
        return args, []
    cut = args.index("--")
    return args[:cut], args[cut + 1:]


def _says_where_to_bind(server_args: Sequence[str]) -> bool:
    """A `--bind` (redis-server's option names are case-insensitive), or a config
    file: redis-server takes a first word not starting with `-`, or `-` (stdin), as one."""
    if server_args and not server_args[0].startswith("-"):
        return True
    return any(a == "-" or a.lower() == "--bind" for a in server_args)


def redis_server_argv(exe: str, server_args: Sequence[str], module: str,
                      backends: Iterable[tuple[str, str]],
                      module_args: Sequence[str]) -> list[str]:
    """The argv: exe, the redis-server arguments (and `--bind 127.0.0.1` unless they
    say where), `--loadmodule module`, each (keyword, path) backend, the module
    arguments."""
    cmd = [exe, *server_args]
    if not _says_where_to_bind(server_args):
        cmd += ["--bind", LOOPBACK]
    cmd += ["--loadmodule", module]
    for keyword, path in backends:
        cmd += [keyword, path]
    return cmd + list(module_args)


def bind_addresses(argv: Sequence[str]) -> list[str]:
    """The addresses of the last `--bind` of an argv (the one redis-server keeps)."""
    lowered = [a.lower() for a in argv]
    if "--bind" not in lowered:
        return []
    start = len(lowered) - lowered[::-1].index("--bind")
    out: list[str] = []
    for word in argv[start:]:
        if word.startswith("--"):
            break
        out += word.split()
    return out
