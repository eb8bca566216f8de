"""Redis DUMP payloads of module types, written and read in pure Python (no redis code).

A DUMP payload of a module value is:

    type byte 7 (RDB_TYPE_MODULE_2) · len(module id) · fields · len(0) (EOF opcode)
    · RDB version (2 bytes, little-endian) · CRC64 of everything before (8 bytes, LE)

The module id packs the 9-character type name, 6 bits a character, above a 10-bit encoding
version. Each field is an opcode and a value: UINT (2) then a length-encoded integer (the
module API's SaveSigned and SaveUnsigned both write this), STRING (5) then an RDB string.
This is how RedisAI payloads of any encoding version are made for RESTORE, and how our
own DUMP output is checked field by field against docs/persistence.md, "RDB encoding".
"""
from __future__ import annotations

import dataclasses
import struct
from typing import Union

RDB_TYPE_MODULE_2 = 7
OP_EOF, OP_UINT, OP_STRING = 0, 2, 5
CHARSET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"

# --- CRC64 (Jones, reflected), as Redis's crc64.c -----------------------------------------------

_POLY_REFLECTED = 0x95AC9329AC4BC9B5  # 0xad93d23594c935a9 with its bits reversed


def _table() -> list[int]:
    table = []
    for i in range(256):
        crc = i
        for _ in range(8):
            crc = (crc >> 1) ^ _POLY_REFLECTED if crc & 1 else crc >> 1
        table.append(crc)
    return table


_TABLE = _table()


def crc64(data: bytes, crc: int = 0) -> int:
    for b in data:
        crc = _TABLE[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc


assert crc64(b"123456789") == 0xE9C6D914C4B8D9CA  # the check value in Redis's crc64.c


# --- module ids ---------------------------------------------------------------------------------

def module_id(type_name: str, encver: int) -> int:
    assert len(type_name) == 9 and 0 <= encver < 1024
    mid = 0
    for ch in type_name:
        mid = (mid << 6) | CHARSET.index(ch)
    return (mid << 10) | encver


def split_module_id(mid: int) -> tuple[str, int]:
    encver, packed = mid & 1023, mid >> 10
    name = "".join(CHARSET[(packed >> (6 * (8 - i))) & 63] for i in range(9))
    return name, encver


# --- writing ------------------------------------------------------------------------------------

def rdb_len(n: int) -> bytes:
    if n < 1 << 6:
        return bytes([n])
    if n < 1 << 14:
        return bytes([0x40 | (n >> 8), n & 0xFF])
    if n <= 0xFFFFFFFF:
        return b"\x80" + struct.pack(">I", n)
    return b"\x81" + struct.pack(">Q", n)


def _int_encoded(s: bytes) -> bytes | None:
    """rdbTryIntegerEncoding: a short string that is a canonical integer is saved as one."""
    if len(s) > 11 or not s:
        return None
    try:
        v = int(s.decode("ascii"))
    except (UnicodeDecodeError, ValueError):
        return None
    if str(v).encode() != s:
        return None
    if -(1 << 7) <= v < 1 << 7:
        return b"\xc0" + struct.pack("<b", v)
    if -(1 << 15) <= v < 1 << 15:
        return b"\xc1" + struct.pack("<h", v)
    if -(1 << 31) <= v < 1 << 31:
        return b"\xc2" + struct.pack("<i", v)
    return None


def rdb_string(s: bytes) -> bytes:
    """rdbSaveRawString with rdbcompression off (servers that DUMP for a byte comparison
    are started with `--rdbcompression no`; RESTORE reads either form)."""
    enc = _int_encoded(s)
    return enc if enc is not None else rdb_len(len(s)) + s


@dataclasses.dataclass(frozen=True)
class U:
    """An unsigned (or signed, two's complement) integer field."""
    value: int


Field = Union[U, bytes]


def cstr(s: str | bytes) -> bytes:
    """A `Buf*` field: a C string saved with its trailing NUL."""
    return (s.encode() if isinstance(s, str) else s) + b"\x00"


def encode_fields(fields: list[Field]) -> bytes:
    out = bytearray()
    for f in fields:
        if isinstance(f, U):
            out += rdb_len(OP_UINT) + rdb_len(f.value & 0xFFFFFFFFFFFFFFFF)
        else:
            out += rdb_len(OP_STRING) + rdb_string(bytes(f))
    return bytes(out)


def module_value(type_name: str, encver: int, fields: list[Field]) -> bytes:
    """What read_module_value reads: module id, fields, EOF opcode (no type byte)."""
    return rdb_len(module_id(type_name, encver)) + encode_fields(fields) + rdb_len(OP_EOF)


def dump_payload(type_name: str, encver: int, fields: list[Field], rdb_version: int) -> bytes:
    body = (bytes([RDB_TYPE_MODULE_2]) + module_value(type_name, encver, fields)
            + struct.pack("<H", rdb_version))
    return body + struct.pack("<Q", crc64(body))


# --- reading ------------------------------------------------------------------------------------

class Reader:
    def __init__(self, data: bytes) -> None:
        self.data, self.pos = data, 0

    def byte(self) -> int:
        b = self.data[self.pos]
        self.pos += 1
        return b

    def take(self, n: int) -> bytes:
        assert self.pos + n <= len(self.data), "payload ends early"
        out = self.data[self.pos:self.pos + n]
        self.pos += n
        return out

    def length(self) -> tuple[int, bool]:
        """(value, is_special_encoding) of an RDB length."""
        b = self.byte()
        kind = b >> 6
        if kind == 0:
            return b & 0x3F, False
        if kind == 1:
            return ((b & 0x3F) << 8) | self.byte(), False
        if kind == 2:
            if b == 0x80:
                return struct.unpack(">I", self.take(4))[0], False
            if b == 0x81:
                return struct.unpack(">Q", self.take(8))[0], False
            raise AssertionError(f"bad length byte {b:#x}")
        return b & 0x3F, True

    def string(self) -> bytes:
        n, special = self.length()
        if not special:
            return self.take(n)
        if n in (0, 1, 2):
            fmt = {0: "<b", 1: "<h", 2: "<i"}[n]
            return str(struct.unpack(fmt, self.take(struct.calcsize(fmt)))[0]).encode()
        if n == 3:
            clen, _ = self.length()
            ulen, _ = self.length()
            return lzf_decompress(self.take(clen), ulen)
        raise AssertionError(f"bad string encoding {n}")


def lzf_decompress(data: bytes, ulen: int) -> bytes:
    out = bytearray()
    i = 0
    while i < len(data):
        ctrl = data[i]
        i += 1
        if ctrl < 32:
            out += data[i:i + ctrl + 1]
            i += ctrl + 1
            continue
        n = ctrl >> 5
        if n == 7:
            n += data[i]
            i += 1
        ref = len(out) - ((ctrl & 0x1F) << 8) - data[i] - 1
        i += 1
        for _ in range(n + 2):
            out.append(out[ref])
            ref += 1
    assert len(out) == ulen, (len(out), ulen)
    return bytes(out)


@dataclasses.dataclass
class Parsed:
    type_name: str
    encver: int
    fields: list[Field]
    rdb_version: int


def read_module_value(r: Reader) -> tuple[str, int, list[Field]]:
    """A module value after its type byte (in a payload or an RDB file): the module id, then
    the fields up to the EOF opcode. (type name, encoding version, fields)."""
    mid, _ = r.length()
    name, encver = split_module_id(mid)
    fields: list[Field] = []
    while True:
        op, _ = r.length()
        if op == OP_EOF:
            break
        if op == OP_UINT:
            fields.append(U(r.length()[0]))
        elif op == OP_STRING:
            fields.append(r.string())
        else:
            raise AssertionError(f"unexpected opcode {op}")
    return name, encver, fields


def parse_dump(payload: bytes) -> Parsed:
    body, (rdb_version,), (crc,) = payload[:-10], struct.unpack("<H", payload[-10:-8]), \
        struct.unpack("<Q", payload[-8:])
    assert crc64(payload[:-8]) == crc, "CRC64 mismatch"
    r = Reader(body)
    assert r.byte() == RDB_TYPE_MODULE_2
    name, encver, fields = read_module_value(r)
    assert r.pos == len(body), "bytes after the EOF opcode"
    return Parsed(name, encver, fields, rdb_version)


def signed(u: U) -> int:
    return u.value - (1 << 64) if u.value >= 1 << 63 else u.value
