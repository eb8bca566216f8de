"""docs/commands.md, "Conventions": the module (name, version, cannot be unloaded) and the command
table as registered: flags, first/last/step key positions, arity -1, getkeys-api."""
from __future__ import annotations

import re

import pytest

from helpers import assert_error_startswith
from resp import RespError

# command -> (flags as COMMAND INFO spells them, first, last, step, getkeys-api)
TABLE = {
    "ai.tensorset": ({"write", "denyoom"}, 1, 1, 1, False),
    "ai.tensorget": ({"readonly"}, 1, 1, 1, False),
    "ai.modelstore": ({"write", "denyoom"}, 1, 1, 1, False),
    "ai.modelset": ({"write", "denyoom"}, 1, 1, 1, False),
    "ai.modelget": ({"readonly"}, 1, 1, 1, False),
    "ai.modeldel": ({"write"}, 1, 1, 1, False),
    "ai.modelexecute": ({"write", "denyoom"}, 4, 4, 1, True),
    "ai.modelrun": ({"write", "denyoom"}, 3, 3, 1, True),
    "ai._modelscan": ({"readonly"}, 0, 0, 0, False),
    "ai._scriptscan": ({"readonly"}, 0, 0, 0, False),
    "ai.scriptstore": ({"write", "denyoom"}, 1, 1, 1, False),
    "ai.scriptset": ({"write", "denyoom"}, 1, 1, 1, False),
    "ai.scriptget": ({"readonly"}, 1, 1, 1, False),
    "ai.scriptdel": ({"write"}, 1, 1, 1, False),
    "ai.scriptexecute": ({"write", "denyoom"}, 5, 5, 1, True),
    "ai.scriptrun": ({"write", "denyoom"}, 4, 4, 1, True),
    "ai.dagexecute": ({"write", "denyoom"}, 3, 3, 1, True),
    "ai.dagexecute_ro": ({"readonly"}, 3, 3, 1, True),
    "ai.dagrun": ({"write", "denyoom"}, 3, 3, 1, True),
    "ai.dagrun_ro": ({"readonly"}, 3, 3, 1, True),
    "ai.info": ({"readonly"}, 1, 1, 1, False),
    "ai.config": ({"write"}, 0, 0, 0, False),
}


@pytest.mark.parametrize("name", list(TABLE))
def test_command_info(raw, name):
    flags, first, last, step, getkeys = TABLE[name]
    info = raw.execute("COMMAND", "INFO", name)
    assert isinstance(info, list) and info[0], f"{name} is not registered: {info!r}"
    entry = info[0]
    assert entry[0] == name.encode()
    assert entry[1] == -1, f"{name} arity {entry[1]}"
    got_flags = {str(f) for f in entry[2]}
    assert got_flags - {"module", "movablekeys"} == flags, f"{name} flags {sorted(got_flags)}"
    assert ("movablekeys" in got_flags) == getkeys, f"{name} flags {sorted(got_flags)}"
    assert tuple(entry[3:6]) == (first, last, step), f"{name} first,last,step = {tuple(entry[3:6])}"


def test_getkeys(raw):
    assert raw.execute("COMMAND", "GETKEYS", "AI.MODELEXECUTE", "m", "INPUTS", 2, "a", "b",
                       "OUTPUTS", 1, "c", "TIMEOUT", 5) == [b"m", b"a", b"b", b"c"]
    assert raw.execute("COMMAND", "GETKEYS", "AI.MODELEXECUTE", "m", "INPUTS", 1, "a",
                       "OUTPUTS", 2, "c", "d") == [b"m", b"a", b"c", b"d"]
    assert raw.execute("COMMAND", "GETKEYS", "AI.MODELRUN", "m", "TIMEOUT", 5, "INPUTS", "a", "b",
                       "OUTPUTS", "c") == [b"m", b"a", b"b", b"c"]
    assert raw.execute("COMMAND", "GETKEYS", "AI.MODELRUN", "m", "INPUTS", "a",
                       "OUTPUTS", "c", "d") == [b"m", b"a", b"c", b"d"]
    assert raw.execute("COMMAND", "GETKEYS", "AI.TENSORSET", "t", "FLOAT", 1) == [b"t"]


def test_module_name_and_version(raw, install_dir):
    mods = raw.execute("MODULE", "LIST")
    entries = [dict(zip(m[::2], m[1::2])) for m in mods]
    ai = [e for e in entries if e[b"name"] == b"ai"]
    assert len(ai) == 1, entries
    m = re.search(r"redisai-(\d+)\.(\d+)\.(\d+)$", install_dir.name)
    if m:
        major, minor, patch = map(int, m.groups())
        assert ai[0][b"ver"] == major * 10000 + minor * 100 + patch, ai[0]


def test_module_cannot_be_unloaded(raw):
    reply = raw.execute("MODULE", "UNLOAD", "ai")
    assert isinstance(reply, RespError), reply
    assert_error_startswith(reply, "ERR")
    assert raw.execute("AI.TENSORSET", "t", "FLOAT", 1) == "OK"
