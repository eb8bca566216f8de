"""Small helpers shared by the test modules (exact error texts, log inspection)."""
from __future__ import annotations

import pathlib
import signal
import subprocess
import threading
import time
from typing import Any, Callable

from resp import RespError, Status

# Reply prefix of every refused backend load (RedisAI's text, plus ": <reason>").
LOAD_ERR = "ERR error loading backend: "
WRONGTYPE = "WRONGTYPE Operation against a key holding the wrong kind of value"
TENSOR_EMPTY = "ERR tensor key is empty or in a different shard"
MODEL_EMPTY = "ERR model key is empty"
DEFAULT_CHUNK_SIZE = 535822336  # 511 * 1024 * 1024, RedisAI 1.2's default


def arity(command: str) -> str:
    """Redis's own arity error (RM_WrongArity): the lower-case command name on Redis >= 7."""
    return f"ERR wrong number of arguments for '{command.lower()}' command"


def arity_wording(reply: Any, typed: str) -> Callable[[str], str]:
    """Redis's own arity error (RM_WrongArity) as one server words it, from `reply`, its
    answer to a module command typed `typed` (mixed case) without its arguments: a function
    of the command as a test types it. Redis 7.0+ and Valkey name the command in lower case
    (arity() above), Redis 6.2 as the client typed it."""
    assert isinstance(reply, RespError), reply
    template = str(reply).replace("{", "{{").replace("}", "}}")
    for seen, lower in ((f"'{typed}'", False), (f"'{typed.lower()}'", True)):
        if seen in template:
            template = template.replace(seen, "'{}'")
            return lambda command: template.format(command.lower() if lower else command)
    raise AssertionError(f"the arity error names no command {typed!r}: {reply!r}")


def assert_ok(reply: Any) -> None:
    assert isinstance(reply, Status) and reply == "OK", f"expected +OK, got {reply!r}"


def assert_error(reply: Any, text: str) -> None:
    """The reply is an error whose whole line is exactly `text`."""
    assert isinstance(reply, RespError), f"expected error {text!r}, got {reply!r}"
    assert str(reply) == text, f"\nexpected: {text!r}\n     got: {str(reply)!r}"


def assert_error_startswith(reply: Any, prefix: str) -> str:
    assert isinstance(reply, RespError), f"expected error starting {prefix!r}, got {reply!r}"
    assert str(reply).startswith(prefix), f"\nexpected prefix: {prefix!r}\n            got: {str(reply)!r}"
    return str(reply)


class LogMark:
    """Remembers the current end of a server log; `lines()` gives what was written since."""

    def __init__(self, logfile: pathlib.Path) -> None:
        self.logfile = logfile
        try:
            self.offset = logfile.stat().st_size
        except FileNotFoundError:
            self.offset = 0

    def text(self) -> str:
        try:
            with open(self.logfile, "rb") as f:
                f.seek(self.offset)
                return f.read().decode(errors="replace")
        except FileNotFoundError:
            return ""

    def lines(self) -> list[str]:
        return self.text().splitlines()

    def wait_for_line(self, *needles: str, timeout: float = 2.0) -> str:
        """The first new line containing every needle (waits a little: logging is synchronous
        in Redis, but be tolerant of a late write)."""
        deadline = time.monotonic() + timeout
        while True:
            for line in self.lines():
                if all(n in line for n in needles):
                    return line
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"no new log line contains all of {needles!r}; new log text:\n{self.text()}")
            time.sleep(0.05)


def in_threads(n: int, work: Callable[[int], None], timeout: float = 120.0) -> None:
    """Runs work(0) .. work(n - 1) on n threads at once; fails with what any of them raised,
    or when one is still running after timeout seconds (a lost wake-up hangs there)."""
    errors: list[BaseException] = []

    def run(k: int) -> None:
        try:
            work(k)
        except BaseException as exc:  # reported below, on the test's thread
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(k,)) for k in range(n)]
    for t in threads:
        t.start()
    deadline = time.monotonic() + timeout
    for t in threads:
        t.join(max(0.0, deadline - time.monotonic()))
    assert not errors and not any(t.is_alive() for t in threads), errors


def wait_until(pred: Callable[[], bool], timeout: float, interval: float = 0.005) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return True
        time.sleep(interval)
    return pred()


def info_field(info_text: bytes | str, field: str) -> str | None:
    if isinstance(info_text, bytes):
        info_text = info_text.decode()
    for line in info_text.splitlines():
        if line.startswith(field + ":"):
            return line.split(":", 1)[1].strip()
    return None


def isolated_hosts(info_text: bytes | str) -> dict[str, dict[str, str]]:
    """INFO MODULES' line of each isolated backend (docs/info.md, ai_isolation), by its field
    name: {"ai_onnx_...": {"kind": "ONNX", "state": "ready", "pid": ..., ...}}."""
    if isinstance(info_text, bytes):
        info_text = info_text.decode()
    out = {}
    for line in info_text.splitlines():
        if line.startswith("ai_") and "kind=" in line:
            name, fields = line.split(":", 1)
            out[name] = dict(kv.split("=", 1) for kv in fields.split(","))
    return out


def isolated_host(info_text: bytes | str) -> dict[str, str]:
    """The line of the one isolated backend."""
    hosts = isolated_hosts(info_text)
    assert len(hosts) == 1, f"not exactly one isolated backend in INFO: {hosts}"
    return next(iter(hosts.values()))


def wait_isolated_ready(c: Any, old_pid: int | None = None, timeout: float = 30) -> dict:
    """The one isolated backend's fields once its host is ready, has a pid other than
    old_pid, and has re-created every model (`recreating` 0)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        info = isolated_host(c.execute("INFO", "MODULES"))
        if info["state"] == "ready" and int(info["pid"]) and int(info["pid"]) != old_pid \
                and info.get("recreating", "0") == "0":
            return info
        time.sleep(0.02)
    raise AssertionError(f"host not ready again: {isolated_host(c.execute('INFO', 'MODULES'))}")


def wait_file(p: pathlib.Path, timeout: float = 30) -> None:
    """Until the file p exists (the fault backend's `slow-if-exists` marks a held create's
    start and end with `<file>.started` and `<file>.done`)."""
    deadline = time.monotonic() + timeout
    while not p.exists():
        assert time.monotonic() < deadline, f"{p} never appeared"
        time.sleep(0.01)


def runnable_seconds_by_thread(pid: int) -> dict[int, float]:
    """Seconds each thread of process pid (by thread id; the main thread's is pid) has been
    running or waiting to run (the first two fields of /proc/<pid>/task/<tid>/schedstat). A
    thread that spins counts its whole spin here whatever its share of a loaded machine's CPUs;
    a sleeping one counts nothing."""
    seconds = {}
    for task in pathlib.Path(f"/proc/{pid}/task").iterdir():
        try:
            on_cpu, waiting = (task / "schedstat").read_text().split()[:2]
        except (OSError, ValueError):
            continue  # a thread that ended meanwhile
        seconds[int(task.name)] = (int(on_cpu) + int(waiting)) / 1e9
    return seconds


def runnable_seconds(pid: int) -> float:
    """runnable_seconds_by_thread's sum: the whole process."""
    return sum(runnable_seconds_by_thread(pid).values())


def terminate(proc: "subprocess.Popen[Any]", timeout: float = 30) -> None:
    """SIGTERM, then SIGKILL if the process has not ended after `timeout` seconds."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
