"""Stores and runs a model once per shard with the PyPI `redisai` client (1.3.0), unchanged.

Run by tests/cluster/test_cluster_change.py with .venv-client/bin/python (redisai pins
redis<5). The client has no cluster support: like SmartRedis, it connects to each shard's
master and names its keys `name{tag}` with the shard's hash tag. Not a pytest module: it
asserts as it goes, prints one line per shard, then `ALL OK`.

    python cluster_client_check.py MODEL_ONNX PORT:TAG [PORT:TAG ...]

MODEL_ONNX adds its inputs `a` and `b` (tests/support/onnx_models.add()).
"""
from __future__ import annotations

import pathlib
import sys

import numpy as np
import redis
import redisai


def main() -> int:
    blob = pathlib.Path(sys.argv[1]).read_bytes()
    shards = [(int(p), t) for p, t in (arg.split(":") for arg in sys.argv[2:])]
    for i, (port, tag) in enumerate(shards):
        con = redisai.Client(host="127.0.0.1", port=port)
        assert con.modelstore(f"add{{{tag}}}", "ONNX", "CPU", blob) == "OK"
        a = np.full((2, 3), i + 1, dtype=np.float32)
        b = np.arange(6, dtype=np.float32).reshape(2, 3)
        assert con.tensorset(f"a{{{tag}}}", a) == "OK"
        assert con.tensorset(f"b{{{tag}}}", b) == "OK"
        assert con.modelexecute(f"add{{{tag}}}", [f"a{{{tag}}}", f"b{{{tag}}}"],
                                [f"c{{{tag}}}"]) == "OK"
        got = con.tensorget(f"c{{{tag}}}")
        assert np.array_equal(got, a + b), got
        # another shard's key on this master: the server redirects, the client reports it
        other_port, other_tag = shards[(i + 1) % len(shards)]
        if other_port != port:
            try:
                con.tensorget(f"a{{{other_tag}}}")
            except redis.exceptions.ResponseError as e:
                assert str(e).startswith("MOVED "), e
            else:
                raise AssertionError("a key of another shard was served here")
        print(f"ok: shard on port {port}, tag {tag}", flush=True)
    print("ALL OK", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
