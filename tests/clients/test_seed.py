"""The seed example, verbatim, in both loading styles: the backend loaded with
AI.CONFIG LOADBACKEND, and the backend given at load time (absolute paths, and the
issue's literal command line with paths relative to the repository root)."""
from __future__ import annotations

import os

import redis

import tf_graphs
from paths import ROOT
from redis_server import RedisServer

EXPECTED = [4.0, 9.0, 4.0, 9.0]


def numbers(reply: list) -> list[float]:
    """The pinned redis-py (8.x) speaks RESP3, where FLOAT values are doubles; over RESP2
    they are bulk strings (b'4'). Both mean 4, 9, 4, 9; check the element types too."""
    assert all(type(v) is float for v in reply) or all(type(v) is bytes for v in reply), reply
    return [float(v) for v in reply]


def _seed_example(PORT: int, install: str, load_backend: bool) -> list:
    model_pb = tf_graphs.mul_graph()
    r = redis.Redis(host='localhost', port=PORT)
    if load_backend:
        r.execute_command('AI.CONFIG', 'LOADBACKEND', 'TF', f'{install}/backends/redisai_tensorflow/redisai_tensorflow.so')
    r.execute_command('AI.MODELSET', 'm', 'TF', 'CPU', 'INPUTS', 'a', 'b', 'OUTPUTS', 'mul', model_pb)
    r.execute_command('AI.TENSORSET', 'a', 'FLOAT', 2, 2, 'VALUES', 2, 3, 2, 3)
    r.execute_command('AI.TENSORSET', 'b', 'FLOAT', 2, 2, 'VALUES', 2, 3, 2, 3)
    r.execute_command('AI.MODELRUN', 'm', 'INPUTS', 'a', 'b', 'OUTPUTS', 'c')
    return numbers(r.execute_command('AI.TENSORGET', 'c', 'VALUES'))   # -> 4, 9, 4, 9


def test_seed_example_with_loadbackend(server, install_dir):
    assert _seed_example(server.port, str(install_dir), load_backend=True) == EXPECTED
    assert server.alive()


def test_seed_example_backend_at_load_time(tf_server, install_dir):
    assert _seed_example(tf_server.port, str(install_dir), load_backend=False) == EXPECTED


def test_seed_example_literal_command_line(install_dir):
    """`redis-server --loadmodule install/redisai-X/redisai.so TF
    install/redisai-X/backends/redisai_tensorflow/redisai_tensorflow.so`, run from the
    repository root (the issue's wording)."""
    rel = os.path.relpath(install_dir, ROOT)
    # redis-server chdirs to --dir before it loads modules: make that the repository root
    # (the later --dir wins; nothing is saved: --save "" and no DEBUG RELOAD here).
    srv = RedisServer(f"{rel}/redisai.so",
                      ["TF", f"{rel}/backends/redisai_tensorflow/redisai_tensorflow.so"],
                      extra=["--dir", str(ROOT)], cwd=ROOT)
    try:
        assert _seed_example(srv.port, str(install_dir), load_backend=False) == EXPECTED
    finally:
        srv.stop()


def test_seed_example_preferred_replacements(tf_server):
    """docs/migration.md, "The seed-era commands": MODELSTORE / MODELEXECUTE, the current forms."""
    r = tf_server.client()
    r.flushall()
    assert r.execute_command('AI.MODELSTORE', 'm', 'TF', 'CPU', 'INPUTS', 2, 'a', 'b', 'OUTPUTS', 1,
                             'mul', 'BLOB', tf_graphs.mul_graph()) in (b"OK", True)
    r.execute_command('AI.TENSORSET', 'a', 'FLOAT', 2, 2, 'VALUES', 2, 3, 2, 3)
    r.execute_command('AI.TENSORSET', 'b', 'FLOAT', 2, 2, 'VALUES', 2, 3, 2, 3)
    assert r.execute_command('AI.MODELEXECUTE', 'm', 'INPUTS', 2, 'a', 'b', 'OUTPUTS', 1, 'c') in (b"OK", True)
    assert numbers(r.execute_command('AI.TENSORGET', 'c', 'VALUES')) == EXPECTED
    assert r.execute_command('AI.TENSORGET', 'c', 'META') == [b"dtype", b"FLOAT", b"shape", [2, 2]]
    r2 = tf_server.client(protocol=2)
    assert r2.execute_command('AI.TENSORGET', 'c', 'VALUES') == [b"4", b"9", b"4", b"9"]
