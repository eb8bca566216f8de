"""Key positions (docs/persistence.md, "Cluster") as Redis sees them: `COMMAND GETKEYS` for
every AI.* command that takes keys, in many argument shapes. In a cluster, Redis derives MOVED
and CROSSSLOT from exactly these positions (tests/cluster/test_cluster.py shows that end to end), so a
key left out is a request routed to a node without its data, and a non-key reported is a
spurious CROSSSLOT.

Decisions tested here:
* SCRIPTEXECUTE reports argv[1] and every item of KEYS, INPUTS and OUTPUTS, wherever the
  sections sit, a trailing OUTPUTS section included (1.2 stopped at the first ARGS or at a
  section ending at the end of argv; we report all of them). ARGS items are skipped
  by their count, so an ARGS value spelled like a keyword is not taken for one.
* SCRIPTRUN skips the TIMEOUT value wherever TIMEOUT sits (the parser accepts it anywhere),
  and reports OUTPUTS items also when INPUTS is left out (INPUTS is optional).
* A malformed argument list never crashes the server: the handler reports only positions
  inside argv; when that leaves no key, GETKEYS answers Redis's own error.

The server has no backend loaded: key positions are computed without running anything.
"""
from __future__ import annotations

from typing import Any

import pytest

from helpers import assert_error
from resp import RawClient, RespError

NO_KEYS = "ERR Invalid arguments specified for command"


def getkeys(raw, *args: Any) -> Any:
    return raw.execute("COMMAND", "GETKEYS", *args)


def keys_of(*names: str) -> list[bytes]:
    return [n.encode() for n in names]


def check(raw, args: tuple, want: tuple[str, ...] | None) -> None:
    reply = getkeys(raw, *args)
    if want is None:
        assert_error(reply, NO_KEYS)
    else:
        assert reply == keys_of(*want), f"GETKEYS {args!r}: {reply!r}"
    assert raw.execute("PING") == "PONG"


# --------------------------------------------------------------------------------------
# Single-key commands: argv[1]
# --------------------------------------------------------------------------------------

SINGLE = [
    ("AI.TENSORSET", "t", "FLOAT", 2, "VALUES", 1, 2),
    ("AI.TENSORSET", "{u}t", "STRING", 1, "VALUES", "x"),
    ("AI.TENSORGET", "t", "META", "BLOB"),
    ("AI.TENSORGET", "t"),
    ("AI.MODELSTORE", "m", "TORCH", "CPU", "TAG", "v1", "BLOB", b"\x00"),
    ("AI.MODELSTORE", "m", "TF", "CPU", "INPUTS", 2, "a", "b", "OUTPUTS", 1, "c", "BLOB", b"x"),
    ("AI.MODELSET", "m", "TF", "CPU", "INPUTS", "a", "OUTPUTS", "c", "BLOB", b"x"),
    ("AI.MODELGET", "m", "META"),
    ("AI.MODELDEL", "m"),
    ("AI.SCRIPTSTORE", "s", "CPU", "ENTRY_POINTS", 1, "f", "SOURCE", "def f(): pass"),
    ("AI.SCRIPTSET", "s", "CPU", "SOURCE", "def f(): pass"),
    ("AI.SCRIPTGET", "s", "SOURCE"),
    ("AI.SCRIPTDEL", "s"),
    ("AI.INFO", "m"),
    ("AI.INFO", "s", "RESETSTAT"),
]


@pytest.mark.parametrize("args", SINGLE, ids=[f"{a[0]}-{i}" for i, a in enumerate(SINGLE)])
def test_single_key_commands(raw, args):
    check(raw, args, (args[1],))


# --------------------------------------------------------------------------------------
# MODELEXECUTE: argv[1], n inputs, m outputs (positions from the counts)
# --------------------------------------------------------------------------------------

ME = "AI.MODELEXECUTE"
MODELEXECUTE = [
    ((ME, "m", "INPUTS", 1, "a", "OUTPUTS", 1, "c"), ("m", "a", "c")),
    ((ME, "m", "INPUTS", 2, "a", "b", "OUTPUTS", 1, "c", "TIMEOUT", 5), ("m", "a", "b", "c")),
    ((ME, "m", "INPUTS", 1, "a", "OUTPUTS", 3, "c", "d", "e"), ("m", "a", "c", "d", "e")),
    ((ME, "{x}m", "inputs", 2, "{x}a", "{x}b", "outputs", 2, "{x}c", "{x}d"),
     ("{x}m", "{x}a", "{x}b", "{x}c", "{x}d")),
    # names that look like keywords are still keys: positions come from the counts
    ((ME, "m", "INPUTS", 2, "OUTPUTS", "TIMEOUT", "OUTPUTS", 1, "INPUTS"),
     ("m", "OUTPUTS", "TIMEOUT", "INPUTS")),
    ((ME, "m", "INPUTS", 1, "a", "OUTPUTS", 1, "c", "TIMEOUT", 5, "junk"), ("m", "a", "c")),
]


@pytest.mark.parametrize("args,want", MODELEXECUTE, ids=range(len(MODELEXECUTE)))
def test_modelexecute(raw, args, want):
    check(raw, args, want)


# --------------------------------------------------------------------------------------
# MODELRUN: argv[1] and everything after INPUTS except the literal OUTPUTS
# --------------------------------------------------------------------------------------

MR = "AI.MODELRUN"
MODELRUN = [
    ((MR, "m", "INPUTS", "a", "b", "OUTPUTS", "c"), ("m", "a", "b", "c")),
    ((MR, "m", "TIMEOUT", 10, "INPUTS", "a", "OUTPUTS", "c", "d"), ("m", "a", "c", "d")),
    ((MR, "m", "inputs", "a", "outputs", "c", "OUTPUTS", "d"), ("m", "a", "c", "d")),
    ((MR, "m", "INPUTS", "a"), ("m", "a")),
]


@pytest.mark.parametrize("args,want", MODELRUN, ids=range(len(MODELRUN)))
def test_modelrun(raw, args, want):
    check(raw, args, want)


# --------------------------------------------------------------------------------------
# SCRIPTEXECUTE: argv[1] and the items of KEYS, INPUTS, OUTPUTS; never ARGS
# --------------------------------------------------------------------------------------

SE = "AI.SCRIPTEXECUTE"
SCRIPTEXECUTE = [
    # the trailing OUTPUTS section that 1.2 left out
    ((SE, "s", "f", "INPUTS", 1, "i", "OUTPUTS", 1, "o"), ("s", "i", "o")),
    ((SE, "s", "f", "INPUTS", 2, "i1", "i2", "OUTPUTS", 2, "o1", "o2"),
     ("s", "i1", "i2", "o1", "o2")),
    ((SE, "s", "f", "KEYS", 1, "k"), ("s", "k")),
    ((SE, "s", "f", "KEYS", 2, "k1", "k2", "INPUTS", 2, "i1", "i2", "ARGS", 2, "a1", "a2",
      "OUTPUTS", 2, "o1", "o2"), ("s", "k1", "k2", "i1", "i2", "o1", "o2")),
    # ARGS before the last section: 1.2 stopped at the first ARGS
    ((SE, "s", "f", "INPUTS", 1, "i", "ARGS", 1, "a", "OUTPUTS", 1, "o", "TIMEOUT", 5),
     ("s", "i", "o")),
    ((SE, "s", "f", "KEYS", 1, "k", "ARGS", 3, "a", "b", "c"), ("s", "k")),
    # any order of sections
    ((SE, "s", "f", "KEYS", 1, "k", "OUTPUTS", 1, "o", "INPUTS", 1, "i"), ("s", "k", "o", "i")),
    ((SE, "s", "f", "INPUTS", 1, "i", "KEYS", 1, "k", "OUTPUTS", 1, "o"), ("s", "i", "k", "o")),
    # ARGS values spelled like keywords are skipped by the ARGS count
    ((SE, "s", "f", "INPUTS", 1, "i", "ARGS", 2, "OUTPUTS", "KEYS", "OUTPUTS", 1, "o"),
     ("s", "i", "o")),
    # 0 and negative counts are empty lists (as the parser reads them)
    ((SE, "s", "f", "INPUTS", 0, "OUTPUTS", 1, "o"), ("s", "o")),
    ((SE, "s", "f", "INPUTS", -3, "OUTPUTS", 1, "o"), ("s", "o")),
    ((SE, "s", "f", "inputs", 1, "{t}i", "keys", 1, "{t}k", "outputs", 1, "{t}o", "timeout", 9),
     ("s", "{t}i", "{t}k", "{t}o")),
    ((SE, "s", "f", "INPUTS", 1, "i"), ("s", "i")),
]


@pytest.mark.parametrize("args,want", SCRIPTEXECUTE, ids=range(len(SCRIPTEXECUTE)))
def test_scriptexecute(raw, args, want):
    check(raw, args, want)


# --------------------------------------------------------------------------------------
# SCRIPTRUN: argv[1] and the tensors of INPUTS / OUTPUTS, without OUTPUTS, `$`, TIMEOUT
# --------------------------------------------------------------------------------------

SR = "AI.SCRIPTRUN"
SCRIPTRUN = [
    ((SR, "s", "f", "INPUTS", "a", "b", "OUTPUTS", "c"), ("s", "a", "b", "c")),
    ((SR, "s", "f", "INPUTS", "a", "$", "b", "c", "OUTPUTS", "d"), ("s", "a", "b", "c", "d")),
    ((SR, "s", "f", "TIMEOUT", 5, "INPUTS", "a", "OUTPUTS", "b"), ("s", "a", "b")),
    ((SR, "s", "f", "INPUTS", "a", "TIMEOUT", 5, "OUTPUTS", "b"), ("s", "a", "b")),
    ((SR, "s", "f", "INPUTS", "a", "OUTPUTS", "b", "TIMEOUT", 5), ("s", "a", "b")),
    # INPUTS is optional: the outputs are still written keys
    ((SR, "s", "f", "OUTPUTS", "b", "c"), ("s", "b", "c")),
    ((SR, "s", "f"), ("s",)),
]


@pytest.mark.parametrize("args,want", SCRIPTRUN, ids=range(len(SCRIPTRUN)))
def test_scriptrun(raw, args, want):
    check(raw, args, want)


# --------------------------------------------------------------------------------------
# DAG*: LOAD, PERSIST, ROUTING, and the key after each AI.MODELEXECUTE / AI.SCRIPTEXECUTE
# --------------------------------------------------------------------------------------

DE, DRO, DR, DRRO = "AI.DAGEXECUTE", "AI.DAGEXECUTE_RO", "AI.DAGRUN", "AI.DAGRUN_RO"
TG = ("|>", "AI.TENSORGET", "x", "VALUES")
TS = ("|>", "AI.TENSORSET", "x", "FLOAT", 1, "VALUES", 1)
MEX = ("|>", "AI.MODELEXECUTE", "m", "INPUTS", 1, "x", "OUTPUTS", 1, "y")
SEX = ("|>", "AI.SCRIPTEXECUTE", "s", "f", "KEYS", 1, "kk", "INPUTS", 1, "x", "OUTPUTS", 1, "y")
DAG = [
    ((DE, "LOAD", 1, "x", *TG), ("x",)),
    ((DE, "LOAD", 2, "a", "b", "PERSIST", 1, "c", *TS, *TG), ("a", "b", "c")),
    ((DE, "PERSIST", 2, "p", "q", "LOAD", 1, "l", *TS), ("p", "q", "l")),
    ((DE, "ROUTING", "{tag}", *TS, *TG), ("{tag}",)),
    ((DE, "ROUTING", "r", "TIMEOUT", 100, "LOAD", 1, "x", *TG), ("r", "x")),
    ((DE, "TIMEOUT", 100, "PERSIST", 1, "x", *TS), ("x",)),
    # model and script keys of the ops; their tensor names (x, y) and the script's KEYS
    # are local to the DAG or declared for routing through ROUTING
    ((DE, "LOAD", 1, "x", *MEX, *SEX, *TG), ("x", "m", "s")),
    ((DE, "ROUTING", "r", "|>", "ai.modelexecute", "m2", "INPUTS", 1, "x", "OUTPUTS", 1, "y",
      *TG), ("r", "m2")),
    ((DRO, "LOAD", 1, "x", *MEX, *TG), ("x", "m")),
    ((DRO, "ROUTING", "{t}", *TS, *TG), ("{t}",)),
    ((DRO, "load", 1, "x", *TG), ("x",)),
    # DAGRUN: the keys of MODELRUN / SCRIPTRUN ops are not reported (as in 1.2)
    ((DR, "LOAD", 1, "a", "PERSIST", 1, "c", "|>", "AI.MODELRUN", "m", "INPUTS", "a",
      "OUTPUTS", "c"), ("a", "c")),
    ((DR, "PERSIST", 1, "c", "|>", "AI.SCRIPTRUN", "s", "f", "INPUTS", "a", "OUTPUTS", "c"),
     ("c",)),
    ((DR, "ROUTING", "r", *TS), ("r",)),
    ((DRRO, "LOAD", 2, "a", "b", "|>", "AI.MODELRUN", "m", "INPUTS", "a", "b", "OUTPUTS", "c"),
     ("a", "b")),
    # no key at all: Redis's own error (the DAG runs on the node it is sent to)
    ((DR, *TS, *TG), None),
    ((DRRO, *TS), None),
]


@pytest.mark.parametrize("args,want", DAG, ids=range(len(DAG)))
def test_dag(raw, args, want):
    check(raw, args, want)


# --------------------------------------------------------------------------------------
# Malformed argument lists: an answer (keys inside argv, or Redis's error), never a crash
# or a hang
# --------------------------------------------------------------------------------------

BIG = 4294967294          # (int)BIG == -2: a handler that adds it as an int goes backwards
HUGE = 9223372036854775807
MALFORMED = [
    ((ME, "m"), ("m",)),
    ((ME, "m", "INPUTS"), ("m",)),
    ((ME, "m", "INPUTS", "x", "a"), ("m",)),
    ((ME, "m", "INPUTS", -1, "a", "OUTPUTS", 1, "c"), ("m",)),
    ((ME, "m", "INPUTS", 3, "a"), ("m", "a")),
    ((ME, "m", "INPUTS", 1, "a", "OUTPUTS"), ("m", "a")),
    ((ME, "m", "INPUTS", 1, "a", "OUTPUTS", 5, "c"), ("m", "a", "c")),
    ((ME, "m", "INPUTS", BIG, "a", "b"), ("m", "a", "b")),
    ((ME, "m", "INPUTS", HUGE, "a", "b"), ("m", "a", "b")),
    ((ME, "m", "INPUTS", 1, "a", "OUTPUTS", HUGE, "c"), ("m", "a", "c")),
    ((MR, "m", "TIMEOUT"), ("m",)),
    ((MR, "m", "OUTPUTS", "c"), ("m",)),
    ((SE, "s"), ("s",)),
    ((SE, "s", "f", "INPUTS"), ("s",)),
    ((SE, "s", "f", "INPUTS", "x", "i"), ("s",)),
    ((SE, "s", "f", "INPUTS", 4, "i"), ("s", "i")),
    ((SE, "s", "f", "KEYS", BIG, "k", "INPUTS", 1, "i"), ("s", "k", "INPUTS", "1", "i")),
    ((SE, "s", "f", "OUTPUTS", HUGE, "o"), ("s", "o")),
    ((SE, "s", "f", "ARGS", BIG, "a", "OUTPUTS", 1, "o"), ("s",)),
    ((SE, "s", "f", "BOGUS", 1, "x", "OUTPUTS", 1, "o"), ("s",)),
    ((SR, "s"), ("s",)),
    ((SR, "s", "f", "INPUTS", "a", "TIMEOUT"), ("s", "a")),
    ((DE, "LOAD"), None),
    ((DE, "LOAD", "x", "a", *TG), None),
    ((DE, "LOAD", 0, "a", *TG), None),
    ((DE, "LOAD", 3, "a"), ("a",)),
    ((DE, "LOAD", BIG, "a", "|>", "AI.TENSORGET", "a"), ("a", "|>", "AI.TENSORGET", "a")),
    ((DE, "PERSIST", HUGE, "p"), ("p",)),
    ((DE, "ROUTING"), None),
    ((DE, "LOAD", 1, "x", "|>", "AI.MODELEXECUTE"), ("x",)),
    ((DE, "|>"), None),
]


@pytest.mark.parametrize("args,want", MALFORMED, ids=range(len(MALFORMED)))
def test_malformed(raw, args, want):
    check(raw, args, want)


def test_getkeys_of_commands_without_keys(raw):
    # _MODELSCAN, _SCRIPTSCAN and CONFIG take no key: they run where they are sent
    for args in (("AI._MODELSCAN",), ("AI._SCRIPTSCAN",), ("AI.CONFIG", "BACKENDSPATH", "/x")):
        reply = getkeys(raw, *args)
        assert isinstance(reply, RespError), f"GETKEYS {args!r}: {reply!r}"
    assert raw.execute("PING") == "PONG"


@pytest.mark.parametrize("name", [ME, MR, SE, SR, DE, DRO, DR, DRRO])
def test_bare_command_name_under_acl_key_patterns(server, raw, name):
    """A user limited to key patterns makes Redis ask the getkeys handler of every command
    before running it, so a bare command name reaches the handler with argc 1: it must not
    report argv[1], which does not exist. (COMMAND GETKEYS itself needs an argument.)"""
    assert raw.execute("ACL", "SETUSER", "keyed", "on", ">pw", "~k*", "+@all") == "OK"
    try:
        with RawClient(server.port) as c:
            assert c.execute("AUTH", "keyed", "pw") == "OK"
            reply = c.execute(name)
            assert isinstance(reply, RespError), f"{name}: {reply!r}"
            assert c.execute("PING") == "PONG"
            # a key outside the user's patterns is refused by ACL, so the key was seen
            reply = c.execute(ME, "nokey", "INPUTS", 1, "k1", "OUTPUTS", 1, "k2")
            assert isinstance(reply, RespError) and str(reply).startswith("NOPERM"), reply
    finally:
        raw.execute("ACL", "DELUSER", "keyed")
    assert server.alive(), server.log()
