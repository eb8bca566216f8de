"""The words a server uses to refuse what its ACL forbids, learned from that server.

Servers word their NOPERM replies differently, and the version number does not say how
(Valkey 8 reports redis_version 7.2.4). After `NOPERM `:
- Redis 6.2: `this user has no permissions to run the 'acl' command or its subcommand`,
  `this user has no permissions to access one of the keys used as arguments`, and the same
  with `channels`;
- Redis 7.0: `this user has no permissions to run the 'acl|setuser' command`; keys and
  channels as 6.2;
- Redis 7.2+ and Valkey: `User dev has no permissions to run the 'acl|setuser' command`,
  `No permissions to access a key`, `No permissions to access a channel`.
So a test never writes one of them: `learn(port)` makes a user of its own on that server,
has it refused a subcommand, a key and a channel, and keeps what the server answered, with
the user and the command turned into blanks to fill. What the module itself answers when it
refuses (AI.CONFIG's guarded subcommands, a DAG's keys, a script's redis.execute) must read
exactly as the server's own refusal of the same thing.

The probe leaves ACL LOG entries for its user (`acl-wording-probe`, deleted afterwards):
learn before a test resets the log and looks at it.
"""
from __future__ import annotations

import secrets
from dataclasses import dataclass

from resp import RawClient, RespError

PROBE_USER = "acl-wording-probe"
# What the probe is refused: a subcommand (to see how the server names one), a key, a channel.
_COMMAND = ("CLIENT", "ID")
_KEY = ("GET", "acl-wording-probe:k")
_CHANNEL = ("PUBLISH", "acl-wording-probe:ch", "x")


@dataclass(frozen=True)
class AclWording:
    """One server's NOPERM texts, whole lines as RawClient returns them."""

    # "NOPERM User {user} has no permissions to run the '{command}' command"
    command_template: str
    names_subcommands: bool  # 'acl|setuser' (7.0+) or only the container 'acl' (6.2)
    key: str                 # a refused key, e.g. "NOPERM No permissions to access a key"
    channel: str             # a refused channel

    def command(self, user: str, command: str) -> str:
        """The refusal of `command` ("ai.config|list", lower case as Redis names it) for
        `user`: the user appears only where the server names users."""
        if not self.names_subcommands:
            command = command.split("|", 1)[0]
        return self.command_template.format(user=user, command=command)


def _refusal(client: RawClient, *args: str) -> str:
    reply = client.execute(*args)
    assert isinstance(reply, RespError) and reply.startswith("NOPERM "), (
        f"{' '.join(args)} by {PROBE_USER} should be refused with NOPERM, got {reply!r}")
    return str(reply)


def _template(text: str) -> tuple[str, bool]:
    """The command refusal with blanks: '{user}' where the probe's name was, '{command}'
    where the refused command's."""
    full, container = "|".join(_COMMAND).lower(), _COMMAND[0].lower()
    text = text.replace("{", "{{").replace("}", "}}").replace(PROBE_USER, "{user}")
    if f"'{full}'" in text:
        return text.replace(f"'{full}'", "'{command}'"), True
    if f"'{container}'" in text:
        return text.replace(f"'{container}'", "'{command}'"), False
    raise AssertionError(f"the refusal of {' '.join(_COMMAND)} names no command: {text!r}")


def learn(port: int) -> AclWording:
    """The server on `port`'s NOPERM texts, from refusals of a user made for the purpose."""
    password = secrets.token_hex(16)
    with RawClient(port) as admin:
        reply = admin.execute("ACL", "SETUSER", PROBE_USER, "reset", "on", f">{password}",
                              "resetkeys", "resetchannels", "-@all", "+client|getname",
                              "+get", "+publish")
        assert reply == "OK", reply
        try:
            with RawClient(port) as probe:
                assert probe.execute("AUTH", PROBE_USER, password) == "OK"
                template, subcommands = _template(_refusal(probe, *_COMMAND))
                key = _refusal(probe, *_KEY)
                channel = _refusal(probe, *_CHANNEL)
        finally:
            admin.execute("ACL", "DELUSER", PROBE_USER)
    return AclWording(command_template=template, names_subcommands=subcommands, key=key,
                      channel=channel)
