"""A Python client of redisai-backend-host, speaking the protocol of
module/isolation/iso_protocol.h (docs/isolation.md, "The protocol") over a
SOCK_SEQPACKET socketpair, with tensors in memfd arenas. For tests and bench
scripts that drive a host without Redis, playing the core: runs of models
and scripts, the callbacks the host pushes (CB_REDIS_CALL, CB_MODEL_EXECUTE)
answered by the test, nested runs, STRING tensors.
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
from typing import Callable, Sequence

import numpy as np

MAGIC = 0x48494152
PROTOCOL_VERSION = 3
INLINE_MAX = 64 * 1024
MAX_FDS = 8
ARENA_SIZE = 16 << 20
ARENA_TENSOR_MAX = 1 << 20
ALIGN = 64
EXIT_PROTOCOL = 70

HELLO, HELLO_OK, MODEL_CREATE, MODEL_CREATED, MODEL_FREE = 1, 2, 3, 4, 5
SCRIPT_CREATE, SCRIPT_CREATED, SCRIPT_FREE = 6, 7, 8
OPEN_CHANNEL, CHANNEL_OK, MODEL_RUN, SCRIPT_RUN, RUN_OK = 9, 10, 11, 12, 13
CB_REDIS_CALL, CB_REDIS_REPLY, CB_MODEL_EXECUTE, CB_MODEL_REPLY = 14, 15, 16, 17
INFO, INFO_REPLY, LOG, DYING, EXITING, SHUTDOWN, ERROR = 18, 19, 20, 21, 22, 23, 24
F_BULK = 1

HEADER = struct.Struct("<IHHQIIQ")
assert HEADER.size == 32

SEALS_ARENA = fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_SEAL
SEALS_FROZEN = SEALS_ARENA | fcntl.F_SEAL_WRITE

HOST_ID_BIT = 1 << 63   # ids of the host's own pushes (callbacks)
REPLY_DEPTH_MAX = 32    # deepest reply of a CB_REDIS_REPLY tree, the outermost at depth 0

# numpy dtype -> (RAI_DTypeCode, bits); STRING is numpy's "U"/"S"/object, code 7
_CODES = {"i": 0, "u": 1, "f": 2, "b": 6}
STRING = 7

# RAI_CallReplyType
R_NULL, R_STRING, R_INTEGER, R_ARRAY, R_ERROR, R_DOUBLE = 0, 1, 2, 3, 4, 5


def dtype_code(dt: np.dtype) -> tuple[int, int]:
    if dt.kind in "USO":
        return STRING, 8
    return _CODES[dt.kind], dt.itemsize * 8


def tensor_bytes(a: np.ndarray) -> bytes:
    """A tensor's bytes on the wire: the data, or for STRING [n u64 offsets][bytes], each
    element NUL-terminated, offsets relative to the bytes."""
    if a.dtype.kind not in "USO":
        return np.ascontiguousarray(a).tobytes()
    elems = [e.encode() if isinstance(e, str) else bytes(e) for e in a.reshape(-1).tolist()]
    offsets, at = [], 0
    for e in elems:
        offsets.append(at)
        at += len(e) + 1
    return struct.pack(f"<{len(elems)}Q", *offsets) + b"".join(e + b"\0" for e in elems)


def strings_from(raw: bytes, dims: Sequence[int]) -> np.ndarray:
    n = int(np.prod(dims, dtype=np.int64)) if dims else 1
    offsets = struct.unpack_from(f"<{n}Q", raw, 0)
    body = raw[8 * n:]
    out = []
    for i, at in enumerate(offsets):
        end = offsets[i + 1] if i + 1 < n else len(body)
        piece = body[at:end]
        assert piece.index(b"\0") == len(piece) - 1, (i, piece)
        out.append(piece[:-1].decode())
    return np.array(out, dtype=object).reshape(dims)


def array_from(code: int, bits: int, raw: bytes, dims: Sequence[int]) -> np.ndarray:
    if code == STRING:
        return strings_from(raw, dims)
    return np.frombuffer(raw, numpy_dtype(code, bits)).reshape(dims).copy()


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

    def raw(self, b: bytes) -> "Enc":
        self.parts.append(b); return self

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
        return self.bytes_().decode()

    def bytes_(self) -> bytes:
        n = self.u32()
        s = self.data[self.pos:self.pos + n]
        self.pos += n
        return s

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

    def sync(self) -> None:
        """An INFO round trip: the control connection is served in order, so every message
        sent on it before (a MODEL_FREE, a SCRIPT_FREE: no answer) has been handled."""
        assert self.request(INFO, Enc().u64(1).bytes()).type == INFO_REPLY

    def script_create(self, handle: int, key: str, source: str | bytes,
                      entry_points: Sequence[str] = (), bulk: bool | None = None) -> Msg:
        e = Enc().u64(handle).str(key).str("CPU").u32(0).i64(-1).u32(len(entry_points))
        for n in entry_points:
            e.str(n)
        e.str(source)
        return self.request(SCRIPT_CREATE, e.bytes(), bulk=bulk)

    def script_free(self, handle: int) -> None:
        send(self.ctl, SCRIPT_FREE, self.id(), Enc().u64(handle).bytes())

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


class ErrorReply(str):
    """An ERROR element of a CB_REDIS_REPLY tree (a plain str is a STRING)."""


def reply_tree(value: object, e: Enc | None = None) -> Enc:
    """CB_REDIS_REPLY: u8 type, then NULL: nothing; STRING, ERROR: str; INTEGER: i64;
    DOUBLE: u64 IEEE-754 bits; ARRAY: u32 n + n replies."""
    e = e if e is not None else Enc()
    if value is None:
        e.u8(R_NULL)
    elif isinstance(value, ErrorReply):
        e.u8(R_ERROR).str(str(value))
    elif isinstance(value, (str, bytes)):
        e.u8(R_STRING).str(value)
    elif isinstance(value, bool) or isinstance(value, int):
        e.u8(R_INTEGER).i64(int(value))
    elif isinstance(value, float):
        e.u8(R_DOUBLE).u64(struct.unpack("<Q", struct.pack("<d", value))[0])
    elif isinstance(value, (list, tuple)):
        e.u8(R_ARRAY).u32(len(value))
        for v in value:
            reply_tree(v, e)
    else:
        raise TypeError(f"no reply type for {value!r}")
    return e


@dataclass
class ModelExecute:
    """A CB_MODEL_EXECUTE the host pushed, its tensors already copied out of shared memory."""
    msg: Msg
    key: str
    inputs: list[np.ndarray]
    noutputs: int


class Channel:
    def __init__(self, sock: socket.socket, c2h: int, h2c: int) -> None:
        self.sock = sock
        self.c2h_fd, self.h2c_fd = c2h, h2c
        self.c2h = mmap.mmap(c2h, ARENA_SIZE, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        self.h2c = mmap.mmap(h2c, ARENA_SIZE, mmap.MAP_SHARED, mmap.PROT_READ)
        self.next_id = 1000

    # --- pushes of the core -------------------------------------------------------------

    def _tensors(self, e: Enc, arrays: Sequence[np.ndarray], arena: bool) -> list[int]:
        """Descriptors into e; data up to ARENA_TENSOR_MAX in the c2h arena (when arena),
        the rest in one frozen region (region 1). Returns the fds to send."""
        e.u32(len(arrays))
        arena_at, large = 0, bytearray()
        for a in arrays:
            code, bits = dtype_code(a.dtype)
            raw = tensor_bytes(a)
            if arena and len(raw) <= ARENA_TENSOR_MAX:
                self.c2h[arena_at:arena_at + len(raw)] = raw
                e.tensor(code, bits, 0, arena_at, len(raw), a.shape)
                arena_at = -(-(arena_at + len(raw)) // ALIGN) * ALIGN
            else:
                at = -(-len(large) // ALIGN) * ALIGN
                large += bytes(at - len(large)) + raw
                e.tensor(code, bits, 1, at, len(raw), a.shape)
        return [frozen_memfd(bytes(large), "test-large")] if large else []

    def _push(self, type_: int, e: Enc, fds: list[int], rid: int | None) -> int:
        if rid is None:
            self.next_id += 1
            rid = self.next_id
        try:
            send(self.sock, type_, rid, e.bytes(), fds)
        finally:
            for fd in fds:
                os.close(fd)
        return rid

    def push_model_run(self, handle: int, arrays: Sequence[np.ndarray], noutputs: int,
                       key: str = "k", arena: bool = True, rid: int | None = None) -> int:
        e = Enc().u64(handle).u32(0).str(key)
        fds = self._tensors(e, arrays, arena)
        e.u32(noutputs)
        return self._push(MODEL_RUN, e, fds, rid)

    def push_script_run(self, handle: int, function: str, arrays: Sequence[np.ndarray],
                        noutputs: int, keys: Sequence[str] = (), args: Sequence[str] = (),
                        entry_point: bool = True, key: str = "s", arena: bool = True) -> int:
        e = Enc().u64(handle).u32(0).str(key).str(function).u8(int(entry_point))
        fds = self._tensors(e, arrays, arena)
        e.u32(len(keys))
        for k in keys:
            e.str(k)
        e.u32(len(args))
        for a in args:
            e.str(a)
        e.u32(noutputs)
        return self._push(SCRIPT_RUN, e, fds, rid=None)

    def wait(self, rid: int, on_callback: Callable[[Msg], None] | None = None
             ) -> tuple[Msg, list[np.ndarray]]:
        """The answer to push rid; callbacks the host pushes meanwhile go to on_callback."""
        while True:
            m = recv(self.sock)
            assert m is not None, "host closed the channel"
            if m.type in (CB_REDIS_CALL, CB_MODEL_EXECUTE):
                assert m.id & HOST_ID_BIT, hex(m.id)
                assert on_callback is not None, f"unexpected callback {m.type}"
                on_callback(m)
                continue
            assert m.id == rid, (m.type, m.id, rid)
            return m, (self._outputs(m) if m.type == RUN_OK else [])

    def run(self, handle: int, arrays: Sequence[np.ndarray], noutputs: int,
            key: str = "k") -> tuple[Msg, list[np.ndarray]]:
        """MODEL_RUN: inputs up to ARENA_TENSOR_MAX in the arena, larger ones in one
        frozen region; returns the reply and the outputs it carries."""
        return self.wait(self.push_model_run(handle, arrays, noutputs, key))

    def run_script(self, handle: int, function: str, arrays: Sequence[np.ndarray],
                   noutputs: int, keys: Sequence[str] = (), args: Sequence[str] = (),
                   entry_point: bool = True,
                   on_callback: Callable[[Msg], None] | None = None
                   ) -> tuple[Msg, list[np.ndarray]]:
        rid = self.push_script_run(handle, function, arrays, noutputs, keys, args, entry_point)
        return self.wait(rid, on_callback)

    # --- tensors from the host ------------------------------------------------------------

    def _read_tensors(self, d: Dec, fds: Sequence[int]) -> list[np.ndarray]:
        outs = []
        for _ in range(d.u32()):
            code, bits, region, offset, nbytes, dims = d.tensor()
            assert offset % ALIGN == 0
            if region == 0:
                raw = self.h2c[offset:offset + nbytes]
            else:
                fd = fds[region - 1]
                assert fcntl.fcntl(fd, fcntl.F_GET_SEALS) & SEALS_FROZEN == SEALS_FROZEN
                raw = os.pread(fd, nbytes, offset)
            outs.append(array_from(code, bits, raw, dims))
        return outs

    def _outputs(self, m: Msg) -> list[np.ndarray]:
        d = Dec(m.payload)
        outs = self._read_tensors(d, m.fds)
        assert d.done()
        for fd in m.fds:
            os.close(fd)
        return outs

    # --- callbacks: what the host asked, and the core's answers -----------------------------

    @staticmethod
    def redis_call(m: Msg) -> tuple[str, list[bytes]]:
        assert m.type == CB_REDIS_CALL, m
        d = Dec(m.payload)
        cmd = d.str()
        args = [d.bytes_() for _ in range(d.u32())]
        assert d.done()
        return cmd, args

    def model_execute(self, m: Msg) -> ModelExecute:
        """Decodes a CB_MODEL_EXECUTE, copying its tensors out at once (as the core must:
        the h2c arena is reused by the host's next message)."""
        assert m.type == CB_MODEL_EXECUTE, m
        d = Dec(m.payload)
        key = d.str()
        inputs = self._read_tensors(d, m.fds)
        noutputs = d.u32()
        assert d.done()
        for fd in m.fds:
            os.close(fd)
        return ModelExecute(m, key, inputs, noutputs)

    def answer_redis(self, m: Msg, value: object, id_: int | None = None) -> None:
        send(self.sock, CB_REDIS_REPLY, m.id if id_ is None else id_, reply_tree(value).bytes())

    def answer_raw(self, m: Msg, type_: int, payload: bytes, fds: Sequence[int] = ()) -> None:
        send(self.sock, type_, m.id, payload, fds)

    def answer_model(self, m: Msg, arrays: Sequence[np.ndarray]) -> None:
        """CB_MODEL_REPLY with the outputs in a frozen region (the c2h arena still holds
        the inputs of the run below)."""
        e = Enc()
        fds = self._tensors(e, arrays, arena=False)
        try:
            send(self.sock, CB_MODEL_REPLY, m.id, e.bytes(), fds)
        finally:
            for fd in fds:
                os.close(fd)

    def answer_error(self, m: Msg, text: str) -> None:
        send(self.sock, ERROR, m.id, Enc().str(text).bytes())

    def close(self) -> None:
        self.c2h.close()
        self.h2c.close()
        os.close(self.c2h_fd)
        os.close(self.h2c_fd)
        self.sock.close()
