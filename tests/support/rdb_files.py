"""Whole RDB files (`dump.rdb`), read and written in pure Python (no redis code), for the
module values in them (docs/persistence.md, "RDB encoding").

A file is `REDIS` and a 4-digit RDB version, then opcodes and key-value pairs up to EOF and
the CRC64 of everything before it (8 bytes, little-endian; 0 when `rdbchecksum` is off):

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

MAGIC = b"REDIS"
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
    rdb_version: int
    aux: dict[bytes, bytes]
    keys: dict[tuple[int, bytes], Value]  # (db, key) -> value
    module_aux: list[ModuleValue]

    def values_of(self, type_name: str) -> dict[bytes, ModuleValue]:
        """The module values of one type, by key (every db)."""
        return {k: v for (_, k), v in self.keys.items()
                if isinstance(v, ModuleValue) and v.type_name == type_name}


def parse_rdb(data: bytes) -> RdbFile:
    assert data[:5] == MAGIC, f"not an RDB file: {data[:9]!r}"
    out = RdbFile(int(data[5:9]), {}, {}, [])
    (crc,) = struct.unpack("<Q", data[-8:])
    assert crc == 0 or rp.crc64(data[:-8]) == crc, "CRC64 mismatch"
    r = rp.Reader(data[:-8])
    r.pos, db = 9, 0
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


def write_rdb(rdb_version: int, keys: dict[tuple[int, bytes], Value]) -> bytes:
    """A file Redis loads: the keys by db, no aux fields, a CRC64."""
    out = bytearray(MAGIC + b"%04d" % rdb_version)
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
