"""A fuzzer of corrupt RESTORE payloads of every RedisAI type, against a real server.

Valid DUMP payloads are taken at start from tensors of several dtypes (STRING included),
models of every backend (made by the real frameworks; one stored with `BACKEND <name>`, whose
name rides in the device field) and scripts. Each case mutates one:
field by field (tests/support/rdb_payloads.py parses and writes the module's fields) with counts
and lengths set to 0, 2^31, 2^32-2, 2^62, 2^63, 2^64-2 ..., strings cut, grown, flipped or
emptied, fields dropped, doubled or added, other encoding versions; or byte by byte (bit
flips, truncation, inserted bytes). The CRC64 is always recomputed, so Redis hands every
payload to the module. A payload that restores is then used (read back, run).

After every batch the server answers PING with nothing logged about a crash; every reply
comes within 5 s; a count or length field set to 2^31 or more is always refused.

    python tests/support/fuzz_restore.py --seed 1            # 2,000 payloads
    python tests/support/fuzz_restore.py --seed 1 --long     # 30,000 payloads
"""
from __future__ import annotations

import argparse
import pathlib
import random
import struct
import sys
import time
from typing import Any, Callable

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

import rdb_payloads as rp  # noqa: E402
from fuzz_ai import Blobs, drop_waiting_models, make_blobs  # noqa: E402
from fuzz_harness import Counts, Target, short  # noqa: E402
from persist_servers import backend_name  # noqa: E402

BIG = [2**31, 2**32 - 2, 2**62, 2**63, 2**64 - 2, 2**64 - 1]
VALUES = [0, 1, 2, 3, 7, 255, 256, 2**16, *BIG]


def sources(c: Any, blobs: Blobs, onnx_name: str) -> dict[str, rp.Parsed]:
    """Valid payloads, parsed, by name (onnx_name: the ONNX backend's, for a named model)."""
    def ok(*args: Any) -> None:
        reply = c.execute(*args)
        assert reply == "OK", (short(args), reply)

    c.execute("FLUSHALL", "SYNC")
    ok("AI.TENSORSET", "t_float", "FLOAT", 2, 3, "VALUES", 1, 2, 3, 4, 5, 6)
    ok("AI.TENSORSET", "t_int8", "INT8", 4, "VALUES", 1, 2, 3, 4)
    ok("AI.TENSORSET", "t_double", "DOUBLE", 1, 1, 2, "VALUES", 1, 2)
    ok("AI.TENSORSET", "t_bool", "BOOL", 3, "VALUES", 1, 0, 1)
    ok("AI.TENSORSET", "t_uint16", "UINT16", 2, "VALUES", 1, 65535)
    ok("AI.TENSORSET", "t_string", "STRING", 3, "VALUES", "a", "bc", "xyz")
    ok("AI.TENSORSET", "t_scalar", "INT64", "VALUES", 5)
    ins, outs = blobs.tf_io
    ok("AI.MODELSTORE", "m_tf", "TF", "CPU", "TAG", "t", "INPUTS", 2, *ins, "OUTPUTS", 1,
              *outs, "BLOB", blobs.models["TF"])
    ok("AI.MODELSTORE", "m_pt", "TORCH", "CPU", "BATCHSIZE", 4, "MINBATCHSIZE", 2,
              "MINBATCHTIMEOUT", 20, "BLOB", blobs.models["TORCH"])
    ok("AI.MODELSTORE", "m_ox", "ONNX", "CPU", "BLOB", blobs.models["ONNX"])
    ok("AI.MODELSTORE", "m_named", "ONNX", "CPU", "BACKEND", onnx_name, "TAG", "n", "BLOB",
       blobs.models["ONNX"])
    ok("AI.SCRIPTSTORE", "s", "CPU", "ENTRY_POINTS", 2, "bar", "tuple_out", "SOURCE",
              blobs.scripts[0])
    ok("AI.SCRIPTSET", "s_legacy", "CPU", "SOURCE", blobs.scripts[0])
    c.execute("AI.CONFIG", "MODEL_CHUNK_SIZE", 500)  # several chunks per model
    out = {}
    for key in ("t_float", "t_int8", "t_double", "t_bool", "t_uint16", "t_string", "t_scalar",
                "m_tf", "m_pt", "m_ox", "m_named", "s", "s_legacy"):
        out[key] = rp.parse_dump(c.execute("DUMP", key))
    c.execute("AI.CONFIG", "MODEL_CHUNK_SIZE", 1 << 20)
    return out


def count_fields(name: str, p: rp.Parsed) -> set[int]:
    """Indexes of fields that are counts or lengths: 2^31 or more there is always refused."""
    f = p.fields
    if name.startswith("t_"):
        ndims = f[2].value
        return {2, *range(3, 3 + ndims)} - ({3} if name == "t_scalar" else set())
    if name.startswith("m_"):
        # v4: U backend, device, tag, U batch, U minbatch, U timeout, U n_in
        nin = f[6].value
        nout_at = 7 + nin
        nout = f[nout_at].value
        total_at = nout_at + 1 + nout
        return {6, nout_at, total_at, total_at + 1}
    return {3}  # scripts: the entry-point count


def encode(p: rp.Parsed, fields: list, encver: int | None = None) -> bytes:
    return rp.dump_payload(p.type_name, p.encver if encver is None else encver, fields,
                           p.rdb_version)


def with_crc(body: bytes) -> bytes:
    return body + struct.pack("<Q", rp.crc64(body))


def mutate(r: random.Random, name: str, p: rp.Parsed) -> tuple[bytes, str | None]:
    """A corrupt payload with a valid CRC, and the reason an error is due (or None)."""
    fields = list(p.fields)
    kind = r.choice(["uint", "uint", "string", "drop", "dup", "add", "encver", "flip",
                     "truncate", "insert"])
    if kind == "uint":
        idx = [i for i, f in enumerate(fields) if isinstance(f, rp.U)]
        i = r.choice(idx)
        v = r.choice(VALUES + [r.getrandbits(64), fields[i].value + 1, fields[i].value - 1])
        fields[i] = rp.U(v & (2**64 - 1))
        due = f"field {i} = {v}" if i in count_fields(name, p) and v in BIG else None
        return encode(p, fields), due
    if kind == "string":
        idx = [i for i, f in enumerate(fields) if isinstance(f, bytes)]
        i = r.choice(idx)
        s = bytearray(fields[i])
        how = r.choice(["cut", "grow", "flip", "empty", "nul"])
        if how == "cut" and s:
            s = s[: r.randrange(len(s))]
        elif how == "grow":
            s += r.randbytes(r.choice([1, 7, 100]))
        elif how == "flip" and s:
            for _ in range(r.choice([1, 3])):
                s[r.randrange(len(s))] ^= 1 << r.randrange(8)
        elif how == "empty":
            s = bytearray()
        elif how == "nul" and s:
            s[r.randrange(len(s))] = 0
        fields[i] = bytes(s)
        return encode(p, fields), None
    if kind == "drop":
        del fields[r.randrange(len(fields))]
        return encode(p, fields), None
    if kind == "dup":
        i = r.randrange(len(fields))
        fields.insert(i, fields[i])
        return encode(p, fields), None
    if kind == "add":
        extra = rp.U(r.choice(VALUES)) if r.random() < 0.5 else r.randbytes(r.choice([0, 3]))
        fields.insert(r.randrange(len(fields) + 1), extra)
        return encode(p, fields), None
    if kind == "encver":
        return encode(p, fields, r.choice([0, 1, 2, 3, 5, 6, 1023])), None
    body = bytearray(encode(p, fields)[:-8])
    if kind == "flip":
        for _ in range(r.choice([1, 2, 4])):
            i = r.randrange(1, len(body) - 2)  # not the type byte nor the RDB version
            body[i] ^= 1 << r.randrange(8)
    elif kind == "truncate":
        cut = r.randrange(2, len(body) - 2)
        body = body[:cut] + body[-2:]
    else:
        i = r.randrange(1, len(body) - 2)
        body[i:i] = r.randbytes(r.choice([1, 2, 9]))
    return with_crc(bytes(body)), None


def use(c: Any, kind: Any) -> None:
    """Exercise a value that restored: read it back and run it."""
    if kind == "AI_TENSOR":
        c.execute("AI.TENSORGET", "x", "META", "VALUES")
        c.execute("AI.TENSORGET", "x", "BLOB")
        c.execute("AI.MODELEXECUTE", "m_ox", "INPUTS", 2, "x", "x", "OUTPUTS", 1, "o")
        c.execute("AI.DAGEXECUTE", "LOAD", 1, "x", "|>", "AI.SCRIPTEXECUTE", "s", "bar",
                  "INPUTS", 2, "x", "x", "OUTPUTS", 1, "o", "|>", "AI.TENSORGET", "o", "META")
    elif kind == "AI__MODEL":
        drop_waiting_models(c, ["x"])
        c.execute("AI.MODELGET", "x", "META", "BLOB")
        c.execute("AI.MODELEXECUTE", "x", "INPUTS", 2, "t_float", "t_float", "OUTPUTS", 1, "o")
        c.execute("AI.INFO", "x")
    elif kind == "AI_SCRIPT":
        c.execute("AI.SCRIPTGET", "x")
        c.execute("AI.SCRIPTEXECUTE", "x", "bar", "INPUTS", 2, "t_float", "t_float",
                  "OUTPUTS", 1, "o")
        c.execute("AI.SCRIPTRUN", "x", "bar", "INPUTS", "t_float", "t_float", "OUTPUTS", "o")


def run(install_dir: pathlib.Path, seed: int, cases: int, batch: int = 100,
        log: Callable[[str], None] = print) -> Counts:
    r = random.Random(seed)
    blobs = make_blobs()
    counts = Counts()
    target = Target(install_dir)
    onnx_name = backend_name(install_dir, "onnxruntime")
    start = time.monotonic()
    try:
        valid = sources(target.client, blobs, onnx_name)
        names = sorted(valid)
        last: list[Any] = []
        while counts.tried < cases:
            for _ in range(min(batch, cases - counts.tried)):
                name = r.choice(names)
                payload, due = mutate(r, name, valid[name])
                last = ["RESTORE", "x", 0, payload, "REPLACE"]
                outcome, reply = target.send(last, counts, f"RESTORE {name}")
                if outcome in ("crash", "hang"):
                    sources(target.client, blobs, onnx_name)
                    continue
                if due and outcome == "ok":
                    counts.violations += 1
                    counts.findings.append(f"restored although {due}: {name} {short(last)}")
                if outcome == "ok":
                    try:
                        use(target.client, target.client.execute("TYPE", "x"))
                    except OSError:
                        counts.crashes += 1
                        counts.findings.append(f"crash using a restored {name}: {short(last)}")
                        target.restart()
                        sources(target.client, blobs, onnx_name)
            target.check_batch(counts, last)
            if counts.tried % 5000 < batch:
                log(f"[fuzz_restore] {counts.tried} payloads, {time.monotonic() - start:.0f} s, "
                    f"crashes {counts.crashes}, hangs {counts.hangs}")
    finally:
        target.stop()
    return counts


def main() -> int:
    from paths import find_install_dir  # noqa: PLC0415

    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--long", action="store_true", help="30,000 payloads")
    p.add_argument("--cases", type=int, default=None)
    opts = p.parse_args()
    n = opts.cases or (30_000 if opts.long else 2_000)
    start = time.monotonic()
    counts = run(find_install_dir(), opts.seed, n)
    print(counts.report(f"fuzz_restore seed {opts.seed}, {time.monotonic() - start:.0f} s"))
    return 0 if counts.crashes == counts.hangs == counts.violations == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
