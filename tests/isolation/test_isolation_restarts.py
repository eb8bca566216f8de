"""Restarts never give up, and each host restarts on its own (issue 44, docs/isolation.md "The
restart policy").

* A spawn that fails (the host file not executable: an upgrade replacing it, EMFILE,
  posix_spawn's ENOMEM) is a death like any other: the slot goes back to `backoff`, counts a
  `failed_starts`, and is retried after its back-off. Before, it stayed `starting` for good.
* Each host has a restarter of its own: a host whose re-creation is held in a slow create does
  not delay another host's restart. Before, one restarter thread served every host and waited
  for each create.
* A model is quarantined only for its own failures: a host killed during its re-creation for
  another model's fault (a run past MODEL_EXECUTION_TIMEOUT) does not count against it.

The fault backend's `slow-if-exists <file>` holds a create while the file exists
(tests/fault_backend/fault_model.c). No new command: INFO's new field only.
"""
from __future__ import annotations

import os
import pathlib
import shutil
import signal
import time

from fault_injection import fault_env
from helpers import assert_ok, isolated_host, isolated_hosts, wait_file, wait_isolated_ready
from redis_server import RedisServer
from resp import RawClient, RespError


def _info(c: RawClient) -> dict:
    return isolated_host(c.execute("INFO", "MODULES"))


def _wait(pred, what: str, timeout: float = 30.0, step: float = 0.02):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = pred()
        if got:
            return got
        time.sleep(step)
    raise AssertionError(f"not within {timeout} s: {what}")


def _run(c: RawClient, model: str, values: list[float]) -> object:
    assert_ok(c.execute("AI.TENSORSET", f"x{model}", "FLOAT", len(values), "VALUES", *values))
    return c.execute("AI.MODELEXECUTE", model, "INPUTS", 1, f"x{model}", "OUTPUTS", 1,
                     f"y{model}")


def _run_ok(c: RawClient, model: str) -> None:
    assert_ok(_run(c, model, [10.5, 20]))  # 10.5: no magic value of the fault backend
    assert [float(v) for v in c.execute("AI.TENSORGET", f"y{model}", "VALUES")] == [10.5, 20.0]


def test_a_failed_spawn_is_retried_after_its_back_off(
        install_dir: pathlib.Path, fault_backend: pathlib.Path, tmp_path: pathlib.Path) -> None:
    """The host file is made unexecutable, the host killed, the file restored a second later:
    the host is serving again within its back-off (0.1, 0.2, 0.4, 0.8, 1.6 s: the try after the
    restore comes by about 3 s), with the failed starts counted."""
    tree = tmp_path / "tree"
    tree.mkdir()
    shutil.copy2(install_dir / "redisai.so", tree / "redisai.so")
    host = tree / "redisai-backend-host"
    shutil.copy2(install_dir / "redisai-backend-host", host)
    s = RedisServer(tree / "redisai.so", ["ISOLATE", "ONNX"], env=fault_env())
    try:
        with RawClient(s.port) as c:
            assert_ok(c.execute("AI.CONFIG", "LOADBACKEND", "ONNX", str(fault_backend)))
            assert_ok(c.execute("AI.MODELSTORE", "m", "ONNX", "CPU", "BLOB", "identity"))
            _run_ok(c, "m")
            before = _info(c)
            host.chmod(0o644)
            try:
                os.kill(int(before["pid"]), signal.SIGKILL)
                failed = _wait(lambda: (i := _info(c))["last_exit"] == "start_failed" and i,
                               "a failed start", 10)
                assert failed["state"] in ("backoff", "starting"), failed
                time.sleep(1.0)
            finally:
                host.chmod(0o755)
            restored = time.monotonic()
            after = wait_isolated_ready(c, int(before["pid"]), timeout=10)
            assert time.monotonic() - restored < 10
            assert int(after["restarts"]) == int(before["restarts"]) + 1, after
            # Restarts went on failing while the file was unexecutable, each one counted.
            assert before["failed_starts"] == "0", before
            assert int(after["failed_starts"]) >= 2, after
            _run_ok(c, "m")
            assert s.alive()
    finally:
        s.stop()


def _hosts(c: RawClient) -> dict[str, dict]:
    return isolated_hosts(c.execute("INFO", "MODULES"))


def test_a_held_re_creation_does_not_delay_another_hosts_restart(
        module_path: pathlib.Path, fault_backend: pathlib.Path, tmp_path: pathlib.Path) -> None:
    """Two isolated backends: the fault backend (a model whose re-creation is held) and the
    real ONNX Runtime. While the first host's re-creation is held, the second host is killed
    and must be back long before the hold ends (8 s): it was back after the hold before."""
    import onnx_models  # noqa: PLC0415
    hold = tmp_path / "hold"
    s = RedisServer(module_path, ["ISOLATE", "ONNX"], env=fault_env())
    try:
        with RawClient(s.port) as c:
            assert_ok(c.execute("AI.MODELSTORE", "real", "ONNX", "CPU", "BLOB",
                                onnx_models.identity("FLOAT").blob))
            assert_ok(c.execute("AI.CONFIG", "LOADBACKEND", "ONNX", str(fault_backend),
                                "ISOLATED"))
            assert_ok(c.execute("AI.MODELSTORE", "slow", "ONNX", "CPU", "BACKEND",
                                "fault-1.0-cpu", "BLOB", f"identity\nslow-if-exists {hold}"))
            hosts = _hosts(c)
            fault = next(n for n in hosts if "fault" in n)
            real = next(n for n in hosts if n != fault)
            hold.touch()
            try:
                os.kill(int(hosts[fault]["pid"]), signal.SIGKILL)
                wait_file(pathlib.Path(f"{hold}.started"))
                old = int(hosts[real]["pid"])
                os.kill(old, signal.SIGKILL)
                killed = time.monotonic()
                back = _wait(lambda: (h := _hosts(c)[real])["state"] == "ready"
                             and int(h["pid"]) not in (0, old) and h,
                             "the real ONNX host back", 30)
                took = time.monotonic() - killed
                # Still held: the fault host is re-creating.
                assert not pathlib.Path(f"{hold}.done").exists()
                assert _hosts(c)[fault]["recreating"] == "1", _hosts(c)
                assert took < 4.0, (took, back)
                assert_ok(c.execute("AI.TENSORSET", "a", "FLOAT", 2, "VALUES", 1, 2))
                assert_ok(c.execute("AI.MODELEXECUTE", "real", "INPUTS", 1, "a", "OUTPUTS", 1,
                                    "b"))
            finally:
                hold.unlink()
            _wait(lambda: _hosts(c)[fault]["recreating"] == "0", "the held re-creation")
            _run_ok(c, "slow")
            assert s.alive()
    finally:
        s.stop()


def test_a_kill_for_another_models_run_does_not_quarantine(
        module_path: pathlib.Path, fault_backend: pathlib.Path, tmp_path: pathlib.Path) -> None:
    """During the held re-creation of "slow", a run of "fast" (already re-created) hangs and its
    host is killed (twice in a row): "slow" is re-created again each time, never quarantined."""
    hold = tmp_path / "hold"
    s = RedisServer(module_path, ["ISOLATE", "ONNX", "MODEL_EXECUTION_TIMEOUT", "1000"],
                    env=fault_env())
    try:
        with RawClient(s.port) as c:
            assert_ok(c.execute("AI.CONFIG", "LOADBACKEND", "ONNX", str(fault_backend)))
            assert_ok(c.execute("AI.MODELSTORE", "fast", "ONNX", "CPU", "BLOB", "identity"))
            assert_ok(c.execute("AI.MODELSTORE", "slow", "ONNX", "CPU", "BLOB",
                                f"identity\nslow-if-exists {hold}"))
            hold.touch()
            try:
                pid = int(_info(c)["pid"])
                os.kill(pid, signal.SIGKILL)
                for attempt in range(2):
                    started = pathlib.Path(f"{hold}.started")
                    wait_file(started)
                    started.unlink()
                    # "fast" is live in this host: a run that never ends is killed at its
                    # deadline (or, before issue 44, when its channel did not open).
                    info = _wait(lambda: (i := _info(c))["state"] == "ready" and i,
                                 "the host ready", 30)
                    reply = _run(c, "fast", [3, 0])  # magic 3: sleeps forever
                    assert isinstance(reply, RespError), reply
                    _wait(lambda: _info(c)["pid"] != info["pid"], "the host killed", 30)
            finally:
                hold.unlink()
            wait_isolated_ready(c, timeout=30)
            _run_ok(c, "slow")
            _run_ok(c, "fast")
            assert s.alive()
    finally:
        s.stop()
