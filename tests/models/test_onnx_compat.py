"""ONNX backend behaviours RedisAI 1.2 users rely on (issue 11, items 6-9):

* a sequence of maps output (a classifier's ZipMap, as skl2onnx converts scikit-learn
  classifiers) becomes a FLOAT tensor [batch, classes] of the map values in key order;
* STRING inputs are auto-batched along dim 0 like numeric ones, STRING outputs sliced back;
* INFO's `ai_onnxruntime_maximum_run_sessions_number` is THREADS_PER_QUEUE x the run queues;
* INFO's `ai_onnxruntime_memory` follows what ONNX Runtime holds through our allocator, and
  BACKEND_MEMORY_LIMIT refuses a MODELSTORE or a run with 1.2's texts.

Models are made at test time with the `onnx` helper API (tests/support/onnx_ml_models.py); values
are compared with onnxruntime's own Python results over the same blob and with numpy.
"""
from __future__ import annotations

import threading

import numpy as np
import pytest

import engine_models as em
import onnx_ml_models as ml
from helpers import assert_error, assert_error_startswith, assert_ok
from redis_server import Connect, RedisServer, StartServer
from resp import RawClient

MEMORY_LIMIT = "Onnxruntime memory limit exceeded, memory allocation failed."
INIT_MEMORY_LIMIT = "Exception during initialization: " + MEMORY_LIMIT


@pytest.fixture
def c(onnx_server: RedisServer, connect: Connect) -> RawClient:
    return connect(onnx_server)


def ort_session(blob: bytes):
    import onnxruntime  # noqa: PLC0415

    return onnxruntime.InferenceSession(blob, providers=["CPUExecutionProvider"])


def set_float(c: RawClient, key: str, arr: np.ndarray) -> None:
    arr = np.ascontiguousarray(arr, np.float32)
    assert_ok(c.execute("AI.TENSORSET", key, "FLOAT", *arr.shape, "BLOB", arr.tobytes()))


def set_strings(c: RawClient, key: str, words: np.ndarray) -> None:
    assert_ok(c.execute("AI.TENSORSET", key, "STRING", *words.shape, "VALUES",
                        *[w.encode() for w in words.ravel()]))


def get(c: RawClient, key: str) -> tuple[str, np.ndarray]:
    """(dtype, array) of a stored tensor."""
    reply = c.execute("AI.TENSORGET", key, "META", "VALUES")
    assert isinstance(reply, list), f"AI.TENSORGET {key}: {reply!r}"
    dtype, shape, values = reply[1].decode(), reply[3], reply[5]
    if dtype == "STRING":
        arr = np.array([v.decode() for v in values], dtype=object)
    elif dtype == "FLOAT":
        arr = np.array([float(v) for v in values], dtype=np.float32)
    else:
        arr = np.array([int(v) for v in values], dtype=np.int64)
    return dtype, arr.reshape(shape)


def onnx_info(server: RedisServer) -> dict[str, int]:
    info = server.client().info("modules")
    return {k[len("ai_onnxruntime_"):]: int(v) for k, v in info.items()
            if k.startswith("ai_onnxruntime_") and k not in ("ai_onnxruntime_version",
                                                             "ai_onnxruntime_path")}


# --------------------------------------------------------------------------------------
# 6. seq(map(int64, float)) outputs
# --------------------------------------------------------------------------------------

def maps_to_rows(maps: list[dict]) -> np.ndarray:
    return np.array([[m[k] for k in sorted(m)] for m in maps], dtype=np.float32)


def test_zipmap_output_is_a_float_tensor_of_map_values_in_key_order(c):
    model = ml.classifier()
    assert_ok(c.execute("AI.MODELSTORE", "clf", "ONNX", "CPU", "BLOB", model.blob))
    meta = c.execute("AI.MODELGET", "clf", "META")
    assert meta[meta.index(b"outputs") + 1] == [b"label", b"output_probability"], meta
    x = model.samples[::9]  # 10 samples of every class
    set_float(c, "x", x)
    assert_ok(c.execute("AI.MODELEXECUTE", "clf", "INPUTS", 1, "x",
                        "OUTPUTS", 2, "label", "proba"))
    dtype, proba = get(c, "proba")
    assert dtype == "FLOAT" and proba.shape == (len(x), len(ml.LABELS)), (dtype, proba.shape)

    # onnxruntime's own result over the same blob: one {label: probability} map per sample
    ref_label, ref_maps = ort_session(model.blob).run(None, {"X": x})
    assert all(sorted(m) == sorted(ml.LABELS) for m in ref_maps)
    np.testing.assert_allclose(proba, maps_to_rows(ref_maps), rtol=1e-6, atol=1e-7)
    # and numpy's predict_proba, whose columns follow the coefficients (labels 30, 10, 20):
    # the tensor's columns follow the keys (10, 20, 30), as 1.2 reads them from the maps
    order = np.argsort(ml.LABELS)
    np.testing.assert_allclose(proba, model.predict_proba(x)[:, order], atol=1e-5)
    np.testing.assert_allclose(proba.sum(axis=1), 1.0, atol=1e-5)
    assert not np.allclose(proba, model.predict_proba(x), atol=1e-3), "key order not exercised"
    # the label output agrees with the most probable column
    _, label = get(c, "label")
    np.testing.assert_array_equal(label, ref_label)
    np.testing.assert_array_equal(label, np.sort(ml.LABELS)[proba.argmax(axis=1)])


def test_zipmap_with_string_labels(c):
    """map(string, float): the same rows, columns in the keys' (byte) order."""
    model = ml.classifier(string_labels=True)
    assert_ok(c.execute("AI.MODELSTORE", "clf", "ONNX", "CPU", "BLOB", model.blob))
    x = model.samples[::9]
    set_float(c, "x", x)
    assert_ok(c.execute("AI.MODELEXECUTE", "clf", "INPUTS", 1, "x",
                        "OUTPUTS", 2, "label", "proba"))
    dtype, proba = get(c, "proba")
    assert dtype == "FLOAT" and proba.shape == (len(x), 3), (dtype, proba.shape)
    ref_label, ref_maps = ort_session(model.blob).run(None, {"X": x})
    np.testing.assert_allclose(proba, maps_to_rows(ref_maps), rtol=1e-6, atol=1e-7)
    order = np.argsort(ml.STRING_LABELS)  # ten, thirty, twenty
    np.testing.assert_allclose(proba, model.predict_proba(x)[:, order], atol=1e-5)
    dtype, label = get(c, "label")
    assert dtype == "STRING", dtype
    np.testing.assert_array_equal(label, ref_label)


def test_zipmap_output_in_a_dag_and_a_single_sample(c):
    model = ml.classifier()
    assert_ok(c.execute("AI.MODELSTORE", "clf", "ONNX", "CPU", "BLOB", model.blob))
    x = model.samples[40:41]
    set_float(c, "x", x)
    reply = c.execute("AI.DAGEXECUTE", "LOAD", 1, "x", "|>",
                      "AI.MODELEXECUTE", "clf", "INPUTS", 1, "x", "OUTPUTS", 2, "l", "p", "|>",
                      "AI.TENSORGET", "p", "META")
    assert reply[1] == [b"dtype", b"FLOAT", b"shape", [1, 3]], reply
    _, ref_maps = ort_session(model.blob).run(None, {"X": x})
    assert_ok(c.execute("AI.MODELEXECUTE", "clf", "INPUTS", 1, "x", "OUTPUTS", 2, "l", "p"))
    np.testing.assert_allclose(get(c, "p")[1], maps_to_rows(ref_maps), rtol=1e-6, atol=1e-7)


def test_zipmap_outputs_of_a_batch_are_sliced_back(c, onnx_server):
    """MINBATCHSIZE 6 holds the requests until three clients' two rows each are queued:
    they run as one batch of 6, and each client gets the probabilities of its own rows."""
    model = ml.classifier()
    assert_ok(c.execute("AI.MODELSTORE", "clf", "ONNX", "CPU", "BATCHSIZE", 8,
                        "MINBATCHSIZE", 6, "BLOB", model.blob))
    inputs = [model.samples[[k, 30 + k]] for k in range(3)]
    for k, x in enumerate(inputs):
        set_float(c, f"x{k}", x)
    clients = [RawClient(onnx_server.port) for _ in inputs]
    try:
        for k, cl in enumerate(clients):
            cl.send("AI.MODELEXECUTE", "clf", "INPUTS", 1, f"x{k}", "OUTPUTS", 2, f"l{k}", f"p{k}")
        for cl in clients:
            assert_ok(cl.read())
    finally:
        for cl in clients:
            cl.close()
    info = c.execute("AI.INFO", "clf")
    fields = {info[i].decode(): info[i + 1] for i in range(0, len(info), 2)}
    assert fields["calls"] == 3 and fields["samples"] == 6, fields
    sess = ort_session(model.blob)
    for k, x in enumerate(inputs):
        _, ref_maps = sess.run(None, {"X": x})
        dtype, p = get(c, f"p{k}")
        assert dtype == "FLOAT" and p.shape == (2, 3), (k, dtype, p.shape)
        np.testing.assert_allclose(p, maps_to_rows(ref_maps), rtol=1e-6, atol=1e-7,
                                   err_msg=f"client {k}: not its own rows")


def test_sequence_of_tensors_is_still_refused(c):
    onnx = ml._onnx()
    h, TP = onnx.helper, onnx.TensorProto
    graph = h.make_graph(
        [h.make_node("SequenceConstruct", ["x", "x"], ["seq"])], "seq_of_tensors",
        [h.make_tensor_value_info("x", TP.FLOAT, ["N"])],
        [h.make_tensor_sequence_value_info("seq", TP.FLOAT, ["N"])])
    assert_ok(c.execute("AI.MODELSTORE", "m", "ONNX", "CPU", "BLOB", ml._model(graph)))
    assert_ok(c.execute("AI.TENSORSET", "x", "FLOAT", 2, "VALUES", 1, 2))
    reply = c.execute("AI.MODELEXECUTE", "m", "INPUTS", 1, "x", "OUTPUTS", 1, "y")
    assert_error(reply, "ERR unsupported output type")
    assert c.execute("EXISTS", "y") == 0


# --------------------------------------------------------------------------------------
# 7. STRING inputs in auto-batches
# --------------------------------------------------------------------------------------

def client_words(k: int, rows: int) -> np.ndarray:
    """Rows unique to client k, of different lengths, some of them known to LabelEncoder."""
    pool = list(ml.WORDS) + [f"client{k}-{'x' * (k + 1)}", f"w{k}"]
    return np.array([[pool[(k + r) % len(pool)], f"c{k}r{r}" + "z" * r]
                     for r in range(rows)], dtype=object)


def check_strings_reply(c: RawClient, k: int, words: np.ndarray, batch: int | None) -> int:
    dtype, same = get(c, f"same{k}")
    assert dtype == "STRING" and same.shape == words.shape, (k, dtype, same.shape)
    np.testing.assert_array_equal(same, words, err_msg=f"client {k}: not its own strings")
    dtype, code = get(c, f"code{k}")
    assert dtype == "INT64", dtype
    np.testing.assert_array_equal(code, ml.encode(words), err_msg=f"client {k}: codes")
    _, rows = get(c, f"rows{k}")
    assert rows.shape == (len(words),) and len(set(rows.tolist())) == 1, rows
    if batch is not None:
        assert rows[0] == batch, f"client {k} ran in a batch of {rows[0]}, expected {batch}"
    return int(rows[0])


def strings_args(k: int) -> list:
    return ["AI.MODELEXECUTE", "s", "INPUTS", 1, f"s{k}",
            "OUTPUTS", 3, f"same{k}", f"code{k}", f"rows{k}"]


def test_string_inputs_run_alone_and_match_onnxruntime(c):
    assert_ok(c.execute("AI.MODELSTORE", "s", "ONNX", "CPU", "BLOB", ml.strings()))
    words = client_words(0, 3)
    set_strings(c, "s0", words)
    assert_ok(c.execute(*strings_args(0)))
    same, code, rows = ort_session(ml.strings()).run(None, {"s": words})
    check_strings_reply(c, 0, words, batch=3)
    np.testing.assert_array_equal(get(c, "same0")[1], same)
    np.testing.assert_array_equal(get(c, "code0")[1], code)


def test_string_inputs_of_several_clients_run_in_one_batch(c, onnx_server):
    """MINBATCHSIZE 6 holds the requests until 6 rows are queued: clients of 1, 2 and 3 rows
    run as one batch of 6 (the model's `rows` output says so) and get their own rows back."""
    assert_ok(c.execute("AI.MODELSTORE", "s", "ONNX", "CPU", "BATCHSIZE", 8,
                        "MINBATCHSIZE", 6, "BLOB", ml.strings()))
    inputs = [client_words(k, k + 1) for k in range(3)]
    for k, words in enumerate(inputs):
        set_strings(c, f"s{k}", words)
    clients = [RawClient(onnx_server.port) for _ in inputs]
    try:
        for k, cl in enumerate(clients):
            cl.send(*strings_args(k))
        for cl in clients:
            assert_ok(cl.read())
    finally:
        for cl in clients:
            cl.close()
    for k, words in enumerate(inputs):
        check_strings_reply(c, k, words, batch=6)
    info = c.execute("AI.INFO", "s")
    fields = {info[i].decode(): info[i + 1] for i in range(0, len(info), 2)}
    assert fields["calls"] == 3 and fields["samples"] == 6, fields


def test_string_batch_in_a_dag(c, onnx_server):
    """A DAG's op joins a batch with a plain MODELEXECUTE; the DAG reads its own slice."""
    assert_ok(c.execute("AI.MODELSTORE", "s", "ONNX", "CPU", "BATCHSIZE", 4,
                        "MINBATCHSIZE", 3, "BLOB", ml.strings()))
    a, b = client_words(1, 1), client_words(2, 2)
    set_strings(c, "s1", a)
    set_strings(c, "s2", b)
    with RawClient(onnx_server.port) as other:
        other.send(*strings_args(1))
        reply = c.execute("AI.DAGEXECUTE", "LOAD", 1, "s2", "|>",
                          "AI.MODELEXECUTE", "s", "INPUTS", 1, "s2",
                          "OUTPUTS", 3, "same2", "code2", "rows2", "|>",
                          "AI.TENSORGET", "same2", "VALUES", "|>",
                          "AI.TENSORGET", "rows2", "VALUES")
        assert_ok(other.read())
    assert reply[1] == [w.encode() for w in b.ravel()], reply
    assert reply[2] == [3, 3], reply
    check_strings_reply(c, 1, a, batch=3)


def test_string_batches_under_concurrent_clients(c, onnx_server):
    """Six clients, each running its own strings many times with no MINBATCHSIZE: whatever
    batches form, every reply is the client's own rows. (Batches that did form are counted
    and printed; their number depends on timing, so it is not asserted.)"""
    assert_ok(c.execute("AI.MODELSTORE", "s", "ONNX", "CPU", "BATCHSIZE", 16,
                        "BLOB", ml.strings()))
    nclients, runs = 6, 15
    inputs = [client_words(k, 1 + k % 3) for k in range(nclients)]
    for k, words in enumerate(inputs):
        set_strings(c, f"s{k}", words)
    batches: list[int] = []
    errors: list[str] = []

    def client(k: int) -> None:
        try:
            with RawClient(onnx_server.port) as cl:
                for _ in range(runs):
                    # pipelined with the read-back, so the outputs are the ones of this run
                    reply = cl.execute("AI.DAGEXECUTE", "LOAD", 1, f"s{k}", "|>",
                                       "AI.MODELEXECUTE", "s", "INPUTS", 1, f"s{k}",
                                       "OUTPUTS", 3, "o1", "o2", "o3", "|>",
                                       "AI.TENSORGET", "o1", "VALUES", "|>",
                                       "AI.TENSORGET", "o2", "VALUES", "|>",
                                       "AI.TENSORGET", "o3", "VALUES")
                    words = inputs[k]
                    assert reply[0] == "OK", (k, reply)
                    assert reply[1] == [w.encode() for w in words.ravel()], (k, reply)
                    assert reply[2] == ml.encode(words).ravel().tolist(), (k, reply)
                    assert len(set(reply[3])) == 1 and len(reply[3]) == len(words), (k, reply)
                    assert reply[3][0] >= len(words), (k, reply)
                    batches.append((reply[3][0], len(words)))
        except Exception as e:  # reported on the main thread
            errors.append(f"client {k}: {e!r}")

    threads = [threading.Thread(target=client, args=(k,)) for k in range(nclients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    assert len(batches) == nclients * runs
    print(f"\nlargest batch: {max(b for b, _ in batches)} rows; "
          f"{sum(b > own for b, own in batches)} of {len(batches)} runs shared a batch")


# --------------------------------------------------------------------------------------
# 8. ai_onnxruntime_maximum_run_sessions_number
# --------------------------------------------------------------------------------------

def test_run_sessions_number_is_threads_per_queue_times_queues(module_path, onnx_backend_path):
    srv = RedisServer(module_path, ["ONNX", str(onnx_backend_path), "THREADS_PER_QUEUE", "3"])
    try:
        with RawClient(srv.port) as c:
            # the CPU queue exists from load
            assert onnx_info(srv)["maximum_run_sessions_number"] == 3
            blob = em.onnx_minus_one_model()
            assert_ok(c.execute("AI.MODELSTORE", "a", "ONNX", "CPU", "BLOB", blob))
            assert onnx_info(srv)["maximum_run_sessions_number"] == 3
            # CPU:1 is a queue of its own
            assert_ok(c.execute("AI.MODELSTORE", "b", "ONNX", "CPU:1", "BLOB", blob))
            assert onnx_info(srv)["maximum_run_sessions_number"] == 6
            assert_ok(c.execute("AI.MODELSTORE", "c", "ONNX", "cpu:1", "BLOB", blob))
            assert onnx_info(srv)["maximum_run_sessions_number"] == 6
            assert_ok(c.execute("AI.MODELSTORE", "d", "ONNX", "CPU:2", "BLOB", blob))
            assert onnx_info(srv)["maximum_run_sessions_number"] == 9
            # queues outlive their models, as the worker threads do
            assert c.execute("DEL", "b", "c", "d") == 3
            assert onnx_info(srv)["maximum_run_sessions_number"] == 9
            text = c.execute("INFO", "MODULES").decode()
            queues = sorted(line.split("_bthread_")[0] for line in text.splitlines()
                            if line.startswith("ai_queue_") and "_bthread_n1_" in line)
            assert len(queues) == 3, queues
    finally:
        srv.stop()


# --------------------------------------------------------------------------------------
# 9. ai_onnxruntime_memory, ai_onnxruntime_memory_access_num, BACKEND_MEMORY_LIMIT
# --------------------------------------------------------------------------------------

def run_minus_one(c: RawClient, key: str) -> None:
    assert_ok(c.execute("AI.TENSORSET", "x", "FLOAT", 2, 2, "VALUES", 1, 2, 3, 4))
    assert_ok(c.execute("AI.MODELEXECUTE", key, "INPUTS", 1, "x", "OUTPUTS", 1, "y"))
    assert c.execute("AI.TENSORGET", "y", "VALUES") == [b"0", b"1", b"2", b"3"]


def test_memory_follows_models_and_not_runs(module_path, onnx_backend_path):
    srv = RedisServer(module_path, ["ONNX", str(onnx_backend_path)])
    try:
        with RawClient(srv.port) as c:
            start = onnx_info(srv)
            assert start["memory"] == 0 and start["memory_access_num"] == 0, start
            assert_ok(c.execute("AI.MODELSTORE", "m", "ONNX", "CPU", "BLOB",
                                em.onnx_minus_one_model()))
            stored = onnx_info(srv)
            assert stored["memory"] > 0 and stored["memory_access_num"] > 0, stored
            run_minus_one(c, "m")
            ran = onnx_info(srv)
            assert ran["memory"] == stored["memory"], (stored, ran)
            # the run's output: at least one allocation and its free
            assert ran["memory_access_num"] >= stored["memory_access_num"] + 2, (stored, ran)
            # a second model adds its own share; deleting one gives exactly that back
            assert_ok(c.execute("AI.MODELSTORE", "big", "ONNX", "CPU", "BLOB",
                                em.onnx_big_initializer_model(8)))
            two = onnx_info(srv)
            assert two["memory"] >= stored["memory"] + 8 * 1024 * 1024, (stored, two)
            assert c.execute("AI.MODELDEL", "big") == "OK"
            assert onnx_info(srv)["memory"] == stored["memory"]
            # the last ONNX model gone, nothing is held
            assert c.execute("DEL", "m") == 1
            end = onnx_info(srv)
            assert end["memory"] == 0, end
            assert end["memory_access_num"] > two["memory_access_num"], (two, end)
    finally:
        srv.stop()


@pytest.fixture(scope="module")
def limited(start_server: StartServer, onnx_backend_path) -> RedisServer:
    return start_server(["ONNX", str(onnx_backend_path), "BACKEND_MEMORY_LIMIT", "32"])


def test_modelstore_over_the_memory_limit(limited):
    with RawClient(limited.port) as c:
        assert_ok(c.execute("FLUSHALL", "SYNC"))
        before = onnx_info(limited)
        reply = c.execute("AI.MODELSTORE", "bigm", "ONNX", "CPU", "BLOB",
                          em.onnx_big_initializer_model(48))  # 48 MiB over a 32 MB limit
        assert_error(reply, INIT_MEMORY_LIMIT)
        assert c.execute("EXISTS", "bigm") == 0
        after = onnx_info(limited)
        assert after["memory"] == before["memory"], (before, after)
        # a refused allocation is not an access (1.2 counted allocations and frees)
        assert after["memory_access_num"] == before["memory_access_num"], (before, after)
        # under the limit, a model loads and runs
        assert_ok(c.execute("AI.MODELSTORE", "m", "ONNX", "CPU", "BLOB",
                            em.onnx_minus_one_model()))
        run_minus_one(c, "m")
        assert_ok(c.execute("FLUSHALL", "SYNC"))
        assert onnx_info(limited)["memory"] == before["memory"]


def test_run_over_the_memory_limit(limited):
    with RawClient(limited.port) as c:
        assert_ok(c.execute("FLUSHALL", "SYNC"))
        assert_ok(c.execute("AI.MODELSTORE", "alloc", "ONNX", "CPU", "BLOB",
                            em.onnx_alloc_model()))
        held = onnx_info(limited)["memory"]
        assert_ok(c.execute("AI.TENSORSET", "big", "INT64", 2, "VALUES", 4096, 4096))  # 64 MiB
        reply = c.execute("AI.MODELEXECUTE", "alloc", "INPUTS", 1, "big", "OUTPUTS", 1, "o")
        assert_error(reply, MEMORY_LIMIT)
        assert c.execute("EXISTS", "o") == 0
        assert onnx_info(limited)["memory"] == held
        # inside a DAG, the same text for the op
        reply = c.execute("AI.DAGEXECUTE", "LOAD", 1, "big", "|>",
                          "AI.MODELEXECUTE", "alloc", "INPUTS", 1, "big", "OUTPUTS", 1, "o")
        assert_error(reply[0] if isinstance(reply, list) else reply, MEMORY_LIMIT)
        # small runs still work
        assert_ok(c.execute("AI.TENSORSET", "small", "INT64", 2, "VALUES", 2, 2))
        assert_ok(c.execute("AI.MODELEXECUTE", "alloc", "INPUTS", 1, "small", "OUTPUTS", 1, "o"))
        assert c.execute("AI.TENSORGET", "o", "VALUES") == [b"1"] * 4
        assert onnx_info(limited)["memory"] == held


def test_other_run_errors_keep_onnxruntime_text(limited):
    """Only the allocator's refusal is reworded: ORT's other texts pass as they are."""
    with RawClient(limited.port) as c:
        assert_ok(c.execute("AI.MODELSTORE", "m", "ONNX", "CPU", "BLOB",
                            em.onnx_minus_one_model()))
        assert_ok(c.execute("AI.TENSORSET", "i", "INT64", 1, 2, "VALUES", 1, 2))
        reply = c.execute("AI.MODELEXECUTE", "m", "INPUTS", 1, "i", "OUTPUTS", 1, "o")
        text = assert_error_startswith(reply, "Unexpected input data type.")
        assert MEMORY_LIMIT not in text, text
