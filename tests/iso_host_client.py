"""A Python client of redisai-backend-host, speaking the protocol of
module/isolation/iso_protocol.h (docs/isolation.md, "The protocol") over a
SOCK_SEQPACKET socketpair, with tensors in memfd arenas. For tests and bench
scripts that drive a host without Redis: the core's own proxy is the next
step of issue 13.
"""
from __future__ import annotations

import fcntl
import mmap
import os
import pathlib
import socket
import struct
import subprocess
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

MAGIC = 0x48494152
PROTOCOL_VERSION = 1
INLINE_MAX = 64 * 1024
MAX_FDS = 8
ARENA_SIZE = 8 << 20
ARENA_TENSOR_MAX = 1 << 20
ALIGN = 64
EXIT_PROTOCOL = 70

HELLO, HELLO_OK, MODEL_CREATE, MODEL_CREATED, MODEL_FREE = 1, 2, 3, 4, 5
OPEN_CHANNEL, CHANNEL_OK, MODEL_RUN, RUN_OK = 9, 10, 11, 13
INFO, INFO_REPLY, LOG, DYING, EXITING, SHUTDOWN, ERROR = 18, 19, 20, 21, 22, 23, 24
F_BULK = 1

HEADER = struct.Struct("<IHHQIIQ")
assert HEADER.size == 32

SEALS_ARENA = fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_SEAL
SEALS_FROZEN = SEALS_ARENA | fcntl.F_SEAL_WRITE

# numpy dtype -> (RAI_DTypeCode, bits)
_CODES = {"i": 0, "u": 1, "f": 2, "b": 6}


def dtype_code(dt: np.dtype) -> tuple[int, int]:
    return _CODES[dt.kind], dt.itemsize * 8


def numpy_dtype(code: int, bits: int) -> np.dtype:
    kind = {0: "i", 1: "u", 2: "f", 6: "b"}[code]
    return np.dtype("bool") if kind == "b" else np.dtype(f"{kind}{bits // 8}")


class Enc:
    def __init__(self) -> None:
        self.parts: list[bytes] = []

    def u8(self, v: int) -> "Enc":
        self.parts.append(struct.pack("<B", v)); return self

    def u32(self, v: int) -> "Enc":
        self.parts.append(struct.pack("<I", v)); return self

    def u64(self, v: int) -> "Enc":
        self.parts.append(struct.pack("<Q", v)); return self

    def i64(self, v: int) -> "Enc":
        self.parts.append(struct.pack("<q", v)); return self

    def str(self, s: str | bytes) -> "Enc":
        b = s.encode() if isinstance(s, str) else s
        self.u32(len(b)); self.parts.append(b); return self

    def tensor(self, code: int, bits: int, region: int, offset: int, nbytes: int,
               dims: Sequence[int]) -> "Enc":
        self.parts.append(struct.pack("<BBBBIQQ", code, bits, region, 0, len(dims), offset,
                                      nbytes))
        for d in dims:
            self.i64(d)
        return self

    def bytes(self) -> bytes:
        return b"".join(self.parts)


class Dec:
    def __init__(self, data: bytes) -> None:
        self.data, self.pos = data, 0

    def _take(self, fmt: str):
        v = struct.unpack_from(fmt, self.data, self.pos)
        self.pos += struct.calcsize(fmt)
        return v

    def u8(self) -> int: return self._take("<B")[0]
    def u32(self) -> int: return self._take("<I")[0]
    def u64(self) -> int: return self._take("<Q")[0]
    def i64(self) -> int: return self._take("<q")[0]

    def str(self) -> str:
        n = self.u32()
        s = self.data[self.pos:self.pos + n]
        self.pos += n
        return s.decode()

    def tensor(self) -> tuple[int, int, int, int, int, list[int]]:
        code, bits, region, _pad, ndims, offset, nbytes = self._take("<BBBBIQQ")
        return code, bits, region, offset, nbytes, [self.i64() for _ in range(ndims)]

    def done(self) -> bool:
        return self.pos == len(self.data)


def frozen_memfd(data: bytes, name: str = "test-frozen") -> int:
    fd = os.memfd_create(name, os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
    os.write(fd, data) if data else None
    fcntl.fcntl(fd, fcntl.F_ADD_SEALS, SEALS_FROZEN)
    return fd


def arena_memfd(size: int = ARENA_SIZE, name: str = "test-arena") -> int:
    fd = os.memfd_create(name, os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
    os.ftruncate(fd, size)
    fcntl.fcntl(fd, fcntl.F_ADD_SEALS, SEALS_ARENA)
    return fd


@dataclass
class Msg:
    type: int
    id: int
    payload: bytes
    fds: list[int] = field(default_factory=list)

    def error_text(self) -> str:
        assert self.type == ERROR, f"expected ERROR, got type {self.type}"
        return Dec(self.payload).str()


def send(sock: socket.socket, type_: int, id_: int, payload: bytes = b"",
         fds: Sequence[int] = (), bulk: bool | None = None) -> None:
    if bulk is None:
        bulk = len(payload) > INLINE_MAX
    if not bulk:
        sock.sendmsg([HEADER.pack(MAGIC, type_, 0, id_, len(payload), len(fds), 0), payload],
                     [(socket.SOL_SOCKET, socket.SCM_RIGHTS, struct.pack(f"{len(fds)}i", *fds))]
                     if fds else [])
        return
    bfd = frozen_memfd(payload, "test-bulk")
    try:
        all_fds = [bfd, *fds]
        socket.send_fds(sock, [HEADER.pack(MAGIC, type_, F_BULK, id_, 0, len(all_fds),
                                           len(payload))], all_fds)
    finally:
        os.close(bfd)


def recv(sock: socket.socket) -> Msg | None:
    data, fds, _flags, _addr = socket.recv_fds(sock, HEADER.size + INLINE_MAX, MAX_FDS)
    if not data and not fds:
        return None
    magic, type_, flags, id_, inline_len, nfds, bulk_len = HEADER.unpack_from(data)
    assert magic == MAGIC and inline_len == len(data) - HEADER.size and nfds == len(fds)
    payload = data[HEADER.size:]
    if flags & F_BULK:
        payload = os.pread(fds[0], bulk_len, 0)
        os.close(fds.pop(0))
    return Msg(type_, id_, payload, list(fds))


def build_id(host: pathlib.Path) -> str:
    out = subprocess.run([str(host), "--version"], capture_output=True, text=True, check=True)
    # "redisai-backend-host <version> <sha> protocol <n>"
    words = out.stdout.split()
    return f"{words[1]} {words[2]}"


@dataclass
class Backend:
    kind: str          # "ONNX"
    kind_code: int     # RAI_BackendKind
    name: str          # "onnxruntime-1.32.0-cpu"
    so: pathlib.Path   # as the core would give it
    backends_path: pathlib.Path


class HostProcess:
    """A host spawned with one end of a socketpair as its control connection."""

    def __init__(self, host: pathlib.Path, backend: Backend, ppid: int | None = None,
                 extra_fds: Sequence[int] = ()) -> None:
        self.host, self.backend = host, backend
        self.ctl, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.next_id = 1
        self.proc = subprocess.Popen(
            [str(host), "--kind", backend.kind, "--name", backend.name, "--so", str(backend.so),
             "--ppid", str(ppid if ppid is not None else os.getpid()), "--fd", str(child.fileno())],
            pass_fds=[child.fileno(), *extra_fds], stdin=subprocess.DEVNULL,
            stderr=subprocess.PIPE)
        child.close()

    def id(self) -> int:
        self.next_id += 1
        return self.next_id

    def request(self, type_: int, payload: bytes, fds: Sequence[int] = (),
                bulk: bool | None = None) -> Msg:
        rid = self.id()
        send(self.ctl, type_, rid, payload, fds, bulk)
        while True:
            m = recv(self.ctl)
            assert m is not None, f"host closed the connection; stderr: {self.stderr()}"
            if m.type == LOG:
                continue
            assert m.id == rid, (m.type, m.id, rid)
            return m

    def hello(self, build: str | None = None, memory_limit_mb: int = 0) -> Msg:
        e = Enc().u32(PROTOCOL_VERSION).str(build or build_id(self.host))
        e.u32(self.backend.kind_code).str(self.backend.name)
        e.str(os.path.realpath(self.backend.so)).str(str(self.backend.backends_path)).u8(1)
        for v in (1, 1, 1, 5000, memory_limit_mb):   # RAI_ConfigKey order
            e.i64(v)
        e.u64(1).u32(2)                               # run queues, verbosity NOTICE
        return self.request(HELLO, e.bytes())

    def model_create(self, handle: int, key: str, blob: bytes, bulk: bool | None = None,
                     inputs: Sequence[str] = (), outputs: Sequence[str] = ()) -> Msg:
        e = Enc().u64(handle).str(key).str("CPU").u32(0).i64(-1)
        e.u32(len(inputs))
        for n in inputs:
            e.str(n)
        e.u32(len(outputs))
        for n in outputs:
            e.str(n)
        e.str(blob)
        return self.request(MODEL_CREATE, e.bytes(), bulk=bulk)

    def model_free(self, handle: int) -> None:
        send(self.ctl, MODEL_FREE, self.id(), Enc().u64(handle).bytes())

    def open_channel(self, channel_id: int = 1) -> "Channel":
        mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        c2h, h2c = arena_memfd(name="test-c2h"), arena_memfd(name="test-h2c")
        try:
            m = self.request(OPEN_CHANNEL, Enc().u64(channel_id).bytes(),
                             [theirs.fileno(), c2h, h2c])
            assert m.type == CHANNEL_OK, m
            return Channel(mine, c2h, h2c)
        finally:
            theirs.close()

    def wait(self, timeout: float = 60) -> int:
        return self.proc.wait(timeout)

    def stderr(self) -> str:
        if self.proc.poll() is None:
            return "(host still running)"
        return self.proc.stderr.read().decode(errors="replace") if self.proc.stderr else ""

    def close(self) -> None:
        self.ctl.close()
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(60)
        if self.proc.stderr:
            self.proc.stderr.close()


class Channel:
    def __init__(self, sock: socket.socket, c2h: int, h2c: int) -> None:
        self.sock = sock
        self.c2h_fd, self.h2c_fd = c2h, h2c
        self.c2h = mmap.mmap(c2h, ARENA_SIZE, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        self.h2c = mmap.mmap(h2c, ARENA_SIZE, mmap.MAP_SHARED, mmap.PROT_READ)
        self.next_id = 1000

    def run(self, handle: int, arrays: Sequence[np.ndarray], noutputs: int,
            key: str = "k") -> tuple[Msg, list[np.ndarray]]:
        """MODEL_RUN: inputs up to ARENA_TENSOR_MAX in the arena, larger ones in one
        frozen region; returns the reply and the outputs it carries."""
        e = Enc().u64(handle).u32(0).str(key).u32(len(arrays))
        arena_at, large = 0, bytearray()
        for a in arrays:
            a = np.ascontiguousarray(a)
            code, bits = dtype_code(a.dtype)
            raw = a.tobytes()
            if len(raw) <= ARENA_TENSOR_MAX:
                self.c2h[arena_at:arena_at + len(raw)] = raw
                e.tensor(code, bits, 0, arena_at, len(raw), a.shape)
                arena_at = -(-(arena_at + len(raw)) // ALIGN) * ALIGN
            else:
                at = -(-len(large) // ALIGN) * ALIGN
                large += bytes(at - len(large)) + raw
                e.tensor(code, bits, 1, at, len(raw), a.shape)
        e.u32(noutputs)
        fds = [frozen_memfd(bytes(large), "test-large")] if large else []
        self.next_id += 1
        try:
            send(self.sock, MODEL_RUN, self.next_id, e.bytes(), fds)
        finally:
            for fd in fds:
                os.close(fd)
        m = recv(self.sock)
        assert m is not None, "host closed the channel"
        assert m.id == self.next_id
        return m, (self._outputs(m) if m.type == RUN_OK else [])

    def _outputs(self, m: Msg) -> list[np.ndarray]:
        d = Dec(m.payload)
        outs = []
        for _ in range(d.u32()):
            code, bits, region, offset, nbytes, dims = d.tensor()
            if region == 0:
                raw = self.h2c[offset:offset + nbytes]
            else:
                fd = m.fds[region - 1]
                assert fcntl.fcntl(fd, fcntl.F_GET_SEALS) & SEALS_FROZEN == SEALS_FROZEN
                raw = os.pread(fd, nbytes, offset)
            outs.append(np.frombuffer(raw, numpy_dtype(code, bits)).reshape(dims).copy())
        assert d.done()
        for fd in m.fds:
            os.close(fd)
        return outs

    def close(self) -> None:
        self.c2h.close()
        self.h2c.close()
        os.close(self.c2h_fd)
        os.close(self.h2c_fd)
        self.sock.close()
