"""Scripts and DAGs act as the user who called them (issue 10, item 4 and the outside test's
security holes), and blocking AI.* commands are refused inside scripts (fuzz crash 1).

One TORCH server per module with two ACL users, as the outside tester defined them:
  dev: +@all -@admin -@dangerous ~*        app: +@all -@admin -@dangerous ~app:*
Through a script's redis.execute each of them gets exactly the NOPERM text Redis gives it
for the same command sent directly (in the server's own words: tests/support/acl_wording.py),
raised in the script ("Redis command returned an error: <text>", inside the TorchScript
interpreter's message, as RedisAI 1.2 replies); nothing the refused command would change
changes; the ACL LOG names the user. redisAI.model_execute,
the deprecated AI.MODELRUN / AI.SCRIPTRUN ops inside AI.DAGRUN(_RO), and AI._MODELSCAN /
AI._SCRIPTSCAN are checked against key patterns too (model_execute's refusal is raised in
the script as well). redis.execute runs in the caller's DB, and with deny-oom under maxmemory.
"""
from __future__ import annotations

import pathlib
import time
from typing import Any, Iterator

import numpy as np
import pytest

import torch_models as tm
from acl_wording import AclWording, learn
from helpers import assert_error, assert_error_startswith, assert_ok
from model_io import assert_same, get, put
from redis_server import Connect, RedisServer
from resp import RawClient, RespError
from script_acl import (WOULD_BLOCK, WRAP, acl_log, build_call_module, info_calls,
                        store_script)
from script_errors import assert_script_error

A = np.array([[2, 3], [2, 3]], np.float32)
B = np.array([[1, 1], [1, 1]], np.float32)

USERS = {
    "dev": ("devpw", "+@all -@admin -@dangerous ~*"),
    "app": ("apppw", "+@all -@admin -@dangerous ~app:*"),
}


@pytest.fixture(scope="module")
def torch_server(torch_server: RedisServer) -> RedisServer:
    """conftest's torch_server, with this file's USERS."""
    with RawClient(torch_server.port) as admin:
        for name, (pw, rules) in USERS.items():
            assert_ok(admin.execute("ACL", "SETUSER", name, "on", f">{pw}", *rules.split()))
    return torch_server


@pytest.fixture(scope="module")
def wording(torch_server: RedisServer) -> AclWording:
    """This server's NOPERM texts (7.0: `this user has no permissions to access one of the
    keys used as arguments`, 7.2+ and Valkey: `No permissions to access a key`, ...)."""
    return learn(torch_server.port)


@pytest.fixture
def admin(torch_server: RedisServer, connect: Connect) -> RawClient:
    client = connect(torch_server)
    assert_ok(client.execute("ACL", "LOG", "RESET"))
    return client


def login_as(server: RedisServer, user: str, password: str) -> RawClient:
    c = RawClient(server.port)
    assert_ok(c.execute("AUTH", user, password))
    return c


def login(server: RedisServer, user: str) -> RawClient:
    return login_as(server, user, USERS[user][0])


@pytest.fixture
def dev(torch_server: RedisServer, admin: RawClient) -> Iterator[RawClient]:
    c = login(torch_server, "dev")
    yield c
    c.close()


@pytest.fixture
def app(torch_server: RedisServer, admin: RawClient) -> Iterator[RawClient]:
    c = login(torch_server, "app")
    yield c
    c.close()


def run_call(c: RawClient, script: str, out: str, *command: Any) -> Any:
    """SCRIPTEXECUTE of `call`: redis.execute(*command) inside the script."""
    return c.execute("AI.SCRIPTEXECUTE", script, "call", "KEYS", 1, out,
                     "ARGS", len(command), *command, "OUTPUTS", 1, out)


# --------------------------------------------------------------------------------------
# dev (~*): commands it may not run directly, through redis.execute
# --------------------------------------------------------------------------------------

DEV_REFUSED = [
    ("ACL", "SETUSER", "evil", "on", ">pw", "+@all", "~*"),
    ("CONFIG", "SET", "maxmemory-policy", "allkeys-lru"),
    ("FLUSHALL",),
    ("CONFIG", "GET", "requirepass"),
    ("ACL", "LIST"),
    ("DEBUG", "OBJECT", "k"),
    ("KEYS", "*"),
]


@pytest.mark.parametrize("command", DEV_REFUSED, ids=lambda c: " ".join(c[:2]))
def test_dev_gets_the_refusal_redis_gives_it(torch_server, wording, admin, dev, command):
    admin.execute("SET", "k", "v")
    store_script(dev, "s")
    direct = dev.execute(*command)
    assert isinstance(direct, RespError) and str(direct).startswith("NOPERM "), direct
    assert_ok(admin.execute("ACL", "LOG", "RESET"))

    assert_script_error(run_call(dev, "s", "o", *command), WRAP + str(direct))
    # one ACL LOG entry, for dev, naming the command as Redis does
    [entry] = acl_log(admin)
    assert entry[b"username"] == b"dev" and entry[b"reason"] == b"command", entry
    assert entry[b"context"] == b"module", entry
    assert str(direct) == wording.command("dev", entry[b"object"].decode())
    # nothing changed
    assert admin.execute("GET", "k") == b"v"
    assert admin.execute("EXISTS", "o") == 0
    assert admin.execute("CONFIG", "GET", "maxmemory-policy") == [b"maxmemory-policy",
                                                                  b"noeviction"]
    assert admin.execute("ACL", "GETUSER", "evil") is None
    evil = RawClient(torch_server.port)
    assert isinstance(evil.execute("AUTH", "evil", "pw"), RespError)
    evil.close()


def test_dev_may_still_run_what_it_may_run(admin, dev):
    store_script(dev, "s")
    assert_ok(run_call(dev, "s", "o", "SET", "k", "v"))
    assert admin.execute("GET", "k") == b"v"
    assert acl_log(admin) == []


def test_eval_inside_redis_execute_runs_as_the_caller(admin, dev):
    """The call runs as the user ("C"): a Lua script it starts is checked against it too."""
    store_script(dev, "s")
    admin.execute("SET", "k", "v")
    lua = "return redis.call('FLUSHALL')"
    direct = dev.execute("EVAL", lua, 0)
    assert isinstance(direct, RespError), direct
    assert_script_error(run_call(dev, "s", "o", "EVAL", lua, "0"), WRAP + str(direct))
    assert admin.execute("GET", "k") == b"v"
    assert_ok(run_call(dev, "s", "o", "EVAL", "return redis.call('SET', 'k', 'w')", "0"))
    assert admin.execute("GET", "k") == b"w"


def test_user_deleted_during_its_run_can_do_nothing_more(torch_server, admin):
    """A run acts for its caller by name: once the user is gone (here: deleted by the run's
    own first op), its next redis.execute is refused and changes nothing."""
    store_script(admin, "s")
    assert_ok(admin.execute("ACL", "SETUSER", "tmp", "on", ">pw", "+@all", "~*"))
    tmp = login_as(torch_server, "tmp", "pw")
    tmp.send("AI.DAGEXECUTE", "ROUTING", "k",
             "|>", "AI.SCRIPTEXECUTE", "s", "call", "KEYS", 1, "k",
             "ARGS", 3, "ACL", "DELUSER", "tmp",
             "OUTPUTS", 1, "t1",
             "|>", "AI.SCRIPTEXECUTE", "s", "call", "KEYS", 1, "k",
             "ARGS", 3, "SET", "k", "after",
             "OUTPUTS", 1, "t2")
    # Redis closes the deleted user's connection; the DAG still finishes: wait for its
    # statistics (counted when it is freed), bounded.
    for _ in range(500):
        if info_calls(admin, "s")[0] == 2:
            break
        time.sleep(0.02)
    assert info_calls(admin, "s") == (2, 1)
    assert admin.execute("ACL", "GETUSER", "tmp") is None
    assert admin.execute("EXISTS", "k") == 0
    tmp.close()


# --------------------------------------------------------------------------------------
# app (~app:*): keys outside its pattern
# --------------------------------------------------------------------------------------

def test_app_cannot_read_or_write_other_keys_through_a_script(wording, admin, app):
    noperm_key = wording.key
    store_script(app, "app:s")
    admin.execute("SET", "secret", "s3cr3t")
    direct_get = app.execute("GET", "secret")
    direct_set = app.execute("SET", "secret", "x")
    assert_error(direct_get, noperm_key)
    assert_error(direct_set, noperm_key)
    assert_ok(admin.execute("ACL", "LOG", "RESET"))

    assert_script_error(app.execute("AI.SCRIPTEXECUTE", "app:s", "get_len", "KEYS", 1, "app:o",
                                    "ARGS", 1, "secret", "OUTPUTS", 1, "app:o"),
                        WRAP + noperm_key)
    assert_script_error(run_call(app, "app:s", "app:o", "SET", "secret", "x"), WRAP + noperm_key)
    assert_script_error(run_call(app, "app:s", "app:o", "DEL", "app:x", "secret"),
                        WRAP + noperm_key)
    assert admin.execute("GET", "secret") == b"s3cr3t"
    assert admin.execute("EXISTS", "app:o") == 0
    log = acl_log(admin)  # Redis merges equal entries, counting them
    assert sum(e[b"count"] for e in log) == 3, log
    for entry in log:
        assert entry[b"username"] == b"app" and entry[b"reason"] == b"key", entry
        assert entry[b"object"] == b"secret" and entry[b"context"] == b"module", entry

    # its own keys still work
    assert_ok(run_call(app, "app:s", "app:o", "SET", "app:x", "12345"))
    assert_ok(app.execute("AI.SCRIPTEXECUTE", "app:s", "get_len", "KEYS", 1, "app:o",
                          "ARGS", 1, "app:x", "OUTPUTS", 1, "app:o"))
    assert_same(get(admin, "app:o"), np.array([5], np.int64))


def test_arity_and_unknown_commands_keep_redis_texts(torch_server, admin, app):
    """The ACL check must not look for keys past argv: Redis checks the arity first (a
    built-in's key positions past argv make Redis panic), and so does the module, of
    subcommands too (CONFIG GET, which app may not run, gets the arity error first)."""
    store_script(app, "app:s")
    for command in (("GET",), ("GET", "app:a", "app:b"), ("SET", "secret"), ("HGET", "app:h"),
                    ("MGET",), ("CONFIG",), ("CONFIG", "GET"), ("OBJECT", "ENCODING"),
                    ("XINFO", "STREAM"), ("NOSUCHCOMMAND", "x")):
        direct = app.execute(*command)
        assert isinstance(direct, RespError), (command, direct)
        assert_script_error(run_call(app, "app:s", "app:o", *command), WRAP + str(direct))
    assert admin.execute("PING") == "PONG"
    assert torch_server.alive()


def test_channels_outside_the_users_pattern(wording, admin, app):
    """acl-pubsub-default resetchannels: app may publish nowhere; through a script the same
    NOPERM text and an ACL LOG entry with reason channel."""
    store_script(app, "app:s")
    direct = app.execute("PUBLISH", "news", "m")
    assert_error(direct, wording.channel)
    assert_ok(admin.execute("ACL", "LOG", "RESET"))
    assert_script_error(run_call(app, "app:s", "app:o", "PUBLISH", "news", "m"), WRAP + str(direct))
    [entry] = acl_log(admin)
    assert entry[b"reason"] == b"channel" and entry[b"object"] == b"news", entry
    assert entry[b"username"] == b"app", entry


def test_app_cannot_run_another_model_through_model_execute(wording, admin, app):
    noperm_key = wording.key
    built = tm.add()
    for key in ("sec:m", "app:m"):
        assert_ok(admin.execute("AI.MODELSTORE", key, "TORCH", "CPU", "BLOB", built.blob))
    store_script(app, "app:s")
    put(app, "app:a", A)
    put(app, "app:b", B)
    before = info_calls(admin, "sec:m")
    assert_ok(admin.execute("ACL", "LOG", "RESET"))
    assert_script_error(app.execute("AI.SCRIPTEXECUTE", "app:s", "model", "INPUTS", 2, "app:a",
                                    "app:b", "ARGS", 1, "sec:m", "OUTPUTS", 1, "app:o"),
                        noperm_key)
    assert admin.execute("EXISTS", "app:o") == 0
    assert info_calls(admin, "sec:m") == before
    [entry] = acl_log(admin)
    assert entry[b"username"] == b"app" and entry[b"object"] == b"sec:m", entry
    # a missing key outside the pattern is refused the same way (no existence leak)
    assert_script_error(app.execute("AI.SCRIPTEXECUTE", "app:s", "model", "INPUTS", 2, "app:a",
                                    "app:b", "ARGS", 1, "sec:none", "OUTPUTS", 1, "app:o"),
                        noperm_key)
    # its own model runs
    assert_ok(app.execute("AI.SCRIPTEXECUTE", "app:s", "model", "INPUTS", 2, "app:a", "app:b",
                          "ARGS", 1, "app:m", "OUTPUTS", 1, "app:o"))
    assert_same(get(admin, "app:o"), A + B)


def test_deprecated_dag_ops_check_their_keys(wording, admin, app):
    noperm_key = wording.key
    built = tm.add()
    assert_ok(admin.execute("AI.MODELSTORE", "sec:m", "TORCH", "CPU", "BLOB", built.blob))
    assert_ok(admin.execute("AI.MODELSTORE", "app:m", "TORCH", "CPU", "BLOB", built.blob))
    store_script(admin, "sec:s")
    store_script(admin, "app:s")
    before_m, before_s = info_calls(admin, "sec:m"), info_calls(admin, "sec:s")
    tensorsets = ["|>", "AI.TENSORSET", "a", "FLOAT", 2, 2, "VALUES", 2, 3, 2, 3,
                  "|>", "AI.TENSORSET", "b", "FLOAT", 2, 2, "VALUES", 1, 1, 1, 1]
    assert_error(app.execute("AI.DAGRUN", *tensorsets, "|>", "AI.MODELRUN", "sec:m",
                             "INPUTS", "a", "b", "OUTPUTS", "o", "|>", "AI.TENSORGET", "o",
                             "VALUES"), noperm_key)
    assert_error(app.execute("AI.DAGRUN_RO", *tensorsets, "|>", "AI.SCRIPTRUN", "sec:s", "bar",
                             "INPUTS", "a", "b", "OUTPUTS", "o", "|>", "AI.TENSORGET", "o",
                             "VALUES"), noperm_key)
    assert info_calls(admin, "sec:m") == before_m
    assert info_calls(admin, "sec:s") == before_s
    log = acl_log(admin)
    assert {e[b"object"] for e in log} == {b"sec:m", b"sec:s"}, log
    assert all(e[b"username"] == b"app" and e[b"reason"] == b"key" for e in log), log
    # PERSIST and LOAD outside the pattern: Redis refuses them itself (getkeys), same text
    assert_error(app.execute("AI.DAGRUN", "PERSIST", 1, "sec:o", *tensorsets), noperm_key)
    assert_error(app.execute("AI.DAGRUN", "LOAD", 1, "sec:t", *tensorsets), noperm_key)
    # allowed: its own model and script
    reply = app.execute("AI.DAGRUN", *tensorsets, "|>", "AI.MODELRUN", "app:m", "INPUTS", "a",
                        "b", "OUTPUTS", "o", "|>", "AI.TENSORGET", "o", "VALUES")
    assert reply[-1] == [b"3", b"4", b"3", b"4"], reply
    reply = app.execute("AI.DAGRUN_RO", *tensorsets, "|>", "AI.SCRIPTRUN", "app:s", "bar",
                        "INPUTS", "a", "b", "OUTPUTS", "o", "|>", "AI.TENSORGET", "o", "VALUES")
    assert reply[-1] == [b"3", b"4", b"3", b"4"], reply


def test_scans_list_only_readable_keys(wording, admin, app):
    built = tm.add()
    for key in ("sec:m", "app:m"):
        assert_ok(admin.execute("AI.MODELSTORE", key, "TORCH", "CPU", "TAG", key + "-tag",
                                "BLOB", built.blob))
    for key in ("sec:s", "app:s"):
        store_script(admin, key)
    assert app.execute("AI._MODELSCAN") == [[b"app:m", b"app:m-tag"]]
    assert app.execute("AI._SCRIPTSCAN") == [[b"app:s", b""]]
    assert sorted(admin.execute("AI._MODELSCAN")) == [[b"app:m", b"app:m-tag"],
                                                       [b"sec:m", b"sec:m-tag"]]
    assert len(admin.execute("AI._SCRIPTSCAN")) == 2
    # AI.INFO declares its key: Redis checks it
    assert_error(app.execute("AI.INFO", "sec:m"), wording.key)
    assert app.execute("AI.INFO", "app:m")[1] == b"app:m"
    # through a script's redis.execute the scan acts for the caller too
    for user, want in ((app, 1), (admin, 2)):
        assert_ok(user.execute("AI.SCRIPTEXECUTE", "app:s", "count", "KEYS", 1, "app:o",
                               "ARGS", 1, "AI._MODELSCAN", "OUTPUTS", 1, "app:o"))
        assert_same(get(admin, "app:o"), np.array([want], np.int64))
    # from Lua the caller is not known: refused, not listed
    assert_error_startswith(app.execute("EVAL", "return redis.call('AI._MODELSCAN')", 0),
                            "ERR AI._MODELSCAN cannot run inside a Lua script or another "
                            "module's call: the caller's ACL user is not known there script: ")


# --------------------------------------------------------------------------------------
# DB
# --------------------------------------------------------------------------------------

def test_redis_execute_and_model_execute_use_the_callers_db(admin):
    built = tm.add()
    assert_ok(admin.execute("SELECT", 3))
    store_script(admin, "s")
    assert_ok(run_call(admin, "s", "o", "SET", "k", "in-db-3"))
    assert admin.execute("GET", "k") == b"in-db-3"
    assert_ok(admin.execute("AI.MODELSTORE", "m", "TORCH", "CPU", "BLOB", built.blob))
    put(admin, "a", A)
    put(admin, "b", B)
    assert_ok(admin.execute("AI.SCRIPTEXECUTE", "s", "model", "INPUTS", 2, "a", "b",
                            "ARGS", 1, "m", "OUTPUTS", 1, "o"))
    assert_same(get(admin, "o"), A + B)
    # and inside a DAG
    reply = admin.execute("AI.DAGEXECUTE", "LOAD", 2, "a", "b", "|>", "AI.SCRIPTEXECUTE", "s",
                          "call", "ARGS", 3, "SET", "k2", "dag", "OUTPUTS", 1, "x")
    assert reply == ["OK"], reply
    assert admin.execute("GET", "k2") == b"dag"
    assert_ok(admin.execute("SELECT", 0))
    assert admin.execute("EXISTS", "k", "k2", "m", "o") == 0


# --------------------------------------------------------------------------------------
# Fuzz crash 1: blocking AI.* commands inside a script
# --------------------------------------------------------------------------------------

BLOCKING = [
    ("AI.MODELRUN", "m", "INPUTS", "a", "b", "OUTPUTS", "o2"),
    ("AI.MODELEXECUTE", "m", "INPUTS", "2", "a", "b", "OUTPUTS", "1", "o2"),
    ("AI.SCRIPTEXECUTE", "s", "bar", "INPUTS", "2", "a", "b", "OUTPUTS", "1", "o2"),
    ("AI.SCRIPTRUN", "s", "bar", "INPUTS", "a", "b", "OUTPUTS", "o2"),
    ("AI.DAGEXECUTE", "LOAD", "2", "a", "b", "|>", "AI.MODELEXECUTE", "m", "INPUTS", "2", "a",
     "b", "OUTPUTS", "1", "o2"),
    ("AI.DAGEXECUTE_RO", "LOAD", "2", "a", "b", "|>", "AI.MODELEXECUTE", "m", "INPUTS", "2",
     "a", "b", "OUTPUTS", "1", "o2"),
    ("AI.DAGRUN", "LOAD", "2", "a", "b", "|>", "AI.MODELRUN", "m", "INPUTS", "a", "b",
     "OUTPUTS", "o2"),
    ("ai.dagrun_ro", "LOAD", "2", "a", "b", "|>", "AI.MODELRUN", "m", "INPUTS", "a", "b",
     "OUTPUTS", "o2"),
]


@pytest.mark.parametrize("command", BLOCKING, ids=lambda c: c[0])
def test_blocking_commands_are_refused_inside_scripts(torch_server, admin, command):
    built = tm.add()
    assert_ok(admin.execute("AI.MODELSTORE", "m", "TORCH", "CPU", "BLOB", built.blob))
    store_script(admin, "s")
    put(admin, "a", A)
    put(admin, "b", B)
    assert_script_error(run_call(admin, "s", "o", *command),
                        WRAP + WOULD_BLOCK.format(command[0].upper()))
    assert admin.execute("EXISTS", "o", "o2") == 0
    assert admin.execute("PING") == "PONG"
    assert torch_server.alive()
    if "|>" in command:
        return  # a DAG's "|>" would split the op that carries it as an ARG
    # in a DAG op too
    reply = admin.execute("AI.DAGEXECUTE", "LOAD", 2, "a", "b", "|>", "AI.SCRIPTEXECUTE", "s",
                          "call", "ARGS", len(command), *command, "OUTPUTS", 1, "x")
    assert_script_error(reply[0], WRAP + WOULD_BLOCK.format(command[0].upper()))


@pytest.fixture(scope="module")
def call_module(tmp_path_factory: pytest.TempPathFactory) -> pathlib.Path:
    return build_call_module(tmp_path_factory.mktemp("call_module"))


def test_blocking_commands_refuse_other_modules_calls(module_path, torch_backend_path,
                                                       call_module):
    """The command itself refuses a client that may not block (not only our redis.execute):
    before, Redis aborted on `(c->flags & CLIENT_BLOCKED) == 0`."""
    srv = RedisServer(module_path, ["TORCH", str(torch_backend_path)],
                      extra=["--loadmodule", str(call_module)])
    try:
        c = RawClient(srv.port)
        assert_ok(c.execute("AI.MODELSTORE", "m", "TORCH", "CPU", "BLOB", tm.add().blob))
        store_script(c, "s")
        put(c, "a", A)
        put(c, "b", B)
        for command in BLOCKING:
            assert_error(c.execute("RAICALL.CALL", *command),
                         WOULD_BLOCK.format(command[0].upper()))
            assert c.execute("EXISTS", "o2") == 0
        # what does not block still works through it
        assert_ok(c.execute("RAICALL.CALL", "AI.TENSORSET", "t", "FLOAT", 1, "VALUES", 1))
        assert c.execute("PING") == "PONG"
        c.close()
        assert srv.alive(), srv.log()
    finally:
        srv.stop()


# --------------------------------------------------------------------------------------
# deny-oom
# --------------------------------------------------------------------------------------

def test_redis_execute_respects_maxmemory(module_path, torch_backend_path):
    srv = RedisServer(module_path, ["TORCH", str(torch_backend_path)],
                      extra=["--maxmemory", "20mb", "--maxmemory-policy", "noeviction"])
    try:
        c = RawClient(srv.port)
        store_script(c, "s")
        mib = "x" * (1 << 20)
        reply = c.execute("AI.SCRIPTEXECUTE", "s", "fill", "KEYS", 1, "o", "ARGS", 2, 100, mib,
                          "OUTPUTS", 1, "o")
        assert_script_error(reply, WRAP + "OOM command not allowed when used memory > 'maxmemory'.")
        info = c.execute("INFO", "memory").decode()
        used = int(next(l.split(":")[1] for l in info.splitlines()
                        if l.startswith("used_memory:")))
        written = len(c.execute("KEYS", "big:*"))
        assert 0 < written < 25, written
        assert used < 24 * (1 << 20), used
        assert c.execute("EXISTS", "o") == 0
        c.close()
        assert srv.alive(), srv.log()
    finally:
        srv.stop()
