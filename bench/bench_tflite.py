"""The TFLITE CNN through the module (1 and 16 clients) against LiteRT's own C loop and the ONNX CNN; a lock per compiled model against a pool.

The MNIST-sized CNN, made at bench time by bench/tflite_models.py (a child process): a
tf.keras model converted by tf.lite.TFLiteConverter, and the same network with the same
weights as ONNX (torch.onnx.export of the module the Keras model took its weights from:
tf2onnx is not installed). One redis-server with the install tree's TFLITE and ONNX backends
at the module's defaults holds both; each reply is checked against tf.lite.Interpreter's (and
ONNX Runtime's) output before anything is timed, and again after each measurement.

Per round (`--rounds`, the kinds' order alternating):

1. rai_load (bench/floor/rai_load.c) at each of `--clients` (1,16), for `--seconds`: the
   TFLITE model, then the ONNX model (or the other way), then PING (the server's round trip
   with no model): req/s, p50, p99;
2. the floor: bench/floor/tflite_floor.c, the same .tflite file run by the backend's own
   LiteRT calls in a C loop, one thread, `--floor-iters` runs: runs/s, median, p99 of the
   run alone (no copy, no Redis).

Then once, with tflite_floor: the memory of `--instances` more compiled models (RSS growth)
and the time to compile one; and `--threads` (2,4) threads running the model for
`--thread-seconds`, `--thread-rounds` times, "lock" (one compiled model behind a mutex: copy
in, run, copy out under it) against "pool" (a compiled model per thread, the backend's
choice), alternating, every output compared with the single run's.

Prints req/s, p50/p99, module/floor (req/s over the floor's runs/s; p50 over PING's p50 plus
the floor's median, the floor of one waiting client) and TFLITE/ONNX per client count, medians
over the rounds. Writes
<out>/tflite-<UTC stamp>.json (--out DIR; by default a folder outside the repository,
bench/README.md).

    bench/run tflite [--install DIR] [--build DIR] [--rounds 5] [--seconds 4]
        [--clients 1,16] [--floor-iters 20000] [--instances 50] [--threads 2,4]
        [--thread-seconds 2] [--thread-rounds 5]

About 4 minutes at the defaults.
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile
from typing import Any

import numpy as np

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import bench as base  # noqa: E402  (Client, find_install; puts tests/support/ on sys.path)
import floor_tools  # noqa: E402
from paths import backend_file  # noqa: E402
from redis_server import RedisServer  # noqa: E402

KINDS = ("TFLITE", "ONNX")
BACKEND_DIRS = {"TFLITE": "tflite", "ONNX": "onnxruntime"}
PING = floor_tools.resp("PING")


def _liteRt(install: pathlib.Path) -> pathlib.Path:
    lib = backend_file(install, "tflite").parent / "lib" / "libLiteRt.so"
    if not lib.is_file():
        raise SystemExit(f"{lib}: no TFLITE backend in {install} (build it first)")
    return lib


class Server:
    """One server with the CNN stored as TFLITE and as ONNX, and each one's command."""

    def __init__(self, install: pathlib.Path, manifest: dict[str, Any], load_exe: pathlib.Path,
                 work: pathlib.Path) -> None:
        args: list[str] = []
        for kind in KINDS:
            args += [kind, str(backend_file(install, BACKEND_DIRS[kind]))]
        self.srv = RedisServer(install / "redisai.so", args)
        self.client = base.Client(self.srv.port)
        self.load = floor_tools.Load(load_exe, self.srv.port, work)
        self.cmds: dict[str, bytes] = {}
        self.expected: dict[str, np.ndarray] = {}
        blob = pathlib.Path(manifest["input"]).read_bytes()
        for kind in KINDS:
            m = manifest["models"][kind]
            key = f"cnn_{kind.lower()}"
            self.client.call("AI.MODELSTORE", key, kind, "CPU", "BLOB",
                             pathlib.Path(m["file"]).read_bytes())
            self.client.call("AI.TENSORSET", f"{key}_in", "FLOAT", *m["shape"], "BLOB", blob)
            self.cmds[kind] = floor_tools.resp("AI.MODELEXECUTE", key, "INPUTS", 1, f"{key}_in",
                                               "OUTPUTS", 1, f"{key}_out")
            self.expected[kind] = np.fromfile(m["expected"], np.float32)

    def check(self, kind: str) -> None:
        key = f"cnn_{kind.lower()}"
        got = np.frombuffer(bytes(self.client.call("AI.TENSORGET", f"{key}_out", "BLOB")),
                            np.float32)
        np.testing.assert_allclose(got, self.expected[kind], rtol=1e-5, atol=1e-6,
                                   err_msg=f"{kind}: the module's output differs")

    def stop(self) -> None:
        base.stop_checked(self.client, self.srv, "tflite bench")


def _floor(exe: pathlib.Path, lib: pathlib.Path, manifest: dict[str, Any],
           *args: str) -> dict[str, Any]:
    argv = [str(exe), "--lib", str(lib), "--model", manifest["models"]["TFLITE"]["file"],
            "--input", manifest["input"], *args]
    res = subprocess.run(argv, capture_output=True, text=True, timeout=600)
    if res.returncode != 0:
        raise RuntimeError(f"tflite_floor exited {res.returncode}:\n{res.stderr.strip()}")
    return json.loads(res.stdout)


def _range(xs: list[float]) -> str:
    return f"[{min(xs):.3g} .. {max(xs):.3g}]"


def _summarize(rounds: list[dict[str, Any]], clients: list[int]) -> dict[str, Any]:
    floor_rps = [r["floor"]["runs_per_s"] for r in rounds]
    floor_p50 = [r["floor"]["p50_us"] for r in rounds]
    out: dict[str, Any] = {"floor": {"runs_per_s": base.med(floor_rps),
                                     "p50_us": base.med(floor_p50),
                                     "p99_us": base.med([r["floor"]["p99_us"] for r in rounds])},
                           "clients": {}}
    print(f"\n# medians over {len(rounds)} rounds [min .. max]")
    print(f"floor (LiteRT in a C loop, 1 thread): {out['floor']['runs_per_s']:.0f} runs/s, "
          f"median {out['floor']['p50_us']:.1f} us, p99 {out['floor']['p99_us']:.1f} us")
    for n in clients:
        cell: dict[str, Any] = {}
        for kind in (*KINDS, "PING"):
            rps = [r["load"][str(n)][kind]["rps"] for r in rounds]
            p50 = [r["load"][str(n)][kind]["p50_us"] for r in rounds]
            p99 = [r["load"][str(n)][kind]["p99_us"] for r in rounds]
            cell[kind] = {"rps": base.med(rps), "p50_us": base.med(p50), "p99_us": base.med(p99)}
            print(f"{n:2} clients {kind:6} {base.med(rps):8.0f} req/s {_range(rps)}, "
                  f"p50 {base.med(p50):7.1f} us, p99 {base.med(p99):7.1f} us")
        over_floor = [r["load"][str(n)]["TFLITE"]["rps"] / r["floor"]["runs_per_s"]
                      for r in rounds]
        p50_minus = [r["load"][str(n)]["TFLITE"]["p50_us"] - r["floor"]["p50_us"]
                     for r in rounds]
        vs_onnx = [r["load"][str(n)]["TFLITE"]["rps"] / r["load"][str(n)]["ONNX"]["rps"]
                   for r in rounds]
        # One client waits for each reply: its floor is PING's round trip plus the run.
        p50_over = [r["load"][str(n)]["TFLITE"]["p50_us"]
                    / (r["load"][str(n)]["PING"]["p50_us"] + r["floor"]["p50_us"])
                    for r in rounds]
        cell["module_over_floor_rps"] = base.med(over_floor)
        cell["module_p50_minus_floor_p50_us"] = base.med(p50_minus)
        cell["module_p50_over_ping_plus_floor"] = base.med(p50_over)
        cell["tflite_over_onnx_rps"] = base.med(vs_onnx)
        print(f"{n:2} clients TFLITE module/floor {base.med(over_floor):.3f} {_range(over_floor)}"
              f" req/s over runs/s; p50 / (PING p50 + floor median) {base.med(p50_over):.2f} "
              f"{_range(p50_over)}; TFLITE/ONNX req/s {base.med(vs_onnx):.3f} {_range(vs_onnx)}")
        out["clients"][str(n)] = cell
    return out


def _summarize_threads(extra: dict[str, Any]) -> dict[str, Any]:
    inst = extra["instances"]
    print(f"memory per further compiled model: {inst['per_instance_kb']:.0f} KB "
          f"(RSS +{inst['rss_after_kb'] - inst['rss_before_kb']} KB over {inst['count']}); "
          f"compile median {inst['compile_p50_us']:.0f} us")
    out: dict[str, Any] = {"instances": inst, "threads": {}}
    for t in extra.get("threads", []):
        lock = [r["lock"]["runs_per_s"] for r in t["rounds"]]
        pool = [r["pool"]["runs_per_s"] for r in t["rounds"]]
        wrong = sum(r[m]["wrong"] for r in t["rounds"] for m in ("lock", "pool"))
        ratio = [p / k for p, k in zip(pool, lock)]
        cpu = {m: base.med([r[m]["cpu_us_per_run"] for r in t["rounds"]]) for m in ("lock", "pool")}
        waits = {m: base.med([r[m]["waits_per_run"] for r in t["rounds"]]) for m in ("lock", "pool")}
        out["threads"][str(t["threads"])] = {"lock_runs_per_s": base.med(lock),
                                             "pool_runs_per_s": base.med(pool),
                                             "pool_over_lock": base.med(ratio),
                                             "cpu_us_per_run": cpu, "waits_per_run": waits,
                                             "wrong": wrong}
        print(f"{t['threads']} threads: lock {base.med(lock):.0f} runs/s {_range(lock)}, "
              f"pool {base.med(pool):.0f} runs/s {_range(pool)}, pool/lock "
              f"{base.med(ratio):.3f} {_range(ratio)}; CPU per run lock {cpu['lock']:.1f} us, "
              f"pool {cpu['pool']:.1f} us; blocking waits per run lock {waits['lock']:.2f}, "
              f"pool {waits['pool']:.2f}; wrong outputs {wrong}")
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--install")
    ap.add_argument("--build", default=str(HERE.parent / "build"), help="configured build folder")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--seconds", type=float, default=4.0, help="per rai_load measurement")
    ap.add_argument("--clients", default="1,16")
    ap.add_argument("--floor-iters", type=int, default=20000, help="timed floor runs per round")
    ap.add_argument("--instances", type=int, default=50, help="compiled models for the RSS")
    ap.add_argument("--threads", default="2,4", help="thread counts of lock against pool")
    ap.add_argument("--thread-seconds", type=float, default=2.0)
    ap.add_argument("--thread-rounds", type=int, default=5)
    base.add_out_option(ap)
    opts = ap.parse_args()
    clients = [int(x) for x in opts.clients.split(",") if x]
    install = base.find_install(opts.install)
    lib = _liteRt(install)
    floor_exe, load_exe = floor_tools.build_targets(pathlib.Path(opts.build), "tflite_floor",
                                                    "rai_load")
    work = pathlib.Path(tempfile.mkdtemp(prefix="bench-tflite-"))
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    loadavg_start = os.getloadavg()
    rounds: list[dict[str, Any]] = []
    server = None
    try:
        print("building the models with the frameworks (child process) ...", flush=True)
        made = subprocess.run([sys.executable, str(HERE / "tflite_models.py"),
                               str(work / "models")], capture_output=True, text=True)
        if made.returncode != 0:  # TensorFlow's converter is verbose: its text only on failure
            raise SystemExit(f"tflite_models.py failed:\n{made.stdout[-4000:]}{made.stderr[-4000:]}")
        manifest = json.loads((work / "models" / "manifest.json").read_text())
        # The floor's own output first: the same file, the same input, LiteRT's answer.
        _floor(floor_exe, lib, manifest, "--iters", "10", "--warmup", "0", "--instances", "0",
               "--dump-output", str(work / "floor.out"))
        np.testing.assert_allclose(np.fromfile(work / "floor.out", np.float32),
                                   np.fromfile(manifest["models"]["TFLITE"]["expected"],
                                               np.float32), rtol=1e-5, atol=1e-6,
                                   err_msg="the floor's output differs from tf.lite's")
        server = Server(install, manifest, load_exe, work)
        for kind in KINDS:  # warm up, and each output checked once
            server.load.run([server.cmds[kind]], clients=4, requests=400, warmup=20)
            server.check(kind)
        for r in range(opts.rounds):
            order = KINDS if r % 2 == 0 else KINDS[::-1]
            rnd: dict[str, Any] = {"order": list(order), "load": {}}
            for n in clients:
                rnd["load"][str(n)] = {}
                for kind in (*order, "PING"):
                    res = server.load.run([server.cmds.get(kind, PING)], clients=n,
                                          seconds=opts.seconds, warmup=20)[0]
                    if kind != "PING":
                        server.check(kind)
                    rnd["load"][str(n)][kind] = res
                    print(f"round {r + 1} {n:2} clients {kind:6} {res['rps']:8.0f} req/s, "
                          f"p50 {res['p50_us']:7.1f} us, p99 {res['p99_us']:7.1f} us", flush=True)
            rnd["floor"] = _floor(floor_exe, lib, manifest, "--iters", str(opts.floor_iters),
                                  "--instances", "0")["single"]
            print(f"round {r + 1} floor {rnd['floor']['runs_per_s']:8.0f} runs/s, "
                  f"median {rnd['floor']['p50_us']:.1f} us, p99 {rnd['floor']['p99_us']:.1f} us",
                  flush=True)
            rounds.append(rnd)
        server.stop()
        server = None
        print("the floor's compiled models: memory, lock against pool ...", flush=True)
        extra = _floor(floor_exe, lib, manifest, "--iters", "1000", "--instances",
                       str(opts.instances), "--threads", opts.threads, "--seconds",
                       str(opts.thread_seconds), "--rounds", str(opts.thread_rounds))
    finally:
        if server is not None:
            server.stop()
        shutil.rmtree(work, ignore_errors=True)

    summary = _summarize(rounds, clients)
    summary["compiled_models"] = _summarize_threads(extra)
    versions = dict(manifest["versions"],
                    litert=backend_file(install, "tflite").parent.resolve().name)
    doc = {"timestamp": stamp, "install": str(install), "litert": str(lib),
           "versions": versions, "models": {
               k: {"bytes": v["bytes"], "shape": v["shape"]}
               for k, v in manifest["models"].items()},
           "max_diff_tflite_onnx": manifest["max_diff_tflite_onnx"],
           "rounds": rounds, "floor_extra": extra, "summary": summary,
           "loadavg": [loadavg_start, os.getloadavg()],
           "settings": {"module_args": "TFLITE, ONNX backends; defaults otherwise",
                        "seconds": opts.seconds, "clients": clients, "rounds": opts.rounds,
                        "floor_iters": opts.floor_iters, "floor_intra": 1,
                        "instances": opts.instances, "threads": opts.threads,
                        "thread_seconds": opts.thread_seconds,
                        "thread_rounds": opts.thread_rounds}}
    path = base.write_result(opts.out, f"tflite-{stamp}", doc)
    return 0


if __name__ == "__main__":
    sys.exit(main())
