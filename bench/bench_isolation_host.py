"""Round trips to redisai-backend-host alone (benchmark, not a test; issue 13).

Spawns the installed host with a SOCK_SEQPACKET socketpair from this process (the
client of tests/support/iso_host_client.py; no Redis: the core's proxy is the next step),
creates the ONNX `Add` model of tests/support/onnx_models.py, opens one data channel, then
measures, sequentially:

* `info`: an INFO request on the control connection (the smallest request with a reply);
* `run [1,4]`: MODEL_RUN of Add on float [1,4] through the arenas;
* `run 1 MiB+`: the same with [600,600] inputs (1.4 MB each: a sealed large region each
  way, memfd_create + pwrite + seals + SCM_RIGHTS);
* `ort in-process`: the same [1,4] Add run by onnxruntime's Python API in this process,
  for scale.

The client is Python: its encoding, sendmsg/recvmsg wrappers and numpy copies are part
of every figure, so the C proxy's overhead will be lower. Prints p50 and p99 in us.

    python bench/bench_isolation_host.py [--install DIR] [--n 5000]
"""
from __future__ import annotations

import argparse
import os
import pathlib
import statistics
import sys
import time
from typing import Callable

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "support"))

import numpy as np  # noqa: E402

import iso_host_client as iso  # noqa: E402
import onnx_models  # noqa: E402


def _install(arg: str | None) -> pathlib.Path:
    if arg:
        return pathlib.Path(arg)
    trees = sorted((ROOT / "install").glob("redisai-*/redisai.so"))
    if not trees:
        sys.exit("no install/redisai-*/redisai.so: run `python -m build_tools build` first")
    return trees[-1].parent


def _measure(name: str, n: int, fn: Callable[[], None]) -> None:
    for _ in range(min(n, 200)):
        fn()
    times = []
    for _ in range(n):
        t = time.perf_counter_ns()
        fn()
        times.append((time.perf_counter_ns() - t) / 1e3)
    times.sort()
    print(f"{name:16s} p50 {statistics.median(times):8.1f} us   "
          f"p99 {times[int(len(times) * 0.99) - 1]:8.1f} us   (n={n})")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--install")
    ap.add_argument("--n", type=int, default=5000)
    args = ap.parse_args()
    install = _install(args.install)
    so = install / "backends" / "redisai_onnxruntime" / "redisai_onnxruntime.so"
    folder = pathlib.Path(os.path.realpath(so)).parent.name
    backend = iso.Backend("ONNX", 3, folder[len("redisai_"):], so, install / "backends")
    h = iso.HostProcess(install / "redisai-backend-host", backend)
    try:
        t = time.perf_counter()
        m = h.hello()
        assert m.type == iso.HELLO_OK, m
        print(f"spawn to HELLO_OK (ONNX Runtime loaded): {(time.perf_counter() - t) * 1e3:.1f} ms")
        add = onnx_models.add()
        assert h.model_create(1, "k", add.blob).type == iso.MODEL_CREATED
        ch = h.open_channel()
        small = [np.ones((1, 4), np.float32), np.ones((1, 4), np.float32)]
        big = [np.ones((600, 600), np.float32), np.ones((600, 600), np.float32)]
        info = iso.Enc().u64(1).bytes()

        def run_small() -> None:
            reply, _ = ch.run(1, small, 1)
            assert reply.type == iso.RUN_OK

        def run_big() -> None:
            reply, _ = ch.run(1, big, 1)
            assert reply.type == iso.RUN_OK

        _measure("info", args.n, lambda: h.request(iso.INFO, info))
        _measure("run [1,4]", args.n, run_small)
        _measure("run 1 MiB+", max(args.n // 20, 50), run_big)
        _measure("ort in-process", args.n, lambda: add.run(*small))
        ch.close()
    finally:
        h.close()


if __name__ == "__main__":
    main()
