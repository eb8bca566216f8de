"""One redis-server process of our own, with the built module, on a free loopback port:
what every test, the fuzzers and bench/ start."""
from __future__ import annotations

import functools
import os
import pathlib
import socket
import subprocess
import tempfile
import time
from typing import Callable, Mapping, Sequence

import redis

from build_tools import pins, servers
from build_tools.errors import BuildError
from resp import RawClient

ISOLATE_ENV = "REDISAI_TEST_ISOLATE"
# A server by name (`pytest --server NAME` sets it): redis-7.0 (Debian's, the default),
# redis-6.2, redis-7.4, valkey-8.1, the executables `python3 -m build_tools setup` puts in
# the cache (build_tools/servers.py).
SERVER_ENV = "REDISAI_TEST_SERVER"
# Another server executable by path, e.g. ci/asan/redis-server (AddressSanitizer preloaded
# into the server only; see ci/asan-tests.sh). Tests read it as "an instrumented server".
SERVER_EXE_ENV = "REDISAI_TEST_SERVER_EXE"


def isolate_args() -> list[str]:
    """`ISOLATE <kind>` module arguments asked for by REDISAI_TEST_ISOLATE ("all" or a
    comma-separated list of kinds; `pytest --isolate ...` sets it): the whole suite can run
    with its backends in backend host processes (docs/isolation.md)."""
    value = os.environ.get(ISOLATE_ENV, "").strip()
    if not value:
        return []
    kinds = ["TF", "TFLITE", "TORCH", "ONNX"] if value.lower() == "all" else \
        [k.strip().upper() for k in value.split(",") if k.strip()]
    return [w for k in kinds for w in ("ISOLATE", k)]


def server_name() -> str:
    """The name of the server the tests run against (REDISAI_TEST_SERVER, else the default)."""
    return os.environ.get(SERVER_ENV, "").strip() or pins.DEFAULT_SERVER


@functools.lru_cache(maxsize=None)
def _named_executable(name: str) -> str:
    try:
        return str(servers.executable(name))
    except BuildError as exc:
        raise RuntimeError(f"{SERVER_ENV}={name}: {exc.message}") from None


def server_exe() -> str:
    """The executable every RedisServer runs unless given one: REDISAI_TEST_SERVER_EXE's
    path, else the executable of REDISAI_TEST_SERVER's name, else Debian's redis-server."""
    exe = os.environ.get(SERVER_EXE_ENV, "").strip()
    if exe:
        return exe
    name = os.environ.get(SERVER_ENV, "").strip()
    return _named_executable(name) if name else "redis-server"


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# Redis 7.0's switches for DEBUG and MODULE LOAD from a client; an older server (6.2) stops
# at them with "Bad directive". Learned per executable from that refusal, not from a version.
PROTECTED_COMMANDS = ("--enable-debug-command", "yes", "--enable-module-command", "yes")
_refuses_protected: dict[str, bool] = {}


class RedisServer:
    """One redis-server process of our own, with its own port and work dir."""

    def __init__(self, module: pathlib.Path | None, module_args: Sequence[str] = (),
                 extra: Sequence[str] = (), env: dict[str, str] | None = None,
                 exe: str | None = None, cwd: str | os.PathLike | None = None) -> None:
        exe = exe or server_exe()
        self.port = free_port()
        self.dir = tempfile.mkdtemp(prefix="redisai-test-")
        self.logfile = pathlib.Path(self.dir) / "redis.log"
        # What the server prints before its log file is open (a refused option).
        self.outfile = pathlib.Path(self.dir) / "stdout.log"
        cmd = [exe, "--port", str(self.port), "--bind", "127.0.0.1", "--dir", self.dir,
               "--save", "", "--appendonly", "no", "--logfile", str(self.logfile)]
        after = list(extra)
        if module is not None:
            after += ["--loadmodule", str(module), *isolate_args(), *module_args]
        protected = [] if _refuses_protected.get(exe) else list(PROTECTED_COMMANDS)
        self.cmd = [*cmd, *protected, *after]
        self._start(env, cwd)
        try:
            self._wait_ready()
        except RuntimeError:
            if protected and self._refused_protected():
                _refuses_protected[exe] = True
                self.cmd = [*cmd, *after]
                self._start(env, cwd)
                self._wait_ready()
            else:
                raise

    def _start(self, env: dict[str, str] | None, cwd: str | os.PathLike | None) -> None:
        with open(self.outfile, "wb") as out:
            self.proc = subprocess.Popen(self.cmd, env=env, cwd=cwd, stdout=out,
                                         stderr=subprocess.STDOUT)

    def _refused_protected(self) -> bool:
        out = self.output()
        return "Bad directive" in out and any(o in out for o in ("enable-debug-command",
                                                                  "enable-module-command"))

    def _wait_ready(self, timeout: float = 30.0) -> None:
        # A raw PING over a plain socket: redis-py 8 retries a refused connection with
        # backoff (seconds), which would hide a server that exits at once.
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"redis-server exited with {self.proc.returncode}:\n"
                                   f"{self.log()}{self.output()}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=2.0) as s:
                    s.sendall(b"PING\r\n")
                    if s.recv(64).startswith(b"+PONG"):
                        return
            except OSError:
                pass
            time.sleep(0.02)
        raise RuntimeError(f"redis-server did not answer in {timeout}s:\n{self.log()}")

    def client(self, **kw) -> redis.Redis:
        return redis.Redis(host="127.0.0.1", port=self.port, **kw)

    def log(self) -> str:
        try:
            return self.logfile.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def output(self) -> str:
        """What the server wrote to stdout and stderr (empty once its log file is open)."""
        try:
            return self.outfile.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def alive(self) -> bool:
        return self.proc.poll() is None

    def kill(self) -> None:
        """kill -9: no shutdown, no save (a crashed machine)."""
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def restart(self) -> None:
        """Starts the same command again: same port, same dir (its nodes.conf, RDB, AOF)."""
        self._start(None, None)
        self._wait_ready()

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def start_expecting_failure(module: pathlib.Path, module_args: Sequence[str],
                            cwd: str | os.PathLike | None = None) -> str:
    """Starts redis-server with the module and arguments that must make the module load
    fail (the server exits); returns the server log."""
    try:
        srv = RedisServer(module, module_args, cwd=cwd)
    except RuntimeError as e:
        return str(e)
    srv.stop()
    raise AssertionError(f"redis-server started although module args {list(module_args)!r} "
                         "should have made the module load fail")


def backend_args(paths: Mapping[str, pathlib.Path]) -> list[str]:
    """Load-time module arguments for these backends, in the mapping's order:
    {"TF": a, "TORCH": b} -> ["TF", "a", "TORCH", "b"]."""
    return [word for kind, path in paths.items() for word in (kind, str(path))]


# The types of conftest.py's factory fixtures `start_server` and `connect`, for annotations.
StartServer = Callable[..., "RedisServer"]
Connect = Callable[..., RawClient]
