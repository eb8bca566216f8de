"""All three backends in one server (docs/commands.md, docs/backends.md): TF, TORCH and ONNX
loaded by path at load time and by AI.CONFIG LOADBACKEND, in different orders, and lazily (only the
module loaded: the first MODELSTORE / SCRIPTSTORE of each kind loads the default file from
BACKENDSPATH). Each backend runs its model on the same server, and a TorchScript script
runs over their outputs. A BACKENDSPATH with nothing in it gives `ERR Could not load
backend` and a log line naming the file it tried. The framework settings
(THREADS_PER_QUEUE, INTRA_OP_PARALLELISM, INTER_OP_PARALLELISM) are taken by all three.
"""
from __future__ import annotations

import threading

import numpy as np
import pytest

import onnx_models as om
import tf_graphs
import torch_models as tm
from helpers import LOAD_ERR, LogMark, assert_error, assert_error_startswith, assert_ok, info_field
from model_io import assert_same, get, put
from paths import backend_file
from redis_server import RedisServer
from resp import RawClient, RespError

ARGMAX_SCRIPT = '''
def argmax(tensors: List[Tensor], keys: List[str], args: List[str]):
    return torch.argmax(tensors[0], dim=1)

def argmax_legacy(x: Tensor):
    return torch.argmax(x, dim=1)

def total(tensors: List[Tensor], keys: List[str], args: List[str]):
    s = tensors[0].sum()
    for t in tensors[1:]:
        s = s + t.sum()
    return s.reshape([1])
'''

NAMES = {"TF": "tensorflow", "TORCH": "torch", "ONNX": "onnxruntime"}


def store_all(c: RawClient) -> None:
    assert_ok(c.execute("AI.MODELSTORE", "tf", "TF", "CPU", "INPUTS", 2, "a", "b", "OUTPUTS", 1,
                        "mul", "BLOB", tf_graphs.mul_graph()))
    assert_ok(c.execute("AI.MODELSTORE", "pt", "TORCH", "CPU", "BLOB", tm.cnn().blob))
    assert_ok(c.execute("AI.MODELSTORE", "ox", "ONNX", "CPU", "BLOB", om.cnn().blob))
    assert_ok(c.execute("AI.SCRIPTSTORE", "sc", "CPU", "ENTRY_POINTS", 2, "argmax", "total",
                        "SOURCE", ARGMAX_SCRIPT))


def run_all(c: RawClient) -> None:
    """Each backend runs its model; the script runs over their outputs."""
    a = np.array([[2, 3], [4, 5]], np.float32)
    put(c, "a", a)
    put(c, "b", a)
    assert_ok(c.execute("AI.MODELEXECUTE", "tf", "INPUTS", 2, "a", "b", "OUTPUTS", 1, "tf_out"))
    assert_same(get(c, "tf_out"), a * a)

    x = tm.cnn_sample(batch=3, seed=21)
    put(c, "x", x)
    [want_pt] = tm.cnn().run(x)
    [want_ox] = om.cnn().run(x)
    assert_ok(c.execute("AI.MODELEXECUTE", "pt", "INPUTS", 1, "x", "OUTPUTS", 1, "pt_out"))
    assert_ok(c.execute("AI.MODELEXECUTE", "ox", "INPUTS", 1, "x", "OUTPUTS", 1, "ox_out"))
    assert_same(get(c, "pt_out"), want_pt)
    assert_same(get(c, "ox_out"), want_ox)
    # the same network, two frameworks: the same classes
    assert_ok(c.execute("AI.SCRIPTEXECUTE", "sc", "argmax", "INPUTS", 1, "pt_out", "OUTPUTS", 1, "pt_cls"))
    assert_ok(c.execute("AI.SCRIPTEXECUTE", "sc", "argmax", "INPUTS", 1, "ox_out", "OUTPUTS", 1, "ox_cls"))
    assert_same(get(c, "pt_cls"), want_pt.argmax(axis=1).astype(np.int64))
    assert_same(get(c, "ox_cls"), get(c, "pt_cls"))
    assert_ok(c.execute("AI.SCRIPTEXECUTE", "sc", "total", "INPUTS", 3, "tf_out", "pt_out", "ox_out",
                        "OUTPUTS", 1, "sum"))
    want = np.float32((a * a).sum() + want_pt.sum() + want_ox.sum())
    np.testing.assert_allclose(get(c, "sum"), [want], rtol=1e-5)


def check_backend_versions(c: RawClient) -> None:
    info = c.execute("INFO", "MODULES")
    assert info_field(info, "ai_TensorFlow_version") == tf_graphs.tensorflow_version(), info
    assert info_field(info, "ai_onnxruntime_version") == om.onnxruntime_version(), info
    assert info_field(info, "ai_Torch_version") is not None, info


ORDERS = [
    ("load-args", ("TF", "TORCH", "ONNX")),
    ("load-args", ("ONNX", "TORCH", "TF")),
    ("loadbackend", ("TORCH", "ONNX", "TF")),
    ("loadbackend", ("ONNX", "TF", "TORCH")),
]


@pytest.mark.parametrize("how,order", ORDERS, ids=[f"{h}-{'-'.join(o)}" for h, o in ORDERS])
def test_three_backends_one_server(module_path, all_backend_paths, how, order):
    args: list[str] = []
    if how == "load-args":
        for kind in order:
            args += [kind, str(all_backend_paths[kind])]
    srv = RedisServer(module_path, args)
    try:
        with RawClient(srv.port) as c:
            if how == "loadbackend":
                for kind in order:
                    assert_ok(c.execute("AI.CONFIG", "LOADBACKEND", kind, str(all_backend_paths[kind])))
            for kind in order:  # each type loads once
                reason = assert_error_startswith(
                    c.execute("AI.CONFIG", "LOADBACKEND", kind, str(all_backend_paths[kind])), LOAD_ERR)
                assert "already loaded" in reason, reason
            store_all(c)
            run_all(c)
            check_backend_versions(c)
            # models of all three kinds survive a reload together
            assert_ok(c.execute("DEBUG", "RELOAD"))
            run_all(c)
        assert srv.alive(), srv.log()
    finally:
        srv.stop()


def test_lazy_loading_only(module_path, install_dir, all_backend_paths):
    """Only the module at start; each first store loads its backend from the default
    BACKENDSPATH (the install tree's backends/)."""
    srv = RedisServer(module_path)
    try:
        with RawClient(srv.port) as c:
            info = c.execute("INFO", "MODULES")
            for field in ("ai_TensorFlow_version", "ai_Torch_version", "ai_onnxruntime_version"):
                assert info_field(info, field) is None, f"{field} before any backend was loaded"
            mark = LogMark(srv.logfile)
            assert_ok(c.execute("AI.MODELSTORE", "ox", "ONNX", "CPU", "BLOB", om.cnn().blob))
            mark.wait_for_line("redisai_onnxruntime/redisai_onnxruntime.so", "ONNX")
            assert info_field(c.execute("INFO", "MODULES"), "ai_Torch_version") is None
            assert_ok(c.execute("AI.MODELSTORE", "pt", "TORCH", "CPU", "BLOB", tm.cnn().blob))
            mark.wait_for_line("redisai_torch/redisai_torch.so", "TORCH")
            assert_ok(c.execute("AI.MODELSTORE", "tf", "TF", "CPU", "INPUTS", 2, "a", "b",
                                "OUTPUTS", 1, "mul", "BLOB", tf_graphs.mul_graph()))
            mark.wait_for_line("redisai_tensorflow/redisai_tensorflow.so", "TF")
            assert_ok(c.execute("AI.SCRIPTSTORE", "sc", "CPU", "ENTRY_POINTS", 2, "argmax", "total",
                                "SOURCE", ARGMAX_SCRIPT))
            for kind in NAMES:
                reason = assert_error_startswith(
                    c.execute("AI.CONFIG", "LOADBACKEND", kind, str(backend_file(install_dir, NAMES[kind]))),
                    LOAD_ERR)
                assert "already loaded" in reason, reason
            run_all(c)
            check_backend_versions(c)
        assert srv.alive(), srv.log()
    finally:
        srv.stop()


@pytest.mark.parametrize("first", ["SCRIPTSTORE", "SCRIPTSET", "MODELSET"])
def test_lazy_loading_torch_by_other_commands(module_path, torch_backend_path, first):
    srv = RedisServer(module_path)
    try:
        with RawClient(srv.port) as c:
            if first == "SCRIPTSTORE":
                assert_ok(c.execute("AI.SCRIPTSTORE", "sc", "CPU", "ENTRY_POINTS", 1, "argmax",
                                    "SOURCE", ARGMAX_SCRIPT))
            elif first == "SCRIPTSET":
                assert_ok(c.execute("AI.SCRIPTSET", "sc", "CPU", "SOURCE", ARGMAX_SCRIPT))
            else:
                assert_ok(c.execute("AI.MODELSET", "pt", "TORCH", "CPU", "BLOB", tm.add().blob))
            assert "already loaded" in assert_error_startswith(
                c.execute("AI.CONFIG", "LOADBACKEND", "TORCH", str(torch_backend_path)), LOAD_ERR)
            put(c, "x", np.array([[0.5, 2.0, 1.0]], np.float32))
            if first == "MODELSET":
                assert_ok(c.execute("AI.MODELEXECUTE", "pt", "INPUTS", 2, "x", "x", "OUTPUTS", 1, "y"))
                assert_same(get(c, "y"), np.array([[1, 4, 2]], np.float32))
            else:
                # A SCRIPTSET script has no entry points: its functions bind legacy-style.
                fn = "argmax" if first == "SCRIPTSTORE" else "argmax_legacy"
                assert_ok(c.execute("AI.SCRIPTRUN", "sc", fn, "INPUTS", "x", "OUTPUTS", "y"))
                assert_same(get(c, "y"), np.array([1], np.int64))
    finally:
        srv.stop()


def test_empty_backendspath(module_path, install_dir, all_backend_paths, tmp_path):
    empty = tmp_path / "no_backends_here"
    empty.mkdir()
    srv = RedisServer(module_path, ["BACKENDSPATH", str(empty)])
    try:
        with RawClient(srv.port) as c:
            cases = [
                ("TORCH", ("AI.MODELSTORE", "m", "TORCH", "CPU", "BLOB", b"x")),
                ("ONNX", ("AI.MODELSTORE", "m", "ONNX", "CPU", "BLOB", b"x")),
                ("TF", ("AI.MODELSTORE", "m", "TF", "CPU", "INPUTS", 1, "a", "OUTPUTS", 1, "b",
                        "BLOB", b"x")),
                ("TORCH", ("AI.MODELSET", "m", "TORCH", "CPU", "BLOB", b"x")),
                ("TORCH", ("AI.SCRIPTSTORE", "s", "CPU", "ENTRY_POINTS", 1, "argmax", "SOURCE",
                           ARGMAX_SCRIPT)),
                ("TORCH", ("AI.SCRIPTSET", "s", "CPU", "SOURCE", ARGMAX_SCRIPT)),
            ]
            for kind, cmd in cases:
                mark = LogMark(srv.logfile)
                assert_error(c.execute(*cmd), "ERR Could not load backend")
                tried = empty / f"redisai_{NAMES[kind]}" / f"redisai_{NAMES[kind]}.so"
                line = mark.wait_for_line(str(tried))
                assert kind in line, line
                assert c.execute("PING") == "PONG"
                assert c.execute("EXISTS", "m", "s") == 0
            # nothing was loaded: pointing BACKENDSPATH at the real tree makes the same stores work
            assert_ok(c.execute("AI.CONFIG", "BACKENDSPATH", str(install_dir / "backends")))
            store_all(c)
            run_all(c)
        assert srv.alive(), srv.log()
    finally:
        srv.stop()


def test_framework_settings(module_path, all_backend_paths):
    """THREADS_PER_QUEUE 2 and INTRA/INTER_OP_PARALLELISM 1 with all three backends: the
    settings are reported, every backend runs its models correctly from several clients
    at once."""
    args = ["THREADS_PER_QUEUE", "2", "INTRA_OP_PARALLELISM", "1", "INTER_OP_PARALLELISM", "1"]
    for kind in ("TORCH", "TF", "ONNX"):
        args += [kind, str(all_backend_paths[kind])]
    srv = RedisServer(module_path, args)
    try:
        with RawClient(srv.port) as c:
            info = c.execute("INFO", "MODULES")
            assert info_field(info, "ai_threads_per_queue") == "2", info
            assert info_field(info, "ai_intra_op_parallelism") == "1", info
            assert info_field(info, "ai_inter_op_parallelism") == "1", info
            store_all(c)
            run_all(c)
            x = tm.cnn_sample(batch=2, seed=3)
            [want_pt] = tm.cnn().run(x)
            [want_ox] = om.cnn().run(x)
        errors: list[str] = []

        def worker(i: int) -> None:
            try:
                with RawClient(srv.port) as cc:
                    put(cc, f"x{i}", x)
                    for _ in range(5):
                        for key, want in (("pt", want_pt), ("ox", want_ox)):
                            reply = cc.execute("AI.MODELEXECUTE", key, "INPUTS", 1, f"x{i}",
                                               "OUTPUTS", 1, f"y{i}")
                            if isinstance(reply, RespError):
                                errors.append(f"{key}: {reply}")
                                return
                            np.testing.assert_allclose(get(cc, f"y{i}"), want, rtol=1e-5, atol=1e-6)
            except Exception as e:  # noqa: BLE001
                errors.append(repr(e))

        threads = [threading.Thread(target=worker, args=(i,)) for i in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=60)
        assert not errors, errors
        assert srv.alive(), srv.log()
    finally:
        srv.stop()
