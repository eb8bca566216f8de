"""TorchScript scripts (docs/commands.md, "Scripts"): AI.SCRIPTSTORE, SCRIPTSET, SCRIPTGET,
SCRIPTDEL, SCRIPTEXECUTE and SCRIPTRUN; every error string in the order checked;
entry points with the (List[Tensor], List[str], List[str]) signature, legacy calls of other
functions, `$` variadic inputs; Tensor / Tuple / List results; redis.execute and
redisAI.model_execute inside scripts; the AI_SCRIPT type and DEBUG RELOAD.

One server per module, with the TORCH backend given at load time. Script sources are in
tests/support/torch_models.py (SCRIPT, REDIS_SCRIPT).
"""
from __future__ import annotations

import numpy as np
import pytest

import torch_models as tm
from helpers import MODEL_EMPTY, TENSOR_EMPTY, WRONGTYPE, arity, assert_error, assert_ok
from model_io import assert_clean_error, assert_same, get, put
from redis_server import Connect, RedisServer
from resp import RawClient, RespError
from script_errors import INTERPRETER, assert_script_error

SCRIPT_EMPTY = "ERR script key is empty"
SRC = "<script source>"  # placeholder in argument tables, replaced by tm.SCRIPT
EPS = list(tm.ENTRY_POINTS)
A = np.array([[2, 3], [2, 3]], np.float32)
B = np.array([[2, 3], [2, 3]], np.float32)


@pytest.fixture
def c(torch_server: RedisServer, connect: Connect) -> RawClient:
    return connect(torch_server)


def subst(args):
    return [tm.SCRIPT if a == SRC else a for a in args]


def store_script(c: RawClient, key: str = "s", device: str = "CPU", tag: str | None = None) -> None:
    tag_args = ["TAG", tag] if tag is not None else []
    assert_ok(c.execute("AI.SCRIPTSTORE", key, device, *tag_args, "ENTRY_POINTS", len(EPS), *EPS,
                        "SOURCE", tm.SCRIPT))


def store_redis_script(c: RawClient, key: str = "r") -> None:
    eps = list(tm.REDIS_ENTRY_POINTS)
    assert_ok(c.execute("AI.SCRIPTSTORE", key, "CPU", "ENTRY_POINTS", len(eps), *eps,
                        "SOURCE", tm.REDIS_SCRIPT))


def set_ab(c: RawClient) -> None:
    put(c, "a", A)
    put(c, "b", B)


# --------------------------------------------------------------------------------------
# SCRIPTSTORE / SCRIPTSET / SCRIPTGET / SCRIPTDEL
# --------------------------------------------------------------------------------------

def test_scriptstore_and_scriptget_shapes(c):
    store_script(c, "s", "CPU", "mytag")
    assert c.execute("TYPE", "s") == "AI_SCRIPT"
    eps = [e.encode() for e in EPS]
    src = tm.SCRIPT.encode()
    meta = [b"device", b"CPU", b"tag", b"mytag", b"Entry Points", eps]
    assert c.execute("AI.SCRIPTGET", "s") == meta + [b"source", src]
    assert c.execute("AI.SCRIPTGET", "s", "META") == meta
    assert c.execute("AI.SCRIPTGET", "s", "SOURCE") == src
    assert c.execute("AI.SCRIPTGET", "s", "META", "SOURCE") == meta + [b"source", src]
    assert c.execute("AI.SCRIPTGET", "s", "SOURCE", "META") == meta + [b"source", src]
    assert c.execute("AI.SCRIPTGET", "s", "meta") == meta
    assert c.execute("AI.SCRIPTGET", "s", "source") == src
    # unknown tokens are ignored
    assert c.execute("AI.SCRIPTGET", "s", "NOTATOKEN") == meta + [b"source", src]
    assert c.execute("AI.SCRIPTGET", "s", "META", "NOTATOKEN") == meta


def test_scriptstore_variants(c):
    # no TAG: tag ""
    assert_ok(c.execute("AI.SCRIPTSTORE", "s1", "CPU", "ENTRY_POINTS", 1, "bar", "SOURCE", tm.SCRIPT))
    assert c.execute("AI.SCRIPTGET", "s1", "META") == [b"device", b"CPU", b"tag", b"",
                                                       b"Entry Points", [b"bar"]]
    # ENTRY_POINTS 0 is accepted (with a TAG to reach the arity of 8)
    assert_ok(c.execute("AI.SCRIPTSTORE", "s2", "CPU", "TAG", "t", "ENTRY_POINTS", 0, "SOURCE",
                        tm.SCRIPT))
    assert c.execute("AI.SCRIPTGET", "s2", "META")[5] == []
    # anything after the source is ignored; keywords are case-insensitive
    assert_ok(c.execute("AI.SCRIPTSTORE", "s3", "cpu", "tag", "t3", "entry_points", 1, "bar",
                        "source", tm.SCRIPT, "extra", "junk"))
    assert c.execute("AI.SCRIPTGET", "s3") == [b"device", b"cpu", b"tag", b"t3", b"Entry Points",
                                               [b"bar"], b"source", tm.SCRIPT.encode()]
    # anything starting with CPU is the CPU; the device is kept as typed
    assert_ok(c.execute("AI.SCRIPTSTORE", "s4", "CPUX", "ENTRY_POINTS", 1, "bar", "SOURCE", tm.SCRIPT))
    assert c.execute("AI.SCRIPTGET", "s4", "META")[1] == b"CPUX"
    assert_ok(c.execute("AI.SCRIPTSTORE", "s5", "CPU:0", "ENTRY_POINTS", 1, "bar", "SOURCE", tm.SCRIPT))
    assert c.execute("AI.SCRIPTGET", "s5", "META")[1] == b"CPU:0"
    set_ab(c)
    for key in ("s1", "s3", "s4", "s5"):
        assert_ok(c.execute("AI.SCRIPTEXECUTE", key, "bar", "INPUTS", 2, "a", "b", "OUTPUTS", 1, "o"))
        assert_same(get(c, "o"), A + B)


def test_scriptstore_replaces_and_clears_ttl(c):
    store_script(c, "s", "CPU", "one")
    assert c.execute("EXPIRE", "s", 1000) == 1
    assert_ok(c.execute("AI.SCRIPTSTORE", "s", "CPU", "TAG", "two", "ENTRY_POINTS", 1, "bar",
                        "SOURCE", tm.SCRIPT))
    assert c.execute("TTL", "s") == -1
    assert c.execute("AI.SCRIPTGET", "s", "META") == [b"device", b"CPU", b"tag", b"two",
                                                      b"Entry Points", [b"bar"]]


def test_scriptset(c):
    assert_ok(c.execute("AI.SCRIPTSET", "s", "CPU", "SOURCE", tm.SCRIPT))
    assert c.execute("TYPE", "s") == "AI_SCRIPT"
    assert c.execute("AI.SCRIPTGET", "s") == [b"device", b"CPU", b"tag", b"", b"Entry Points", [],
                                              b"source", tm.SCRIPT.encode()]
    assert_ok(c.execute("AI.SCRIPTSET", "s2", "CPU", "TAG", "old", "SOURCE", tm.SCRIPT))
    assert c.execute("AI.SCRIPTGET", "s2", "META") == [b"device", b"CPU", b"tag", b"old",
                                                       b"Entry Points", []]
    # no entry points: every function is called the legacy way
    set_ab(c)
    assert_ok(c.execute("AI.SCRIPTRUN", "s", "legacy_add", "INPUTS", "a", "b", "OUTPUTS", "o"))
    assert_same(get(c, "o"), A + B)
    assert_ok(c.execute("AI.SCRIPTEXECUTE", "s2", "legacy_add", "INPUTS", 2, "a", "b",
                        "OUTPUTS", 1, "o2"))
    assert_same(get(c, "o2"), A + B)


def test_type_and_wrongtype(c):
    store_script(c)
    assert c.execute("TYPE", "s") == "AI_SCRIPT"
    assert_error(c.execute("AI.TENSORGET", "s"), WRONGTYPE)
    assert_error(c.execute("AI.TENSORSET", "s", "FLOAT", 1), WRONGTYPE)
    assert_error(c.execute("AI.MODELGET", "s"), WRONGTYPE)
    assert_error(c.execute("AI.MODELDEL", "s"), WRONGTYPE)
    assert isinstance(c.execute("GET", "s"), RespError)
    c.execute("SET", "str", "x")
    put(c, "t", A)
    for key in ("str", "t"):
        assert_error(c.execute("AI.SCRIPTGET", key), WRONGTYPE)
        assert_error(c.execute("AI.SCRIPTDEL", key), WRONGTYPE)
        assert_error(c.execute("AI.SCRIPTSTORE", key, "CPU", "ENTRY_POINTS", 1, "bar",
                               "SOURCE", tm.SCRIPT), WRONGTYPE)
        assert_error(c.execute("AI.SCRIPTSET", key, "CPU", "SOURCE", tm.SCRIPT), WRONGTYPE)
        assert_error(c.execute("AI.SCRIPTEXECUTE", key, "bar", "INPUTS", 2, "a", "b"), WRONGTYPE)
        assert_error(c.execute("AI.SCRIPTRUN", key, "bar", "INPUTS", "a", "b"), WRONGTYPE)
    assert c.execute("GET", "str") == b"x"
    # the script is built first: a compile error wins over the key type
    text = assert_clean_error(c.execute("AI.SCRIPTSTORE", "str", "CPU", "ENTRY_POINTS", 1, "f",
                                        "SOURCE", "def f(:"))
    assert text != WRONGTYPE


SCRIPTSTORE_ERRORS = [
    # 1 arity (argc < 8)
    (["s", "CPU", "ENTRY_POINTS", "1", "bar", "SOURCE"], arity("ai.scriptstore")),
    (["s", "CPU", "ENTRY_POINTS", "0", "SOURCE", SRC], arity("ai.scriptstore")),
    (["s"], arity("ai.scriptstore")),
    # 2 ENTRY_POINTS missing
    (["s", "CPU", "TAG", "t", "SOURCE", SRC, "x"], "ERR Insufficient arguments, missing script entry points"),
    (["s", "CPU", "SOURCE", SRC, "ENTRY_POINTS", "1", "bar"],
     "ERR Insufficient arguments, missing script entry points"),
    # 3 count not numeric
    (["s", "CPU", "ENTRY_POINTS", "x", "bar", "SOURCE", SRC],
     "ERR Non numeric entry points number provided to AI.SCRIPTSTORE command"),
    (["s", "CPU", "TAG", "t", "ENTRY_POINTS", "1.5", "bar", "SOURCE", SRC],
     "ERR Non numeric entry points number provided to AI.SCRIPTSTORE command"),
    # 4 fewer names than the count
    (["s", "CPU", "ENTRY_POINTS", "5", "bar", "SOURCE", SRC],
     "ERR Insufficient arguments, missing script entry points"),
    # 5 SOURCE missing
    (["s", "CPU", "ENTRY_POINTS", "1", "bar", "NOTSOURCE", SRC],
     "ERR Insufficient arguments, missing script SOURCE"),
    (["s", "CPU", "TAG", "t", "ENTRY_POINTS", "1", "bar", "SOURCE"],
     "ERR Insufficient arguments, missing script SOURCE"),
    (["s", "CPU", "ENTRY_POINTS", "2", "bar", "SOURCE", SRC],  # SOURCE taken as a name
     "ERR Insufficient arguments, missing script SOURCE"),
    # 7 device (not checked before the backend sees it, so after the parse errors)
    (["s", "XPU", "ENTRY_POINTS", "1", "bar", "SOURCE", SRC], "ERR unsupported device"),
    (["s", "GPUX", "ENTRY_POINTS", "1", "bar", "SOURCE", SRC], "ERR unsupported device"),
    (["s", "XPU", "ENTRY_POINTS", "1", "bar", "NOTSOURCE", SRC],
     "ERR Insufficient arguments, missing script SOURCE"),
    (["s", "XPU", "ENTRY_POINTS", "1", "bar", "SOURCE", "def f(:"], "ERR unsupported device"),
    # 8 entry points
    (["s", "CPU", "ENTRY_POINTS", "1", "nope", "SOURCE", SRC],
     "Function nope does not exist in the given script."),
    (["s", "CPU", "ENTRY_POINTS", "2", "bar", "nope", "SOURCE", SRC],
     "Function nope does not exist in the given script."),
    (["s", "CPU", "ENTRY_POINTS", "1", "legacy_add", "SOURCE", SRC],
     "Wrong number of inputs in function legacy_add. Expected 3 but was 2"),
    (["s", "CPU", "ENTRY_POINTS", "1", "two", "SOURCE",
      "def two(tensors: List[Tensor], keys: List[str]):\n    return tensors[0]\n"],
     "Wrong number of inputs in function two. Expected 3 but was 2"),
    (["s", "CPU", "ENTRY_POINTS", "1", "wrong", "SOURCE",
      "def wrong(tensors: List[Tensor], keys: List[str], args: List[int]):\n    return tensors[0]\n"],
     "Wrong inputs type in function wrong. Expected signature similar to: "
     "def wrong(tensors: List[Tensor], keys: List[str], args: List[str])"),
    (["s", "CPU", "ENTRY_POINTS", "1", "three", "SOURCE", "def three(a, b, c):\n    return a\n"],
     "Wrong inputs type in function three. Expected signature similar to: "
     "def three(tensors: List[Tensor], keys: List[str], args: List[str])"),
]


@pytest.mark.parametrize("args,expected", SCRIPTSTORE_ERRORS,
                         ids=[f"{i}-{e[:40]}" for i, (_, e) in enumerate(SCRIPTSTORE_ERRORS)])
def test_scriptstore_errors(c, args, expected):
    assert_error(c.execute("AI.SCRIPTSTORE", *subst(args)), expected)
    assert c.execute("EXISTS", "s") == 0
    assert c.execute("PING") == "PONG"


def test_scriptstore_compile_error(c):
    src = "def bar(tensors: List[Tensor], keys: List[str], args: List[str]):\n    return undefined_thing\n"
    text = assert_clean_error(c.execute("AI.SCRIPTSTORE", "s", "CPU", "ENTRY_POINTS", 1, "bar",
                                        "SOURCE", src))
    assert "undefined_thing" in text, text
    # a compile error comes before the entry-point checks
    text = assert_clean_error(c.execute("AI.SCRIPTSTORE", "s", "CPU", "ENTRY_POINTS", 1, "nope",
                                        "SOURCE", "def f(:\n"))
    assert "does not exist" not in text, text
    text = assert_clean_error(c.execute("AI.SCRIPTSET", "s", "CPU", "SOURCE", "this is not python"))
    assert c.execute("EXISTS", "s") == 0
    assert c.execute("PING") == "PONG"


SCRIPTSET_ERRORS = [
    (["s", "CPU", "SOURCE"], arity("ai.scriptset")),
    (["s", "CPU", "TAG", "t", "SOURCE"], arity("ai.scriptset")),
    (["s", "CPU", "TAG", "t", "SOURCE", SRC, "x"], arity("ai.scriptset")),
    (["s"], arity("ai.scriptset")),
    (["s", "CPU", "TAG", "t"], "ERR Insufficient arguments, missing script SOURCE"),
    (["s", "CPU", "NOTSOURCE", SRC], "ERR Insufficient arguments, missing script SOURCE"),
    (["s", "CPU", "TAG", "t", "NOTSOURCE", SRC], "ERR Insufficient arguments, missing script SOURCE"),
    (["s", "XPU", "SOURCE", SRC], "ERR unsupported device"),
    (["s", "XPU", "TAG", "t"], "ERR Insufficient arguments, missing script SOURCE"),
]


@pytest.mark.parametrize("args,expected", SCRIPTSET_ERRORS,
                         ids=[f"{i}-{e[:40]}" for i, (_, e) in enumerate(SCRIPTSET_ERRORS)])
def test_scriptset_errors(c, args, expected):
    assert_error(c.execute("AI.SCRIPTSET", *subst(args)), expected)
    assert c.execute("EXISTS", "s") == 0


def test_scriptget_errors(c):
    store_script(c)
    assert_error(c.execute("AI.SCRIPTGET"), arity("ai.scriptget"))
    assert_error(c.execute("AI.SCRIPTGET", "s", "META", "SOURCE", "META"), arity("ai.scriptget"))
    assert_error(c.execute("AI.SCRIPTGET", "nokey"), SCRIPT_EMPTY)
    assert_error(c.execute("AI.SCRIPTGET", "nokey", "META"), SCRIPT_EMPTY)


def test_scriptdel(c):
    store_script(c)
    assert_ok(c.execute("AI.SCRIPTDEL", "s"))
    assert c.execute("EXISTS", "s") == 0
    assert_error(c.execute("AI.SCRIPTDEL", "s"), SCRIPT_EMPTY)
    assert_error(c.execute("AI.SCRIPTGET", "s"), SCRIPT_EMPTY)
    set_ab(c)
    assert_error(c.execute("AI.SCRIPTEXECUTE", "s", "bar", "INPUTS", 2, "a", "b", "OUTPUTS", 1, "o"),
                 SCRIPT_EMPTY)
    assert_error(c.execute("AI.SCRIPTDEL"), arity("ai.scriptdel"))
    assert_error(c.execute("AI.SCRIPTDEL", "a", "b"), arity("ai.scriptdel"))
    # a plain DEL frees a script too
    store_script(c)
    assert c.execute("DEL", "s") == 1
    assert_error(c.execute("AI.SCRIPTGET", "s"), SCRIPT_EMPTY)


# --------------------------------------------------------------------------------------
# SCRIPTEXECUTE
# --------------------------------------------------------------------------------------

def test_scriptexecute_entry_point(c):
    store_script(c)
    set_ab(c)
    reply = c.execute("AI.SCRIPTEXECUTE", "s", "bar", "INPUTS", 2, "a", "b", "OUTPUTS", 1, "o")
    assert_ok(reply)
    assert_same(get(c, "o"), A + B)
    assert c.execute("AI.TENSORGET", "o", "VALUES") == [b"4", b"6", b"4", b"6"]
    # KEYS first, TIMEOUT last, lower-case keywords
    assert_ok(c.execute("AI.SCRIPTEXECUTE", "s", "bar", "keys", 1, "k", "inputs", 2, "a", "b",
                        "outputs", 1, "o2", "timeout", 5000))
    assert_same(get(c, "o2"), A + B)


def test_scriptexecute_binding_of_keys_inputs_args(c):
    store_script(c)
    set_ab(c)
    cases = [
        (["KEYS", 2, "k1", "k2", "INPUTS", 1, "a", "ARGS", 3, "x", "y", "z", "OUTPUTS", 1, "o"], [1, 2, 3]),
        (["INPUTS", 2, "a", "b", "OUTPUTS", 1, "o", "KEYS", 1, "k", "ARGS", 1, "z"], [2, 1, 1]),
        (["INPUTS", 1, "a", "ARGS", 2, "p", "q", "OUTPUTS", 1, "o"], [1, 0, 2]),
        # INPUTS / ARGS counts of 0 or below mean empty lists
        (["KEYS", 1, "k", "INPUTS", 0, "OUTPUTS", 1, "o"], [0, 1, 0]),
        (["KEYS", 1, "k", "INPUTS", -3, "ARGS", 0, "OUTPUTS", 1, "o"], [0, 1, 0]),
        (["KEYS", 1, "k", "ARGS", -1, "OUTPUTS", 1, "o"], [0, 1, 0]),
    ]
    for args, want in cases:
        assert_ok(c.execute("AI.SCRIPTEXECUTE", "s", "counts", *args))
        assert_same(get(c, "o"), np.array(want, np.int64))
    # ARGS arrive as strings
    assert_ok(c.execute("AI.SCRIPTEXECUTE", "s", "add_args", "INPUTS", 1, "a", "ARGS", 2, 10, 5,
                        "OUTPUTS", 1, "o"))
    assert_same(get(c, "o"), A + 15)


def test_scriptexecute_results(c):
    store_script(c)
    set_ab(c)
    assert_ok(c.execute("AI.SCRIPTEXECUTE", "s", "tuple_out", "INPUTS", 2, "a", "b",
                        "OUTPUTS", 2, "x", "y"))
    assert_same(get(c, "x"), A + B)
    assert_same(get(c, "y"), A - B)
    assert_ok(c.execute("AI.SCRIPTEXECUTE", "s", "list_out", "INPUTS", 2, "a", "b",
                        "OUTPUTS", 3, "x", "y", "z"))
    assert_same(get(c, "x"), A)
    assert_same(get(c, "y"), B)
    assert_same(get(c, "z"), A * B)
    # without OUTPUTS (or OUTPUTS 0) the result is discarded
    assert_ok(c.execute("AI.SCRIPTEXECUTE", "s", "bar", "INPUTS", 2, "a", "b"))
    assert_ok(c.execute("AI.SCRIPTEXECUTE", "s", "bar", "INPUTS", 2, "a", "b", "OUTPUTS", 0))
    assert_ok(c.execute("AI.SCRIPTEXECUTE", "s", "ret_int", "INPUTS", 1, "a"))
    # outputs overwrite tensors (type and TTL)
    put(c, "x", np.array([1], np.int8))
    assert c.execute("EXPIRE", "x", 100) == 1
    assert_ok(c.execute("AI.SCRIPTEXECUTE", "s", "bar", "INPUTS", 2, "a", "b", "OUTPUTS", 1, "x"))
    assert_same(get(c, "x"), A + B)
    assert c.execute("TTL", "x") == -1


def test_non_entry_functions(c):
    """Functions that are not entry points: called from an entry point, and called
    directly the legacy way (parameters bound by position)."""
    store_script(c)
    set_ab(c)
    put(c, "d", np.full((2, 2), 10, np.float32))
    assert_ok(c.execute("AI.SCRIPTEXECUTE", "s", "calls_helper", "INPUTS", 1, "a", "OUTPUTS", 1, "o"))
    assert_same(get(c, "o"), A * 2)
    assert_ok(c.execute("AI.SCRIPTEXECUTE", "s", "helper_double", "INPUTS", 1, "a", "OUTPUTS", 1, "o"))
    assert_same(get(c, "o"), A * 2)
    assert_ok(c.execute("AI.SCRIPTEXECUTE", "s", "legacy_add", "INPUTS", 2, "a", "b", "OUTPUTS", 1, "o"))
    assert_same(get(c, "o"), A + B)
    # surplus inputs are ignored
    assert_ok(c.execute("AI.SCRIPTEXECUTE", "s", "legacy_add", "INPUTS", 3, "a", "b", "d",
                        "OUTPUTS", 1, "o"))
    assert_same(get(c, "o"), A + B)
    # a List[Tensor] parameter takes all remaining inputs
    assert_ok(c.execute("AI.SCRIPTEXECUTE", "s", "legacy_var", "INPUTS", 3, "a", "b", "d",
                        "OUTPUTS", 1, "o"))
    assert_same(get(c, "o"), A + B + 10)
    assert_ok(c.execute("AI.SCRIPTEXECUTE", "s", "legacy_var", "INPUTS", 1, "a", "OUTPUTS", 1, "o"))
    assert_same(get(c, "o"), A)


RUN_ERRORS = [
    (["nofn", "INPUTS", 2, "a", "b", "OUTPUTS", 1, "o"], "Function does not exist: nofn"),
    (["legacy_add", "INPUTS", 1, "a", "OUTPUTS", 1, "o"],
     "Wrong number of inputs provided to function: legacy_add"),
    (["legacy_int_param", "INPUTS", 2, "a", "b", "OUTPUTS", 1, "o"],
     "Unsupported input type in function definition: legacy_int_param"),
    (["bar", "INPUTS", 2, "a", "b", "OUTPUTS", 2, "o", "p"],
     "Function returned unexpected number of outputs - bar"),
    (["tuple_out", "INPUTS", 2, "a", "b", "OUTPUTS", 1, "o"],
     "Function returned unexpected number of outputs - tuple_out"),
    (["list_out", "INPUTS", 2, "a", "b", "OUTPUTS", 2, "o", "p"],
     "Function returned unexpected number of outputs - list_out"),
    (["ret_int", "INPUTS", 1, "a", "OUTPUTS", 1, "o"], "Function returned non-tensor valuesret_int"),
]


@pytest.mark.parametrize("args,expected", RUN_ERRORS, ids=[e[:45] for _, e in RUN_ERRORS])
def test_scriptexecute_run_errors(c, args, expected):
    store_script(c)
    set_ab(c)
    assert_error(c.execute("AI.SCRIPTEXECUTE", "s", *args), expected)
    assert c.execute("EXISTS", "o", "p") == 0
    assert c.execute("PING") == "PONG"


def test_script_runtime_error_is_one_line_without_backtrace(c):
    store_script(c)
    put(c, "a", np.ones((2, 3), np.float32))
    put(c, "b", np.ones((4,), np.float32))
    text = assert_clean_error(c.execute("AI.SCRIPTEXECUTE", "s", "bar", "INPUTS", 2, "a", "b",
                                        "OUTPUTS", 1, "o"))
    assert "size of tensor a (3) must match the size of tensor b (4)" in text, text
    assert text.startswith(INTERPRETER), text  # libtorch's interpreter message, as in 1.2
    assert c.execute("EXISTS", "o") == 0
    # an index error inside the script (tensors[1] of a one-element list)
    text = assert_clean_error(c.execute("AI.SCRIPTEXECUTE", "s", "bar", "INPUTS", 1, "a",
                                        "OUTPUTS", 1, "o"))
    assert text.startswith(INTERPRETER) and text.endswith(" out of range "), text
    assert c.execute("PING") == "PONG"


SCRIPTEXECUTE_ERRORS = [
    (["s"], "ERR wrong number of arguments for 'AI.SCRIPTEXECUTE' command"),
    ([], "ERR wrong number of arguments for 'AI.SCRIPTEXECUTE' command"),
    (["nokey", "bar", "INPUTS", "2", "a", "b"], SCRIPT_EMPTY),
    (["str", "bar", "INPUTS", "2", "a", "b"], WRONGTYPE),
    (["a", "bar", "INPUTS", "2", "a", "b"], WRONGTYPE),
    (["s", "bar", "ARGS", "1", "x", "INPUTS", "2", "a", "b"],
     "ERR KEYS or INPUTS scope must be provided first for AI.SCRIPTEXECUTE command"),
    (["s", "bar", "OUTPUTS", "1", "o"],
     "ERR KEYS or INPUTS scope must be provided first for AI.SCRIPTEXECUTE command"),
    (["s", "bar", "FOO", "INPUTS", "2", "a", "b"],
     "ERR KEYS or INPUTS scope must be provided first for AI.SCRIPTEXECUTE command"),
    (["s", "bar", "KEYS"], "ERR Missing arguments after KEYS keyword"),
    (["s", "bar", "KEYS", "1"], "ERR Missing arguments after KEYS keyword"),
    (["s", "bar", "KEYS", "x", "k"], "ERR Invalid or negative value found in number of KEYS"),
    (["s", "bar", "KEYS", "0", "k"], "ERR Invalid or negative value found in number of KEYS"),
    (["s", "bar", "KEYS", "-1", "k"], "ERR Invalid or negative value found in number of KEYS"),
    (["s", "bar", "KEYS", "3", "k1", "k2"],
     "ERR Number of pre declared KEYS to be used in the command does not match the number of given arguments"),
    (["s", "bar", "INPUTS"], "ERR Invalid arguments provided to AI.SCRIPTEXECUTE"),
    (["s", "bar", "INPUTS", "2", "a", "b", "OUTPUTS"], "ERR Invalid arguments provided to AI.SCRIPTEXECUTE"),
    (["s", "bar", "INPUTS", "2", "a", "b", "ARGS"], "ERR Invalid arguments provided to AI.SCRIPTEXECUTE"),
    (["s", "bar", "INPUTS", "x", "a"], "ERR Invalid argument for inputs count in AI.SCRIPTEXECUTE"),
    (["s", "bar", "INPUTS", "2", "a", "b", "ARGS", "x", "y"],
     "ERR Invalid argument for keys count in AI.SCRIPTEXECUTE"),
    (["s", "bar", "INPUTS", "2", "a", "b", "OUTPUTS", "x", "o"],
     "ERR Invalid argument for outputs count in AI.SCRIPTEXECUTE"),
    (["s", "bar", "INPUTS", "3", "a", "b"],
     "ERR number of inputs to AI.SCRIPTEXECUTE command does not match the number of given arguments"),
    (["s", "bar", "INPUTS", "2", "a", "b", "ARGS", "3", "x"],
     "ERR number of args to AI.SCRIPTEXECUTE command does not match the number of given arguments"),
    (["s", "bar", "INPUTS", "2", "a", "b", "OUTPUTS", "2", "o"],
     "ERR number of outputs to AI.SCRIPTEXECUTE command does not match the number of given arguments"),
    (["s", "bar", "KEYS", "1", "k", "KEYS", "1", "k", "INPUTS", "2", "a", "b"],
     "ERR Already Encountered KEYS scope in AI.SCRIPTEXECUTE command"),
    (["s", "bar", "INPUTS", "2", "a", "b", "INPUTS", "1", "a"],
     "ERR Already Encountered INPUTS scope in AI.SCRIPTEXECUTE command"),
    (["s", "bar", "INPUTS", "2", "a", "b", "ARGS", "1", "x", "ARGS", "1", "y"],
     "ERR Already Encountered ARGS scope in AI.SCRIPTEXECUTE command"),
    (["s", "bar", "INPUTS", "2", "a", "b", "OUTPUTS", "1", "o", "OUTPUTS", "1", "p"],
     "ERR Already Encountered OUTPUTS scope in AI.SCRIPTEXECUTE command"),
    (["s", "bar", "INPUTS", "2", "a", "b", "TIMEOUT"], "ERR No value provided for TIMEOUT in AI.SCRIPTEXECUTE"),
    (["s", "bar", "INPUTS", "2", "a", "b", "TIMEOUT", "x"], "ERR Invalid value for TIMEOUT"),
    (["s", "bar", "INPUTS", "2", "a", "b", "TIMEOUT", "0"], "ERR Invalid value for TIMEOUT"),
    (["s", "bar", "INPUTS", "2", "a", "b", "FOO"],
     "ERR Invalid AI.SCRIPTEXECUTE command. Unexpected argument: FOO"),
    (["s", "bar", "INPUTS", "2", "a", "b", "OUTPUTS", "1", "o", "BAR"],
     "ERR Invalid AI.SCRIPTEXECUTE command. Unexpected argument: BAR"),
    (["s", "bar", "INPUTS", "2", "a", "b", "TIMEOUT", "100", "OUTPUTS", "1", "o"],
     "ERR Encountered problem parsing AI.SCRIPTEXECUTE"),
    (["s", "bar", "INPUTS", "2", "a", "nokey", "OUTPUTS", "1", "o"], TENSOR_EMPTY),
    (["s", "bar", "INPUTS", "2", "str", "b", "OUTPUTS", "1", "o"], WRONGTYPE),
]


@pytest.mark.parametrize("args,expected", SCRIPTEXECUTE_ERRORS,
                         ids=[f"{i}-{e[:40]}" for i, (_, e) in enumerate(SCRIPTEXECUTE_ERRORS)])
def test_scriptexecute_errors(c, args, expected):
    store_script(c)
    set_ab(c)
    c.execute("SET", "str", "x")
    assert_error(c.execute("AI.SCRIPTEXECUTE", *args), expected)
    assert c.execute("EXISTS", "o", "p") == 0
    assert c.execute("PING") == "PONG"


def test_blocking_script_commands_in_multi_and_lua(c):
    store_script(c)
    set_ab(c)
    msg = "ERR Cannot run RedisAI command within a transaction or a LUA script"
    assert_ok(c.execute("MULTI"))
    assert c.execute("AI.SCRIPTEXECUTE", "s", "bar", "INPUTS", 2, "a", "b", "OUTPUTS", 1, "o") == "QUEUED"
    assert c.execute("AI.SCRIPTRUN", "s", "bar", "INPUTS", "a", "b", "OUTPUTS", "o") == "QUEUED"
    replies = c.execute("EXEC")
    assert isinstance(replies, list) and len(replies) == 2, replies
    for rep in replies:
        assert_error(rep, msg)
    lua = ("return redis.pcall('AI.SCRIPTEXECUTE', KEYS[1], 'bar', 'INPUTS', '2', KEYS[2], KEYS[3], "
           "'OUTPUTS', '1', KEYS[4])")
    assert_error(c.execute("EVAL", lua, 4, "s", "a", "b", "o"), msg)
    assert c.execute("EXISTS", "o") == 0


# --------------------------------------------------------------------------------------
# SCRIPTRUN (deprecated) and `$`
# --------------------------------------------------------------------------------------

def test_scriptrun(c):
    store_script(c)
    set_ab(c)
    put(c, "d", np.full((2, 2), 10, np.float32))
    # an entry point under SCRIPTRUN: tensors = INPUTS, keys and args empty
    assert_ok(c.execute("AI.SCRIPTRUN", "s", "bar", "INPUTS", "a", "b", "OUTPUTS", "o"))
    assert_same(get(c, "o"), A + B)
    assert_ok(c.execute("AI.SCRIPTRUN", "s", "counts", "INPUTS", "a", "b", "d", "OUTPUTS", "o"))
    assert_same(get(c, "o"), np.array([3, 0, 0], np.int64))
    # INPUTS may be omitted; TIMEOUT anywhere after the function name
    assert_ok(c.execute("AI.SCRIPTRUN", "s", "counts", "OUTPUTS", "o"))
    assert_same(get(c, "o"), np.array([0, 0, 0], np.int64))
    assert_ok(c.execute("AI.SCRIPTRUN", "s", "bar", "TIMEOUT", 5000, "INPUTS", "a", "b", "OUTPUTS", "o"))
    assert_ok(c.execute("AI.SCRIPTRUN", "s", "bar", "INPUTS", "a", "b", "OUTPUTS", "o", "TIMEOUT", 5000))
    assert_same(get(c, "o"), A + B)
    # several outputs; legacy functions
    assert_ok(c.execute("AI.SCRIPTRUN", "s", "tuple_out", "INPUTS", "a", "b", "OUTPUTS", "x", "y"))
    assert_same(get(c, "y"), A - B)
    assert_ok(c.execute("AI.SCRIPTRUN", "s", "legacy_add", "INPUTS", "a", "d", "OUTPUTS", "o"))
    assert_same(get(c, "o"), A + 10)


def test_scriptrun_variadic(c):
    store_script(c)
    set_ab(c)
    put(c, "d", np.full((2, 2), 10, np.float32))
    # `$` is dropped: an entry point still gets all inputs in one list
    assert_ok(c.execute("AI.SCRIPTRUN", "s", "bar_variadic", "INPUTS", "a", "$", "b", "d", "OUTPUTS", "o"))
    assert_same(get(c, "o"), A + B)
    assert_ok(c.execute("AI.SCRIPTRUN", "s", "counts", "INPUTS", "a", "$", "b", "d", "OUTPUTS", "o"))
    assert_same(get(c, "o"), np.array([3, 0, 0], np.int64))
    # a legacy List[Tensor] parameter takes the remaining inputs, with or without `$`
    assert_ok(c.execute("AI.SCRIPTRUN", "s", "legacy_var", "INPUTS", "a", "$", "b", "d", "OUTPUTS", "o"))
    assert_same(get(c, "o"), A + B + 10)
    assert_ok(c.execute("AI.SCRIPTRUN", "s", "legacy_var", "INPUTS", "a", "b", "d", "OUTPUTS", "o2"))
    assert_same(get(c, "o2"), A + B + 10)
    assert_ok(c.execute("AI.SCRIPTRUN", "s", "legacy_var", "INPUTS", "$", "a", "b", "OUTPUTS", "o3"))
    assert_same(get(c, "o3"), A + B)
    # on a SCRIPTSET script
    assert_ok(c.execute("AI.SCRIPTSET", "old", "CPU", "SOURCE", tm.SCRIPT))
    assert_ok(c.execute("AI.SCRIPTRUN", "old", "legacy_var", "INPUTS", "a", "$", "b", "b", "d",
                        "OUTPUTS", "o4"))
    assert_same(get(c, "o4"), A + B + B + 10)


SCRIPTRUN_ERRORS = [
    (["s"], "ERR wrong number of arguments for 'AI.SCRIPTRUN' command"),
    ([], "ERR wrong number of arguments for 'AI.SCRIPTRUN' command"),
    (["nokey", "bar", "INPUTS", "a", "b", "OUTPUTS", "o"], SCRIPT_EMPTY),
    (["str", "bar", "INPUTS", "a", "b", "OUTPUTS", "o"], WRONGTYPE),
    (["s", "bar", "TIMEOUT", "10", "TIMEOUT", "10", "INPUTS", "a", "b", "OUTPUTS", "o"],
     "ERR Already encountered an TIMEOUT section in SCRIPTRUN"),
    (["s", "bar", "TIMEOUT", "x", "INPUTS", "a", "b", "OUTPUTS", "o"], "ERR Invalid value for TIMEOUT"),
    (["s", "bar", "OUTPUTS", "o", "INPUTS", "a", "b"], "ERR Already encountered an INPUTS section in SCRIPTRUN"),
    (["s", "bar", "INPUTS", "a", "INPUTS", "b", "OUTPUTS", "o"],
     "ERR Already encountered an INPUTS keyword in SCRIPTRUN"),
    (["s", "bar", "INPUTS", "a", "b", "OUTPUTS", "o", "OUTPUTS", "p"],
     "ERR Already encountered an OUTPUTS keyword in SCRIPTRUN"),
    (["s", "bar", "$", "INPUTS", "a", "b", "OUTPUTS", "o"],
     "ERR Encountered a variable size list of tensors outside of input section"),
    (["s", "bar", "INPUTS", "a", "b", "OUTPUTS", "$"],
     "ERR Encountered a variable size list of tensors outside of input section"),
    (["s", "bar", "INPUTS", "a", "$", "b", "$", "a", "OUTPUTS", "o"],
     "ERR Already encountered a variable size list of tensors"),
    (["s", "bar", "FOO", "INPUTS", "a", "b", "OUTPUTS", "o"], "ERR Unrecongnized parameter to SCRIPTRUN"),
    (["s", "bar", "INPUTS", "a", "nokey", "OUTPUTS", "o"], TENSOR_EMPTY),
    (["s", "nofn", "INPUTS", "a", "b", "OUTPUTS", "o"], "Function does not exist: nofn"),
    (["s", "bar", "INPUTS", "a", "b", "OUTPUTS", "o", "p"],
     "Function returned unexpected number of outputs - bar"),
]


@pytest.mark.parametrize("args,expected", SCRIPTRUN_ERRORS,
                         ids=[f"{i}-{e[:40]}" for i, (_, e) in enumerate(SCRIPTRUN_ERRORS)])
def test_scriptrun_errors(c, args, expected):
    store_script(c)
    set_ab(c)
    c.execute("SET", "str", "x")
    assert_error(c.execute("AI.SCRIPTRUN", *args), expected)
    assert c.execute("EXISTS", "o", "p") == 0
    assert c.execute("PING") == "PONG"


# --------------------------------------------------------------------------------------
# redis.execute and redisAI.model_execute inside scripts
# --------------------------------------------------------------------------------------

def test_redis_execute_set_get_incr(c):
    store_redis_script(c)
    assert_ok(c.execute("AI.SCRIPTEXECUTE", "r", "set_get", "KEYS", 1, "x", "ARGS", 1, 42,
                        "OUTPUTS", 1, "o"))
    assert_same(get(c, "o"), np.array(42, np.int64))
    assert c.execute("GET", "x") == b"42"
    assert_ok(c.execute("AI.SCRIPTEXECUTE", "r", "set_incr", "KEYS", 1, "y", "ARGS", 1, 41,
                        "OUTPUTS", 1, "o"))
    assert_same(get(c, "o"), np.array(42, np.int64))
    assert c.execute("GET", "y") == b"42"
    # arrays come back as lists; a missing key as None
    assert_ok(c.execute("AI.SCRIPTEXECUTE", "r", "list_range", "KEYS", 1, "l", "ARGS", 3, 7, 8, 9,
                        "OUTPUTS", 1, "o"))
    assert_same(get(c, "o"), np.array([7, 8, 9], np.int64))
    assert c.execute("LRANGE", "l", 0, -1) == [b"7", b"8", b"9"]
    assert_ok(c.execute("AI.SCRIPTEXECUTE", "r", "missing_get", "KEYS", 1, "nokey", "OUTPUTS", 1, "o"))
    assert_same(get(c, "o"), np.array([1], np.int64))


def test_redis_execute_error_reply(c):
    store_redis_script(c)
    # raised in the script: inside the TorchScript interpreter's message (RedisAI 1.2)
    assert_script_error(
        c.execute("AI.SCRIPTEXECUTE", "r", "redis_error", "KEYS", 1, "x"),
        "Redis command returned an error: ERR wrong number of arguments for 'set' command")
    assert c.execute("EXISTS", "x") == 0
    assert c.execute("PING") == "PONG"
    # the script still works afterwards
    assert_ok(c.execute("AI.SCRIPTEXECUTE", "r", "set_get", "KEYS", 1, "x", "ARGS", 1, 5,
                        "OUTPUTS", 1, "o"))
    assert c.execute("GET", "x") == b"5"


def test_redisai_model_execute(c):
    store_redis_script(c)
    built = tm.add()
    assert_ok(c.execute("AI.MODELSTORE", "m", "TORCH", "CPU", "BLOB", built.blob))
    set_ab(c)
    assert_ok(c.execute("AI.SCRIPTEXECUTE", "r", "model_run", "KEYS", 1, "m", "INPUTS", 2, "a", "b",
                        "OUTPUTS", 1, "o"))
    [want] = built.run(A, B)
    assert_same(get(c, "o"), want * 2)
    assert_script_error(c.execute("AI.SCRIPTEXECUTE", "r", "model_run", "KEYS", 1, "nokey",
                                  "INPUTS", 2, "a", "b", "OUTPUTS", 1, "o2"), MODEL_EMPTY)
    assert c.execute("EXISTS", "o2") == 0
    assert c.execute("PING") == "PONG"


def test_scriptexecute_in_dag(c):
    store_script(c)
    set_ab(c)
    reply = c.execute("AI.DAGEXECUTE", "LOAD", 2, "a", "b", "PERSIST", 1, "o",
                      "|>", "AI.SCRIPTEXECUTE", "s", "bar", "INPUTS", 2, "a", "b", "OUTPUTS", 1, "t",
                      "|>", "AI.SCRIPTEXECUTE", "s", "bar", "INPUTS", 2, "t", "a", "OUTPUTS", 1, "o",
                      "|>", "AI.TENSORGET", "o", "VALUES")
    assert reply[:2] == ["OK", "OK"], reply
    assert reply[2] == [b"6", b"9", b"6", b"9"], reply
    assert_same(get(c, "o"), A + B + A)
    assert c.execute("EXISTS", "t") == 0


# --------------------------------------------------------------------------------------
# Stats and persistence
# --------------------------------------------------------------------------------------

def test_ai_info_for_scripts(c):
    store_script(c, "s", "CPU", "tg")
    set_ab(c)
    assert_ok(c.execute("AI.SCRIPTEXECUTE", "s", "bar", "INPUTS", 2, "a", "b", "OUTPUTS", 1, "o"))
    for _ in range(2):  # tensors[1] of a one-element list: a run error
        assert_clean_error(c.execute("AI.SCRIPTEXECUTE", "s", "bar", "INPUTS", 1, "a",
                                     "OUTPUTS", 1, "o2"))
    info = c.execute("AI.INFO", "s")
    fields = dict(zip(info[::2], info[1::2]))
    assert fields[b"key"] == b"s" and fields[b"type"] == b"SCRIPT", info
    assert fields[b"backend"] == b"TORCH" and fields[b"device"] == b"CPU", info
    assert fields[b"tag"] == b"tg" and fields[b"samples"] == -1, info
    assert fields[b"calls"] == 3 and fields[b"errors"] == 2, info


def test_debug_reload_keeps_scripts(c, torch_server):
    store_script(c, "s", "CPU", "kept")
    assert_ok(c.execute("AI.SCRIPTSET", "old", "CPU:0", "TAG", "legacy", "SOURCE", tm.SCRIPT))
    before = {k: c.execute("AI.SCRIPTGET", k) for k in ("s", "old")}
    assert_ok(c.execute("DEBUG", "RELOAD"))
    for k, v in before.items():
        assert c.execute("AI.SCRIPTGET", k) == v, k
        assert c.execute("TYPE", k) == "AI_SCRIPT"
    set_ab(c)
    assert_ok(c.execute("AI.SCRIPTEXECUTE", "s", "bar", "INPUTS", 2, "a", "b", "OUTPUTS", 1, "o"))
    assert_same(get(c, "o"), A + B)
    assert_ok(c.execute("AI.SCRIPTRUN", "old", "legacy_var", "INPUTS", "a", "$", "b", "OUTPUTS", "o2"))
    assert_same(get(c, "o2"), A + B)
