"""Progress lines for long byte-moving steps (packing, unpacking).

Prints "<prefix> <what>: <done>/<total> MB" at most every few seconds and
once at the end, so a step over the 825 MB TensorFlow folder shows it is
alive without flooding a CI log.
"""
from __future__ import annotations

import time
from typing import BinaryIO

_MB = 1e6
_EVERY_S = 3.0


class Progress:
    def __init__(self, prefix: str, what: str, total: int | None = None) -> None:
        self.prefix = prefix
        self.what = what
        self.total = total
        self.done = 0
        self.started = time.monotonic()
        self._last = self.started

    def add(self, n: int) -> None:
        self.done += n
        now = time.monotonic()
        if now - self._last >= _EVERY_S:
            self._last = now
            self._print()

    def _print(self, suffix: str = "") -> None:
        total = f"/{self.total / _MB:.0f}" if self.total else ""
        print(f"{self.prefix} {self.what}: {self.done / _MB:.0f}{total} MB{suffix}", flush=True)

    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def finish(self, note: str = "") -> None:
        self._print(f" in {self.elapsed():.1f} s{note}")


class CountingReader:
    """A read-only file wrapper that reports every byte read to a Progress."""

    def __init__(self, f: BinaryIO, progress: Progress) -> None:
        self._f = f
        self._progress = progress

    def read(self, size: int = -1) -> bytes:
        data = self._f.read(size)
        self._progress.add(len(data))
        return data
