"""INTRA_OP_PARALLELISM sets XNNPACK's thread count for each compiled TFLITE model, as it sets
the other frameworks' (docs/configuration.md, docs/backends.md "TFLITE"): with N threads a
compiled instance starts N-1 pool threads in the server (the calling worker is the Nth); with
1 it starts none. The outputs stay bit-exact with tf.lite.Interpreter's either way."""
from __future__ import annotations

import os

import pytest

import tflite_models as tm
from helpers import assert_ok, info_field
from model_io import assert_exact, get, put
from redis_server import StartServer
from resp import RawClient


def _threads(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/task"))


@pytest.mark.inprocess_only("counts the threads LiteRT starts in the server's own process")
@pytest.mark.parametrize("intra", [1, 3])
def test_intra_op_parallelism_sets_xnnpack_threads(start_server: StartServer, tflite_backend_path,
                                                   intra):
    srv = start_server(["TFLITE", str(tflite_backend_path), "INTRA_OP_PARALLELISM", str(intra)])
    built = tm.cnn_float()
    with RawClient(srv.port) as c:
        before = _threads(srv.proc.pid)
        assert_ok(c.execute("AI.MODELSTORE", "m", "TFLITE", "CPU", "BLOB", built.blob))
        assert _threads(srv.proc.pid) - before == intra - 1
        assert info_field(c.execute("INFO", "MODULES"), "ai_TensorFlowLite_compiled_instances") == "1"
        x = built.sample(seed=3, batch=2)[0]
        put(c, "x", x)
        assert_ok(c.execute("AI.MODELEXECUTE", "m", "INPUTS", 1, "x", "OUTPUTS", 1, "y"))
        assert_exact(get(c, "y"), tm.reference(built, (x,))[0])
