"""Running subprocesses: quietly, teed to the terminal, into a log, or on the terminal.

Every failure becomes a BuildError with the command, its exit code and its
output. Private to build_tools.
"""
from __future__ import annotations

import collections
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable, Mapping, Sequence

from .errors import BuildError

# How many lines of a teed command's output a BuildError repeats.
_TEE_TAIL_LINES = 150


def _env(extra: Mapping[str, str] | None) -> dict[str, str] | None:
    if not extra:
        return None
    env = dict(os.environ)
    env.update(extra)
    return env


def _spawn_error(what: str, cmd: Sequence[str], exc: OSError) -> BuildError:
    return BuildError(f"{what}: cannot start {cmd[0]!r}: {exc.strerror}",
                      command=cmd, returncode=None, output="")


def run_quiet(cmd: Sequence[str], what: str, *, cwd: Path | None = None,
              env: Mapping[str, str] | None = None) -> str:
    """Runs cmd with its output captured; returns it. Raises BuildError on failure."""
    cmd = [str(c) for c in cmd]
    try:
        proc = subprocess.run(cmd, cwd=cwd, env=_env(env), stdin=subprocess.DEVNULL,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              text=True, errors="replace", check=False)
    except OSError as exc:
        raise _spawn_error(what, cmd, exc) from None
    if proc.returncode != 0:
        raise BuildError(f"{what} failed", command=cmd, returncode=proc.returncode,
                         output=proc.stdout)
    return proc.stdout


def run_tee(cmd: Sequence[str], what: str, *, cwd: Path | None = None,
            env: Mapping[str, str] | None = None, prefix: str = "") -> None:
    """Runs cmd, copying its output line by line to stdout (for progress).

    On failure the BuildError repeats the last lines, so the reason is next
    to the error even when the output scrolled away.
    """
    cmd = [str(c) for c in cmd]
    tail: collections.deque[str] = collections.deque(maxlen=_TEE_TAIL_LINES)
    try:
        proc = subprocess.Popen(cmd, cwd=cwd, env=_env(env), stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                text=True, errors="replace", bufsize=1)
    except OSError as exc:
        raise _spawn_error(what, cmd, exc) from None
    assert proc.stdout is not None
    with proc.stdout:
        for line in proc.stdout:
            tail.append(line.rstrip("\n"))
            sys.stdout.write(prefix + line)
            sys.stdout.flush()
    rc = proc.wait()
    if rc != 0:
        skipped = ""
        if len(tail) == _TEE_TAIL_LINES:
            skipped = f"... (last {_TEE_TAIL_LINES} lines)\n"
        raise BuildError(f"{what} failed", command=cmd, returncode=rc,
                         output=skipped + "\n".join(tail))


def _tail(path: Path, lines: int = _TEE_TAIL_LINES) -> str:
    try:
        with open(path, errors="replace") as f:
            tail = collections.deque(f, maxlen=lines)
    except OSError as exc:
        return f"(cannot read {path}: {exc.strerror})"
    skipped = f"... (last {lines} lines of {path})\n" if len(tail) == lines else ""
    return skipped + "".join(tail).rstrip("\n")


def run_logged(cmd: Sequence[str], what: str, *, log: Path, heartbeat: Callable[[float], None],
               every_s: float = 15.0, cwd: Path | None = None,
               env: Mapping[str, str] | None = None) -> None:
    """Runs cmd with its output written to `log`, calling heartbeat(seconds so far) every
    `every_s` seconds: a long make shows it is alive in a CI log without thousands of lines.

    On failure the BuildError repeats the log's last lines.
    """
    cmd = [str(c) for c in cmd]
    started = time.monotonic()
    with open(log, "w") as out:
        try:
            proc = subprocess.Popen(cmd, cwd=cwd, env=_env(env), stdin=subprocess.DEVNULL,
                                    stdout=out, stderr=subprocess.STDOUT)
        except OSError as exc:
            raise _spawn_error(what, cmd, exc) from None
        try:
            while True:
                try:
                    rc = proc.wait(timeout=every_s)
                    break
                except subprocess.TimeoutExpired:
                    heartbeat(time.monotonic() - started)
        except BaseException:  # Ctrl-C, or a heartbeat that raised: no orphan left running
            proc.kill()
            proc.wait()
            raise
    if rc != 0:
        raise BuildError(f"{what} failed", command=cmd, returncode=rc, output=_tail(log))


def run_terminal(cmd: Sequence[str], what: str, *, cwd: Path | None = None,
                 env: Mapping[str, str] | None = None) -> None:
    """Runs cmd on the terminal as is (pip's own progress bars need a tty)."""
    cmd = [str(c) for c in cmd]
    sys.stdout.flush()
    try:
        rc = subprocess.call(cmd, cwd=cwd, env=_env(env), stdin=subprocess.DEVNULL)
    except OSError as exc:
        raise _spawn_error(what, cmd, exc) from None
    if rc != 0:
        raise BuildError(f"{what} failed", command=cmd, returncode=rc, output=None)
