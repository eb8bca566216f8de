"""Servers for the persistence and replication tests: started on a chosen data dir (so a
second server can load what the first one wrote), INFO waits, and reading Redis 7's
multi-part AOF (appendonlydir/ with a manifest naming a base and an incr file).
"""
from __future__ import annotations

import os
import pathlib
import shutil
from typing import Any, Sequence

from helpers import info_field, wait_until
from redis_server import RedisServer
from resp import RawClient


class Servers:
    """Starts servers and stops them (and removes their dirs) at the end of a test."""

    def __init__(self, module_path: pathlib.Path, module_args: Sequence[str]) -> None:
        self.module_path = module_path
        self.module_args = list(module_args)
        self.started: list[RedisServer] = []

    def start(self, data_dir: str | None = None, extra: Sequence[str] = (),
              module_args: Sequence[str] | None = None) -> RedisServer:
        # A later --dir wins over the one RedisServer gives every server.
        ex = list(extra) + (["--dir", data_dir] if data_dir else [])
        args = self.module_args if module_args is None else list(module_args)
        srv = RedisServer(self.module_path, args, extra=ex)
        if data_dir:
            srv.data_dir = data_dir
        else:
            srv.data_dir = srv.dir
        self.started.append(srv)
        return srv

    def close(self) -> None:
        dirs = set()
        for srv in self.started:
            srv.stop()
            dirs.add(srv.dir)
            dirs.add(srv.data_dir)
        for d in dirs:
            shutil.rmtree(d, ignore_errors=True)


def backend_name(install_dir: pathlib.Path, framework: str) -> str:
    """The name of the install tree's default backend of a framework ("onnxruntime", "torch",
    "tensorflow"): its folder's, which the link backends/redisai_<framework> points to. This
    is the name `AI.MODELSTORE ... BACKEND <name>` takes for the backend the module arguments
    load by path (docs/isolation.md)."""
    link = install_dir / "backends" / f"redisai_{framework}"
    return os.readlink(link)[len("redisai_"):]


def info(c: RawClient, section: str, field: str) -> str | None:
    return info_field(c.execute("INFO", section), field)


def wait_info(c: RawClient, section: str, want: dict[str, str], timeout: float = 60.0) -> None:
    ok = wait_until(lambda: all(info(c, section, k) == v for k, v in want.items()), timeout,
                    interval=0.05)
    if not ok:
        got = {k: info(c, section, k) for k in want}
        raise AssertionError(f"INFO {section}: wanted {want}, still {got} after {timeout}s")


def wait_rewrite_done(c: RawClient) -> None:
    wait_info(c, "persistence", {"aof_rewrite_in_progress": "0", "aof_rewrite_scheduled": "0"})
    assert info(c, "persistence", "aof_last_bgrewrite_status") == "ok"


def wait_bgsave_done(c: RawClient) -> None:
    wait_info(c, "persistence", {"rdb_bgsave_in_progress": "0"})
    assert info(c, "persistence", "rdb_last_bgsave_status") == "ok"


# --- AOF files -------------------------------------------------------------------------------

def aof_files(data_dir: str) -> dict[str, list[pathlib.Path]]:
    """The manifest's files by type: 'b' (base), 'i' (incr), 'h' (history)."""
    d = pathlib.Path(data_dir) / "appendonlydir"
    out: dict[str, list[pathlib.Path]] = {"b": [], "i": [], "h": []}
    manifest = next(d.glob("*.manifest"))
    for line in manifest.read_text().splitlines():
        words = line.split()
        fields = dict(zip(words[::2], words[1::2]))
        out[fields["type"]].append(d / fields["file"])
    return out


def parse_commands(data: bytes) -> list[list[bytes]]:
    """The commands of an AOF file written in RESP (no RDB preamble)."""
    assert not data.startswith((b"REDIS", b"VALKEY")), "file has an RDB preamble, not commands"
    cmds, pos = [], 0
    while pos < len(data):
        if data[pos:pos + 1] == b"#":  # annotation line (timestamps)
            pos = data.index(b"\r\n", pos) + 2
            continue
        assert data[pos:pos + 1] == b"*", f"not a command at offset {pos}: {data[pos:pos + 20]!r}"
        end = data.index(b"\r\n", pos)
        n = int(data[pos + 1:end])
        pos = end + 2
        args = []
        for _ in range(n):
            assert data[pos:pos + 1] == b"$", f"not a bulk at offset {pos}"
            end = data.index(b"\r\n", pos)
            ln = int(data[pos + 1:end])
            pos = end + 2
            args.append(data[pos:pos + ln])
            assert data[pos + ln:pos + ln + 2] == b"\r\n"
            pos += ln + 2
        cmds.append(args)
    return cmds


def read_commands(paths: list[pathlib.Path]) -> list[list[bytes]]:
    out: list[list[bytes]] = []
    for p in paths:
        out += parse_commands(p.read_bytes())
    return out


def names(cmds: list[list[bytes]]) -> set[str]:
    return {c[0].decode().upper() for c in cmds}


def by_key(cmds: list[list[bytes]], name: str) -> dict[bytes, list[bytes]]:
    return {c[1]: c for c in cmds if c[0].upper() == name.encode()}


def to_bytes(args: Sequence[Any]) -> list[bytes]:
    return [a if isinstance(a, bytes) else str(a).encode() for a in args]
