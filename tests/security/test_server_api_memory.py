"""No memory lost through the server's module API (issue 35, item 5).

Every request path that calls into the server's module API on its own is run many times,
as a client with an ACL user restricted to some keys (so a script's `redis.execute` takes the
checked path: module/engine/host_api.c `checkPermissions`) and as `default`; after
`FLUSHALL SYNC` the server's `used_memory` must be back within a few KB of where it was.

The reason: `RedisModule_GetCommandKeys` never frees its key-position buffer when a command has
more keys than its buffer on the stack holds (redis/redis#14208, Valkey #3087): on Redis 7.0
a script's `redis.execute('MGET', <1,000 keys>)` lost about 8 KB per call, on 7.4 a 7-key MGET
56 bytes. Nothing a client can do (FLUSHALL, MEMORY PURGE) gives it back.

Each path is warmed up first (the arity cache, Redis's pool of temporary clients, the ACL
LOG's merged entries, the allocator's size classes), then measured; run with -s to see the
bytes per call. On Redis 6.2 (no module ACL API) the module runs with UNSAFE_NO_ACL_CHECKS so
that scripts may call at all.
"""
from __future__ import annotations

import pathlib
import time
from typing import Any, Callable, Iterator

import numpy as np
import pytest

import torch_models as tm
from helpers import assert_ok, info_field
from redis_server import RedisServer
from resp import RawClient, RespError

SCRIPT = '''
def repeat(tensors: List[Tensor], keys: List[str], args: List[str]):
    n = int(args[0])
    for i in range(n):
        redis.execute(args[1], args[2:])
    return torch.tensor([n])

def refused(tensors: List[Tensor], keys: List[str], args: List[str]):
    redis.execute(args[0], args[1:])
    return torch.tensor([1])

def model(tensors: List[Tensor], keys: List[str], args: List[str]):
    out = redisAI.model_execute(args[0], [tensors[0], tensors[1]], 1)
    return out[0]

def add(tensors: List[Tensor], keys: List[str], args: List[str]):
    return tensors[0] + tensors[1]
'''
ENTRY_POINTS = ("repeat", "refused", "model", "add")
APP = ("apppw", "+@all -@admin -@dangerous ~k:*")
A = np.array([[2, 3], [2, 3]], np.float32)
B = np.array([[1, 1], [1, 1]], np.float32)

WARMUP = 20
RUNS = 200
# Calls of redis.execute per script run.
CALLS = 10
# used_memory moves by a few hundred bytes between two INFOs with nothing lost (the
# replies' buffers, the allocator's bins); a lost key-position buffer costs at least 56
# bytes per call, 112 KB over the 2,000 calls of a run of the 7-key MGET.
TOLERANCE = 8 * 1024
POOL_FILL = 16
# Redis's cron runs 10 times a second (hz 10).
POOL_SETTLE = 0.5


@pytest.fixture(scope="module")
def srv(start_server: Callable[..., RedisServer], torch_backend_path: pathlib.Path,
        server_facts: Any) -> RedisServer:
    args = ["TORCH", str(torch_backend_path)]
    if not server_facts.checks_acl:
        args += ["UNSAFE_NO_ACL_CHECKS", "yes"]
    srv = start_server(args)
    with RawClient(srv.port) as admin:
        pw, rules = APP
        assert_ok(admin.execute("ACL", "SETUSER", "app", "on", f">{pw}", *rules.split()))
        setup_keys(admin)
        fill_temp_client_pool(admin)
        assert_ok(admin.execute("FLUSHALL", "SYNC"))
    return srv


@pytest.fixture
def admin(srv: RedisServer) -> Iterator[RawClient]:
    c = RawClient(srv.port)
    yield c
    c.close()
    assert srv.alive(), srv.log()


@pytest.fixture(params=["app", "default"])
def client(request: pytest.FixtureRequest, srv: RedisServer) -> Iterator[RawClient]:
    c = RawClient(srv.port)
    if request.param == "app":
        assert_ok(c.execute("AUTH", "app", APP[0]))
    yield c
    c.close()


def used_memory(admin: RawClient) -> int:
    return int(info_field(admin.execute("INFO", "memory"), "used_memory"))


def setup_keys(admin: RawClient) -> None:
    """The script, a model and its inputs, under k:* where app may go; `secret` where it
    may not."""
    assert_ok(admin.execute("AI.SCRIPTSTORE", "k:s", "CPU", "ENTRY_POINTS", len(ENTRY_POINTS),
                            *ENTRY_POINTS, "SOURCE", SCRIPT))
    assert_ok(admin.execute("AI.MODELSTORE", "k:m", "TORCH", "CPU", "BLOB", tm.add().blob))
    for key, value in (("k:a", A), ("k:b", B)):
        assert_ok(admin.execute("AI.TENSORSET", key, "FLOAT", *value.shape,
                                "BLOB", value.tobytes()))
    assert_ok(admin.execute("SET", "secret", "x"))


def fill_temp_client_pool(admin: RawClient) -> None:
    """Fills Redis's pool of temporary clients for modules (a blocked client's reply, a
    thread-safe context, RedisModule_Call): POOL_FILL runs blocked at once take that many,
    and the server's cron frees the idle ones above 8 only a few at a time. A run needs at
    most 3 at once, so the pool no longer grows while this file measures (it grew by one
    client, 20-30 KB, the first time a run needed one more); it may still shrink, and
    used_memory then falls."""
    port = admin.sock.getpeername()[1]
    clients = [RawClient(port) for _ in range(POOL_FILL)]
    for c in clients:
        c.send("AI.SCRIPTEXECUTE", "k:s", "add", "INPUTS", 2, "k:a", "k:b", "OUTPUTS", 1, "k:o")
    for c in clients:
        assert_ok(c.read())
        c.close()
    assert admin.execute("PING") == "PONG"
    time.sleep(POOL_SETTLE)


def lost_bytes(admin: RawClient, run: Callable[[], None], runs: int = RUNS) -> int:
    """used_memory after `runs` runs of `run` and FLUSHALL SYNC, less before them (each
    measured after FLUSHALL SYNC and the keys `run` needs)."""
    def settled() -> int:
        assert_ok(admin.execute("FLUSHALL", "SYNC"))
        return used_memory(admin)

    setup_keys(admin)
    for _ in range(WARMUP):
        run()
    before = settled()
    setup_keys(admin)
    for _ in range(runs):
        run()
    return settled() - before


def run_repeat(c: RawClient, *command: Any) -> Callable[[], None]:
    def run() -> None:
        reply = c.execute("AI.SCRIPTEXECUTE", "k:s", "repeat", "KEYS", 1, "k:o",
                          "ARGS", 1 + len(command), CALLS, *command,
                          "OUTPUTS", 1, "k:o")
        assert_ok(reply)
    return run


MGET_1000 = ("MGET", *(f"k:{i}" for i in range(1000)))
MGET_7 = ("MGET", *(f"k:{i}" for i in range(7)))
MSET_10 = ("MSET", *(f"k:{i // 2}" if i % 2 == 0 else "v" for i in range(10)))
EXECUTED = {"mget-1000": MGET_1000, "mget-7": MGET_7, "mset-10": MSET_10}


@pytest.mark.parametrize("name", list(EXECUTED))
def test_redis_execute_of_many_keys_loses_nothing(name, admin, client):
    """A script's redis.execute of a command with many keys: the checked path's arity
    check must not leave the server's key-position buffer behind."""
    lost = lost_bytes(admin, run_repeat(client, *EXECUTED[name]))
    print(f"\n{name}: {lost} bytes over {RUNS * CALLS} calls, "
          f"{lost / (RUNS * CALLS):.1f} per call")
    assert lost < TOLERANCE, f"{name}: {lost} bytes lost over {RUNS * CALLS} calls"


def _tensor_set_get(c: RawClient) -> None:
    assert_ok(c.execute("AI.TENSORSET", "k:t", "FLOAT", 2, 2, "BLOB", A.tobytes()))
    assert isinstance(c.execute("AI.TENSORGET", "k:t", "BLOB"), bytes)


def _model_execute(c: RawClient) -> None:
    assert_ok(c.execute("AI.MODELEXECUTE", "k:m", "INPUTS", 2, "k:a", "k:b",
                        "OUTPUTS", 1, "k:o"))


def _script_execute(c: RawClient) -> None:
    assert_ok(c.execute("AI.SCRIPTEXECUTE", "k:s", "add", "INPUTS", 2, "k:a", "k:b",
                        "OUTPUTS", 1, "k:o"))


def _script_model(c: RawClient) -> None:
    assert_ok(c.execute("AI.SCRIPTEXECUTE", "k:s", "model", "INPUTS", 2, "k:a", "k:b",
                        "ARGS", 1, "k:m", "OUTPUTS", 1, "k:o"))


def _dag_execute(c: RawClient) -> None:
    reply = c.execute("AI.DAGEXECUTE", "LOAD", 2, "k:a", "k:b", "PERSIST", 1, "k:o",
                      "|>", "AI.MODELEXECUTE", "k:m", "INPUTS", 2, "k:a", "k:b",
                      "OUTPUTS", 1, "t",
                      "|>", "AI.SCRIPTEXECUTE", "k:s", "add", "INPUTS", 2, "t", "k:b",
                      "OUTPUTS", 1, "k:o",
                      "|>", "AI.TENSORGET", "k:o", "BLOB")
    assert isinstance(reply, list) and not any(isinstance(r, RespError) for r in reply), reply


def _refused(c: RawClient) -> None:
    """Calls the module refuses or fails (for app: NOPERM through redis.execute and a DAG's
    key check; for both: a wrong arity and an unknown command through redis.execute, a
    missing key)."""
    for command in (("GET", "secret"), ("CONFIG", "SET", "maxmemory", "0"),
                    ("MGET",), ("NOSUCHCOMMAND", "x")):
        reply = c.execute("AI.SCRIPTEXECUTE", "k:s", "refused", "KEYS", 1, "k:o",
                          "ARGS", len(command), *command, "OUTPUTS", 1, "k:o")
        assert isinstance(reply, (RespError, type(None))) or reply == "OK", reply
    c.execute("AI.DAGEXECUTE", "LOAD", 1, "secret", "|>", "AI.TENSORGET", "secret", "BLOB")
    assert isinstance(c.execute("AI.MODELEXECUTE", "k:none", "INPUTS", 1, "k:a",
                                "OUTPUTS", 1, "k:o"), RespError)


PATHS = {
    "tensorset-tensorget": _tensor_set_get,
    "modelexecute": _model_execute,
    "scriptexecute": _script_execute,
    "script-model_execute": _script_model,
    "dagexecute": _dag_execute,
    "refused": _refused,
}


@pytest.mark.parametrize("name", list(PATHS))
def test_request_paths_lose_nothing(name, admin, client):
    lost = lost_bytes(admin, lambda: PATHS[name](client))
    print(f"\n{name}: {lost} bytes over {RUNS} runs, {lost / RUNS:.1f} per run")
    assert lost < TOLERANCE, f"{name}: {lost} bytes lost over {RUNS} runs"
