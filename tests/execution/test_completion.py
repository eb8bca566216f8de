"""One completion path (module/engine/completion.c, docs/architecture.md "A request's life"):
a finished request is answered at the main thread's next pass, never held for other requests'
runs.

Before it, a worker kept a client whose short run had finished until the next run of the same
model or script finished too, and then through every further long run while four DAGs waited:
a 0.1 ms request to a model that 24 clients kept busy with 1.4 ms runs was answered after up to
5 s. These tests load one model (or one script) with long runs from many clients and send short
requests to the same model (or the script's fast function) meanwhile. The check is an order,
not a time: between a short request's send and its reply, at most the long runs that were
queued ahead of it (one per load client, and the one running) may finish. A held reply lets
many more finish.

No new command or setting: the clients run as the default user; the ACL checks of these
commands come before a DAG is queued (tests/security/).
"""
from __future__ import annotations

import threading
import time
from typing import Any, Callable

import pytest

import engine_models as em
from helpers import assert_ok, info_field
from redis_server import RedisServer
from resp import RawClient

pytestmark = pytest.mark.inprocess_only("the in-process run queue's workers")

LOAD_CLIENTS = 16
SHORT_REQUESTS = 30


class Load:
    """LOAD_CLIENTS threads, each looping one long command on a connection of its own until
    stopped; `done` counts the long replies received."""

    def __init__(self, port: int, command: Callable[[int], tuple[Any, ...]]) -> None:
        self.port = port
        self.command = command
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.done = 0
        self.errors: list[str] = []
        self.threads = [threading.Thread(target=self._loop, args=(i,))
                        for i in range(LOAD_CLIENTS)]

    def _loop(self, i: int) -> None:
        try:
            with RawClient(self.port, timeout=60) as c:
                while not self.stop.is_set():
                    reply = c.execute(*self.command(i))
                    if reply != "OK":
                        self.errors.append(repr(reply))
                        return
                    with self.lock:
                        self.done += 1
        except Exception as e:  # reported by the test
            self.errors.append(repr(e))

    def count(self) -> int:
        with self.lock:
            return self.done

    def __enter__(self) -> "Load":
        for t in self.threads:
            t.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        for t in self.threads:
            t.join(60)
        assert not any(t.is_alive() for t in self.threads), "a load client hung"


def short_requests_under(load: Load, c: RawClient, short: tuple[Any, ...]) -> list[int]:
    """Sends SHORT_REQUESTS short commands one after the other while load runs; for each, the
    long replies received between its send and its reply."""
    deadline = time.monotonic() + 30
    while load.count() < 2 * LOAD_CLIENTS:   # every load client has had replies: all busy
        assert time.monotonic() < deadline and not load.errors, load.errors
        time.sleep(0.01)
    behind = []
    for _ in range(SHORT_REQUESTS):
        before = load.count()
        assert_ok(c.execute(*short))
        behind.append(load.count() - before)
    assert not load.errors, load.errors
    return behind


def check_not_held(behind: list[int]) -> None:
    # Ahead of a short request: at most one long request per load client and the one
    # running; the replies of those received by their threads a little late, so twice that.
    bound = 2 * (LOAD_CLIENTS + 1)
    assert max(behind) <= bound, (bound, behind)


@pytest.fixture
def srv(module_path, tf_backend_path, torch_backend_path):
    # Short runs queue too (no inline runs), as under any load.
    s = RedisServer(module_path, ["TF", str(tf_backend_path), "TORCH", str(torch_backend_path),
                                  "INLINE_RUN_MAX_US", "0"])
    yield s
    s.stop()


def test_short_requests_to_a_model_are_not_held_behind_its_long_runs(srv: RedisServer) -> None:
    with RawClient(srv.port, timeout=60) as c:
        slow_n = em.calibrate_slow(c)
        assert_ok(c.execute("AI.TENSORSET", "n_long", "INT32", "VALUES", slow_n(0.002)))
        assert_ok(c.execute("AI.TENSORSET", "n_short", "INT32", "VALUES", 1))
        long = lambda i: ("AI.MODELEXECUTE", "slow", "INPUTS", 1, "n_long", "OUTPUTS", 1,
                          f"long{i}")
        with Load(srv.port, long) as load:
            behind = short_requests_under(
                load, c, ("AI.MODELEXECUTE", "slow", "INPUTS", 1, "n_short", "OUTPUTS", 1,
                          "short"))
            assert load.count() > 0 and not load.stop.is_set()
        check_not_held(behind)
        assert c.execute("AI.TENSORGET", "short", "META")[-1] == [8, 8]
        fields = c.execute("INFO", "MODULES")
        completions = int(info_field(fields, "ai_completions"))
        wakeups = int(info_field(fields, "ai_completion_wakeups"))
        assert completions >= SHORT_REQUESTS and 0 < wakeups <= completions, fields


SCRIPT = """
def fast(tensors: List[Tensor], keys: List[str], args: List[str]):
    return tensors[0] + 1

def slow(tensors: List[Tensor], keys: List[str], args: List[str]):
    x = tensors[0]
    for i in range(int(args[0])):
        x = torch.tanh(torch.matmul(x, x))
    return x
"""


def test_a_scripts_fast_function_is_not_held_behind_its_slow_one(srv: RedisServer) -> None:
    with RawClient(srv.port, timeout=60) as c:
        assert_ok(c.execute("AI.SCRIPTSTORE", "s", "CPU", "ENTRY_POINTS", 2, "fast", "slow",
                            "SOURCE", SCRIPT))
        assert_ok(c.execute("AI.TENSORSET", "m", "FLOAT", 32, 32, "VALUES",
                            *([0.01] * (32 * 32))))

        def slow_run(n: int) -> float:
            t0 = time.perf_counter()
            assert_ok(c.execute("AI.SCRIPTEXECUTE", "s", "slow", "INPUTS", 1, "m", "OUTPUTS",
                                1, "cal", "ARGS", 1, n))
            return time.perf_counter() - t0

        slow_run(10)
        # fast's first runs are TorchScript's profiling runs (its executor optimizes a function
        # after them), hundreds of ms on a loaded machine: taken before the load, so that the
        # short requests measure the queue, not the warm-up
        for _ in range(3):
            assert_ok(c.execute("AI.SCRIPTEXECUTE", "s", "fast", "INPUTS", 1, "m", "OUTPUTS", 1,
                                "short"))
        per = (slow_run(2000) - slow_run(0)) / 2000
        n = max(1, int(0.002 / max(per, 1e-7)))
        long = lambda i: ("AI.SCRIPTEXECUTE", "s", "slow", "INPUTS", 1, "m", "OUTPUTS", 1,
                          f"long{i}", "ARGS", 1, n)
        with Load(srv.port, long) as load:
            behind = short_requests_under(
                load, c, ("AI.SCRIPTEXECUTE", "s", "fast", "INPUTS", 1, "m", "OUTPUTS", 1,
                          "short"))
        check_not_held(behind)
        assert [float(v) for v in c.execute("AI.TENSORGET", "short", "VALUES")][:2] == \
            pytest.approx([1.01, 1.01])
