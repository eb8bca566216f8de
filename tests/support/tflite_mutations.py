"""Seeded damage to .tflite blobs, for the TFLITE fuzz test (tests/models/test_tflite_fuzz.py).

A mutation is a pure function of (base blob, kind, seed, index): `mutate(base, kind, seed, i)`
always gives the same bytes, so a finding is reproduced from four values (see `main`). The
kinds, each as likely as the others in `plan`:

  bytes1, bytes16, bytes64  that many random bytes set to other random values
  truncate                  the blob cut at a random length
  header                    1-4 bytes of the root offset, the file identifier or the root
                            table and its vtable changed
  vtable                    one field slot of a table's vtable (where its field lies) changed
  offset                    a reference field (to a sub-table, vector or string) moved
  quant                     a quantized tensor's zero point set to another int64 (in a uint8
                            model, LiteRT 2.3.0 can SIGSEGV in compile on a far one)
  io_index                  a tensor index of a subgraph's or an operator's inputs or outputs
                            set to another (in an int8 model LiteRT 2.3.0 can throw a
                            std::logic_error from the input layout of a compiled model)
  tensor                    a tensor's type, one of its dims, or its buffer index changed

The flatbuffer-aware kinds find their fields by walking the base blob with the slot numbers
of TensorFlow Lite's schema (schema.fbs: a table's field k is vtable slot 4 + 2k); the walk
reads the well-formed base only, never a damaged blob.
"""
from __future__ import annotations

import argparse
import dataclasses
import functools
import random
import struct
import sys
from typing import Iterator, Sequence

KINDS = ("bytes1", "bytes16", "bytes64", "truncate", "header", "vtable", "offset", "quant",
         "io_index", "tensor")

# schema.fbs field numbers (slot k lies at vtable offset 4 + 2k).
_MODEL_SUBGRAPHS, _MODEL_BUFFERS, _MODEL_OPCODES, _MODEL_SIGNATURES = 2, 4, 1, 7
_SG_TENSORS, _SG_INPUTS, _SG_OUTPUTS, _SG_OPERATORS = 0, 1, 2, 3
_T_SHAPE, _T_TYPE, _T_BUFFER, _T_QUANT = 0, 1, 2, 4
_Q_ZERO_POINT = 3
_OP_INPUTS, _OP_OUTPUTS = 1, 2
_SIG_INPUTS, _SIG_OUTPUTS = 0, 1
_TM_TENSOR_INDEX = 1
# The fields of each table kind that hold a reference (uoffset), for `offset`.
_REF_SLOTS = {
    "model": (1, 2, 3, 4, 6, 7), "subgraph": (0, 1, 2, 3, 4), "tensor": (0, 3, 4, 7),
    "quant": (0, 1, 2, 3), "operator": (1, 2, 4, 5), "opcode": (1,), "buffer": (0,),
    "signature": (0, 1, 2), "tensormap": (0,),
}


def _u16(b: bytes, p: int) -> int:
    return struct.unpack_from("<H", b, p)[0]


def _u32(b: bytes, p: int) -> int:
    return struct.unpack_from("<I", b, p)[0]


def _i32(b: bytes, p: int) -> int:
    return struct.unpack_from("<i", b, p)[0]


def _vtable(b: bytes, table: int) -> int:
    return table - _i32(b, table)


def _field(b: bytes, table: int, slot: int) -> int | None:
    """The position of a table's field `slot`, or None when absent."""
    vt = _vtable(b, table)
    at = 4 + 2 * slot
    if at >= _u16(b, vt):
        return None
    off = _u16(b, vt + at)
    return table + off if off else None


def _vector(b: bytes, table: int, slot: int) -> tuple[int, int]:
    """(first element's position, length) of a vector field; (0, 0) when absent."""
    pos = _field(b, table, slot)
    if pos is None:
        return 0, 0
    v = pos + _u32(b, pos)
    return v + 4, _u32(b, v)


def _tables(b: bytes, table: int, slot: int) -> list[int]:
    start, n = _vector(b, table, slot)
    return [start + 4 * k + _u32(b, start + 4 * k) for k in range(n)]


@dataclasses.dataclass(frozen=True)
class Layout:
    """Where the fields the mutations aim at lie in one base blob."""
    tables: tuple[tuple[str, int], ...]      # (table kind, position)
    zero_points: tuple[int, ...]             # positions of int64 zero points
    indices: tuple[int, ...]                 # positions of int32 tensor indices (i/o)
    types: tuple[int, ...]                   # positions of a tensor's type byte
    dims: tuple[int, ...]                    # positions of int32 shape dims
    buffers: tuple[int, ...]                 # positions of a tensor's uint32 buffer index
    tensors: int                             # tensors in the first subgraph
    root_end: int                            # end of the root table (the header region)


@functools.lru_cache(maxsize=None)
def layout(blob: bytes) -> Layout:
    b = blob
    root = _u32(b, 0)
    tables = [("model", root)]
    zero_points, indices, types, dims, buffers = [], [], [], [], []
    tables += [("opcode", t) for t in _tables(b, root, _MODEL_OPCODES)]
    tables += [("buffer", t) for t in _tables(b, root, _MODEL_BUFFERS)]
    ntensors = 0
    for sg in _tables(b, root, _MODEL_SUBGRAPHS):
        tables.append(("subgraph", sg))
        for slot in (_SG_INPUTS, _SG_OUTPUTS):
            start, n = _vector(b, sg, slot)
            indices += [start + 4 * k for k in range(n)]
        tensors = _tables(b, sg, _SG_TENSORS)
        ntensors = ntensors or len(tensors)
        for t in tensors:
            tables.append(("tensor", t))
            start, n = _vector(b, t, _T_SHAPE)
            dims += [start + 4 * k for k in range(n)]
            for slot, into in ((_T_TYPE, types), (_T_BUFFER, buffers)):
                pos = _field(b, t, slot)
                if pos is not None:
                    into.append(pos)
            qpos = _field(b, t, _T_QUANT)
            if qpos is not None:
                q = qpos + _u32(b, qpos)
                tables.append(("quant", q))
                start, n = _vector(b, q, _Q_ZERO_POINT)
                zero_points += [start + 8 * k for k in range(n)]
        for op in _tables(b, sg, _SG_OPERATORS):
            tables.append(("operator", op))
            for slot in (_OP_INPUTS, _OP_OUTPUTS):
                start, n = _vector(b, op, slot)
                indices += [start + 4 * k for k in range(n)]
    for sig in _tables(b, root, _MODEL_SIGNATURES):
        tables.append(("signature", sig))
        for slot in (_SIG_INPUTS, _SIG_OUTPUTS):
            tables += [("tensormap", tm) for tm in _tables(b, sig, slot)]
    vt = _vtable(b, root)
    root_end = max(root + _u16(b, vt + 2), vt + _u16(b, vt))
    return Layout(tuple(tables), tuple(zero_points), tuple(indices), tuple(types),
                  tuple(dims), tuple(buffers), ntensors, root_end)


def _other_byte(rng: random.Random, old: int) -> int:
    return (old + rng.randrange(1, 256)) % 256


def _far_int(rng: random.Random, bits: int) -> int:
    """A signed value of `bits` bits: small, a power of two away, or anything."""
    pick = rng.randrange(3)
    if pick == 0:
        return rng.randrange(-8, 9)
    top = 1 << (bits - 1)
    if pick == 1:
        return rng.choice((-1, 1)) * (1 << rng.randrange(bits - 1)) + rng.randrange(-2, 3)
    return rng.randrange(-top, top)


def _put(out: bytearray, fmt: str, pos: int, value: int) -> None:
    size = struct.calcsize(fmt)
    lo, hi = (-(1 << (8 * size - 1)), 1 << (8 * size - 1)) if fmt.islower() else (0, 1 << (8 * size))
    struct.pack_into(fmt, out, pos, lo + (value - lo) % (hi - lo))


def _bytes(rng: random.Random, out: bytearray, n: int, lo: int = 0, hi: int | None = None) -> None:
    hi = len(out) if hi is None else hi
    for p in rng.sample(range(lo, hi), min(n, hi - lo)):
        out[p] = _other_byte(rng, out[p])


def mutate(blob: bytes, kind: str, seed: int, index: int) -> bytes:
    """The mutation `index` of kind `kind` under `seed`: the same bytes on every call."""
    rng = random.Random(f"{seed}:{kind}:{index}")
    out = bytearray(blob)
    if kind in ("bytes1", "bytes16", "bytes64"):
        _bytes(rng, out, int(kind[5:]))
        return bytes(out)
    if kind == "truncate":
        return bytes(out[:rng.randrange(1, len(out))])
    lay = layout(blob)
    if kind == "header":
        _bytes(rng, out, rng.randrange(1, 5), 0, lay.root_end)
    elif kind == "vtable":
        _, table = rng.choice(lay.tables)
        vt = _vtable(blob, table)
        slot = vt + 2 * rng.randrange(_u16(blob, vt) // 2)
        _put(out, "<H", slot, _u16(blob, slot) + _far_int(rng, 16))
    elif kind == "offset":
        refs = [p for name, t in lay.tables for s in _REF_SLOTS[name]
                if (p := _field(blob, t, s)) is not None]
        pos = rng.choice(refs)
        _put(out, "<I", pos, _u32(blob, pos) + _far_int(rng, 32))
    elif kind == "quant":
        pos = rng.choice(lay.zero_points)
        _put(out, "<q", pos, _far_int(rng, 64) if rng.randrange(2) else _far_int(rng, 32))
    elif kind == "io_index":
        _put(out, "<i", rng.choice(lay.indices), rng.randrange(-2, lay.tensors + 4))
    elif kind == "tensor":
        which = rng.choice([w for w, fields in enumerate((lay.types, lay.dims, lay.buffers))
                            if fields])
        if which == 0:
            out[rng.choice(lay.types)] = rng.randrange(0, 20)
        elif which == 1:
            _put(out, "<i", rng.choice(lay.dims), _far_int(rng, 32))
        else:
            _put(out, "<I", rng.choice(lay.buffers), rng.randrange(0, 2 * lay.tensors + 4))
    else:
        raise ValueError(f"unknown kind {kind!r}")
    return bytes(out)


def set_dim(blob: bytes, tensor: int, dim: int, value: int) -> bytes:
    """`blob` with one dim of the first subgraph's tensor `tensor` set to `value`: a model
    that declares a tensor of any size in a few KB."""
    root = _u32(blob, 0)
    t = _tables(blob, _tables(blob, root, _MODEL_SUBGRAPHS)[0], _SG_TENSORS)[tensor]
    start, n = _vector(blob, t, _T_SHAPE)
    if not 0 <= dim < n:
        raise ValueError(f"tensor {tensor} has {n} dims")
    out = bytearray(blob)
    _put(out, "<i", start + 4 * dim, value)
    return bytes(out)


@dataclasses.dataclass(frozen=True)
class Mutation:
    base: str
    kind: str
    seed: int
    index: int
    blob: bytes

    def __str__(self) -> str:
        return (f"{self.base} {self.kind} seed {self.seed} index {self.index} "
                f"({len(self.blob)} bytes)")


def kinds_for(blob: bytes) -> tuple[str, ...]:
    """The kinds that apply to a base: `quant` needs a quantized tensor (a float model has
    none)."""
    return tuple(k for k in KINDS if k != "quant" or layout(blob).zero_points)


def plan(bases: Sequence[tuple[str, bytes]], seed: int, count: int) -> Iterator[Mutation]:
    """`count` mutations: bases in turn, and each base's kinds in turn."""
    for i in range(count):
        name, blob = bases[i % len(bases)]
        kinds = kinds_for(blob)
        kind = kinds[(i // len(bases)) % len(kinds)]
        yield Mutation(name, kind, seed, i, mutate(blob, kind, seed, i))


def main(argv: Sequence[str] | None = None) -> int:
    """Writes one mutation of one of the fuzz test's base models (converted anew by
    TensorFlow, as the test does) to a file: the reproduction of a finding.

        python tests/support/tflite_mutations.py BASE KIND SEED INDEX OUT.tflite

    BASE is cnn_float, cnn_uint8 or cnn_int8 (tflite_fuzz_models.py)."""
    import tflite_fuzz_models  # noqa: PLC0415 - imports TensorFlow: only here

    p = argparse.ArgumentParser(description=main.__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("base", choices=("cnn_float", "cnn_uint8", "cnn_int8"))
    p.add_argument("kind", choices=KINDS)
    p.add_argument("seed", type=int)
    p.add_argument("index", type=int)
    p.add_argument("out")
    a = p.parse_args(argv)
    [base] = [b for b in tflite_fuzz_models.bases() if b.name == a.base]
    with open(a.out, "wb") as f:
        f.write(mutate(base.blob, a.kind, a.seed, a.index))
    return 0


if __name__ == "__main__":
    sys.exit(main())
