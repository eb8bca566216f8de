"""Auto-batching (docs/commands.md, "Auto-batching"): BATCHSIZE, MINBATCHSIZE,
MINBATCHTIMEOUT for TF, TORCH, ONNX.

Compatible queued MODELEXECUTE requests to one model are concatenated along dim 0, run
once and sliced back. The models of tests/support/engine_models.py reveal the batch size they ran
with (output 0 `bs` = dim 0 of the batch, in every element) and return 2*x as output 1,
so each client can check that it got exactly its own rows.

To make batching deterministic, the CPU queue's only worker (THREADS_PER_QUEUE 1) is held
by a slow TF run (engine_models.HeldQueue) while the requests are queued; TF, Torch and
ONNX models on device CPU share that queue. When the slow run ends, the worker takes the
first queued request and batches the compatible ones behind it.

Decisions of the lead tested here: a batch stops once its dim-0 sum reaches BATCHSIZE or
more (it may exceed it by the last request); after MINBATCHTIMEOUT every compatible queued
request runs in one batch; a model whose output dim 0 is not the batch's gives
`ERR Model did not generate the expected batch size` to every request of the batch.

One server per module (TF at load time; Torch and ONNX load lazily from the install tree's
backends/ on the first MODELSTORE and are skipped while their .so is not built)."""
from __future__ import annotations

import collections
import threading
import time

import numpy as np
import pytest

import engine_models as em
from helpers import assert_error, assert_ok
from redis_server import Connect, RedisServer
from resp import RawClient, Status

BACKENDS = ["TF", "TORCH", "ONNX"]
WRONG_BATCH = "ERR Model did not generate the expected batch size"
HOLD_S = 0.4


@pytest.fixture(scope="module")
def tf_server(tf_one_worker_server: RedisServer) -> RedisServer:
    """One worker (conftest.py): the tests hold it with a slow run so that requests gather
    behind it. Beside the default helper the free worker would run each batched request as it
    comes (a CI pass saw a request run alone and a hold end early);
    tests/execution/test_helper_workers.py covers batching beside the helper."""
    return tf_one_worker_server


@pytest.fixture
def c(tf_server: RedisServer, slow_n, connect: Connect) -> RawClient:
    client = connect(tf_server)
    assert_ok(client.execute("AI.MODELSTORE", "slow", "TF", "CPU", "INPUTS", 1, "n", "OUTPUTS",
                             1, "out", "BLOB", em.tf_graphs.slow_graph()))
    return client


def hold(server: RedisServer, slow_n) -> em.HeldQueue:
    return em.HeldQueue(server.port, slow_n(HOLD_S))


# --------------------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------------------

def tset(c: RawClient, key: str, arr: np.ndarray) -> None:
    arr = np.ascontiguousarray(arr, np.float32)
    assert_ok(c.execute("AI.TENSORSET", key, "FLOAT", *arr.shape, "BLOB", arr.tobytes()))


def tget(c: RawClient, key: str) -> np.ndarray:
    reply = c.execute("AI.TENSORGET", key, "META", "BLOB")
    assert isinstance(reply, list), f"AI.TENSORGET {key}: {reply!r}"
    assert reply[1] == b"FLOAT", reply[:4]
    return np.frombuffer(reply[5], np.float32).reshape(reply[3])


def store_bs(c: RawClient, install_dir, backend: str, key: str, *opts) -> None:
    """Stores the batch-revealing model of `backend` under `key` with MODELSTORE options."""
    if backend == "TF":
        assert_ok(em.store_tf(c, key, em.tf_batch_size_graph(), ["x"], ["bs", "y"], *opts))
        return
    em.require_backend(install_dir, backend)
    blob = em.torch_batch_size_model() if backend == "TORCH" else em.onnx_batch_size_model()
    assert_ok(c.execute("AI.MODELSTORE", key, backend, "CPU", *opts, "BLOB", blob))


def store_wrong(c: RawClient, install_dir, backend: str, key: str, *opts) -> None:
    if backend == "TF":
        assert_ok(em.store_tf(c, key, em.tf_wrong_batch_graph(), ["x"], ["out"], *opts))
        return
    em.require_backend(install_dir, backend)
    blob = em.torch_wrong_batch_model() if backend == "TORCH" else em.onnx_wrong_batch_model()
    assert_ok(c.execute("AI.MODELSTORE", key, backend, "CPU", *opts, "BLOB", blob))


def execute_args(model: str, i: int) -> list:
    return ["AI.MODELEXECUTE", model, "INPUTS", 1, f"x{i}", "OUTPUTS", 2, f"bs{i}", f"y{i}"]


def client_input(i: int, rows: int, cols: int = 3) -> np.ndarray:
    """Rows unique to client i, so a wrong slice cannot go unnoticed."""
    return (100 * i + np.arange(rows * cols, dtype=np.float32).reshape(rows, cols)) / 4


def info(c: RawClient, key: str) -> dict:
    reply = c.execute("AI.INFO", key)
    assert isinstance(reply, list) and len(reply) == 18, reply
    return {reply[k].decode(): reply[k + 1] for k in range(0, 18, 2)}


def run_queued(server: RedisServer, slow_n, c: RawClient, model: str, rows: list[int],
               cols: list[int] | None = None, models: list[str] | None = None) -> list:
    """Queues one MODELEXECUTE per entry of `rows` (its dim 0) behind a slow run, on its own
    connection each, in order; releases the worker; returns the replies in order."""
    cols = cols or [3] * len(rows)
    models = models or [model] * len(rows)
    clients = [RawClient(server.port) for _ in rows]
    try:
        for i, (r, k) in enumerate(zip(rows, cols)):
            tset(c, f"x{i}", client_input(i, r, k))
        with hold(server, slow_n) as h:
            for i, cl in enumerate(clients):
                cl.send(*execute_args(models[i], i))
                h.wait_queued(2 + i)  # keep the queue order = the send order
        return [cl.read() for cl in clients]
    finally:
        for cl in clients:
            cl.close()


def check_slices(c: RawClient, rows: list[int], expected_bs: list[int],
                 cols: list[int] | None = None) -> None:
    cols = cols or [3] * len(rows)
    for i, (r, k, b) in enumerate(zip(rows, cols, expected_bs)):
        bs = tget(c, f"bs{i}")
        y = tget(c, f"y{i}")
        assert bs.shape == (r, k), f"client {i}: bs shape {bs.shape}, expected {(r, k)}"
        assert np.all(bs == b), f"client {i}: ran in a batch of {np.unique(bs)}, expected {b}"
        np.testing.assert_array_equal(y, 2 * client_input(i, r, k), err_msg=f"client {i}: not its own rows")


# --------------------------------------------------------------------------------------
# BATCHSIZE
# --------------------------------------------------------------------------------------

@pytest.mark.parametrize("backend", BACKENDS)
def test_eight_concurrent_clients_run_in_one_batch(c, tf_server, slow_n, install_dir, backend):
    store_bs(c, install_dir, backend, "m", "BATCHSIZE", 8)
    rows = [1] * 8
    replies = run_queued(tf_server, slow_n, c, "m", rows)
    assert replies == [Status("OK")] * 8, replies
    # every client ran in a batch of 8: the model ran once for 8 requests
    check_slices(c, rows, [8] * 8)
    st = info(c, "m")
    assert (st["calls"], st["samples"], st["errors"]) == (8, 8, 0), st
    # each request of the batch is credited with the batch's run time (docs/commands.md,
    # "How commands run")
    assert st["duration"] > 0 and st["duration"] % 8 == 0, st


@pytest.mark.parametrize("backend", BACKENDS)
def test_requests_of_different_dim0_get_their_own_slices(c, tf_server, slow_n, install_dir,
                                                          backend):
    store_bs(c, install_dir, backend, "m", "BATCHSIZE", 8)
    rows = [1, 2, 3, 2]
    assert run_queued(tf_server, slow_n, c, "m", rows) == [Status("OK")] * 4
    check_slices(c, rows, [8] * 4)
    st = info(c, "m")
    assert (st["calls"], st["samples"], st["errors"]) == (4, 8, 0), st


def test_batch_stops_once_the_sum_reaches_batchsize(c, tf_server, slow_n, install_dir):
    store_bs(c, install_dir, "TF", "m", "BATCHSIZE", 4)
    # 3 < 4: add the next (3 + 3 = 6 >= 4: stop; the batch exceeds BATCHSIZE by the last)
    rows = [3, 3, 1]
    assert run_queued(tf_server, slow_n, c, "m", rows) == [Status("OK")] * 3
    check_slices(c, rows, [6, 6, 1])
    # five requests of one row with BATCHSIZE 4: a batch of 4, then one alone
    assert_ok(c.execute("FLUSHALL", "SYNC"))
    assert_ok(c.execute("AI.MODELSTORE", "slow", "TF", "CPU", "INPUTS", 1, "n", "OUTPUTS", 1,
                        "out", "BLOB", em.tf_graphs.slow_graph()))
    store_bs(c, install_dir, "TF", "m", "BATCHSIZE", 4)
    rows = [1] * 5
    assert run_queued(tf_server, slow_n, c, "m", rows) == [Status("OK")] * 5
    check_slices(c, rows, [4, 4, 4, 4, 1])


def test_first_request_at_or_over_batchsize_runs_alone(c, tf_server, slow_n, install_dir):
    store_bs(c, install_dir, "TF", "m", "BATCHSIZE", 3)
    rows = [4, 1, 1, 3, 1]
    assert run_queued(tf_server, slow_n, c, "m", rows) == [Status("OK")] * 5
    # 4 >= 3 alone; 1 + 1 = 2 < 3, the next (3) brings it to 5 >= 3; the last 1 alone
    check_slices(c, rows, [4, 5, 5, 5, 1])


def test_only_compatible_requests_are_batched(c, tf_server, slow_n, install_dir):
    store_bs(c, install_dir, "TF", "m", "BATCHSIZE", 8)
    store_bs(c, install_dir, "TF", "m2", "BATCHSIZE", 8)
    # B has another dim 1; E uses another model key (same graph): neither joins A's batch
    rows = [1, 1, 1, 2, 1]
    cols = [3, 4, 3, 3, 3]
    models = ["m", "m", "m", "m", "m2"]
    replies = run_queued(tf_server, slow_n, c, "m", rows, cols=cols, models=models)
    assert replies == [Status("OK")] * 5
    check_slices(c, rows, [4, 1, 4, 4, 1], cols=cols)


def test_request_whose_inputs_disagree_on_dim0_runs_alone(c, tf_server, slow_n, install_dir):
    assert_ok(em.store_tf(c, "mul", em.tf_graphs.mul_graph(), ["a", "b"], ["mul"], "BATCHSIZE", 4))
    a0, b0 = np.arange(4, dtype=np.float32).reshape(2, 2), np.array([[10, 100]], np.float32)
    tset(c, "a0", a0)
    tset(c, "b0", b0)  # broadcast: dims 0 disagree (2 vs 1)
    for i in (1, 2):
        tset(c, f"a{i}", np.full((1, 2), i, np.float32))
        tset(c, f"b{i}", np.full((1, 2), 3, np.float32))
    clients = [RawClient(tf_server.port) for _ in range(3)]
    try:
        with hold(tf_server, slow_n) as h:
            for i, cl in enumerate(clients):
                cl.send("AI.MODELEXECUTE", "mul", "INPUTS", 2, f"a{i}", f"b{i}", "OUTPUTS", 1, f"o{i}")
                h.wait_queued(2 + i)
        assert [cl.read() for cl in clients] == [Status("OK")] * 3
    finally:
        for cl in clients:
            cl.close()
    np.testing.assert_array_equal(tget(c, "o0"), a0 * b0)
    np.testing.assert_array_equal(tget(c, "o1"), np.full((1, 2), 3, np.float32))
    np.testing.assert_array_equal(tget(c, "o2"), np.full((1, 2), 6, np.float32))


@pytest.mark.parametrize("backend", BACKENDS)
def test_wrong_batch_size_fails_every_request_of_the_batch(c, tf_server, slow_n, install_dir,
                                                           backend):
    store_wrong(c, install_dir, backend, "w", "BATCHSIZE", 4)
    for i in range(3):
        tset(c, f"x{i}", client_input(i, 1))
    replies = em.replies_behind(
        hold(tf_server, slow_n), tf_server.port,
        [("AI.MODELEXECUTE", "w", "INPUTS", 1, f"x{i}", "OUTPUTS", 1, f"o{i}") for i in range(3)])
    for i, rep in enumerate(replies):
        assert_error(rep, WRONG_BATCH)
        assert c.execute("EXISTS", f"o{i}") == 0
    st = info(c, "w")
    assert (st["calls"], st["errors"], st["samples"], st["duration"]) == (3, 3, 0, 0), st
    # a request that runs alone is not a batch: its output is taken as it is
    assert_ok(c.execute("AI.MODELEXECUTE", "w", "INPUTS", 1, "x0", "OUTPUTS", 1, "o0"))
    np.testing.assert_array_equal(tget(c, "o0"), client_input(0, 1))
    assert c.execute("PING") == "PONG"


def test_dag_op_batches_with_a_modelexecute(c, tf_server, slow_n, install_dir):
    """DAG ops run on the same engine: a DAG's MODELEXECUTE joins a queued MODELEXECUTE."""
    store_bs(c, install_dir, "TF", "m", "BATCHSIZE", 8)
    tset(c, "x0", client_input(0, 1))
    tset(c, "x1", client_input(1, 2))
    with RawClient(tf_server.port) as d, RawClient(tf_server.port) as e:
        with hold(tf_server, slow_n) as h:
            d.send("AI.DAGEXECUTE", "LOAD", 1, "x0", "|>", *execute_args("m", 0),
                   "|>", "AI.TENSORGET", "bs0", "VALUES", "|>", "AI.TENSORGET", "y0", "BLOB")
            h.wait_queued(2)
            e.send(*execute_args("m", 1))
            h.wait_queued(3)
        dag_reply = d.read()
        assert e.read() == "OK"
    assert dag_reply[0] == "OK", dag_reply
    assert dag_reply[1] == [b"3"] * 3, f"the DAG's op ran in a batch of {dag_reply[1]}"
    assert np.frombuffer(dag_reply[2], np.float32).tolist() == (2 * client_input(0, 1)).ravel().tolist()
    assert c.execute("EXISTS", "bs0", "y0") == 0  # DAG names are local
    bs1, y1 = tget(c, "bs1"), tget(c, "y1")
    assert bs1.shape == (2, 3) and np.all(bs1 == 3), bs1
    np.testing.assert_array_equal(y1, 2 * client_input(1, 2))


def test_concurrent_clients_without_holding(c, tf_server, install_dir):
    """8 threads x 25 requests, no slow run in front: whatever batches form, every client
    gets its own rows, and a batch of b requests of one row is seen by exactly b of them."""
    store_bs(c, install_dir, "TF", "m", "BATCHSIZE", 8)
    seen: list[int] = []
    errors: list[str] = []
    lock = threading.Lock()

    def client(i: int) -> None:
        with RawClient(tf_server.port) as cl:
            x = client_input(i, 1)
            tset(cl, f"x{i}", x)
            for _ in range(25):
                rep = cl.execute("AI.DAGEXECUTE", "LOAD", 1, f"x{i}", "|>", *execute_args("m", i),
                                 "|>", "AI.TENSORGET", f"bs{i}", "BLOB", "|>", "AI.TENSORGET",
                                 f"y{i}", "BLOB")
                if not (isinstance(rep, list) and rep[0] == "OK"):
                    with lock:
                        errors.append(repr(rep))
                    return
                bs = np.frombuffer(rep[1], np.float32)
                y = np.frombuffer(rep[2], np.float32)
                ok = np.all(bs == bs[0]) and np.array_equal(y, 2 * x.ravel())
                with lock:
                    seen.append(int(bs[0]))
                    if not ok:
                        errors.append(f"client {i}: bs {bs}, y {y}")

    threads = [threading.Thread(target=client, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors, errors[:5]
    counts = collections.Counter(seen)
    assert sum(counts.values()) == 200
    for b, n in counts.items():
        assert 1 <= b <= 8 and n % b == 0, f"{n} requests saw a batch of {b}: {dict(counts)}"
    runs = sum(n // b for b, n in counts.items())
    print(f"200 requests from 8 clients ran in {runs} model runs; batch sizes {dict(counts)}")
    st = info(c, "m")
    assert (st["calls"], st["samples"], st["errors"]) == (200, 200, 0), st


# --------------------------------------------------------------------------------------
# MINBATCHSIZE / MINBATCHTIMEOUT
# --------------------------------------------------------------------------------------

@pytest.mark.parametrize("backend", BACKENDS)
def test_minbatchsize_holds_requests_until_enough_arrive(c, tf_server, install_dir, backend):
    store_bs(c, install_dir, backend, "m", "BATCHSIZE", 8, "MINBATCHSIZE", 4)
    assert_ok(em.store_tf(c, "plus1", em.tf_add_one_graph(), ["x"], ["out"]))
    for i in range(4):
        tset(c, f"x{i}", client_input(i, 1))
    clients = [RawClient(tf_server.port) for _ in range(4)]
    try:
        for i in range(3):
            clients[i].send(*execute_args("m", i))
        assert em.wait_until_blocked(c, 3)
        time.sleep(0.4)
        for i in range(3):
            assert not clients[i].pending(), f"client {i} answered before MINBATCHSIZE: {clients[i].read()!r}"
        # held requests do not hold the queue: another model on CPU runs at once
        t0 = time.perf_counter()
        assert_ok(c.execute("AI.MODELEXECUTE", "plus1", "INPUTS", 1, "x0", "OUTPUTS", 1, "p"))
        assert time.perf_counter() - t0 < 0.3
        np.testing.assert_array_equal(tget(c, "p"), client_input(0, 1) + 1)
        assert not any(cl.pending() for cl in clients[:3])
        clients[3].send(*execute_args("m", 3))
        replies = [cl.read() for cl in clients]
    finally:
        for cl in clients:
            cl.close()
    assert replies == [Status("OK")] * 4, replies
    check_slices(c, [1] * 4, [4] * 4)


@pytest.mark.parametrize("backend", BACKENDS)
def test_minbatchtimeout_releases_held_requests(c, tf_server, install_dir, backend):
    store_bs(c, install_dir, backend, "m", "BATCHSIZE", 8, "MINBATCHSIZE", 4,
             "MINBATCHTIMEOUT", 300)
    for i in range(2):
        tset(c, f"x{i}", client_input(i, 1))
    with RawClient(tf_server.port) as a, RawClient(tf_server.port) as b:
        t0 = time.perf_counter()
        a.send(*execute_args("m", 0))
        time.sleep(0.1)
        b.send(*execute_args("m", 1))
        ra, rb = a.read(), b.read()
        elapsed = time.perf_counter() - t0
        assert not a.pending() and not b.pending()
    assert (ra, rb) == ("OK", "OK"), (ra, rb)
    assert 0.28 <= elapsed < 2.0, f"released after {elapsed:.3f} s (MINBATCHTIMEOUT 300 ms)"
    # both queued requests run together once the first one's timeout has passed
    check_slices(c, [1, 1], [2, 2])


def test_minbatchtimeout_releases_a_single_request(c, tf_server, install_dir):
    store_bs(c, install_dir, "TF", "m", "BATCHSIZE", 8, "MINBATCHSIZE", 2, "MINBATCHTIMEOUT", 200)
    tset(c, "x0", client_input(0, 1))
    t0 = time.perf_counter()
    assert_ok(c.execute(*execute_args("m", 0)))
    elapsed = time.perf_counter() - t0
    assert 0.18 <= elapsed < 2.0, elapsed
    check_slices(c, [1], [1])


def test_minbatchsize_met_by_one_request(c, tf_server, install_dir):
    store_bs(c, install_dir, "TF", "m", "BATCHSIZE", 8, "MINBATCHSIZE", 4)
    tset(c, "x0", client_input(0, 4))
    tset(c, "x1", client_input(1, 9))
    t0 = time.perf_counter()
    assert_ok(c.execute(*execute_args("m", 0)))   # dim 0 = MINBATCHSIZE: runs at once
    assert_ok(c.execute(*execute_args("m", 1)))   # dim 0 > BATCHSIZE: runs alone, at once
    assert time.perf_counter() - t0 < 1.0
    check_slices(c, [4, 9], [4, 9])


def test_minbatchsize_without_timeout_waits_for_ever(c, tf_server, install_dir):
    """With no MINBATCHTIMEOUT a lone request stays queued until a second one arrives."""
    store_bs(c, install_dir, "TF", "m", "BATCHSIZE", 8, "MINBATCHSIZE", 2)
    tset(c, "x0", client_input(0, 1))
    with RawClient(tf_server.port) as a:
        a.send(*execute_args("m", 0))
        assert not a.pending(wait=0.6), "a lone request ran although MINBATCHSIZE is 2"
        tset(c, "x1", client_input(1, 1))
        assert_ok(c.execute(*execute_args("m", 1)))
        assert a.read() == "OK"
    check_slices(c, [1, 1], [2, 2])


def test_held_request_times_out(c, tf_server, install_dir):
    """A request held for MINBATCHSIZE still has its TIMEOUT (counted from enqueue): it is
    answered +TIMEDOUT instead of waiting for ever (1.2 re-examines held requests, and its
    timeout check runs each time). Not counted in the stats."""
    store_bs(c, install_dir, "TF", "m", "BATCHSIZE", 8, "MINBATCHSIZE", 2)
    tset(c, "x0", client_input(0, 1))
    with RawClient(tf_server.port) as a:
        t0 = time.perf_counter()
        a.send(*execute_args("m", 0), "TIMEOUT", 200)
        assert a.pending(wait=3.0), "a held request with TIMEOUT 200 was not answered within 3 s"
        reply = a.read()
        elapsed = time.perf_counter() - t0
    assert isinstance(reply, Status) and reply == "TIMEDOUT", reply
    assert 0.18 <= elapsed < 3.0, elapsed
    assert c.execute("EXISTS", "bs0", "y0") == 0
    st = info(c, "m")
    assert (st["calls"], st["errors"]) == (0, 0), st


def test_timed_out_request_is_left_out_of_the_batch(c, tf_server, slow_n, install_dir):
    """Requests taken together are each checked for TIMEOUT: one that waited too long gets
    +TIMEDOUT and is not part of the batch the others run in."""
    store_bs(c, install_dir, "TF", "m", "BATCHSIZE", 8)
    for i in range(3):
        tset(c, f"x{i}", client_input(i, 1))
    clients = [RawClient(tf_server.port) for _ in range(3)]
    try:
        with hold(tf_server, slow_n) as h:
            clients[0].send(*execute_args("m", 0), "TIMEOUT", 1000)
            h.wait_queued(2)
            clients[1].send(*execute_args("m", 1), "TIMEOUT", 50)
            h.wait_queued(3)
            clients[2].send(*execute_args("m", 2))
            h.wait_queued(4)
        replies = [cl.read() for cl in clients]
    finally:
        for cl in clients:
            cl.close()
    assert replies == [Status("OK"), Status("TIMEDOUT"), Status("OK")], replies
    assert c.execute("EXISTS", "bs1", "y1") == 0
    bs0, bs2 = tget(c, "bs0"), tget(c, "bs2")
    assert np.all(bs0 == 2) and np.all(bs2 == 2), (bs0, bs2)
    np.testing.assert_array_equal(tget(c, "y2"), 2 * client_input(2, 1))
    st = info(c, "m")
    assert (st["calls"], st["samples"], st["errors"]) == (2, 2, 0), st


# --------------------------------------------------------------------------------------
# after the batch: each member finished or queued for its next op, none run on
# (docs/architecture.md, "6. Workers: batching and running")
# --------------------------------------------------------------------------------------

def slow_op(c: RawClient, slow_n, device: str, seconds: float) -> list:
    """A DAG op of the slow graph stored on `device`, lasting `seconds` at least; its input
    is the tensor `n` (the DAG LOADs it)."""
    key = "slow" if device == "CPU" else f"slow_{device}"
    if key != "slow":
        assert_ok(c.execute("AI.MODELSTORE", key, "TF", device, "INPUTS", 1, "n", "OUTPUTS", 1,
                            "out", "BLOB", em.tf_graphs.slow_graph()))
    n = em.slow_at_least(c, slow_n(seconds), seconds, key=key)
    assert_ok(c.execute("AI.TENSORSET", "n", "INT32", "VALUES", n))
    return ["AI.MODELEXECUTE", key, "INPUTS", 1, "n", "OUTPUTS", 1, "slow_out"]


def check_member(c: RawClient, i: int, batch: int) -> None:
    """The plain request i ran in a batch of `batch` and got its own rows."""
    assert np.all(tget(c, f"bs{i}") == batch), tget(c, f"bs{i}")
    np.testing.assert_array_equal(tget(c, f"y{i}"), 2 * client_input(i, 1))


@pytest.mark.parametrize("device", ["CPU", "CPU:1"])
def test_a_finished_member_does_not_wait_for_another_members_later_op(c, tf_server, slow_n,
                                                                      install_dir, device):
    """A DAG "m |> a 2.1 s run" batched with a plain MODELEXECUTE ahead of it: the plain
    request is answered once the batch ran, while the DAG's later run is still going, on
    this queue (the DAG goes back to it: 2.54 s before, when the worker ran the DAG's later
    op before it gave the plain request its rows) or on another device's queue."""
    store_bs(c, install_dir, "TF", "m", "BATCHSIZE", 4, "MINBATCHSIZE", 2)
    later = slow_op(c, slow_n, device, 2.1)
    tset(c, "x0", client_input(0, 1))
    tset(c, "x1", client_input(1, 1))
    with RawClient(tf_server.port) as d, RawClient(tf_server.port) as e:
        d.send("AI.DAGEXECUTE", "LOAD", 2, "x0", "n", "|>", *execute_args("m", 0), "|>", *later,
               "|>", "AI.TENSORGET", "y0", "BLOB")
        assert em.wait_until_blocked(c, 1)  # held for MINBATCHSIZE until the second comes
        t0 = time.perf_counter()
        e.send(*execute_args("m", 1))
        reply = e.read()
        took = time.perf_counter() - t0
        dag_running = not d.pending()
        dag_reply = d.read()
        dag_took = time.perf_counter() - t0
    print(f"later op on {device}: the plain request answered after {took:.3f} s, "
          f"the DAG after {dag_took:.3f} s")
    assert reply == "OK", reply
    assert dag_running, f"the plain request was answered after the DAG's later op ({took:.2f} s)"
    assert took < 1.5, f"the plain request was answered after {took:.2f} s"
    assert dag_reply[:2] == ["OK", "OK"], dag_reply
    np.testing.assert_array_equal(np.frombuffer(dag_reply[2], np.float32).reshape(1, 3),
                                  2 * client_input(0, 1))
    check_member(c, 1, 2)


def test_members_next_ops_batch_again(c, tf_server, install_dir):
    """Two DAGs "m |> m" batched: both get their rows, go back to the queue, and their
    second ops batch too (before, the worker ran each one's second op alone, in turn)."""
    store_bs(c, install_dir, "TF", "m", "BATCHSIZE", 4, "MINBATCHSIZE", 2)
    clients = [RawClient(tf_server.port) for _ in range(2)]
    try:
        for i, cl in enumerate(clients):
            tset(c, f"x{i}", client_input(i, 1))
            cl.send("AI.DAGEXECUTE", "LOAD", 1, f"x{i}", "|>", *execute_args("m", i),
                    "|>", "AI.MODELEXECUTE", "m", "INPUTS", 1, f"y{i}", "OUTPUTS", 2, "bs", "z",
                    "|>", "AI.TENSORGET", "bs", "VALUES", "|>", "AI.TENSORGET", "z", "BLOB")
        replies = [cl.read() for cl in clients]
    finally:
        for cl in clients:
            cl.close()
    for i, rep in enumerate(replies):
        assert rep[:2] == ["OK", "OK"], rep
        assert rep[2] == [b"2"] * 3, f"DAG {i}'s second op ran in a batch of {rep[2]}"
        np.testing.assert_array_equal(np.frombuffer(rep[3], np.float32).reshape(1, 3),
                                      4 * client_input(i, 1))
    st = info(c, "m")
    assert (st["calls"], st["samples"], st["errors"]) == (4, 4, 0), st


def test_members_with_later_ops_on_both_devices(c, tf_server, slow_n, install_dir):
    """Three members: a DAG whose later op runs on CPU:1, one whose later op runs here, a
    plain request. The plain one is answered while both later ops run; each DAG gets its
    own rows and its later op's output."""
    store_bs(c, install_dir, "TF", "m", "BATCHSIZE", 4, "MINBATCHSIZE", 3)
    here = slow_op(c, slow_n, "CPU", 1.5)
    there = slow_op(c, slow_n, "CPU:1", 1.5)
    for i in range(3):
        tset(c, f"x{i}", client_input(i, 1))
    dags = [RawClient(tf_server.port) for _ in range(2)]
    try:
        for i, (d, later) in enumerate(zip(dags, (there, here))):
            d.send("AI.DAGEXECUTE", "LOAD", 2, f"x{i}", "n", "|>", *execute_args("m", i),
                   "|>", *later, "|>", "AI.TENSORGET", f"y{i}", "BLOB",
                   "|>", "AI.TENSORGET", "slow_out", "META")
            assert em.wait_until_blocked(c, i + 1)
        assert_ok(c.execute(*execute_args("m", 2)))
        running = [not d.pending() for d in dags]
        replies = [d.read() for d in dags]
    finally:
        for d in dags:
            d.close()
    assert running == [True, True], "the plain request was answered after a DAG's later op"
    for i, rep in enumerate(replies):
        assert rep[:2] == ["OK", "OK"], rep
        np.testing.assert_array_equal(np.frombuffer(rep[2], np.float32).reshape(1, 3),
                                      2 * client_input(i, 1))
        assert (rep[3][1], rep[3][3]) == (b"FLOAT", [8, 8]), rep[3]
    check_member(c, 2, 3)
