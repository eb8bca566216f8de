"""DAG commands (docs/commands.md, "DAGs"): AI.DAGEXECUTE, AI.DAGEXECUTE_RO, AI.DAGRUN,
AI.DAGRUN_RO.

Every form and header option (LOAD, PERSIST, ROUTING, TIMEOUT), the local tensor
namespace (latest earlier producer, shadowing), the per-op reply array (OK, values,
errors, NA), nothing persisted after a failed op, persist failures appended as one extra
element, which ops each form accepts, every parse-time error string (Enterprise shard
checks excluded), key positions, the selected DB, ops on two devices, and
models and scripts of TF, TORCH and ONNX chained in one DAG.

Decisions of the lead tested here: a TENSORGET op of a name no earlier LOAD/op declares is
the parse error `ERR INPUT key cannot be found in DAG`; keys resolve in the client's
selected DB; DAG ops run in order on one engine.

One server per module with TF at load time (conftest's tf_server); Torch and ONNX load
lazily from the install tree on their first MODELSTORE/SCRIPTSTORE, and the tests that
need them skip while their .so is not built. DAG timeouts are in test_timeouts.py."""
from __future__ import annotations

import numpy as np
import pytest

import engine_models as em
import tf_graphs
from helpers import (MODEL_EMPTY, TENSOR_EMPTY, WRONGTYPE, assert_error, assert_error_startswith,
                     assert_ok, wait_until)
from redis_server import Connect, RedisServer
from resp import RawClient, RespError, Status

E, RO, R, RRO = "AI.DAGEXECUTE", "AI.DAGEXECUTE_RO", "AI.DAGRUN", "AI.DAGRUN_RO"
OK = Status("OK")
NA = Status("NA")
SCRIPT_EMPTY = "ERR script key is empty"


@pytest.fixture
def c(tf_server: RedisServer, connect: Connect) -> RawClient:
    client = connect(tf_server)
    assert_ok(client.execute("AI.MODELSTORE", "m", "TF", "CPU", "INPUTS", 2, "a", "b", "OUTPUTS",
                             1, "mul", "BLOB", tf_graphs.mul_graph()))
    assert_ok(client.execute("AI.MODELSTORE", "m3", "TF", "CPU", "INPUTS", 2, "a", "b", "OUTPUTS",
                             3, "mul", "add", "sub", "BLOB", tf_graphs.multi_output_graph()))
    assert_ok(client.execute("AI.TENSORSET", "a", "FLOAT", 2, "VALUES", 2, 3))
    assert_ok(client.execute("AI.TENSORSET", "b", "FLOAT", 2, "VALUES", 4, 5))
    assert client.execute("SET", "str", "x") == "OK"
    return client


def values(*vals) -> list[bytes]:
    return [str(v).encode() for v in vals]


def me(model="m", ins=("a", "b"), outs=("c",), *extra):
    return ["|>", "AI.MODELEXECUTE", model, "INPUTS", len(ins), *ins, "OUTPUTS", len(outs), *outs,
            *extra]


def tg(name, *fmt):
    return ["|>", "AI.TENSORGET", name, *fmt]


def ts(name, *rest):
    return ["|>", "AI.TENSORSET", name, *rest]


def info(c: RawClient, key: str) -> dict:
    reply = c.execute("AI.INFO", key)
    assert isinstance(reply, list) and len(reply) == 18, reply
    return {reply[k].decode(): reply[k + 1] for k in range(0, 18, 2)}


# --------------------------------------------------------------------------------------
# Happy paths: every form
# --------------------------------------------------------------------------------------

def test_dagexecute_load_model_tensorget(c):
    reply = c.execute(E, "LOAD", 2, "a", "b", *me(), *tg("c", "VALUES"))
    assert reply == [OK, values(8, 15)]
    assert isinstance(reply[0], Status)
    assert c.execute("EXISTS", "c") == 0, "a local DAG tensor reached the keyspace"
    assert c.execute("AI.TENSORGET", "a", "VALUES") == values(2, 3)


def test_one_op_dag_still_replies_with_an_array(c):
    assert c.execute(R, *ts("x", "FLOAT", 1, "VALUES", 5)) == [OK]
    assert c.execute(E, "LOAD", 1, "a", *tg("a", "VALUES")) == [values(2, 3)]
    assert c.execute("EXISTS", "x") == 0


def test_tensorget_formats_match_the_standalone_command(c):
    assert_ok(c.execute("AI.TENSORSET", "t", "INT32", 2, 2, "VALUES", 1, 2, 3, 40000))
    fmts = [(), ("META",), ("BLOB",), ("VALUES",), ("META", "VALUES"), ("VALUES", "META"),
            ("META", "BLOB"), ("BLOB", "META"), ("meta",), ("BLOB", "BLOB")]
    cmd = [E, "LOAD", 1, "t"]
    for f in fmts:
        cmd += tg("t", *f)
    reply = c.execute(*cmd)
    assert reply == [c.execute("AI.TENSORGET", "t", *f) for f in fmts]


def test_persist_several_outputs(c):
    assert_ok(c.execute("AI.TENSORSET", "x", "INT8", 1, "VALUES", 7))
    assert c.execute("EXPIRE", "x", 1000) == 1
    reply = c.execute(E, "LOAD", 2, "a", "b", "PERSIST", 3, "x", "y", "z",
                      *me("m3", ("a", "b"), ("x", "y", "z")))
    assert reply == [OK]
    assert c.execute("AI.TENSORGET", "x", "META", "VALUES") == [
        b"dtype", b"FLOAT", b"shape", [2], b"values", values(8, 15)]
    assert c.execute("AI.TENSORGET", "y", "VALUES") == values(6, 8)
    assert c.execute("AI.TENSORGET", "z", "VALUES") == values(-2, -2)
    for k in ("x", "y", "z"):
        assert c.execute("TYPE", k) == "AI_TENSOR"
    assert c.execute("TTL", "x") == -1, "a persisted tensor kept the old key's TTL"


def test_only_persisted_names_reach_the_keyspace(c):
    reply = c.execute(E, "PERSIST", 1, "y", "LOAD", 2, "a", "b", *me("m3", ("a", "b"), ("x", "y", "z")),
                      *tg("z", "VALUES"))
    assert reply == [OK, values(-2, -2)]
    assert c.execute("AI.TENSORGET", "y", "VALUES") == values(6, 8)
    assert c.execute("EXISTS", "x", "z") == 0


def test_tensorset_ops_are_local_until_persisted(c):
    reply = c.execute(R, "PERSIST", 1, "t", *ts("t", "FLOAT", 2, "VALUES", 1.5, 2),
                      *ts("u", "DOUBLE", 1, "VALUES", 9), *tg("u", "META", "VALUES"))
    assert reply == [OK, OK, [b"dtype", b"DOUBLE", b"shape", [1], b"values", values(9)]]
    assert c.execute("AI.TENSORGET", "t", "VALUES") == values(1.5, 2)
    assert c.execute("EXISTS", "u") == 0
    # a TENSORSET op feeds a model op; the BLOB form works inside a DAG too
    blob = np.array([1, 2], np.float32).tobytes()
    reply = c.execute(E, "PERSIST", 1, "p", *ts("x", "FLOAT", 2, "BLOB", blob),
                      *ts("y", "FLOAT", 2, "VALUES", 3, 4), *me("m", ("x", "y"), ("p",)))
    assert reply == [OK, OK, OK]
    assert c.execute("AI.TENSORGET", "p", "VALUES") == values(3, 8)


def test_latest_earlier_producer_wins(c):
    """Op outputs create new versions: reads see the latest earlier one, PERSIST the last."""
    reply = c.execute(E, "LOAD", 2, "a", "b", "PERSIST", 1, "a",
                      *tg("a", "VALUES"),
                      *me("m", ("a", "b"), ("a",)),
                      *tg("a", "VALUES"),
                      *me("m", ("a", "b"), ("a",)),
                      *tg("a", "VALUES"),
                      *ts("b", "FLOAT", 2, "VALUES", 1, 2),
                      *me("m", ("a", "b"), ("a",)),
                      *tg("b", "VALUES"))
    assert reply == [values(2, 3), OK, values(8, 15), OK, values(32, 75), OK, OK, values(1, 2)]
    assert c.execute("AI.TENSORGET", "a", "VALUES") == values(32, 150)
    assert c.execute("AI.TENSORGET", "b", "VALUES") == values(4, 5)


def test_local_names_ignore_keyspace_types(c):
    """`str` is a plain string in the keyspace; inside the DAG it is just a local name."""
    reply = c.execute(E, "LOAD", 2, "a", "b", *me("m", ("a", "b"), ("str",)), *tg("str", "VALUES"))
    assert reply == [OK, values(8, 15)]
    assert c.execute("GET", "str") == b"x"


def test_load_takes_the_keyspace_tensor_at_parse_time(tf_one_worker_server, connect):
    """LOAD references the tensor when the command is parsed: a TENSORSET to the key while
    the DAG waits in the queue is not seen by it; a PERSIST then overwrites that write."""
    c = connect(tf_one_worker_server)
    n = em.calibrate_slow(c)(0.4)  # stores `slow` here; the calibration is kept per process
    assert_ok(c.execute("AI.MODELSTORE", "m", "TF", "CPU", "INPUTS", 2, "a", "b", "OUTPUTS",
                        1, "mul", "BLOB", tf_graphs.mul_graph()))
    assert_ok(c.execute("AI.TENSORSET", "a", "FLOAT", 2, "VALUES", 2, 3))
    with RawClient(tf_one_worker_server.port) as d:
        with em.HeldQueue(tf_one_worker_server.port, n) as h:
            d.send(E, "LOAD", 1, "a", "PERSIST", 1, "sq", *me("m", ("a", "a"), ("sq",)),
                   *tg("a", "VALUES"))
            h.wait_queued(2)
            assert_ok(c.execute("AI.TENSORSET", "a", "FLOAT", 2, "VALUES", 1, 1))
        assert d.read() == [OK, values(2, 3)]
    assert c.execute("AI.TENSORGET", "sq", "VALUES") == values(4, 9)
    assert c.execute("AI.TENSORGET", "a", "VALUES") == values(1, 1)


def test_keywords_are_case_insensitive(c):
    reply = c.execute("ai.dagexecute", "load", 2, "a", "b", "persist", 1, "c", "timeout", 5000,
                      "|>", "ai.modelexecute", "m", "inputs", 2, "a", "b", "outputs", 1, "c",
                      "|>", "Ai.TensorGet", "c", "values", "|>", "ai.tensorset", "t", "float", 1,
                      "values", 1)
    assert reply == [OK, values(8, 15), OK]
    assert c.execute("AI.TENSORGET", "c", "VALUES") == values(8, 15)


def test_header_keywords_in_any_order(c):
    reply = c.execute(E, "TIMEOUT", 5000, "PERSIST", 1, "c", "ROUTING", "a", "LOAD", 2, "a", "b",
                      *me())
    assert reply == [OK]
    assert c.execute("AI.TENSORGET", "c", "VALUES") == values(8, 15)
    reply = c.execute(E, "ROUTING", "b", "PERSIST", 1, "d", "LOAD", 2, "a", "b",
                      *me("m", ("a", "b"), ("d",)))
    assert reply == [OK]


def test_routing_alone_is_enough(c):
    # the ROUTING value is any key or tag; it need not exist
    reply = c.execute(E, "ROUTING", "{nokey}", *ts("t", "FLOAT", 1, "VALUES", 3), *tg("t", "VALUES"))
    assert reply == [OK, values(3)]
    reply = c.execute(RO, "ROUTING", "a", *ts("t", "FLOAT", 1, "VALUES", 3), *tg("t", "VALUES"))
    assert reply == [OK, values(3)]
    assert c.execute("EXISTS", "t", "{nokey}") == 0


def test_timeout_zero_and_negative_mean_none(c):
    """QUIRK (docs/commands.md, AI.DAGEXECUTE): the DAG parser accepts TIMEOUT 0 and negative
    values (no timeout)."""
    for t in (0, -5, 10000):
        assert c.execute(E, "LOAD", 2, "a", "b", "TIMEOUT", t, *me(), *tg("c", "VALUES")) == \
            [OK, values(8, 15)]
        assert c.execute(R, "TIMEOUT", t, *ts("t", "FLOAT", 1)) == [OK]


def test_dagexecute_ro_runs_models_and_writes_nothing(c):
    before = c.execute("DBSIZE")
    reply = c.execute(RO, "LOAD", 2, "a", "b", *me(), *tg("c", "VALUES"),
                      *ts("a", "FLOAT", 1, "VALUES", 0), *tg("a", "VALUES"))
    assert reply == [OK, values(8, 15), OK, values(0)]
    assert c.execute("DBSIZE") == before
    assert c.execute("AI.TENSORGET", "a", "VALUES") == values(2, 3)
    reply = c.execute(RO, "ROUTING", "a", "LOAD", 1, "a", "TIMEOUT", 1000, *tg("a", "VALUES"))
    assert reply == [values(2, 3)]


def test_dagrun_with_modelrun(c):
    reply = c.execute(R, "LOAD", 2, "a", "b", "PERSIST", 1, "c",
                      "|>", "AI.MODELRUN", "m", "INPUTS", "a", "b", "OUTPUTS", "c",
                      "|>", "AI.MODELRUN", "m3", "INPUTS", "a", "c", "OUTPUTS", "x", "y", "z",
                      *tg("y", "VALUES"))
    assert reply == [OK, OK, values(10, 18)]
    assert c.execute("AI.TENSORGET", "c", "VALUES") == values(8, 15)
    assert c.execute("EXISTS", "x", "y", "z") == 0


def test_dagrun_needs_no_header_and_parses_routing(c):
    assert c.execute(R, *ts("t", "FLOAT", 1, "VALUES", 1), *tg("t", "VALUES")) == [OK, values(1)]
    assert c.execute(R, "ROUTING", "a", "LOAD", 1, "a", *tg("a", "VALUES")) == [values(2, 3)]
    assert c.execute(R, "TIMEOUT", 1000, "LOAD", 1, "a", *tg("a", "VALUES")) == [values(2, 3)]


def test_dagrun_ro_with_modelrun_writes_nothing(c):
    before = c.execute("DBSIZE")
    reply = c.execute(RRO, "LOAD", 2, "a", "b", "|>", "AI.MODELRUN", "m", "INPUTS", "a", "b",
                      "OUTPUTS", "c", *tg("c", "VALUES"))
    assert reply == [OK, values(8, 15)]
    assert c.execute("DBSIZE") == before
    assert c.execute(RRO, *ts("t", "FLOAT", 1), *tg("t", "VALUES")) == [OK, values(0)]


# --------------------------------------------------------------------------------------
# Failures while running: per-op errors, NA, nothing persisted
# --------------------------------------------------------------------------------------

def test_failing_middle_op(c):
    reply = c.execute(E, "LOAD", 2, "a", "b", "PERSIST", 3, "c", "d", "t",
                      *tg("a", "VALUES"),                       # 0: runs
                      *me("m", ("a", "b"), ("c",)),             # 1: OK
                      *ts("bad", "FLOAT", 3, "VALUES", 1, 2, 3),  # 2: OK (built at parse time)
                      *ts("t", "FLOAT", 1, "VALUES", 1),        # 3: OK
                      *me("m", ("a", "bad"), ("d",)),           # 4: fails (shapes [2] and [3])
                      *me("m", ("c", "c"), ("e",)),             # 5: NA
                      *tg("c", "VALUES"),                       # 6: NA
                      *tg("a", "VALUES"))                       # 7: NA
    assert isinstance(reply, list) and len(reply) == 8, reply
    assert reply[:4] == [values(2, 3), OK, OK, OK]
    text = assert_error_startswith(reply[4], "Incompatible shapes")
    assert "\n" not in text and "\r" not in text
    assert reply[5:] == [NA, NA, NA]
    assert all(isinstance(x, Status) for x in reply[5:])
    assert c.execute("EXISTS", "c", "d", "t", "e", "bad") == 0, "a DAG with a failed op persisted"
    st = info(c, "m")
    assert (st["calls"], st["errors"], st["samples"]) == (2, 1, 2), st


def test_failing_modelrun_op_in_dagrun(c):
    """DAGRUN form: the MODELRUN op fails, the TENSORGET after it is NA, nothing persisted."""
    reply = c.execute(R, "LOAD", 1, "a", "PERSIST", 1, "x",
                      *ts("bad", "FLOAT", 3, "VALUES", 1, 2, 3),
                      "|>", "AI.MODELRUN", "m", "INPUTS", "a", "bad", "OUTPUTS", "x",
                      *tg("x", "VALUES"))
    assert reply[0] == OK
    assert_error_startswith(reply[1], "Incompatible shapes")
    assert reply[2] == NA
    assert c.execute("EXISTS", "x") == 0


def test_persist_onto_a_non_tensor_appends_one_error(c):
    reply = c.execute(E, "LOAD", 2, "a", "b", "PERSIST", 1, "str", *me("m", ("a", "b"), ("str",)),
                      *tg("str", "VALUES"))
    assert reply[:2] == [OK, values(8, 15)]
    assert len(reply) == 3, reply
    assert_error(reply[2], WRONGTYPE)
    assert c.execute("GET", "str") == b"x"


def test_persist_failure_with_several_keys(c):
    """A DAG stores all its PERSIST keys or none: every key is checked before the first
    is written, so `c` is not written when `str` cannot be."""
    reply = c.execute(E, "LOAD", 2, "a", "b", "PERSIST", 2, "c", "str",
                      *me("m", ("a", "b"), ("c",)), *me("m", ("a", "a"), ("str",)))
    assert reply[:2] == [OK, OK] and len(reply) == 3, reply
    assert_error(reply[2], WRONGTYPE)
    assert c.execute("GET", "str") == b"x"
    assert c.execute("EXISTS", "c") == 0


def test_a_failed_dag_leaves_the_server_usable(c):
    assert_ok(c.execute("AI.TENSORSET", "bad", "FLOAT", 3, "VALUES", 1, 2, 3))
    for _ in range(3):
        reply = c.execute(E, "LOAD", 2, "a", "bad", *me("m", ("a", "bad"), ("c",)))
        assert isinstance(reply, list) and isinstance(reply[0], RespError), reply
    assert c.execute(E, "LOAD", 2, "a", "b", *me(), *tg("c", "VALUES")) == [OK, values(8, 15)]


# --------------------------------------------------------------------------------------
# Databases, devices, key positions
# --------------------------------------------------------------------------------------

def test_keys_resolve_in_the_selected_db(c):
    assert c.execute("SELECT", 3) == "OK"
    try:
        assert_ok(c.execute("AI.MODELSTORE", "m9", "TF", "CPU", "INPUTS", 2, "a", "b", "OUTPUTS",
                            1, "mul", "BLOB", tf_graphs.mul_graph()))
        assert_ok(c.execute("AI.TENSORSET", "x", "FLOAT", 2, "VALUES", 1, 2))
        assert_ok(c.execute("AI.TENSORSET", "y", "FLOAT", 2, "VALUES", 3, 4))
        reply = c.execute(E, "LOAD", 2, "x", "y", "PERSIST", 1, "z", *me("m9", ("x", "y"), ("z",)))
        assert reply == [OK]
        assert c.execute("AI.TENSORGET", "z", "VALUES") == values(3, 8)
        # DB 0's tensors and models are not visible from DB 3
        assert_error(c.execute(E, "LOAD", 1, "a", *tg("a")), TENSOR_EMPTY)
        assert_error(c.execute(E, "LOAD", 2, "x", "y", *me("m", ("x", "y"), ("z",))), MODEL_EMPTY)
    finally:
        assert c.execute("SELECT", 0) == "OK"
    assert c.execute("EXISTS", "z", "x") == 0
    assert_error(c.execute(E, "LOAD", 2, "a", "b", *me("m9")), MODEL_EMPTY)


def test_ops_on_two_devices_in_order(c):
    """`CPU:1` is another run queue (docs/commands.md); the DAG moves between queues, in op
    order."""
    assert_ok(c.execute("AI.MODELSTORE", "m_cpu1", "TF", "CPU:1", "INPUTS", 2, "a", "b", "OUTPUTS",
                        1, "mul", "BLOB", tf_graphs.mul_graph()))
    reply = c.execute(E, "LOAD", 2, "a", "b", "PERSIST", 1, "r",
                      *me("m", ("a", "b"), ("p",)),
                      *me("m_cpu1", ("p", "a"), ("q",)),
                      *me("m", ("q", "b"), ("r",)),
                      *me("m_cpu1", ("r", "r"), ("s",)),
                      *tg("s", "VALUES"))
    assert reply == [OK, OK, OK, OK, values(4096, 50625)]
    assert c.execute("AI.TENSORGET", "r", "VALUES") == values(64, 225)
    assert info(c, "m")["calls"] == 2
    assert info(c, "m_cpu1")["calls"] == 2
    assert info(c, "m_cpu1")["device"] == b"CPU:1"


def test_getkeys(c):
    assert c.execute("COMMAND", "GETKEYS", E, "LOAD", 2, "a", "b", "PERSIST", 1, "c", "ROUTING",
                     "r", *me(), *tg("c")) == [b"a", b"b", b"c", b"r", b"m"]
    assert c.execute("COMMAND", "GETKEYS", RO, "LOAD", 1, "a", *me("m3", ("a", "a"), ("x", "y", "z")),
                     *me("m", ("x", "y"), ("w",))) == [b"a", b"m3", b"m"]
    # model keys of MODELRUN inside DAGRUN are not reported (docs/persistence.md, "Cluster")
    assert c.execute("COMMAND", "GETKEYS", R, "LOAD", 1, "a", "PERSIST", 1, "c", "|>", "AI.MODELRUN",
                     "m", "INPUTS", "a", "a", "OUTPUTS", "c") == [b"a", b"c"]


# --------------------------------------------------------------------------------------
# Parse-time errors: one error reply, nothing runs
# --------------------------------------------------------------------------------------

TGA = tg("a", "VALUES")
MISSING_E = "ERR missing arguments for 'AI.DAGEXECUTE' command"
MISSING_RO = "ERR missing arguments for 'AI.DAGEXECUTE_RO' command"
UNEXP = "ERR Invalid DAG command. Unexpected argument:  "
NEED_ONE = ("ERR AI.DAGEXECUTE and AI.DAGEXECUTE_RO commands must contain at least one out of "
            "ROUTING, LOAD, PERSIST keywords")
NOT_IN_DAG = "ERR INPUT key cannot be found in DAG"

DAG_ERRORS = [
    # argument count
    ([E, "LOAD", 1, "a", "|>"], MISSING_E),
    ([E], MISSING_E),
    ([E, "|>", "AI.TENSORGET", "a"], MISSING_E),
    ([RO, "LOAD", 1, "a", "|>"], MISSING_RO),
    ([RO, "LOAD", 2, "a", "b"], MISSING_RO),
    ([R, "|>", "AI.TENSORGET"], "ERR wrong number of arguments for 'AI.DAGRUN' command"),
    ([R], "ERR wrong number of arguments for 'AI.DAGRUN' command"),
    ([RRO, "LOAD", 1], "ERR wrong number of arguments for 'AI.DAGRUN_RO' command"),
    # LOAD
    ([R, "TIMEOUT", 5, "LOAD", 1], "ERR missing arguments after LOAD keyword in DAG command"),
    ([E, "ROUTING", "a", "TIMEOUT", 5, "LOAD", 1], "ERR missing arguments after LOAD keyword in DAG command"),
    ([R, "LOAD", "x", "a", *TGA], "ERR invalid or negative value found in number of keys to LOAD"),
    ([R, "LOAD", 0, "a", *TGA], "ERR invalid or negative value found in number of keys to LOAD"),
    ([R, "LOAD", -1, "a", *TGA], "ERR invalid or negative value found in number of keys to LOAD"),
    ([E, "LOAD", "1.0", "a", *TGA], "ERR invalid or negative value found in number of keys to LOAD"),
    ([R, "LOAD", 1, "nokey", *TGA], TENSOR_EMPTY),
    ([R, "LOAD", 2, "a", "nokey", *TGA], TENSOR_EMPTY),
    ([R, "LOAD", 1, "str", *TGA], WRONGTYPE),
    ([E, "LOAD", 1, "m", *TGA], WRONGTYPE),
    ([R, "LOAD", 2, "a", "|>", "AI.TENSORGET", "a"], TENSOR_EMPTY),  # the scan passes `|>`
    ([R, "LOAD", 3, "a", "b"], "ERR number of keys to LOAD into DAG does not match the number of given arguments"),
    ([E, "LOAD", 3, "a", "b", "ROUTING"], TENSOR_EMPTY),
    # PERSIST
    ([RO, "PERSIST", 1, "a", *TGA], "ERR PERSIST cannot be specified in a read-only DAG"),
    ([RO, "LOAD", 1, "a", "PERSIST", 1, "a", *TGA], "ERR PERSIST cannot be specified in a read-only DAG"),
    ([RRO, "PERSIST", 1, "a", *TGA], "ERR PERSIST cannot be specified in a read-only DAG"),
    ([R, "TIMEOUT", 5, "PERSIST", 1], "ERR missing arguments after PERSIST keyword in DAG command"),
    ([R, "PERSIST", "x", "a", *TGA], "ERR invalid or negative value found in number of keys to PERSIST"),
    ([R, "PERSIST", 0, "a", *TGA], "ERR invalid or negative value found in number of keys to PERSIST"),
    ([E, "PERSIST", -2, "a", *TGA], "ERR invalid or negative value found in number of keys to PERSIST"),
    ([R, "LOAD", 1, "a", "PERSIST", 2, "a", "a", *TGA], "ERR PERSIST keys must be unique"),
    ([R, "LOAD", 1, "a", "PERSIST", 3, "a", "b"],
     "ERR number of keys to PERSIST after DAG execution does not match the number of given arguments"),
    # ROUTING, TIMEOUT
    ([E, "LOAD", 2, "a", "b", "ROUTING"], "ERR Missing ROUTING value"),
    ([E, "LOAD", 2, "a", "b", "TIMEOUT"], "ERR No value provided for TIMEOUT"),
    ([R, "TIMEOUT", "x", *TGA], "ERR Invalid value for TIMEOUT"),
    ([R, "LOAD", 1, "a", "TIMEOUT", "1.5", *TGA], "ERR Invalid value for TIMEOUT"),
    ([E, "LOAD", 1, "a", "TIMEOUT", "", *TGA], "ERR Invalid value for TIMEOUT"),
    # unknown, repeated, misplaced tokens
    ([R, "LOAD", 1, "a", "FOO", *TGA], UNEXP + "FOO"),
    ([E, "LOAD", 1, "a", "foo", *TGA], UNEXP + "foo"),
    ([R, "LOAD", 1, "a", "b", *TGA], UNEXP + "b"),
    ([R, "LOAD", 1, "a", "LOAD", 1, "b", *TGA], UNEXP + "LOAD"),
    ([E, "PERSIST", 1, "a", "LOAD", 1, "a", "PERSIST", 1, "b", *TGA], UNEXP + "PERSIST"),
    ([E, "ROUTING", "a", "ROUTING", "b", *TGA], UNEXP + "ROUTING"),
    ([R, "TIMEOUT", 5, "timeout", 6, *TGA], UNEXP + "timeout"),
    ([R, "LOAD", 1, "a", *TGA, "|>"], UNEXP + "|>"),
    ([R, "LOAD", 1, "a", "|>", *TGA], UNEXP + "|>"),
    ([E, "LOAD", 1, "a", *TGA, "|>", "|>", "AI.TENSORGET", "a"], UNEXP + "|>"),
    # DAGEXECUTE needs LOAD, PERSIST or ROUTING
    ([E, "TIMEOUT", 5, *TGA], NEED_ONE),
    ([RO, "TIMEOUT", 5, *ts("t", "FLOAT", 1)], NEED_ONE),
    # no ops
    ([R, "LOAD", 1, "a"], "ERR DAG is empty"),
    ([E, "LOAD", 1, "a", "TIMEOUT", 5], "ERR DAG is empty"),
    ([RO, "LOAD", 2, "a", "b", "ROUTING", "a"], "ERR DAG is empty"),
    ([RRO, "LOAD", 2, "a", "b"], "ERR DAG is empty"),
    # which ops each form accepts
    ([RO, "LOAD", 1, "a", "|>", "AI.SCRIPTEXECUTE", "s", "f", "INPUTS", 1, "a"],
     "ERR AI.SCRIPTEXECUTE command cannot be specified in a read-only DAG"),
    ([E, "LOAD", 2, "a", "b", "|>", "AI.MODELRUN", "m", "INPUTS", "a", "b", "OUTPUTS", "c"],
     "Deprecated AI.MODELRUN cannot be used in AI.DAGEXECUTE command"),
    ([RO, "LOAD", 2, "a", "b", "|>", "AI.MODELRUN", "m", "INPUTS", "a", "b", "OUTPUTS", "c"],
     "Deprecated AI.MODELRUN cannot be used in AI.DAGEXECUTE command"),
    ([E, "LOAD", 1, "a", "|>", "AI.SCRIPTRUN", "s", "f", "INPUTS", "a"],
     "Deprecated AI.SCRIPTRUN cannot be used in AI.DAGEXECUTE command"),
    ([RO, "LOAD", 1, "a", "|>", "AI.SCRIPTRUN", "s", "f", "INPUTS", "a"],
     "Deprecated AI.SCRIPTRUN cannot be used in AI.DAGEXECUTE command"),
    ([R, "LOAD", 2, "a", "b", *me()], "AI.MODELEXECUTE cannot be used in a deprecated AI.DAGRUN command"),
    ([RRO, "LOAD", 2, "a", "b", *me()], "AI.MODELEXECUTE cannot be used in a deprecated AI.DAGRUN command"),
    ([R, "LOAD", 1, "a", "|>", "AI.SCRIPTEXECUTE", "s", "f", "INPUTS", 1, "a"],
     "AI.SCRIPTEXECUTE cannot be used in a deprecated AI.DAGRUN command"),
    ([RRO, "LOAD", 1, "a", "|>", "AI.SCRIPTEXECUTE", "s", "f", "INPUTS", 1, "a"],
     "AI.SCRIPTEXECUTE cannot be used in a deprecated AI.DAGRUN command"),
    ([R, "LOAD", 1, "a", "|>", "AI.MODELSTORE", "m2", "TF", "CPU", "BLOB", "x"], "Unsupported command within DAG"),
    ([E, "LOAD", 1, "a", "|>", "SET", "a", "b"], "Unsupported command within DAG"),
    ([E, "LOAD", 1, "a", "|>", "AI.TENSORDEL", "a"], "Unsupported command within DAG"),
    ([R, "LOAD", 1, "a", "|>", "AI.INFO", "m"], "Unsupported command within DAG"),
    ([R, "LOAD", 1, "a", "|>", "AI.DAGRUN", "|>", "AI.TENSORGET", "a"], "Unsupported command within DAG"),
    ([R, "LOAD", 1, "a", "|>", "AI.MODELGET", "m"], "Unsupported command within DAG"),
    # local names
    ([E, "LOAD", 1, "a", *me()], NOT_IN_DAG),                          # b is in the keyspace only
    ([R, *TGA], NOT_IN_DAG),                                             # a is in the keyspace only
    ([R, "LOAD", 1, "a", *tg("z"), *ts("z", "FLOAT", 1)], NOT_IN_DAG),   # produced only later
    ([E, "LOAD", 2, "a", "b", *me("m", ("a", "c"), ("c",))], NOT_IN_DAG),  # its own output
    ([R, "LOAD", 1, "a", "|>", "AI.MODELRUN", "m", "INPUTS", "a", "b", "OUTPUTS", "c"], NOT_IN_DAG),
    ([E, "LOAD", 2, "a", "b", "PERSIST", 1, "zz", *me()], "ERR PERSIST key cannot be found in DAG"),
    ([E, "PERSIST", 1, "a", *ts("b", "FLOAT", 1)], "ERR PERSIST key cannot be found in DAG"),
    # errors inside an op's own arguments
    ([E, "LOAD", 2, "a", "b", *me("m", ("a", "b"), ("c",), "TIMEOUT", 100)],
     "ERR TIMEOUT not allowed within a DAG command"),
    ([R, "LOAD", 2, "a", "b", "|>", "AI.MODELRUN", "m", "TIMEOUT", 100, "INPUTS", "a", "b", "OUTPUTS", "c"],
     "ERR TIMEOUT not allowed within a DAG command"),
    ([E, "LOAD", 2, "a", "b", *me("nokey")], MODEL_EMPTY),
    ([E, "LOAD", 2, "a", "b", *me("str")], WRONGTYPE),
    ([E, "LOAD", 2, "a", "b", *me("a")], WRONGTYPE),
    ([E, "LOAD", 2, "a", "b", *me("m", ("a",))],
     "Number of keys given as INPUTS here does not match model definition"),
    ([E, "LOAD", 2, "a", "b", *me("m", ("a", "b"), ("c", "d"))],
     "Number of keys given as OUTPUTS here does not match model definition"),
    ([E, "LOAD", 2, "a", "b", "|>", "AI.MODELEXECUTE", "m", "INPUTS", 2, "a", "b"],
     "ERR wrong number of arguments for 'AI.MODELEXECUTE' command"),
    ([E, "LOAD", 2, "a", "b", "|>", "AI.MODELEXECUTE", "m", "NOTINPUTS", 2, "a", "b", "OUTPUTS", 1, "c"],
     "ERR INPUTS not specified"),
    ([E, "LOAD", 2, "a", "b", *me("m", ("a", "b"), ("c",), "FOO")], "Invalid argument: FOO"),
    ([R, "LOAD", 2, "a", "b", "|>", "AI.MODELRUN", "nokey", "INPUTS", "a", "b", "OUTPUTS", "c"], MODEL_EMPTY),
    ([E, "LOAD", 1, "a", "|>", "AI.SCRIPTEXECUTE", "nokey", "f", "INPUTS", 1, "a"], SCRIPT_EMPTY),
    ([R, "LOAD", 1, "a", "|>", "AI.SCRIPTRUN", "nokey", "f", "INPUTS", "a"], SCRIPT_EMPTY),
    ([R, *ts("x")], "wrong number of arguments for 'AI.TENSORSET' command"),
    ([R, *ts("x", "FLOAT")], "wrong number of arguments for 'AI.TENSORSET' command"),
    ([R, *ts("x", "FOO", 1)], "ERR invalid data type"),
    ([R, *ts("x", "FLOAT", -1)], "ERR invalid or negative value found in tensor shape"),
    ([R, *ts("x", "FLOAT", 2, "VALUES", 1)], "ERR wrong number of values was given in 'AI.TENSORSET' command"),
    ([R, *ts("x", "FLOAT", 2, "BLOB", "abc")], "ERR data length does not match tensor shape and type"),
    ([R, *ts("x", "INT8", 1, "VALUES", "q")], "ERR invalid value"),
    ([R, "LOAD", 1, "a", "|>", "AI.TENSORGET"], "wrong number of arguments for 'AI.TENSORGET' command"),
    ([R, "LOAD", 1, "a", *tg("a", "META", "BLOB", "META")],
     "wrong number of arguments for 'AI.TENSORGET' command"),
    ([R, "LOAD", 1, "a", *tg("a", "FOO")], "ERR unsupported data format"),
    ([R, "LOAD", 1, "a", *tg("a", "LOAD")], "ERR unsupported data format"),  # no header meaning in an op
    ([R, "LOAD", 1, "a", *tg("a", "BLOB", "VALUES")], "ERR both BLOB and VALUES specified"),
    # the first error wins; ops are parsed in order
    ([R, "LOAD", 1, "nokey", "|>", "AI.FOO"], TENSOR_EMPTY),
    ([R, "LOAD", 1, "a", "|>", "AI.FOO", "|>", "AI.TENSORGET", "zz"], "Unsupported command within DAG"),
    ([R, "LOAD", 1, "a", *tg("zz"), "|>", "AI.FOO"], NOT_IN_DAG),
    ([E, "PERSIST", 1, "t", *ts("t", "FLOAT", 1), *me("nokey", ("t", "t"), ("t",))], MODEL_EMPTY),
]


@pytest.mark.parametrize("args,expected", DAG_ERRORS,
                         ids=[f"{i}-{a[0]}-{e[:40]}" for i, (a, e) in enumerate(DAG_ERRORS)])
def test_parse_errors(c, args, expected):
    reply = c.execute(*args)
    assert_error(reply, expected)
    assert not c.pending(wait=0.05), f"a second reply followed the error: {c.read()!r}"
    assert c.execute("EXISTS", "c", "d", "t", "x", "z", "zz", "m2") == 0, "a DAG that failed to parse wrote"
    assert c.execute("AI.TENSORGET", "a", "VALUES") == values(2, 3)
    assert c.execute("GET", "str") == b"x"
    assert info(c, "m")["calls"] == 0, "a DAG that failed to parse ran a model"


# --------------------------------------------------------------------------------------
# TF, TORCH and ONNX models and a TorchScript script in one DAG
# --------------------------------------------------------------------------------------

@pytest.fixture
def mixed(c, install_dir):
    em.require_backend(install_dir, "TORCH")
    em.require_backend(install_dir, "ONNX")
    assert_ok(em.store_tf(c, "tf_plus1", em.tf_add_one_graph(), ["x"], ["out"]))
    assert_ok(c.execute("AI.MODELSTORE", "pt_x3", "TORCH", "CPU", "TAG", "t3", "BLOB",
                        em.torch_times_three_model()))
    assert_ok(c.execute("AI.MODELSTORE", "ort_m1", "ONNX", "CPU", "BLOB", em.onnx_minus_one_model()))
    assert_ok(c.execute("AI.SCRIPTSTORE", "s", "CPU", "TAG", "st", "ENTRY_POINTS", 2, "add_ten",
                        "sub_pair", "SOURCE", em.TORCH_SCRIPT))
    assert_ok(c.execute("AI.TENSORSET", "x", "FLOAT", 1, 3, "VALUES", 1, 2, 3))
    return c


def test_models_and_scripts_of_three_backends_in_one_dag(mixed):
    c = mixed
    reply = c.execute(E, "LOAD", 1, "x", "PERSIST", 2, "out", "t2",
                      *me("tf_plus1", ("x",), ("t1",)),
                      *me("pt_x3", ("t1",), ("t2",)),
                      *me("ort_m1", ("t2",), ("t3",)),
                      "|>", "AI.SCRIPTEXECUTE", "s", "add_ten", "INPUTS", 1, "t3", "OUTPUTS", 1, "out",
                      "|>", "AI.SCRIPTEXECUTE", "s", "sub_pair", "INPUTS", 2, "out", "x", "OUTPUTS", 1, "d",
                      *tg("out", "VALUES"), *tg("d", "META", "VALUES"))
    # ((x + 1) * 3 - 1) + 10
    assert reply[:5] == [OK] * 5, reply
    assert reply[5] == values(15, 18, 21)
    assert reply[6] == [b"dtype", b"FLOAT", b"shape", [1, 3], b"values", values(14, 16, 18)]
    assert c.execute("AI.TENSORGET", "out", "VALUES") == values(15, 18, 21)
    assert c.execute("AI.TENSORGET", "t2", "VALUES") == values(6, 9, 12)
    assert c.execute("EXISTS", "t1", "t3", "d") == 0
    for key, backend in (("tf_plus1", b"TF"), ("pt_x3", b"TORCH"), ("ort_m1", b"ONNX")):
        st = info(c, key)
        assert (st["backend"], st["calls"], st["samples"], st["errors"]) == (backend, 1, 1, 0), st
    st = info(c, "s")
    assert (st["type"], st["backend"], st["tag"], st["calls"], st["samples"]) == \
        (b"SCRIPT", b"TORCH", b"st", 2, -1), st


def test_failing_script_op_in_a_mixed_dag(mixed):
    c = mixed
    reply = c.execute(E, "LOAD", 1, "x", "PERSIST", 1, "t2",
                      *me("pt_x3", ("x",), ("t2",)),
                      "|>", "AI.SCRIPTEXECUTE", "s", "sub_pair", "INPUTS", 1, "t2", "OUTPUTS", 1, "d",
                      *me("ort_m1", ("t2",), ("t3",)),
                      *tg("t2", "VALUES"))
    assert reply[0] == OK
    assert isinstance(reply[1], RespError), reply
    assert reply[2:] == [NA, NA]
    assert c.execute("EXISTS", "t2") == 0
    assert info(c, "s")["errors"] == 1
    assert info(c, "ort_m1")["calls"] == 0


def test_dagrun_with_modelrun_and_scriptrun_of_two_backends(mixed):
    c = mixed
    for cmd in (R, RRO):  # SCRIPTRUN is allowed in DAGRUN_RO too
        reply = c.execute(cmd, "LOAD", 1, "x",
                          "|>", "AI.MODELRUN", "pt_x3", "INPUTS", "x", "OUTPUTS", "y",
                          "|>", "AI.SCRIPTRUN", "s", "add_ten", "INPUTS", "y", "OUTPUTS", "z",
                          "|>", "AI.MODELRUN", "tf_plus1", "INPUTS", "z", "OUTPUTS", "w",
                          *tg("w", "VALUES"))
        assert reply == [OK, OK, OK, values(14, 17, 20)], (cmd, reply)
    assert c.execute("EXISTS", "y", "z", "w") == 0


def test_script_op_errors_in_a_dag(mixed):
    c = mixed
    assert_error(c.execute(E, "LOAD", 1, "x", "|>", "AI.SCRIPTEXECUTE", "s", "add_ten", "INPUTS", 1,
                           "x", "OUTPUTS", 1, "y", "TIMEOUT", 100),
                 "ERR TIMEOUT not allowed within a DAG command")
    assert_error(c.execute(R, "LOAD", 1, "x", "|>", "AI.SCRIPTRUN", "s", "add_ten", "TIMEOUT", 100,
                           "INPUTS", "x", "OUTPUTS", "y"),
                 "ERR TIMEOUT not allowed within a DAG command")
    assert_error(c.execute(E, "LOAD", 1, "x", "|>", "AI.SCRIPTEXECUTE", "s", "add_ten", "INPUTS", 1,
                           "nox", "OUTPUTS", 1, "y"), NOT_IN_DAG)
    assert_error(c.execute(RO, "LOAD", 1, "x", "|>", "AI.SCRIPTEXECUTE", "s", "add_ten", "INPUTS", 1,
                           "x", "OUTPUTS", 1, "y"),
                 "ERR AI.SCRIPTEXECUTE command cannot be specified in a read-only DAG")
    # inside a DAG the first-scope rule of SCRIPTEXECUTE does not apply
    reply = c.execute(E, "LOAD", 1, "x", "|>", "AI.SCRIPTEXECUTE", "s", "add_ten", "ARGS", 1, "q",
                      "INPUTS", 1, "x", "OUTPUTS", 1, "y", *tg("y", "VALUES"))
    assert reply == [OK, values(11, 12, 13)]
    assert info(c, "s")["calls"] == 1


# --------------------------------------------------------------------------------------
# Replication: PERSISTed tensors only, as AI.TENSORSET; a replica serves the RO forms
# --------------------------------------------------------------------------------------

def test_persist_is_replicated_and_replicas_serve_read_only_dags(c, tf_server, module_path,
                                                                 tf_backend_path):
    # no 5 s wait before a diskless full sync (Redis 7's default delay)
    assert c.execute("CONFIG", "SET", "repl-diskless-sync-delay", 0) == "OK"
    replica = RedisServer(module_path, ["TF", str(tf_backend_path)],
                          extra=["--replicaof", "127.0.0.1", str(tf_server.port)])
    try:
        with RawClient(replica.port) as rc:
            def link_up() -> bool:
                text = rc.execute("INFO", "replication").decode()
                return "master_link_status:up" in text
            assert wait_until(link_up, timeout=20.0), rc.execute("INFO", "replication")
            reply = c.execute(E, "LOAD", 2, "a", "b", "PERSIST", 2, "x", "z",
                              *me("m3", ("a", "b"), ("x", "y", "z")))
            assert reply == [OK]
            assert c.execute("WAIT", 1, 5000) == 1
            assert rc.execute("AI.TENSORGET", "x", "VALUES") == values(8, 15)
            assert rc.execute("AI.TENSORGET", "z", "META", "BLOB") == \
                c.execute("AI.TENSORGET", "z", "META", "BLOB")
            assert rc.execute("EXISTS", "y") == 0
            # the read-only forms run on the replica; the writing ones are refused there
            assert rc.execute(RO, "LOAD", 2, "a", "b", *me(), *tg("c", "VALUES")) == \
                [OK, values(8, 15)]
            assert rc.execute(RRO, "LOAD", 2, "a", "b", "|>", "AI.MODELRUN", "m", "INPUTS", "a",
                              "b", "OUTPUTS", "c", *tg("c", "VALUES")) == [OK, values(8, 15)]
            reply = rc.execute(E, "LOAD", 2, "a", "b", "PERSIST", 1, "c", *me())
            assert_error_startswith(reply, "READONLY")
            assert rc.execute("EXISTS", "c") == 0
    finally:
        replica.stop()
        c.execute("CONFIG", "SET", "repl-diskless-sync-delay", 5)
