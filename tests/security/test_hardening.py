"""Regression tests for the crashes of issue 10 (found by fuzzing), against a real server
with all three backends:

* a TorchScript source nested thousands of levels deep overflowed the main thread's stack
  inside libtorch's compiler (SCRIPTSTORE, SCRIPTSET, RESTORE);
* a tensor of 255 dims aborted TensorFlow (TensorShape's CHECK);
* RESTORE payloads whose lengths and counts say 2^62, 2^63, 2^64-2 made the module allocate
  that much (Redis's OOM abort);
* MINBATCHSIZE larger than BATCHSIZE was stored, and MODELEXECUTE on it never returned;
* shape mismatches between inputs must come back as the framework's error.
"""
from __future__ import annotations

import io
import struct
import zipfile
from typing import Iterator

import numpy as np
import pytest

import onnx_models as om
import rdb_payloads as rp
import tf_graphs
import torch_models as tm
from helpers import LogMark, assert_error, assert_error_startswith, assert_ok
from model_io import get, put
from redis_server import Connect, RedisServer
from resp import RawClient, RespError

DEPTH_LIMIT = 256
DEPTH_ERR = "ERR script source nests deeper than 256 levels"
MINBATCH_ERR = "ERR MINBATCHSIZE cannot be larger than BATCHSIZE"
HEAD = "def f(tensors: List[Tensor], keys: List[str], args: List[str]):\n"
T = "tensors[0]"


@pytest.fixture(scope="module")
def srv(all_backends_server: RedisServer) -> Iterator[RedisServer]:
    yield all_backends_server
    # stopped here already, so that a crash on the way out is in the log too
    all_backends_server.stop()
    assert "crashed by signal" not in all_backends_server.log()


@pytest.fixture
def c(srv: RedisServer, connect: Connect) -> Iterator[RawClient]:
    client = connect(srv)
    yield client
    assert client.execute("PING") == "PONG"


# --------------------------------------------------------------------------------------
# Crash 2: deeply nested script sources
# --------------------------------------------------------------------------------------

def nested(kind: str, n: int) -> str:
    """A source whose function nests n levels of one construct."""
    bodies = {
        "paren": "return " + "(" * n + T + ")" * n,
        "bracket": "return " + "[" * n + T + "]" * n,
        "call": "return " + "torch.neg(" * n + T + ")" * n,
        "unary": "return " + "-" * n + T,
        "plus": "return " + "+".join([T] * (n + 1)),
        "pow": "return " + "**".join([T] * (n + 1)),
        "ternary": "return " + (T + " if True else ") * n + T,
        "subscript": "return tensors" + "[0]" * n,
        "method": "return " + T + ".neg()" * n,
    }
    if kind == "indent":
        lines = [" " * (4 + i) + "if True:" for i in range(n)]
        return HEAD + "\n".join(lines) + "\n" + " " * (4 + n) + f"return {T}\n    return {T}\n"
    if kind == "elif":
        lines = ["    x = 0", "    if x == 0:", "        x = 1"]
        for i in range(n):
            lines += [f"    elif x == {i + 1}:", "        x = 2"]
        return HEAD + "\n".join(lines) + f"\n    return {T}\n"
    return HEAD + "    " + bodies[kind] + "\n"


KINDS = ["paren", "bracket", "call", "unary", "plus", "pow", "ternary", "subscript", "method",
         "indent", "elif"]


@pytest.mark.parametrize("kind", KINDS)
def test_deep_script_sources_are_refused_before_libtorch(c, kind):
    # Thousands of levels of every construct that makes libtorch recurse: each crashed the
    # server (SIGSEGV on the main thread's 8 MB stack) at 2,500 to 20,000 levels.
    # (20,000 levels of indentation would be a 200 MB source: 3,000 is enough there.)
    for n in (DEPTH_LIMIT + 1, 2500, 3000 if kind == "indent" else 20000):
        src = nested(kind, n)
        assert_error_startswith(
            c.execute("AI.SCRIPTSTORE", "s", "CPU", "ENTRY_POINTS", 1, "f", "SOURCE", src),
            DEPTH_ERR)
        assert_error_startswith(c.execute("AI.SCRIPTSET", "s", "CPU", "SOURCE", src), DEPTH_ERR)
    assert c.execute("EXISTS", "s") == 0


@pytest.mark.parametrize("kind", KINDS)
def test_scripts_nested_a_little_less_deep_still_compile(c, kind):
    # Well under the limit the depth check lets libtorch judge: a real compile and run.
    src = nested(kind, 40)
    reply = c.execute("AI.SCRIPTSTORE", "s", "CPU", "ENTRY_POINTS", 1, "f", "SOURCE", src)
    assert not str(reply).startswith(DEPTH_ERR), reply


def test_the_issue_reproduction_and_strings_comments_do_not_count(c):
    src = "def f(tensors: List[Tensor], keys: List[str], args: List[str]):\n" \
          "    return " + "(" * 2500 + "tensors[0]" + ")" * 2500 + "\n"
    assert_error(c.execute("AI.SCRIPTSTORE", "s", "CPU", "ENTRY_POINTS", 1, "f", "SOURCE", src),
                 f"{DEPTH_ERR} (brackets, operator chains, blocks, elifs) at line 2")
    # Brackets inside strings and comments are not nesting.
    ok = (HEAD + "    # " + "(" * 5000 + "\n"
          + "    s = '" + "(" * 5000 + "' + \"\"\"" + "[" * 5000 + "\"\"\"\n"
          + f"    return {T}\n")
    assert_ok(c.execute("AI.SCRIPTSTORE", "s", "CPU", "ENTRY_POINTS", 1, "f", "SOURCE", ok))
    # The scripts of the suite stay well inside the limit.
    assert_ok(c.execute("AI.SCRIPTSTORE", "s2", "CPU", "ENTRY_POINTS", len(tm.ENTRY_POINTS),
                        *tm.ENTRY_POINTS, "SOURCE", tm.SCRIPT))


def script_payload(c: RawClient, source: str) -> bytes:
    assert_ok(c.execute("AI.SCRIPTSTORE", "tmp", "CPU", "ENTRY_POINTS", 1, "f",
                        "SOURCE", HEAD + f"    return {T}\n"))
    parsed = rp.parse_dump(c.execute("DUMP", "tmp"))
    fields = list(parsed.fields)
    fields[2] = rp.cstr(source)
    return rp.dump_payload(parsed.type_name, parsed.encver, fields, parsed.rdb_version)


def test_restore_of_a_deep_script_is_refused(c, srv):
    mark = LogMark(srv.logfile)
    payload = script_payload(c, nested("paren", 5000))
    reply = c.execute("RESTORE", "deep", 0, payload)
    assert isinstance(reply, RespError), reply
    assert c.execute("EXISTS", "deep") == 0
    mark.wait_for_line("Failed loading AI_SCRIPT deep", "nests deeper than 256")


# --------------------------------------------------------------------------------------
# Crash 3: shapes a framework cannot take
# --------------------------------------------------------------------------------------

def test_tf_refuses_more_dims_than_tensorshape_allows(c):
    assert_ok(c.execute("AI.MODELSTORE", "m", "TF", "CPU", "INPUTS", 2, "a", "b", "OUTPUTS", 1,
                        "mul", "BLOB", tf_graphs.mul_graph()))
    assert_ok(c.execute("AI.TENSORSET", "t", "FLOAT", *([1] * 255), "VALUES", 3))
    assert_error(c.execute("AI.MODELEXECUTE", "m", "INPUTS", 2, "t", "t", "OUTPUTS", 1, "o"),
                 "ERR TF: an input tensor has more dimensions than TensorFlow accepts (254)")
    reply = c.execute("AI.DAGEXECUTE", "LOAD", 1, "t", "|>", "AI.MODELEXECUTE", "m", "INPUTS", 2,
                      "t", "t", "OUTPUTS", 1, "o", "|>", "AI.TENSORGET", "o", "VALUES")
    assert isinstance(reply[0], RespError) and "254" in reply[0], reply
    # 254 dims is TensorShape's maximum and runs.
    assert_ok(c.execute("AI.TENSORSET", "t", "FLOAT", *([1] * 254), "VALUES", 3))
    assert_ok(c.execute("AI.MODELEXECUTE", "m", "INPUTS", 2, "t", "t", "OUTPUTS", 1, "o"))
    assert c.execute("AI.TENSORGET", "o", "VALUES") == [b"9"]


@pytest.mark.parametrize("backend", ["TORCH", "ONNX"])
def test_torch_and_onnx_take_many_dims(c, backend):
    # Neither framework has a dims limit in its C/C++ API (numpy's 64 is the Python binding's):
    # 255 and 1,000 dims run.
    blob = tm.add().blob if backend == "TORCH" else om.add().blob
    assert_ok(c.execute("AI.MODELSTORE", "m", backend, "CPU", "BLOB", blob))
    for n in (255, 1000):
        assert_ok(c.execute("AI.TENSORSET", "t", "FLOAT", *([1] * n), "VALUES", 3))
        assert_ok(c.execute("AI.MODELEXECUTE", "m", "INPUTS", 2, "t", "t", "OUTPUTS", 1, "o"))
        assert c.execute("AI.TENSORGET", "o", "VALUES") == [b"6"]


# --------------------------------------------------------------------------------------
# "Also seen": input shapes that do not fit together
# --------------------------------------------------------------------------------------

def test_shape_mismatches_are_errors_and_broadcasts_run(c):
    assert_ok(c.execute("AI.MODELSTORE", "tf", "TF", "CPU", "INPUTS", 2, "a", "b", "OUTPUTS", 1,
                        "mul", "BLOB", tf_graphs.mul_graph()))
    assert_ok(c.execute("AI.MODELSTORE", "tfb", "TF", "CPU", "BATCHSIZE", 4, "INPUTS", 2, "a",
                        "b", "OUTPUTS", 1, "mul", "BLOB", tf_graphs.mul_graph()))
    assert_ok(c.execute("AI.MODELSTORE", "pt", "TORCH", "CPU", "BLOB", tm.add().blob))
    assert_ok(c.execute("AI.MODELSTORE", "ox", "ONNX", "CPU", "BLOB", om.add().blob))
    a = np.arange(4, dtype=np.float32).reshape(2, 2)
    put(c, "a22", a)
    put(c, "b33", np.ones((3, 3), dtype=np.float32))
    put(c, "b3", np.ones(3, dtype=np.float32))
    put(c, "b2", np.array([10, 20], dtype=np.float32))

    def run(model: str, x: str, y: str) -> object:
        c.execute("DEL", "o")
        return c.execute("AI.MODELEXECUTE", model, "INPUTS", 2, x, y, "OUTPUTS", 1, "o")

    for model in ("tf", "tfb"):
        assert_error_startswith(run(model, "a22", "b33"), "Incompatible shapes: [2,2] vs. [3,3]")
        assert c.execute("EXISTS", "o") == 0  # nothing written on failure
    # libtorch's interpreter message, as RedisAI 1.2 replies it (issue 11)
    text = assert_error_startswith(run("pt", "a22", "b3"), "The following operation failed in "
                                   "the TorchScript interpreter. Traceback of TorchScript")
    assert text.endswith(" RuntimeError: The size of tensor a (2) must match the size of "
                         "tensor b (3) at non-singleton dimension 1 "), text
    assert c.execute("EXISTS", "o") == 0
    assert_error_startswith(run("ox", "a22", "b3"), "Non-zero status code returned while running")
    assert c.execute("EXISTS", "o") == 0
    # legitimate broadcasting: [2,2] and [2]
    assert_ok(run("pt", "a22", "b2"))
    assert np.array_equal(get(c, "o"), a + np.array([10, 20], dtype=np.float32))
    assert_ok(run("tf", "a22", "b2"))
    assert np.array_equal(get(c, "o"), a * np.array([10, 20], dtype=np.float32))
    assert_ok(run("ox", "a22", "b2"))
    assert np.array_equal(get(c, "o"), a + np.array([10, 20], dtype=np.float32))
    # the same mismatch inside a DAG is that op's error
    reply = c.execute("AI.DAGEXECUTE", "LOAD", 2, "a22", "b33", "|>", "AI.MODELEXECUTE", "tf",
                      "INPUTS", 2, "a22", "b33", "OUTPUTS", 1, "o", "|>", "AI.TENSORGET", "o",
                      "META")
    assert isinstance(reply[0], RespError) and "Incompatible shapes" in reply[0], reply
    assert reply[1] == "NA"


# --------------------------------------------------------------------------------------
# MINBATCHSIZE > BATCHSIZE
# --------------------------------------------------------------------------------------

def test_minbatchsize_larger_than_batchsize_is_refused(c):
    blob = tm.add().blob
    assert_error(c.execute("AI.MODELSTORE", "m", "TORCH", "CPU", "BATCHSIZE", 2, "MINBATCHSIZE",
                           3, "BLOB", blob), MINBATCH_ERR)
    assert_error(c.execute("AI.MODELSET", "m", "TORCH", "CPU", "BATCHSIZE", 2, "MINBATCHSIZE", 3,
                           "BLOB", blob), MINBATCH_ERR)
    assert c.execute("EXISTS", "m") == 0
    # equal is fine, and runs
    assert_ok(c.execute("AI.MODELSTORE", "m", "TORCH", "CPU", "BATCHSIZE", 2, "MINBATCHSIZE", 2,
                        "MINBATCHTIMEOUT", 100, "BLOB", blob))
    put(c, "a", np.ones((2, 3), dtype=np.float32))
    assert_ok(c.execute("AI.MODELEXECUTE", "m", "INPUTS", 2, "a", "a", "OUTPUTS", 1, "o"))


def model_fields(c: RawClient, key: str) -> rp.Parsed:
    return rp.parse_dump(c.execute("DUMP", key))


def restore_fields(c: RawClient, parsed: rp.Parsed, fields: list) -> object:
    payload = rp.dump_payload(parsed.type_name, parsed.encver, fields, parsed.rdb_version)
    return c.execute("RESTORE", "x", 0, payload, "REPLACE")


def test_restore_of_minbatchsize_larger_than_batchsize_is_refused(c):
    assert_ok(c.execute("AI.MODELSTORE", "m", "TORCH", "CPU", "BATCHSIZE", 2, "MINBATCHSIZE", 2,
                        "BLOB", tm.add().blob))
    p = model_fields(c, "m")
    fields = list(p.fields)
    # U backend, device, tag, U batch, U minbatch, ...
    assert fields[3] == rp.U(2) and fields[4] == rp.U(2)
    fields[4] = rp.U(3)
    assert isinstance(restore_fields(c, p, fields), RespError)
    fields[4] = rp.U(2)
    assert_ok(restore_fields(c, p, fields))


# --------------------------------------------------------------------------------------
# Crash 4: lengths and counts of RESTORE payloads
# --------------------------------------------------------------------------------------

HUGE = [1 << 62, 1 << 63, (1 << 64) - 2, (1 << 32) - 2, 1 << 31]


def test_restore_of_huge_model_lengths_and_counts_is_an_error(c, srv):
    assert_ok(c.execute("AI.MODELSTORE", "m", "TF", "CPU", "INPUTS", 2, "a", "b", "OUTPUTS", 1,
                        "mul", "BLOB", tf_graphs.mul_graph()))
    p = model_fields(c, "m")
    f = list(p.fields)
    # U backend, device, tag, U batch, U minbatch, U timeout, U n_in, a, b, U n_out, mul,
    # U total, U chunks, chunk
    assert f[6] == rp.U(2) and f[9] == rp.U(1) and isinstance(f[13], bytes)
    for huge in HUGE:
        for index in (6, 9, 11, 12):  # n_in, n_out, blob length, chunk count
            fields = list(f)
            fields[index] = rp.U(huge)
            assert isinstance(restore_fields(c, p, fields), RespError), (index, huge)
            assert srv.alive()
    # a blob length larger than the chunks hold, and one smaller
    for total in (len(f[13]) + 1, len(f[13]) - 1, 0):
        fields = list(f)
        fields[11] = rp.U(total)
        assert isinstance(restore_fields(c, p, fields), RespError), total
    assert c.execute("EXISTS", "x") == 0
    assert_ok(restore_fields(c, p, f))  # the untouched payload restores


def test_restore_of_huge_tensor_and_script_counts_is_an_error(c, srv):
    put(c, "t", np.ones((2, 3), dtype=np.float32))
    p = model_fields(c, "t")
    f = list(p.fields)  # U code, U bits, S ndims, S dims..., data
    for huge in HUGE:
        fields = list(f)
        fields[2] = rp.U(huge)
        assert isinstance(restore_fields(c, p, fields), RespError), huge
    assert_ok(c.execute("AI.TENSORSET", "s", "STRING", 2, "VALUES", "ab", "c"))
    p = model_fields(c, "s")
    f = list(p.fields)  # U code, U bits, S ndims, S dim, data, U offsets x 2
    for huge in HUGE:
        fields = list(f)
        fields[3] = rp.U(huge)  # the dim: as many offsets as elements
        assert isinstance(restore_fields(c, p, fields), RespError), huge
    assert_ok(c.execute("AI.SCRIPTSTORE", "sc", "CPU", "ENTRY_POINTS", 1, "bar", "SOURCE",
                        tm.SCRIPT))
    p = model_fields(c, "sc")
    f = list(p.fields)  # device, tag, source, U entry points, names
    for huge in HUGE:
        fields = list(f)
        fields[3] = rp.U(huge)
        assert isinstance(restore_fields(c, p, fields), RespError), huge
    assert c.execute("EXISTS", "x") == 0
    assert_ok(restore_fields(c, p, f))


# --------------------------------------------------------------------------------------
# Found by tests/support/fuzz_ai.py: a TorchScript archive with flipped bits in a deflated member
# --------------------------------------------------------------------------------------

def deflated_code_member(blob: bytes) -> tuple[int, int]:
    """(offset, length) of the compressed bytes of the archive's code/ member."""
    z = zipfile.ZipFile(io.BytesIO(blob))
    info = next(i for i in z.infolist() if i.filename.endswith(".py"))
    assert info.compress_type == zipfile.ZIP_DEFLATED
    name_len, extra_len = struct.unpack("<HH", blob[info.header_offset + 26:info.header_offset + 30])
    return info.header_offset + 30 + name_len + extra_len, info.compress_size


def test_torch_archive_with_flipped_bits_is_refused(c):
    # libtorch reads zips with CRC checks compiled out: these two flips (one in the deflated
    # code, one in its debug pickle) crashed its TorchScript lexer (SIGSEGV in
    # StringCordView::find) on MODELSET/MODELSTORE.
    blob = bytearray(tm.add().blob)
    start, size = deflated_code_member(bytes(blob))
    bad = bytearray(blob)
    bad[start + size // 2] ^= 0x40
    reply = c.execute("AI.MODELSTORE", "m", "TORCH", "CPU", "BLOB", bytes(bad))
    assert isinstance(reply, RespError), reply
    assert reply.startswith("ERR corrupt TorchScript archive: code/"), reply
    # Single flipped bits all over the deflated code: the server stays up, and each flip is
    # refused (the inflated text fails its CRC-32, or does not inflate) unless it leaves the
    # inflated text as it was (a block header bit such as BFINAL): then the model is intact.
    accepted = []
    for i in range(start, start + size):
        for bit in (0x01, 0x40):
            bad = bytearray(blob)
            bad[i] ^= bit
            reply = c.execute("AI.MODELSTORE", "m", "TORCH", "CPU", "BLOB", bytes(bad))
            if not isinstance(reply, RespError):
                accepted.append((i, bit))
    assert len(accepted) <= 4, accepted
    assert c.execute("PING") == "PONG"
    assert_ok(c.execute("AI.MODELSTORE", "m", "TORCH", "CPU", "BLOB", bytes(blob)))


def with_nested_code(blob: bytes, n: int) -> bytes:
    """The Add model's archive rewritten (valid CRCs) with its forward's return expression
    inside n pairs of brackets: what a crafted model can carry."""
    zin = zipfile.ZipFile(io.BytesIO(blob))
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", compression=zipfile.ZIP_STORED) as zout:
        for info in zin.infolist():
            data = zin.read(info.filename)
            if info.filename.endswith(".debug_pkl"):
                continue  # its source ranges would no longer match
            if info.filename.endswith(".py"):
                text = data.decode()
                assert "return torch.add(a, b)" in text, text
                data = text.replace("return torch.add(a, b)",
                                    "return " + "(" * n + "torch.add(a, b)" + ")" * n).encode()
            zout.writestr(info.filename, data)
    return out.getvalue()


def test_torch_model_code_nested_too_deep_is_refused(c):
    # The code inside a TorchScript archive goes through the same recursive parser as a
    # script: 20,000 brackets crashed the server (SIGSEGV) at MODELSTORE.
    blob = tm.add().blob
    assert_error_startswith(
        c.execute("AI.MODELSTORE", "m", "TORCH", "CPU", "BLOB", with_nested_code(blob, 20000)),
        "ERR TorchScript model code nests deeper than 256 levels (code/")
    assert c.execute("EXISTS", "m") == 0
    # a few brackets are fine, and the rewritten model runs
    assert_ok(c.execute("AI.MODELSTORE", "m", "TORCH", "CPU", "BLOB", with_nested_code(blob, 10)))
    put(c, "a", np.ones((2, 3), dtype=np.float32))
    assert_ok(c.execute("AI.MODELEXECUTE", "m", "INPUTS", 2, "a", "a", "OUTPUTS", 1, "o"))
    assert np.array_equal(get(c, "o"), np.full((2, 3), 2, dtype=np.float32))
