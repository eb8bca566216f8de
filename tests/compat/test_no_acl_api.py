"""A server without the module ACL API (Redis 6.2, issue 21 item 1): what the module cannot
check against the caller's ACL user is refused with a clear error instead of run unchecked
(or, before, crashing the server), and the rest works as on Redis 7.

These tests start Redis 6.2 themselves (`python3 -m build_tools setup` fetches it,
build_tools/servers.py), whatever `--server` the suite runs on: the servers with the API are
the rest of the suite's.

Users, as an operator would define them on 6.2 (no selectors there):
  default: everything (allkeys);  app: +@all ~app:* (a key pattern: not every key).
"""
from __future__ import annotations

import pathlib
from typing import Any, Iterator

import numpy as np
import pytest

import onnx_models as om
import torch_models as tm
from build_tools import servers
from build_tools.errors import BuildError
from helpers import assert_error, assert_ok, info_field
from model_io import assert_same, get, put
from redis_server import RedisServer
from resp import RawClient, RespError
from script_errors import assert_script_error

SERVER = "redis-6.2"
WRAP = "Redis command returned an error: "
NO_ACL_CONFIG = ("ERR AI.CONFIG {} is not available on this server ({}): it lacks the module "
                 "ACL API (Redis 7.0) needed to check who may run it; set it with module "
                 "arguments instead")
NO_ACL_CALL = ("ERR redis.execute is refused on this server: it lacks the module ACL API "
               "(Redis 7.0) needed to check the command against the caller's ACL user (the "
               "module argument UNSAFE_NO_ACL_CHECKS yes runs it unchecked)")
NO_ACL_KEY = ("ERR this server cannot check a key against the caller's ACL user: it lacks the "
              "module ACL API (Redis 7.0) and the user may not access every key (the module "
              "argument UNSAFE_NO_ACL_CHECKS yes skips the check)")
OOM = "OOM command not allowed when used memory > 'maxmemory'."

SCRIPT = '''
def call(tensors: List[Tensor], keys: List[str], args: List[str]):
    redis.execute(args[0], args[1:])
    return torch.tensor([1])

def model(tensors: List[Tensor], keys: List[str], args: List[str]):
    out = redisAI.model_execute(args[0], [tensors[0], tensors[1]], 1)
    return out[0]

def double(tensors: List[Tensor], keys: List[str], args: List[str]):
    return tensors[0] * 2

def fill(tensors: List[Tensor], keys: List[str], args: List[str]):
    n = int(args[0])
    for i in range(n):
        redis.execute("SET", "big:" + str(i), args[1])
    return torch.tensor([n])
'''
ENTRY_POINTS = ("call", "model", "double", "fill")
A = np.array([[2, 3], [2, 3]], np.float32)
B = np.array([[1, 1], [1, 1]], np.float32)


def server_exe() -> str:
    try:
        return str(servers.executable(SERVER))
    except BuildError as exc:  # setup fetches it: its absence is a broken setup, not a skip
        pytest.fail(f"{SERVER} is not set up ({exc.message}): run `python3 -m build_tools setup`")


def version() -> str:
    return servers.pin_for(SERVER).version


def start(module_path: pathlib.Path, args: list[str], **kw: Any) -> RedisServer:
    srv = RedisServer(module_path, args, exe=server_exe(), **kw)
    with RawClient(srv.port) as admin:
        assert admin.execute("INFO", "server").decode().count(f"redis_version:{version()}") == 1
        assert_ok(admin.execute("ACL", "SETUSER", "app", "on", ">apppw", "+@all", "~app:*"))
    return srv


@pytest.fixture(scope="module")
def srv(module_path: pathlib.Path, torch_backend_path: pathlib.Path) -> Iterator[RedisServer]:
    """Redis 6.2 with the module and TORCH loaded by module argument."""
    s = start(module_path, ["TORCH", str(torch_backend_path)])
    yield s
    s.stop()


@pytest.fixture(scope="module")
def unsafe_srv(module_path: pathlib.Path,
               torch_backend_path: pathlib.Path) -> Iterator[RedisServer]:
    """The same with the operator's opt-in UNSAFE_NO_ACL_CHECKS yes."""
    s = start(module_path, ["TORCH", str(torch_backend_path), "UNSAFE_NO_ACL_CHECKS", "yes"])
    yield s
    s.stop()


def client(server: RedisServer, user: str | None = None) -> RawClient:
    c = RawClient(server.port)
    if user == "app":
        assert_ok(c.execute("AUTH", "app", "apppw"))
    return c


@pytest.fixture
def admin(srv: RedisServer) -> Iterator[RawClient]:
    with client(srv) as c:
        assert_ok(c.execute("FLUSHALL", "SYNC"))
        yield c
    assert srv.alive(), srv.log()


def store(c: RawClient, key: str) -> None:
    assert_ok(c.execute("AI.SCRIPTSTORE", key, "CPU", "ENTRY_POINTS", len(ENTRY_POINTS),
                        *ENTRY_POINTS, "SOURCE", SCRIPT))


def run_call(c: RawClient, script: str, out: str, *command: Any) -> Any:
    return c.execute("AI.SCRIPTEXECUTE", script, "call", "KEYS", 1, out,
                     "ARGS", len(command), *command, "OUTPUTS", 1, out)


# --------------------------------------------------------------------------------------
# Loading
# --------------------------------------------------------------------------------------

def test_the_module_loads_and_logs_what_the_server_lacks(srv):
    log = srv.log()
    assert f"server {version()} has no module ACL API" in log, log
    assert "RedisAI 1.3.0 loaded" in log, log


def test_backends_load_lazily_from_backendspath(module_path: pathlib.Path):
    """No backend argument: storing a model loads ONNX Runtime from BACKENDSPATH's default."""
    s = start(module_path, [])
    try:
        with client(s) as c:
            m = om.add()
            assert_ok(c.execute("AI.MODELSTORE", "m", "ONNX", "CPU", "BLOB", m.blob))
            put(c, "a", m.sample[0])
            put(c, "b", m.sample[1])
            assert_ok(c.execute("AI.MODELEXECUTE", "m", "INPUTS", 2, "a", "b", "OUTPUTS", 1, "o"))
            assert_same(get(c, "o"), m.run(*m.sample)[0])
            assert info_field(c.execute("INFO", "MODULES"), "ai_onnxruntime_version")
    finally:
        s.stop()


def test_a_bad_opt_in_value_fails_the_load(module_path: pathlib.Path):
    with pytest.raises(RuntimeError) as exc:
        RedisServer(module_path, ["UNSAFE_NO_ACL_CHECKS", "maybe"], exe=server_exe())
    assert ("ERR error processing argument: UNSAFE_NO_ACL_CHECKS maybe (expected yes or no)"
            in str(exc.value)), exc.value


# --------------------------------------------------------------------------------------
# AI.CONFIG: the operator's subcommands cannot be checked, so no one runs them
# --------------------------------------------------------------------------------------

GUARDED = [
    ("LOADBACKEND", ("LOADBACKEND", "TF", "tensorflow")),
    ("BACKENDSPATH", ("BACKENDSPATH", "/tmp")),
    ("LIST", ("LIST",)),
    ("INLINE_RUN_MAX_US", ("INLINE_RUN_MAX_US", "7")),
]


@pytest.mark.parametrize("user", [None, "app"], ids=["default", "app"])
@pytest.mark.parametrize("sub,args", GUARDED, ids=[g[0] for g in GUARDED])
def test_guarded_config_subcommands_are_refused_for_every_user(srv, admin, user, sub, args):
    before = [admin.execute("AI.CONFIG", "GET", n) for n in ("BACKENDSPATH", "INLINE_RUN_MAX_US")]
    with client(srv, user) as c:
        assert_error(c.execute("AI.CONFIG", *args), NO_ACL_CONFIG.format(sub, version()))
    after = [admin.execute("AI.CONFIG", "GET", n) for n in ("BACKENDSPATH", "INLINE_RUN_MAX_US")]
    assert after == before
    # nothing was loaded either
    assert info_field(admin.execute("INFO", "MODULES"), "ai_TensorFlow_version") is None


def test_get_and_model_chunk_size_work(srv, admin):
    assert admin.execute("AI.CONFIG", "GET", "BACKENDSPATH").endswith(b"/backends")
    assert_ok(admin.execute("AI.CONFIG", "MODEL_CHUNK_SIZE", 4096))
    assert admin.execute("AI.CONFIG", "GET", "MODEL_CHUNK_SIZE") == 4096
    assert_ok(admin.execute("AI.CONFIG", "MODEL_CHUNK_SIZE", 535822336))


# --------------------------------------------------------------------------------------
# Scripts' redis.execute: refused unless the operator opts in
# --------------------------------------------------------------------------------------

@pytest.mark.parametrize("user", [None, "app"], ids=["default", "app"])
def test_redis_execute_is_refused_without_the_opt_in(srv, admin, user):
    with client(srv, user) as c:
        store(c, "app:s")
        assert_script_error(run_call(c, "app:s", "app:o", "SET", "app:k", "v"),
                            WRAP + NO_ACL_CALL)
    assert admin.execute("EXISTS", "app:k", "app:o") == 0


def test_scripts_without_redis_execute_run(srv, admin):
    with client(srv, "app") as c:
        store(c, "app:s")
        put(c, "app:a", A)
        assert_ok(c.execute("AI.SCRIPTEXECUTE", "app:s", "double", "INPUTS", 1, "app:a",
                            "OUTPUTS", 1, "app:o"))
        assert_same(get(c, "app:o"), A * 2)


@pytest.fixture
def unsafe_admin(unsafe_srv: RedisServer) -> Iterator[RawClient]:
    with client(unsafe_srv) as c:
        assert_ok(c.execute("FLUSHALL", "SYNC"))
        yield c
    assert unsafe_srv.alive(), unsafe_srv.log()


def test_the_opt_in_runs_redis_execute_unchecked_in_the_callers_db(unsafe_srv, unsafe_admin):
    assert "UNSAFE_NO_ACL_CHECKS yes: scripts' redis.execute" in unsafe_srv.log()
    with client(unsafe_srv, "app") as c:
        assert_ok(c.execute("SELECT", 3))
        store(c, "app:s")
        # unchecked: a key outside app's pattern (that is what the operator opted in to)
        assert_ok(run_call(c, "app:s", "app:o", "SET", "other", "v"))
    assert_ok(unsafe_admin.execute("SELECT", 3))
    assert unsafe_admin.execute("GET", "other") == b"v"
    assert_ok(unsafe_admin.execute("SELECT", 0))
    assert unsafe_admin.execute("EXISTS", "other") == 0
    # guarded AI.CONFIG stays refused: the opt-in is for scripts and keys only
    assert_error(unsafe_admin.execute("AI.CONFIG", "LIST"), NO_ACL_CONFIG.format("LIST", version()))


def test_the_opt_in_still_refuses_deny_oom_commands_over_maxmemory(unsafe_srv, unsafe_admin):
    """Without RedisModule_Call's "M" the module asks COMMAND INFO: once a script's SETs pass
    maxmemory, the next SET (denyoom) gets Redis's OOM text and nothing more is written."""
    c = unsafe_admin
    store(c, "s")
    used = int(info_field(c.execute("INFO", "memory"), "used_memory"))
    assert_ok(c.execute("CONFIG", "SET", "maxmemory-policy", "noeviction"))
    assert_ok(c.execute("CONFIG", "SET", "maxmemory", used + (10 << 20)))
    try:
        mib = "x" * (1 << 20)
        reply = c.execute("AI.SCRIPTEXECUTE", "s", "fill", "KEYS", 1, "o", "ARGS", 2, 100, mib,
                          "OUTPUTS", 1, "o")
        assert_script_error(reply, WRAP + OOM)
        written = len(c.execute("KEYS", "big:*"))
        assert 0 < written < 15, written
    finally:
        assert_ok(c.execute("CONFIG", "SET", "maxmemory", 0))
    assert c.execute("EXISTS", "o") == 0


# --------------------------------------------------------------------------------------
# Keys Redis does not check: every key or none
# --------------------------------------------------------------------------------------

def dagrun_script_op(c: RawClient, script: str) -> Any:
    return c.execute("AI.DAGRUN", "LOAD", 1, "app:a", "|>",
                     "AI.SCRIPTRUN", script, "double", "INPUTS", "app:a", "OUTPUTS", "app:o",
                     "|>", "AI.TENSORGET", "app:o", "VALUES")


def test_a_user_with_every_key_runs_dagrun_ops(srv, admin):
    store(admin, "s")
    put(admin, "app:a", A)
    assert dagrun_script_op(admin, "s") == ["OK", [b"4", b"6", b"4", b"6"]]


def test_a_user_with_key_patterns_is_refused_unchecked_keys(srv, admin):
    store(admin, "app:s")
    put(admin, "app:a", A)
    with client(srv, "app") as c:
        # the op's script key lies inside app's pattern, but 6.2 cannot tell the module that
        assert_error(dagrun_script_op(c, "app:s"), NO_ACL_KEY)
        assert_error(c.execute("AI._SCRIPTSCAN"), NO_ACL_KEY)
        assert_error(c.execute("AI._MODELSCAN"), NO_ACL_KEY)


def test_keys_redis_sees_are_checked_by_redis(srv, admin):
    """AI.SCRIPTEXECUTE reports its keys (getkeys-api): Redis 6.2 refuses them itself."""
    store(admin, "s")
    put(admin, "app:a", A)
    with client(srv, "app") as c:
        reply = c.execute("AI.SCRIPTEXECUTE", "s", "double", "INPUTS", 1, "app:a",
                          "OUTPUTS", 1, "app:o")
        assert isinstance(reply, RespError) and str(reply).startswith("NOPERM "), reply
        store(c, "app:s")
        assert_ok(c.execute("AI.SCRIPTEXECUTE", "app:s", "double", "INPUTS", 1, "app:a",
                            "OUTPUTS", 1, "app:o"))


def test_dagexecute_keys_are_redis_s_to_check(srv, admin):
    """Every key of AI.DAGEXECUTE is reported through getkeys: a user with key patterns runs
    it inside them, and Redis refuses it the keys outside."""
    store(admin, "app:s")
    put(admin, "app:a", A)
    dag = ("AI.DAGEXECUTE", "LOAD", 1, "app:a", "PERSIST", 1, "app:o", "|>",
           "AI.SCRIPTEXECUTE", "app:s", "double", "INPUTS", 1, "app:a", "OUTPUTS", 1, "app:o")
    with client(srv, "app") as c:
        assert c.execute(*dag) == ["OK"]
        assert_same(get(c, "app:o"), A * 2)
        outside = tuple("x" if a == "app:o" else a for a in dag)
        reply = c.execute(*outside)
        assert isinstance(reply, RespError) and str(reply).startswith("NOPERM "), reply
    assert admin.execute("EXISTS", "x") == 0


def test_model_execute_in_a_script_needs_every_key(srv, admin):
    add = tm.add()
    assert_ok(admin.execute("AI.MODELSTORE", "app:m", "TORCH", "CPU", "BLOB", add.blob))
    store(admin, "app:s")
    put(admin, "app:a", A)
    put(admin, "app:b", B)
    args = ("AI.SCRIPTEXECUTE", "app:s", "model", "INPUTS", 2, "app:a", "app:b",
            "ARGS", 1, "app:m", "OUTPUTS", 1, "app:o")
    assert_ok(admin.execute(*args))
    assert_same(get(admin, "app:o"), A + B)
    with client(srv, "app") as c:
        assert_script_error(c.execute(*args), NO_ACL_KEY)


def test_the_opt_in_skips_the_key_checks(unsafe_srv, unsafe_admin):
    store(unsafe_admin, "app:s")
    put(unsafe_admin, "app:a", A)
    with client(unsafe_srv, "app") as c:
        assert dagrun_script_op(c, "app:s") == ["OK", [b"4", b"6", b"4", b"6"]]
        assert c.execute("AI._SCRIPTSCAN") == [[b"app:s", b""]]
