"""INFO MODULES in Redis's crash report (docs/info.md, "In a crash report"): the module's
sections are printed by the same INFO callback with for_crash_report set, and the backends'
own lines there are the ones kept from the last INFO (or, for an in-process backend, from its
load), followed by `<Framework>_info_taken_at`: the report never calls a backend, so it
neither waits on a host nor calls into the framework that may have crashed.

Each test crashes its own server with DEBUG SEGFAULT and reads the report from its log. The
isolated case stops the ONNX host with SIGSTOP first: a report that asked it would wait for
an answer that cannot come, and print no ONNX lines.
"""
from __future__ import annotations

import os
import pathlib
import re
import signal
import time

import pytest

from helpers import info_field, isolated_host, wait_isolated_ready
from redis_server import RedisServer
from resp import RawClient

ORT_FIELDS = ("onnxruntime_memory", "onnxruntime_memory_access_num",
              "onnxruntime_maximum_run_sessions_number")

pytestmark = pytest.mark.skipif(
    bool(os.environ.get("REDISAI_TEST_SERVER_EXE")),
    reason="a crashing server under another executable (AddressSanitizer) ends differently")


def crash(s: RedisServer) -> tuple[str, float]:
    """DEBUG SEGFAULT; the module's part of the crash report, and the seconds from the
    command to the server's end."""
    with RawClient(s.port) as c:
        t0 = time.monotonic()
        c.send("DEBUG", "SEGFAULT")
        with pytest.raises((ConnectionError, OSError, EOFError)):
            c.read()
    s.proc.wait(timeout=60)
    took = time.monotonic() - t0
    log = s.log()
    assert "crashed by signal" in log, log[-3000:]
    start = log.find("MODULES INFO OUTPUT")
    assert start >= 0, log[-5000:]
    return log[start:], took


def report_field(report: str, field: str) -> str | None:
    m = re.search(rf"^ai_{field}:(.*)$", report, re.M)
    return m.group(1).strip() if m else None


def test_isolated_backend_lines_come_from_the_last_info(module_path: pathlib.Path,
                                                        onnx_backend_path: pathlib.Path) -> None:
    s = RedisServer(module_path, ["ISOLATE", "ONNX", "ONNX", str(onnx_backend_path)])
    pid = 0
    try:
        with RawClient(s.port) as c:
            pid = int(wait_isolated_ready(c)["pid"])
            info = c.execute("INFO", "MODULES")
            kept = {f: info_field(info, f"ai_{f}") for f in ORT_FIELDS}
            assert all(v is not None for v in kept.values()), info
            assert isolated_host(c.execute("INFO", "MODULES"))["state"] == "ready"
        before = time.time()
        os.kill(pid, signal.SIGSTOP)
        report, took = crash(s)
        for field, value in kept.items():
            assert report_field(report, field) == value, (field, report)
        taken = report_field(report, "onnxruntime_info_taken_at")
        assert taken is not None and re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z",
                                                  taken), report
        assert time.strptime(taken[:19], "%Y-%m-%dT%H:%M:%S") <= time.gmtime(before), taken
        print(f"crash report with the host stopped: server gone {took:.2f} s after the command")
    finally:
        if pid:
            try:
                os.kill(pid, signal.SIGCONT)
            except ProcessLookupError:
                pass
        s.stop()


@pytest.mark.inprocess_only("the backend in-process, as loaded")
def test_in_process_backend_lines_come_from_its_load(module_path: pathlib.Path,
                                                     onnx_backend_path: pathlib.Path) -> None:
    """No INFO before the crash: the lines kept when the backend loaded are printed."""
    s = RedisServer(module_path, ["ONNX", str(onnx_backend_path)])
    try:
        report, _ = crash(s)
        assert report_field(report, "onnxruntime_memory") is not None, report
        assert report_field(report, "onnxruntime_info_taken_at") not in (None, "never"), report
        assert report_field(report, "onnxruntime_version") is not None, report
    finally:
        s.stop()
