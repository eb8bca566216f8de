"""What both fuzzers share: a real redis-server with every backend, commands sent with a
5 s socket timeout, crash and hang detection, restart after a crash, and the counts.

A *crash* is a server process that died or logged "crashed by signal" / an assertion; a
*hang* is a reply that did not come within REPLY_TIMEOUT seconds. Both are recorded with
the command that caused them (the last one sent), and the server is restarted so that a
long run goes on.
"""
from __future__ import annotations

import collections
import dataclasses
import pathlib
import shutil
import socket
import subprocess
import time
from typing import Any, Sequence

from paths import backend_file
from redis_server import RedisServer
from resp import RawClient, RespError

REPLY_TIMEOUT = 5.0
CRASH_MARKS = ("crashed by signal", "ASSERTION FAILED", "=== REDIS BUG REPORT")


def has_error(reply: Any) -> bool:
    """An error reply, or an array (a DAG's) with an error anywhere in it."""
    if isinstance(reply, RespError):
        return True
    if isinstance(reply, list):
        return any(has_error(x) for x in reply)
    return False


def short(args: Sequence[Any], limit: int = 300) -> str:
    parts = []
    for a in args:
        b = a if isinstance(a, bytes) else str(a).encode()
        parts.append(repr(b[:40]) + (f"..({len(b)}B)" if len(b) > 40 else ""))
    text = " ".join(parts)
    return text if len(text) <= limit else text[:limit] + f" ... ({len(args)} args)"


@dataclasses.dataclass
class Counts:
    tried: int = 0
    ok: int = 0
    errors: int = 0
    crashes: int = 0
    hangs: int = 0
    violations: int = 0
    by_command: collections.Counter = dataclasses.field(default_factory=collections.Counter)
    error_kinds: collections.Counter = dataclasses.field(default_factory=collections.Counter)
    findings: list[str] = dataclasses.field(default_factory=list)

    def report(self, title: str) -> str:
        lines = [f"{title}: commands tried {self.tried}, ok replies {self.ok}, error replies "
                 f"{self.errors}, crashes {self.crashes}, hangs {self.hangs}, invariant "
                 f"violations {self.violations}"]
        for name, n in sorted(self.by_command.items()):
            lines.append(f"  {name:22} {n}")
        lines.append("  most frequent error replies:")
        for text, n in self.error_kinds.most_common(10):
            lines.append(f"  {n:8}  {text}")
        lines += [f"  FINDING {f}" for f in self.findings[:50]]
        return "\n".join(lines)


class Target:
    """The server under test, restarted after a crash or a hang."""

    def __init__(self, install_dir: pathlib.Path, extra: Sequence[str] = ()) -> None:
        self.install_dir = install_dir
        self.extra = list(extra)
        self.server: RedisServer | None = None
        self.client: RawClient | None = None
        self.log_offset = 0
        self.history: collections.deque = collections.deque(maxlen=4)
        self.start()

    def start(self) -> None:
        args = []
        for kind, name in (("TF", "tensorflow"), ("TORCH", "torch"), ("ONNX", "onnxruntime")):
            args += [kind, str(backend_file(self.install_dir, name))]
        self.server = RedisServer(self.install_dir / "redisai.so", args, extra=self.extra)
        self.client = RawClient(self.server.port, timeout=REPLY_TIMEOUT)
        self.log_offset = 0

    def stop(self) -> None:
        if self.client:
            self.client.close()
        if self.server:
            self.server.stop()

    def restart(self) -> None:
        self.stop()
        self.start()

    def new_log(self) -> str:
        text = self.server.log()
        new = text[self.log_offset:]
        self.log_offset = len(text)
        return new

    def crashed(self) -> bool:
        return not self.server.alive() or any(m in self.new_log() for m in CRASH_MARKS)

    def send(self, args: Sequence[Any], counts: Counts, name: str) -> tuple[str, Any]:
        """('ok'|'error'|'crash'|'hang', reply). Restarts the server after a crash or hang."""
        counts.tried += 1
        counts.by_command[name] += 1
        self.history.append(args)
        started = time.monotonic()
        try:
            reply = self.client.execute(*args)
        except (socket.timeout, TimeoutError):
            return self._timed_out(args, counts, started)
        except (ConnectionError, OSError):
            counts.crashes += 1
            counts.findings.append(f"crash: {short(args)}\n{self._before()}"
                                   f"{self.server.log()[-3000:]}")
            self.restart()
            return "crash", None
        if has_error(reply):
            counts.errors += 1
            if isinstance(reply, RespError):
                counts.error_kinds[str(reply)[:60]] += 1
            return "error", reply
        counts.ok += 1
        return "ok", reply

    def _before(self) -> str:
        prev = list(self.history)[:-1]
        return "".join(f"  after: {short(a, 200)}\n" for a in prev)

    def _timed_out(self, args: Sequence[Any], counts: Counts, started: float) -> tuple[str, Any]:
        """No reply in REPLY_TIMEOUT: a hang. Waits 30 s more to tell a slow
        reply from none at all (both count as hangs), then restarts the server."""
        alive = self.server.alive()
        late = "no reply in 30 s"
        stacks = ""
        if alive:
            self.client.sock.settimeout(30.0)
            try:
                self.client.read()
                late = f"replied after {time.monotonic() - started:.1f} s"
            except OSError:
                pass
        crashed = self.crashed()
        if alive and not crashed and late.startswith("no reply"):
            stacks = self.stacks()
        # A crashed Redis stays alive a while in its crash report's memory test.
        what = "crash" if crashed else "hang"
        counts.hangs += int(not crashed)
        counts.crashes += int(crashed)
        counts.findings.append(f"{what} ({late}): {short(args)}\n{self._before()}"
                               f"{self.server.log()[-2500:] if crashed else stacks}")
        self.restart()
        return what, None

    def stacks(self) -> str:
        """The hung server's threads, when gdb is there to show them."""
        if not shutil.which("gdb"):
            return ""
        res = subprocess.run(["gdb", "-p", str(self.server.proc.pid), "-batch", "-nx",
                              "-ex", "thread apply 1 bt 40",
                              "-ex", "thread apply all bt 10"], capture_output=True, text=True,
                             timeout=120)
        keep = [ln for ln in res.stdout.splitlines() if ln.startswith(("Thread", "#"))]
        return "\n".join(keep[:400]) + "\n"

    def check_batch(self, counts: Counts, last: Sequence[Any]) -> None:
        """After every batch: the server answers PING on a new connection and logged no
        crash. A crash found here is charged to the batch's last command."""
        ok = False
        try:
            with RawClient(self.server.port, timeout=REPLY_TIMEOUT) as c:
                ok = c.execute("PING") == "PONG"
        except OSError:
            ok = False
        if not ok or self.crashed():
            counts.crashes += 1
            counts.findings.append(f"crash after batch ending with: {short(last)}\n"
                                   f"{self.server.log()[-3000:]}")
            self.restart()
