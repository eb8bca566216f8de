"""Drives a running server with the PyPI `redisai` client (1.3.0), unchanged.

Run by tests/clients/test_redisai_client.py with .venv-client/bin/python (redisai pins redis<5,
so it cannot share the project's .venv). Not a pytest module: it asserts as it goes and
prints one line per step, then `ALL OK`; any failure is a traceback and exit code 1.

    python pypi_client_check.py PORT ARTIFACT_DIR

ARTIFACT_DIR holds what the test made with the real frameworks (this venv has none):
tf_mul.pb, torch_cnn.pt, onnx_cnn.onnx, cnn_x.npy, cnn_torch.npy, cnn_onnx.npy,
mnist_uint8.tflite with mnist_uint8_x.npy and tf.lite.Interpreter's mnist_uint8_y.npy, and
script.py (a TorchScript source with entry points bar, counts, tuple_out and a legacy
function legacy_add).
"""
from __future__ import annotations

import pathlib
import sys
import warnings

import numpy as np
import redis
import redisai


def step(name: str) -> None:
    print(f"ok: {name}", flush=True)


def main() -> int:
    warnings.simplefilter("ignore", DeprecationWarning)  # modelrun/scriptset/scriptrun are deprecated
    port, art = int(sys.argv[1]), pathlib.Path(sys.argv[2])
    con = redisai.Client(host="127.0.0.1", port=port)
    assert con.ping()
    con.flushall()

    # --- tensors with numpy ---------------------------------------------------------
    arr = np.array([[1.5, 2.0], [3.0, -4.25]], dtype=np.float32)
    assert con.tensorset("f", arr) == "OK"
    got = con.tensorget("f")
    assert isinstance(got, np.ndarray) and got.dtype == np.float32 and got.shape == (2, 2), got
    assert np.array_equal(got, arr)
    assert con.tensorget("f", meta_only=True) == {"dtype": "FLOAT", "shape": [2, 2]}
    vals = con.tensorget("f", as_numpy=False)
    assert vals["dtype"] == "FLOAT" and vals["shape"] == [2, 2], vals
    assert [float(v) for v in vals["values"]] == [1.5, 2.0, 3.0, -4.25], vals
    for dtype in (np.float64, np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.bool_):
        a = (np.arange(6).reshape(3, 2) % (2 if dtype is np.bool_ else 100)).astype(dtype)
        assert con.tensorset(f"t_{np.dtype(dtype).name}", a) == "OK"
        back = con.tensorget(f"t_{np.dtype(dtype).name}")
        assert back.dtype == a.dtype and np.array_equal(back, a), (dtype, back)
    assert con.tensorset("lst", [1, 2, 3], shape=(3,), dtype="int64") == "OK"
    assert np.array_equal(con.tensorget("lst"), np.array([1, 2, 3], np.int64))
    step("tensorset/tensorget with numpy")

    # --- TF -----------------------------------------------------------------------------
    tf_blob = (art / "tf_mul.pb").read_bytes()
    assert con.modelstore("tf", "TF", "CPU", tf_blob, inputs=["a", "b"], outputs=["mul"],
                          tag="tf-v1") == "OK"
    meta = con.modelget("tf", meta_only=True)
    assert meta["backend"] == "TF" and meta["device"] == "CPU" and meta["tag"] == "tf-v1", meta
    con.tensorset("a", arr)
    con.tensorset("b", arr)
    assert con.modelexecute("tf", inputs=["a", "b"], outputs=["c"]) == "OK"
    assert np.array_equal(con.tensorget("c"), arr * arr)
    step("TF modelstore/modelexecute")

    # --- TORCH and ONNX: the MNIST-sized CNN ------------------------------------------
    x = np.load(art / "cnn_x.npy")
    con.tensorset("x", x)
    for key, backend, blob_file, want_file in (("pt", "TORCH", "torch_cnn.pt", "cnn_torch.npy"),
                                               ("ox", "ONNX", "onnx_cnn.onnx", "cnn_onnx.npy")):
        blob = (art / blob_file).read_bytes()
        assert con.modelstore(key, backend, "CPU", blob, tag=f"{key}-tag") == "OK"
        full = con.modelget(key)
        assert full["backend"] == backend and full["tag"] == f"{key}-tag", full
        assert full["blob"] == blob
        assert con.modelexecute(key, inputs="x", outputs=f"{key}_y") == "OK"
        y = con.tensorget(f"{key}_y")
        want = np.load(art / want_file)
        assert y.shape == want.shape and y.dtype == want.dtype, (y.shape, y.dtype)
        np.testing.assert_allclose(y, want, rtol=1e-5, atol=1e-6)
        info = con.infoget(key)
        assert info["backend"] == backend and int(info["calls"]) == 1, info
        step(f"{backend} modelstore/modelget/modelexecute/infoget")
    assert con.modelget("ox", meta_only=True)["inputs"] == ["input"]
    # the deprecated runner still works through the client
    assert con.modelrun("ox", inputs=["x"], outputs=["ox_y2"]) == "OK"
    np.testing.assert_allclose(con.tensorget("ox_y2"), np.load(art / "cnn_onnx.npy"), rtol=1e-5,
                               atol=1e-6)
    assert con.modeldel("pt") == "OK"
    step("modelrun/modeldel")

    # --- TFLITE: a quantized MNIST-sized CNN, raw uint8 tensors in and out, as in 1.2 ----
    blob = (art / "mnist_uint8.tflite").read_bytes()
    assert con.modelstore("tfl", "TFLITE", "CPU", blob, tag="q") == "OK"
    meta = con.modelget("tfl", meta_only=True)
    assert meta["backend"] == "TFLITE" and meta["tag"] == "q" and len(meta["inputs"]) == 1, meta
    assert con.modelget("tfl")["blob"] == blob
    qx = np.load(art / "mnist_uint8_x.npy")
    assert con.tensorset("qx", qx) == "OK"
    assert con.modelexecute("tfl", inputs=["qx"], outputs=["qy"]) == "OK"
    qy = con.tensorget("qy")
    want = np.load(art / "mnist_uint8_y.npy")
    assert qy.dtype == np.uint8 and qy.shape == want.shape and np.array_equal(qy, want), (qy, want)
    assert con.modelrun("tfl", inputs=["qx"], outputs=["qy2"]) == "OK"
    assert np.array_equal(con.tensorget("qy2"), want)
    info = con.infoget("tfl")
    assert info["backend"] == "TFLITE" and int(info["calls"]) == 2, info
    try:
        con.tensorset("fx", qx.astype(np.float32))
        con.modelexecute("tfl", inputs=["fx"], outputs=["qy3"])
        raise AssertionError("a FLOAT tensor into the uint8 model was accepted")
    except redis.exceptions.ResponseError as exc:
        assert str(exc) == ("Input tensor type doesn't match the type expected by the model "
                            "definition"), exc
    step("TFLITE quantized MNIST")

    # --- scripts ------------------------------------------------------------------------
    source = (art / "script.py").read_text()
    assert con.scriptstore("s", "CPU", source, entry_points=["bar", "counts", "tuple_out"],
                           tag="s-tag") == "OK"
    sg = con.scriptget("s")
    assert sg["device"] == "CPU" and sg["tag"] == "s-tag" and sg["source"] == source, sg
    assert con.scriptexecute("s", "bar", inputs=["a", "b"], outputs=["sum"]) == "OK"
    assert np.array_equal(con.tensorget("sum"), arr + arr)
    assert con.scriptexecute("s", "counts", keys=["k1", "k2"], inputs=["a"], args=["1", "2", "3"],
                             outputs=["n"]) == "OK"
    assert np.array_equal(con.tensorget("n"), np.array([1, 2, 3], np.int64))
    assert con.scriptexecute("s", "tuple_out", inputs=["a", "b"], outputs=["p", "q"]) == "OK"
    assert np.array_equal(con.tensorget("p"), arr + arr)
    assert np.array_equal(con.tensorget("q"), arr - arr)
    # a script over a model's output
    assert con.scriptexecute("s", "bar", inputs=["ox_y", "ox_y"], outputs=["twice"]) == "OK"
    np.testing.assert_allclose(con.tensorget("twice"), 2 * np.load(art / "cnn_onnx.npy"), rtol=1e-5,
                               atol=1e-6)
    step("scriptstore/scriptget/scriptexecute")
    # deprecated forms: SCRIPTRUN of an entry point (keys and args empty), and of a legacy
    # function of a SCRIPTSET script (no entry points)
    assert con.scriptrun("s", "counts", inputs=["a", "b"], outputs=["n2"]) == "OK"
    assert np.array_equal(con.tensorget("n2"), np.array([2, 0, 0], np.int64))
    assert con.scriptset("old", "CPU", source) == "OK"
    assert con.scriptrun("old", "legacy_add", inputs=["a", "b"], outputs=["sum2"]) == "OK"
    assert np.array_equal(con.tensorget("sum2"), arr + arr)
    assert con.scriptdel("old") == "OK"
    step("scriptset/scriptrun/scriptdel")

    # --- errors come back as exceptions, the server keeps answering ---------------------
    try:
        con.modelexecute("nokey", inputs=["a"], outputs=["o"])
        raise AssertionError("no error for a missing model")
    except redis.exceptions.ResponseError as e:
        assert "model key is empty" in str(e), str(e)
    assert con.ping()
    step("errors")

    print("ALL OK", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
