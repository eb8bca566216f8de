"""The module learns its NOPERM words from the running server at load (module/engine/noperm.c),
with an ACL DRYRUN refusal of a user of its own: that user must leave no trace, and the words
must be the server's from the first refusal on, before the module has refused anything.

Runs on the suite's server (`--server`); the words themselves are compared with what the
server answers its own clients (tests/support/acl_wording.py).
"""
from __future__ import annotations

import pytest

from acl_wording import learn
from helpers import assert_error, assert_ok
from redis_server import RedisServer
from resp import RawClient, RespError


def test_the_probe_user_leaves_no_trace(server: RedisServer):
    with RawClient(server.port) as c:
        users = c.execute("ACL", "USERS")
        assert users == [b"default"], users
        assert c.execute("ACL", "LOG") == []
    assert "redisai-noperm-probe" not in server.log()


def test_the_first_refusal_is_in_the_server_s_words(module_path):
    """A fresh server; the module's very first NOPERM is for a user refused nothing before."""
    srv = RedisServer(module_path)
    try:
        with RawClient(srv.port) as admin, RawClient(srv.port) as dev:
            assert_ok(admin.execute("ACL", "SETUSER", "dev", "on", ">pw", "+@all", "-@admin",
                                    "~*"))
            assert_ok(dev.execute("AUTH", "dev", "pw"))
            if isinstance(admin.execute("ACL", "DRYRUN", "dev", "PING"), RespError):
                pytest.skip("no ACL DRYRUN on this server (Redis 6.2): the module has no words "
                            "to learn and refuses AI.CONFIG LIST to everyone (test_no_acl_api.py)")
            refused = dev.execute("AI.CONFIG", "LIST")
            wording = learn(srv.port)  # after: learning leaves the module's state alone
            assert_error(refused, wording.command("dev", "ai.config|list"))
    finally:
        srv.stop()
