"""maxmemory with noeviction (issue 10): every AI.* write gets Redis's OOM error once over
the limit, the server never crashes, and nothing is half-written.

What is checked, and the behaviour chosen:

* Execution outputs (MODELEXECUTE of TF, TORCH and ONNX, SCRIPTEXECUTE, DAG PERSIST) are
  copied once into Redis's allocator as they enter the keyspace, so `used_memory` grows
  with them and RSS does not grow past the limit by hundreds of MB.
* Redis itself refuses a deny-oom command before it runs when memory is over the limit.
  An execution admitted under the limit whose outputs would pass it when they are stored
  (another client filled memory while it ran, or the outputs are larger than the room
  left) gets the same OOM text from its reply callback and stores none of its outputs.
* A zero-filled AI.TENSORSET (no data) is refused with Redis's OOM text when it would
  pass maxmemory; without a limit (and before the room check) the 4 GiB cap applies to
  the bytes the tensor costs, STRING elements at 9 bytes each (NUL and offset).
* A refused AI.TENSORSET, MODELSTORE or SCRIPTSTORE leaves the old value.
"""
from __future__ import annotations

import os
from typing import Iterator

import numpy as np
import pytest

import scale_models as sm
from helpers import assert_error, assert_ok, info_field, wait_until
from redis_server import Connect, RedisServer, StartServer, backend_args
from resp import RawClient, RespError, Status

MiB = 1 << 20
LIMIT = 50 * MiB
OOM = "OOM command not allowed when used memory > 'maxmemory'."
TOO_LARGE = "ERR tensor too large to create without data"
X = np.full((1, MiB // 4), 1.5, dtype=np.float32)  # 1 MiB input, so 1 MiB outputs


@pytest.fixture(scope="module")
def srv(start_server: StartServer, all_backend_paths) -> RedisServer:
    return start_server(backend_args(all_backend_paths), extra=["--maxmemory-policy", "noeviction"])


def memory(c: RawClient, field: str) -> int:
    return int(info_field(c.execute("INFO", "memory"), field))


def set_limit(c: RawClient, limit: int) -> None:
    assert c.execute("CONFIG", "SET", "maxmemory", limit) == "OK"


@pytest.fixture
def c(srv: RedisServer, connect: Connect) -> Iterator[RawClient]:
    """Models m:TF, m:TORCH, m:ONNX (k = 2), script s (k = 3), 1 MiB input x; then 50mb."""
    client = connect(srv, flush=False)
    set_limit(client, 0)
    assert_ok(client.execute("FLUSHALL", "SYNC"))
    for kind in sm.KINDS:
        assert_ok(sm.store_model(client, f"m:{kind}", kind, 2))
    assert_ok(sm.store_script(client, "s", 3))
    # on a connection of its own: Redis keeps a client's 1 MiB query buffer after a 1 MiB
    # argument and trims it later, which would move used_memory under the tests' feet
    with RawClient(srv.port) as once:
        assert_ok(once.execute("AI.TENSORSET", "x", "FLOAT", *X.shape, "BLOB", X.tobytes()))
    set_limit(client, LIMIT)
    yield client
    set_limit(client, 0)
    assert_ok(client.execute("FLUSHALL", "SYNC"))


def fill_until_refused(c: RawClient, prefix: str = "fill") -> int:
    """Stores 1 MiB tensors until Redis refuses one; returns how many were stored. Then
    lowers the limit to 8 MiB under what is used: Redis trims idle clients' query buffers
    (1 MiB after a 1 MiB argument), which must not bring memory back under the limit."""
    for i in range(200):
        reply = c.execute("AI.TENSORSET", f"{prefix}:{i}", "FLOAT", *X.shape, "BLOB", X.tobytes())
        if isinstance(reply, RespError):
            assert_error(reply, OOM)
            set_limit(c, memory(c, "used_memory") - 8 * MiB)
            return i
    raise AssertionError("200 MiB of tensors stored under a 50mb limit")


# --------------------------------------------------------------------------------------
# Execution outputs count in used_memory and stop at the limit
# --------------------------------------------------------------------------------------

def execute(c: RawClient, how: str, out: str):
    if how in sm.KINDS:
        return c.execute("AI.MODELEXECUTE", f"m:{how}", "INPUTS", 1, "x", "OUTPUTS", 1, out)
    if how == "SCRIPT":
        return c.execute("AI.SCRIPTEXECUTE", "s", "scale", "INPUTS", 1, "x", "OUTPUTS", 1, out)
    return c.execute("AI.DAGEXECUTE", "LOAD", 1, "x", "PERSIST", 1, out,
                     "|>", "AI.MODELEXECUTE", "m:TORCH", "INPUTS", 1, "x", "OUTPUTS", 1, out)


def refused(reply) -> bool:
    """Redis's OOM before the command ran, or ours when the outputs were to be stored (a
    DAG then answers its ops, then the error as one extra element)."""
    if isinstance(reply, RespError):
        assert_error(reply, OOM)
        return True
    if isinstance(reply, list) and reply and isinstance(reply[-1], RespError):
        assert reply[:-1] == [Status("OK")] * (len(reply) - 1), reply
        assert_error(reply[-1], OOM)
        return True
    assert reply == "OK" or reply == [Status("OK")], reply
    return False


@pytest.mark.parametrize("how", [*sm.KINDS, "SCRIPT", "DAG"])
def test_600_outputs_of_1mib_are_counted_and_refused_over_the_limit(c, how):
    scale = {"TF": 2, "TORCH": 2, "ONNX": 2, "SCRIPT": 3, "DAG": 2}[how]
    assert not refused(execute(c, how, "warm"))  # first runs allocate framework state
    assert c.execute("DEL", "warm") == 1
    used0, rss0 = memory(c, "used_memory"), memory(c, "used_memory_rss")
    stored = []
    for i in range(600):
        if not refused(execute(c, how, f"out:{i}")):
            stored.append(i)
    used1, rss1 = memory(c, "used_memory"), memory(c, "used_memory_rss")
    n = len(stored)
    print(f"{how}: {n} of 600 stored; used_memory {used0 / MiB:.1f} -> {used1 / MiB:.1f} MiB, "
          f"RSS {rss0 / MiB:.1f} -> {rss1 / MiB:.1f} MiB")
    assert 10 <= n <= LIMIT // MiB, f"{n} outputs of 1 MiB stored under a {LIMIT // MiB} MiB limit"
    assert c.execute("EXISTS", *[f"out:{i}" for i in range(600)]) == n
    # every stored output is in used_memory (within what client buffers may give back
    # meanwhile), each at about its size (not an allocator class above it), and the limit
    # holds
    assert used1 - used0 >= n * MiB - 256 * 1024, (used0, used1, n)
    assert used1 - used0 < n * MiB * 1.05, (used0, used1, n)
    assert used1 <= LIMIT + MiB, used1
    # RSS: the outputs, plus what the frameworks keep; far from the 600 MiB of before.
    # Not under AddressSanitizer: its quarantine keeps freed blocks (256 MiB by default)
    # and its shadow memory grows with every touched page, so RSS says nothing there.
    if not os.environ.get("REDISAI_TEST_SERVER_EXE"):
        assert rss1 - rss0 < LIMIT + 100 * MiB, (rss0, rss1)
    got = np.frombuffer(c.execute("AI.TENSORGET", f"out:{stored[-1]}", "BLOB"), np.float32)
    np.testing.assert_array_equal(got, X.ravel() * scale)


@pytest.mark.inprocess_only("isolated outputs reach Redis's allocator on arrival")
def test_outputs_that_do_not_fit_are_refused_when_they_are_stored(c):
    """A DAG admitted under the limit whose three 1 MiB outputs do not fit in the room left
    (the outputs of a run in flight): OOM, and none of the three is written; one output
    that fits is then stored."""
    used = memory(c, "used_memory")
    set_limit(c, used + 5 * MiB // 2)
    dag = ["|>", "AI.MODELEXECUTE", "m:TORCH", "INPUTS", 1, "x", "OUTPUTS", 1, "o1",
           "|>", "AI.MODELEXECUTE", "m:ONNX", "INPUTS", 1, "o1", "OUTPUTS", 1, "o2",
           "|>", "AI.MODELEXECUTE", "m:TF", "INPUTS", 1, "o2", "OUTPUTS", 1, "o3"]
    reply = c.execute("AI.DAGEXECUTE", "LOAD", 1, "x", "PERSIST", 3, "o1", "o2", "o3", *dag)
    assert reply[:3] == [Status("OK")] * 3 and len(reply) == 4, reply
    assert_error(reply[3], OOM)
    assert c.execute("EXISTS", "o1", "o2", "o3") == 0
    reply = c.execute("AI.DAGEXECUTE", "LOAD", 1, "x", "PERSIST", 1, "o3", *dag)
    assert reply == [Status("OK")] * 3, reply
    got = np.frombuffer(c.execute("AI.TENSORGET", "o3", "BLOB"), np.float32)
    np.testing.assert_array_equal(got, X.ravel() * 8)
    # a single MODELEXECUTE whose output does not fit: OOM, the old value stays
    set_limit(c, memory(c, "used_memory") + MiB // 2)
    assert_error(c.execute("AI.MODELEXECUTE", "m:TF", "INPUTS", 1, "x", "OUTPUTS", 1, "o3"), OOM)
    np.testing.assert_array_equal(
        np.frombuffer(c.execute("AI.TENSORGET", "o3", "BLOB"), np.float32), X.ravel() * 8)


def test_executions_are_refused_over_the_limit_and_keep_old_outputs(c):
    for how in (*sm.KINDS, "SCRIPT", "DAG"):
        assert not refused(execute(c, how, f"old:{how}"))
    fill_until_refused(c)
    for how in (*sm.KINDS, "SCRIPT", "DAG"):
        assert_error(execute(c, how, f"old:{how}"), OOM)
        assert_error(execute(c, how, f"new:{how}"), OOM)
    assert c.execute("EXISTS", *[f"new:{h}" for h in (*sm.KINDS, "SCRIPT", "DAG")]) == 0
    got = np.frombuffer(c.execute("AI.TENSORGET", "old:SCRIPT", "BLOB"), np.float32)
    np.testing.assert_array_equal(got, X.ravel() * 3)
    # reads still work, and deleting makes room again
    assert c.execute("DEL", *[f"fill:{i}" for i in range(200)]) > 0
    set_limit(c, LIMIT)
    assert not refused(execute(c, "ONNX", "new:ONNX"))


# --------------------------------------------------------------------------------------
# TENSORSET, MODELSTORE, SCRIPTSTORE over the limit
# --------------------------------------------------------------------------------------

def test_tensorset_over_the_limit_keeps_the_old_value(c):
    assert_ok(c.execute("AI.TENSORSET", "t", "FLOAT", 2, "VALUES", 1, 2))
    stored = fill_until_refused(c)
    assert stored >= 10, stored
    assert_error(c.execute("AI.TENSORSET", "t", "FLOAT", 2, "VALUES", 3, 4), OOM)
    assert_error(c.execute("AI.TENSORSET", "t", "FLOAT", 2, "BLOB", b"\0" * 8), OOM)
    assert c.execute("AI.TENSORGET", "t", "VALUES") == [b"1", b"2"]
    assert_error(c.execute("AI.DAGEXECUTE", "PERSIST", 1, "t",
                           "|>", "AI.TENSORSET", "t", "FLOAT", 2, "VALUES", 5, 6), OOM)
    assert c.execute("AI.TENSORGET", "t", "VALUES") == [b"1", b"2"]


@pytest.mark.parametrize("kind", sm.KINDS)
def test_modelstore_over_the_limit_keeps_the_old_model(c, kind):
    fill_until_refused(c)
    assert_error(sm.store_model(c, f"m:{kind}", kind, 5), OOM)
    assert_error(sm.store_model(c, f"new:{kind}", kind, 5), OOM)
    assert c.execute("EXISTS", f"new:{kind}") == 0
    assert_error(sm.store_script(c, "s", 5), OOM)
    assert_error(sm.store_script(c, "new:s", 5), OOM)
    assert c.execute("EXISTS", "new:s") == 0
    c.execute("DEL", *[f"fill:{i}" for i in range(200)])
    set_limit(c, LIMIT)
    # the old versions are still there and run (k = 2, script k = 3)
    assert_ok(execute(c, kind, "o"))
    np.testing.assert_array_equal(
        np.frombuffer(c.execute("AI.TENSORGET", "o", "BLOB"), np.float32), X.ravel() * 2)
    assert_ok(execute(c, "SCRIPT", "o"))
    np.testing.assert_array_equal(
        np.frombuffer(c.execute("AI.TENSORGET", "o", "BLOB"), np.float32), X.ravel() * 3)


# --------------------------------------------------------------------------------------
# Zero-filled TENSORSET: the room maxmemory leaves, and the 4 GiB byte cap
# --------------------------------------------------------------------------------------

@pytest.mark.parametrize("shape", [("FLOAT", 1000, 1000, 1000), ("INT8", 4294967296),
                                   ("FLOAT", 64 * MiB // 4), ("STRING", 8_000_000)],
                         ids=["float-1e9", "int8-4GiB", "float-64MiB", "string-8e6"])
def test_zero_fill_past_maxmemory_is_refused(c, shape):
    """STRING 8e6: 8 MB if elements were counted as bytes (it would fit), 72 MB as it costs
    (a NUL and an 8-byte offset per element)."""
    used = memory(c, "used_memory")
    assert_error(c.execute("AI.TENSORSET", "z", *shape), OOM)
    assert_error(c.execute("AI.DAGEXECUTE", "PERSIST", 1, "z", "|>", "AI.TENSORSET", "z", *shape),
                 OOM)
    assert c.execute("EXISTS", "z") == 0
    assert memory(c, "used_memory") < used + MiB


def test_zero_fill_that_fits_is_stored(c):
    assert_ok(c.execute("AI.TENSORSET", "z", "INT8", 8_000_000))
    assert c.execute("AI.TENSORGET", "z", "META") == [b"dtype", b"INT8", b"shape", [8_000_000]]
    assert_ok(c.execute("AI.TENSORSET", "zs", "STRING", 1_000_000))
    assert c.execute("AI.TENSORGET", "zs", "META") == [b"dtype", b"STRING", b"shape", [1_000_000]]


def test_zero_fill_respects_the_room_left(c):
    """With 4 MiB left: 3 MiB of INT8 fits, 5 MiB does not, and 1e6 STRING elements (9 MB
    as they cost, 1 MB if counted as elements) do not."""
    set_limit(c, memory(c, "used_memory") + 4 * MiB)
    assert_error(c.execute("AI.TENSORSET", "z", "INT8", 5 * MiB), OOM)
    assert_error(c.execute("AI.TENSORSET", "z", "STRING", 1_000_000), OOM)
    assert c.execute("EXISTS", "z") == 0
    assert_ok(c.execute("AI.TENSORSET", "z", "INT8", 3 * MiB))


@pytest.mark.parametrize("shape", [("STRING", 4294967296), ("STRING", (4 << 30) // 9 + 1),
                                   ("INT8", 4294967297), ("DOUBLE", 1 << 29, 2)],
                         ids=["string-4Gi", "string-just-over", "int8-over", "double-over"])
def test_zero_fill_cap_counts_bytes_without_maxmemory(c, shape):
    set_limit(c, 0)
    assert_error(c.execute("AI.TENSORSET", "z", *shape), TOO_LARGE)
    assert c.execute("EXISTS", "z") == 0


def test_zero_fill_cap_comes_before_the_room_check(c):
    """Under a limit, a request past the byte cap gets the cap's error: it is too large
    whatever the limit."""
    assert_error(c.execute("AI.TENSORSET", "z", "STRING", 4294967296), TOO_LARGE)


def test_a_replica_under_a_smaller_limit_applies_what_its_master_stored(c, srv, module_path):
    """The master accepts a 20 MiB zero fill under its limit and replicates the command as
    it came; a replica with 10mb must apply it (as Redis's replicas ignore maxmemory), not
    refuse it and diverge."""
    assert c.execute("CONFIG", "SET", "repl-diskless-sync-delay", 0) == "OK"
    replica = RedisServer(module_path, extra=["--maxmemory", "10mb",
                                              "--replicaof", "127.0.0.1", str(srv.port)])
    try:
        with RawClient(replica.port) as rc:
            assert wait_until(lambda: b"master_link_status:up" in rc.execute("INFO", "replication"),
                              timeout=20.0), rc.execute("INFO", "replication")
            assert_ok(c.execute("AI.TENSORSET", "z", "INT8", 20 * MiB))
            assert_ok(c.execute("AI.TENSORSET", "zs", "STRING", 100_000))
            # a DAG's TENSORSET ... BLOB keeps the client's string; PERSIST replicates it
            blob = np.arange(4, dtype=np.float32).tobytes()
            assert c.execute("AI.DAGEXECUTE", "PERSIST", 1, "hb",
                             "|>", "AI.TENSORSET", "hb", "FLOAT", 4, "BLOB", blob) == ["OK"]
            assert c.execute("WAIT", 1, 5000) == 1
            assert rc.execute("AI.TENSORGET", "hb", "BLOB") == blob
            assert rc.execute("AI.TENSORGET", "z", "META") == [b"dtype", b"INT8", b"shape",
                                                               [20 * MiB]]
            assert rc.execute("AI.TENSORGET", "zs", "META") == [b"dtype", b"STRING", b"shape",
                                                                [100_000]]
            assert memory(rc, "used_memory") > 20 * MiB
        assert replica.alive(), replica.log()
    finally:
        replica.stop()
        c.execute("CONFIG", "SET", "repl-diskless-sync-delay", 5)


def test_a_stored_view_holds_only_its_own_bytes(c):
    """A TorchScript output that is a view of its input (a slice) shares the input's
    memory inside the framework; stored, it is copied, so deleting the 4 MiB input frees
    it and the output costs only its own 1 MiB row."""
    set_limit(c, 0)
    x = np.arange(4 * MiB // 4, dtype=np.float32).reshape(4, MiB // 4)
    assert_ok(c.execute("AI.TENSORSET", "big", "FLOAT", *x.shape, "BLOB", x.tobytes()))
    src = ("def first_row(tensors: List[Tensor], keys: List[str], args: List[str]):\n"
           "    return tensors[0][0:1]\n")
    assert_ok(c.execute("AI.SCRIPTSTORE", "rows", "CPU", "ENTRY_POINTS", 1, "first_row",
                        "SOURCE", src))
    assert_ok(c.execute("AI.SCRIPTEXECUTE", "rows", "first_row", "INPUTS", 1, "big",
                        "OUTPUTS", 1, "row"))
    before = memory(c, "used_memory")
    assert c.execute("DEL", "big") == 1
    assert memory(c, "used_memory") < before - 3 * MiB
    assert MiB <= c.execute("MEMORY", "USAGE", "row") < 2 * MiB
    np.testing.assert_array_equal(
        np.frombuffer(c.execute("AI.TENSORGET", "row", "BLOB"), np.float32), x[0])


def test_an_evicting_policy_makes_room_instead(c):
    """Under allkeys-lru, Redis evicts to make room, so a zero fill larger than the room
    left (but not than maxmemory) is stored; one larger than maxmemory is still refused.
    The policy is read again after each CONFIG SET."""
    set_limit(c, memory(c, "used_memory") + 4 * MiB)
    assert_error(c.execute("AI.TENSORSET", "z", "INT8", 5 * MiB), OOM)
    assert c.execute("CONFIG", "SET", "maxmemory-policy", "allkeys-lru") == "OK"
    try:
        assert_ok(c.execute("AI.TENSORSET", "z", "INT8", 5 * MiB))
        assert_error(c.execute("AI.TENSORSET", "z2", "INT8", 64 * MiB), OOM)
    finally:
        assert c.execute("CONFIG", "SET", "maxmemory-policy", "noeviction") == "OK"
    c.execute("DEL", "z")  # (evicting z2's way may have removed it already)
    set_limit(c, memory(c, "used_memory") + 4 * MiB)
    assert_error(c.execute("AI.TENSORSET", "z", "INT8", 5 * MiB), OOM)
