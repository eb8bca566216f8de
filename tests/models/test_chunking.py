"""Chunked model blobs (docs/commands.md, AI.MODELGET; docs/persistence.md) for every backend:
MODEL_CHUNK_SIZE set at load time and by AI.CONFIG; MODELSTORE / MODELSET with a multi-chunk
BLOB c1 c2 c3 (the chunks are concatenated); MODELGET returns the blob in chunks of
MODEL_CHUNK_SIZE, k = L // C + 1 of them, the last one L % C bytes, so an exact multiple ends
with an EMPTY chunk (QUIRK); one chunk is sent as a plain bulk string. RDB (DEBUG RELOAD) uses
the same chunking.

One server for the module with all three backends and MODEL_CHUNK_SIZE 100 at load time.
"""
from __future__ import annotations

from typing import Iterator

import numpy as np
import pytest

import onnx_models as om
import tf_graphs
import torch_models as tm
from helpers import DEFAULT_CHUNK_SIZE, assert_error, assert_ok
from model_io import assert_same, get, put
from redis_server import Connect, RedisServer, StartServer, backend_args
from resp import RawClient

LOAD_CHUNK = 100


@pytest.fixture(scope="module")
def srv(start_server: StartServer, all_backend_paths) -> RedisServer:
    return start_server(["MODEL_CHUNK_SIZE", str(LOAD_CHUNK), *backend_args(all_backend_paths)])


@pytest.fixture
def c(srv: RedisServer, connect: Connect) -> Iterator[RawClient]:
    client = connect(srv)
    assert_ok(client.execute("AI.CONFIG", "MODEL_CHUNK_SIZE", LOAD_CHUNK))
    yield client
    assert_ok(client.execute("AI.CONFIG", "MODEL_CHUNK_SIZE", LOAD_CHUNK))


def tf_blob() -> bytes:
    return tf_graphs.mul_graph()


BACKENDS = {
    "TF": (tf_blob, ["INPUTS", 2, "a", "b", "OUTPUTS", 1, "mul"]),
    "TORCH": (lambda: tm.linear().blob, []),
    "ONNX": (lambda: om.cnn().blob, []),
}


def expected_chunks(blob: bytes, size: int) -> bytes | list[bytes]:
    """docs/commands.md, AI.MODELGET: k = L // C + 1 chunks; k == 1 is a bulk string."""
    k = len(blob) // size + 1
    if k == 1:
        return blob
    return [blob[i * size:(i + 1) * size] for i in range(k)]


def three_chunks(blob: bytes) -> list[bytes]:
    a, b = len(blob) // 5, len(blob) // 2
    return [blob[:a], blob[a:b], blob[b:]]


def check_runs(c: RawClient, kind: str, key: str) -> None:
    if kind == "TF":
        x = np.array([[1, 2], [3, 4]], np.float32)
        put(c, "a", x)
        put(c, "b", x)
        assert_ok(c.execute("AI.MODELEXECUTE", key, "INPUTS", 2, "a", "b", "OUTPUTS", 1, "o"))
        assert_same(get(c, "o"), x * x)
    elif kind == "TORCH":
        built = tm.linear()
        put(c, "x", built.sample[0])
        assert_ok(c.execute("AI.MODELEXECUTE", key, "INPUTS", 1, "x", "OUTPUTS", 1, "o"))
        assert_same(get(c, "o"), built.run(*built.sample)[0])
    else:
        built = om.cnn()
        put(c, "x", built.sample[0])
        assert_ok(c.execute("AI.MODELEXECUTE", key, "INPUTS", 1, "x", "OUTPUTS", 1, "o"))
        assert_same(get(c, "o"), built.run(*built.sample)[0])


def test_chunk_size_from_load_argument(c):
    assert c.execute("AI.CONFIG", "GET", "MODEL_CHUNK_SIZE") == LOAD_CHUNK


def test_chunk_size_by_config(c):
    assert_ok(c.execute("AI.CONFIG", "MODEL_CHUNK_SIZE", 4096))
    assert c.execute("AI.CONFIG", "GET", "MODEL_CHUNK_SIZE") == 4096
    assert_error(c.execute("AI.CONFIG", "MODEL_CHUNK_SIZE", 0), "ERR MODEL_CHUNK_SIZE: invalid chunk size")
    assert_error(c.execute("AI.CONFIG", "MODEL_CHUNK_SIZE"), "ERR MODEL_CHUNK_SIZE: missing chunk size")
    assert c.execute("AI.CONFIG", "GET", "MODEL_CHUNK_SIZE") == 4096


@pytest.mark.parametrize("kind", list(BACKENDS))
def test_multi_chunk_modelstore(c, kind):
    make, io_args = BACKENDS[kind]
    blob = make()
    assert_ok(c.execute("AI.MODELSTORE", "m", kind, "CPU", *io_args, "BLOB", *three_chunks(blob)))
    assert_ok(c.execute("AI.CONFIG", "MODEL_CHUNK_SIZE", DEFAULT_CHUNK_SIZE))
    assert c.execute("AI.MODELGET", "m", "BLOB") == blob
    check_runs(c, kind, "m")
    # many small chunks, and chunks of one byte at both ends
    chunks = [blob[:1]] + [blob[i:min(i + 7, len(blob) - 1)] for i in range(1, len(blob) - 1, 7)] + [blob[-1:]]
    assert_ok(c.execute("AI.MODELSTORE", "m2", kind, "CPU", *io_args, "BLOB", *chunks))
    assert c.execute("AI.MODELGET", "m2", "BLOB") == blob
    check_runs(c, kind, "m2")


@pytest.mark.parametrize("kind", list(BACKENDS))
def test_multi_chunk_modelset(c, kind):
    make, io_args = BACKENDS[kind]
    blob = make()
    set_io = ["INPUTS", "a", "b", "OUTPUTS", "mul"] if kind == "TF" else []
    assert_ok(c.execute("AI.MODELSET", "m", kind, "CPU", *set_io, "BLOB", *three_chunks(blob)))
    assert_ok(c.execute("AI.CONFIG", "MODEL_CHUNK_SIZE", DEFAULT_CHUNK_SIZE))
    assert c.execute("AI.MODELGET", "m", "BLOB") == blob
    check_runs(c, kind, "m")


@pytest.mark.parametrize("kind", list(BACKENDS))
def test_modelget_chunks(c, kind):
    make, io_args = BACKENDS[kind]
    blob = make()
    L = len(blob)
    assert_ok(c.execute("AI.MODELSTORE", "m", kind, "CPU", *io_args, "BLOB", blob))
    # chunk size from the load argument
    want = expected_chunks(blob, LOAD_CHUNK)
    assert isinstance(want, list) and len(want) == L // LOAD_CHUNK + 1
    assert c.execute("AI.MODELGET", "m", "BLOB") == want
    assert c.execute("AI.MODELGET", "m")[-1] == want
    assert c.execute("AI.MODELGET", "m", "META", "BLOB")[-2:] == [b"blob", want]
    assert b"".join(want) == blob
    for size in (1000, 4096, L - 1, L // 3):
        assert_ok(c.execute("AI.CONFIG", "MODEL_CHUNK_SIZE", size))
        got = c.execute("AI.MODELGET", "m", "BLOB")
        assert got == expected_chunks(blob, size), size
    # QUIRK: an exact multiple of the chunk size ends with an empty chunk
    assert_ok(c.execute("AI.CONFIG", "MODEL_CHUNK_SIZE", L))
    assert c.execute("AI.MODELGET", "m", "BLOB") == [blob, b""]
    divisor = next((d for d in (2, 3, 4, 5, 7, 11, 13) if L % d == 0), None)
    if divisor is not None:
        size = L // divisor
        assert_ok(c.execute("AI.CONFIG", "MODEL_CHUNK_SIZE", size))
        got = c.execute("AI.MODELGET", "m", "BLOB")
        assert len(got) == divisor + 1 and got[-1] == b"" and b"".join(got) == blob, got
    # one byte more than the blob: a single bulk string
    assert_ok(c.execute("AI.CONFIG", "MODEL_CHUNK_SIZE", L + 1))
    assert c.execute("AI.MODELGET", "m", "BLOB") == blob
    assert c.execute("AI.MODELGET", "m")[-1] == blob
    # the chunks are only a reply format: the model still runs
    check_runs(c, kind, "m")


def test_exact_multiple_store_and_get_round_trip(c):
    """A blob stored as exact C-sized chunks and read back at that C: L % C == 0."""
    blob = om.add().blob + b""  # ONNX add: a small blob
    size = next(d for d in range(2, len(blob)) if len(blob) % d == 0)
    chunks = [blob[i:i + size] for i in range(0, len(blob), size)]
    assert_ok(c.execute("AI.MODELSTORE", "m", "ONNX", "CPU", "BLOB", *chunks))
    assert_ok(c.execute("AI.CONFIG", "MODEL_CHUNK_SIZE", size))
    assert c.execute("AI.MODELGET", "m", "BLOB") == chunks + [b""]
    a, b = om.add().sample
    put(c, "a", a)
    put(c, "b", b)
    assert_ok(c.execute("AI.MODELEXECUTE", "m", "INPUTS", 2, "a", "b", "OUTPUTS", 1, "o"))
    assert_same(get(c, "o"), a + b)


def test_debug_reload_with_chunked_blobs(c):
    """RDB writes chunks of MODEL_CHUNK_SIZE (including the empty one of an exact
    multiple); every model loads back byte for byte and runs."""
    blobs = {kind: make() for kind, (make, _) in BACKENDS.items()}
    for kind, (make, io_args) in BACKENDS.items():
        assert_ok(c.execute("AI.MODELSTORE", kind.lower(), kind, "CPU", *io_args, "BLOB", blobs[kind]))
    assert_ok(c.execute("AI.CONFIG", "MODEL_CHUNK_SIZE", len(blobs["TORCH"])))  # exact multiple for one
    before = {k.lower(): c.execute("AI.MODELGET", k.lower(), "META") for k in BACKENDS}
    assert_ok(c.execute("DEBUG", "RELOAD"))
    assert_ok(c.execute("AI.CONFIG", "MODEL_CHUNK_SIZE", DEFAULT_CHUNK_SIZE))
    for kind in BACKENDS:
        key = kind.lower()
        assert c.execute("AI.MODELGET", key, "META") == before[key]
        assert c.execute("AI.MODELGET", key, "BLOB") == blobs[kind]
        check_runs(c, kind, key)
