"""ci/gpu-check.sh, the device run of docs/gpu.md, run here as CI can: with .venv's CPU build
of torch and `DEVICE=CPU:1` standing in for `GPU:0`. It keeps the script that a session with a
lent GPU runs (with minutes of device time) working: ci/gpu-prepare.sh gathers the carried
redis-server, the script builds redisai.so and the Torch backend with CMake directly (not
build_tools), names the variant after what its torch holds (cpu here: never a CPU backend under
a GPU name), runs every check of ci/gpu_check.py and writes its JSON. It proves nothing about a
GPU."""
from __future__ import annotations

import json
import os
import pathlib
import shutil
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.inprocess_only("builds and starts its own server")


def test_the_device_script_runs_here_with_a_cpu_device(tmp_path: pathlib.Path) -> None:
    if shutil.which("cmake") is None or shutil.which("redis-server") is None:
        pytest.fail("cmake and redis-server are installed by the setup: missing here")
    env = dict(os.environ, PYTHON=sys.executable)
    carry, out = tmp_path / "carry", tmp_path / "out"
    prep = subprocess.run(["bash", "ci/gpu-prepare.sh", str(carry)], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120)
    assert prep.returncode == 0, prep.stdout + prep.stderr
    assert (carry / "bin" / "redis-server").is_file() and (carry / "include" / "redismodule.h").is_file()
    env.update(DEVICE="CPU:1", CARRY=str(carry), BUILD_DIR=str(tmp_path / "build"),
               SECONDS_PER_CELL="0.3", REPS="1")
    run = subprocess.run(["bash", "ci/gpu-check.sh", str(out)], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=900)
    assert run.returncode == 0, run.stdout[-6000:] + run.stderr[-6000:]
    assert "(variant cpu)" in run.stdout, run.stdout
    [result] = [json.loads(p.read_text()) for p in out.glob("gpu-check-*.json")]
    checks = {c["check"]: c for c in result["checks"]}
    assert len(checks) == 7 and all(c["ok"] for c in checks.values()), checks
    assert "ai_queue_CPU:1_" in checks["INFO per device"]["detail"]
    assert set(result["bench"]["cells"]) == {"dev/1", "cpu/1", "dev/32", "cpu/32"}
    assert all(v["req_per_s"][0] > 0 for v in result["bench"]["cells"].values())
    assert result["machine"]["device"] == "CPU:1"
