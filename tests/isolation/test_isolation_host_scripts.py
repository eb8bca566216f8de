"""The backend host serving scripts, callbacks and STRING tensors (issue 13,
docs/isolation.md "The protocol"), without Redis: tests/support/iso_host_client.py plays the core
against the real redisai-backend-host with the real TORCH and ONNX backends.

SCRIPT_CREATE (and its compile errors, verbatim), SCRIPT_RUN of entry points and legacy
functions checked against torch in this process; redis.execute answered by the test with
reply trees (every type, ERROR elements, ERROR messages); redisAI.model_execute answered
with outputs, with ERROR (wrapped by the interpreter), and with a nested MODEL_RUN pushed
while the callback is outstanding; STRING tensors through ONNX Runtime both ways. A pop
with the wrong id, hostile reply trees and malformed STRING tensors end the host with
status 70 and a reason, never a signal.
"""
from __future__ import annotations

import os
import pathlib
import struct
from typing import Iterator

import numpy as np
import pytest

import iso_host_client as iso
import onnx_ml_models
import torch_models

# redis.execute replies of every type, and calls whose replies the test discards.
CALLS_SCRIPT = '''
def tree(tensors: List[Tensor], keys: List[str], args: List[str]):
    v = redis.asList(redis.execute("HGETALL", keys[0], args[0]))
    inner = redis.asList(v[1])
    return torch.tensor([float(str(v[0])), float(str(inner[0])), float(len(inner)),
                         float(str(v[2]))])

def discard(tensors: List[Tensor], keys: List[str], args: List[str]):
    redis.execute("ECHO", "hi")
    return tensors[0]
'''

ONNX = 3  # RAI_BackendKind


def _start(host_path: pathlib.Path, backend: iso.Backend) -> iso.HostProcess:
    h = iso.HostProcess(host_path, backend)
    m = h.hello()
    assert m.type == iso.HELLO_OK, m.error_text() if m.type == iso.ERROR else m
    return h


@pytest.fixture
def torch_host(host_path: pathlib.Path, torch_backend: iso.Backend
               ) -> Iterator[iso.HostProcess]:
    h = _start(host_path, torch_backend)
    yield h
    h.close()


@pytest.fixture
def onnx_host(host_path: pathlib.Path, onnx_backend: iso.Backend) -> Iterator[iso.HostProcess]:
    h = _start(host_path, onnx_backend)
    yield h
    h.close()


def _channel(h: iso.HostProcess) -> iso.Channel:
    ch = h.open_channel()
    ch.sock.settimeout(120)  # a hang fails the test instead of stalling it
    return ch


def _created(m: iso.Msg, want: int) -> None:
    assert m.type == want, m.error_text() if m.type == iso.ERROR else m


def _exits_with_protocol_error(h: iso.HostProcess, reason: str) -> None:
    assert h.wait() == iso.EXIT_PROTOCOL  # a negative status would be a signal
    err = h.stderr()
    assert "protocol error" in err and reason in err, err


def _f32(*shape: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


@pytest.fixture(scope="module")
def torch_cu():
    """The test scripts compiled by torch in this process: the reference outputs."""
    torch = torch_models._torch()
    return torch.jit.CompilationUnit(torch_models.SCRIPT)


# --- SCRIPT_CREATE ----------------------------------------------------------------------------

def test_script_create_and_compile_errors(torch_host: iso.HostProcess) -> None:
    m = torch_host.script_create(1, "s", torch_models.SCRIPT, torch_models.ENTRY_POINTS)
    _created(m, iso.SCRIPT_CREATED)
    assert m.payload == b""
    # A source over 64 KiB travels in a bulk memfd.
    big = torch_models.SCRIPT + "#" * (70 * 1024) + "\n"
    _created(torch_host.script_create(2, "big", big, ("bar",), bulk=True), iso.SCRIPT_CREATED)

    bad = torch_host.script_create(3, "bad", "def f(tensors: List[Tensor], keys: List[str], "
                                   "args: List[str]):\n    return undefined_name\n")
    assert bad.type == iso.ERROR and "undefined_name" in bad.error_text(), bad
    missing = torch_host.script_create(4, "m", torch_models.SCRIPT, ("no_such_function",))
    assert missing.type == iso.ERROR and "no_such_function" in missing.error_text(), missing
    assert torch_host.proc.poll() is None


def test_script_create_on_a_backend_without_scripts(onnx_host: iso.HostProcess) -> None:
    m = onnx_host.script_create(1, "s", torch_models.SCRIPT, ("bar",))
    assert m.type == iso.ERROR and m.error_text() == "ERR ONNX backend does not support scripts"
    assert onnx_host.proc.poll() is None


# --- SCRIPT_RUN -------------------------------------------------------------------------------

def test_script_runs_match_torch(torch_host: iso.HostProcess, torch_cu) -> None:
    torch = torch_models._torch()
    _created(torch_host.script_create(5, "s", torch_models.SCRIPT, torch_models.ENTRY_POINTS),
             iso.SCRIPT_CREATED)
    a, b = _f32(2, 3, seed=1), _f32(2, 3, seed=2)
    ta, tb = torch.from_numpy(a), torch.from_numpy(b)
    ch = _channel(torch_host)
    try:
        reply, got = ch.run_script(5, "bar", [a, b], 1)
        assert reply.type == iso.RUN_OK, reply.error_text()
        np.testing.assert_array_equal(got[0], torch_cu.bar([ta, tb], [], []).numpy())

        reply, got = ch.run_script(5, "add_args", [a], 1, keys=["k1"], args=["3", "4"])
        assert reply.type == iso.RUN_OK, reply.error_text()
        np.testing.assert_array_equal(got[0], torch_cu.add_args([ta], ["k1"], ["3", "4"]).numpy())

        reply, got = ch.run_script(5, "counts", [a, b], 1, keys=["x", "y", "z"], args=["q"])
        assert reply.type == iso.RUN_OK and got[0].tolist() == [2, 3, 1], reply

        reply, got = ch.run_script(5, "tuple_out", [a, b], 2)
        assert reply.type == iso.RUN_OK, reply.error_text()
        for g, want in zip(got, torch_cu.tuple_out([ta, tb], [], [])):
            np.testing.assert_array_equal(g, want.numpy())

        # A legacy function: inputs bound to its Tensor parameters.
        reply, got = ch.run_script(5, "legacy_add", [a, b], 1, entry_point=False)
        assert reply.type == iso.RUN_OK, reply.error_text()
        np.testing.assert_array_equal(got[0], torch_cu.legacy_add(ta, tb).numpy())

        # Large inputs and outputs through sealed regions.
        big_a, big_b = _f32(600, 600, seed=3), _f32(600, 600, seed=4)
        reply, got = ch.run_script(5, "bar", [big_a, big_b], 1)
        assert reply.type == iso.RUN_OK, reply.error_text()
        want = torch_cu.bar([torch.from_numpy(big_a), torch.from_numpy(big_b)], [], [])
        np.testing.assert_array_equal(got[0], want.numpy())

        # The backend's own error, and the host stays.
        reply, _ = ch.run_script(5, "no_such_function", [a], 1)
        assert reply.type == iso.ERROR and "no_such_function" in reply.error_text(), reply
    finally:
        ch.close()
    assert torch_host.proc.poll() is None


def test_handles_of_the_other_kind_are_refused(torch_host: iso.HostProcess) -> None:
    _created(torch_host.model_create(1, "m", torch_models.add().blob), iso.MODEL_CREATED)
    _created(torch_host.script_create(2, "s", torch_models.SCRIPT, ("bar",)), iso.SCRIPT_CREATED)
    a = _f32(2, 2, seed=5)
    ch = _channel(torch_host)
    try:
        reply, _ = ch.run_script(1, "bar", [a, a], 1)
        assert reply.type == iso.ERROR
        assert reply.error_text() == "ERR backend host handle 1 is a model, not a script"
        reply, _ = ch.run(2, [a, a], 1)
        assert reply.type == iso.ERROR
        assert reply.error_text() == "ERR backend host handle 2 is a script, not a model"
        torch_host.script_free(2)
        torch_host.sync()  # the free is handled on the control thread, the run on the channel's
        reply, _ = ch.run_script(2, "bar", [a, a], 1)
        assert reply.type == iso.ERROR and reply.error_text() == \
            "ERR the backend host has no such script"
        reply, got = ch.run(1, [a, a], 1)
        assert reply.type == iso.RUN_OK and np.array_equal(got[0], a + a)
    finally:
        ch.close()
    assert torch_host.proc.poll() is None


def test_keys_reach_the_backend_and_its_own_threads_are_refused(
        host_path: pathlib.Path, fault_backend: pathlib.Path) -> None:
    """The fault backend's probe-host model reports the key of MODEL_CREATE and of
    MODEL_RUN as ABI 1.5 gave them to it, and what redis_call and model_execute answer on a
    thread of the backend's own: refused, and nothing sent to the core."""
    folder = fault_backend.parent
    backend = iso.Backend("ONNX", ONNX, folder.name[len("redisai_"):], fault_backend,
                          folder.parent)
    h = _start(host_path, backend)
    try:
        _created(h.model_create(1, "probe{key}", b"probe-host\n"), iso.MODEL_CREATED)
        ch = _channel(h)
        try:
            # wait() fails on any callback: the refusals must not reach the core.
            reply, _ = ch.run(1, [np.zeros(1, np.float32)], 1, key="the-run-key")
            assert reply.type == iso.ERROR
            assert reply.error_text() == (
                "ERR fault backend probe: create key 'probe{key}', run key 'the-run-key', "
                "from a thread of its own: redis_call 'ERR redis_call is only allowed from a "
                "run', model_execute 'ERR model_execute is only allowed from a run'")
        finally:
            ch.close()
        assert h.proc.poll() is None
    finally:
        h.close()


def _nested(leaf: object, depth: int) -> object:
    """leaf at depth `depth` of a reply tree: inside that many one-element arrays."""
    for _ in range(depth):
        leaf = [leaf]
    return leaf


# --- redis.execute: CB_REDIS_CALL -------------------------------------------------------------

class Answers:
    """Answers each CB_REDIS_CALL with the next reply of a list, recording what it got."""

    def __init__(self, ch: iso.Channel, *replies: object) -> None:
        self.ch, self.replies, self.calls = ch, list(replies), []

    def __call__(self, m: iso.Msg) -> None:
        self.calls.append(self.ch.redis_call(m))
        self.ch.answer_redis(m, self.replies.pop(0))


def test_redis_execute_gets_the_cores_replies(torch_host: iso.HostProcess) -> None:
    _created(torch_host.script_create(1, "r", torch_models.REDIS_SCRIPT,
                                      torch_models.REDIS_ENTRY_POINTS), iso.SCRIPT_CREATED)
    _created(torch_host.script_create(2, "c", CALLS_SCRIPT, ("tree", "discard")),
             iso.SCRIPT_CREATED)
    x = np.zeros(1, np.float32)
    ch = _channel(torch_host)
    try:
        ans = Answers(ch, "OK", "41")
        reply, got = ch.run_script(1, "set_get", [x], 1, keys=["k1"], args=["41"],
                                   on_callback=ans)
        assert reply.type == iso.RUN_OK, reply.error_text()
        assert ans.calls == [("SET", [b"k1", b"41"]), ("GET", [b"k1"])]
        assert got[0].tolist() == 41

        ans = Answers(ch, "OK", 42)  # INTEGER
        reply, got = ch.run_script(1, "set_incr", [x], 1, keys=["n"], args=["41"],
                                   on_callback=ans)
        assert reply.type == iso.RUN_OK and got[0].tolist() == 42, reply
        assert ans.calls[1] == ("INCR", [b"n"])

        ans = Answers(ch, 1, 2, 3, ["1", "2", "3"])  # ARRAY of STRING
        reply, got = ch.run_script(1, "list_range", [x], 1, keys=["l"], args=["1", "2", "3"],
                                   on_callback=ans)
        assert reply.type == iso.RUN_OK and got[0].tolist() == [1, 2, 3], reply
        assert ans.calls[-1] == ("LRANGE", [b"l", b"0", b"-1"])

        ans = Answers(ch, None)  # NULL
        reply, got = ch.run_script(1, "missing_get", [x], 1, keys=["none"], on_callback=ans)
        assert reply.type == iso.RUN_OK and got[0].tolist() == [1], reply

        ans = Answers(ch, [7, ["8", None], 2.5])  # INTEGER, nested ARRAY, DOUBLE
        reply, got = ch.run_script(2, "tree", [x], 1, keys=["h"], args=["f"], on_callback=ans)
        assert reply.type == iso.RUN_OK, reply.error_text()
        assert ans.calls == [("HGETALL", [b"h", b"f"])]
        assert got[0].tolist() == [7.0, 8.0, 2.0, 2.5]

        # Binary arguments travel as they are.
        ans = Answers(ch, "OK", "0")
        reply, got = ch.run_script(1, "set_get", [x], 1, keys=["k\x01"], args=["0"],
                                   on_callback=ans)
        assert reply.type == iso.RUN_OK and ans.calls[0] == ("SET", [b"k\x01", b"0"]), reply
    finally:
        ch.close()
    assert torch_host.proc.poll() is None


def test_redis_execute_errors(torch_host: iso.HostProcess) -> None:
    _created(torch_host.script_create(1, "r", torch_models.REDIS_SCRIPT,
                                      torch_models.REDIS_ENTRY_POINTS), iso.SCRIPT_CREATED)
    _created(torch_host.script_create(2, "c", CALLS_SCRIPT, ("tree", "discard")),
             iso.SCRIPT_CREATED)
    x = np.zeros(1, np.float32)
    ch = _channel(torch_host)
    try:
        # An ERROR reply: raised in the script as RedisAI 1.2 did.
        wrong = "ERR wrong number of arguments for 'set' command"
        ans = Answers(ch, iso.ErrorReply(wrong))
        reply, _ = ch.run_script(1, "redis_error", [x], 0, keys=["k"], on_callback=ans)
        assert ans.calls == [("SET", [b"k"])]
        assert reply.type == iso.ERROR
        assert f"Redis command returned an error: {wrong}" in reply.error_text(), reply

        # An ERROR element inside an array.
        ans = Answers(ch, [7, iso.ErrorReply("ERR nested element"), 2.5])
        reply, _ = ch.run_script(2, "tree", [x], 1, keys=["h"], args=["f"], on_callback=ans)
        assert reply.type == iso.ERROR and "ERR nested element" in reply.error_text(), reply

        # The core answering with an ERROR message: the script sees an error reply.
        def error_message(m: iso.Msg) -> None:
            ch.answer_error(m, "ERR NOPERM this user has no permissions to run 'echo'")
        reply, _ = ch.run_script(2, "discard", [x], 1, on_callback=error_message)
        assert reply.type == iso.ERROR
        assert "Redis command returned an error: ERR NOPERM" in reply.error_text(), reply

        # A leaf at depth 32 (the outermost reply at 0) is accepted: the core sends an ERROR
        # leaf there in place of anything deeper.
        deep = _nested("leaf", iso.REPLY_DEPTH_MAX)
        reply, got = ch.run_script(2, "discard", [x], 1, on_callback=Answers(ch, deep))
        assert reply.type == iso.RUN_OK and got[0].tolist() == [0.0], reply
        too_deep = iso.ErrorReply("ERR reply nested too deep for an isolated backend")
        reply, _ = ch.run_script(2, "discard", [x], 1,
                                 on_callback=Answers(ch, _nested(too_deep, iso.REPLY_DEPTH_MAX)))
        assert reply.type == iso.ERROR and "nested too deep" in reply.error_text(), reply
    finally:
        ch.close()
    assert torch_host.proc.poll() is None


# --- redisAI.model_execute: CB_MODEL_EXECUTE --------------------------------------------------

@pytest.fixture
def model_and_script(torch_host: iso.HostProcess) -> iso.HostProcess:
    """Handle 1: the TorchScript model a + b; handle 2: the script whose model_run calls
    redisAI.model_execute(keys[0], [tensors[0], tensors[1]], 1) and doubles the result."""
    _created(torch_host.model_create(1, "m", torch_models.add().blob), iso.MODEL_CREATED)
    _created(torch_host.script_create(2, "r", torch_models.REDIS_SCRIPT,
                                      torch_models.REDIS_ENTRY_POINTS), iso.SCRIPT_CREATED)
    return torch_host


def test_model_execute_answered_with_outputs(model_and_script: iso.HostProcess) -> None:
    a, b = _f32(2, 3, seed=6), _f32(2, 3, seed=7)
    ch = _channel(model_and_script)
    asked: list[iso.ModelExecute] = []

    def answer(m: iso.Msg) -> None:
        me = ch.model_execute(m)
        asked.append(me)
        ch.answer_model(m, [me.inputs[0] - me.inputs[1]])  # not the model: the core's answer
    try:
        reply, got = ch.run_script(2, "model_run", [a, b], 1, keys=["the-model"],
                                   on_callback=answer)
        assert reply.type == iso.RUN_OK, reply.error_text()
        [me] = asked
        assert me.key == "the-model" and me.noutputs == 1 and me.msg.id & iso.HOST_ID_BIT
        np.testing.assert_array_equal(me.inputs[0], a)
        np.testing.assert_array_equal(me.inputs[1], b)
        torch = torch_models._torch()
        want = (torch.from_numpy(a) - torch.from_numpy(b)) * 2
        np.testing.assert_array_equal(got[0], want.numpy())
    finally:
        ch.close()


def test_model_execute_error_is_wrapped_by_the_script(model_and_script: iso.HostProcess) -> None:
    a = _f32(2, 2, seed=8)
    ch = _channel(model_and_script)
    try:
        reply, _ = ch.run_script(2, "model_run", [a, a], 1, keys=["empty"],
                                 on_callback=lambda m: ch.answer_error(m, "ERR model key is empty"))
        assert reply.type == iso.ERROR
        text = reply.error_text()
        # TorchScript took the text back (error_take) and raised it: the interpreter's
        # message is around it, not the bare text.
        assert "ERR model key is empty" in text and text != "ERR model key is empty", text
        assert "model_execute" in text, text
        # The channel serves the next run normally.
        reply, got = ch.run(1, [a, a], 1)
        assert reply.type == iso.RUN_OK and np.array_equal(got[0], a + a)
    finally:
        ch.close()


@pytest.mark.parametrize("shape", [(2, 3), (600, 600)], ids=["arena", "large-regions"])
def test_nested_model_run_while_the_callback_is_held(model_and_script: iso.HostProcess,
                                                     shape: tuple[int, int]) -> None:
    """The core's answer to model_execute is a MODEL_RUN of a model of this very host,
    pushed on the same channel while the callback is outstanding: the host serves it on
    the waiting thread, then goes on waiting."""
    a, b = _f32(*shape, seed=9), _f32(*shape, seed=10)
    ch = _channel(model_and_script)
    nested: list[np.ndarray] = []

    def answer(m: iso.Msg) -> None:
        me = ch.model_execute(m)
        # Nested run inputs never use the c2h arena: the outer run's inputs are there.
        rid = ch.push_model_run(1, me.inputs, me.noutputs, key="the-model", arena=False)
        inner, outs = ch.wait(rid)
        assert inner.type == iso.RUN_OK, inner.error_text()
        nested.extend(outs)
        ch.answer_model(m, outs)
    try:
        reply, got = ch.run_script(2, "model_run", [a, b], 1, keys=["the-model"],
                                   on_callback=answer)
        assert reply.type == iso.RUN_OK, reply.error_text()
        model = torch_models.add()
        np.testing.assert_array_equal(nested[0], model.run(a, b)[0])
        torch = torch_models._torch()
        np.testing.assert_array_equal(got[0], (torch.from_numpy(model.run(a, b)[0]) * 2).numpy())
    finally:
        ch.close()
    assert model_and_script.proc.poll() is None


# --- the call stack's protocol errors ---------------------------------------------------------

def test_pop_with_the_wrong_id_ends_the_host(torch_host: iso.HostProcess) -> None:
    _created(torch_host.script_create(1, "c", CALLS_SCRIPT, ("discard",)), iso.SCRIPT_CREATED)
    ch = _channel(torch_host)
    try:
        ch.push_script_run(1, "discard", [np.zeros(1, np.float32)], 1)
        m = iso.recv(ch.sock)
        assert m is not None and m.type == iso.CB_REDIS_CALL, m
        ch.answer_redis(m, "PONG", id_=m.id ^ 1)
        _exits_with_protocol_error(torch_host, "the top of the stack is")
    finally:
        ch.close()


def test_pop_with_nothing_outstanding_ends_the_host(torch_host: iso.HostProcess) -> None:
    ch = _channel(torch_host)
    try:
        iso.send(ch.sock, iso.CB_REDIS_REPLY, 5, iso.reply_tree("OK").bytes())
        _exits_with_protocol_error(torch_host, "no request outstanding")
    finally:
        ch.close()


def test_core_request_with_a_host_id_ends_the_host(torch_host: iso.HostProcess) -> None:
    _created(torch_host.model_create(1, "m", torch_models.add().blob), iso.MODEL_CREATED)
    ch = _channel(torch_host)
    try:
        a = np.ones(2, np.float32)
        ch.push_model_run(1, [a, a], 1, rid=iso.HOST_ID_BIT | 7)
        _exits_with_protocol_error(torch_host, "an id of the host's")
    finally:
        ch.close()


HOSTILE_TREES = {
    "depth-33": (iso.reply_tree(_nested("leaf", iso.REPLY_DEPTH_MAX + 1)).bytes(),
                 "a reply at depth 33, over 32"),
    "depth-100000": (struct.pack("<BI", iso.R_ARRAY, 1) * 100000 + b"\0",
                     "a reply at depth 33, over 32"),
    "count-lie": (struct.pack("<BI", iso.R_ARRAY, 1000) + b"\0", "promises more items"),
    "huge-count": (struct.pack("<BI", iso.R_ARRAY, 0xFFFFFFFF) + b"\0" * 8,
                   "promises more items"),
    "string-lie": (struct.pack("<BI", iso.R_STRING, 100) + b"ab", "runs past the end"),
    "short-integer": (struct.pack("<B", iso.R_INTEGER) + b"\0" * 3, "runs past the end"),
    "unknown-type": (struct.pack("<B", 9), "a reply of type 9"),
    "bytes-left-over": (struct.pack("<BB", iso.R_NULL, 0), "bytes left over"),
    "empty": (b"", "runs past the end"),
}


@pytest.mark.parametrize("case", list(HOSTILE_TREES))
def test_hostile_reply_trees_end_the_host(host_path: pathlib.Path, torch_backend: iso.Backend,
                                          case: str) -> None:
    payload, reason = HOSTILE_TREES[case]
    h = _start(host_path, torch_backend)
    try:
        _created(h.script_create(1, "c", CALLS_SCRIPT, ("discard",)), iso.SCRIPT_CREATED)
        ch = _channel(h)
        try:
            ch.push_script_run(1, "discard", [np.zeros(1, np.float32)], 1)
            m = iso.recv(ch.sock)
            assert m is not None and m.type == iso.CB_REDIS_CALL, m
            ch.answer_raw(m, iso.CB_REDIS_REPLY, payload)
            _exits_with_protocol_error(h, reason)
        finally:
            ch.close()
    finally:
        h.close()


def test_model_reply_with_the_wrong_output_count_ends_the_host(
        model_and_script: iso.HostProcess) -> None:
    a = np.ones((2, 2), np.float32)
    ch = _channel(model_and_script)
    try:
        ch.push_script_run(2, "model_run", [a, a], 1, keys=["m"])
        m = iso.recv(ch.sock)
        assert m is not None and m.type == iso.CB_MODEL_EXECUTE, m
        ch.model_execute(m)
        ch.answer_model(m, [a, a])
        _exits_with_protocol_error(model_and_script, "CB_MODEL_REPLY has 2 outputs, 1 were asked")
    finally:
        ch.close()


# --- STRING tensors ---------------------------------------------------------------------------

@pytest.fixture(scope="module")
def strings_model():
    import onnxruntime as ort  # noqa: PLC0415 - lazy, as onnx_models does

    blob = onnx_ml_models.strings()
    sess = ort.InferenceSession(blob, providers=["CPUExecutionProvider"])
    return blob, sess


@pytest.mark.parametrize("rows", [2, 60000], ids=["arena", "large-regions"])
def test_string_tensors_round_trip_through_onnx(onnx_host: iso.HostProcess, strings_model,
                                                rows: int) -> None:
    blob, sess = strings_model
    _created(onnx_host.model_create(1, "strings", blob), iso.MODEL_CREATED)
    words = ["red", "green", "", "blue", "héllo wörld", "x" * 40]
    s = np.array([[words[(2 * i + j) % len(words)] + (str(i) if i % 7 == 3 else "")
                   for j in range(2)] for i in range(rows)], dtype=object)
    ch = _channel(onnx_host)
    try:
        reply, got = ch.run(1, [s], 3)
        assert reply.type == iso.RUN_OK, reply.error_text()
        if rows > 2:
            # Over ISO_ARENA_TENSOR_MAX: the input went in a region, `same` came back in one.
            assert len(reply.fds) == 1 and len(iso.tensor_bytes(s)) > iso.ARENA_TENSOR_MAX
        same, code, n = got
        want_same, want_code, want_n = sess.run(None, {"s": s})
        assert same.dtype == object and same.shape == s.shape
        assert same.tolist() == want_same.tolist() == s.tolist()
        np.testing.assert_array_equal(code, want_code)
        np.testing.assert_array_equal(n, want_n)
        np.testing.assert_array_equal(code, onnx_ml_models.encode(s))
    finally:
        ch.close()
    assert onnx_host.proc.poll() is None


def _strings_descriptor(offsets: list[int], body: bytes, dims: list[int],
                        nbytes: int | None = None) -> tuple[bytes, bytes]:
    raw = struct.pack(f"<{len(offsets)}Q", *offsets) + body
    e = iso.Enc().u64(1).u32(0).str("strings").u32(1)
    e.tensor(iso.STRING, 8, 0, 0, len(raw) if nbytes is None else nbytes, dims).u32(3)
    return e.bytes(), raw


MALFORMED_STRINGS = {
    "not-increasing": ([0, 4, 4, 8], b"abc\0def\0gh\0ij\0", "not increasing at element 2"),
    "decreasing": ([0, 8, 4, 12], b"abc\0def\0gh\0ij\0", "not increasing at element 2"),
    "no-nul": ([0, 2, 4, 6], b"abcdefgh", "element 0 has no NUL"),
    "last-no-nul": ([0, 4, 8, 11], b"abc\0def\0gh\0ij", "element 3 has no NUL"),
    "first-not-0": ([1, 4, 8, 11], b"abc\0def\0gh\0ij\0", "element 0 starts at 1"),
    "past-the-end": ([0, 4, 8, 99], b"abc\0def\0gh\0ij\0", "element 3 starts past"),
}


@pytest.mark.parametrize("case", list(MALFORMED_STRINGS))
def test_malformed_string_tensor_ends_the_host(onnx_host: iso.HostProcess, strings_model,
                                               case: str) -> None:
    offsets, body, reason = MALFORMED_STRINGS[case]
    _created(onnx_host.model_create(1, "strings", strings_model[0]), iso.MODEL_CREATED)
    ch = _channel(onnx_host)
    try:
        payload, raw = _strings_descriptor(offsets, body, [2, 2])
        ch.c2h[0:len(raw)] = raw
        iso.send(ch.sock, iso.MODEL_RUN, 9, payload)
        _exits_with_protocol_error(onnx_host, reason)
    finally:
        ch.close()


def test_string_tensor_too_short_for_its_offsets_ends_the_host(onnx_host: iso.HostProcess,
                                                               strings_model) -> None:
    _created(onnx_host.model_create(1, "strings", strings_model[0]), iso.MODEL_CREATED)
    ch = _channel(onnx_host)
    try:
        payload, raw = _strings_descriptor([0, 4, 8, 12], b"abc\0def\0gh\0ij\0", [2, 2],
                                           nbytes=31)
        ch.c2h[0:len(raw)] = raw
        iso.send(ch.sock, iso.MODEL_RUN, 9, payload)
        _exits_with_protocol_error(onnx_host, "cannot hold its offsets")
    finally:
        ch.close()


# --- mutated answers ----------------------------------------------------------------------------

def _mutate(rng: np.random.Generator, good: bytes, i: int) -> bytes:
    payload = bytearray(good)
    if i % 4 == 0:
        return bytes(payload[:int(rng.integers(0, len(payload)))])
    for _ in range(int(rng.integers(1, 3))):
        at = int(rng.integers(0, len(payload)))
        payload[at] ^= 1 << int(rng.integers(0, 8))
    return bytes(payload)


def test_mutated_callback_answers_never_crash_the_host(host_path: pathlib.Path,
                                                       torch_backend: iso.Backend) -> None:
    """Bit-flipped and truncated CB_REDIS_REPLY trees and CB_MODEL_REPLY messages (seeded):
    the script run is answered (RUN_OK or ERROR) with the host alive, or the host exits
    with status 70; never a signal, never a hang."""
    tree = iso.reply_tree([7, ["8", None], 2.5]).bytes()
    out = np.arange(6, dtype=np.float32).reshape(2, 3)
    model_reply = iso.Enc().u32(1).tensor(2, 32, 1, 0, out.nbytes, out.shape).bytes()
    rng = np.random.default_rng(131313)
    h: iso.HostProcess | None = None
    ch: iso.Channel | None = None
    outcomes = {"answered": 0, "exit": 0}
    x = np.zeros((2, 3), np.float32)
    try:
        for i in range(24):  # most are fatal, and a torch host takes ~0.5 s to start
            if h is None:
                h = _start(host_path, torch_backend)
                _created(h.script_create(1, "c", CALLS_SCRIPT, ("tree",)), iso.SCRIPT_CREATED)
                _created(h.script_create(2, "r", torch_models.REDIS_SCRIPT, ("model_run",)),
                         iso.SCRIPT_CREATED)
                ch = _channel(h)
            fds: list[int] = []
            if i % 2:
                rid = ch.push_script_run(1, "tree", [x], 1, keys=["h"], args=["f"])
                want, payload = iso.CB_REDIS_CALL, _mutate(rng, tree, i)
                answer = iso.CB_REDIS_REPLY
            else:
                rid = ch.push_script_run(2, "model_run", [x, x], 1, keys=["m"])
                want, payload = iso.CB_MODEL_EXECUTE, _mutate(rng, model_reply, i)
                answer = iso.CB_MODEL_REPLY
                fds = [iso.frozen_memfd(out.tobytes())]
            m = iso.recv(ch.sock)
            assert m is not None and m.type == want, (i, m)
            if want == iso.CB_MODEL_EXECUTE:
                ch.model_execute(m)
            try:
                ch.answer_raw(m, answer, payload, fds)
            finally:
                for fd in fds:
                    os.close(fd)
            m = iso.recv(ch.sock)
            if m is not None:
                assert m.type in (iso.RUN_OK, iso.ERROR) and m.id == rid, (i, m)
                for fd in m.fds:
                    os.close(fd)
                outcomes["answered"] += 1
                continue
            status = h.wait()
            assert status == iso.EXIT_PROTOCOL, (i, status, h.stderr())
            outcomes["exit"] += 1
            ch.close()
            h.close()
            h = ch = None
    finally:
        if ch is not None:
            ch.close()
        if h is not None:
            h.close()
    assert outcomes["answered"] and outcomes["exit"], outcomes  # both paths were exercised


def test_mutated_string_layouts_never_crash_the_host(host_path: pathlib.Path,
                                                     onnx_backend: iso.Backend,
                                                     strings_model) -> None:
    """Random offsets and bytes in a STRING input (seeded): RUN_OK with the elements as
    sent, or exit 70; never a signal."""
    rng = np.random.default_rng(77)
    h: iso.HostProcess | None = None
    ch: iso.Channel | None = None
    outcomes = {"answered": 0, "exit": 0}
    try:
        for i in range(40):
            if h is None:
                h = _start(host_path, onnx_backend)
                _created(h.model_create(1, "strings", strings_model[0]), iso.MODEL_CREATED)
                ch = _channel(h)
            body = bytes(rng.choice([0, 97, 98], size=12, p=[0.3, 0.35, 0.35]).astype(np.uint8))
            offsets = [0] + sorted(int(v) for v in rng.integers(0, 14, size=3))
            if i % 4 == 0:
                offsets = [0, 3, 6, 9]
                body = b"ab\0cd\0ef\0gh\0"  # a valid one now and then
            payload, raw = _strings_descriptor(offsets, body, [2, 2])
            ch.c2h[0:len(raw)] = raw
            iso.send(ch.sock, iso.MODEL_RUN, 100 + i, payload)
            m = iso.recv(ch.sock)
            if m is not None:
                assert m.type == iso.RUN_OK and m.id == 100 + i, (i, m)
                same = ch._outputs(m)[0]
                want = [body[o:body.index(b"\0", o)].decode() for o in offsets]
                assert same.reshape(-1).tolist() == want, (i, offsets, body)
                outcomes["answered"] += 1
                continue
            assert h.wait() == iso.EXIT_PROTOCOL, (i, h.stderr())
            outcomes["exit"] += 1
            ch.close()
            h.close()
            h = ch = None
    finally:
        if ch is not None:
            ch.close()
        if h is not None:
            h.close()
    assert outcomes["answered"] and outcomes["exit"], outcomes


# --- inputs a backend keeps past its run -------------------------------------------------------

def _keeping_model() -> bytes:
    """TorchScript: keeps its input as an attribute, changes the kept one in place in the
    next run and returns it (torch_models.stateful_model_blob): torch holds the raw data
    pointer of the host tensor it was given, as the ABI allows while it holds a
    reference."""
    return torch_models.stateful_model_blob()


@pytest.mark.parametrize("shape", [(3,), (600, 600)], ids=["arena", "large-region"])
def test_an_input_kept_past_its_run_keeps_its_data(torch_host: iso.HostProcess,
                                                   shape: tuple[int, ...]) -> None:
    """The next request reuses the c2h arena and maps other regions: a kept input must
    still hold its own run's data (in-process RedisAI gives the same)."""
    _created(torch_host.model_create(1, "keep", _keeping_model()), iso.MODEL_CREATED)
    first = np.arange(1, 1 + int(np.prod(shape)), dtype=np.float32).reshape(shape)
    second, third = first * 10, first * 100
    ch = _channel(torch_host)
    try:
        reply, _ = ch.run(1, [first], 1)
        assert reply.type == iso.RUN_OK, reply.error_text()
        reply, got = ch.run(1, [second], 1)
        assert reply.type == iso.RUN_OK, reply.error_text()
        np.testing.assert_array_equal(got[0], first + 1)  # kept from run 1, not run 2's bytes
        reply, got = ch.run(1, [third], 1)
        assert reply.type == iso.RUN_OK, reply.error_text()
        np.testing.assert_array_equal(got[0], second + 1)
    finally:
        ch.close()
    assert torch_host.proc.poll() is None
