"""RedisAI's RDB encodings 4 and 5 as field lists, from the documented layouts
(docs/persistence.md, "RDB encoding"), and RedisAI 1.2's own reading of encoding 4.

* Writers: `tensor_v4`, `model_v4`, `script_v4` give the fields RedisAI 1.2 writes for the
  object a client stored (what this module must write byte for byte); `model_v4` of a model
  with a backend name puts the name after the device's NUL. `model_v5` is the model layout that
  earlier builds of this module wrote (the name as a field of its own); tensors and scripts were
  written at 5 with the v4 layout.
* Reader: `read_as_12(type_name, encver, fields)` reads fields as RedisAI 1.2.7's loader does:
  each field in order with the primitive of its layout, every `Buf*` field used as a C string
  (up to its first NUL), and nothing may be left over (Redis fails the load with "not
  terminated by the proper module value EOF marker"). `saved_by_12(view)` gives the fields 1.2
  writes back for what it read.

Field notation (rdb_payloads.py): `U(n)` a number field, bytes a string field.
"""
from __future__ import annotations

import dataclasses
from typing import Sequence

from rdb_payloads import Field, U, cstr

DTYPE_CODES = {"FLOAT": (2, 32), "DOUBLE": (2, 64), "INT8": (0, 8), "INT16": (0, 16),
               "INT32": (0, 32), "INT64": (0, 64), "UINT8": (1, 8), "UINT16": (1, 16),
               "BOOL": (6, 8), "STRING": (7, 8)}
BACKEND_CODE = {"TF": 0, "TFLITE": 1, "TORCH": 2, "ONNX": 3}
NAME_RECORD = b"backend="  # after the device's NUL: the backend name (rdb_io.h)


def _b(s: str | bytes) -> bytes:
    return s.encode() if isinstance(s, str) else s


# --- writers ----------------------------------------------------------------------------------

def string_offsets(data: bytes) -> list[int]:
    """Where each NUL-terminated element of a STRING tensor's data starts."""
    offsets, pos = [], 0
    for element in data.split(b"\0")[:-1]:
        offsets.append(pos)
        pos += len(element) + 1
    return offsets


def tensor_v4(dtype: str, dims: Sequence[int], data: bytes) -> list[Field]:
    """U code, U bits, S ndims, S dim x ndims, Buf data, STRING: U offset x length."""
    code, bits = DTYPE_CODES[dtype]
    fields: list[Field] = [U(code), U(bits), U(len(dims)), *[U(d) for d in dims], data]
    if dtype == "STRING":
        fields += [U(o) for o in string_offsets(data)]
    return fields


def chunks(blob: bytes, chunk: int) -> list[bytes]:
    """RedisAI 1.2's rule: len // chunk + 1 chunks, the last one shorter (empty when the
    length is an exact multiple)."""
    return [blob[i * chunk:(i + 1) * chunk] for i in range(len(blob) // chunk + 1)]


@dataclasses.dataclass(frozen=True)
class Model:
    """A model as a client stored it, and the names the server keeps (TF: as given; the
    others: read from the model)."""
    backend: str
    device: str
    blob: bytes
    tag: bytes = b""
    batch: int = 0
    minbatch: int = 0
    timeout: int = 0
    inputs: tuple[str, ...] = ()
    outputs: tuple[str, ...] = ()
    name: str | None = None  # MODELSTORE ... BACKEND <name>


def device_field(device: str, name: str | None) -> bytes:
    return cstr(device) if name is None else cstr(device) + NAME_RECORD + cstr(name)


def _model_tail(m: Model, chunk: int) -> list[Field]:
    parts = chunks(m.blob, chunk)
    return [_b(m.tag), U(m.batch), U(m.minbatch), U(m.timeout), U(len(m.inputs)),
            *[cstr(n) for n in m.inputs], U(len(m.outputs)), *[cstr(n) for n in m.outputs],
            U(len(m.blob)), U(len(parts)), *parts]


def model_v4(m: Model, chunk: int) -> list[Field]:
    """U backend, Buf* device (and the name after its NUL), Str tag, U batchsize,
    U minbatchsize, U minbatchtimeout, U n_in, Buf* x n_in, U n_out, Buf* x n_out,
    U blob length, U chunk count, Buf chunk x count."""
    return [U(BACKEND_CODE[m.backend]), device_field(m.device, m.name), *_model_tail(m, chunk)]


def model_v5(m: Model, chunk: int) -> list[Field]:
    """Earlier builds of this module: the device alone, then the name as a Buf* field
    (empty: none), then v4's fields."""
    return [U(BACKEND_CODE[m.backend]), cstr(m.device), cstr(m.name or ""),
            *_model_tail(m, chunk)]


def script_v4(device: str, tag: str | bytes, source: str, entry_points: Sequence[str]
              ) -> list[Field]:
    """Buf* device, Str tag, Buf* source, U entry-point count, Buf* entry point x count."""
    return [cstr(device), _b(tag), cstr(source), U(len(entry_points)),
            *[cstr(e) for e in entry_points]]


# --- RedisAI 1.2's reader ---------------------------------------------------------------------

class NotReadable(AssertionError):
    """What RedisAI 1.2 fails to load (Redis then fails the whole file)."""


class _Cursor:
    def __init__(self, fields: Sequence[Field]) -> None:
        self.fields, self.i = list(fields), 0

    def _next(self) -> Field:
        if self.i >= len(self.fields):
            raise NotReadable("the value ends before 1.2's layout does")
        self.i += 1
        return self.fields[self.i - 1]

    def u(self) -> int:
        f = self._next()
        if not isinstance(f, U):
            raise NotReadable(f"field {self.i - 1}: a string where 1.2 reads a number")
        return f.value

    def buf(self) -> bytes:
        f = self._next()
        if isinstance(f, U):
            raise NotReadable(f"field {self.i - 1}: a number where 1.2 reads a string")
        return f

    def cstring(self) -> bytes:
        """A Buf* field as 1.2 uses it: RedisModule_LoadStringBuffer, then a C string."""
        return self.buf().split(b"\0", 1)[0]

    def done(self) -> None:
        if self.i != len(self.fields):
            raise NotReadable(f"{len(self.fields) - self.i} field(s) left over after 1.2's "
                              "layout: not terminated by the proper module value EOF marker")


@dataclasses.dataclass(frozen=True)
class Model12:
    """What RedisAI 1.2 keeps of a model it loaded."""
    backend: int
    device: bytes
    tag: bytes
    batch: int
    minbatch: int
    timeout: int
    inputs: tuple[bytes, ...]
    outputs: tuple[bytes, ...]
    blob: bytes


def read_as_12(type_name: str, encver: int, fields: Sequence[Field]) -> object:
    """The object RedisAI 1.2 makes of a value (a tuple for tensors and scripts, a Model12),
    or NotReadable. 1.2 writes and reads version 4 only."""
    if encver != 4:
        raise NotReadable(f"encoding version {encver}: RedisAI 1.2 reads version 4's layout")
    c = _Cursor(fields)
    if type_name == "AI_TENSOR":
        code, bits, ndims = c.u(), c.u(), c.u()
        dims = tuple(c.u() for _ in range(ndims))
        data = c.buf()
        n = 1
        for d in dims:
            n *= d
        offsets = tuple(c.u() for _ in range(n)) if code == 7 else ()
        out: object = (code, bits, dims, data, offsets)
    elif type_name == "AI__MODEL":
        backend, device, tag = c.u(), c.cstring(), c.buf()
        batch, minbatch, timeout = c.u(), c.u(), c.u()
        inputs = tuple(c.cstring() for _ in range(c.u()))
        outputs = tuple(c.cstring() for _ in range(c.u()))
        total, count = c.u(), c.u()
        blob = b"".join(c.buf() for _ in range(count))
        if len(blob) != total:
            raise NotReadable("the chunks do not add up to the blob length")
        out = Model12(backend, device, tag, batch, minbatch, timeout, inputs, outputs, blob)
    elif type_name == "AI_SCRIPT":
        device, tag, source = c.cstring(), c.buf(), c.cstring()
        out = (device, tag, source, tuple(c.cstring() for _ in range(c.u())))
    else:
        raise NotReadable(f"no RedisAI 1.2 type {type_name}")
    c.done()
    return out


def saved_by_12(m: Model12, chunk: int) -> list[Field]:
    """The fields RedisAI 1.2 writes for a model it holds: each C string with its NUL."""
    parts = chunks(m.blob, chunk)
    return [U(m.backend), cstr(m.device), m.tag, U(m.batch), U(m.minbatch), U(m.timeout),
            U(len(m.inputs)), *[cstr(n) for n in m.inputs], U(len(m.outputs)),
            *[cstr(n) for n in m.outputs], U(len(m.blob)), U(len(parts)), *parts]
