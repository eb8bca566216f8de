"""Zip archives built field by field, to craft TorchScript archives that libtorch's zip reader
(miniz) starts on and that are broken after that: what Python's zipfile will not write.

    entries = zip_craft.entries_of(tm.add().blob)   # a real model's members, all stored
    entries[4].method = 8                           # then break one field
    blob = zip_craft.build(entries, zip64=True)

Each Entry gives its member's bytes and every field that a test may set to a wrong value; a
field left None is computed as a correct writer would (sizes, offset, CRC-32)."""
from __future__ import annotations

import io
import struct
import zipfile
import zlib
from dataclasses import dataclass, field

LOCAL_SIG = 0x04034B50
ENTRY_SIG = 0x02014B50
END_SIG = 0x06054B50
END64_SIG = 0x06064B50
LOCATOR64_SIG = 0x07064B50
STORED, DEFLATED = 0, 8


@dataclass
class Entry:
    name: bytes
    data: bytes
    method: int = STORED
    payload: bytes | None = None       # the bytes after the local header (None: data, deflated
                                       # when method is DEFLATED)
    flags: int = 0
    external_attr: int = 0
    comp_size: int | None = None       # central directory fields (None: the payload's, the
    uncomp_size: int | None = None     # data's, where the local header was written)
    local_offset: int | None = None
    extra: bytes = b""                 # the central directory entry's extra field
    local_sig: int = LOCAL_SIG
    local_extra: bytes = b""
    local_extra_len: int | None = None  # None: len(local_extra)


@dataclass
class Layout:
    """Fields of the end records that a test may set to wrong values (None: correct)."""
    count: int | None = None           # entries in the end record(s)
    disk: int = 0                      # number of this disk
    gap: bytes = b""                   # bytes between the central directory and the end records
    locator_offset: int | None = None  # where the zip64 locator says its end record is
    trailing: bytes = b""              # bytes after the end record
    extra_entries: list[bytes] = field(default_factory=list)  # raw bytes appended to the
                                                             # central directory


def _payload(e: Entry) -> bytes:
    if e.payload is not None:
        return e.payload
    if e.method == DEFLATED:
        c = zlib.compressobj(9, zlib.DEFLATED, -15)
        return c.compress(e.data) + c.flush()
    return e.data


def _local(e: Entry, payload: bytes) -> bytes:
    extra_len = len(e.local_extra) if e.local_extra_len is None else e.local_extra_len
    return struct.pack("<IHHHHHIIIHH", e.local_sig, 20, e.flags, e.method, 0, 0,
                       zlib.crc32(e.data), len(payload), len(e.data), len(e.name),
                       extra_len) + e.name + e.local_extra + payload


def _central(e: Entry, payload: bytes, offset: int) -> bytes:
    comp = len(payload) if e.comp_size is None else e.comp_size
    uncomp = len(e.data) if e.uncomp_size is None else e.uncomp_size
    where = offset if e.local_offset is None else e.local_offset
    return struct.pack("<IHHHHHHIIIHHHHHII", ENTRY_SIG, 45, 20, e.flags, e.method, 0, 0,
                       zlib.crc32(e.data), comp, uncomp, len(e.name), len(e.extra), 0, 0, 0,
                       e.external_attr, where) + e.name + e.extra


def build(entries: list[Entry], zip64: bool = False, layout: Layout | None = None) -> bytes:
    """The archive: local headers and data in order, the central directory, then (zip64) the
    zip64 end record and its locator, then the end record."""
    lay = layout or Layout()
    out = bytearray()
    central = []
    for e in entries:
        payload = _payload(e)
        central.append(_central(e, payload, len(out)))
        out += _local(e, payload)
    cd = b"".join(central) + b"".join(lay.extra_entries)
    cd_offset = len(out)
    out += cd + lay.gap
    n = len(entries) if lay.count is None else lay.count
    if zip64:
        end64 = len(out)
        out += struct.pack("<IQHHIIQQQQ", END64_SIG, 44, 45, 45, lay.disk, 0, n, n, len(cd),
                           cd_offset)
        where = end64 if lay.locator_offset is None else lay.locator_offset
        out += struct.pack("<IIQI", LOCATOR64_SIG, 0, where, 1)
    out += struct.pack("<IHHHHIIH", END_SIG, lay.disk, 0, min(n, 0xFFFF), min(n, 0xFFFF),
                       len(cd), cd_offset, 0)
    return bytes(out + lay.trailing)


def entries_of(blob: bytes) -> list[Entry]:
    """A zip archive's members in order, each to be written stored."""
    z = zipfile.ZipFile(io.BytesIO(blob))
    return [Entry(i.filename.encode(), z.read(i)) for i in z.infolist()]


def find(entries: list[Entry], suffix: str) -> Entry:
    """The one member whose name ends with /suffix."""
    found = [e for e in entries if e.name.endswith(b"/" + suffix.encode())]
    assert len(found) == 1, (suffix, [e.name for e in entries])
    return found[0]
