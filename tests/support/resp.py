"""A minimal RESP2 client that keeps replies exactly as the server sent them.

redis-py strips the `ERR ` prefix from error replies and turns some errors into special
exception classes, so it cannot tell `-ERR x` from `-x`. docs/commands.md pins error texts
byte for byte (some have no `ERR `), so exact checks go through this client:

* `-text`  -> RespError("text")   (returned, not raised; `str(e)` is the whole line)
* `+text`  -> Status("text")      (a str subclass: simple strings are not bulk strings)
* `$n`     -> bytes, `$-1` -> None
* `:n`     -> int
* `*n`     -> list, `*-1` -> None
* RESP3 (after HELLO 3): `,d` -> float, `_` -> None, `%` -> dict, `~` -> list, `#` -> bool
"""
from __future__ import annotations

import socket
from typing import Any


class RespError(str):
    """An error reply; the value is the full line without the leading '-'."""

    def __repr__(self) -> str:
        return f"RespError({str.__repr__(self)})"


class Status(str):
    """A simple-string reply (`+OK`, `+PONG`, `+TIMEDOUT`)."""

    def __repr__(self) -> str:
        return f"Status({str.__repr__(self)})"


def _encode_arg(a: Any) -> bytes:
    if isinstance(a, bytes):
        return a
    if isinstance(a, (bytearray, memoryview)):
        return bytes(a)
    if isinstance(a, str):
        return a.encode()
    if isinstance(a, float):
        return repr(a).encode()
    return str(a).encode()


def encode_command(*args: Any) -> bytes:
    parts = [b"*%d\r\n" % len(args)]
    for a in args:
        b = _encode_arg(a)
        parts += [b"$%d\r\n" % len(b), b, b"\r\n"]
    return b"".join(parts)


def _hashable(x: Any) -> Any:
    return tuple(x) if isinstance(x, list) else x


class RawClient:
    """One connection; `execute` sends a command and reads exactly one reply."""

    def __init__(self, port: int, host: str = "127.0.0.1", timeout: float | None = 60.0) -> None:
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.timeout = timeout
        self._buf = bytearray()
        self._pos = 0

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> "RawClient":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- reading -------------------------------------------------------------------
    def _fill(self) -> None:
        chunk = self.sock.recv(1 << 20)
        if not chunk:
            raise ConnectionError("connection closed by server")
        if self._pos:
            del self._buf[: self._pos]
            self._pos = 0
        self._buf += chunk

    def _readline(self) -> bytes:
        while True:
            i = self._buf.find(b"\r\n", self._pos)
            if i >= 0:
                line = bytes(self._buf[self._pos : i])
                self._pos = i + 2
                return line
            self._fill()

    def _readexact(self, n: int) -> bytes:
        while len(self._buf) - self._pos < n:
            self._fill()
        data = bytes(self._buf[self._pos : self._pos + n])
        self._pos += n
        return data

    def read(self) -> Any:
        line = self._readline()
        kind, body = line[:1], line[1:]
        if kind == b"+":
            return Status(body.decode(errors="replace"))
        if kind == b"-":
            return RespError(body.decode(errors="replace"))
        if kind == b":":
            return int(body)
        if kind == b"$":
            n = int(body)
            if n < 0:
                return None
            data = self._readexact(n + 2)
            return data[:-2]
        if kind == b"*":
            n = int(body)
            if n < 0:
                return None
            return [self.read() for _ in range(n)]
        # RESP3 (after HELLO 3)
        if kind == b",":
            return float(body)
        if kind == b"_":
            return None
        if kind == b"#":
            return body == b"t"
        if kind == b"(":
            return int(body)
        if kind in (b"~", b">"):
            return [self.read() for _ in range(int(body))]
        if kind == b"%":
            return {_hashable(self.read()): self.read() for _ in range(int(body))}
        if kind == b"=":
            data = self._readexact(int(body) + 2)[:-2]
            return data[4:]  # drop the "txt:" format prefix
        if kind == b"!":
            data = self._readexact(int(body) + 2)[:-2]
            return RespError(data.decode(errors="replace"))
        raise ConnectionError(f"unexpected RESP type byte in {line!r}")

    def pending(self, wait: float = 0.0) -> bool:
        """True if reply bytes are waiting, buffered or on the socket (waits up to `wait` s)."""
        if len(self._buf) > self._pos:
            return True
        try:
            self.sock.settimeout(wait if wait > 0 else 0.0)
            try:
                return bool(self.sock.recv(1, socket.MSG_PEEK))
            except (BlockingIOError, socket.timeout):
                return False
        finally:
            self.sock.settimeout(self.timeout)

    # -- commands ------------------------------------------------------------------
    def send(self, *args: Any) -> None:
        self.sock.sendall(encode_command(*args))

    def execute(self, *args: Any) -> Any:
        self.send(*args)
        return self.read()
