"""A grammar-aware fuzzer over every AI.* command, against a real server with all backends.

Each command is generated from one of its valid forms (docs/commands.md),
then mutated: counts become 0, -1, 2^31, 2^32-2, 2^63 or non-numbers; dims and their
products grow past what fits; dtypes, BLOB sizes and keywords change; keys are swapped for
keys of another type (a string, a list, a model where a tensor is due); `|>` is put
anywhere in DAGs; model blobs of every backend (small valid models made at start by the
real TensorFlow, PyTorch and ONNX) are cut, flipped, or given to the wrong backend; script
sources are cut, flipped and nested deep.

Seeded and bounded. After every batch the server must answer PING with nothing logged
about a crash; every reply must come within 5 s; and where the only mutation makes an error
due, only an error may come back:
  * a count of 2^31 or more, or a count that is no integer, is an error;
  * a key of another type where the command reads or writes a tensor, model or script
    gives an error.

    python tests/support/fuzz_ai.py --seed 1                   # 3,000 commands
    python tests/support/fuzz_ai.py --seed 1 --long            # 100,000 commands
    python tests/support/fuzz_ai.py --seed 1 --commands 20000
"""
from __future__ import annotations

import argparse
import pickle
import dataclasses
import pathlib
import random
import sys
import time
from typing import Any, Callable

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

from fuzz_harness import Counts, Target, short  # noqa: E402

INTERESTING_COUNTS = [0, -1, 1, 2, 3, 2**31, 2**32 - 2, 2**63, 2**63 - 1, -(2**63), 2**64,
                      "1.5", "abc", "", "0x10", " 1", "+2", "1e3"]
HUGE_COUNTS = [2**31, 2**32 - 2, 2**63, 2**63 - 1, 2**64]
NOT_INTEGERS = ["1.5", "abc", "", "0x10", " 1", "1e3"]
DTYPES = ["FLOAT", "DOUBLE", "INT8", "INT16", "INT32", "INT64", "UINT8", "UINT16", "BOOL",
          "STRING"]
BAD_DTYPES = ["UINT32", "HALF", "float", "int8", "INT", "FLOAT32", "", "STRINGS"]
ELEM = {"FLOAT": 4, "DOUBLE": 8, "INT8": 1, "INT16": 2, "INT32": 4, "INT64": 8, "UINT8": 1,
        "UINT16": 2, "BOOL": 1, "STRING": 9}
KEYWORDS = ["INPUTS", "OUTPUTS", "BLOB", "VALUES", "META", "TAG", "BATCHSIZE", "MINBATCHSIZE",
            "MINBATCHTIMEOUT", "TIMEOUT", "KEYS", "ARGS", "LOAD", "PERSIST", "ROUTING", "SOURCE",
            "ENTRY_POINTS", "|>", "$", "RESETSTAT", "AI.TENSORSET", "AI.MODELEXECUTE"]
# Zero-filled tensors larger than this are not generated (the server accepts up to its
# zero-fill cap, which is memory, not a fault); products that overflow 64 bits are.
MAX_FILL_BYTES = 8 << 20

TENSORS = {"t_f22": ("FLOAT", [2, 2]), "t_f2": ("FLOAT", [2]), "t_f33": ("FLOAT", [3, 3]),
           "t_i64": ("INT64", [2, 2]), "t_s": ("STRING", [2]), "t_b": ("BOOL", [2, 2]),
           "t_d": ("DOUBLE", [2, 2])}
WRONG = ["str_k", "lst_k"]
MISSING = ["nokey", "{x}nokey"]


@dataclasses.dataclass
class Blobs:
    models: dict[str, bytes]        # backend -> a valid small model
    tf_io: tuple[list[str], list[str]]
    scripts: list[str]
    entry_points: list[str]


def make_blobs() -> Blobs:
    """Small valid models of every backend, made by the real frameworks."""
    import onnx_models as om  # noqa: PLC0415
    import tf_graphs  # noqa: PLC0415
    import torch_models as tm  # noqa: PLC0415

    return Blobs(models={"TF": tf_graphs.mul_graph(), "TORCH": tm.add().blob,
                         "ONNX": om.add().blob},
                 tf_io=(["a", "b"], ["mul"]),
                 scripts=[tm.SCRIPT, tm.REDIS_SCRIPT],
                 entry_points=list(tm.ENTRY_POINTS) + list(tm.REDIS_ENTRY_POINTS))


@dataclasses.dataclass
class Cmd:
    args: list[Any]
    name: str
    counts: list[int] = dataclasses.field(default_factory=list)  # indexes of counts
    keys: list[int] = dataclasses.field(default_factory=list)    # tensor/model/script keys
    dag: bool = False


class Gen:
    """Valid forms of each command, then mutations."""

    def __init__(self, rng: random.Random, blobs: Blobs) -> None:
        self.r = rng
        self.b = blobs

    # -- pieces ------------------------------------------------------------------------
    def tensor_key(self) -> str:
        return self.r.choice(list(TENSORS) + ["t_new", "t_new2"])

    def model_key(self) -> str:
        return self.r.choice(["m_tf", "m_pt", "m_ox", "m_ptb", "m_new"])

    def count(self, n: int) -> Any:
        return n

    def dims(self, dtype: str, with_data: bool) -> list[Any]:
        r = self.r
        nd = r.choice([0, 1, 1, 2, 2, 3, 4])
        dims: list[Any] = [r.choice([1, 2, 3, 4]) for _ in range(nd)]
        roll = r.random()
        if roll < 0.05:
            dims = [1] * r.choice([254, 255, 300])
        elif roll < 0.15:
            dims.append(r.choice([0, -1, 2**31, 2**32 - 2, 2**63, 2**62, "x", 1.5]))
        elif roll < 0.2:
            dims = [2**32, 2**32]  # the product overflows 64 bits
        if not with_data:
            prod = 1
            for d in dims:
                prod *= d if isinstance(d, int) and d > 0 else 1
            if MAX_FILL_BYTES < prod * ELEM.get(dtype, 8) < 2**64:
                dims = [2, 2]
        return dims

    def values(self, dtype: str, n: int) -> list[Any]:
        r = self.r
        if dtype == "STRING":
            return [r.choice(["a", "bc", "", "x\x00y", "é"]) for _ in range(n)]
        if dtype in ("FLOAT", "DOUBLE"):
            return [r.choice([0, 1.5, -2, "inf", "nan", "1e308", "x"]) for _ in range(n)]
        if dtype == "BOOL":
            return [r.choice([0, 1, 1, 2]) for _ in range(n)]
        return [r.choice([0, 1, 7, 127, 128, -1, 2**63, "z"]) for _ in range(n)]

    def blob_for(self, dtype: str, dims: list[Any]) -> bytes:
        n = 1
        for d in dims:
            n *= d if isinstance(d, int) and d > 0 else 1
        n = min(n, 1 << 16)
        if dtype == "STRING":
            data = b"".join(self.r.choice([b"a\x00", b"\x00", b"xyz\x00"]) for _ in range(n))
        elif dtype == "BOOL":
            data = bytes(self.r.choice([0, 1]) for _ in range(n))
        else:
            data = self.r.randbytes(n * ELEM.get(dtype, 4))
        roll = self.r.random()
        if roll < 0.1:
            data = data[:-1]
        elif roll < 0.2:
            data += b"\x00"
        elif roll < 0.25:
            data = b""
        return data

    def model_blob(self, backend: str) -> bytes:
        r = self.r
        blob = self.b.models.get(backend) or r.choice(list(self.b.models.values()))
        roll = r.random()
        if roll < 0.5:
            return blob
        if roll < 0.6:
            return r.choice(list(self.b.models.values()))  # another backend's model
        if roll < 0.75:
            return blob[: r.randrange(len(blob))]
        if roll < 0.9:
            data = bytearray(blob)
            for _ in range(r.choice([1, 2, 8])):
                data[r.randrange(len(data))] ^= 1 << r.randrange(8)
            return bytes(data)
        return r.randbytes(r.choice([0, 1, 16, 300]))

    def source(self) -> str:
        r = self.r
        src = r.choice(self.b.scripts)
        roll = r.random()
        if roll < 0.55:
            return src
        if roll < 0.7:
            return src[: r.randrange(len(src))]
        if roll < 0.8:
            chars = list(src)
            for _ in range(r.choice([1, 3])):
                chars[r.randrange(len(chars))] = r.choice("()[]{}:\n x#'\"\\-+*")
            return "".join(chars)
        n = r.choice([100, 256, 257, 3000])
        head = "def f(tensors: List[Tensor], keys: List[str], args: List[str]):\n    return "
        body = r.choice(["(" * n + "tensors[0]" + ")" * n, "-" * n + "tensors[0]",
                         "+".join(["tensors[0]"] * n), "tensors" + "[0]" * n])
        return head + body + "\n"

    # -- commands ----------------------------------------------------------------------
    def tensorset(self, in_dag: bool = False) -> Cmd:
        r = self.r
        dtype = r.choice(DTYPES) if r.random() > 0.05 else r.choice(BAD_DTYPES)
        mode = r.choice(["none", "values", "blob", "blob"])
        dims = self.dims(dtype, with_data=mode != "none")
        args: list[Any] = ["AI.TENSORSET", self.tensor_key(), dtype, *dims]
        if mode == "values":
            n = 1
            for d in dims:
                n *= d if isinstance(d, int) and d > 0 else 1
            n = min(n, 64) + r.choice([0, 0, 0, 1, -1])
            args += ["VALUES", *self.values(dtype, max(n, 0))]
        elif mode == "blob":
            args += ["BLOB", self.blob_for(dtype, dims)]
        return Cmd(args, "AI.TENSORSET", keys=[1])

    def tensorget(self) -> Cmd:
        fmts = self.r.sample(["META", "BLOB", "VALUES", "meta", "JUNK"], self.r.choice([0, 1, 2]))
        return Cmd(["AI.TENSORGET", self.tensor_key(), *fmts], "AI.TENSORGET", keys=[1])

    def modelstore(self) -> Cmd:
        r = self.r
        backend = r.choice(["TF", "TORCH", "ONNX"] * 6 + ["TFLITE", "tf", "XLA"])
        args: list[Any] = ["AI.MODELSTORE", self.model_key(), backend,
                           r.choice(["CPU", "CPU", "cpu", "CPU:0", "GPU", "CPU:123456", "X"])]
        counts = []
        if r.random() < 0.3:
            args += ["TAG", r.choice(["t", "", "tag with spaces"])]
        if r.random() < 0.3:
            bs = r.choice([1, 2, 4])
            args += ["BATCHSIZE", bs]
            if r.random() < 0.5:
                args += ["MINBATCHSIZE", r.choice([1, bs, bs + 1]),
                         "MINBATCHTIMEOUT", r.choice([10, 50])]
        if backend.upper() == "TF" or r.random() < 0.05:
            ins, outs = self.b.tf_io
            args += ["INPUTS", len(ins)]
            counts.append(len(args) - 1)
            args += ins
            args += ["OUTPUTS", len(outs)]
            counts.append(len(args) - 1)
            args += outs
        blob = self.model_blob(backend.upper())
        args.append("BLOB")
        if r.random() < 0.2 and len(blob) > 2:
            cut = r.randrange(1, len(blob))
            args += [blob[:cut], blob[cut:]]
        else:
            args.append(blob)
        return Cmd(args, "AI.MODELSTORE", counts=counts, keys=[1])

    def modelset(self) -> Cmd:
        r = self.r
        backend = r.choice(["TF", "TORCH", "ONNX"])
        args: list[Any] = ["AI.MODELSET", self.model_key(), backend, "CPU"]
        if backend == "TF":
            ins, outs = self.b.tf_io
            args += ["INPUTS", *ins, "OUTPUTS", *outs]
        args += r.choice([["BLOB"], []]) + [self.model_blob(backend)]
        return Cmd(args, "AI.MODELSET", keys=[1])

    def modelget(self) -> Cmd:
        opts = self.r.sample(["META", "BLOB", "X"], self.r.choice([0, 1, 2]))
        return Cmd(["AI.MODELGET", self.model_key(), *opts], "AI.MODELGET", keys=[1])

    def modeldel(self) -> Cmd:
        return Cmd(["AI.MODELDEL", self.r.choice(["m_new", "m_tf", "nokey"])], "AI.MODELDEL",
                   keys=[1])

    def _model_io(self, key: str) -> tuple[int, int]:
        return {"m_tf": (2, 1), "m_pt": (2, 1), "m_ox": (2, 1), "m_ptb": (2, 1)}.get(key, (2, 1))

    def modelexecute(self, in_dag: bool = False) -> Cmd:
        r = self.r
        key = self.model_key()
        nin, nout = self._model_io(key)
        nin += r.choice([0, 0, 0, 0, 1, -1])
        ins = [r.choice(["t_f22", "t_f22", "t_f2", "t_f33", "t_i64", "t_d", "t_s"])
               for _ in range(max(nin, 0))]
        outs = [r.choice(["o1", "o2", "t_new"]) for _ in range(nout)]
        args: list[Any] = ["AI.MODELEXECUTE", key, "INPUTS", len(ins), *ins, "OUTPUTS",
                           len(outs), *outs]
        counts = [3, 5 + len(ins)]
        keys = [1, *range(4, 4 + len(ins)), *range(6 + len(ins), 6 + len(ins) + len(outs))]
        if r.random() < 0.2:
            args += ["TIMEOUT", r.choice([1, 1000, 0, -5, "x"])]
        return Cmd(args, "AI.MODELEXECUTE", counts=counts, keys=keys)

    def modelrun(self) -> Cmd:
        r = self.r
        args: list[Any] = ["AI.MODELRUN", self.model_key()]
        if r.random() < 0.2:
            args += ["TIMEOUT", r.choice([1000, 0, "x"])]
        args += ["INPUTS", "t_f22", r.choice(["t_f22", "t_f2", "t_f33"]), "OUTPUTS", "o1"]
        return Cmd(args, "AI.MODELRUN", keys=[1])

    def scriptstore(self) -> Cmd:
        r = self.r
        eps = r.sample(self.b.entry_points, r.choice([0, 1, 2, 3]))
        args: list[Any] = ["AI.SCRIPTSTORE", r.choice(["s", "s_new"]),
                           r.choice(["CPU", "CPU", "GPU", "CPUX", "X:1"])]
        if r.random() < 0.3:
            args += ["TAG", "tag"]
        args += ["ENTRY_POINTS", len(eps)]
        counts = [len(args) - 1]
        args += eps + ["SOURCE", self.source()]
        return Cmd(args, "AI.SCRIPTSTORE", counts=counts, keys=[1])

    def scriptset(self) -> Cmd:
        return Cmd(["AI.SCRIPTSET", self.r.choice(["s", "s_new"]), "CPU", "SOURCE",
                    self.source()], "AI.SCRIPTSET", keys=[1])

    def scriptget(self) -> Cmd:
        opts = self.r.sample(["META", "SOURCE", "X"], self.r.choice([0, 1, 2]))
        return Cmd(["AI.SCRIPTGET", self.r.choice(["s", "s_new"]), *opts], "AI.SCRIPTGET",
                   keys=[1])

    def scriptdel(self) -> Cmd:
        return Cmd(["AI.SCRIPTDEL", self.r.choice(["s_new", "nokey"])], "AI.SCRIPTDEL", keys=[1])

    def scriptexecute(self, in_dag: bool = False) -> Cmd:
        r = self.r
        fn = r.choice(self.b.entry_points + ["legacy_add", "nofn"])
        args: list[Any] = ["AI.SCRIPTEXECUTE", r.choice(["s", "s", "s_redis", "s_new"]), fn]
        counts: list[int] = []
        keys = [1]
        sections = ["INPUTS", "KEYS", "ARGS", "OUTPUTS"]
        if not in_dag:
            first = r.choice(["INPUTS", "KEYS"])
            sections.remove(first)
            order = [first] + r.sample(sections, r.choice([0, 1, 2, 3]))
        else:
            order = r.sample(sections, r.choice([1, 2, 3, 4]))
        for sec in order:
            n = r.choice([1, 1, 2, 3])
            args += [sec, n]
            counts.append(len(args) - 1)
            start = len(args)
            if sec == "INPUTS":
                args += [r.choice(["t_f22", "t_f2", "t_i64"]) for _ in range(n)]
                keys += list(range(start, start + n))
            elif sec == "KEYS":
                args += [r.choice(["k1", "{a}k2", "t_f22"]) for _ in range(n)]
            elif sec == "ARGS":
                args += [r.choice(["1", "2", "-5", "x", ""]) for _ in range(n)]
            else:
                args += [r.choice(["o1", "o2", "o3"]) for _ in range(n)]
                keys += list(range(start, start + n))
        if r.random() < 0.15 and not in_dag:
            args += ["TIMEOUT", r.choice([1000, 1, "x", -1])]
        return Cmd(args, "AI.SCRIPTEXECUTE", counts=counts, keys=keys)

    def scriptrun(self) -> Cmd:
        r = self.r
        args: list[Any] = ["AI.SCRIPTRUN", "s", r.choice(["bar", "legacy_add", "legacy_var"])]
        if r.random() < 0.2:
            args += ["TIMEOUT", r.choice([1000, "x"])]
        args += ["INPUTS", "t_f22"] + (["$"] if r.random() < 0.3 else []) + ["t_f22"]
        if r.random() < 0.7:
            args += ["OUTPUTS", "o1"]
        return Cmd(args, "AI.SCRIPTRUN", keys=[1])

    def dag(self) -> Cmd:
        r = self.r
        name = r.choice(["AI.DAGEXECUTE", "AI.DAGEXECUTE_RO", "AI.DAGRUN", "AI.DAGRUN_RO"])
        args: list[Any] = [name]
        counts: list[int] = []
        keys: list[int] = []
        loads = r.sample(list(TENSORS), r.choice([0, 1, 2, 3]))
        if loads or name.startswith("AI.DAGEXECUTE") and r.random() < 0.7:
            loads = loads or ["t_f22"]
            args += ["LOAD", len(loads)]
            counts.append(len(args) - 1)
            keys += list(range(len(args), len(args) + len(loads)))
            args += loads
        if "_RO" not in name and r.random() < 0.5:
            args += ["PERSIST", 1]
            counts.append(len(args) - 1)
            keys.append(len(args))
            args.append(r.choice(["o1", "p1"]))
        if r.random() < 0.2:
            args += ["ROUTING", r.choice(["t_f22", "{a}"])]
        if r.random() < 0.15:
            args += ["TIMEOUT", r.choice([1000, 0, -1, "x"])]
        for _ in range(r.choice([1, 2, 3, 4])):
            args.append("|>")
            op = r.choice(["set", "get", "mexec", "sexec", "mrun", "srun"])
            if op == "set":
                sub = self.tensorset(True)
            elif op == "get":
                sub = Cmd(["AI.TENSORGET", r.choice(loads + ["o1", "p1", "x"]),
                           r.choice(["META", "VALUES", "BLOB"])], "")
            elif op == "mexec":
                sub = self.modelexecute(True)
            elif op == "sexec":
                sub = self.scriptexecute(True)
            elif op == "mrun":
                sub = self.modelrun()
            else:
                sub = self.scriptrun()
            if sub.args[0] == "AI.TENSORSET" and r.random() < 0.5:
                sub.args[1] = "p1"
            args += sub.args
        return Cmd(args, name, counts=counts, keys=keys, dag=True)

    def info(self) -> Cmd:
        args: list[Any] = ["AI.INFO", self.r.choice(["m_tf", "s", "t_f22", "nokey", "m_pt"])]
        if self.r.random() < 0.3:
            args.append(self.r.choice(["RESETSTAT", "x"]))
        return Cmd(args, "AI.INFO")

    def scan(self) -> Cmd:
        name = self.r.choice(["AI._MODELSCAN", "AI._SCRIPTSCAN"])
        return Cmd([name] + (["x"] if self.r.random() < 0.2 else []), name)

    def config(self) -> Cmd:
        r = self.r
        form = r.choice([
            ["GET", r.choice(["BACKENDSPATH", "MODEL_CHUNK_SIZE", "X"])],
            ["MODEL_CHUNK_SIZE", r.choice([1, 7, 100, 1 << 20, 0, -1, "x"])],
            ["LOADBACKEND", r.choice(["TF", "TORCH", "ONNX", "TFLITE", "X"]),
             r.choice(["/nonexistent/x.so", "redisai_torch/redisai_torch.so", "", "/etc/passwd"])],
            ["BACKENDSPATH", r.choice(["/tmp/nonexistent-fuzz", ""])],
            ["X"], []])
        return Cmd(["AI.CONFIG", *form], "AI.CONFIG")

    GENERATORS = ["tensorset", "tensorset", "tensorget", "modelstore", "modelset", "modelget",
                  "modeldel", "modelexecute", "modelexecute", "modelrun", "scriptstore",
                  "scriptset", "scriptget", "scriptdel", "scriptexecute", "scriptexecute",
                  "scriptrun", "dag", "dag", "dag", "info", "scan", "config"]

    # -- mutation ----------------------------------------------------------------------
    def mutate(self, cmd: Cmd) -> tuple[Cmd, str | None]:
        """Mutates cmd in place; returns it and, when one mutation alone makes an error due,
        why."""
        r = self.r
        a = cmd.args
        due: str | None = None
        n = r.choice([0, 0, 1, 1, 1, 2, 3])
        for _ in range(n):
            kind = r.choice(["count", "count", "key", "token", "delete", "dup", "swap",
                             "truncate", "keyword", "pipe"])
            alone = n == 1
            counts = [i for i in cmd.counts if i < len(a)]
            keys = [i for i in cmd.keys if i < len(a)]
            if kind == "count" and counts:
                i = r.choice(counts)
                v = r.choice(INTERESTING_COUNTS)
                a[i] = v
                if alone and (v in HUGE_COUNTS or v in NOT_INTEGERS):
                    due = f"count {v!r} at argument {i}"
            elif kind == "key" and keys:
                i = r.choice(keys)
                a[i] = r.choice(WRONG)
                if alone:
                    due = f"key of another type at argument {i}"
            elif kind == "token" and len(a) > 1:
                a[r.randrange(1, len(a))] = r.choice(INTERESTING_COUNTS + KEYWORDS + WRONG)
            elif kind == "delete" and len(a) > 1:
                del a[r.randrange(1, len(a))]
            elif kind == "dup" and len(a) > 1:
                i = r.randrange(1, len(a))
                a.insert(i, a[i])
            elif kind == "swap" and len(a) > 2:
                i, j = r.randrange(1, len(a)), r.randrange(1, len(a))
                a[i], a[j] = a[j], a[i]
            elif kind == "truncate" and len(a) > 1:
                del a[r.randrange(1, len(a)):]
            elif kind == "keyword" and len(a) > 1:
                a[r.randrange(1, len(a))] = r.choice(KEYWORDS)
            elif kind == "pipe":
                a.insert(r.randrange(1, len(a) + 1), "|>")
        return cmd, due

    def next(self) -> tuple[Cmd, str | None]:
        while True:
            cmd, due = self.mutate(getattr(self, self.r.choice(self.GENERATORS))())
            if not fills_too_much(cmd.args):
                return cmd, due


def fills_too_much(args: list[Any]) -> bool:
    """A TENSORSET (alone or in a DAG) whose mutated dims make a zero-filled tensor larger
    than MAX_FILL_BYTES yet small enough to be accepted. Such a tensor is size, not a fault:
    the server takes it up to its zero-fill cap (4 GiB), and reading its VALUES back (billions
    of elements) then takes minutes, which would look like a hang."""
    for i, a in enumerate(args):
        if str(a).upper() != "AI.TENSORSET":
            continue
        prod = 1
        for d in args[i + 3:]:
            try:
                v = int(d)
            except (TypeError, ValueError):
                break
            prod *= v if v > 0 else 1
        if MAX_FILL_BYTES < prod * 9 and prod <= 2**33:
            return True
    return False


# --------------------------------------------------------------------------------------
# The key pool, restored after every batch
# --------------------------------------------------------------------------------------

def reset_pool(target: Target, blobs: Blobs) -> None:
    c = target.client
    c.execute("AI.CONFIG", "BACKENDSPATH", str(target.install_dir / "backends"))
    c.execute("AI.CONFIG", "MODEL_CHUNK_SIZE", 1 << 20)
    for key, (dtype, dims) in TENSORS.items():
        if dtype == "STRING":
            c.execute("AI.TENSORSET", key, dtype, *dims, "VALUES", *(["ab"] * 2))
        else:
            n = 1
            for d in dims:
                n *= d
            c.execute("AI.TENSORSET", key, dtype, *dims, "VALUES", *([1] * n))
    c.execute("DEL", "str_k", "lst_k", "p1", "o1", "o2", "o3")
    c.execute("SET", "str_k", "v")
    c.execute("RPUSH", "lst_k", "v")
    ins, outs = blobs.tf_io
    want = {
        "m_tf": ["AI.MODELSTORE", "m_tf", "TF", "CPU", "INPUTS", 2, *ins, "OUTPUTS", 1, *outs,
                 "BLOB", blobs.models["TF"]],
        "m_pt": ["AI.MODELSTORE", "m_pt", "TORCH", "CPU", "BLOB", blobs.models["TORCH"]],
        "m_ox": ["AI.MODELSTORE", "m_ox", "ONNX", "CPU", "BLOB", blobs.models["ONNX"]],
        "m_ptb": ["AI.MODELSTORE", "m_ptb", "TORCH", "CPU", "BATCHSIZE", 4, "MINBATCHSIZE", 2,
                  "MINBATCHTIMEOUT", 20, "BLOB", blobs.models["TORCH"]],
        "s": ["AI.SCRIPTSTORE", "s", "CPU", "ENTRY_POINTS", 2, "bar", "tuple_out", "SOURCE",
              blobs.scripts[0]],
        "s_redis": ["AI.SCRIPTSTORE", "s_redis", "CPU", "ENTRY_POINTS", 1, "set_get", "SOURCE",
                    blobs.scripts[1]],
    }
    for key, cmd in want.items():
        if c.execute("TYPE", key) != ("AI_SCRIPT" if key.startswith("s") else "AI__MODEL"):
            c.execute("DEL", key)
            c.execute(*cmd)
    drop_waiting_models(c, ["m_new", "m_ptb", "m_tf", "m_pt", "m_ox"])


def drop_waiting_models(c: Any, keys: list[str]) -> None:
    """A model with MINBATCHSIZE and no MINBATCHTIMEOUT waits for a full batch forever, as
    docs/commands.md ("Auto-batching") says, and one with a MINBATCHTIMEOUT of hours waits
    hours: not a hang of the server. The fuzzer deletes such models."""
    for key in keys:
        meta = c.execute("AI.MODELGET", key, "META")
        if isinstance(meta, list):
            m = dict(zip(meta[::2], meta[1::2]))
            wait = m.get(b"minbatchtimeout", 0)
            if m.get(b"minbatchsize", 0) > 0 and not 0 < wait <= 1000:
                c.execute("DEL", key)


# --------------------------------------------------------------------------------------
# The run
# --------------------------------------------------------------------------------------

def run(install_dir: pathlib.Path, seed: int, commands: int, batch: int = 100,
        log: Callable[[str], None] = print, save_dir: pathlib.Path | None = None) -> Counts:
    rng = random.Random(seed)
    blobs = make_blobs()
    gen = Gen(rng, blobs)
    counts = Counts()
    target = Target(install_dir)
    start = time.monotonic()
    try:
        reset_pool(target, blobs)
        last: list[Any] = []
        while counts.tried < commands:
            batch_cmds: list[list[Any]] = []
            for _ in range(min(batch, commands - counts.tried)):
                cmd, due = gen.next()
                last = cmd.args
                batch_cmds.append(cmd.args)
                outcome, reply = target.send(cmd.args, counts, cmd.name)
                if outcome in ("crash", "hang") and save_dir:
                    save_dir.mkdir(parents=True, exist_ok=True)
                    path = save_dir / f"{outcome}-{counts.tried}.pickle"
                    path.write_bytes(pickle.dumps(batch_cmds))
                    counts.findings[-1] += f"  (batch saved: {path})\n"
                if outcome in ("crash", "hang"):
                    reset_pool(target, blobs)
                    continue
                if due and outcome == "ok":
                    counts.violations += 1
                    counts.findings.append(f"no error although {due}: {short(cmd.args)} -> "
                                           f"{reply!r}"[:600])
                if outcome == "ok" and cmd.name in ("AI.MODELSTORE", "AI.MODELSET"):
                    drop_waiting_models(target.client, [str(cmd.args[1])])
            target.check_batch(counts, last)
            reset_pool(target, blobs)
            if counts.tried % 10000 < batch:
                log(f"[fuzz_ai] {counts.tried} commands, {time.monotonic() - start:.0f} s, "
                    f"crashes {counts.crashes}, hangs {counts.hangs}")
    finally:
        target.stop()
    return counts


def replay(install_dir: pathlib.Path, path: pathlib.Path) -> int:
    cmds = pickle.loads(path.read_bytes())
    blobs = make_blobs()
    target = Target(install_dir)
    counts = Counts()
    try:
        reset_pool(target, blobs)
        for args in cmds:
            outcome, reply = target.send(args, counts, str(args[0]))
            print(outcome, short(args, 200), "->", repr(reply)[:200])
            if outcome in ("crash", "hang"):
                print(counts.findings[-1])
                break
    finally:
        target.stop()
    return 0 if counts.crashes == counts.hangs == 0 else 1


def main() -> int:
    from paths import find_install_dir  # noqa: PLC0415

    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--long", action="store_true", help="100,000 commands")
    p.add_argument("--commands", type=int, default=None)
    p.add_argument("--save", type=pathlib.Path, default=None,
                   help="folder for the batch (pickled commands) that led to a crash or hang")
    p.add_argument("--replay", type=pathlib.Path, default=None,
                   help="send a saved batch to a fresh server, reporting each reply")
    opts = p.parse_args()
    if opts.replay:
        return replay(find_install_dir(), opts.replay)
    n = opts.commands or (100_000 if opts.long else 3_000)
    start = time.monotonic()
    counts = run(find_install_dir(), opts.seed, n, save_dir=opts.save)
    print(counts.report(f"fuzz_ai seed {opts.seed}, {time.monotonic() - start:.0f} s"))
    return 0 if counts.crashes == counts.hangs == counts.violations == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
