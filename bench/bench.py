"""What every benchmark of bench/ shares (not a benchmark itself): a lean RESP client, the
install tree to measure, medians, and the result file with the machine it was measured on.

* Client: RESP2 over one socket, the last argument sent without a copy;
* find_install / parse_installs: the tree(s) given, else the newest install/redisai-*/;
* add_out_option / default_out: --out DIR, by default a scratch folder outside the repository
  ($XDG_CACHE_HOME/redisai-bench, else ~/.cache/redisai-bench), so that a run never changes a
  committed result; `--out bench/results` refreshes one deliberately;
* write_result: <out>/<name>.json, with `machine` (machine_facts()) added when the benchmark
  did not record it: CPUs, their model, the kernel, Python, the Redis server, the load; it
  prints the path it wrote (wrote() for a benchmark's other files).

Importing it puts tests/support/ (RedisServer, the model makers) and the repository root on
sys.path, as every benchmark needs. The list of benchmarks: bench/run (bench/README.md).
"""
from __future__ import annotations

import argparse
import json
import os
import pathlib
import platform
import socket
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "support"))
# The repository root too: tests/support/redis_server.py imports build_tools (the server by name).
sys.path.insert(1, str(ROOT))

from redis_server import RedisServer, server_exe  # noqa: E402  (tests/support/ on sys.path)

KB = 1024
MB = 1024 * KB


class Client:
    """A lean RESP2 client: the last argument is sent without a copy, bulk replies are
    received straight into a preallocated buffer. Errors raise."""

    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port))
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buf = bytearray()

    def send(self, *args: bytes | str | int) -> None:
        enc = [a if isinstance(a, (bytes, bytearray, memoryview)) else str(a).encode() for a in args]
        head = [b"*%d\r\n" % len(enc)]
        for a in enc[:-1]:
            head += [b"$%d\r\n" % len(a), a, b"\r\n"]
        last = enc[-1]
        head.append(b"$%d\r\n" % len(last))
        if len(last) > 64 * KB:
            self.sock.sendall(b"".join(head))
            self.sock.sendall(last)
            self.sock.sendall(b"\r\n")
        else:
            self.sock.sendall(b"".join(head) + bytes(last) + b"\r\n")

    def _line(self) -> bytes:
        while True:
            i = self.buf.find(b"\r\n")
            if i >= 0:
                line = bytes(self.buf[:i])
                del self.buf[: i + 2]
                return line
            chunk = self.sock.recv(1 << 16)
            if not chunk:
                raise ConnectionError("closed")
            self.buf += chunk

    def read(self):
        line = self._line()
        t, body = line[:1], line[1:]
        if t in (b"+", b":"):
            return body
        if t == b"-":
            raise RuntimeError(body.decode(errors="replace"))
        if t == b"$":
            n = int(body)
            if n < 0:
                return None
            out = bytearray(n + 2)
            view = memoryview(out)
            have = min(len(self.buf), n + 2)
            view[:have] = self.buf[:have]
            del self.buf[:have]
            while have < n + 2:
                got = self.sock.recv_into(view[have:], min(n + 2 - have, 4 * MB))
                if not got:
                    raise ConnectionError("closed")
                have += got
            return view[:n]
        if t == b"*":
            return [self.read() for _ in range(int(body))]
        raise ConnectionError(f"bad reply {line!r}")

    def call(self, *args):
        self.send(*args)
        return self.read()


def find_install(explicit: str | None) -> pathlib.Path:
    if explicit:
        return pathlib.Path(explicit)
    env = os.environ.get("REDISAI_INSTALL_DIR")
    if env:
        return pathlib.Path(env)
    trees = sorted((ROOT / "install").glob("redisai-*/redisai.so"))
    if not trees:
        sys.exit("no install/redisai-*/redisai.so: build first "
                 "(.venv/bin/python -m build_tools build)")
    return trees[-1].parent


def parse_installs(values: list[str]) -> list[tuple[str, pathlib.Path]]:
    """--install DIR or --install LABEL=DIR, repeatable; none: the newest install tree."""
    if not values:
        return [("", find_install(None))]
    out = []
    for v in values:
        label, sep, path = v.partition("=")
        if not sep:
            label, path = "", v
        out.append((label, pathlib.Path(path).resolve()))
    return out


def med(xs: list[float]) -> float:
    return float(statistics.median(xs))


def stop_checked(client: Client, srv: RedisServer, label: str) -> None:
    """Closes client and stops srv; fails with the server's log if it had died meanwhile."""
    client.sock.close()
    alive = srv.alive()
    log = srv.log() if not alive else ""
    srv.stop()
    assert alive, f"{label} server died:\n{log}"


def _cpu_model() -> str:
    try:
        for line in pathlib.Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _server_version(exe: str) -> str:
    try:
        out = subprocess.run([exe, "--version"], capture_output=True, text=True, timeout=10)
        return out.stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def machine_facts() -> dict:
    """The machine a result was measured on: CPUs (the process's affinity and the host's),
    their model, the kernel, Python, the Redis server the benchmarks start, the load."""
    exe = server_exe()
    return {"cpus": len(os.sched_getaffinity(0)), "cpus_online": os.cpu_count(),
            "cpu_model": _cpu_model(), "kernel": platform.release(),
            "python": platform.python_version(), "server": exe,
            "server_version": _server_version(exe), "loadavg": os.getloadavg()}


def default_out() -> pathlib.Path:
    """Where a benchmark writes without --out: $XDG_CACHE_HOME/redisai-bench, else
    ~/.cache/redisai-bench (as build_tools keeps its cache), never inside the repository, so that
    a run leaves the committed results of bench/results/ alone. A cache folder set inside the
    repository gives way to the system's temporary folder."""
    cache = os.environ.get("XDG_CACHE_HOME")
    folder = (pathlib.Path(cache) if cache else pathlib.Path.home() / ".cache") / "redisai-bench"
    if folder.resolve().is_relative_to(ROOT.resolve()):
        folder = pathlib.Path(tempfile.gettempdir()) / f"redisai-bench-{os.getuid()}"
    return folder


def add_out_option(ap: argparse.ArgumentParser, what: str = "the result JSON") -> None:
    """--out DIR for a benchmark that writes result files (opts.out, a Path)."""
    ap.add_argument("--out", type=pathlib.Path, default=default_out(), metavar="DIR",
                    help=f"folder of {what} (default: {default_out()}, outside the repository; "
                         "--out bench/results refreshes a committed result)")


def wrote(path: pathlib.Path) -> pathlib.Path:
    """Says that a benchmark wrote path (every file it writes is printed)."""
    print(f"wrote {path}", flush=True)
    return path


def write_result(out: str | pathlib.Path, name: str, doc: dict) -> pathlib.Path:
    """doc as <out>/<name>.json (the folder made if needed): a benchmark's result file, with
    `machine` (machine_facts()) unless the benchmark recorded it already; prints its path."""
    folder = pathlib.Path(out)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.json"
    doc.setdefault("machine", machine_facts())
    path.write_text(json.dumps(doc, indent=1))
    return wrote(path)


def timed(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0
