#!/usr/bin/env python3
"""The completion path: a short request beside 24 clients' long runs, and what Redis's main thread waits for.

The completion path under mixed load (docs/architecture.md, "A request's life"): what a
finished request waits for before its reply, and what Redis's main thread waits for.

1. **Short beside long** (`mixed`): 24 clients loop AI.MODELEXECUTE of an ONNX MatMul model on
   a 1024-row input (over a millisecond a run here); meanwhile one client alternates a 1-row request
   to the same model and the same 1-row request to a twin of it under another key (same blob).
   The load is bench/floor/rai_load.c; the probe times each of its round trips itself, so a
   request held until the load ends shows as what it waited. Prints the short request's p50/p99 to the
   loaded model and to the twin, and their ratio: a finished short request held behind the
   long runs shows as a ratio far above 1.
2. **DEL in a host's restart** (`restart`): ONNX isolated (`ISOLATE ONNX`), a model of
   `--big-mb` MB stored first and a small one; `kill -9` of the host, and once the new host is
   up and re-creating the large model, `DEL` of it while another client sends `PING`s back to
   back. Prints the DEL's time and the worst PING round trip until the re-creation is over.

Each install tree (`--install LABEL=DIR`, repeatable; none: the newest install/redisai-*/) gets
fresh servers per round, the trees alternating round by round. Writes
<out>/completion-<stamp>.json (--out DIR; by default a folder outside the repository,
bench/README.md).

    bench/run completion [--install before=OLD
        --install after=NEW] [--rounds 3] [--seconds 4] [--big-mb 400] [--parts mixed,restart]
"""
from __future__ import annotations

import argparse
import datetime
import os
import pathlib
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from typing import Any

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))  # build_tools, for tests/support/redis_server.py
import bench as base  # noqa: E402  (puts tests/support/ on sys.path)
import floor_tools  # noqa: E402
from redis_server import RedisServer  # noqa: E402

ONNX_SO = "backends/redisai_onnxruntime/redisai_onnxruntime.so"
LOAD_CLIENTS = 24
ROWS_LONG = 1024
WIDTH = 256


def matmul_model(width: int) -> bytes:
    """y = x @ W, x float [N, width], W [width, width]."""
    import numpy as np
    import onnx
    from onnx import helper, numpy_helper, TensorProto

    w = numpy_helper.from_array(np.full((width, width), 1.0 / width, dtype=np.float32), "W")
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "W"], ["y"])], "mm",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", width])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", width])], [w])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model.SerializeToString()


def big_model(mb: int) -> bytes:
    """y = x + W[0]: a model whose blob is mb MB (W's float32 values)."""
    import numpy as np
    import onnx
    from onnx import helper, numpy_helper, TensorProto

    n = mb * (1 << 20) // 4
    w = numpy_helper.from_array(np.arange(n, dtype=np.float32) * 0 + 1, "W")
    idx = numpy_helper.from_array(np.array([0], dtype=np.int64), "i")
    graph = helper.make_graph(
        [helper.make_node("Gather", ["W", "i"], ["w0"]), helper.make_node("Add", ["x", "w0"],
                                                                         ["y"])], "big",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])], [w, idx])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    return model.SerializeToString()


def mixed_round(tree: pathlib.Path, load_exe: pathlib.Path, blob: bytes, seconds: float,
                work: pathlib.Path) -> dict[str, Any]:
    srv = RedisServer(tree / "redisai.so", ["ONNX", str(tree / ONNX_SO)])
    c = base.Client(srv.port)
    try:
        for key in ("mm", "mm_twin"):
            c.call("AI.MODELSTORE", key, "ONNX", "CPU", "BLOB", blob)
        for key, rows in (("big", ROWS_LONG), ("small", 1)):
            c.call("AI.TENSORSET", key, "FLOAT", rows, WIDTH, "VALUES", *([0.5] * (rows * WIDTH)))
        long = floor_tools.resp("AI.MODELEXECUTE", "mm", "INPUTS", 1, "big", "OUTPUTS", 1, "yl")
        short = floor_tools.resp("AI.MODELEXECUTE", "mm", "INPUTS", 1, "small", "OUTPUTS", 1,
                                 "ys")
        twin = floor_tools.resp("AI.MODELEXECUTE", "mm_twin", "INPUTS", 1, "small", "OUTPUTS",
                                1, "yt")
        for cmd in ("long", "short", "twin"):   # first runs of each model outside the window
            c.call("AI.MODELEXECUTE", "mm" if cmd != "twin" else "mm_twin", "INPUTS", 1,
                   "big" if cmd == "long" else "small", "OUTPUTS", 1, "y0")
        loader = floor_tools.Load(load_exe, srv.port, work)
        out: dict[str, Any] = {}
        load_s = seconds + 3.0   # outlasts the probe unless a probe request is held

        def load() -> None:
            (out["long"],) = loader.run([long], clients=LOAD_CLIENTS, seconds=load_s, warmup=2)

        th = threading.Thread(target=load)
        th.start()
        time.sleep(0.7)   # the long clients are all busy
        # The probe: one client, the short request to the loaded model and to its twin in
        # turn, each round trip timed here (a held request shows as its whole wait, which
        # rai_load's warm-up could hide); it stops at `seconds` or when the load has ended.
        lat: dict[str, list[float]] = {"short": [], "twin": []}
        probe = base.Client(srv.port)
        end = time.monotonic() + seconds
        k = 0
        while time.monotonic() < end and th.is_alive():
            side = ("short", "twin")[k % 2] if (k // 2) % 2 == 0 else ("twin", "short")[k % 2]
            cmd = short if side == "short" else twin
            t = time.perf_counter()
            probe.sock.sendall(cmd)
            probe.read()
            lat[side].append((time.perf_counter() - t) * 1e6)
            k += 1
        out["probe_outlived_load"] = not th.is_alive()
        probe.sock.close()
        th.join()
        for side, xs in lat.items():
            xs.sort()
            out[side] = {"count": len(xs), "p50_us": xs[len(xs) // 2] if xs else 0.0,
                         "p99_us": xs[min(len(xs) - 1, int(len(xs) * 0.99))] if xs else 0.0,
                         "max_us": xs[-1] if xs else 0.0}
        return out
    finally:
        base.stop_checked(c, srv, str(tree))


def host_info(c: base.Client) -> dict[str, str]:
    text = bytes(c.call("INFO", "MODULES")).decode()
    for line in text.splitlines():
        if line.startswith("ai_host_"):
            return dict(kv.split("=", 1) for kv in line.split(":", 1)[1].split(","))
    return {}


def restart_round(tree: pathlib.Path, blob: bytes) -> dict[str, Any]:
    srv = RedisServer(tree / "redisai.so", ["ISOLATE", "ONNX", "ONNX", str(tree / ONNX_SO),
                                            "BACKEND_START_TIMEOUT", "120000"])
    c = base.Client(srv.port)
    pinger = base.Client(srv.port)
    try:
        t0 = time.perf_counter()
        c.call("AI.MODELSTORE", "big", "ONNX", "CPU", "BLOB", blob)
        store_s = time.perf_counter() - t0
        c.call("AI.MODELSTORE", "small", "ONNX", "CPU", "BLOB", matmul_model(8))
        pid = int(host_info(c)["pid"])
        os.kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + 60
        while True:
            info = host_info(c)
            if info.get("state") == "ready" and int(info.get("pid", 0)) not in (0, pid):
                break
            assert time.monotonic() < deadline, info
            time.sleep(0.002)
        pings: list[float] = []
        stop = threading.Event()

        def ping() -> None:
            while not stop.is_set():
                t = time.perf_counter()
                assert pinger.call("PING") == b"PONG"
                pings.append(time.perf_counter() - t)

        th = threading.Thread(target=ping)
        th.start()
        time.sleep(0.02)
        t0 = time.perf_counter()
        deleted = int(c.call("DEL", "big"))
        del_s = time.perf_counter() - t0
        # Until the re-creation is over: the after tree says so in INFO (recreating); the
        # host's create of the deleted model ends within its store's time.
        end = time.monotonic() + max(2.0, 2 * store_s)
        while time.monotonic() < end:
            if host_info(c).get("recreating") == "0":
                break
            time.sleep(0.01)
        time.sleep(0.1)
        stop.set()
        th.join()
        return {"deleted": deleted, "del_ms": del_s * 1e3, "worst_ping_ms": max(pings) * 1e3,
                "pings": len(pings), "store_s": store_s}
    finally:
        pinger.sock.close()
        base.stop_checked(c, srv, str(tree))


def med(xs: list[float]) -> float:
    return float(statistics.median(xs))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--install", action="append", default=[], metavar="LABEL=DIR")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=4.0)
    ap.add_argument("--big-mb", type=int, default=400)
    ap.add_argument("--parts", default="mixed,restart")
    ap.add_argument("--build", default=str(HERE.parent / "build"))
    base.add_out_option(ap)
    opts = ap.parse_args()
    trees = [(label or tree.name, tree) for label, tree in base.parse_installs(opts.install)]
    parts = opts.parts.split(",")
    _, load_exe = floor_tools.build(pathlib.Path(opts.build))
    results: dict[str, Any] = {label: {"mixed": [], "restart": []} for label, _ in trees}
    mm = matmul_model(WIDTH)
    big = big_model(opts.big_mb) if "restart" in parts else b""
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(opts.rounds):
            order = trees if r % 2 == 0 else trees[::-1]
            for label, tree in order:
                if "mixed" in parts:
                    res = mixed_round(tree, load_exe, mm, opts.seconds, pathlib.Path(tmp))
                    results[label]["mixed"].append(res)
                    print(f"round {r} {label} mixed: short p50/p99/max {res['short']['p50_us']:.0f}/"
                          f"{res['short']['p99_us']:.0f}/{res['short']['max_us']:.0f} us, twin "
                          f"{res['twin']['p50_us']:.0f}/{res['twin']['p99_us']:.0f}/"
                          f"{res['twin']['max_us']:.0f} us ({res['short']['count']} + "
                          f"{res['twin']['count']}), long {res['long']['rps']:.0f} req/s"
                          + (" PROBE HELD PAST THE LOAD" if res["probe_outlived_load"] else ""),
                          flush=True)
                if "restart" in parts:
                    res = restart_round(tree, big)
                    results[label]["restart"].append(res)
                    print(f"round {r} {label} restart: DEL {res['del_ms']:.1f} ms, worst PING "
                          f"{res['worst_ping_ms']:.1f} ms", flush=True)
    print()
    if "mixed" in parts:
        print(f"{'tree':<12} {'short p50':>10} {'twin p50':>9} {'ratio':>6} {'short p99':>10} "
              f"{'twin p99':>9} {'ratio':>6} {'short max':>10} {'long req/s':>11}")
        for label, _ in trees:
            rs = results[label]["mixed"]
            s50, t50 = med([x["short"]["p50_us"] for x in rs]), med([x["twin"]["p50_us"] for x in rs])
            s99, t99 = med([x["short"]["p99_us"] for x in rs]), med([x["twin"]["p99_us"] for x in rs])
            rps = med([x["long"]["rps"] for x in rs])
            smax = max(x["short"]["max_us"] for x in rs)
            r50 = f"{s50 / t50:>6.2f}" if t50 else "  held"   # no twin request got through
            r99 = f"{s99 / t99:>6.2f}" if t99 else "  held"
            print(f"{label:<12} {s50:>8.0f}us {t50:>7.0f}us {r50} {s99:>8.0f}us "
                  f"{t99:>7.0f}us {r99} {smax:>8.0f}us {rps:>11.0f}")
    if "restart" in parts:
        print(f"\n{'tree':<12} {'DEL ms (median, max)':>22} {'worst PING ms (median, max)':>30}")
        for label, _ in trees:
            rs = results[label]["restart"]
            d = [x["del_ms"] for x in rs]
            p = [x["worst_ping_ms"] for x in rs]
            print(f"{label:<12} {med(d):>12.1f} {max(d):>8.1f} {med(p):>20.1f} {max(p):>8.1f}")
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    path = base.write_result(opts.out, f"completion-{stamp}", {
        "machine": {"nproc": os.cpu_count(), "uname": " ".join(os.uname())},
        "trees": {label: str(tree) for label, tree in trees},
        "settings": {"rounds": opts.rounds, "seconds": opts.seconds, "big_mb": opts.big_mb,
                     "load_clients": LOAD_CLIENTS, "rows_long": ROWS_LONG, "width": WIDTH},
        "results": results})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
