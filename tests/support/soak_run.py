"""The fault soak, start to end (bench/soak_isolation.py runs it for N minutes,
tests/isolation/test_soak_isolation.py for 60 s): a server with in-process and isolated
backends at once, 16 clients (soak_workload.py), a warm-up without faults that measures each
request template's p99 and each host's normal restart, then faults (soak_faults.py) for the
soak's length, then the verdict (soak_checks.py).

The server runs a copy of the install tree's redisai.so and redisai-backend-host in a temporary
folder (the backends are loaded from the tree by path): the soak makes that copy's host binary
non-executable for a moment, and must not disturb anything else that runs the tree.
"""
from __future__ import annotations

import dataclasses
import os
import pathlib
import shutil
import tempfile
import threading
import time
from typing import Callable

import soak_checks
import soak_faults as sf
import soak_workload as sw
from fault_injection import fault_env, lay_out
from paths import backend_file
from redis_server import RedisServer
from resp import RawClient
from soak_churn import Churn


@dataclasses.dataclass
class Config:
    seconds: float = 60.0          # the faults' part, after the warm-up
    clients: int = 16
    seed: int = 1
    warmup_s: float = 15.0         # no faults: each template's normal p99
    hold_s: float = 10.0           # a held re-creation
    spawn_fail_s: float = 1.0      # the host binary non-executable this long
    gap_s: tuple[float, float] = (1.0, 3.0)   # between two faults
    latency_factor: float = 10.0
    latency_floor_ms: float = 500.0   # a loaded 2-CPU machine's noise reached 330 ms
    settle_s: float = 1.0          # a host's window goes on this long after it is back
    restart_factor: float = 3.0    # x the host's normal restart, beyond its back-off
    restart_slack_s: float = 2.0
    reply_timeout: float = 60.0
    keep_keys: int = 20000         # a client counts and unlinks its keys after this many
    faults: tuple[str, ...] = ()   # only these of kill, hold, spawn_fail (all when empty)
    hosts: tuple[str, ...] = ()    # only these of torch, fault (all isolated when empty)


def _tree_copy(install: pathlib.Path, to: pathlib.Path) -> pathlib.Path:
    """redisai.so and redisai-backend-host copied (modes kept) into `to`: the module runs
    the host beside its own file (module/isolation/core/iso_spawn.c)."""
    for name in ("redisai.so", "redisai-backend-host"):
        shutil.copy2(install / name, to / name)
    return to / "redisai.so"


def run(install: pathlib.Path, fault_so: pathlib.Path, cfg: Config,
        log: Callable[[str], None] = print) -> soak_checks.Verdict:
    work = pathlib.Path(tempfile.mkdtemp(prefix="redisai-soak-"))
    srv = None
    try:
        module = _tree_copy(install, work)
        fault = lay_out(fault_so, work)
        hold = work / "hold"
        args = ["BACKENDSPATH", str(install / "backends"), "ISOLATE", "TORCH",
                "TORCH", str(backend_file(install, "torch")),
                "ONNX", str(backend_file(install, "onnxruntime"))]
        srv = RedisServer(module, args, env=fault_env())
        return _soak(srv, work, fault, hold, cfg, log)
    finally:
        if srv is not None:
            srv.stop()
        shutil.rmtree(work, ignore_errors=True)


def _soak(srv: RedisServer, work: pathlib.Path, fault: pathlib.Path, hold: pathlib.Path,
          cfg: Config, log: Callable[[str], None]) -> soak_checks.Verdict:
    c = RawClient(srv.port, timeout=cfg.reply_timeout)
    reply = c.execute("AI.CONFIG", "LOADBACKEND", "ONNX", str(fault), "ISOLATED")
    assert reply == "OK", reply
    sw.store_models(c, str(hold))
    assert c.execute("SET", "soak:plain", "kept") == "OK"
    inj = sf.Injector(srv.port, work / "redisai-backend-host", hold, cfg)
    labels = inj.labels()
    isolated = {label: v["kind"] for label, v in sf.hosts(c).items()}
    for label in labels:
        assert inj.probe(label), f"the {label} host never answered its first run"
    log(f"soak: server {srv.port}, isolated hosts {labels}, in-process "
        f"{sorted({'onnx', 'torch'} - set(labels))}; {cfg.clients} clients, warm-up "
        f"{cfg.warmup_s:g} s, faults {cfg.seconds:g} s")

    stop_clients, stop_faults = threading.Event(), threading.Event()
    clients = [sw.Client(srv.port, i, cfg.seed, stop_clients, cfg.reply_timeout,
                         cfg.keep_keys) for i in range(cfg.clients)]
    for t in clients:
        t.start()
    time.sleep(cfg.warmup_s)
    warm_end = time.perf_counter()
    # Each host the soak hits killed once, under the same load: its normal restart time.
    for label in [x for x in labels if not cfg.hosts or x in cfg.hosts]:
        log(f"soak: {label} host's normal restart: {inj.calibrate(label):.3f} s")
    churn_labels = sorted({"onnx", "torch", "fault"})
    churn = Churn(srv.port, stop_faults, cfg.seed, churn_labels, sw.churn_models(),
                     {x: len(sw.TEMPLATES) + i for i, x in enumerate(churn_labels)},
                     cfg.reply_timeout)
    faults = sf.FaultThread(inj, stop_faults, cfg.seed)
    churn.start()
    faults.start()
    deadline = time.perf_counter() + cfg.seconds
    while time.perf_counter() < deadline and srv.alive():
        time.sleep(0.2)
    stop_faults.set()
    faults.join(cfg.hold_s + 120)   # it finishes the fault it is in, and restores the binary
    churn.join(cfg.reply_timeout + 5)
    stop_clients.set()
    joined_by = time.perf_counter() + cfg.reply_timeout + 5
    for t in clients:
        t.join(max(0.0, joined_by - time.perf_counter()))
    end = time.perf_counter()

    extra: list[str] = []
    lost: dict[str, int] = {}
    if not srv.alive():
        extra.append(f"redis-server died:\n{srv.log()[-3000:]}")
    elif not faults.is_alive():
        # The hosts the soak left down count against it (check 4); wait for the others.
        inj.wait_back({label: (0, time.perf_counter() + 30, sf.Window(label, "end", end),
                               sf.Fault("end", label, end, 30.0))
                       for label in labels if label not in inj.lost})
        written = [k for t in clients for k in t.written]
        swept = sum(t.checked for t in clients)
        steady = ["soak:plain", "script", *{m for t in sw.TEMPLATES for m in t.models},
                  *(k for t in clients for k in (t.x_key, t.w_key))]
        lost = {f"of {swept + len(written)} keys written":
                sum(t.missing for t in clients) + sw.count_missing(c, written),
                f"of {len(steady)} models, script and inputs": sw.count_missing(c, steady)}
    extra += [f"client {t.index} failed: {t.error!r}" for t in clients if t.error is not None]
    extra += [f"client {t.index} did not end" for t in clients if t.is_alive()]
    if faults.is_alive() or faults.error is not None:
        extra.append(f"the fault thread failed: {faults.error!r}" if faults.error else
                     "the fault thread did not end")
    if not os.access(work / "redisai-backend-host", os.X_OK):
        extra.append("the host binary was left non-executable")
    lost_hosts = sorted(inj.lost)
    verdict = soak_checks.judge(sw.TEMPLATES, churn_labels, [t.records for t in clients],
                                churn.records, inj.windows, inj.faults, isolated, warm_end, end,
                                cfg, lost, extra)
    verdict.figures.update({
        "seconds": round(end - warm_end, 1), "clients": cfg.clients, "seed": cfg.seed,
        "normal_restart_s": {k: round(v, 3) for k, v in inj.normal.items()},
        "stores": churn.stores, "deletes": churn.deletes, "hosts_lost": lost_hosts,
        "isolated": sorted(isolated)})
    verdict.figures["faults"].update({"store": churn.stores, "delete": churn.deletes})
    inj.close()
    c.close()
    if verdict.failures:
        warnings = [ln for ln in srv.log().splitlines() if "backend host" in ln]
        verdict.figures["server_log_host_lines"] = warnings[-40:]
    return verdict
