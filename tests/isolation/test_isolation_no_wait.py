"""Redis's main thread never waits for a backend host (docs/architecture.md, "A request's
life"; docs/isolation.md).

After a host's death the restarter re-creates every model in the new host from the blob the
core keeps. Freeing a model whose re-creation is in progress used to wait, on Redis's main
thread, until that create ended (the handle borrowed the model's blob): a `DEL` of a 400 MB
model took 1.5 s and every other client waited with it. Now the handle takes the blob and the
restarter frees both when its create ends.

The fault backend's `slow-if-exists <file>` holds a create for as long as the file exists
(marking `<file>.started` and `<file>.done`), so each test here holds the re-creation open
and checks an order, never a time: `DEL`, `AI.MODELDEL`, `FLUSHALL` and an `AI.MODELSTORE`
over the key are answered, and so is a `PING` sent after them from another client, while the
re-create still runs (`.done` absent). When it ends the restarter frees what was deleted,
the server goes on, and the other models run. Also: an `AI.MODELSTORE` while the host
restarts is refused at once with the restart's error, not waited for.

A worker's channel to a host opens while the host is in a long create (issue 44, defect 3):
the host serves creates on a thread of its own and opens channels on its control thread. It
used to serve them one after another, so an OPEN_CHANNEL waited behind the create and, after
10 s, the core killed the healthy host ("a channel did not open in time"). Checked twice: a
run of a model already re-created while another's re-creation is held, and a worker's first
run during an `AI.MODELSTORE` whose create takes longer than those 10 s.

Frees of many models while the host is held in a create: the host used to read nothing on its
control connection during a create (it reads now, above, but a host that is stopped or stuck
still reads nothing), and the main thread used to send each free itself, a blocking send:
about 300 frees filled the socket, and `FLUSHALL` of 600 models held Redis
(every client's `PING`) until the create ended. Now frees are queued on the backend's slot and
the supervisor thread sends them when the socket has room; frees queued for a host that dies
are dropped (the next host never had those handles, and would take a free of an unknown handle
for a protocol error). And a model deleted while its re-create is held no longer marks the host
busy in the backend's list: a store or an INFO then sent a request the host would read only
after the create; the pending create itself now keeps them off.

No new command: the restricted-user checks of these commands are test_isolation.py's.
"""
from __future__ import annotations

import os
import pathlib
import re
import signal
import threading
import time
from typing import Callable

import pytest

from engine_models import blocked_clients
from fault_injection import fault_env
from helpers import assert_error, assert_ok, isolated_host, wait_file, wait_isolated_ready
from redis_server import RedisServer
from resp import RawClient


def _info(c: RawClient) -> dict:
    return isolated_host(c.execute("INFO", "MODULES"))


def _wait_recreated(c: RawClient, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while _info(c)["recreating"] != "0":
        assert time.monotonic() < deadline, _info(c)
        time.sleep(0.01)


def _kill_into_held_re_creation(c: RawClient, hold: pathlib.Path, timeout: float = 30) -> dict:
    """Kills the ready host with `hold` in place: its successor holds in the re-creation of the
    model whose spec says `slow-if-exists <hold>`. The old host's fields."""
    before = wait_isolated_ready(c)
    hold.touch()
    os.kill(int(before["pid"]), signal.SIGKILL)
    wait_file(hold.with_name(hold.name + ".started"), timeout)
    return before


@pytest.fixture
def srv(module_path: pathlib.Path, fault_backend: pathlib.Path):
    s = RedisServer(module_path, ["ISOLATE", "ONNX"], env=fault_env())
    with RawClient(s.port) as c:
        assert_ok(c.execute("AI.CONFIG", "LOADBACKEND", "ONNX", str(fault_backend)))
    yield s
    s.stop()


def _run_identity(c: RawClient, model: str) -> None:
    # 10.5: no magic value of the fault backend (3 would hang the run)
    assert_ok(c.execute("AI.TENSORSET", "x", "FLOAT", 2, "VALUES", 10.5, 20))
    assert_ok(c.execute("AI.MODELEXECUTE", model, "INPUTS", 1, "x", "OUTPUTS", 1, "y"))
    assert [float(v) for v in c.execute("AI.TENSORGET", "y", "VALUES")] == [10.5, 20.0]


FREES: dict[str, Callable[[RawClient], object]] = {
    "DEL": lambda c: c.execute("DEL", "slow"),
    "AI.MODELDEL": lambda c: c.execute("AI.MODELDEL", "slow"),
    "FLUSHALL": lambda c: c.execute("FLUSHALL"),
    "MODELSTORE over": lambda c: c.execute("AI.MODELSTORE", "slow", "ONNX", "CPU", "BLOB",
                                           "identity"),
}
# A store over the key is refused while the host re-creates (its control connection would
# make the main thread wait for the held create): the old model stays, and is freed when a
# store after the re-creation replaces it.
RESTARTING = "ERR ONNX backend process is restarting after it exited (signal 9 SIGKILL); try again"
WANT = {"DEL": 1, "AI.MODELDEL": "OK", "FLUSHALL": "OK", "MODELSTORE over": RESTARTING}


@pytest.mark.parametrize("how", list(FREES))
def test_freeing_a_model_being_re_created_does_not_wait_for_the_host(
        srv: RedisServer, tmp_path: pathlib.Path, how: str) -> None:
    hold = tmp_path / "hold"
    done = tmp_path / "hold.done"
    with RawClient(srv.port, timeout=20) as c, RawClient(srv.port, timeout=20) as other:
        # stored first: the restarter re-creates in creation order, so "good" waits too
        assert_ok(c.execute("AI.MODELSTORE", "slow", "ONNX", "CPU", "BLOB",
                            f"identity\nslow-if-exists {hold}"))
        assert_ok(c.execute("AI.MODELSTORE", "good", "ONNX", "CPU", "BLOB", "identity"))
        _run_identity(c, "slow")
        # the new host builds "slow" from its blob, and stays there
        _kill_into_held_re_creation(c, hold)
        reply = FREES[how](c)
        assert other.execute("PING") == "PONG"
        assert not done.exists(), "the re-create ended before the commands were answered"
        assert (str(reply) if how == "MODELSTORE over" else reply) == WANT[how], reply
        assert srv.alive()
        hold.unlink()
        wait_file(done)
        if how == "MODELSTORE over":
            _wait_recreated(c)
            assert_ok(FREES[how](c))
            _run_identity(c, "slow")
        elif how != "FLUSHALL":
            assert_error(c.execute("AI.MODELGET", "slow", "META"), "ERR model key is empty")
        if how != "FLUSHALL":
            deadline = time.monotonic() + 10
            while True:   # "good" is re-created after the held one
                r = c.execute("AI.MODELEXECUTE", "good", "INPUTS", 1, "x", "OUTPUTS", 1, "y")
                if r == "OK" or time.monotonic() > deadline:
                    break
                time.sleep(0.02)
            _run_identity(c, "good")
        assert c.execute("PING") == "PONG" and srv.alive()


def test_a_store_while_the_host_re_creates_is_refused_at_once(
        srv: RedisServer, tmp_path: pathlib.Path) -> None:
    """A new model's create on the main thread does not queue behind the held re-create on
    the host's control connection: refused at once with the restart's error; once the
    re-creation is over the same store succeeds."""
    hold = tmp_path / "hold"
    with RawClient(srv.port, timeout=20) as c, RawClient(srv.port, timeout=20) as other:
        assert_ok(c.execute("AI.MODELSTORE", "slow", "ONNX", "CPU", "BLOB",
                            f"identity\nslow-if-exists {hold}"))
        _kill_into_held_re_creation(c, hold)
        assert _info(c)["recreating"] == "1"
        assert_error(c.execute("AI.MODELSTORE", "new", "ONNX", "CPU", "BLOB", "identity"),
                     RESTARTING)
        assert other.execute("PING") == "PONG"
        assert not (tmp_path / "hold.done").exists()
        hold.unlink()
        _wait_recreated(c)
        assert_ok(c.execute("AI.MODELSTORE", "new", "ONNX", "CPU", "BLOB", "identity"))
        _run_identity(c, "new")
        _run_identity(c, "slow")


def test_a_channel_opens_while_the_host_re_creates_another_model(
        srv: RedisServer, tmp_path: pathlib.Path) -> None:
    """After a restart every worker opens a new channel. "good" is re-created first; while
    "slow"'s re-creation is held, a run of "good" is answered (on a channel opened meanwhile)
    and the host lives on: the held create is still running when the answer comes."""
    hold = tmp_path / "hold"
    with RawClient(srv.port, timeout=40) as c:
        assert_ok(c.execute("AI.MODELSTORE", "good", "ONNX", "CPU", "BLOB", "identity"))
        assert_ok(c.execute("AI.MODELSTORE", "slow", "ONNX", "CPU", "BLOB",
                            f"identity\nslow-if-exists {hold}"))
        _run_identity(c, "good")  # the worker's channel, to the host about to die
        before = _kill_into_held_re_creation(c, hold)
        _run_identity(c, "good")
        assert not (tmp_path / "hold.done").exists(), "the re-create ended before the answer"
        info = _info(c)
        assert info["pid"] != before["pid"] and info["restarts"] == "1", info
        hold.unlink()
        wait_file(tmp_path / "hold.done")
        after = wait_isolated_ready(c)
        assert after["pid"] == info["pid"] and after["restarts"] == "1", after
        _run_identity(c, "slow")


def test_a_first_run_during_a_long_store_opens_its_channel(
        srv: RedisServer, tmp_path: pathlib.Path) -> None:
    """No worker has a channel to the host yet. A run of a batched model waits MINBATCHTIMEOUT
    (1 s) for a second member, then opens its worker's channel while Redis's main thread waits
    for an `AI.MODELSTORE` whose create the test holds for 12 s: past the 10 s an
    OPEN_CHANNEL was given. The run and the store both succeed, on the same host."""
    hold = tmp_path / "hold"
    with RawClient(srv.port, timeout=60) as c, RawClient(srv.port, timeout=60) as runner, \
            RawClient(srv.port, timeout=60) as storer:
        assert_ok(c.execute("AI.MODELSTORE", "batched", "ONNX", "CPU", "BATCHSIZE", 4,
                            "MINBATCHSIZE", 2, "MINBATCHTIMEOUT", 1000, "BLOB", "identity"))
        before = wait_isolated_ready(c)
        assert_ok(c.execute("AI.TENSORSET", "x", "FLOAT", 1, 2, "VALUES", 10.5, 20))
        hold.touch()
        runner.send("AI.MODELEXECUTE", "batched", "INPUTS", 1, "x", "OUTPUTS", 1, "y")
        deadline = time.monotonic() + 10
        while blocked_clients(c) != 1:
            assert time.monotonic() < deadline, "the run was not taken"
            time.sleep(0.01)
        storer.send("AI.MODELSTORE", "slow", "ONNX", "CPU", "BLOB",
                    f"identity\nslow-if-exists {hold}")
        wait_file(tmp_path / "hold.started")
        time.sleep(12)
        assert not (tmp_path / "hold.done").exists()
        hold.unlink()
        assert_ok(storer.read())
        assert_ok(runner.read())
        assert [float(v) for v in c.execute("AI.TENSORGET", "y", "VALUES")] == [10.5, 20.0]
        info = _info(c)
        assert info["pid"] == before["pid"] and info["restarts"] == before["restarts"], info
        _run_identity(c, "slow")


# --- frees while the host is held in a create ----------------------------------------------

MANY = 600          # twice what filled the control socket before frees were queued
HOLD_S = 5.0        # how long FLUSHALL may take to be answered while the create is held
# The issue's target is a PING under 10 ms; the bound here only has to tell "never waited for
# the host" (a few ms, tens on a loaded 2-core machine) from "waited for the held create" (the
# whole hold, seconds): 1 s leaves room for a loaded machine and is a fifth of the hold.
WORST_PING_S = 1.0


class _Pinger(threading.Thread):
    """PINGs from a client of its own every 5 ms until stopped; `worst` is the slowest answer."""

    def __init__(self, port: int) -> None:
        super().__init__(daemon=True)
        self.port = port
        self.stop = threading.Event()
        self.worst = 0.0
        self.count = 0
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            with RawClient(self.port, timeout=60) as p:
                while not self.stop.is_set():
                    t0 = time.monotonic()
                    assert p.execute("PING") == "PONG"
                    self.worst = max(self.worst, time.monotonic() - t0)
                    self.count += 1
                    time.sleep(0.005)
        except BaseException as e:  # re-raised by the test
            self.error = e


def _host_models(c: RawClient) -> int:
    """The models alive in the host (the fault backend's own INFO field), or -1 while INFO
    leaves the host's fields out (it re-creates models)."""
    text = c.execute("INFO", "MODULES")
    text = text.decode() if isinstance(text, bytes) else text
    m = re.search(r"^ai_fault_models:(\d+)", text, re.M)
    return int(m.group(1)) if m else -1


def _hold_with_many_models(c: RawClient, hold: pathlib.Path) -> dict:
    """MANY identity models and one slow one stored last, the host killed, and its successor
    held in the slow model's re-create and stopped (SIGSTOP), the MANY already re-created (live
    in it, so each has a free to send): the INFO line from before the kill."""
    for i in range(MANY):
        c.send("AI.MODELSTORE", f"m{i}", "ONNX", "CPU", "BLOB", "identity")
    replies = [c.read() for _ in range(MANY)]
    assert all(r == "OK" for r in replies), [r for r in replies if r != "OK"][:3]
    assert_ok(c.execute("AI.MODELSTORE", "slow", "ONNX", "CPU", "BLOB",
                        f"identity\nslow-if-exists {hold}"))
    wait_isolated_ready(c)
    assert _host_models(c) == MANY + 1
    before = _kill_into_held_re_creation(c, hold, 60)
    held = _info(c)
    assert held["recreating"] == "1"
    # The host's control thread reads on during a create (defect 3 of issue 44): stopped, it
    # reads nothing, as a stuck host, and the frees must wait in the module.
    os.kill(int(held["pid"]), signal.SIGSTOP)
    return before


def test_frees_while_the_host_is_held_in_a_create_do_not_hold_redis(
        srv: RedisServer, tmp_path: pathlib.Path) -> None:
    hold = tmp_path / "hold"
    done = tmp_path / "hold.done"
    with RawClient(srv.port, timeout=60) as c:
        before = _hold_with_many_models(c, hold)
        pinger = _Pinger(srv.port)
        pinger.start()
        time.sleep(0.1)
        # SYNC: Valkey 8 frees a plain FLUSHALL's keys on a background thread by default
        # (lazyfree-lazy-user-flush), which the main thread would not wait for either
        c.send("FLUSHALL", "SYNC")
        answered = c.pending(wait=HOLD_S)
        queued = None
        if answered:
            assert c.read() == "OK"
            queued = _info(c).get("frees_queued")
            time.sleep(1.0)   # PINGs go on while the frees wait for the host
        pinger.stop.set()
        held = not done.exists()
        os.kill(int(_info(c)["pid"]), signal.SIGCONT)
        hold.unlink()
        pinger.join(60)
        if not answered:
            assert c.read() == "OK"
        if pinger.error:
            raise pinger.error
        assert held, "the re-create ended before the test released it"
        assert answered and pinger.worst < WORST_PING_S, (
            f"worst PING {pinger.worst * 1000:.0f} ms over {pinger.count} PINGs while the host "
            f"was held in a create; FLUSHALL answered during the hold: {answered}")
        assert int(queued) > 0, queued   # they wait in the module, not in a blocked send
        # Memory: every free reaches the host once its create ends.
        wait_file(done)
        deadline = time.monotonic() + 30
        while _host_models(c) != 0:
            assert time.monotonic() < deadline, (_host_models(c), _info(c))
            time.sleep(0.05)
        after = _info(c)
        assert after["frees_queued"] == "0" and after["models"] == "0", after
        assert after["restarts"] == str(int(before["restarts"]) + 1), after
        assert srv.alive() and c.execute("PING") == "PONG"


def test_frees_queued_for_a_host_that_dies_are_dropped(
        srv: RedisServer, tmp_path: pathlib.Path) -> None:
    """The held host is killed with frees still queued: its successor gets none of them (each
    would be a free of a handle it never had, a protocol error that makes it exit)."""
    hold = tmp_path / "hold"
    with RawClient(srv.port, timeout=60) as c:
        before = _hold_with_many_models(c, hold)
        assert c.execute("FLUSHALL", "SYNC") == "OK"   # on this thread, as above
        held = _info(c)
        assert int(held["frees_queued"]) > 0, held
        os.kill(int(held["pid"]), signal.SIGKILL)
        hold.unlink()
        after = wait_isolated_ready(c, old_pid=int(held["pid"]))
        assert after["frees_queued"] == "0", after
        assert _host_models(c) == 0
        assert_ok(c.execute("AI.MODELSTORE", "new", "ONNX", "CPU", "BLOB", "identity"))
        _run_identity(c, "new")
        now = _info(c)
        assert now["pid"] == after["pid"] and now["last_exit"] == "signal_9_SIGKILL", now
        assert now["restarts"] == str(int(before["restarts"]) + 2), now
        assert _host_models(c) == 1


def test_the_host_stays_busy_for_the_main_thread_after_its_held_model_is_deleted(
        srv: RedisServer, tmp_path: pathlib.Path) -> None:
    """Deleting the model whose re-create is held takes it out of the backend's list, but the
    host is still in that create: a store is refused at once all the same, and INFO leaves the
    host's own fields out at once, rather than send a request the host reads only when the
    create ends (a store waited for it, an INFO its 500 ms timeout). SLOWLOG (the commands' own
    time on the main thread, over 200 ms) shows neither: INFO took 500 ms before."""
    hold = tmp_path / "hold"
    with RawClient(srv.port, timeout=60) as c, RawClient(srv.port, timeout=60) as other:
        assert_ok(c.execute("AI.MODELSTORE", "slow", "ONNX", "CPU", "BLOB",
                            f"identity\nslow-if-exists {hold}"))
        _kill_into_held_re_creation(c, hold)
        assert c.execute("DEL", "slow") == 1
        assert_ok(c.execute("CONFIG", "SET", "slowlog-log-slower-than", 200000))
        assert_ok(c.execute("SLOWLOG", "RESET"))
        assert [_host_models(c) for _ in range(3)] == [-1, -1, -1]
        slow_commands = [e[3] for e in other.execute("SLOWLOG", "GET", 10)]
        c.send("AI.MODELSTORE", "new", "ONNX", "CPU", "BLOB", "identity")
        answered = c.pending(wait=HOLD_S)
        held = not (tmp_path / "hold.done").exists()
        hold.unlink()
        reply = c.read()
        assert held, "the re-create ended before the test released it"
        assert answered and str(reply) == RESTARTING and slow_commands == [], (
            f"store answered during the hold: {answered}, with {reply!r}; "
            f"commands over 200 ms: {slow_commands}")
        assert other.execute("PING") == "PONG"
        wait_file(tmp_path / "hold.done")
        deadline = time.monotonic() + 30
        while _host_models(c) != 0:   # the deleted model, freed once its create ended
            assert time.monotonic() < deadline, _info(c)
            time.sleep(0.05)
        assert_ok(c.execute("AI.MODELSTORE", "new", "ONNX", "CPU", "BLOB", "identity"))
        _run_identity(c, "new")
