"""Another module's RedisModule_Call of a run acts for the user that module asked for (issue 44,
item 7).

A module may let a command it calls block (RedisModule_Call's `K`, Redis 7.2+ and Valkey) and run
it as its own client's ACL user (`C`). Such a call's client is no connection: before, the run
found no user for it and ran unchecked, so a user limited to `~app:*` read `secret` through a
script's `redis.execute` and ran a model outside its pattern through `redisAI.model_execute`,
while Redis itself checked only the keys it saw in the command. Here the module is
tests/fixtures/modules/call_module.c (`RAICALL.WITH flags cmd ...`), the user
`app: +@all -@admin -@dangerous ~app:*`, and every call made through the module with `KC` must
get exactly what the same call made directly gets; with `C` alone the command refuses to block.
Without `C` the module asked for no user: Redis runs its call unchecked (the module's own
`GET secret` returns the value), and so does the run, as for the LLAPI. AI._MODELSCAN lists the
keys of the user the module asked for.

On a server whose RedisModule_Call has no `K` (Redis 6.2, 7.0) every blocking AI.* command
refuses a module's call (test_script_acl.py), and these tests are skipped.
"""
from __future__ import annotations

import pathlib
from typing import Any, Iterator

import numpy as np
import pytest

import torch_models as tm
from acl_wording import AclWording, learn
from helpers import assert_error, assert_ok
from model_io import assert_same, get, put
from redis_server import RedisServer, StartServer
from resp import RawClient, RespError
from script_acl import WOULD_BLOCK, WRAP, acl_log, build_call_module, info_calls, store_script
from script_errors import assert_script_error
from server_facts import ServerFacts

# RedisModule_Call's "K" came with its promise replies (Redis 7.2): a server that exports
# this takes "K".
PROMISE_API = "RedisModule_CallReplyPromiseSetUnblockHandler"
APP = ("apppw", "+@all -@admin -@dangerous ~app:*")
SECRET = b"s3cr3t-value"
A = np.array([[2, 3], [2, 3]], np.float32)
B = np.array([[1, 1], [1, 1]], np.float32)

# What app may not do, each made directly and through the module; the keys Redis sees in each
# command are app's own, so only the module's checks inside the run stand in the way.
TENSORSETS = ("|>", "AI.TENSORSET", "a", "FLOAT", 2, 2, "VALUES", 2, 3, 2, 3,
              "|>", "AI.TENSORSET", "b", "FLOAT", 2, 2, "VALUES", 1, 1, 1, 1)
REFUSED = {
    "script redis.execute": ("AI.SCRIPTEXECUTE", "app:s", "get_len", "KEYS", 1, "app:o",
                             "ARGS", 1, "secret", "OUTPUTS", 1, "app:o"),
    "script model_execute": ("AI.SCRIPTEXECUTE", "app:s", "model", "INPUTS", 2, "app:a", "app:b",
                             "ARGS", 1, "sec:m", "OUTPUTS", 1, "app:o"),
    "DAG script op redis.execute": ("AI.DAGEXECUTE", "ROUTING", "app:a",
                                    "|>", "AI.SCRIPTEXECUTE", "app:s", "get_len",
                                    "ARGS", 1, "secret", "OUTPUTS", 1, "x"),
    "DAG script op model_execute": ("AI.DAGEXECUTE", "LOAD", 2, "app:a", "app:b",
                                    "|>", "AI.SCRIPTEXECUTE", "app:s", "model",
                                    "INPUTS", 2, "app:a", "app:b", "ARGS", 1, "sec:m",
                                    "OUTPUTS", 1, "x"),
    "DAG's deprecated AI.SCRIPTRUN op": ("AI.DAGRUN_RO", *TENSORSETS, "|>", "AI.SCRIPTRUN",
                                         "sec:s", "bar", "INPUTS", "a", "b", "OUTPUTS", "o",
                                         "|>", "AI.TENSORGET", "o", "VALUES"),
}


@pytest.fixture(scope="module")
def srv(server_facts: ServerFacts, start_server: StartServer, torch_backend_path: pathlib.Path,
        tmp_path_factory: pytest.TempPathFactory) -> RedisServer:
    if not server_facts.has_api(PROMISE_API):
        pytest.skip("this server's RedisModule_Call has no K flag (a call that may block: Redis "
                    "7.2+ and Valkey): every blocking AI.* command refuses a module's call here "
                    "(test_script_acl.py)")
    call_module = build_call_module(tmp_path_factory.mktemp("call_module"))
    return start_server(["TORCH", str(torch_backend_path)],
                        extra=["--loadmodule", str(call_module)])


@pytest.fixture(scope="module")
def wording(srv: RedisServer) -> AclWording:
    """This server's NOPERM texts (tests/support/acl_wording.py)."""
    return learn(srv.port)


@pytest.fixture
def admin(srv: RedisServer, wording: AclWording, connect) -> RawClient:
    """A client with no restriction, after FLUSHALL; the keys app may and may not touch, and
    an empty ACL LOG."""
    c = connect(srv)
    assert_ok(c.execute("ACL", "SETUSER", "app", "reset", "on", f">{APP[0]}", *APP[1].split()))
    assert_ok(c.execute("SET", "secret", SECRET))
    built = tm.add()
    for key in ("sec:m", "app:m"):
        assert_ok(c.execute("AI.MODELSTORE", key, "TORCH", "CPU", "BLOB", built.blob))
    store_script(c, "app:s")
    store_script(c, "sec:s")
    put(c, "app:a", A)
    put(c, "app:b", B)
    assert_ok(c.execute("ACL", "LOG", "RESET"))
    return c


@pytest.fixture
def app(srv: RedisServer, admin: RawClient) -> Iterator[RawClient]:
    c = RawClient(srv.port)
    assert_ok(c.execute("AUTH", "app", APP[0]))
    yield c
    c.close()


def through(c: RawClient, flags: str, command: tuple[Any, ...]) -> Any:
    """`command` as the module calls it: RedisModule_Call(ctx, cmd, "<flags>Ev", ...)."""
    return c.execute("RAICALL.WITH", flags, *command)


def refusal_of(reply: Any) -> str:
    """The NOPERM text inside a refusal: a plain error, a script's error, or a DAG's."""
    if isinstance(reply, list):
        reply = next(r for r in reply if isinstance(r, RespError))
    assert isinstance(reply, RespError), reply
    text = str(reply)
    assert "NOPERM " in text, text
    return text


def assert_nothing_leaked(admin: RawClient, before: dict[str, tuple[int, int]]) -> None:
    assert admin.execute("EXISTS", "app:o", "o") == 0
    assert admin.execute("GET", "secret") == SECRET
    for key, calls in before.items():
        assert info_calls(admin, key) == calls, key


@pytest.mark.parametrize("command", REFUSED.values(), ids=REFUSED.keys())
def test_a_call_that_may_block_acts_for_the_user_the_module_asked_for(admin, app, command):
    before = {key: info_calls(admin, key) for key in ("sec:m", "sec:s")}
    direct = app.execute(*command)
    refusal = refusal_of(direct)
    assert_nothing_leaked(admin, before)
    log = acl_log(admin)
    assert_ok(admin.execute("ACL", "LOG", "RESET"))

    # KC: the same reply (the same refusal, worded the same), the same ACL LOG entry
    assert through(app, "KC", command) == direct, refusal
    assert_nothing_leaked(admin, before)
    assert [(e[b"username"], e[b"reason"], e[b"object"]) for e in acl_log(admin)] == \
        [(e[b"username"], e[b"reason"], e[b"object"]) for e in log]
    # C alone: the call may not block, and the command says so before anything runs
    assert_error(through(app, "C", command), WOULD_BLOCK.format(command[0]))
    assert_nothing_leaked(admin, before)


def test_the_issues_reproducer_reads_no_secret(wording, admin, app):
    """The script's redis.execute('GET', 'secret') through KC: before, the run answered OK and
    wrote the secret's length to app:o."""
    assert_script_error(through(app, "KC", REFUSED["script redis.execute"]), WRAP + wording.key)
    assert admin.execute("EXISTS", "app:o") == 0
    [entry] = acl_log(admin)
    assert entry[b"username"] == b"app" and entry[b"object"] == b"secret", entry
    assert entry[b"context"] == b"module", entry


def test_the_users_own_keys_still_run_through_the_module(admin, app):
    assert_ok(admin.execute("SET", "app:x", "12345"))
    assert_ok(through(app, "KC", ("AI.SCRIPTEXECUTE", "app:s", "get_len", "KEYS", 1, "app:o",
                                  "ARGS", 1, "app:x", "OUTPUTS", 1, "app:o")))
    assert_same(get(admin, "app:o"), np.array([5], np.int64))
    assert_ok(through(app, "KC", ("AI.SCRIPTEXECUTE", "app:s", "model", "INPUTS", 2, "app:a",
                                  "app:b", "ARGS", 1, "app:m", "OUTPUTS", 1, "app:o")))
    assert_same(get(admin, "app:o"), A + B)
    reply = through(app, "KC", ("AI.DAGEXECUTE", "LOAD", 2, "app:a", "app:b",
                                "|>", "AI.SCRIPTEXECUTE", "app:s", "model", "INPUTS", 2, "app:a",
                                "app:b", "ARGS", 1, "app:m", "OUTPUTS", 1, "x",
                                "|>", "AI.TENSORGET", "x", "VALUES"))
    assert reply == ["OK", [b"3", b"4", b"3", b"4"]], reply
    assert acl_log(admin) == []


def test_without_c_the_run_is_as_unchecked_as_the_modules_own_call(admin, app):
    """A module that does not pass C asked for no user: Redis runs its calls as no user (its
    own GET of secret is answered), and a run it starts acts for no user either, as the
    LLAPI's runs (docs/security.md). Not a leak of the run: the module had the secret."""
    assert through(app, "", ("GET", "secret")) == SECRET
    assert_ok(through(app, "K", REFUSED["script redis.execute"]))
    assert_same(get(admin, "app:o"), np.array([len(SECRET)], np.int64))


def test_scans_list_the_keys_of_the_user_the_module_asked_for(admin, app):
    """Before, AI._MODELSCAN refused every module's call (its user was not known)."""
    assert through(app, "C", ("AI._MODELSCAN",)) == [[b"app:m", b""]]
    assert sorted(through(app, "", ("AI._MODELSCAN",))) == [[b"app:m", b""], [b"sec:m", b""]]
