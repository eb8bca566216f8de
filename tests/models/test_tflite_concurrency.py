"""Many clients run one TFLITE model at once (docs/commands.md, "Models"; LiteRT returns
wrong outputs, silently, when one compiled model runs on two threads at once: the backend
must never let it). 16 clients, each on its own connection, run the float CNN and the int8
CNN 200 times each with distinct random inputs; every output is compared bit for bit with
tf.lite.Interpreter's for the same input, computed before the clients start (an interpreter
is not thread-safe). The CPU queue has 4 workers, so the module runs the model on several
threads at once.

Twice: with the backend in the server ("in-process") and in a backend host process
("isolated", module argument ISOLATE TFLITE). Under `pytest --isolate all` both servers
are isolated.
"""
from __future__ import annotations


import pytest

import tflite_models as tm
from helpers import assert_ok, in_threads
from model_io import ai_info, assert_exact, get, put, token
from redis_server import RedisServer, StartServer, isolate_args
from resp import RawClient, RespError

CLIENTS = 16
RUNS = 200
WORKERS = 4  # CPU queue workers: runs of the one model on up to 4 threads at once


@pytest.fixture(scope="module", params=["in-process", "isolated"])
def srv(request: pytest.FixtureRequest, start_server: StartServer,
        tflite_backend_path) -> RedisServer:
    args = ["TFLITE", str(tflite_backend_path), "THREADS_PER_QUEUE", str(WORKERS)]
    isolated = request.param == "isolated" or "TFLITE" in isolate_args()
    if request.param == "isolated" and "TFLITE" not in isolate_args():
        args = ["ISOLATE", "TFLITE", *args]
    srv = start_server(args)
    with RawClient(srv.port) as c:
        hosts = [line for line in c.execute("INFO", "MODULES").decode().splitlines()
                 if line.startswith("ai_host_") and "kind=TFLITE," in line]
    assert len(hosts) == (1 if isolated else 0), hosts
    return srv


@pytest.mark.parametrize("name", ["cnn_float", "cnn_int8"])
def test_sixteen_clients_get_exact_outputs(srv, name):
    built = tm.MODELS[name]()
    with RawClient(srv.port) as c:
        assert_ok(c.execute("FLUSHALL", "SYNC"))
        assert_ok(c.execute("AI.MODELSTORE", "m", "TFLITE", "CPU", "BLOB", built.blob))
    seeds = [[1000 + k * RUNS + i for i in range(RUNS)] for k in range(CLIENTS)]
    inputs = [[built.sample(s)[0] for s in row] for row in seeds]
    wants = [[tm.reference(built, (x,))[0] for x in row] for row in inputs]
    # Distinct inputs give distinct outputs often enough for a mix-up to show.
    distinct = {w.tobytes() for row in wants for w in row}
    assert len(distinct) > CLIENTS * RUNS // 2, len(distinct)
    wrong: list[str] = []

    def client(k: int) -> None:
        x_key, y_key = f"c{k}:x", f"c{k}:y"
        with RawClient(srv.port) as ck:
            for i, x in enumerate(inputs[k]):
                # One round trip per run: TENSORSET, MODELEXECUTE and TENSORGET pipelined.
                ck.send("AI.TENSORSET", x_key, token(x.dtype), *x.shape, "BLOB", x.tobytes())
                ck.send("AI.MODELEXECUTE", "m", "INPUTS", 1, x_key, "OUTPUTS", 1, y_key)
                ck.send("AI.TENSORGET", y_key, "BLOB")
                replies = [ck.read() for _ in range(3)]
                assert not any(isinstance(r, RespError) for r in replies), (k, i, replies)
                want = wants[k][i]
                if replies[2] != want.tobytes():
                    wrong.append(f"client {k} run {i}")

    in_threads(CLIENTS, client, timeout=300)
    assert not wrong, f"{len(wrong)} of {CLIENTS * RUNS} outputs differ: {wrong[:10]}"
    with RawClient(srv.port) as c:
        s = ai_info(c, "m")
        assert (s["calls"], s["errors"]) == (CLIENTS * RUNS, 0), s
        # And a last one through the helpers, dtype and shape included.
        x = inputs[0][0]
        put(c, "x", x)
        assert_ok(c.execute("AI.MODELEXECUTE", "m", "INPUTS", 1, "x", "OUTPUTS", 1, "y"))
        assert_exact(get(c, "y"), wants[0][0])
    assert srv.alive(), srv.log()
