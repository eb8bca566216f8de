"""Backends by name (issue 13, docs/isolation.md "Two versions of one kind" and "RDB, AOF and
replication"): `AI.MODELSTORE key <kind> <device> BACKEND <name>`, the name in META, the name
in the RDB device field (and encoding 5's name field, which earlier builds wrote), DUMP/RESTORE,
the AOF and replication, the fallback to the kind's default where
the named backend is missing (replica, restart), the module arguments ISOLATE and
BACKEND_START_TIMEOUT, and `AI.CONFIG LOADBACKEND ... ISOLATED`.

Isolated backends run in a backend host through the isolation proxy. While the proxy is a
placeholder that refuses every isolated load, the tests that need a working one skip (the
skip checks that `LOADBACKEND ... ISOLATED` still answers the placeholder's "not built yet"
text, so they run by themselves once it works); the tests that only need an isolated load to
reach the proxy accept either outcome: the placeholder's refusal, or a loaded backend.

Two ONNX "versions" without building a second one: a temporary BACKENDSPATH holding folders
`redisai_onnxruntime-a/` and `redisai_onnxruntime-b/`, each with a copy of the install's
backend file. A backend's name is its folder's, so they are two backends by name.
"""
from __future__ import annotations

import os
import pathlib
import shutil
from typing import Any, Iterator

import numpy as np
import pytest

import onnx_models as om
import rdb_payloads as rp
from acl_wording import learn
from helpers import LOAD_ERR, LogMark, arity, assert_error, assert_error_startswith, assert_ok
from helpers import info_field
from model_io import get, put
from native import FIXTURE_SRC, cc_shared
from persist_servers import Servers, by_key, read_commands, aof_files, wait_info, \
    wait_rewrite_done
from redis_server import RedisServer, start_expecting_failure
from resp import RawClient, RespError

RESTRICTED = ["on", ">pw", "+@all", "-@admin", "-@dangerous", "~*"]
FALLBACK_FIELD = "ai_models_on_fallback_backend"


# --------------------------------------------------------------------------------------
# The install tree, a second tree of two ONNX folders, and whether the proxy works.
# --------------------------------------------------------------------------------------

def _default_name(backends: pathlib.Path, framework: str) -> str:
    link = backends / f"redisai_{framework}"
    if not link.is_symlink():
        pytest.skip(f"no default {framework} backend link {link}")
    return os.readlink(link)[len("redisai_"):]


@pytest.fixture(scope="module")
def backends(install_dir: pathlib.Path) -> pathlib.Path:
    return install_dir / "backends"


@pytest.fixture(scope="module")
def onnx_name(backends: pathlib.Path, onnx_backend_path: pathlib.Path) -> str:
    return _default_name(backends, "onnxruntime")


@pytest.fixture(scope="module")
def torch_name(backends: pathlib.Path, torch_backend_path: pathlib.Path) -> str:
    return _default_name(backends, "torch")


@pytest.fixture(scope="module")
def two_onnx(tmp_path_factory: pytest.TempPathFactory,
             onnx_backend_path: pathlib.Path) -> pathlib.Path:
    """BACKENDSPATH with redisai_onnxruntime-a/ and -b/, each a copy of the install's ONNX
    backend file (200 KB) and a link to its lib/ (ONNX Runtime itself), no manifest, and
    the default link redisai_onnxruntime -> redisai_onnxruntime-a."""
    root = tmp_path_factory.mktemp("two_onnx")
    real = onnx_backend_path.resolve()
    for n in ("a", "b"):
        d = root / f"redisai_onnxruntime-{n}"
        d.mkdir()
        shutil.copy2(real, d / "redisai_onnxruntime.so")
        (d / "lib").symlink_to(real.parent / "lib")
    (root / "redisai_onnxruntime").symlink_to("redisai_onnxruntime-a")
    return root


@pytest.fixture
def servers(module_path: pathlib.Path) -> Iterator[Servers]:
    s = Servers(module_path, [])
    yield s
    s.close()


def meta(c: RawClient, key: str, *words: str) -> list[Any]:
    reply = c.execute("AI.MODELGET", key, "META", *words)
    assert isinstance(reply, list), reply
    return reply


def meta_dict(c: RawClient, key: str) -> dict[str, Any]:
    reply = meta(c, key)
    return {k.decode(): v for k, v in zip(reply[::2], reply[1::2])}


def listing(c: RawClient) -> dict[str, dict[str, Any]]:
    out = {}
    for e in c.execute("AI.CONFIG", "LIST"):
        d = {k.decode(): (v.decode() if isinstance(v, bytes) else v)
             for k, v in zip(e[::2], e[1::2])}
        out[d["name"]] = d
    return out


def run_add(c: RawClient, key: str) -> None:
    """Runs om.add() stored at key and checks its result."""
    built = om.add()
    for n, a in zip(("ra", "rb"), built.sample):
        put(c, n, a)
    assert_ok(c.execute("AI.MODELEXECUTE", key, "INPUTS", 2, "ra", "rb", "OUTPUTS", 1, "rc"))
    np.testing.assert_allclose(get(c, "rc"), built.run(*built.sample)[0], rtol=1e-6)


def store(c: RawClient, key: str, name: str | None, kind: str = "ONNX",
          blob: bytes | None = None) -> Any:
    named = ["BACKEND", name] if name is not None else []
    return c.execute("AI.MODELSTORE", key, kind, "CPU", *named, "TAG", "t1", "BLOB",
                     om.add().blob if blob is None else blob)


def fallbacks(c: RawClient) -> int:
    return int(info_field(c.execute("INFO", "ai_backends_paths"), FALLBACK_FIELD))


# --------------------------------------------------------------------------------------
# MODELSTORE ... BACKEND <name>, META
# --------------------------------------------------------------------------------------

@pytest.mark.inprocess_only("the default loads in-process (isolated no)")
def test_naming_the_default_backend_is_stored_and_shown_by_meta(fresh, onnx_name):
    """The first ONNX model names the default's folder: loaded as lazy loading would
    (in-process), the name recorded; META appends backend_name only for a named model,
    after every 1.2 field (blob included); the model runs."""
    with RawClient(fresh.port) as c:
        assert_ok(store(c, "m", onnx_name))
        assert_ok(store(c, "plain", None))
        got = meta(c, "m")
        assert len(got) == 18 and got[-2:] == [b"backend_name", onnx_name.encode()], got
        assert meta(c, "plain")[:16] == got[:16] and len(meta(c, "plain")) == 16
        with_blob = meta(c, "m", "BLOB")
        assert len(with_blob) == 20 and with_blob[16:18] == [b"blob", om.add().blob]
        assert with_blob[18:] == [b"backend_name", onnx_name.encode()]
        assert len(meta(c, "plain", "BLOB")) == 18
        assert c.execute("AI.MODELGET", "m", "BLOB") == om.add().blob
        run_add(c, "m")
        e = listing(c)[onnx_name]
        assert (e["loaded"], e["isolated"], e["models"]) == (1, "no", 2), e
        # The default link's name is the same backend: resolved to it, recorded as given.
        assert_ok(store(c, "viaLink", "onnxruntime"))
        assert meta_dict(c, "viaLink")["backend_name"] == b"onnxruntime"
        assert listing(c)[onnx_name]["models"] == 3
        # Overwrites and deletes count down on the named backend.
        assert_ok(c.execute("AI.MODELDEL", "viaLink"))
        assert_ok(store(c, "m", None))
        assert "backend_name" not in meta_dict(c, "m")
        assert listing(c)[onnx_name]["models"] == 2
        assert fallbacks(c) == 0


def test_backend_is_positional_and_not_a_key(fresh, onnx_name):
    """BACKEND only right after the device; a TAG value spelled BACKEND is a tag; the name
    is no key (COMMAND GETKEYS); a missing or empty name is an error."""
    with RawClient(fresh.port) as c:
        assert_ok(c.execute("AI.MODELSTORE", "m", "ONNX", "CPU", "TAG", "BACKEND", "BLOB",
                            om.add().blob))
        d = meta_dict(c, "m")
        assert d["tag"] == b"BACKEND" and "backend_name" not in d
        assert_error(c.execute("AI.MODELSTORE", "m", "ONNX", "CPU", "TAG", "x", "BACKEND",
                               onnx_name, "BLOB", om.add().blob),
                     "ERR Invalid argument, expected BLOB")
        assert c.execute("COMMAND", "GETKEYS", "AI.MODELSTORE", "m", "ONNX", "CPU", "BACKEND",
                         onnx_name, "BLOB", b"x") == [b"m"]
        assert_error(c.execute("AI.MODELSTORE", "m", "ONNX", "CPU", "BACKEND", "", "BLOB",
                               b"x"), "ERR BACKEND: invalid backend name")
        assert_error(c.execute("AI.MODELSTORE", "m", "ONNX", "CPU", "BACKEND"),
                     arity("AI.MODELSTORE"))
        # MODELSET (1.2's frozen syntax) takes no name: BACKEND there is no keyword.
        assert_ok(c.execute("AI.MODELSET", "s", "ONNX", "CPU", "BLOB", om.add().blob))
        assert "backend_name" not in meta_dict(c, "s")


def test_wrong_kind_and_unknown_names_are_refused(fresh, onnx_name, torch_name, backends):
    """A name of another kind's backend, loaded or only a folder, and a name that exists
    nowhere: refused with the names there are; the key is untouched."""
    with RawClient(fresh.port) as c:
        assert_ok(c.execute("AI.CONFIG", "LOADBACKEND", "TORCH", torch_name))
        assert_error(store(c, "m", torch_name),
                     f"ERR backend {torch_name} is a TORCH backend, not ONNX")
        tf = _default_name(backends, "tensorflow")
        assert_error(store(c, "m", tf), f"ERR backend {tf} is a TF backend, not ONNX")
        reply = assert_error_startswith(store(c, "m", "onnxruntime-0.0.0-cpu"),
                                        "ERR no ONNX backend named onnxruntime-0.0.0-cpu: ")
        names = reply.split(": ", 1)[1].split(", ")
        want = sorted(d.name[len("redisai_"):] for d in backends.glob("redisai_onnxruntime*"))
        assert sorted(names) == want, reply
        assert_error(store(c, "m", "../x"), "ERR no ONNX backend named ../x: " + reply.split(
            ": ", 1)[1])
        # Loaded ones first, then the folders not loaded under their name.
        torch_folders = sorted(d.name[len("redisai_"):] for d in backends.glob("redisai_torch*"))
        assert_error(store(c, "m", "nope", kind="TORCH"),
                     "ERR no TORCH backend named nope: " + ", ".join(
                         [torch_name] + [n for n in torch_folders if n != torch_name]))
        assert c.execute("EXISTS", "m") == 0
        # Nothing of ONNX was loaded by the refusals.
        assert listing(c)[onnx_name]["loaded"] == 0


@pytest.mark.inprocess_only("onnxruntime-a in-process beside an isolated onnxruntime-b")
def test_second_version_is_loaded_isolated_on_the_spot(module_path, two_onnx):
    """With onnxruntime-a in-process (the default), naming onnxruntime-b loads it isolated:
    the model runs there and LIST says isolated yes."""
    s = RedisServer(module_path, ["BACKENDSPATH", str(two_onnx), "ONNX", "onnxruntime-a"])
    try:
        with RawClient(s.port) as c:
            assert_ok(store(c, "a", "onnxruntime-a"))
            reply = store(c, "b", "onnxruntime-b")
            assert_ok(reply)
            run_add(c, "b")
            got = listing(c)
            assert (got["onnxruntime-a"]["isolated"], got["onnxruntime-b"]["isolated"]) == \
                ("no", "yes"), got
            assert got["onnxruntime-b"]["models"] == 1
    finally:
        s.stop()


# --------------------------------------------------------------------------------------
# Persistence: RDB, DUMP/RESTORE, AOF, replication
# --------------------------------------------------------------------------------------

def test_model_payload_holds_the_name_and_v5_payloads_still_load(fresh, onnx_name):
    """DUMP: encoding 4, the name after the device's NUL (the device alone for an unnamed
    model, as RedisAI 1.2 writes it); RESTORE keeps it; a v5 payload (the name as a field of
    its own, as earlier builds wrote it) loads with the name; a v5 name with a NUL is bad
    data. tests/persistence/test_rdb_both_ways.py checks the layouts byte for byte."""
    with RawClient(fresh.port) as c:
        assert_ok(store(c, "m", onnx_name))
        assert_ok(store(c, "plain", None))
        p = rp.parse_dump(c.execute("DUMP", "m"))
        assert (p.type_name, p.encver) == ("AI__MODEL", 4)
        assert p.fields[:3] == [rp.U(3), rp.cstr("CPU") + b"backend=" + rp.cstr(onnx_name),
                                b"t1"]
        assert rp.parse_dump(c.execute("DUMP", "plain")).fields[1] == rp.cstr("CPU")
        assert_ok(c.execute("RESTORE", "copy", 0, c.execute("DUMP", "m")))
        assert meta(c, "copy") == meta(c, "m")
        run_add(c, "copy")
        v5 = [p.fields[0], rp.cstr("CPU"), rp.cstr(onnx_name), *p.fields[2:]]
        assert_ok(c.execute("RESTORE", "old", 0, rp.dump_payload("AI__MODEL", 5, v5,
                                                                  p.rdb_version)))
        assert meta(c, "old") == meta(c, "m")
        run_add(c, "old")
        bad = list(v5)
        bad[2] = b"on\x00nx\x00"
        reply = c.execute("RESTORE", "bad", 0, rp.dump_payload("AI__MODEL", 5, bad,
                                                                p.rdb_version))
        assert isinstance(reply, RespError), reply
        assert c.execute("EXISTS", "bad") == 0


def test_tensors_round_trip_and_v5_tensors_load(fresh):
    """Tensors are written as v4 and load back (DUMP/RESTORE and DEBUG RELOAD); earlier builds
    wrote them as v5 with v4's layout, which must load as such: read with the v0 layout they
    would be refused or garbled."""
    with RawClient(fresh.port) as c:
        a = np.arange(12, dtype=np.float32).reshape(3, 4)
        put(c, "t", a)
        assert_ok(c.execute("AI.TENSORSET", "s", "STRING", 2, "VALUES", "ab", "c"))
        p = rp.parse_dump(c.execute("DUMP", "t"))
        assert (p.type_name, p.encver) == ("AI_TENSOR", 4)
        assert_ok(c.execute("RESTORE", "t2", 0, c.execute("DUMP", "t")))
        assert_ok(c.execute("RESTORE", "s2", 0, c.execute("DUMP", "s")))
        np.testing.assert_array_equal(get(c, "t2"), a)
        assert c.execute("AI.TENSORGET", "s2", "VALUES") == [b"ab", b"c"]
        # v5 payloads of the same layout still load.
        for key in ("t", "s"):
            p = rp.parse_dump(c.execute("DUMP", key))
            assert_ok(c.execute("RESTORE", f"{key}5", 0, rp.dump_payload(
                "AI_TENSOR", 5, p.fields, p.rdb_version)))
        np.testing.assert_array_equal(get(c, "t5"), a)
        assert c.execute("AI.TENSORGET", "s5", "VALUES") == [b"ab", b"c"]
        assert_ok(c.execute("DEBUG", "RELOAD"))
        np.testing.assert_array_equal(get(c, "t"), a)
        np.testing.assert_array_equal(get(c, "t2"), a)
        assert c.execute("AI.TENSORGET", "s", "VALUES") == [b"ab", b"c"]


def test_name_survives_save_and_restart(servers, onnx_name):
    first = servers.start()
    with RawClient(first.port) as c:
        assert_ok(store(c, "m", onnx_name))
        assert_ok(store(c, "plain", None))
        before = (meta(c, "m", "BLOB"), meta(c, "plain", "BLOB"))
        assert_ok(c.execute("SAVE"))
    first.stop()
    second = servers.start(data_dir=first.data_dir)
    with RawClient(second.port) as c:
        assert (meta(c, "m", "BLOB"), meta(c, "plain", "BLOB")) == before
        run_add(c, "m")
        assert listing(c)[onnx_name]["models"] == 2
        assert fallbacks(c) == 0


def test_aof_rewrite_writes_backend_only_for_named_models(servers, onnx_name):
    first = servers.start(extra=["--appendonly", "yes", "--aof-use-rdb-preamble", "no"])
    with RawClient(first.port) as c:
        assert_ok(store(c, "m", onnx_name))
        assert_ok(store(c, "plain", None))
        before = (meta(c, "m", "BLOB"), meta(c, "plain", "BLOB"))
        assert c.execute("BGREWRITEAOF") == "Background append only file rewriting started"
        wait_rewrite_done(c)
    cmds = by_key(read_commands(aof_files(first.data_dir)["b"]), "AI.MODELSTORE")
    assert cmds[b"m"][2:6] == [b"ONNX", b"CPU", b"BACKEND", onnx_name.encode()], cmds[b"m"][:8]
    assert cmds[b"plain"][2:5] == [b"ONNX", b"CPU", b"TAG"], cmds[b"plain"][:8]
    first.stop()
    second = servers.start(data_dir=first.data_dir, extra=["--appendonly", "yes"])
    with RawClient(second.port) as c:
        assert (meta(c, "m", "BLOB"), meta(c, "plain", "BLOB")) == before
        run_add(c, "m")


def _attach(replica: RedisServer, master: RedisServer, rc: RawClient, mc: RawClient) -> None:
    assert_ok(rc.execute("REPLICAOF", "127.0.0.1", master.port))
    wait_info(rc, "replication", {"master_link_status": "up", "master_sync_in_progress": "0"})
    assert mc.execute("WAIT", 1, 30000) == 1


def test_name_replicates_by_full_sync_and_by_command(servers, onnx_name):
    master = servers.start(extra=["--repl-diskless-sync-delay", "0"])
    replica = servers.start()
    with RawClient(master.port) as mc, RawClient(replica.port) as rc:
        assert_ok(store(mc, "before", onnx_name))
        _attach(replica, master, rc, mc)
        assert_ok(store(mc, "after", onnx_name))
        assert mc.execute("WAIT", 1, 30000) == 1
        for key in ("before", "after"):
            assert meta(rc, key, "BLOB") == meta(mc, key, "BLOB"), key
        assert fallbacks(rc) == 0
        assert_ok(rc.execute("REPLICAOF", "NO", "ONE"))  # AI.CONFIG is a write command
        assert listing(rc)[onnx_name]["models"] == 2


# --------------------------------------------------------------------------------------
# The fallback: a replica or a restart that lacks the named backend
# --------------------------------------------------------------------------------------

def test_replica_without_the_named_backend_falls_back(servers, two_onnx, onnx_name):
    """The master runs onnxruntime-a (a folder the replica's BACKENDSPATH lacks): the
    replica builds the models, from the full sync and from the command stream, on its ONNX
    default, keeps the name, logs a warning naming key, wanted and used backend, counts
    them in INFO; promoted, it runs them and saves the name on."""
    master = servers.start(extra=["--repl-diskless-sync-delay", "0"],
                           module_args=["BACKENDSPATH", str(two_onnx), "ONNX", "onnxruntime-a"])
    replica = servers.start(module_args=["ONNX", onnx_name])
    mark = LogMark(replica.logfile)
    with RawClient(master.port) as mc, RawClient(replica.port) as rc:
        assert_ok(store(mc, "synced", "onnxruntime-a"))
        _attach(replica, master, rc, mc)
        assert_ok(store(mc, "streamed", "onnxruntime-a"))
        assert mc.execute("WAIT", 1, 30000) == 1
        for key in ("synced", "streamed"):
            assert meta(rc, key, "BLOB") == meta(mc, key, "BLOB"), key
            mark.wait_for_line(f"Model {key} wants the ONNX backend onnxruntime-a",
                               f"default backend {onnx_name}")
        assert fallbacks(rc) == 2 and fallbacks(mc) == 0
        # Promoted, its own client may not name a backend it lacks.
        assert_ok(rc.execute("REPLICAOF", "NO", "ONE"))
        assert listing(rc)[onnx_name]["models"] == 2
        assert_error_startswith(store(rc, "mine", "onnxruntime-a"),
                                "ERR no ONNX backend named onnxruntime-a: ")
        run_add(rc, "synced")
        assert rp.parse_dump(rc.execute("DUMP", "streamed")).fields[1] == \
            rp.cstr("CPU") + b"backend=" + rp.cstr("onnxruntime-a")
        assert rc.execute("DEL", "synced") == 1
        assert fallbacks(rc) == 1


@pytest.mark.inprocess_only("the default link's target loads in-process")
def test_restart_without_the_named_backend_falls_back(servers, two_onnx, onnx_name):
    first = servers.start(module_args=["BACKENDSPATH", str(two_onnx)])
    with RawClient(first.port) as c:
        # The default link's target, before anything of ONNX: loads in-process.
        assert_ok(store(c, "m", "onnxruntime-a"))
        assert listing(c)["onnxruntime-a"]["isolated"] == "no"
        before = meta(c, "m", "BLOB")
        assert_ok(c.execute("SAVE"))
    first.stop()
    second = servers.start(data_dir=first.data_dir)
    with RawClient(second.port) as c:
        assert meta(c, "m", "BLOB") == before
        assert fallbacks(c) == 1
        run_add(c, "m")
        assert listing(c)[onnx_name]["models"] == 1
    assert "Model m wants the ONNX backend onnxruntime-a" in second.log()


def test_restore_of_a_missing_name_falls_back(fresh, onnx_name):
    """RESTORE is an RDB load: lenient like a replica's, the name kept."""
    with RawClient(fresh.port) as c:
        assert_ok(store(c, "m", onnx_name))
        p = rp.parse_dump(c.execute("DUMP", "m"))
        fields = list(p.fields)
        fields[1] = rp.cstr("CPU") + b"backend=" + rp.cstr("onnxruntime-9.9.9-cpu")
        assert_ok(c.execute("RESTORE", "x", 0, rp.dump_payload("AI__MODEL", 4, fields,
                                                                p.rdb_version)))
        assert meta_dict(c, "x")["backend_name"] == b"onnxruntime-9.9.9-cpu"
        assert fallbacks(c) == 1
        run_add(c, "x")


# --------------------------------------------------------------------------------------
# Module arguments and LOADBACKEND ... ISOLATED
# --------------------------------------------------------------------------------------

@pytest.mark.parametrize("args, text", [
    (["ISOLATE", "PYTORCH"], "ERR error processing argument: ISOLATE PYTORCH (expected a "
                             "backend kind: TF, TFLITE, TORCH or ONNX)"),
    (["BACKEND_START_TIMEOUT", "999"], "ERR error processing argument: BACKEND_START_TIMEOUT "
                                       "999 (expected milliseconds, an integer of at least 1000)"),
    (["BACKEND_START_TIMEOUT", "1.5e4"], "ERR error processing argument: BACKEND_START_TIMEOUT "
                                         "1.5e4 (expected milliseconds"),
    (["ISOLATE"], "ERR module arguments must be key value pairs"),
])
def test_bad_isolation_arguments_fail_the_load(module_path, args, text):
    assert text in start_expecting_failure(module_path, args)


def test_good_isolation_arguments_start(module_path):
    s = RedisServer(module_path, ["isolate", "tf", "ISOLATE", "TFLITE", "ISOLATE", "tf",
                                  "BACKEND_START_TIMEOUT", "1000"])
    try:
        with RawClient(s.port) as c:
            assert c.execute("PING") == "PONG"
    finally:
        s.stop()


def test_isolate_applies_before_the_kinds_own_argument(module_path, torch_name):
    """`TORCH <name> ISOLATE TORCH`: the backend argument comes first, but loads isolated."""
    args = ["TORCH", torch_name, "ISOLATE", "TORCH", "BACKEND_START_TIMEOUT", "120000"]
    s = RedisServer(module_path, args)
    try:
        with RawClient(s.port) as c:
            assert listing(c)[torch_name]["isolated"] == "yes"
    finally:
        s.stop()


def test_isolate_makes_lazy_loading_isolated(module_path):
    """With ISOLATE ONNX, the lazily loaded default goes through the proxy."""
    s = RedisServer(module_path, ["ISOLATE", "ONNX"])
    try:
        with RawClient(s.port) as c:
            assert_ok(store(c, "m", None))
            run_add(c, "m")
    finally:
        s.stop()


@pytest.mark.inprocess_only("one in-process backend per kind")
def test_loadbackend_isolated(fresh, onnx_name, torch_name):
    """The trailing word ISOLATED (any case) sends the load to the proxy; anything else
    there is refused; one in-process backend per kind as before; names are unique."""
    with RawClient(fresh.port) as c:
        assert_error(c.execute("AI.CONFIG", "LOADBACKEND", "TORCH", torch_name, "ISOLATE"),
                     "ERR LOADBACKEND: unexpected argument after the path (expected ISOLATED)")
        assert_error(c.execute("AI.CONFIG", "LOADBACKEND", "TORCH", torch_name, "ISOLATED",
                               "x"), arity("AI.CONFIG"))
        reply = c.execute("AI.CONFIG", "loadbackend", "torch", torch_name, "isolated")
        assert_ok(reply)
        assert listing(c)[torch_name]["isolated"] == "yes"
        assert_ok(c.execute("AI.CONFIG", "LOADBACKEND", "ONNX", onnx_name))
        assert_error_startswith(c.execute("AI.CONFIG", "LOADBACKEND", "ONNX", "onnxruntime"),
                                f"{LOAD_ERR}ONNX backend already loaded from ")
        # The same folder isolated too would take a name that is taken.
        reply = c.execute("AI.CONFIG", "LOADBACKEND", "ONNX", onnx_name, "ISOLATED")
        assert_error_startswith(reply, f"{LOAD_ERR}a backend named {onnx_name} is already "
                                       "loaded (from ")


@pytest.mark.inprocess_only("one in-process backend per kind")
def test_second_backend_of_a_kind_by_loadbackend(module_path, two_onnx):
    """In-process onnxruntime-a, then onnxruntime-b: refused in-process (one per kind),
    sent to the proxy when ISOLATED."""
    s = RedisServer(module_path, ["BACKENDSPATH", str(two_onnx), "ONNX", "onnxruntime-a"])
    try:
        with RawClient(s.port) as c:
            assert_error_startswith(
                c.execute("AI.CONFIG", "LOADBACKEND", "ONNX", "onnxruntime-b"),
                f"{LOAD_ERR}ONNX backend already loaded from {two_onnx}/redisai_onnxruntime-a/")
            reply = c.execute("AI.CONFIG", "LOADBACKEND", "ONNX", "onnxruntime-b", "ISOLATED")
            assert_ok(reply)
            got = listing(c)
            assert (got["onnxruntime-a"]["isolated"], got["onnxruntime-b"]["isolated"]) \
                == ("no", "yes")
            # The default stays the first: an unnamed model goes to onnxruntime-a.
            assert_ok(store(c, "m", None))
            assert listing(c)["onnxruntime-a"]["models"] == 1
    finally:
        s.stop()


def test_restricted_user_cannot_loadbackend_isolated(fresh, torch_name, onnx_name):
    """LOADBACKEND ... ISOLATED is as admin-only as LOADBACKEND. Naming a backend in
    MODELSTORE is not: like lazy loading, it only picks among the folders under
    BACKENDSPATH, which an admin chose."""
    noperm_load = learn(fresh.port).command("dev", "ai.config|loadbackend")
    with RawClient(fresh.port) as admin, RawClient(fresh.port) as dev:
        assert_ok(admin.execute("ACL", "SETUSER", "dev", *RESTRICTED))
        assert_ok(dev.execute("AUTH", "dev", "pw"))
        assert_error(dev.execute("AI.CONFIG", "LOADBACKEND", "TORCH", torch_name, "ISOLATED"),
                     noperm_load)
        assert_error(dev.execute("AI.CONFIG", "loadbackend", "torch", "/tmp/x.so", "isolated"),
                     noperm_load)
        assert listing(admin)[torch_name]["loaded"] == 0
        assert_ok(store(dev, "m", onnx_name))
        assert_error_startswith(store(dev, "m", "/tmp/redisai_x/redisai_onnxruntime.so"),
                                "ERR no ONNX backend named /tmp/redisai_x/")
        assert meta_dict(dev, "m")["backend_name"] == onnx_name.encode()


# --------------------------------------------------------------------------------------
# Isolated backends by name
# --------------------------------------------------------------------------------------

def test_isolated_backend_by_name_runs_and_persists(servers, two_onnx):
    """Two ONNX backends at once, one isolated; the named model survives SAVE and restart
    on the same BACKENDSPATH (rebuilt on its isolated backend, no fallback)."""
    args = ["BACKENDSPATH", str(two_onnx), "ONNX", "onnxruntime-a"]
    first = servers.start(module_args=args)
    with RawClient(first.port) as c:
        assert_ok(store(c, "a", None))
        assert_ok(store(c, "b", "onnxruntime-b"))
        run_add(c, "a")
        run_add(c, "b")
        assert_ok(c.execute("SAVE"))
    first.stop()
    second = servers.start(data_dir=first.data_dir, module_args=args)
    with RawClient(second.port) as c:
        assert fallbacks(c) == 0
        got = listing(c)
        assert (got["onnxruntime-b"]["isolated"], got["onnxruntime-b"]["models"]) == ("yes", 1)
        run_add(c, "b")


# --------------------------------------------------------------------------------------
# ABI 1.5: the key a backend is told (nothing of it is visible with the real backends)
# --------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def key_echo(tmp_path_factory: pytest.TempPathFactory) -> pathlib.Path:
    so = tmp_path_factory.mktemp("key_echo") / "key_echo.so"
    cc_shared("-o", str(so), str(FIXTURE_SRC / "key_echo.c"))
    return so


def test_backends_are_told_the_key(servers, key_echo):
    """RAI_ModelSpec.key: MODELSTORE's key, and the key an RDB load rebuilds; RAI_RunInfo.key:
    MODELEXECUTE's key, each DAG op's own key, a DAG run through another key of the same
    model (RESTORE'd copy)."""
    first = servers.start(module_args=["ONNX", str(key_echo)])
    with RawClient(first.port) as c:
        assert_error(c.execute("AI.MODELSTORE", "{k}m0", "ONNX", "CPU", "BLOB", "fail"),
                     "ERR key_echo create <{k}m0>")
        assert_ok(c.execute("AI.MODELSTORE", "{k}m1", "ONNX", "CPU", "BLOB", "ok"))
        assert_ok(c.execute("AI.MODELSTORE", "{k}m2", "ONNX", "CPU", "BLOB", "ok"))
        assert_ok(c.execute("AI.TENSORSET", "{k}x", "FLOAT", 1, "VALUES", 1))
        assert_error(c.execute("AI.MODELEXECUTE", "{k}m1", "INPUTS", 1, "{k}x", "OUTPUTS", 1,
                               "{k}y"), "ERR key_echo run <{k}m1>")
        assert_error(c.execute("AI.MODELRUN", "{k}m2", "INPUTS", "{k}x", "OUTPUTS", "{k}y"),
                     "ERR key_echo run <{k}m2>")
        reply = c.execute("AI.DAGEXECUTE", "LOAD", 1, "{k}x", "|>", "AI.MODELEXECUTE", "{k}m2",
                          "INPUTS", 1, "{k}x", "OUTPUTS", 1, "y")
        assert isinstance(reply, list) and str(reply[0]) == "ERR key_echo run <{k}m2>", reply
        assert_ok(c.execute("RESTORE", "{k}copy", 0, c.execute("DUMP", "{k}m1")))
        assert_error(c.execute("AI.MODELEXECUTE", "{k}copy", "INPUTS", 1, "{k}x", "OUTPUTS", 1,
                               "{k}y"), "ERR key_echo run <{k}copy>")
        # An RDB load builds with the key it loads: a payload whose blob is "fail" is
        # refused, and the log names the key the backend was told.
        p = rp.parse_dump(c.execute("DUMP", "{k}m1"))
        fields = list(p.fields)
        fields[-1] = b"fail"
        fields[-3] = rp.U(4)
        mark = LogMark(first.logfile)
        assert isinstance(c.execute("RESTORE", "{k}bad", 0, rp.dump_payload(
            "AI__MODEL", p.encver, fields, p.rdb_version)), RespError)
        mark.wait_for_line("ERR key_echo create <{k}bad>")
