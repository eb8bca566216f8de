"""Run statistics and INFO (docs/commands.md, "Statistics"; docs/info.md): AI.INFO key
[RESETSTAT], AI._MODELSCAN, AI._SCRIPTSCAN, and the `ai_*` sections of INFO MODULES.

AI.INFO keeps RedisAI's 18-element reply. Counting (docs/commands.md, "How commands run"): one call
per request; on success duration += run time (a batched request gets the whole batch's
time) and samples += dim 0 of output 0; on error calls and errors += 1; parse errors,
skipped (NA) ops and timed-out requests count nothing; a request whose client went away
still counts. The stats table is global across DBs, keyed by name.

INFO MODULES adds, over 1.2, the real framework version of every backend (Torch included,
1.2 printed NA). `ai_backends_info` holds exactly 1.2's lines (one `ai_<Framework>_version`
per loaded backend, then ONNX's three counters), since tools count that section's lines; our
`ai_<Framework>_path` lines live in a section of their own, `ai_backends_paths`. RedisAI 1.2's
five sections come first, in 1.2's order (`ai_cpu` fifth), and ours after them.

Servers: conftest's tf_server (one per module) for AI.INFO; a server with the three
backends and non-default load-time settings for INFO MODULES (skipped while the Torch or
ONNX backend is not built); small servers of their own for the no-backend and lazy-load
cases."""
from __future__ import annotations

import os
import re

import pytest

import engine_models as em
import tf_graphs
from helpers import LogMark, assert_error, assert_ok, wait_until
from redis_server import ISOLATE_ENV, Connect, RedisServer, StartServer
from resp import RawClient, RespError, Status

from build_tools import pins

NO_INFO = "ERR cannot find run info for key"
CPU_TIME = re.compile(r"^\d+\.\d{6}$")


@pytest.fixture
def c(tf_server: RedisServer, connect: Connect) -> RawClient:
    return connect(tf_server)


def store_mul(c: RawClient, key: str = "m", *opts, device: str = "CPU") -> None:
    assert_ok(em.store_tf(c, key, tf_graphs.mul_graph(), ["a", "b"], ["mul"], *opts, device=device))


def set_ab(c: RawClient, n: int = 2) -> None:
    vals = list(range(1, n + 1))
    assert_ok(c.execute("AI.TENSORSET", "a", "FLOAT", n, "VALUES", *vals))
    assert_ok(c.execute("AI.TENSORSET", "b", "FLOAT", n, "VALUES", *vals))


def run_mul(c: RawClient, key: str = "m", a: str = "a", b: str = "b", out: str = "c"):
    return c.execute("AI.MODELEXECUTE", key, "INPUTS", 2, a, b, "OUTPUTS", 1, out)


def info(c: RawClient, key: str) -> dict:
    reply = c.execute("AI.INFO", key)
    assert isinstance(reply, list) and len(reply) == 18, reply
    assert [reply[k] for k in range(0, 18, 2)] == [
        b"key", b"type", b"backend", b"device", b"tag", b"duration", b"samples", b"calls", b"errors"]
    return {reply[k].decode(): reply[k + 1] for k in range(0, 18, 2)}


def counters(st: dict) -> tuple:
    return st["calls"], st["samples"], st["errors"]


# --------------------------------------------------------------------------------------
# AI.INFO
# --------------------------------------------------------------------------------------

def test_info_of_a_new_model(c):
    store_mul(c, "m", "TAG", "v1")
    reply = c.execute("AI.INFO", "m")
    assert reply == [b"key", b"m", b"type", b"MODEL", b"backend", b"TF", b"device", b"CPU",
                     b"tag", b"v1", b"duration", 0, b"samples", 0, b"calls", 0, b"errors", 0]
    store_mul(c, "m2", device="cpu")
    st = info(c, "m2")
    assert st["tag"] == b"" and st["device"] == c.execute("AI.MODELGET", "m2", "META")[3]


def test_success_counts_calls_samples_and_time(c):
    store_mul(c)
    set_ab(c, 2)
    assert_ok(run_mul(c))
    st = info(c, "m")
    assert counters(st) == (1, 2, 0), st
    assert st["duration"] > 0
    d1 = st["duration"]
    # samples is dim 0 of output 0: a [3, 2] run adds 3
    assert_ok(c.execute("AI.TENSORSET", "x", "FLOAT", 3, 2, "VALUES", *range(6)))
    assert_ok(run_mul(c, a="x", b="x"))
    assert_ok(c.execute("AI.MODELRUN", "m", "INPUTS", "a", "b", "OUTPUTS", "c"))
    st = info(c, "m")
    assert counters(st) == (3, 7, 0), st
    assert st["duration"] > d1


def test_scalar_output_adds_no_samples(c):
    store_mul(c)
    assert_ok(c.execute("AI.TENSORSET", "s", "FLOAT", "VALUES", 3))
    assert_ok(run_mul(c, a="s", b="s"))
    assert counters(info(c, "m")) == (1, 0, 0)


def test_failure_counts_calls_and_errors_only(c):
    store_mul(c)
    set_ab(c, 2)
    assert_ok(run_mul(c))
    before = info(c, "m")
    assert_ok(c.execute("AI.TENSORSET", "bad", "FLOAT", 3, "VALUES", 1, 2, 3))
    assert isinstance(run_mul(c, b="bad"), RespError)
    assert isinstance(run_mul(c, b="bad"), RespError)
    st = info(c, "m")
    assert counters(st) == (3, 2, 2), st
    assert st["duration"] == before["duration"], "a failed run added run time"


def test_parse_errors_count_nothing(c):
    store_mul(c)
    set_ab(c)
    assert_error(run_mul(c, b="nokey"), "ERR tensor key is empty or in a different shard")
    assert_error(c.execute("AI.MODELEXECUTE", "m", "INPUTS", 1, "a", "OUTPUTS", 1, "c"),
                 "Number of keys given as INPUTS here does not match model definition")
    assert_error(c.execute("AI.DAGEXECUTE", "LOAD", 1, "a", "|>", "AI.MODELEXECUTE", "m", "INPUTS",
                           2, "a", "b", "OUTPUTS", 1, "c"), "ERR INPUT key cannot be found in DAG")
    assert counters(info(c, "m")) == (0, 0, 0)


def test_dag_ops_count_per_op_and_skipped_ops_not_at_all(c):
    store_mul(c)
    store_mul(c, "m_other")
    set_ab(c)
    assert_ok(c.execute("AI.TENSORSET", "bad", "FLOAT", 3, "VALUES", 1, 2, 3))
    reply = c.execute("AI.DAGEXECUTE", "LOAD", 3, "a", "b", "bad",
                      "|>", "AI.MODELEXECUTE", "m", "INPUTS", 2, "a", "b", "OUTPUTS", 1, "c",
                      "|>", "AI.MODELEXECUTE", "m", "INPUTS", 2, "c", "b", "OUTPUTS", 1, "d")
    assert reply == [Status("OK"), Status("OK")]
    assert counters(info(c, "m")) == (2, 4, 0)
    reply = c.execute("AI.DAGEXECUTE", "LOAD", 3, "a", "b", "bad",
                      "|>", "AI.MODELEXECUTE", "m", "INPUTS", 2, "a", "b", "OUTPUTS", 1, "c",
                      "|>", "AI.MODELEXECUTE", "m", "INPUTS", 2, "c", "bad", "OUTPUTS", 1, "d",
                      "|>", "AI.MODELEXECUTE", "m_other", "INPUTS", 2, "a", "b", "OUTPUTS", 1, "e",
                      "|>", "AI.MODELEXECUTE", "m", "INPUTS", 2, "a", "b", "OUTPUTS", 1, "f")
    assert reply[0] == "OK" and isinstance(reply[1], RespError) and reply[2:] == ["NA", "NA"], reply
    assert counters(info(c, "m")) == (4, 6, 1)
    assert counters(info(c, "m_other")) == (0, 0, 0)


def test_resetstat(c):
    store_mul(c, "m", "TAG", "kept")
    set_ab(c)
    assert_ok(run_mul(c))
    assert_ok(c.execute("AI.TENSORSET", "bad", "FLOAT", 3, "VALUES", 1, 2, 3))
    assert isinstance(run_mul(c, b="bad"), RespError)
    st = info(c, "m")
    assert counters(st) == (2, 2, 1) and st["duration"] > 0
    reply = c.execute("AI.INFO", "m", "RESETSTAT")
    assert isinstance(reply, Status) and reply == "OK", reply
    assert c.execute("AI.INFO", "m") == [b"key", b"m", b"type", b"MODEL", b"backend", b"TF",
                                         b"device", b"CPU", b"tag", b"kept", b"duration", 0,
                                         b"samples", 0, b"calls", 0, b"errors", 0]
    # counting goes on from zero; the keyword is case-insensitive
    assert_ok(run_mul(c))
    assert counters(info(c, "m")) == (1, 2, 0)
    assert_ok(c.execute("AI.INFO", "m", "resetstat"))
    assert counters(info(c, "m")) == (0, 0, 0)
    # the model itself is untouched
    assert c.execute("AI.MODELGET", "m", "BLOB") == tf_graphs.mul_graph()


def test_other_third_argument_is_ignored(c):
    store_mul(c)
    set_ab(c)
    assert_ok(run_mul(c))
    assert counters(info(c, "m")) == (1, 2, 0)
    reply = c.execute("AI.INFO", "m", "NOTRESET")
    assert isinstance(reply, list) and len(reply) == 18 and reply[-3] == 1, reply
    assert counters(info(c, "m")) == (1, 2, 0)


def test_info_errors(c):
    store_mul(c)
    set_ab(c)
    c.execute("SET", "str", "x")
    assert_error(c.execute("AI.INFO"), "ERR wrong number of arguments for 'ai.info' command")
    assert_error(c.execute("AI.INFO", "m", "RESETSTAT", "x"),
                 "ERR wrong number of arguments for 'ai.info' command")
    for key in ("nokey", "a", "str"):
        assert_error(c.execute("AI.INFO", key), NO_INFO)
        assert_error(c.execute("AI.INFO", key, "RESETSTAT"), NO_INFO)


def test_entry_lives_with_the_model(c):
    store_mul(c)
    set_ab(c)
    assert_ok(run_mul(c))
    assert counters(info(c, "m")) == (1, 2, 0)
    # a re-store resets the entry
    store_mul(c, "m", "TAG", "new")
    st = info(c, "m")
    assert counters(st) == (0, 0, 0) and st["tag"] == b"new"
    # MODELDEL, DEL, FLUSHALL and an overwrite by another type remove it
    assert_ok(c.execute("AI.MODELDEL", "m"))
    assert_error(c.execute("AI.INFO", "m"), NO_INFO)
    store_mul(c)
    assert c.execute("DEL", "m") == 1
    assert_error(c.execute("AI.INFO", "m"), NO_INFO)
    store_mul(c)
    assert_ok(c.execute("FLUSHALL", "SYNC"))
    assert_error(c.execute("AI.INFO", "m"), NO_INFO)
    store_mul(c)
    assert c.execute("SET", "m", "x") == "OK"
    assert_error(c.execute("AI.INFO", "m"), NO_INFO)
    # the deprecated MODELSET creates an entry too
    assert_ok(c.execute("AI.MODELSET", "ms", "TF", "CPU", "TAG", "old", "INPUTS", "a", "b",
                        "OUTPUTS", "mul", "BLOB", tf_graphs.mul_graph()))
    st = info(c, "ms")
    assert (st["type"], st["backend"], st["tag"]) == (b"MODEL", b"TF", b"old")


def test_entry_after_debug_reload(c):
    """RDB load creates a fresh entry (zero counters) for every model it loads."""
    store_mul(c, "m", "TAG", "t")
    set_ab(c)
    assert_ok(run_mul(c))
    assert_ok(c.execute("DEBUG", "RELOAD"))
    st = info(c, "m")
    assert (st["tag"], counters(st), st["duration"]) == (b"t", (0, 0, 0), 0), st
    assert_ok(run_mul(c))
    assert counters(info(c, "m")) == (1, 2, 0)


def test_stats_are_global_across_dbs(c):
    assert c.execute("SELECT", 2) == "OK"
    try:
        store_mul(c, "mdb", "TAG", "db2")
        set_ab(c)
        assert_ok(run_mul(c, "mdb"))
    finally:
        assert c.execute("SELECT", 0) == "OK"
    assert counters(info(c, "mdb")) == (1, 2, 0)
    assert c.execute("AI._MODELSCAN") == [[b"mdb", b"db2"]]
    assert_ok(c.execute("AI.INFO", "mdb", "RESETSTAT"))
    assert c.execute("EXISTS", "mdb") == 0


def test_a_disconnected_client_is_still_counted(c, tf_server, slow_n):
    assert_ok(c.execute("AI.MODELSTORE", "slow", "TF", "CPU", "INPUTS", 1, "n", "OUTPUTS", 1,
                        "out", "BLOB", tf_graphs.slow_graph()))
    assert_ok(c.execute("AI.TENSORSET", "n", "INT32", "VALUES", slow_n(0.3)))
    gone = RawClient(tf_server.port)
    gone.send("AI.MODELEXECUTE", "slow", "INPUTS", 1, "n", "OUTPUTS", 1, "o")
    assert em.wait_until_blocked(c, 1)
    gone.close()
    assert wait_until(lambda: info(c, "slow")["calls"] == 1, timeout=5.0), info(c, "slow")
    st = info(c, "slow")
    assert (st["calls"], st["errors"], st["samples"]) == (1, 0, 8) and st["duration"] > 0, st
    assert c.execute("EXISTS", "o") == 0, "the result of a disconnected client was stored"


def test_batched_requests_each_get_the_batch_time(tf_one_worker_server: RedisServer,
                                                  connect: Connect) -> None:
    # one worker (conftest.py): the test holds it with a slow run so that requests batch
    tf_server = tf_one_worker_server
    c = connect(tf_server)
    slow_n = em.calibrate_slow(c)
    assert_ok(em.store_tf(c, "bs", em.tf_batch_size_graph(), ["x"], ["bs", "y"], "BATCHSIZE", 4))
    assert_ok(em.store_tf(c, "w", em.tf_wrong_batch_graph(), ["x"], ["out"], "BATCHSIZE", 4))
    rows = [1, 2, 1]
    for i, r in enumerate(rows):
        assert_ok(c.execute("AI.TENSORSET", f"x{i}", "FLOAT", r, 2, "VALUES", *range(2 * r)))
    clients = [RawClient(tf_server.port) for _ in range(6)]
    try:
        with em.HeldQueue(tf_server.port, slow_n(0.4)) as h:
            for i in range(3):
                clients[i].send("AI.MODELEXECUTE", "bs", "INPUTS", 1, f"x{i}", "OUTPUTS", 2,
                                f"b{i}", f"y{i}")
                h.wait_queued(2 + i)
            for i in range(3):
                clients[3 + i].send("AI.MODELEXECUTE", "w", "INPUTS", 1, f"x{i}", "OUTPUTS", 1,
                                    f"o{i}")
                h.wait_queued(5 + i)
        replies = [cl.read() for cl in clients]
    finally:
        for cl in clients:
            cl.close()
    assert replies[:3] == ["OK"] * 3, replies
    for i in range(3):
        assert c.execute("AI.TENSORGET", f"b{i}", "VALUES")[0] == b"4", "not one batch of 4"
        assert_error(replies[3 + i], "ERR Model did not generate the expected batch size")
    st = info(c, "bs")
    assert counters(st) == (3, 4, 0), st
    assert st["duration"] > 0 and st["duration"] % 3 == 0, \
        f"3 requests of one batch should each add the batch's run time: {st}"
    st = info(c, "w")
    assert counters(st) == (3, 0, 3) and st["duration"] == 0, st


# --------------------------------------------------------------------------------------
# AI._MODELSCAN / AI._SCRIPTSCAN
# --------------------------------------------------------------------------------------

def test_modelscan(c, tf_server):
    assert c.execute("AI._MODELSCAN") == []
    store_mul(c, "m1", "TAG", "t1")
    store_mul(c, "m2")
    assert_ok(c.execute("AI.TENSORSET", "t", "FLOAT", 1))
    mark = LogMark(tf_server.logfile)
    reply = c.execute("AI._MODELSCAN")
    assert sorted(reply) == [[b"m1", b"t1"], [b"m2", b""]]
    mark.wait_for_line("MODELSCAN is experimental and might be removed in future versions")
    assert c.execute("AI._SCRIPTSCAN") == []
    mark.wait_for_line("SCRIPTSCAN is experimental and might be removed in future versions")
    assert_ok(c.execute("AI.MODELDEL", "m1"))
    assert c.execute("AI._MODELSCAN") == [[b"m2", b""]]
    assert_error(c.execute("AI._MODELSCAN", "x"),
                 "ERR wrong number of arguments for 'ai._modelscan' command")
    assert_error(c.execute("AI._SCRIPTSCAN", "x"),
                 "ERR wrong number of arguments for 'ai._scriptscan' command")


# --------------------------------------------------------------------------------------
# Scripts and the other backends (Torch, ONNX)
# --------------------------------------------------------------------------------------

def test_script_and_torch_onnx_model_stats(c, install_dir):
    em.require_backend(install_dir, "TORCH")
    em.require_backend(install_dir, "ONNX")
    assert_ok(c.execute("AI.SCRIPTSTORE", "s", "CPU", "TAG", "st", "ENTRY_POINTS", 2, "add_ten",
                        "sub_pair", "SOURCE", em.TORCH_SCRIPT))
    assert_ok(c.execute("AI.MODELSTORE", "pt", "TORCH", "CPU", "TAG", "p", "BLOB",
                        em.torch_times_three_model()))
    assert_ok(c.execute("AI.MODELSTORE", "ort", "ONNX", "CPU", "BLOB", em.onnx_minus_one_model()))
    assert c.execute("AI.INFO", "s") == [b"key", b"s", b"type", b"SCRIPT", b"backend", b"TORCH",
                                         b"device", b"CPU", b"tag", b"st", b"duration", 0,
                                         b"samples", -1, b"calls", 0, b"errors", 0]
    assert c.execute("AI._SCRIPTSCAN") == [[b"s", b"st"]]
    assert sorted(c.execute("AI._MODELSCAN")) == [[b"ort", b""], [b"pt", b"p"]]
    assert_ok(c.execute("AI.TENSORSET", "x", "FLOAT", 3, 2, "VALUES", *range(6)))
    assert_ok(c.execute("AI.SCRIPTEXECUTE", "s", "add_ten", "INPUTS", 1, "x", "OUTPUTS", 1, "y"))
    assert_ok(c.execute("AI.SCRIPTRUN", "s", "add_ten", "INPUTS", "x", "OUTPUTS", "y"))
    assert isinstance(c.execute("AI.SCRIPTEXECUTE", "s", "sub_pair", "INPUTS", 1, "x", "OUTPUTS",
                                1, "y"), RespError)
    st = info(c, "s")
    assert (st["calls"], st["samples"], st["errors"]) == (3, -1, 1) and st["duration"] > 0, st
    assert_ok(c.execute("AI.INFO", "s", "RESETSTAT"))
    assert (info(c, "s")["calls"], info(c, "s")["samples"]) == (0, -1)
    for key, backend in (("pt", b"TORCH"), ("ort", b"ONNX")):
        assert_ok(c.execute("AI.MODELEXECUTE", key, "INPUTS", 1, "x", "OUTPUTS", 1, "z"))
        st = info(c, key)
        assert (st["backend"], st["type"], counters(st)) == (backend, b"MODEL", (1, 3, 0)), st
    assert_ok(c.execute("AI.SCRIPTDEL", "s"))
    assert_error(c.execute("AI.INFO", "s"), NO_INFO)
    assert c.execute("AI._SCRIPTSCAN") == []


# --------------------------------------------------------------------------------------
# INFO MODULES
# --------------------------------------------------------------------------------------

def parse_info(text: bytes | str) -> list[tuple[str, list[tuple[str, str]]]]:
    if isinstance(text, bytes):
        text = text.decode()
    sections: list[tuple[str, list[tuple[str, str]]]] = []
    for line in text.splitlines():
        line = line.strip()
        if not line:
            continue
        if line.startswith("# "):
            sections.append((line[2:], []))
        else:
            k, _, v = line.partition(":")
            sections[-1][1].append((k, v))
    return sections


# Last in ai_backends_paths: models built on their kind's default because the backend they
# name (AI.MODELSTORE ... BACKEND) is missing here (test_backend_names.py).
FALLBACK = "ai_models_on_fallback_backend"


def ai_sections(c: RawClient) -> dict[str, list[tuple[str, str]]]:
    secs = parse_info(c.execute("INFO", "MODULES"))
    names = [n for n, _ in secs]
    if os.environ.get(ISOLATE_ENV) and names[-1:] == ["ai_isolation"]:
        names = names[:-1]  # the suite runs isolated: the hosts' own section comes last
    # 1.2's five sections first, in 1.2's order (tools take them by position), then ours
    assert names == ["Modules", "ai_versions", "ai_git", "ai_load_time_configs", "ai_backends_info",
                     "ai_cpu", "ai_backends_paths", "ai_inline_runs", "ai_completions",
                     "ai_helpers", "ai_threads"], names
    return dict(secs)


def check_cpu_section(fields: list[tuple[str, str]], queues: dict[str, int]) -> None:
    names = [k for k, _ in fields]
    head = ["ai_self_used_cpu_sys", "ai_self_used_cpu_user", "ai_children_used_cpu_sys",
            "ai_children_used_cpu_user", "ai_main_thread_used_cpu_sys", "ai_main_thread_used_cpu_user"]
    assert names[:6] == head, names
    threads = sorted(names[6:])
    expected = sorted(f"ai_queue_{q}_bthread_n{i}_used_cpu_total" for q, n in queues.items()
                      for i in range(1, n + 1))
    assert threads == expected, names
    for k, v in fields:
        assert CPU_TIME.match(v) or v == "N/A", f"{k}:{v}"


def torch_versions() -> set[str]:
    v = em.framework_versions().get("TORCH", "")
    return {v, v.split("+")[0]}


@pytest.fixture(scope="module")
def three_backends(start_server: StartServer, install_dir) -> tuple[RedisServer, dict]:
    paths = {k: em.backend_path(install_dir, k) for k in ("TF", "TORCH", "ONNX")}
    missing = [str(p) for p in paths.values() if not p.exists()]
    if missing:
        pytest.skip(f"backends not built yet: {', '.join(missing)}")
    # loaded in the reverse of the report order: the report order is fixed
    args = ["ONNX", str(paths["ONNX"]), "TORCH", str(paths["TORCH"]), "TF", str(paths["TF"]),
            "THREADS_PER_QUEUE", 2, "INTER_OP_PARALLELISM", 1, "INTRA_OP_PARALLELISM", 2,
            "MODEL_EXECUTION_TIMEOUT", 3000, "BACKEND_MEMORY_LIMIT", 4096]
    return start_server([str(a) for a in args]), paths


def test_info_modules_with_three_backends(three_backends):
    srv, paths = three_backends
    with RawClient(srv.port) as c:
        secs = ai_sections(c)
        # Ours among the server's modules, wherever it is listed (Redis 8 lists its own
        # vectorset module before it).
        mods = [v for k, v in secs["Modules"] if k == "module" and v.startswith("name=ai,")]
        assert len(mods) == 1 and mods[0].startswith(f"name=ai,ver={pins.VERSION_NUM},"), mods
        assert mods[0].endswith("options=[handle-io-errors]"), mods
        assert secs["ai_versions"] == [("ai_RedisAI_version", pins.VERSION),
                                       ("ai_low_level_API_version", "1"), ("ai_rdb_version", "4")]
        assert [k for k, _ in secs["ai_git"]] == ["ai_git_sha"] and secs["ai_git"][0][1]
        assert secs["ai_load_time_configs"] == [
            ("ai_threads_per_queue", "2"), ("ai_inter_op_parallelism", "1"),
            ("ai_intra_op_parallelism", "2"), ("ai_model_execution_timeout", "3000"),
            ("ai_backend_memory_limit", "4096")]
        # an ONNX model stored and run, so the allocator counters have something to count
        assert_ok(c.execute("AI.MODELSTORE", "ort", "ONNX", "CPU", "BLOB", em.onnx_minus_one_model()))
        assert_ok(c.execute("AI.TENSORSET", "x", "FLOAT", 2, 2, "VALUES", 1, 2, 3, 4))
        assert_ok(c.execute("AI.MODELEXECUTE", "ort", "INPUTS", 1, "x", "OUTPUTS", 1, "y"))
        secs = ai_sections(c)
        be = secs["ai_backends_info"]
        names = [k for k, _ in be]
        # 1.2's lines and nothing else: one version line per backend, then ONNX's counters
        assert names[:3] == ["ai_TensorFlow_version", "ai_Torch_version",
                             "ai_onnxruntime_version"], names
        f = dict(be)
        versions = em.framework_versions()
        assert f["ai_TensorFlow_version"] == versions["TF"]
        assert f["ai_Torch_version"] in torch_versions(), f"Torch version {f['ai_Torch_version']!r}"
        assert f["ai_onnxruntime_version"] == versions["ONNX"]
        bp = secs["ai_backends_paths"]
        assert [k for k, _ in bp] == ["ai_TensorFlow_path", "ai_Torch_path",
                                      "ai_onnxruntime_path", FALLBACK], bp
        for kind, field in (("TF", "TensorFlow"), ("TORCH", "Torch"), ("ONNX", "onnxruntime")):
            p = dict(bp)[f"ai_{field}_path"]
            assert os.path.isabs(p) and os.path.samefile(p, paths[kind]), f"{field} path {p!r}"
        check_cpu_section(secs["ai_cpu"], {"CPU": 2})
        # docs/info.md: the ONNX backend's own fields follow (its allocator's counters)
        assert names[3:] == ["ai_onnxruntime_memory", "ai_onnxruntime_memory_access_num",
                             "ai_onnxruntime_maximum_run_sessions_number"], names
        for k in ("ai_onnxruntime_memory", "ai_onnxruntime_memory_access_num",
                  "ai_onnxruntime_maximum_run_sessions_number"):
            assert f[k].isdigit(), f"{k}:{f[k]}"
        assert int(f["ai_onnxruntime_memory_access_num"]) > 0, be
        # one run session per worker thread: the CPU queue with THREADS_PER_QUEUE 2
        assert f["ai_onnxruntime_maximum_run_sessions_number"] == "2", be


def test_info_modules_tf_only(module_path, tf_backend_path):
    """Only the loaded backend's fields; default load-time settings. (A server of its own:
    the module's tf_server has Torch and ONNX lazily loaded by the tests above.)"""
    srv = RedisServer(module_path, ["TF", str(tf_backend_path)])
    try:
        with RawClient(srv.port) as c:
            secs = ai_sections(c)
            assert secs["ai_backends_info"] == [
                ("ai_TensorFlow_version", em.framework_versions()["TF"])]
            assert secs["ai_backends_paths"] == [("ai_TensorFlow_path", str(tf_backend_path)),
                                                 (FALLBACK, "0")]
            # a tool asking for the section alone gets 1.2's lines and nothing more
            assert parse_info(c.execute("INFO", "ai_backends_info")) == [
                ("ai_backends_info", [("ai_TensorFlow_version", em.framework_versions()["TF"])])]
            assert secs["ai_load_time_configs"] == [
                ("ai_threads_per_queue", "1"), ("ai_inter_op_parallelism", "0"),
                ("ai_intra_op_parallelism", "0"), ("ai_model_execution_timeout", "5000"),
                ("ai_backend_memory_limit", "0")]
            # THREADS_PER_QUEUE unset: the worker and, on two cores or more and with no
            # backend isolated, the CPU queue's helper (engine/run_queue.c)
            helpers = 0 if os.environ.get(ISOLATE_ENV) or len(os.sched_getaffinity(0)) < 2 else 1
            check_cpu_section(secs["ai_cpu"], {"CPU": 1 + helpers})
            assert secs["ai_helpers"] == [("ai_helper_workers", str(helpers)),
                                          ("ai_helper_runs", "0")]
    finally:
        srv.stop()


def test_info_modules_without_backends_and_after_lazy_load(module_path, install_dir):
    srv = RedisServer(module_path)
    try:
        with RawClient(srv.port) as c:
            secs = ai_sections(c)
            assert secs["ai_backends_info"] == [], secs["ai_backends_info"]
            assert secs["ai_backends_paths"] == [(FALLBACK, "0")], secs["ai_backends_paths"]
            torch_so = em.backend_path(install_dir, "TORCH")
            if not torch_so.exists():
                pytest.skip(f"TORCH backend not built yet: {torch_so} is missing")
            # a lazy load (MODELSTORE with no TORCH backend yet) reports the default path
            assert_ok(c.execute("AI.MODELSTORE", "pt", "TORCH", "CPU", "BLOB",
                                em.torch_times_three_model()))
            secs = ai_sections(c)
            be = dict(secs["ai_backends_info"])
            assert list(be) == ["ai_Torch_version"], be
            assert be["ai_Torch_version"] in torch_versions(), be
            assert be["ai_Torch_version"] != "NA"
            bp = dict(secs["ai_backends_paths"])
            assert list(bp) == ["ai_Torch_path", FALLBACK], bp
            assert os.path.samefile(bp["ai_Torch_path"], torch_so), bp
    finally:
        srv.stop()
