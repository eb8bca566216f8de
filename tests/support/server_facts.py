"""What the server under test offers a module, asked of the server itself.

The version number does not say it (Valkey 8 reports redis_version 7.2.4), so a test that
depends on such a fact asks a server of the same executable with a probe module in it
(tests/fixtures/modules/server_probe.c, `raiprobe`), never RedisAI itself (a test of the
module must not learn its expectations from the module):
- `has_api(name)`: whether the server exports that module API function. Redis 6.2 has no
  RedisModule_ACLCheckCommandPermissions or RedisModule_GetModuleUserFromUserName (7.0),
  without which RedisAI cannot check a caller's ACL (issue 21);
- `arity(command)`: RedisModule_WrongArity's reply for a command typed so (Redis 7.0+ and
  Valkey name it in lower case, 6.2 as the client typed it).
tests/conftest.py's `server_facts` fixture starts one such server per session.
"""
from __future__ import annotations

import pathlib
from typing import Callable

from helpers import arity_wording
from native import cc_shared
from paths import ROOT
from redis_server import RedisServer
from resp import RawClient

PROBE_SOURCE = ROOT / "tests" / "fixtures" / "modules" / "server_probe.c"
# The module API functions RedisAI needs to check a caller's ACL (module/engine/caller.c,
# module/commands/config_commands.c: AI.CONFIG LOADBACKEND, BACKENDSPATH, LIST,
# INLINE_RUN_MAX_US, a script's redis.execute).
ACL_CHECK_APIS = ("RedisModule_GetModuleUserFromUserName",
                  "RedisModule_ACLCheckCommandPermissions",
                  "RedisModule_ACLCheckKeyPermissions")


def build_probe(out_dir: pathlib.Path) -> pathlib.Path:
    """server_probe.c compiled against the pinned redismodule.h into out_dir."""
    from build_tools import headers  # noqa: PLC0415 (fetches the header on first use)

    out = out_dir / "server_probe.so"
    cc_shared(f"-I{headers.redismodule_include_dir()}", "-o", str(out), str(PROBE_SOURCE))
    return out


class ServerFacts:
    """A server of the executable under test with only the probe module loaded."""

    def __init__(self, probe: pathlib.Path) -> None:
        self.server = RedisServer(probe)
        self.client = RawClient(self.server.port)
        self._apis: dict[str, bool] = {}
        typed = "rAiPrObE.aRiTy"
        self._arity: Callable[[str], str] = arity_wording(self.client.execute(typed), typed)

    def close(self) -> None:
        self.client.close()
        self.server.stop()

    def has_api(self, name: str) -> bool:
        if name not in self._apis:
            reply = self.client.execute("RAIPROBE.HASAPI", name)
            assert reply in (0, 1), reply
            self._apis[name] = reply == 1
        return self._apis[name]

    @property
    def checks_acl(self) -> bool:
        """Whether a module can check a caller's ACL on this server (not on Redis 6.2)."""
        return all(self.has_api(name) for name in ACL_CHECK_APIS)

    def arity(self, command: str) -> str:
        """The arity error RedisModule_WrongArity gives for `command` as typed."""
        return self._arity(command)
