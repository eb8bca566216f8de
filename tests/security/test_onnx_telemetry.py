"""ONNX Runtime's telemetry is off (docs/security.md, "ONNX Runtime's telemetry"): a server with
the ONNX backend loaded makes no network connection of its own, while the same server with
ORT_DISABLE_TELEMETRY=0 (an operator's opt-in, which the backend leaves alone) does within
seconds, so the watch below is shown to see what it looks for.

The watch is `strace -f -e trace=connect` attached to the running server; the server's own
listening socket accepts, never connects, so any connect() is the process reaching out.
"""
from __future__ import annotations

import os
import pathlib
import shutil
import subprocess
import time

import pytest

from redis_server import RedisServer

# ONNX Runtime 1.32 starts its upload threads every 5-16 s (measured with strace).
WATCH_S = 20.0


def connects(srv: RedisServer, seconds: float, stop_at_first: bool) -> list[str]:
    out = pathlib.Path(srv.dir) / "connect.trace"
    tracer = subprocess.Popen(["strace", "-f", "-qq", "-e", "trace=connect", "-o", str(out),
                               "-p", str(srv.proc.pid)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + seconds
    seen: list[str] = []
    while time.monotonic() < deadline and tracer.poll() is None:
        time.sleep(0.5)
        seen = [ln for ln in out.read_text().splitlines() if "connect(" in ln] \
            if out.exists() else []
        if seen and stop_at_first:
            break
    if tracer.poll() is not None:
        pytest.fail(f"strace stopped: {tracer.stderr.read().decode(errors='replace')}")
    tracer.terminate()
    tracer.wait(timeout=10)
    return seen


def server(module_path: pathlib.Path, onnx: pathlib.Path, telemetry: str | None) -> RedisServer:
    env = dict(os.environ)
    env.pop("ORT_DISABLE_TELEMETRY", None)
    # ONNX Runtime sends nothing when CI is set (as .ci/run sets it): without this the
    # opt-in case would prove nothing there, and the first case would pass for that reason.
    env.pop("CI", None)
    if telemetry is not None:
        env["ORT_DISABLE_TELEMETRY"] = telemetry
    return RedisServer(module_path, ["ONNX", str(onnx)], env=env)


@pytest.fixture
def strace_ok() -> None:
    if shutil.which("strace") is None:
        pytest.fail("strace is missing: `python -m build_tools setup` installs it")


def test_no_connection_with_the_onnx_backend(strace_ok, module_path, onnx_backend_path):
    srv = server(module_path, onnx_backend_path, None)
    try:
        seen = connects(srv, WATCH_S, stop_at_first=True)
        assert seen == [], seen
    finally:
        srv.stop()


def test_the_operator_opt_in_is_left_alone(strace_ok, module_path, onnx_backend_path):
    srv = server(module_path, onnx_backend_path, "0")
    try:
        seen = connects(srv, WATCH_S + 10, stop_at_first=True)
        assert seen, "ONNX Runtime made no connection with ORT_DISABLE_TELEMETRY=0"
    finally:
        srv.stop()
