"""Backend loading (AI.CONFIG LOADBACKEND, load-time TF/ONNX/... arguments, lazy loading)
and module configuration (docs/configuration.md, docs/backends.md).

Every refused load must reply `ERR error loading backend: <reason>`, keep the server
running, log one line naming the file and the reason, and leave the type's slot free.
The fixture backends are compiled from tests/fixtures/backends/ by conftest.

On a server where a module cannot check its caller's ACL (Redis 6.2: no
RedisModule_ACLCheckCommandPermissions, asked of the server by conftest's server_facts),
AI.CONFIG LOADBACKEND and BACKENDSPATH answer an error for every user (issue 21; their
texts are tests/compat/'s): the tests of runtime loads skip there, and the load-time
tests check that the runtime call is refused instead of "already loaded".
"""
from __future__ import annotations

import importlib.metadata
import os
import pathlib
import re
import shutil
import time
from typing import Any

import pytest

from helpers import (DEFAULT_CHUNK_SIZE, LOAD_ERR, LogMark, assert_error,
                     assert_error_startswith, assert_ok)
from paths import ROOT
from redis_server import RedisServer, isolate_args, start_expecting_failure
from resp import RawClient, RespError
from server_facts import ServerFacts


def _abi_major() -> int:
    text = (ROOT / "include" / "redisai" / "backend_abi.h").read_text()
    return int(re.search(r"#define\s+RAI_ABI_MAJOR\s+(\d+)", text).group(1))


def _tf_version() -> str:
    for dist in ("tensorflow-cpu", "tensorflow"):
        try:
            return importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            continue
    return ""


SECONDS_RE = re.compile(r"\d+(\.\d+)?\s?s(ec(ond)?s?)?\b")
NO_RUNTIME_LOADS = ("this server has no RedisModule_ACLCheckCommandPermissions (Redis 6.2): "
                    "AI.CONFIG LOADBACKEND and BACKENDSPATH answer an error there "
                    "(tests/compat/)")


@pytest.fixture(scope="module")
def runtime_loads(server_facts: ServerFacts) -> bool:
    """Whether AI.CONFIG LOADBACKEND and BACKENDSPATH run on this server."""
    return server_facts.checks_acl


@pytest.fixture
def needs_runtime_loads(runtime_loads: bool) -> None:
    if not runtime_loads:
        pytest.skip(NO_RUNTIME_LOADS)


def _second_load_refused(reply: Any, runtime_loads: bool) -> None:
    """A runtime LOADBACKEND of a kind already loaded: `already loaded`; where runtime
    loads are refused (Redis 6.2), an error all the same."""
    if runtime_loads:
        assert "already loaded" in assert_error_startswith(reply, LOAD_ERR)
    else:
        assert isinstance(reply, RespError), reply


def _check_refused(srv: RedisServer, c: RawClient, btype: str, path: pathlib.Path | str,
                   reason_parts: list[tuple[str, ...]]) -> str:
    """LOADBACKEND must be refused with the prefix, a reason containing one of each tuple
    of alternatives, a log line naming the file and the reason; the server answers PING."""
    mark = LogMark(srv.logfile)
    reply = c.execute("AI.CONFIG", "LOADBACKEND", btype, str(path))
    text = assert_error_startswith(reply, LOAD_ERR)
    reason = text[len(LOAD_ERR):]
    assert reason, "the reply gives no reason after the prefix"
    for alts in reason_parts:
        assert any(a in reason for a in alts), f"reason {reason!r} lacks any of {alts!r}"
    assert "\n" not in text and "\r" not in text
    assert c.execute("PING") == "PONG"
    assert srv.alive()
    # One log line naming the file and the reason.
    deadline = time.monotonic() + 2.0
    while not any(str(path) in ln and all(any(a in ln for a in alts) for alts in reason_parts)
                  for ln in mark.lines()):
        assert time.monotonic() < deadline, (
            f"no new log line names {str(path)!r} with the reason {reason_parts!r}; "
            f"new log:\n{mark.text()}")
        time.sleep(0.05)
    return reason


# --------------------------------------------------------------------------------------
# Refused loads, each on the module's shared server (no backend ever loads successfully
# there, so no reply can be "already loaded" by accident).
# --------------------------------------------------------------------------------------

@pytest.mark.usefixtures("needs_runtime_loads")
def test_missing_file(server, raw, fixture_backends):
    p = fixture_backends.missing
    reason = _check_refused(server, raw, "TF", p, [(str(p),),
                                                   ("cannot open: No such file or directory",)])
    assert str(p) in reason


@pytest.mark.usefixtures("needs_runtime_loads")
def test_not_a_shared_object(server, raw, fixture_backends):
    _check_refused(server, raw, "TF", fixture_backends.not_elf,
                   [("not an ELF file",)])


@pytest.mark.usefixtures("needs_runtime_loads")
def test_missing_entry_symbol(server, raw, fixture_backends):
    _check_refused(server, raw, "TF", fixture_backends.no_entry, [("RAI_BackendEntry",)])


@pytest.mark.usefixtures("needs_runtime_loads")
def test_abi_major_mismatch(server, raw, fixture_backends):
    reason = _check_refused(server, raw, "TF", fixture_backends.abi_major_999,
                            [("ABI",), ("999",)])
    # Both majors: the backend's 999 and the core's own.
    assert re.search(rf"(?<!\d){_abi_major()}(?!\d)", reason.replace("999", "")), reason


@pytest.mark.usefixtures("needs_runtime_loads")
def test_descriptor_too_small(server, raw, fixture_backends):
    _check_refused(server, raw, "TF", fixture_backends.small_table, [("size",)])


@pytest.mark.usefixtures("needs_runtime_loads")
def test_needed_library_missing(server, raw, fixture_backends):
    _check_refused(server, raw, "TF", fixture_backends.needs_missing_lib,
                   [(fixture_backends.missing_lib_name,)])


@pytest.mark.usefixtures("needs_runtime_loads")
def test_wrong_kind_fixture_onnx_as_tf(server, raw, fixture_backends):
    _check_refused(server, raw, "TF", fixture_backends.onnx_kind, [("ONNX",), ("TF",)])


@pytest.mark.usefixtures("needs_runtime_loads")
def test_wrong_kind_tf_as_torch(server, raw, tf_backend_path):
    _check_refused(server, raw, "TORCH", tf_backend_path, [("TF",), ("TORCH",)])


@pytest.mark.usefixtures("needs_runtime_loads")
def test_relative_missing_path_resolves_against_backendspath(server, raw, tmp_path):
    before = raw.execute("AI.CONFIG", "GET", "BACKENDSPATH")
    assert_ok(raw.execute("AI.CONFIG", "BACKENDSPATH", str(tmp_path)))
    try:
        reason = _check_refused(server, raw, "TF", tmp_path / "nothere" / "x.so",
                                [("cannot open: No such file or directory",)])
        # Same through a relative path: the reason names the resolved path.
        reply = raw.execute("AI.CONFIG", "LOADBACKEND", "TF", "nothere/x.so")
        text = assert_error_startswith(reply, LOAD_ERR)
        assert f"{tmp_path}/nothere/x.so" in text, text
        assert reason
    finally:
        assert_ok(raw.execute("AI.CONFIG", "BACKENDSPATH", before))


@pytest.mark.usefixtures("needs_runtime_loads")
def test_unknown_backend_type(raw, tf_backend_path):
    assert_error(raw.execute("AI.CONFIG", "LOADBACKEND", "FOO", str(tf_backend_path)),
                 "ERR unsupported backend")
    assert_error(raw.execute("AI.CONFIG", "LOADBACKEND", "TENSORFLOW", str(tf_backend_path)),
                 "ERR unsupported backend")
    assert raw.execute("PING") == "PONG"


@pytest.mark.usefixtures("needs_runtime_loads")
def test_loadbackend_arity(raw, server_facts):
    assert_error(raw.execute("AI.CONFIG", "LOADBACKEND", "TF"), server_facts.arity("AI.CONFIG"))
    assert_error(raw.execute("AI.CONFIG", "LOADBACKEND"), server_facts.arity("AI.CONFIG"))


# --------------------------------------------------------------------------------------
# Successful loads, one load per type: each on its own fresh server.
# --------------------------------------------------------------------------------------

@pytest.mark.usefixtures("needs_runtime_loads")
def test_failures_do_not_poison_the_slot_and_second_load_refused(module_path, tf_backend_path,
                                                                  fixture_backends):
    srv = RedisServer(module_path)
    try:
        with RawClient(srv.port) as c:
            for bad in (fixture_backends.missing, fixture_backends.not_elf,
                        fixture_backends.no_entry, fixture_backends.abi_major_999,
                        fixture_backends.small_table, fixture_backends.needs_missing_lib,
                        fixture_backends.onnx_kind):
                assert_error_startswith(c.execute("AI.CONFIG", "LOADBACKEND", "TF", str(bad)),
                                        LOAD_ERR)
            mark = LogMark(srv.logfile)
            assert_ok(c.execute("AI.CONFIG", "LOADBACKEND", "TF", str(tf_backend_path)))
            # One log line per successful load: type, path, framework version, seconds.
            line = mark.wait_for_line(str(tf_backend_path))
            assert "TF" in line, line
            version = _tf_version()
            if version:
                assert version in line, f"TF version {version} not in {line!r}"
            rest = line.replace(str(tf_backend_path), " ").replace(version or "\0", " ")
            assert SECONDS_RE.search(rest), f"no seconds figure in {line!r}"
            # A second load of the same type is refused, the first stays usable.
            mark = LogMark(srv.logfile)
            reply = c.execute("AI.CONFIG", "LOADBACKEND", "TF", str(tf_backend_path))
            reason = assert_error_startswith(reply, LOAD_ERR)
            assert "already loaded" in reason, reason
            mark.wait_for_line(str(tf_backend_path), "already loaded")
            assert c.execute("PING") == "PONG"
            # Lower-case type token, another file, still one backend per type.
            reply = c.execute("AI.CONFIG", "LOADBACKEND", "tf", str(fixture_backends.onnx_kind))
            assert_error_startswith(reply, LOAD_ERR)
    finally:
        srv.stop()


@pytest.mark.usefixtures("needs_runtime_loads")
def test_fixture_onnx_backend_loads_and_runs(module_path, fixture_backends):
    """The ABI end to end with no framework: the ONNX-kind fixture loads as ONNX, its
    reported names are kept, its identity run returns the input, its error text is
    passed through, and a second ONNX load is refused."""
    srv = RedisServer(module_path)
    try:
        with RawClient(srv.port) as c:
            mark = LogMark(srv.logfile)
            assert_ok(c.execute("AI.CONFIG", "LOADBACKEND", "ONNX", str(fixture_backends.onnx_kind)))
            line = mark.wait_for_line(str(fixture_backends.onnx_kind))
            assert "ONNX" in line and "9.8.7" in line, line
            assert_ok(c.execute("AI.MODELSTORE", "m", "ONNX", "CPU", "BLOB", b"anything"))
            meta = c.execute("AI.MODELGET", "m", "META")
            assert meta == [b"backend", b"ONNX", b"device", b"CPU", b"tag", b"",
                            b"batchsize", 0, b"minbatchsize", 0, b"inputs", [b"x"],
                            b"outputs", [b"y"], b"minbatchtimeout", 0], meta
            assert_ok(c.execute("AI.TENSORSET", "a", "FLOAT", 2, "VALUES", 1, 2.5))
            assert_ok(c.execute("AI.MODELEXECUTE", "m", "INPUTS", 1, "a", "OUTPUTS", 1, "b"))
            assert c.execute("AI.TENSORGET", "b", "VALUES") == [b"1", b"2.5"]
            assert_error(c.execute("AI.MODELSTORE", "m2", "ONNX", "CPU", "BLOB", b""),
                         "ERR fixture backend: empty blob")
            reason = assert_error_startswith(
                c.execute("AI.CONFIG", "LOADBACKEND", "ONNX", str(fixture_backends.onnx_kind)),
                LOAD_ERR)
            assert "already loaded" in reason
            assert c.execute("PING") == "PONG"
    finally:
        srv.stop()


def test_lazy_loading_from_backendspath(module_path, install_dir, fixture_backends, tmp_path,
                                        runtime_loads):
    """MODELSTORE loads `<BACKENDSPATH>/<default file>` when the backend is missing;
    `ERR Could not load backend` when that fails."""
    lazy = tmp_path / "lazy_backends"
    (lazy / "redisai_onnxruntime").mkdir(parents=True)
    shutil.copyfile(fixture_backends.onnx_kind, lazy / "redisai_onnxruntime" / "redisai_onnxruntime.so")
    srv = RedisServer(module_path, ["BACKENDSPATH", str(lazy)])
    try:
        with RawClient(srv.port) as c:
            assert c.execute("AI.CONFIG", "GET", "BACKENDSPATH") == str(lazy).encode()
            assert_ok(c.execute("AI.MODELSTORE", "m", "ONNX", "CPU", "BLOB", b"x"))
            # Loaded now: an explicit load of the type is a second load, refused in-process;
            # isolated (pytest --isolate), a kind may have a second backend of another name.
            reply = c.execute("AI.CONFIG", "LOADBACKEND", "ONNX", str(fixture_backends.onnx_kind))
            if "ONNX" in isolate_args() and runtime_loads:
                assert_ok(reply)
            else:
                _second_load_refused(reply, runtime_loads)
            from tf_graphs import mul_graph
            store = ("AI.MODELSTORE", "t", "TF", "CPU", "INPUTS", 2, "a", "b", "OUTPUTS", 1,
                     "mul", "BLOB", mul_graph())
            assert_error(c.execute(*store), "ERR Could not load backend")
            assert c.execute("PING") == "PONG"
            assert_error(c.execute("AI.MODELSET", "t", "TF", "CPU", "INPUTS", "a", "b",
                                   "OUTPUTS", "mul", "BLOB", mul_graph()),
                         "ERR Could not load backend")
            if not runtime_loads:
                assert isinstance(c.execute("AI.CONFIG", "BACKENDSPATH", "/elsewhere"),
                                  RespError)
                assert c.execute("AI.CONFIG", "GET", "BACKENDSPATH") == str(lazy).encode()
                return
            # The failed lazy load leaves the slot free: point at the real tree and retry.
            assert_ok(c.execute("AI.CONFIG", "BACKENDSPATH", str(install_dir / "backends")))
            assert_ok(c.execute(*store))
            assert c.execute("TYPE", "t") == "AI__MODEL"
    finally:
        srv.stop()


# --------------------------------------------------------------------------------------
# AI.CONFIG on the shared server.
# --------------------------------------------------------------------------------------

def test_config_get_defaults(server, raw, install_dir):
    path = raw.execute("AI.CONFIG", "GET", "BACKENDSPATH")
    assert isinstance(path, bytes), path
    assert os.path.realpath(path.decode()) == os.path.realpath(install_dir / "backends"), path
    # RedisAI 1.2's default: 511 MiB
    assert raw.execute("AI.CONFIG", "GET", "MODEL_CHUNK_SIZE") == 511 * 1024 * 1024 == 535822336
    assert raw.execute("AI.CONFIG", "GET", "NOSUCHTHING") is None
    # case-insensitive subcommand and name
    assert raw.execute("ai.config", "get", "model_chunk_size") == DEFAULT_CHUNK_SIZE


@pytest.mark.usefixtures("needs_runtime_loads")
def test_config_backendspath_set_and_get(server, raw):
    before = raw.execute("AI.CONFIG", "GET", "BACKENDSPATH")
    try:
        assert_ok(raw.execute("AI.CONFIG", "BACKENDSPATH", "/no/such/dir/is/checked"))
        assert raw.execute("AI.CONFIG", "GET", "BACKENDSPATH") == b"/no/such/dir/is/checked"
        assert_ok(raw.execute("AI.CONFIG", "backendspath", "/another"))
        assert raw.execute("AI.CONFIG", "GET", "BACKENDSPATH") == b"/another"
        # Extra trailing arguments are ignored.
        assert_ok(raw.execute("AI.CONFIG", "BACKENDSPATH", "/third", "extra"))
        assert raw.execute("AI.CONFIG", "GET", "BACKENDSPATH") == b"/third"
        assert_error(raw.execute("AI.CONFIG", "BACKENDSPATH"),
                     "ERR BACKENDSPATH: missing path argument")
    finally:
        assert_ok(raw.execute("AI.CONFIG", "BACKENDSPATH", before))


def test_config_model_chunk_size(raw):
    try:
        assert_ok(raw.execute("AI.CONFIG", "MODEL_CHUNK_SIZE", 1024))
        assert raw.execute("AI.CONFIG", "GET", "MODEL_CHUNK_SIZE") == 1024
        for bad in ("0", "-5", "abc", "1.5", ""):
            assert_error(raw.execute("AI.CONFIG", "MODEL_CHUNK_SIZE", bad),
                         "ERR MODEL_CHUNK_SIZE: invalid chunk size")
        assert raw.execute("AI.CONFIG", "GET", "MODEL_CHUNK_SIZE") == 1024
        assert_error(raw.execute("AI.CONFIG", "MODEL_CHUNK_SIZE"),
                     "ERR MODEL_CHUNK_SIZE: missing chunk size")
    finally:
        assert_ok(raw.execute("AI.CONFIG", "MODEL_CHUNK_SIZE", DEFAULT_CHUNK_SIZE))


def test_config_errors(raw, server_facts):
    assert_error(raw.execute("AI.CONFIG"), server_facts.arity("AI.CONFIG"))
    assert_error(raw.execute("AI.CONFIG", "GET"), server_facts.arity("AI.CONFIG"))
    assert_error(raw.execute("AI.CONFIG", "NOSUCHSUB"), "ERR unsupported subcommand")
    assert_error(raw.execute("AI.CONFIG", "NOSUCHSUB", "x", "y"), "ERR unsupported subcommand")


# --------------------------------------------------------------------------------------
# Load-time arguments (docs/configuration.md): each case starts its own server.
# --------------------------------------------------------------------------------------

def test_load_time_arguments_accepted(module_path, tmp_path):
    args = ["BACKENDSPATH", str(tmp_path), "MODEL_CHUNK_SIZE", "4096", "THREADS_PER_QUEUE", "2",
            "INTRA_OP_PARALLELISM", "1", "INTER_OP_PARALLELISM", "1",
            "MODEL_EXECUTION_TIMEOUT", "1000", "BACKEND_MEMORY_LIMIT", "100"]
    srv = RedisServer(module_path, args)
    try:
        with RawClient(srv.port) as c:
            assert c.execute("AI.CONFIG", "GET", "BACKENDSPATH") == str(tmp_path).encode()
            assert c.execute("AI.CONFIG", "GET", "MODEL_CHUNK_SIZE") == 4096
            assert c.execute("AI.TENSORSET", "t", "FLOAT", 1) == "OK"
    finally:
        srv.stop()


def test_load_time_keys_case_insensitive(module_path, tmp_path):
    srv = RedisServer(module_path, ["backendspath", str(tmp_path), "Model_Chunk_Size", "77"])
    try:
        with RawClient(srv.port) as c:
            assert c.execute("AI.CONFIG", "GET", "BACKENDSPATH") == str(tmp_path).encode()
            assert c.execute("AI.CONFIG", "GET", "MODEL_CHUNK_SIZE") == 77
    finally:
        srv.stop()


def test_load_time_backend_relative_and_backendspath_first(module_path, fixture_backends, tmp_path,
                                                           runtime_loads):
    """BACKENDSPATH is applied before every other argument, even when given last, and a
    relative backend path resolves against it."""
    d = tmp_path / "bp"
    d.mkdir()
    shutil.copyfile(fixture_backends.onnx_kind, d / "fixture_onnx.so")
    srv = RedisServer(module_path, ["ONNX", "fixture_onnx.so", "BACKENDSPATH", str(d)])
    try:
        with RawClient(srv.port) as c:
            assert_ok(c.execute("AI.MODELSTORE", "m", "ONNX", "CPU", "BLOB", b"x"))
            reply = c.execute("AI.CONFIG", "LOADBACKEND", "ONNX", str(d / "fixture_onnx.so"))
            _second_load_refused(reply, runtime_loads)
        assert str(d / "fixture_onnx.so") in srv.log()
    finally:
        srv.stop()


def test_load_time_tf_relative_to_default_backendspath(module_path, tf_backend_path,
                                                       runtime_loads):
    srv = RedisServer(module_path, ["TF", "redisai_tensorflow/redisai_tensorflow.so"])
    try:
        with RawClient(srv.port) as c:
            reply = c.execute("AI.CONFIG", "LOADBACKEND", "TF", str(tf_backend_path))
            _second_load_refused(reply, runtime_loads)
    finally:
        srv.stop()


@pytest.mark.usefixtures("needs_runtime_loads")
def test_runtime_loadbackend_relative_path(module_path, fixture_backends):
    srv = RedisServer(module_path)
    try:
        with RawClient(srv.port) as c:
            assert_ok(c.execute("AI.CONFIG", "BACKENDSPATH", str(fixture_backends.dir)))
            assert_ok(c.execute("AI.CONFIG", "LOADBACKEND", "onnx", "onnx_kind.so"))
            assert_ok(c.execute("AI.MODELSTORE", "m", "ONNX", "CPU", "BLOB", b"x"))
    finally:
        srv.stop()


@pytest.mark.parametrize("key,value", [
    ("FOO", "bar"),
    ("THREADS_PER_QUEUE", "0"),
    ("THREADS_PER_QUEUE", "abc"),
    ("INTRA_OP_PARALLELISM", "0"),
    ("INTER_OP_PARALLELISM", "-1"),
    ("MODEL_CHUNK_SIZE", "0"),
    ("MODEL_EXECUTION_TIMEOUT", "999"),
    ("BACKEND_MEMORY_LIMIT", "0"),
    ("TF", "/no/such/dir/redisai_tensorflow.so"),
])
def test_load_time_bad_argument_fails_module_load(module_path, key, value):
    log = start_expecting_failure(module_path, [key, value])
    assert f"ERR error processing argument: {key} {value}" in log, log


def test_load_time_odd_argument_count_fails(module_path):
    start_expecting_failure(module_path, ["MODEL_CHUNK_SIZE", "100", "THREADS_PER_QUEUE"])


def test_load_time_backend_failure_logs_reason(module_path, fixture_backends):
    log = start_expecting_failure(module_path, ["TF", str(fixture_backends.no_entry)])
    assert any(str(fixture_backends.no_entry) in ln and "RAI_BackendEntry" in ln
               for ln in log.splitlines()), log


@pytest.mark.usefixtures("needs_runtime_loads")
def test_failed_load_reply_is_an_error_not_a_crash(server, raw, fixture_backends):
    """Loading many broken files in a row leaves a healthy server."""
    for _ in range(3):
        for p in (fixture_backends.not_elf, fixture_backends.no_entry, fixture_backends.small_table):
            assert isinstance(raw.execute("AI.CONFIG", "LOADBACKEND", "TF", str(p)), RespError)
    assert_ok(raw.execute("AI.TENSORSET", "t", "INT8", 1, "VALUES", 1))
    assert raw.execute("AI.TENSORGET", "t", "VALUES") == [1]
