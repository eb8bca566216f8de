"""The device run of docs/gpu.md: the Torch `gpu` backend on a real GPU, checked and timed.

Run by ci/gpu-check.sh on a machine with an NVIDIA GPU and a CUDA build of torch (the
lent machine: Python 3.12, torch with CUDA; no Redis, no registry). It starts the carried
`redis-server` with the module and the Torch backend built there, then checks, each
against the same model or script on `CPU` in the same server:

* a CNN and a TorchScript script on the device give the CPU's results (within tolerance);
* `AI.MODELGET ... META` shows the device as typed, `AI.CONFIG LIST` the `gpu` variant;
* a DAG that moves tensors between CPU and GPU ops;
* two clients' requests batched into one run on the GPU queue (`MINBATCHSIZE 2`);
* INFO's run-queue fields per device string (`ai_queue_GPU:0_...`);
* a model deleted while runs of it are queued: every run answers, the server lives;

and times the CNN at 1 and 32 clients on the device against `CPU`, alternating, in one
run with one client program. Writes everything to --out as JSON; exits 1 if a check
failed. `--device CPU:1` runs the same checks with no GPU (how it is tested here).
"""
from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import platform
import socket
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "support"))   # torch_models imports torch_defs

from tests.support import torch_models  # noqa: E402
from tests.support.resp import RawClient, RespError  # noqa: E402

SCRIPT = """
def add(tensors: List[Tensor], keys: List[str], args: List[str]):
    return tensors[0] + tensors[1]

def mix(tensors: List[Tensor], keys: List[str], args: List[str]):
    a = tensors[0]
    return torch.matmul(a, a.t()) + torch.relu(a).sum()
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Server:
    def __init__(self, server: str, module: str, backend: str, workdir: Path,
                 libs: str) -> None:
        self.port = free_port()
        self.log = workdir / "redis.log"
        cmd = [server, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
               "--appendonly", "no", "--dir", str(workdir), "--logfile", str(self.log),
               "--loadmodule", module, "TORCH", backend]
        env = dict(os.environ)   # the server's alone: not this Python's torch
        env["LD_LIBRARY_PATH"] = ":".join(p for p in (libs, env.get("LD_LIBRARY_PATH")) if p)
        self.proc = subprocess.Popen(cmd, env=env)
        deadline = time.time() + 60
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise SystemExit(f"redis-server exited {self.proc.returncode}:\n"
                                 + self.log.read_text(errors="replace")[-3000:])
            try:
                with RawClient(self.port, timeout=2) as c:
                    if c.execute("PING") == "PONG":
                        return
            except OSError:
                time.sleep(0.1)
        raise SystemExit("redis-server did not answer PING in 60 s")

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(30)


def ok(reply: Any) -> bool:
    return not isinstance(reply, RespError) and reply in ("OK", b"OK")


def tensor(c: RawClient, key: str) -> np.ndarray:
    reply = c.execute("AI.TENSORGET", key, "META", "BLOB")
    if isinstance(reply, RespError):
        raise AssertionError(f"AI.TENSORGET {key}: {reply}")
    shape = [int(d) for d in reply[reply.index(b"shape") + 1]]
    return np.frombuffer(reply[reply.index(b"blob") + 1], np.float32).reshape(shape)


def put(c: RawClient, key: str, x: np.ndarray) -> None:
    assert ok(c.execute("AI.TENSORSET", key, "FLOAT", *x.shape, "BLOB", x.tobytes()))


class Checks:
    def __init__(self) -> None:
        self.results: list[dict[str, Any]] = []

    def run(self, name: str, fn: Callable[[], str]) -> None:
        t0 = time.time()
        try:
            detail, passed = fn(), True
        except Exception as exc:  # a failed check is reported, the others still run
            detail, passed = f"{type(exc).__name__}: {exc}", False
        self.results.append({"check": name, "ok": passed, "detail": detail,
                             "seconds": round(time.time() - t0, 3)})
        print(f"[gpu-check] {'ok  ' if passed else 'FAIL'} {name}: {detail}", flush=True)


def close(a: np.ndarray, b: np.ndarray) -> str:
    np.testing.assert_allclose(a, b, rtol=1e-3, atol=1e-4)
    return f"max |diff| {float(np.max(np.abs(a - b))):.2e} over {a.size} values"


def check_all(c: RawClient, port: int, dev: str, blob: bytes, variant: str) -> Checks:
    ch = Checks()
    x = torch_models.cnn_sample(batch=1, seed=7)
    put(c, "x", x)
    for key, device in (("cnn:dev", dev), ("cnn:cpu", "CPU")):
        reply = c.execute("AI.MODELSTORE", key, "TORCH", device, "BLOB", blob)
        if not ok(reply):
            raise SystemExit(f"AI.MODELSTORE {key} TORCH {device}: {reply}")

    def listed() -> str:
        rows = [dict(zip(r[::2], r[1::2])) for r in c.execute("AI.CONFIG", "LIST")]
        loaded = [r for r in rows if r.get(b"loaded") in (1, b"1", "1", True)
                  and r.get(b"kind") == b"TORCH"]
        variants = sorted({r[b"variant"].decode() for r in loaded})
        assert variants == [variant], rows
        return f"loaded TORCH backend variant {variants[0]}: {loaded[0][b'name'].decode()}"

    def cnn() -> str:
        for key in ("cnn:dev", "cnn:cpu"):
            assert ok(c.execute("AI.MODELEXECUTE", key, "INPUTS", 1, "x", "OUTPUTS", 1,
                                f"y:{key}"))
        meta = c.execute("AI.MODELGET", "cnn:dev", "META")
        assert meta[meta.index(b"device") + 1] == dev.encode(), meta
        return close(tensor(c, "y:cnn:dev"), tensor(c, "y:cnn:cpu"))

    def script() -> str:
        for key, device in (("s:dev", dev), ("s:cpu", "CPU")):
            assert ok(c.execute("AI.SCRIPTSTORE", key, device, "ENTRY_POINTS", 2, "add", "mix",
                                "SOURCE", SCRIPT))
        a = np.random.default_rng(3).standard_normal((64, 64)).astype(np.float32)
        put(c, "a", a)
        for key in ("s:dev", "s:cpu"):
            reply = c.execute("AI.SCRIPTEXECUTE", key, "mix", "INPUTS", 1, "a", "OUTPUTS", 1,
                              f"o:{key}")
            assert ok(reply), reply
        return close(tensor(c, "o:s:dev"), tensor(c, "o:s:cpu"))

    def dag() -> str:
        reply = c.execute(
            "AI.DAGEXECUTE", "LOAD", 1, "x", "PERSIST", 1, "d", "|>",
            "AI.MODELEXECUTE", "cnn:dev", "INPUTS", 1, "x", "OUTPUTS", 1, "yd", "|>",
            "AI.MODELEXECUTE", "cnn:cpu", "INPUTS", 1, "x", "OUTPUTS", 1, "yc", "|>",
            "AI.SCRIPTEXECUTE", "s:cpu", "add", "INPUTS", 2, "yd", "yc", "OUTPUTS", 1, "s1",
            "|>", "AI.SCRIPTEXECUTE", "s:dev", "add", "INPUTS", 2, "s1", "yc", "OUTPUTS", 1,
            "d")
        assert not any(isinstance(r, RespError) for r in reply), reply
        return close(tensor(c, "d"), 3 * tensor(c, "y:cnn:cpu"))

    def batching() -> str:
        assert ok(c.execute("AI.MODELSTORE", "cnnb:dev", "TORCH", dev, "BATCHSIZE", 4,
                            "MINBATCHSIZE", 2, "MINBATCHTIMEOUT", 5000, "BLOB", blob))
        xs = [torch_models.cnn_sample(batch=1, seed=s) for s in (11, 12)]
        for i, xi in enumerate(xs):
            put(c, f"bx{i}", xi)
        replies: list[Any] = [None, None]

        def one(i: int) -> None:
            with RawClient(port) as other:
                replies[i] = other.execute("AI.MODELEXECUTE", "cnnb:dev", "INPUTS", 1,
                                           f"bx{i}", "OUTPUTS", 1, f"by{i}")

        t0 = time.time()
        threads = [threading.Thread(target=one, args=(i,)) for i in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        took = time.time() - t0
        assert replies == ["OK", "OK"], replies
        # MINBATCHSIZE 2: a lone request would have waited MINBATCHTIMEOUT (5 s)
        assert took < 4, f"took {took:.2f} s: not one batch"
        detail = []
        for i in range(2):
            put(c, "bxi", xs[i])
            assert ok(c.execute("AI.MODELEXECUTE", "cnn:cpu", "INPUTS", 1, "bxi", "OUTPUTS",
                                1, "byc"))
            detail.append(close(tensor(c, f"by{i}"), tensor(c, "byc")))
        return f"2 clients in one batch in {took * 1000:.0f} ms; " + "; ".join(detail)

    def info() -> str:
        text = c.execute("INFO", "MODULES")
        text = text.decode() if isinstance(text, bytes) else str(text)
        fields = {ln.rsplit(":", 1)[0] for ln in text.splitlines()
                  if ln.startswith("ai_queue_") and ":" in ln}
        mine = sorted(f for f in fields if f.startswith(f"ai_queue_{dev}_"))
        assert mine and any(f.startswith("ai_queue_CPU_") for f in fields), sorted(fields)
        return ", ".join(mine)

    def deleted_while_queued() -> str:
        assert ok(c.execute("AI.MODELSTORE", "cnn:del", "TORCH", dev, "BLOB", blob))
        # 32 connections with 4 runs each: one of each is on the queue when DEL comes
        # (a connection's next command waits until its blocked one is answered)
        conns = [RawClient(port) for _ in range(32)]
        try:
            for i, other in enumerate(conns):
                for j in range(4):
                    other.send("AI.MODELEXECUTE", "cnn:del", "INPUTS", 1, "x", "OUTPUTS", 1,
                               f"del{i}_{j}")
            assert c.execute("DEL", "cnn:del") == 1
            replies = [other.read() for other in conns for _ in range(4)]
        finally:
            for other in conns:
                other.close()
        done = sum(1 for r in replies if r == "OK")
        refused = [r for r in replies if isinstance(r, RespError)]
        assert done + len(refused) == len(replies), replies[:5]
        assert c.execute("PING") == "PONG" and c.execute("EXISTS", "cnn:del") == 0
        return (f"{len(replies)} sent from 32 clients: {done} ran on the model they were "
                f"queued with, {len(refused)} came after DEL: {sorted(set(refused))}; "
                "server alive, key gone")

    for name, fn in (("variant listed", listed), ("CNN on the device = CPU", cnn),
                     ("script on the device = CPU", script), ("DAG across devices", dag),
                     ("batching on the device", batching), ("INFO per device", info),
                     ("model deleted while queued", deleted_while_queued)):
        ch.run(name, fn)
    return ch


# --- the benchmark ------------------------------------------------------------------------

def _client(args: tuple[int, str, float, int]) -> list[float]:
    port, key, seconds, idx = args
    lat: list[float] = []
    with RawClient(port) as c:
        end = time.perf_counter() + seconds
        while time.perf_counter() < end:
            t0 = time.perf_counter()
            r = c.execute("AI.MODELEXECUTE", key, "INPUTS", 1, f"bx:{idx}", "OUTPUTS", 1,
                          f"by:{idx}")
            lat.append(time.perf_counter() - t0)
            if r != "OK":
                raise RuntimeError(f"{key}: {r}")
    return lat


def bench(c: RawClient, port: int, dev: str, blob: bytes, seconds: float,
          reps: int) -> dict[str, Any]:
    for key, device in (("bench:dev", dev), ("bench:cpu", "CPU")):
        assert ok(c.execute("AI.MODELSTORE", key, "TORCH", device, "BLOB", blob))
    for i in range(32):
        put(c, f"bx:{i}", torch_models.cnn_sample(batch=1, seed=100 + i))
    cells: dict[str, dict[str, list[float]]] = {}
    ctx = mp.get_context("fork")
    with ctx.Pool(32) as pool:
        for key in ("bench:dev", "bench:cpu"):   # warm-up: CUDA context, cuDNN plans
            pool.map(_client, [(port, key, 1.0, i) for i in range(4)])
        for rep in range(reps):
            for clients in (1, 32):
                for key in ("bench:dev", "bench:cpu"):   # alternating, same client program
                    lats = pool.map(_client, [(port, key, seconds, i) for i in range(clients)])
                    flat = [x for part in lats for x in part]
                    cell = cells.setdefault(f"{key.split(':')[1]}/{clients}", {
                        "req_per_s": [], "p50_us": [], "p99_us": []})
                    cell["req_per_s"].append(round(len(flat) / seconds, 1))
                    flat.sort()
                    cell["p50_us"].append(round(flat[len(flat) // 2] * 1e6, 1))
                    cell["p99_us"].append(round(flat[int(len(flat) * 0.99)] * 1e6, 1))
                    print(f"[gpu-check] bench rep {rep} {key} {clients} clients: "
                          f"{cell['req_per_s'][-1]} req/s, p50 {cell['p50_us'][-1]} us",
                          flush=True)
    summary = {}
    for clients in (1, 32):
        d = statistics.median(cells[f"dev/{clients}"]["req_per_s"])
        cpu = statistics.median(cells[f"cpu/{clients}"]["req_per_s"])
        summary[f"{clients}_clients_device_over_cpu"] = round(d / cpu, 3)
    return {"model": "MNIST-sized CNN [1,1,28,28] -> [1,10], torch.jit.trace",
            "request": "AI.MODELEXECUTE of one sample, input key preset per client",
            "seconds_per_cell": seconds, "repetitions": reps, "cells": cells,
            "throughput_ratio": summary}


def facts(dev: str) -> dict[str, Any]:
    import torch  # noqa: PLC0415
    out: dict[str, Any] = {"device": dev, "python": platform.python_version(),
                           "torch": torch.__version__, "torch_cuda": torch.version.cuda,
                           "cuda_available": torch.cuda.is_available(),
                           "cpus": os.cpu_count()}
    if torch.cuda.is_available():
        out["gpu"] = torch.cuda.get_device_name(0)
    try:
        smi = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,memory.total",
                              "--format=csv,noheader"], capture_output=True, text=True,
                             timeout=30)
        out["nvidia_smi"] = smi.stdout.strip() or smi.stderr.strip()
    except (OSError, subprocess.TimeoutExpired) as exc:
        out["nvidia_smi"] = f"not run: {exc}"
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--server", required=True)
    ap.add_argument("--module", required=True)
    ap.add_argument("--backend", required=True)
    ap.add_argument("--server-libs", default="",
                    help="LD_LIBRARY_PATH of redis-server: its carried libraries, CUDA's")
    ap.add_argument("--device", default="GPU:0")
    ap.add_argument("--variant", default="gpu", help="the variant the loaded backend must have")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--reps", type=int, default=3)
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    blob = torch_models.cnn().blob
    srv = Server(args.server, args.module, args.backend, args.out, args.server_libs)
    try:
        with RawClient(srv.port) as c:
            checks = check_all(c, srv.port, args.device, blob, args.variant)
            timing = bench(c, srv.port, args.device, blob, args.seconds, args.reps)
            info = c.execute("INFO", "MODULES")
    finally:
        srv.stop()
    result = {"when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
              "machine": facts(args.device), "checks": checks.results, "bench": timing,
              "info_modules": info.decode() if isinstance(info, bytes) else str(info)}
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    path = args.out / f"gpu-check-{stamp}.json"
    path.write_text(json.dumps(result, indent=1) + "\n")
    failed = [r["check"] for r in checks.results if not r["ok"]]
    print(f"[gpu-check] {len(checks.results) - len(failed)}/{len(checks.results)} checks "
          f"passed; ratios {timing['throughput_ratio']}; {path}", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
