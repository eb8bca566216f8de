"""The LLAPI against the command: AI.MODELEXECUTE, LLAPI.MODELRUN and LLAPI.MODELRUN_ASYNC round trips.

The round trip of one run of a stored TORCH model (c = a + b, [2,3] FLOAT) from a client, three
ways, interleaved on one connection so that drift affects them alike:

* AI.MODELEXECUTE m INPUTS 2 a b OUTPUTS 1 c         (the command, through the run queue);
* LLAPI.MODELRUN m ...        (tests/llapi/'s module: RedisAI_ModelRun in the command's own
                               thread, the main thread, then the output sent back);
* LLAPI.MODELRUN_ASYNC m ...  (RedisAI_ModelRunAsync: the run queue, the callback on the worker,
                               the client unblocked).

The LLAPI replies carry the output tensor (AI.MODELEXECUTE writes a key), so the figures
compare paths, not payloads of equal size. Medians over a bounded loop; the benchmark builds
llapitest (`cmake --build build --target llapitest`), starts its own redis-server on a free
port and stops it.

    bench/run llapi [--install DIR] [--rounds N]
"""
from __future__ import annotations

import argparse
import pathlib
import statistics
import subprocess
import sys
import time

import numpy as np

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import bench as base  # noqa: E402  (Client, find_install; puts tests/support/ on sys.path)

from redis_server import RedisServer  # noqa: E402
import torch_models as tm  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--install")
    ap.add_argument("--rounds", type=int, default=2000)
    args = ap.parse_args()
    install = base.find_install(args.install)
    build = base.ROOT / "build"
    subprocess.run(["cmake", "--build", str(build), "--target", "llapitest"], check=True,
                   capture_output=True)
    torch_so = install / "backends" / "redisai_torch" / "redisai_torch.so"
    srv = RedisServer(build / "llapitest.so",
                      extra=["--loadmodule", str(install / "redisai.so"), "TORCH", str(torch_so)])
    try:
        c = base.Client(srv.port)
        a = np.arange(6, dtype=np.float32).reshape(2, 3)
        c.call("AI.MODELSTORE", "m", "TORCH", "CPU", "BLOB", tm.add().blob)
        for k in ("a", "b"):
            c.call("AI.TENSORSET", k, "FLOAT", 2, 3, "BLOB", a.tobytes())
        io = ("INPUTS", 2, "a", "b", "OUTPUTS", 1, "c")
        ways = {
            "AI.MODELEXECUTE": ("AI.MODELEXECUTE", "m", *io),
            "LLAPI sync (ModelRun)": ("LLAPI.MODELRUN", "m", *io),
            "LLAPI async (ModelRunAsync)": ("LLAPI.MODELRUN_ASYNC", "m", *io),
        }
        lat: dict[str, list[float]] = {w: [] for w in ways}
        for r in range(args.rounds + 100):
            for w, cmd in ways.items():
                t0 = time.perf_counter()
                reply = c.call(*cmd)
                dt = time.perf_counter() - t0
                if isinstance(reply, Exception):
                    sys.exit(f"{w}: {reply}")
                if r >= 100:  # warm-up
                    lat[w].append(dt)
        base_p50 = statistics.median(lat["AI.MODELEXECUTE"])
        print(f"TORCH a+b [2,3], {args.rounds} rounds, one connection, medians:")
        for w, xs in lat.items():
            p50 = statistics.median(xs)
            print(f"  {w:30s} p50 {p50 * 1e6:8.1f} us   {p50 / base_p50:5.2f}x AI.MODELEXECUTE")
        info = c.call("AI.INFO", "m")
        stats = {bytes(k): v for k, v in zip(info[::2], info[1::2])}
        print(f"  AI.INFO m calls: {int(stats[b'calls'])} (expected {3 * (args.rounds + 100)})")
    finally:
        srv.stop()


if __name__ == "__main__":
    main()
