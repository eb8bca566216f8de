"""Whole RDB files (`dump.rdb`), read and written in pure Python (no redis code), for the
module values in them (docs/persistence.md, "RDB encoding").

A file starts with a 9-byte header, its magic and its RDB version: `REDIS` and 4 digits
(Redis; Valkey up to 8.x, `REDIS0011`), or `VALKEY` and 3 digits (Valkey 9 on, `VALKEY080`:
Valkey writes that magic for RDB versions above 79, the range Redis keeps). Which one a file
has is read from the file; a file the tests write takes the magic of one its server wrote
(`file_header`). Then opcodes and key-value pairs up to EOF and the CRC64 of everything before
it (8 bytes, little-endian; 0 when `rdbchecksum` is off):

    0xFA aux field (two strings) · 0xFE SELECTDB (length) · 0xFB RESIZEDB (two lengths) ·
    0xFC expire in ms (8 bytes LE) · 0xFD expire in s (4 bytes LE) · 0xF8 LRU idle (length) ·
    0xF9 LFU frequency (1 byte) · 0xF7 module aux data (a module value) · 0xF5 a function
    library (a string) · 0xF4 slot info (three lengths) · 0xFF EOF

A key-value pair is a type byte, the key (a string) and the value. Only the value types the
tests write are read: strings (type 0) and module values (type 7, read field by field with
tests/support/rdb_payloads.py). Anything else fails the read, so a test cannot pass on a file
it did not understand.
"""
from __future__ import annotations

import dataclasses
import pathlib
import struct
from typing import Union

import rdb_payloads as rp

REDIS_MAGIC, VALKEY_MAGIC = b"REDIS", b"VALKEY"
HEADER_LEN = 9
RDB_TYPE_STRING = 0
OP_FUNCTION2, OP_SLOT_INFO, OP_MODULE_AUX, OP_IDLE, OP_FREQ = 0xF5, 0xF4, 0xF7, 0xF8, 0xF9
OP_AUX, OP_RESIZEDB, OP_EXPIRETIME_MS, OP_EXPIRETIME, OP_SELECTDB, OP_EOF = \
    0xFA, 0xFB, 0xFC, 0xFD, 0xFE, 0xFF


@dataclasses.dataclass(frozen=True)
class ModuleValue:
    type_name: str
    encver: int
    fields: list[rp.Field]


Value = Union[bytes, ModuleValue]


@dataclasses.dataclass
class RdbFile:
    magic: bytes  # REDIS_MAGIC or VALKEY_MAGIC
    rdb_version: int
    aux: dict[bytes, bytes]
    keys: dict[tuple[int, bytes], Value]  # (db, key) -> value
    module_aux: list[ModuleValue]

    def values_of(self, type_name: str) -> dict[bytes, ModuleValue]:
        """The module values of one type, by key (every db)."""
        return {k: v for (_, k), v in self.keys.items()
                if isinstance(v, ModuleValue) and v.type_name == type_name}


def parse_header(data: bytes) -> tuple[bytes, int]:
    """(magic, RDB version) of a file's first 9 bytes."""
    head = data[:HEADER_LEN]
    for magic in (REDIS_MAGIC, VALKEY_MAGIC):
        digits = head[len(magic):]
        if head.startswith(magic) and len(head) == HEADER_LEN and digits.isdigit():
            return magic, int(digits)
    raise AssertionError(f"not an RDB file: {head!r}")


def header(magic: bytes, rdb_version: int) -> bytes:
    """The 9 bytes that start a file: `REDIS0012`, `VALKEY080`."""
    digits = b"%0*d" % (HEADER_LEN - len(magic), rdb_version)
    assert len(digits) == HEADER_LEN - len(magic), (magic, rdb_version)
    return magic + digits


def file_header(path: pathlib.Path) -> tuple[bytes, int]:
    """(magic, RDB version) of the file a server saved: what a file written for it takes."""
    with open(path, "rb") as f:
        return parse_header(f.read(HEADER_LEN))


def parse_rdb(data: bytes) -> RdbFile:
    out = RdbFile(*parse_header(data), {}, {}, [])
    (crc,) = struct.unpack("<Q", data[-8:])
    assert crc == 0 or rp.crc64(data[:-8]) == crc, "CRC64 mismatch"
    r = rp.Reader(data[:-8])
    r.pos, db = HEADER_LEN, 0
    while True:
        op = r.byte()
        if op == OP_EOF:
            break
        if op == OP_AUX:
            name = r.string()
            out.aux[name] = r.string()
        elif op == OP_SELECTDB:
            db = r.length()[0]
        elif op == OP_RESIZEDB:
            r.length(), r.length()
        elif op == OP_SLOT_INFO:
            r.length(), r.length(), r.length()
        elif op == OP_EXPIRETIME_MS:
            r.take(8)
        elif op == OP_EXPIRETIME:
            r.take(4)
        elif op == OP_IDLE:
            r.length()
        elif op == OP_FREQ:
            r.byte()
        elif op == OP_FUNCTION2:
            r.string()
        elif op == OP_MODULE_AUX:
            out.module_aux.append(ModuleValue(*rp.read_module_value(r)))
        elif op == RDB_TYPE_STRING:
            key = r.string()
            out.keys[(db, key)] = r.string()
        elif op == rp.RDB_TYPE_MODULE_2:
            key = r.string()
            out.keys[(db, key)] = ModuleValue(*rp.read_module_value(r))
        else:
            raise AssertionError(f"opcode or value type {op:#x} at offset {r.pos - 1}: "
                                 "not one these tests read")
    assert r.pos == len(data) - 8, "bytes between EOF and the checksum"
    return out


def read_rdb(path: pathlib.Path) -> RdbFile:
    return parse_rdb(path.read_bytes())


def write_rdb(rdb_version: int, keys: dict[tuple[int, bytes], Value],
              magic: bytes = REDIS_MAGIC) -> bytes:
    """A file the server loads: the keys by db, no aux fields, a CRC64. `magic` is the one
    of the server's own files (file_header): Valkey 9 refuses `REDIS` with its version 80."""
    out = bytearray(header(magic, rdb_version))
    for db in sorted({d for d, _ in keys}):
        out += bytes([OP_SELECTDB]) + rp.rdb_len(db)
        for (d, key), value in keys.items():
            if d != db:
                continue
            if isinstance(value, ModuleValue):
                out += bytes([rp.RDB_TYPE_MODULE_2]) + rp.rdb_string(key)
                out += rp.module_value(value.type_name, value.encver, value.fields)
            else:
                out += bytes([RDB_TYPE_STRING]) + rp.rdb_string(key) + rp.rdb_string(value)
    out += bytes([OP_EOF])
    return bytes(out) + struct.pack("<Q", rp.crc64(bytes(out)))
