"""TorchScript error texts as RedisAI 1.2 returns them (issue 11, item 4).

* A compile error (SCRIPTSTORE / SCRIPTSET) is libtorch's message with each newline turned
  into one space and nothing else changed: compared exactly with the message libtorch itself
  gives for the same source (torch.jit.CompilationUnit here), so runs of spaces and the
  trailing space are kept.
* An error raised while a script runs (by TorchScript itself, by redis.execute, by
  redisAI.model_execute) is the TorchScript interpreter's message around the inner error,
  on one line, without C++ frames: for pure TorchScript compared exactly with libtorch's own
  message for the same function and inputs; for the built-ins the inner error keeps its own
  prefix (`Redis command returned an error: ...`, `ERR model key is empty`). The same in a DAG.
* Even with TORCH_SHOW_CPP_STACKTRACES=1 (libtorch then appends a C++ backtrace to the
  interpreter's message) no C++ frame reaches the client.
* A MODELSTORE TORCH blob that is no archive gets libtorch's reader text (docs/commands.md,
  AI.MODELSTORE: "libtorch's message").
"""
from __future__ import annotations

import io
import os

import numpy as np
import pytest
import torch

import torch_models as tm
from helpers import MODEL_EMPTY, assert_error, assert_ok
from model_io import assert_clean_error, put
from redis_server import Connect, RedisServer
from resp import RawClient, RespError
from script_errors import INTERPRETER, assert_script_error, libtorch_message, one_line

HEAD = "def f(tensors: List[Tensor], keys: List[str], args: List[str]):\n"

# The reference, as RedisAI 1.2.7 replied it.
RETURN_1 = ("expected def but found 'return' here:   File \"<string>\", line 1 return 1 "
            "~~~~~~ <--- HERE ")

COMPILE_ERRORS = {
    "return-1": "return 1",
    "syntax": "def f(:\n",
    "indent": HEAD + "    x = 1\n      return x\n",
    "undefined": HEAD + "    return undefined_thing\n",
    "types": HEAD + "    return tensors[0] + 'x'\n",
    "two-lines": HEAD + "    a = tensors[0]\n    return a.no_such_method()\n",
}

# Pure TorchScript (compiles in the server and in torch.jit.CompilationUnit alike).
PURE = '''
def index(tensors: List[Tensor], keys: List[str], args: List[str]):
    return tensors[5]

def shapes(tensors: List[Tensor], keys: List[str], args: List[str]):
    return tensors[0] + tensors[1]

def inner(x: Tensor, n: int):
    return x.view(n)

def nested(tensors: List[Tensor], keys: List[str], args: List[str]):
    return inner(tensors[0], int(args[0]))

def parse(tensors: List[Tensor], keys: List[str], args: List[str]):
    return tensors[0] * int(args[0])
'''
PURE_EPS = ("index", "shapes", "nested", "parse")

BUILTINS = '''
def set_one(tensors: List[Tensor], keys: List[str], args: List[str]):
    redis.execute("SET", keys[0])
    return tensors[0]

def call(tensors: List[Tensor], keys: List[str], args: List[str]):
    redis.execute(args[0], args[1:])
    return tensors[0]

def model(tensors: List[Tensor], keys: List[str], args: List[str]):
    return redisAI.model_execute(keys[0], tensors, 1)[0]

def fails(tensors: List[Tensor], keys: List[str], args: List[str]):
    raise Exception("boom: " + args[0])
'''
BUILTIN_EPS = ("set_one", "call", "model", "fails")

A = np.arange(6, dtype=np.float32).reshape(2, 3)
B = np.ones(4, np.float32)


@pytest.fixture
def c(torch_server: RedisServer, connect: Connect) -> RawClient:
    return connect(torch_server)


def store(c: RawClient, key: str, source: str, eps: tuple[str, ...]) -> None:
    assert_ok(c.execute("AI.SCRIPTSTORE", key, "CPU", "ENTRY_POINTS", len(eps), *eps,
                        "SOURCE", source))


# --------------------------------------------------------------------------------------
# Compile errors
# --------------------------------------------------------------------------------------

def test_compile_error_is_the_1_2_text():
    want = libtorch_message(lambda: torch.jit.CompilationUnit("return 1"))
    assert want == RETURN_1  # libtorch's own message, transformed, is 1.2's reply


@pytest.mark.parametrize("name", COMPILE_ERRORS)
def test_compile_error_is_libtorchs_message_with_newlines_as_spaces(c, name):
    source = COMPILE_ERRORS[name]
    want = libtorch_message(lambda: torch.jit.CompilationUnit(source))
    assert "\n" not in want and "  " in want, want  # the runs of spaces that must stay
    assert_error(c.execute("AI.SCRIPTSTORE", "s", "CPU", "ENTRY_POINTS", 1, "f",
                           "SOURCE", source), want)
    assert_error(c.execute("AI.SCRIPTSET", "s", "CPU", "SOURCE", source), want)
    assert c.execute("EXISTS", "s") == 0
    if name == "return-1":
        assert_error(c.execute("AI.SCRIPTSET", "s", "CPU", "SOURCE", source), RETURN_1)


def test_compile_error_in_a_crlf_source(c):
    # CR and LF each become one space, as 1.2's RAI_Chomp did
    source = COMPILE_ERRORS["two-lines"].replace("\n", "\r\n")
    reply = c.execute("AI.SCRIPTSET", "s", "CPU", "SOURCE", source)
    text = assert_clean_error(reply)
    assert "no_such_method" in text and "<--- HERE" in text, text


# --------------------------------------------------------------------------------------
# Errors raised while a script runs: TorchScript itself
# --------------------------------------------------------------------------------------

RUNS = [
    # (entry point, inputs, args)
    ("index", [A], []),
    ("shapes", [A, B], []),
    ("nested", [A], ["5"]),
    ("parse", [A], ["not-a-number"]),
]


@pytest.mark.parametrize("fn,inputs,args", RUNS, ids=[r[0] for r in RUNS])
def test_runtime_error_is_libtorchs_interpreter_message(c, fn, inputs, args):
    store(c, "s", PURE, PURE_EPS)
    names = [f"in{i}" for i in range(len(inputs))]
    for name, x in zip(names, inputs):
        put(c, name, x)
    cu = torch.jit.CompilationUnit(PURE)
    want = libtorch_message(lambda: getattr(cu, fn)([torch.from_numpy(x) for x in inputs],
                                                      [], args))
    assert want.startswith(INTERPRETER), want
    reply = c.execute("AI.SCRIPTEXECUTE", "s", fn, "INPUTS", len(names), *names,
                      *(["ARGS", len(args), *args] if args else []), "OUTPUTS", 1, "o")
    assert_error(reply, want)
    assert_clean_error(reply)
    assert c.execute("EXISTS", "o") == 0
    # the same text from a DAG op
    reply = c.execute("AI.DAGEXECUTE", "LOAD", len(names), *names,
                      "|>", "AI.SCRIPTEXECUTE", "s", fn, "INPUTS", len(names), *names,
                      *(["ARGS", len(args), *args] if args else []), "OUTPUTS", 1, "t",
                      "|>", "AI.TENSORGET", "t", "META")
    assert isinstance(reply, list) and len(reply) == 2, reply
    assert_error(reply[0], want)


def test_raise_in_a_script(c):
    store(c, "b", BUILTINS, BUILTIN_EPS)
    put(c, "a", A)
    reply = c.execute("AI.SCRIPTEXECUTE", "b", "fails", "INPUTS", 1, "a", "ARGS", 1, "x y",
                      "OUTPUTS", 1, "o")
    text = assert_clean_error(reply)
    assert text.startswith(INTERPRETER), text
    assert text.endswith("Exception: boom: x y "), text
    assert 'raise Exception("boom: " + args[0])' in text, text


# --------------------------------------------------------------------------------------
# Errors raised by the built-ins
# --------------------------------------------------------------------------------------

def test_redis_execute_error_inside_the_interpreter_message(c):
    store(c, "b", BUILTINS, BUILTIN_EPS)
    put(c, "a", A)
    inner = "Redis command returned an error: ERR wrong number of arguments for 'set' command"
    text = assert_script_error(
        c.execute("AI.SCRIPTEXECUTE", "b", "set_one", "KEYS", 1, "k", "INPUTS", 1, "a",
                  "OUTPUTS", 1, "o"), inner)
    # the traceback points at the call
    assert 'File "<string>", line 3, in set_one ' in text, text
    assert 'redis.execute("SET", keys[0])     ~~~~~~~~~~~~~ <--- HERE' in text, text
    assert c.execute("EXISTS", "k", "o") == 0
    # Redis's own text of any error reply, e.g. WRONGTYPE
    assert c.execute("LPUSH", "l", "x") == 1
    direct = c.execute("GET", "l")
    assert isinstance(direct, RespError), direct
    assert_script_error(c.execute("AI.SCRIPTEXECUTE", "b", "call", "KEYS", 1, "l",
                                  "INPUTS", 1, "a", "ARGS", 2, "GET", "l", "OUTPUTS", 1, "o"),
                        f"Redis command returned an error: {direct}")
    # and in a DAG
    reply = c.execute("AI.DAGEXECUTE", "LOAD", 1, "a", "ROUTING", "k",
                      "|>", "AI.SCRIPTEXECUTE", "b", "set_one", "KEYS", 1, "k",
                      "INPUTS", 1, "a", "OUTPUTS", 1, "t")
    assert isinstance(reply, list) and len(reply) == 1, reply
    assert_script_error(reply[0], inner)


def test_model_execute_on_an_empty_key(c):
    store(c, "b", BUILTINS, BUILTIN_EPS)
    put(c, "a", A)
    text = assert_script_error(
        c.execute("AI.SCRIPTEXECUTE", "b", "model", "KEYS", 1, "nokey", "INPUTS", 1, "a",
                  "OUTPUTS", 1, "o"), MODEL_EMPTY)
    assert "redisAI.model_execute(keys[0], tensors, 1)" in text, text
    assert c.execute("EXISTS", "o") == 0
    reply = c.execute("AI.DAGEXECUTE", "LOAD", 1, "a", "ROUTING", "nokey",
                      "|>", "AI.SCRIPTEXECUTE", "b", "model", "KEYS", 1, "nokey",
                      "INPUTS", 1, "a", "OUTPUTS", 1, "t", "|>", "AI.TENSORGET", "t", "META")
    assert isinstance(reply, list) and len(reply) == 2, reply
    assert_script_error(reply[0], MODEL_EMPTY)
    # a model of another count: the core's own text, inside the message too
    assert_ok(c.execute("AI.MODELSTORE", "m", "TORCH", "CPU", "BLOB", tm.add().blob))
    assert_script_error(
        c.execute("AI.SCRIPTEXECUTE", "b", "model", "KEYS", 1, "m", "INPUTS", 1, "a",
                  "OUTPUTS", 1, "o"),
        "Number of keys given as INPUTS here does not match model definition")
    # the script still runs the model when called right
    put(c, "b1", np.ones((2, 3), np.float32))
    assert_ok(c.execute("AI.SCRIPTEXECUTE", "b", "model", "KEYS", 1, "m", "INPUTS", 2, "a", "b1",
                        "OUTPUTS", 1, "o"))


def test_model_execute_of_a_failing_model_nests_its_message(c):
    """The model's own failure (a TorchScript module) is raised in the script: one message
    of the script's interpreter around the model's."""
    store(c, "b", BUILTINS, BUILTIN_EPS)
    built = tm.add()
    assert_ok(c.execute("AI.MODELSTORE", "m", "TORCH", "CPU", "BLOB", built.blob))
    put(c, "a", A)
    put(c, "b4", B)
    model_text = assert_clean_error(c.execute("AI.MODELEXECUTE", "m", "INPUTS", 2, "a", "b4",
                                              "OUTPUTS", 1, "o"))
    assert_script_error(c.execute("AI.SCRIPTEXECUTE", "b", "model", "KEYS", 1, "m",
                                  "INPUTS", 2, "a", "b4", "OUTPUTS", 1, "o"), model_text)


# --------------------------------------------------------------------------------------
# No C++ frames, even when libtorch is asked for them
# --------------------------------------------------------------------------------------

def test_no_cpp_backtrace_with_torch_show_cpp_stacktraces(module_path, torch_backend_path):
    env = {**os.environ, "TORCH_SHOW_CPP_STACKTRACES": "1"}
    srv = RedisServer(module_path, ["TORCH", str(torch_backend_path)], env=env)
    try:
        c = RawClient(srv.port)
        store(c, "s", PURE, PURE_EPS)
        put(c, "a", A)
        put(c, "b", B)
        reply = c.execute("AI.SCRIPTEXECUTE", "s", "shapes", "INPUTS", 2, "a", "b",
                          "OUTPUTS", 1, "o")
        text = assert_clean_error(reply)  # no "Exception raised from", no "frame #"
        assert text.startswith(INTERPRETER), text
        assert "The size of tensor a (3) must match the size of tensor b (4)" in text, text
        c.close()
        assert srv.alive(), srv.log()
    finally:
        srv.stop()


# --------------------------------------------------------------------------------------
# Models: the same texts (RedisAI 1.2 replied e.what() for models too)
# --------------------------------------------------------------------------------------

def test_model_run_error_is_libtorchs_interpreter_message(c):
    built = tm.add()
    assert_ok(c.execute("AI.MODELSTORE", "m", "TORCH", "CPU", "BLOB", built.blob))
    put(c, "a", A)
    put(c, "b4", B)
    want = libtorch_message(lambda: built.run(A, B))
    assert want.startswith("The following operation failed in the TorchScript interpreter. "
                           "Traceback of TorchScript, serialized code"), want
    reply = c.execute("AI.MODELEXECUTE", "m", "INPUTS", 2, "a", "b4", "OUTPUTS", 1, "o")
    assert_error(reply, want)
    assert_clean_error(reply)
    reply = c.execute("AI.DAGEXECUTE", "LOAD", 2, "a", "b4", "|>", "AI.MODELEXECUTE", "m",
                      "INPUTS", 2, "a", "b4", "OUTPUTS", 1, "t")
    assert isinstance(reply, list) and len(reply) == 1, reply
    assert_error(reply[0], want)


# --------------------------------------------------------------------------------------
# Model load (docs/commands.md, AI.MODELSTORE: libtorch's message)
# --------------------------------------------------------------------------------------

@pytest.mark.parametrize("blob", [b"this is not a torchscript archive", b"PK\x03\x04garbage"],
                         ids=["text", "zip-magic"])
def test_modelstore_of_no_archive_gets_libtorchs_text(c, blob):
    want = libtorch_message(lambda: torch.jit.load(io.BytesIO(blob)))
    reply = c.execute("AI.MODELSTORE", "m", "TORCH", "CPU", "BLOB", blob)
    assert_error(reply, want)
    assert_clean_error(reply)
    assert c.execute("EXISTS", "m") == 0


def test_modelstore_of_an_empty_blob_gets_libtorchs_reader_text(c):
    # (Python's torch.jit.load reads an empty BytesIO through another reader: no exact twin)
    reply = c.execute("AI.MODELSTORE", "m", "TORCH", "CPU", "BLOB", b"")
    text = assert_clean_error(reply)
    assert text.startswith("PytorchStreamReader failed reading zip archive: "
                           "not a ZIP archive."), text
    assert c.execute("EXISTS", "m") == 0
