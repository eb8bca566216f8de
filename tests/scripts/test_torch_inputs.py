"""Inputs are never written through (issue 10, "what scripts may touch").

The Torch backend hands a key's tensor data to Torch without copying it. A script or a
TorchScript model that changes an input in place (`x.add_(1)`, `x[0].mul_(2)`, ...) must
change only its own value, never the key it was read from: such a change would be a write
that is not a command, not replicated, not in the AOF, and visible to concurrent readers.

Every test keeps the bytes of the input key (AI.TENSORGET BLOB) and compares them after
the run, and checks the run's outputs. DAG semantics: an op sees the value its input slot
holds; an in-place change made by one op to a slot it reads does not change that slot for
later ops (the slot changes only through an op's OUTPUTS).
"""
from __future__ import annotations

import io

import numpy as np
import pytest

import torch_models as tm
from helpers import assert_ok
from model_io import get, put
from redis_server import Connect, RedisServer
from resp import RawClient, RespError

SCRIPT = '''
def inc(tensors: List[Tensor], keys: List[str], args: List[str]):
    x = tensors[0]
    x.add_(100)
    return x

def inc_view(tensors: List[Tensor], keys: List[str], args: List[str]):
    tensors[0][0].mul_(-1)
    return tensors[0] + 0

def inc_then_read(tensors: List[Tensor], keys: List[str], args: List[str]):
    tensors[0].add_(1)
    return tensors[1] + 0

def same(tensors: List[Tensor], keys: List[str], args: List[str]):
    return tensors[0]

def copy(tensors: List[Tensor], keys: List[str], args: List[str]):
    return tensors[0] + 0

def ro_sum(tensors: List[Tensor], keys: List[str], args: List[str]):
    return tensors[0].sum()

def via_model(tensors: List[Tensor], keys: List[str], args: List[str]):
    out = redisAI.model_execute(keys[0], tensors, 1)
    return out[0]

def out_arg(tensors: List[Tensor], keys: List[str], args: List[str]):
    torch.mul(tensors[1], 2, out=tensors[0])
    tensors[1].copy_(tensors[0])
    return tensors[0] + tensors[1]

def legacy_inc(a: Tensor):
    a.mul_(3)
    return a
'''
EPS = ["inc", "inc_view", "inc_then_read", "same", "copy", "ro_sum", "via_model", "out_arg"]
A = np.array([1, 2, 3], np.float32)


@pytest.fixture
def c(torch_server: RedisServer, connect: Connect) -> RawClient:
    client = connect(torch_server)
    assert_ok(client.execute("AI.SCRIPTSTORE", "s", "CPU", "ENTRY_POINTS", len(EPS), *EPS,
                             "SOURCE", SCRIPT))
    return client


def blob(c: RawClient, key: str) -> bytes:
    reply = c.execute("AI.TENSORGET", key, "BLOB")
    assert isinstance(reply, bytes), reply
    return reply


def run(c: RawClient, fn: str, ins: list[str], outs: list[str], keys: list[str] = ()) -> None:
    key_args = ["KEYS", len(keys), *keys] if keys else []
    assert_ok(c.execute("AI.SCRIPTEXECUTE", "s", fn, *key_args, "INPUTS", len(ins), *ins,
                        "OUTPUTS", len(outs), *outs))


def inplace_model_blob() -> bytes:
    import torch

    class Inc(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            x.add_(1)
            return x * 2

    buf = io.BytesIO()
    torch.jit.save(torch.jit.script(Inc()), buf)
    return buf.getvalue()


def test_script_inplace_add_leaves_input_key(c):
    put(c, "a", A)
    before = blob(c, "a")
    run(c, "inc", ["a"], ["y"])
    assert blob(c, "a") == before
    np.testing.assert_array_equal(get(c, "y"), A + 100)
    run(c, "inc", ["a"], ["y"])  # a second run sees the unchanged key again
    np.testing.assert_array_equal(get(c, "y"), A + 100)
    assert blob(c, "a") == before


def test_script_inplace_on_a_view_leaves_input_key(c):
    m = np.arange(6, dtype=np.int64).reshape(2, 3) + 1
    put(c, "m", m)
    before = blob(c, "m")
    run(c, "inc_view", ["m"], ["y"])
    assert blob(c, "m") == before
    want = m.copy()
    want[0] *= -1
    np.testing.assert_array_equal(get(c, "y"), want)


def test_same_key_twice_gives_two_independent_inputs(c):
    put(c, "a", A)
    before = blob(c, "a")
    run(c, "inc_then_read", ["a", "a"], ["y"])
    np.testing.assert_array_equal(get(c, "y"), A)
    assert blob(c, "a") == before


def test_out_argument_and_copy_into_inputs_leave_keys(c):
    put(c, "a", A)
    put(c, "b", np.array([5, 6, 7], np.float32))
    before_a, before_b = blob(c, "a"), blob(c, "b")
    run(c, "out_arg", ["a", "b"], ["y"])
    np.testing.assert_array_equal(get(c, "y"), np.array([20, 24, 28], np.float32))
    assert (blob(c, "a"), blob(c, "b")) == (before_a, before_b)


def test_legacy_scriptrun_inplace_leaves_input_key(c):
    assert_ok(c.execute("AI.SCRIPTSET", "old", "CPU", "SOURCE", SCRIPT))
    put(c, "a", A)
    before = blob(c, "a")
    assert_ok(c.execute("AI.SCRIPTRUN", "old", "legacy_inc", "INPUTS", "a", "OUTPUTS", "y"))
    assert blob(c, "a") == before
    np.testing.assert_array_equal(get(c, "y"), A * 3)


def test_output_aliasing_an_input_is_not_a_back_door(c):
    # `same` returns its input itself: the output key may share the input's data, so an
    # in-place change to the output key's value must not reach the input key either.
    put(c, "a", A)
    before = blob(c, "a")
    run(c, "same", ["a"], ["b"])
    run(c, "inc", ["b"], ["y"])
    assert blob(c, "a") == before
    np.testing.assert_array_equal(get(c, "b"), A)
    np.testing.assert_array_equal(get(c, "y"), A + 100)


def test_script_writing_its_own_input_key_as_output(c):
    # The sanctioned way to change a key: name it in OUTPUTS.
    put(c, "a", A)
    run(c, "inc", ["a"], ["a"])
    np.testing.assert_array_equal(get(c, "a"), A + 100)


def test_model_inplace_on_input_leaves_input_key(c):
    assert_ok(c.execute("AI.MODELSTORE", "m", "TORCH", "CPU", "BLOB", inplace_model_blob()))
    put(c, "a", A)
    before = blob(c, "a")
    for _ in range(2):
        assert_ok(c.execute("AI.MODELEXECUTE", "m", "INPUTS", 1, "a", "OUTPUTS", 1, "y"))
        np.testing.assert_array_equal(get(c, "y"), (A + 1) * 2)
    assert blob(c, "a") == before


def test_model_called_from_script_leaves_input_key(c):
    assert_ok(c.execute("AI.MODELSTORE", "m", "TORCH", "CPU", "BLOB", inplace_model_blob()))
    put(c, "a", A)
    before = blob(c, "a")
    run(c, "via_model", ["a"], ["y"], keys=["m"])
    np.testing.assert_array_equal(get(c, "y"), (A + 1) * 2)
    assert blob(c, "a") == before


def test_dag_inplace_op_does_not_change_the_slot_for_later_ops(c):
    # op 1 puts a's value in slot t (returning its input: t may share a's data), op 2
    # changes t in place, op 3 reads t: it must see op 1's value, and a is unchanged.
    put(c, "a", A)
    before = blob(c, "a")
    reply = c.execute("AI.DAGEXECUTE", "LOAD", 1, "a", "PERSIST", 2, "u", "v",
                      "|>", "AI.SCRIPTEXECUTE", "s", "same", "INPUTS", 1, "a", "OUTPUTS", 1, "t",
                      "|>", "AI.SCRIPTEXECUTE", "s", "inc", "INPUTS", 1, "t", "OUTPUTS", 1, "u",
                      "|>", "AI.SCRIPTEXECUTE", "s", "copy", "INPUTS", 1, "t", "OUTPUTS", 1, "v")
    assert not isinstance(reply, RespError), reply
    np.testing.assert_array_equal(get(c, "u"), A + 100)
    np.testing.assert_array_equal(get(c, "v"), A)
    assert blob(c, "a") == before


def test_dag_model_inplace_on_loaded_key(c):
    assert_ok(c.execute("AI.MODELSTORE", "m", "TORCH", "CPU", "BLOB", inplace_model_blob()))
    put(c, "a", A)
    before = blob(c, "a")
    reply = c.execute("AI.DAGEXECUTE", "LOAD", 1, "a", "PERSIST", 2, "y", "z",
                      "|>", "AI.MODELEXECUTE", "m", "INPUTS", 1, "a", "OUTPUTS", 1, "y",
                      "|>", "AI.SCRIPTEXECUTE", "s", "copy", "INPUTS", 1, "a", "OUTPUTS", 1, "z")
    assert not isinstance(reply, RespError), reply
    np.testing.assert_array_equal(get(c, "y"), (A + 1) * 2)
    np.testing.assert_array_equal(get(c, "z"), A)
    assert blob(c, "a") == before


def test_read_only_script_still_works(c):
    put(c, "a", A)
    run(c, "ro_sum", ["a"], ["y"])
    np.testing.assert_array_equal(get(c, "y"), np.float32(6))


def test_model_keeping_an_input_cannot_write_it_later(c, torch_server):
    # A tensor kept past its run (a module attribute) and written in a later run, after
    # its key was deleted too: still a private copy, the key untouched, the server up.
    assert_ok(c.execute("AI.MODELSTORE", "m", "TORCH", "CPU", "BLOB", tm.stateful_model_blob()))
    put(c, "a", A)
    before = blob(c, "a")
    assert_ok(c.execute("AI.MODELEXECUTE", "m", "INPUTS", 1, "a", "OUTPUTS", 1, "y"))
    np.testing.assert_array_equal(get(c, "y"), np.ones(3, np.float32))
    assert_ok(c.execute("AI.MODELEXECUTE", "m", "INPUTS", 1, "a", "OUTPUTS", 1, "y"))
    np.testing.assert_array_equal(get(c, "y"), A + 1)  # the kept input, changed privately
    assert blob(c, "a") == before
    assert c.execute("DEL", "a") == 1
    put(c, "b", A * 10)
    assert_ok(c.execute("AI.MODELEXECUTE", "m", "INPUTS", 1, "b", "OUTPUTS", 1, "y"))
    np.testing.assert_array_equal(get(c, "y"), A + 1)
    assert_ok(c.execute("AI.MODELEXECUTE", "m", "INPUTS", 1, "b", "OUTPUTS", 1, "y"))
    np.testing.assert_array_equal(get(c, "y"), A * 10 + 1)
    assert blob(c, "b") == (A * 10).tobytes()
    assert_ok(c.execute("AI.MODELDEL", "m"))
    assert c.execute("PING") == "PONG"
