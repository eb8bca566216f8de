"""AI.TENSORSET / AI.TENSORGET (docs/commands.md, "Tensors"), exhaustively: every dtype with
VALUES and BLOB round trips, META and default replies, every error string in the order
checked, the QUIRKs 1.2 has (signed VALUES, BOOL blob last byte), STRING rules, 0-d
scalars, zero-filled tensors, large tensors, keyspace behaviour and DEBUG RELOAD.

Exact replies go through tests/support/resp.py (bulk strings come back as bytes, simple strings
as Status, errors as RespError with the whole line)."""
from __future__ import annotations

import numpy as np
import pytest

from helpers import TENSOR_EMPTY, WRONGTYPE, arity, assert_error, assert_error_startswith, assert_ok
from resp import RespError, Status

NUMERIC = {
    "FLOAT": np.float32, "DOUBLE": np.float64,
    "INT8": np.int8, "INT16": np.int16, "INT32": np.int32, "INT64": np.int64,
    "UINT8": np.uint8, "UINT16": np.uint16, "BOOL": np.uint8,
}
ALL_TYPES = [*NUMERIC, "STRING"]

E_TYPE = "ERR invalid data type"
E_SHAPE = "ERR invalid or negative value found in tensor shape"
E_BLOB_ARG = "ERR a single binary string should come after the BLOB argument in 'AI.TENSORSET' command"
E_NVALUES = "ERR wrong number of values was given in 'AI.TENSORSET' command"
E_LEN = "ERR data length does not match tensor shape and type"
E_BOOL = "ERR BOOL tensor elements must be 0 or 1"
E_NSTR = "ERR Number of string elements in data blob does not match tensor length"
E_VALUE = "ERR invalid value"
E_NUL = "ERR C-string value contains null character"
E_FORMAT = "ERR unsupported data format"
E_BOTH = "ERR both BLOB and VALUES specified"


def server_double(c, x: float) -> bytes:
    """How this server formats the double x in a RESP2 double reply (ZSCORE uses the same
    addReplyDouble as RM_ReplyWithDouble): the oracle for FLOAT/DOUBLE VALUES replies."""
    assert_ok(c.execute("SELECT", 15))
    try:
        c.execute("ZADD", "__fmt__", repr(float(x)), "m")
        v = c.execute("ZSCORE", "__fmt__", "m")
        c.execute("DEL", "__fmt__")
        return v
    finally:
        assert_ok(c.execute("SELECT", 0))


def sample(tname: str) -> np.ndarray:
    """A 2x3 array of the type with its extremes and (for signed types) negatives."""
    dt = NUMERIC[tname]
    if tname == "BOOL":
        return np.array([[0, 1, 1], [0, 0, 1]], dtype=np.uint8)
    if tname in ("FLOAT", "DOUBLE"):
        return np.array([[1.0, -2.5, 0.1], [np.inf, -np.inf, 3.0e38]], dtype=dt)
    info = np.iinfo(dt)
    return np.array([[info.min, info.max, 0], [1, info.max // 3, info.min // 2]], dtype=dt)


def meta(tname: str, shape: list[int]) -> list:
    return [b"dtype", tname.encode(), b"shape", shape]


# --------------------------------------------------------------------------------------
# Round trips
# --------------------------------------------------------------------------------------

@pytest.mark.parametrize("tname", list(NUMERIC))
def test_blob_round_trip(raw, tname):
    arr = sample(tname)
    blob = arr.tobytes()
    assert_ok(raw.execute("AI.TENSORSET", "t", tname, 2, 3, "BLOB", blob))
    assert raw.execute("AI.TENSORGET", "t", "BLOB") == blob
    assert raw.execute("AI.TENSORGET", "t", "META") == meta(tname, [2, 3])
    full = meta(tname, [2, 3]) + [b"blob", blob]
    assert raw.execute("AI.TENSORGET", "t") == full
    assert raw.execute("AI.TENSORGET", "t", "META", "BLOB") == full
    assert raw.execute("AI.TENSORGET", "t", "BLOB", "META") == full
    values = raw.execute("AI.TENSORGET", "t", "VALUES")
    flat = arr.reshape(-1)
    if tname in ("FLOAT", "DOUBLE"):
        assert values == [server_double(raw, float(v)) for v in flat]
        assert all(isinstance(v, bytes) for v in values)
    else:
        # integers (negatives included, from BLOB) and BOOL come back as RESP integers
        assert values == [int(v) for v in flat]
    assert raw.execute("AI.TENSORGET", "t", "META", "VALUES") == meta(tname, [2, 3]) + [b"values", values]
    assert raw.execute("AI.TENSORGET", "t", "VALUES", "META") == meta(tname, [2, 3]) + [b"values", values]
    assert raw.execute("TYPE", "t") == "AI_TENSOR"


@pytest.mark.parametrize("tname,values,expected", [
    ("FLOAT", ["1", "2.5", "-3", "0", "inf", "-inf"], [b"1", b"2.5", b"-3", b"0", b"inf", b"-inf"]),
    ("DOUBLE", ["1", "2.5", "-3", "0", "1e300", "-inf"], [b"1", b"2.5", b"-3", b"0", None, b"-inf"]),
    ("INT8", ["0", "1", "127", "5"], [0, 1, 127, 5]),
    ("INT16", ["0", "32767", "3", "4"], [0, 32767, 3, 4]),
    ("INT32", ["0", "2147483647", "7", "8"], [0, 2147483647, 7, 8]),
    ("INT64", ["0", "9223372036854775807", "9", "10"], [0, 9223372036854775807, 9, 10]),
    ("UINT8", ["0", "255", "128", "1"], [0, 255, 128, 1]),
    ("UINT16", ["0", "65535", "32768", "1"], [0, 65535, 32768, 1]),
    ("BOOL", ["0", "1", "1", "0"], [0, 1, 1, 0]),
])
def test_values_round_trip(raw, tname, values, expected):
    n = len(values)
    assert_ok(raw.execute("AI.TENSORSET", "t", tname, n, "VALUES", *values))
    got = raw.execute("AI.TENSORGET", "t", "VALUES")
    expected = [server_double(raw, float(v)) if e is None else e for v, e in zip(values, expected)]
    assert got == expected
    if tname in NUMERIC:
        dt = NUMERIC[tname]
        want = np.array([float(v) if tname in ("FLOAT", "DOUBLE") else int(v) for v in values], dtype=dt)
        assert raw.execute("AI.TENSORGET", "t", "BLOB") == want.tobytes()
    assert raw.execute("AI.TENSORGET", "t", "META") == meta(tname, [n])


def test_float_values_formatting(raw):
    """FLOAT replies are formatted from the double value of the stored float."""
    vals = [1.1, 0.1, 3.4028234663852886e38, 1e-45, 16777217.0, -0.75]
    assert_ok(raw.execute("AI.TENSORSET", "t", "FLOAT", len(vals), "VALUES", *map(repr, vals)))
    got = raw.execute("AI.TENSORGET", "t", "VALUES")
    as_float = [float(np.float32(v)) for v in vals]
    assert got == [server_double(raw, v) for v in as_float]
    # On Redis 7.0 that is %.17g of the double: 1.1f -> 1.1000000238418579
    assert [float(g) for g in got] == as_float
    assert got[0] in (b"1.1000000238418579", b"1.100000023841858")
    assert got[5] == b"-0.75"


def test_double_values_formatting(raw):
    vals = [0.1, 1e300, -2.5, 5e-324]
    assert_ok(raw.execute("AI.TENSORSET", "t", "DOUBLE", 4, "VALUES", *map(repr, vals)))
    got = raw.execute("AI.TENSORGET", "t", "VALUES")
    assert got == [server_double(raw, v) for v in vals]
    assert [float(g) for g in got] == vals
    assert raw.execute("AI.TENSORGET", "t", "BLOB") == np.array(vals, dtype=np.float64).tobytes()


def test_multi_dim_values_row_major(raw):
    assert_ok(raw.execute("AI.TENSORSET", "t", "INT32", 2, 3, 2, "VALUES", *range(12)))
    assert raw.execute("AI.TENSORGET", "t", "VALUES") == list(range(12))
    assert raw.execute("AI.TENSORGET", "t", "META") == meta("INT32", [2, 3, 2])
    assert raw.execute("AI.TENSORGET", "t", "BLOB") == np.arange(12, dtype=np.int32).tobytes()


def test_type_tokens_case_insensitive(raw):
    for token, canonical in [("float", "FLOAT"), ("Float", "FLOAT"), ("double", "DOUBLE"),
                             ("int8", "INT8"), ("Int16", "INT16"), ("iNt32", "INT32"),
                             ("int64", "INT64"), ("uint8", "UINT8"), ("Uint16", "UINT16"),
                             ("bool", "BOOL"), ("string", "STRING"), ("String", "STRING")]:
        assert_ok(raw.execute("AI.TENSORSET", "t", token, 1))
        assert raw.execute("AI.TENSORGET", "t", "META") == meta(canonical, [1]), token


def test_format_tokens_case_insensitive(raw):
    assert_ok(raw.execute("AI.TENSORSET", "t", "INT8", 2, "VALUES", 1, 2))
    assert raw.execute("AI.TENSORGET", "t", "meta") == meta("INT8", [2])
    assert raw.execute("AI.TENSORGET", "t", "Blob") == b"\x01\x02"
    assert raw.execute("AI.TENSORGET", "t", "values") == [1, 2]
    assert raw.execute("AI.TENSORGET", "t", "meta", "values") == meta("INT8", [2]) + [b"values", [1, 2]]


def test_repeated_format_tokens(raw):
    assert_ok(raw.execute("AI.TENSORSET", "t", "INT8", 2, "VALUES", 1, 2))
    assert raw.execute("AI.TENSORGET", "t", "META", "META") == meta("INT8", [2])
    assert raw.execute("AI.TENSORGET", "t", "BLOB", "BLOB") == b"\x01\x02"
    assert raw.execute("AI.TENSORGET", "t", "VALUES", "VALUES") == [1, 2]


def test_reply_element_kinds(raw):
    """Field and type names are bulk strings; dims integers; +OK a simple string."""
    reply = raw.execute("AI.TENSORSET", "t", "UINT8", 3, 1, "VALUES", 1, 2, 3)
    assert isinstance(reply, Status) and reply == "OK"
    full = raw.execute("AI.TENSORGET", "t")
    assert [type(x) for x in full] == [bytes, bytes, bytes, list, bytes, bytes]
    assert full[3] == [3, 1] and all(type(d) is int for d in full[3])


# --------------------------------------------------------------------------------------
# Signed-VALUES and BOOL QUIRKs, integer ranges
# --------------------------------------------------------------------------------------

@pytest.mark.parametrize("tname", ["INT8", "INT16", "INT32", "INT64"])
def test_signed_values_negative_rejected_quirk(raw, tname):
    assert_error(raw.execute("AI.TENSORSET", "t", tname, 1, "VALUES", -1), E_VALUE)
    assert raw.execute("EXISTS", "t") == 0


def test_int8_upstream_quirk_case(raw):
    assert_error(raw.execute("AI.TENSORSET", "t", "INT8", 2, "VALUES", -1, -128), E_VALUE)


@pytest.mark.parametrize("tname", ["INT8", "INT16", "INT32", "INT64"])
def test_signed_negative_via_blob(raw, tname):
    arr = np.array([-1, np.iinfo(NUMERIC[tname]).min], dtype=NUMERIC[tname])
    assert_ok(raw.execute("AI.TENSORSET", "t", tname, 2, "BLOB", arr.tobytes()))
    assert raw.execute("AI.TENSORGET", "t", "VALUES") == [int(x) for x in arr]
    assert raw.execute("AI.TENSORGET", "t", "BLOB") == arr.tobytes()


@pytest.mark.parametrize("tname,bad", [
    ("INT8", "128"), ("INT16", "32768"), ("INT32", "2147483648"),
    ("INT64", "9223372036854775808"), ("UINT8", "256"), ("UINT16", "65536"),
    ("UINT8", "-1"), ("UINT16", "-1"), ("BOOL", "2"), ("BOOL", "-1"),
    ("INT32", "1.5"), ("INT32", "abc"), ("INT64", ""), ("INT8", "1e2"), ("BOOL", "true"),
    ("UINT8", "0x10"),
    ("FLOAT", "nan"), ("FLOAT", "abc"), ("FLOAT", "1.5x"), ("DOUBLE", "nan"), ("DOUBLE", ""),
])
def test_invalid_value(raw, tname, bad):
    assert_error(raw.execute("AI.TENSORSET", "t", tname, 2, "VALUES", 1, bad), E_VALUE)


def test_bool_blob_check_skips_last_byte_quirk(raw):
    assert_ok(raw.execute("AI.TENSORSET", "t", "BOOL", 3, "BLOB", b"\x00\x01\x02"))
    assert raw.execute("AI.TENSORGET", "t", "BLOB") == b"\x00\x01\x02"
    assert_error(raw.execute("AI.TENSORSET", "t2", "BOOL", 3, "BLOB", b"\x02\x01\x00"), E_BOOL)
    assert_error(raw.execute("AI.TENSORSET", "t2", "BOOL", 3, "BLOB", b"\x00\xff\x01"), E_BOOL)
    assert raw.execute("EXISTS", "t2") == 0


# --------------------------------------------------------------------------------------
# STRING
# --------------------------------------------------------------------------------------

def test_string_values_round_trip(raw):
    elems = [b"hello", "w\u00f6rld".encode(), b"x"]
    assert_ok(raw.execute("AI.TENSORSET", "s", "STRING", 3, "VALUES", *elems))
    assert raw.execute("AI.TENSORGET", "s", "VALUES") == elems
    assert raw.execute("AI.TENSORGET", "s", "BLOB") == b"hello\x00w\xc3\xb6rld\x00x\x00"
    assert raw.execute("AI.TENSORGET", "s", "META") == meta("STRING", [3])
    assert raw.execute("AI.TENSORGET", "s") == meta("STRING", [3]) + [b"blob", b"hello\x00w\xc3\xb6rld\x00x\x00"]


def test_string_values_trailing_nul_dropped(raw):
    assert_ok(raw.execute("AI.TENSORSET", "s", "STRING", 2, "VALUES", b"abc\x00", b"de"))
    assert raw.execute("AI.TENSORGET", "s", "VALUES") == [b"abc", b"de"]
    assert raw.execute("AI.TENSORGET", "s", "BLOB") == b"abc\x00de\x00"


def test_string_values_inner_nul_rejected(raw):
    assert_error(raw.execute("AI.TENSORSET", "s", "STRING", 2, "VALUES", b"ok", b"a\x00b"), E_NUL)
    assert_error(raw.execute("AI.TENSORSET", "s", "STRING", 1, "VALUES", b"a\x00b\x00"), E_NUL)
    assert raw.execute("EXISTS", "s") == 0


def test_string_empty_value_rejected(raw):
    """Undefined behaviour in 1.2 (docs/commands.md, "Data types"): must be an ERR reply."""
    assert_error_startswith(raw.execute("AI.TENSORSET", "s", "STRING", 1, "VALUES", b""), "ERR")
    assert_error_startswith(raw.execute("AI.TENSORSET", "s", "STRING", 2, "VALUES", b"a", b""), "ERR")
    assert raw.execute("PING") == "PONG"


def test_string_empty_blob_rejected(raw):
    assert_error_startswith(raw.execute("AI.TENSORSET", "s", "STRING", 1, "BLOB", b""), "ERR")
    assert raw.execute("PING") == "PONG"


def test_string_blob_round_trip(raw):
    blob = b"ab\x00cd\x00ef\x00gh\x00"
    assert_ok(raw.execute("AI.TENSORSET", "s", "STRING", 2, 2, "BLOB", blob))
    assert raw.execute("AI.TENSORGET", "s", "VALUES") == [b"ab", b"cd", b"ef", b"gh"]
    assert raw.execute("AI.TENSORGET", "s", "BLOB") == blob
    assert raw.execute("AI.TENSORGET", "s", "META") == meta("STRING", [2, 2])


def test_string_blob_with_empty_elements(raw):
    assert_ok(raw.execute("AI.TENSORSET", "s", "STRING", 3, "BLOB", b"\x00x\x00\x00"))
    assert raw.execute("AI.TENSORGET", "s", "VALUES") == [b"", b"x", b""]
    assert raw.execute("AI.TENSORGET", "s", "BLOB") == b"\x00x\x00\x00"


@pytest.mark.parametrize("blob", [b"ab\x00cd", b"ab\x00", b"a\x00b\x00c\x00", b"abcd"])
def test_string_blob_element_count(raw, blob):
    assert_error(raw.execute("AI.TENSORSET", "s", "STRING", 2, "BLOB", blob), E_NSTR)


def test_string_zero_filled(raw):
    assert_ok(raw.execute("AI.TENSORSET", "s", "STRING", 3))
    assert raw.execute("AI.TENSORGET", "s", "VALUES") == [b"", b"", b""]
    assert raw.execute("AI.TENSORGET", "s", "BLOB") == b"\x00\x00\x00"
    assert raw.execute("AI.TENSORGET", "s", "META") == meta("STRING", [3])


def test_string_scalar(raw):
    assert_ok(raw.execute("AI.TENSORSET", "s", "STRING", "VALUES", "hi"))
    assert raw.execute("AI.TENSORGET", "s", "META") == meta("STRING", [])
    assert raw.execute("AI.TENSORGET", "s", "VALUES") == [b"hi"]
    assert raw.execute("AI.TENSORGET", "s", "BLOB") == b"hi\x00"


# --------------------------------------------------------------------------------------
# Zero-filled tensors and 0-d scalars
# --------------------------------------------------------------------------------------

@pytest.mark.parametrize("tname", list(NUMERIC))
def test_zero_filled(raw, tname):
    assert_ok(raw.execute("AI.TENSORSET", "z", tname, 2, 3))
    dt = NUMERIC[tname]
    assert raw.execute("AI.TENSORGET", "z", "BLOB") == np.zeros(6, dtype=dt).tobytes()
    zero = b"0" if tname in ("FLOAT", "DOUBLE") else 0
    assert raw.execute("AI.TENSORGET", "z", "VALUES") == [zero] * 6
    assert raw.execute("AI.TENSORGET", "z", "META") == meta(tname, [2, 3])


@pytest.mark.parametrize("tname", list(NUMERIC))
def test_scalar_values(raw, tname):
    assert_ok(raw.execute("AI.TENSORSET", "s", tname, "VALUES", 1))
    assert raw.execute("AI.TENSORGET", "s", "META") == meta(tname, [])
    one = b"1" if tname in ("FLOAT", "DOUBLE") else 1
    assert raw.execute("AI.TENSORGET", "s", "VALUES") == [one]
    assert raw.execute("AI.TENSORGET", "s", "BLOB") == np.ones(1, dtype=NUMERIC[tname]).tobytes()
    assert raw.execute("AI.TENSORGET", "s") == meta(tname, []) + [b"blob", np.ones(1, dtype=NUMERIC[tname]).tobytes()]


def test_scalar_blob_and_counts(raw):
    assert_ok(raw.execute("AI.TENSORSET", "s", "FLOAT", "BLOB", np.float32(2.5).tobytes()))
    assert raw.execute("AI.TENSORGET", "s", "META", "VALUES") == meta("FLOAT", []) + [b"values", [b"2.5"]]
    assert_error(raw.execute("AI.TENSORSET", "s", "DOUBLE", "VALUES", 1, 2), E_NVALUES)
    assert_error(raw.execute("AI.TENSORSET", "s", "DOUBLE", "BLOB", b"\x00" * 16), E_LEN)


def test_many_dims_zero_filled(raw):
    dims = [2, 1, 2, 1, 2, 1, 2, 3]
    assert_ok(raw.execute("AI.TENSORSET", "z", "UINT8", *dims))
    assert raw.execute("AI.TENSORGET", "z", "META") == meta("UINT8", dims)
    assert raw.execute("AI.TENSORGET", "z", "BLOB") == bytes(48)


# --------------------------------------------------------------------------------------
# AI.TENSORSET errors, in the order checked (docs/commands.md)
# --------------------------------------------------------------------------------------

def test_tensorset_arity(raw):
    assert_error(raw.execute("AI.TENSORSET"), arity("ai.tensorset"))
    assert_error(raw.execute("AI.TENSORSET", "t"), arity("ai.tensorset"))
    assert_error(raw.execute("AI.TENSORSET", "t", "FLOAT"), arity("ai.tensorset"))
    # arity is checked before the key type
    assert raw.execute("SET", "str", "x") == "OK"
    assert_error(raw.execute("AI.TENSORSET", "str", "FLOAT"), arity("ai.tensorset"))


def test_tensorset_wrongtype_first(raw):
    assert raw.execute("SET", "str", "x") == "OK"
    assert_error(raw.execute("AI.TENSORSET", "str", "NOTATYPE", 1), WRONGTYPE)
    assert_error(raw.execute("AI.TENSORSET", "str", "FLOAT", 0, "BLOB"), WRONGTYPE)
    assert_error(raw.execute("AI.TENSORSET", "str", "FLOAT", 1, "VALUES", 1), WRONGTYPE)
    assert raw.execute("GET", "str") == b"x"
    raw.execute("LPUSH", "list", "x")
    assert_error(raw.execute("AI.TENSORSET", "list", "FLOAT", 1), WRONGTYPE)


@pytest.mark.parametrize("token", ["UINT32", "UINT64", "HALF", "INT128", "INT", "UINT", "INT08",
                                   "FLOAT32", "FLOAT16", "BFLOAT16", "FLOATX", "INT8X", "STR", ""])
def test_invalid_data_type(raw, token):
    assert_error(raw.execute("AI.TENSORSET", "t", token, 1), E_TYPE)
    # the type is checked before the shape
    assert_error(raw.execute("AI.TENSORSET", "t", token, 0, "BLOB"), E_TYPE)


@pytest.mark.parametrize("dims", [["0"], ["-1"], ["abc"], ["2.0"], [""], ["2", "0"], ["3", "-2", "1"],
                                  ["1e2"]])
def test_invalid_shape(raw, dims):
    assert_error(raw.execute("AI.TENSORSET", "t", "FLOAT", *dims), E_SHAPE)
    # the shape is checked before BLOB / VALUES arity
    assert_error(raw.execute("AI.TENSORSET", "t", "FLOAT", *dims, "BLOB"), E_SHAPE)
    assert_error(raw.execute("AI.TENSORSET", "t", "FLOAT", *dims, "VALUES", 1, 2, 3), E_SHAPE)


def test_blob_argument_count(raw):
    assert_error(raw.execute("AI.TENSORSET", "t", "FLOAT", 2, "BLOB"), E_BLOB_ARG)
    assert_error(raw.execute("AI.TENSORSET", "t", "FLOAT", 2, "BLOB", b"a" * 8, b"b"), E_BLOB_ARG)
    assert_error(raw.execute("AI.TENSORSET", "t", "STRING", 2, "BLOB"), E_BLOB_ARG)
    assert_error(raw.execute("AI.TENSORSET", "t", "FLOAT", "blob"), E_BLOB_ARG)


def test_values_count(raw):
    assert_error(raw.execute("AI.TENSORSET", "t", "FLOAT", 2, "VALUES", 1), E_NVALUES)
    assert_error(raw.execute("AI.TENSORSET", "t", "FLOAT", 2, "VALUES", 1, 2, 3), E_NVALUES)
    assert_error(raw.execute("AI.TENSORSET", "t", "FLOAT", 2, "VALUES"), E_NVALUES)
    assert_error(raw.execute("AI.TENSORSET", "t", "FLOAT", 2, 2, "values", 1, 2, 3), E_NVALUES)
    # the count is checked before the values are parsed
    assert_error(raw.execute("AI.TENSORSET", "t", "INT8", 2, "VALUES", "x"), E_NVALUES)
    assert_error(raw.execute("AI.TENSORSET", "t", "STRING", 2, "VALUES", b"a\x00b"), E_NVALUES)


@pytest.mark.parametrize("tname,dims,nbytes", [
    ("FLOAT", [2], 7), ("FLOAT", [2], 9), ("DOUBLE", [1], 4), ("INT64", [2, 2], 16),
    ("INT8", [3], 0), ("UINT16", [3], 5), ("BOOL", [2], 3), ("INT32", [], 8),
])
def test_blob_length_mismatch(raw, tname, dims, nbytes):
    assert_error(raw.execute("AI.TENSORSET", "t", tname, *dims, "BLOB", b"\x00" * nbytes), E_LEN)
    assert raw.execute("EXISTS", "t") == 0


def test_failed_set_keeps_old_value(raw):
    assert_ok(raw.execute("AI.TENSORSET", "t", "INT8", 2, "VALUES", 1, 2))
    assert_error(raw.execute("AI.TENSORSET", "t", "INT8", 2, "VALUES", 1, 999), E_VALUE)
    assert_error(raw.execute("AI.TENSORSET", "t", "FLOAT", 2, "BLOB", b"123"), E_LEN)
    assert raw.execute("AI.TENSORGET", "t", "VALUES") == [1, 2]


# --------------------------------------------------------------------------------------
# AI.TENSORGET errors
# --------------------------------------------------------------------------------------

def test_tensorget_arity(raw):
    assert_error(raw.execute("AI.TENSORGET"), arity("ai.tensorget"))
    assert_ok(raw.execute("AI.TENSORSET", "t", "INT8", 1))
    assert_error(raw.execute("AI.TENSORGET", "t", "META", "BLOB", "VALUES"), arity("ai.tensorget"))
    assert_error(raw.execute("AI.TENSORGET", "t", "META", "META", "META"), arity("ai.tensorget"))


def test_tensorget_missing_key(raw):
    assert_error(raw.execute("AI.TENSORGET", "nokey"), TENSOR_EMPTY)
    assert_error(raw.execute("AI.TENSORGET", "nokey", "VALUES"), TENSOR_EMPTY)
    # the key is looked up before the format is parsed
    assert_error(raw.execute("AI.TENSORGET", "nokey", "NOTAFORMAT"), TENSOR_EMPTY)
    assert_error(raw.execute("AI.TENSORGET", "nokey", "BLOB", "VALUES"), TENSOR_EMPTY)


def test_tensorget_wrongtype(raw):
    raw.execute("SET", "str", "x")
    assert_error(raw.execute("AI.TENSORGET", "str"), WRONGTYPE)
    assert_error(raw.execute("AI.TENSORGET", "str", "META"), WRONGTYPE)
    assert_error(raw.execute("AI.TENSORGET", "str", "NOTAFORMAT"), WRONGTYPE)
    raw.execute("HSET", "h", "f", "v")
    assert_error(raw.execute("AI.TENSORGET", "h", "BLOB"), WRONGTYPE)


def test_tensorget_format_errors(raw):
    assert_ok(raw.execute("AI.TENSORSET", "t", "INT8", 1))
    assert_error(raw.execute("AI.TENSORGET", "t", "NOTAFORMAT"), E_FORMAT)
    assert_error(raw.execute("AI.TENSORGET", "t", "META", "NOTAFORMAT"), E_FORMAT)
    assert_error(raw.execute("AI.TENSORGET", "t", "NOTAFORMAT", "META"), E_FORMAT)
    assert_error(raw.execute("AI.TENSORGET", "t", ""), E_FORMAT)
    assert_error(raw.execute("AI.TENSORGET", "t", "BLOB", "VALUES"), E_BOTH)
    assert_error(raw.execute("AI.TENSORGET", "t", "values", "blob"), E_BOTH)


# --------------------------------------------------------------------------------------
# Keyspace behaviour
# --------------------------------------------------------------------------------------

def test_overwrite_clears_ttl_and_type(raw):
    assert_ok(raw.execute("AI.TENSORSET", "t", "INT8", 1, "VALUES", 5))
    assert raw.execute("EXPIRE", "t", 1000) == 1
    assert raw.execute("TTL", "t") > 0
    assert_ok(raw.execute("AI.TENSORSET", "t", "DOUBLE", 2, "VALUES", 1, 2))
    assert raw.execute("TTL", "t") == -1
    assert raw.execute("AI.TENSORGET", "t", "META") == meta("DOUBLE", [2])
    assert raw.execute("TYPE", "t") == "AI_TENSOR"
    assert raw.execute("DEL", "t") == 1
    assert_error(raw.execute("AI.TENSORGET", "t"), TENSOR_EMPTY)


def test_tensorset_invalidates_watch(raw, server):
    from resp import RawClient
    assert_ok(raw.execute("AI.TENSORSET", "t", "INT8", 1))
    assert_ok(raw.execute("WATCH", "t"))
    with RawClient(server.port) as other:
        assert_ok(other.execute("AI.TENSORSET", "t", "INT8", 1, "VALUES", 3))
    assert_ok(raw.execute("MULTI"))
    assert raw.execute("PING") == "QUEUED"
    assert raw.execute("EXEC") is None


def test_plain_commands_on_tensor_key(raw):
    assert_ok(raw.execute("AI.TENSORSET", "t", "INT8", 1))
    reply = raw.execute("GET", "t")
    assert isinstance(reply, RespError) and reply.startswith("WRONGTYPE"), reply


def test_select_db(raw):
    assert_ok(raw.execute("SELECT", 3))
    try:
        assert_ok(raw.execute("AI.TENSORSET", "t", "INT8", 1, "VALUES", 9))
        assert raw.execute("AI.TENSORGET", "t", "VALUES") == [9]
    finally:
        raw.execute("SELECT", 0)
    assert_error(raw.execute("AI.TENSORGET", "t"), TENSOR_EMPTY)


# --------------------------------------------------------------------------------------
# Large tensors
# --------------------------------------------------------------------------------------

def test_large_blob_64mb(raw):
    arr = np.arange(16 * 1024 * 1024, dtype=np.float32)
    blob = arr.tobytes()
    assert len(blob) == 64 * 1024 * 1024
    assert_ok(raw.execute("AI.TENSORSET", "big", "FLOAT", 4096, 4096, "BLOB", blob))
    got = raw.execute("AI.TENSORGET", "big", "BLOB")
    assert got == blob
    full = raw.execute("AI.TENSORGET", "big")
    assert full[:4] == meta("FLOAT", [4096, 4096]) and full[5] == blob
    raw.execute("DEL", "big")


def test_large_values(raw):
    n = 100_000
    assert_ok(raw.execute("AI.TENSORSET", "big", "INT32", n, "VALUES", *range(n)))
    assert raw.execute("AI.TENSORGET", "big", "VALUES") == list(range(n))
    assert raw.execute("AI.TENSORGET", "big", "BLOB") == np.arange(n, dtype=np.int32).tobytes()


def test_large_string_tensor(raw):
    elems = [f"element-{i}".encode() for i in range(50_000)]
    blob = b"".join(e + b"\x00" for e in elems)
    assert_ok(raw.execute("AI.TENSORSET", "s", "STRING", len(elems), "BLOB", blob))
    assert raw.execute("AI.TENSORGET", "s", "VALUES") == elems
    assert raw.execute("AI.TENSORGET", "s", "BLOB") == blob


# --------------------------------------------------------------------------------------
# redis-py interoperability and persistence
# --------------------------------------------------------------------------------------

def test_redis_py_client(server, r):
    """redis-py (the pinned 8.x speaks RESP3 by default): FLOAT VALUES arrive as bulk
    strings over RESP2 and as doubles over RESP3."""
    assert r.execute_command("AI.TENSORSET", "a", "FLOAT", 2, 2, "VALUES", 2, 3, 2.5, 3) in (b"OK", True, "OK")
    r2 = server.client(protocol=2)
    assert r2.execute_command("AI.TENSORGET", "a", "VALUES") == [b"2", b"3", b"2.5", b"3"]
    assert r2.execute_command("AI.TENSORGET", "a", "META") == [b"dtype", b"FLOAT", b"shape", [2, 2]]
    r3 = server.client(protocol=3)
    got = r3.execute_command("AI.TENSORGET", "a", "VALUES")
    assert got == [2.0, 3.0, 2.5, 3.0] and all(type(v) is float for v in got), got
    assert r3.execute_command("AI.TENSORGET", "a", "META") == [b"dtype", b"FLOAT", b"shape", [2, 2]]
    assert r.type("a") == b"AI_TENSOR"


def test_redis_py_error_mapping(r):
    """What redis-py users see: every error is a ResponseError; redis-py strips a leading
    `ERR ` (which is why exact checks use tests/support/resp.py), other codes stay in the text."""
    import redis
    with pytest.raises(redis.exceptions.ResponseError) as e:
        r.execute_command("AI.TENSORGET", "nokey")
    assert type(e.value) is redis.exceptions.ResponseError
    assert str(e.value) == TENSOR_EMPTY[len("ERR "):]
    r.set("str", "x")
    with pytest.raises(redis.exceptions.ResponseError) as e:
        r.execute_command("AI.TENSORGET", "str")
    assert type(e.value) is redis.exceptions.ResponseError
    assert str(e.value) == WRONGTYPE


def test_resp3_replies(raw):
    """RESP3: FLOAT/DOUBLE VALUES elements are native doubles (docs/commands.md, "Data
    types"); the rest of the replies keep their RESP2 shapes (RedisAI never sends maps)."""
    hello = raw.execute("HELLO", 3)
    assert isinstance(hello, dict), hello
    try:
        assert_ok(raw.execute("AI.TENSORSET", "f", "FLOAT", 3, "VALUES", 1, 2.5, "-inf"))
        assert raw.execute("AI.TENSORGET", "f", "VALUES") == [1.0, 2.5, float("-inf")]
        assert_ok(raw.execute("AI.TENSORSET", "d", "DOUBLE", 1, "VALUES", 0.1))
        assert raw.execute("AI.TENSORGET", "d", "VALUES") == [0.1]
        assert_ok(raw.execute("AI.TENSORSET", "i", "INT16", 2, "VALUES", 1, 2))
        assert raw.execute("AI.TENSORGET", "i", "VALUES") == [1, 2]
        assert raw.execute("AI.TENSORGET", "i", "META", "VALUES") == meta("INT16", [2]) + [b"values", [1, 2]]
        assert raw.execute("AI.TENSORGET", "i") == meta("INT16", [2]) + [b"blob", b"\x01\x00\x02\x00"]
    finally:
        raw.execute("HELLO", 2)


def test_debug_reload_keeps_tensors(raw):
    before = {}
    for tname in NUMERIC:
        key = f"t_{tname}"
        assert_ok(raw.execute("AI.TENSORSET", key, tname, 2, 3, "BLOB", sample(tname).tobytes()))
        before[key] = raw.execute("AI.TENSORGET", key)
    assert_ok(raw.execute("AI.TENSORSET", "s", "STRING", 3, "VALUES", "a", "bc", "def"))
    assert_ok(raw.execute("AI.TENSORSET", "scalar", "INT64", "VALUES", 42))
    assert_ok(raw.execute("AI.TENSORSET", "zs", "STRING", 2))
    for key in ("s", "scalar", "zs"):
        before[key] = raw.execute("AI.TENSORGET", key)
    assert_ok(raw.execute("DEBUG", "RELOAD"))
    for key, reply in before.items():
        assert raw.execute("AI.TENSORGET", key) == reply, key
        assert raw.execute("TYPE", key) == "AI_TENSOR"
    assert raw.execute("AI.TENSORGET", "s", "VALUES") == [b"a", b"bc", b"def"]
    assert raw.execute("AI.TENSORGET", "zs", "VALUES") == [b"", b""]
