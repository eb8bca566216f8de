"""The CNN of bench/bench_tflite.py as a .tflite file and as an ONNX file: the same network,
the same weights, made by the real frameworks and written to a folder.

Run as a child process (``python bench/tflite_models.py OUTDIR``), as floor_models.py is, so
that the benchmark itself never imports TensorFlow or Torch. tf2onnx (Keras to ONNX) is not
installed, so the weights go the other way: the MNIST-sized CNN of tests/support/torch_defs.py
with its fixed weights (torch_models.cnn_module()) is

* TFLITE: a tf.keras model (Conv2D, MaxPool2D, Dense, log_softmax; NHWC, batch fixed at 1)
  given those weights (the first Dense's rows reordered from torch's CHW flatten to Keras's
  HWC one), converted by tf.lite.TFLiteConverter.from_keras_model;
* ONNX: torch.onnx.export of the same module (onnx_models.cnn(), the file every other ONNX
  benchmark serves).

The input is one [1,28,28] image (torch_models.cnn_sample(seed=7)): with one channel, NHWC
[1,28,28,1] and NCHW [1,1,28,28] are the same bytes, so both models take the same blob. Both
outputs are checked against torch's before anything is written. Writes OUTDIR/manifest.json
with, per format, the model file, the input's shape, and the expected output: TFLITE's from
tf.lite.Interpreter (the reference the module's replies are checked against), ONNX's from ONNX
Runtime.
"""
from __future__ import annotations

import json
import pathlib
import sys
from typing import Any

import numpy as np

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests" / "support"))


def keras_cnn(net: Any) -> Any:
    """net (torch_defs.CNN) as a tf.keras model with its weights, input [1,28,28,1]."""
    import tensorflow as tf  # noqa: PLC0415

    L = tf.keras.layers
    model = tf.keras.Sequential([
        tf.keras.Input((28, 28, 1), batch_size=1),
        L.Conv2D(8, 3, activation="relu"), L.MaxPool2D(2),
        L.Conv2D(16, 3, activation="relu"), L.MaxPool2D(2),
        L.Flatten(), L.Dense(64, activation="relu"), L.Dense(10), L.Activation("log_softmax"),
    ])
    conv1, conv2 = net.features[0], net.features[3]
    fc1, fc2 = net.head[1], net.head[3]

    def w(t: Any) -> np.ndarray:
        return t.detach().numpy()

    model.layers[0].set_weights([w(conv1.weight).transpose(2, 3, 1, 0), w(conv1.bias)])
    model.layers[2].set_weights([w(conv2.weight).transpose(2, 3, 1, 0), w(conv2.bias)])
    # torch flattens [16,5,5] as c*25+h*5+w, Keras [5,5,16] as h*80+w*16+c.
    fc1_hwc = w(fc1.weight).reshape(64, 16, 5, 5).transpose(2, 3, 1, 0).reshape(400, 64)
    model.layers[5].set_weights([fc1_hwc, w(fc1.bias)])
    model.layers[6].set_weights([w(fc2.weight).T, w(fc2.bias)])
    return model


def tflite_run(blob: bytes, x: np.ndarray) -> np.ndarray:
    """TensorFlow's own interpreter (deprecated, still the reference)."""
    import tensorflow as tf  # noqa: PLC0415

    it = tf.lite.Interpreter(model_content=blob)
    it.allocate_tensors()
    it.set_tensor(it.get_input_details()[0]["index"], x)
    it.invoke()
    return it.get_tensor(it.get_output_details()[0]["index"]).copy()


def build(out: pathlib.Path) -> dict[str, Any]:
    import onnxruntime  # noqa: PLC0415
    import tensorflow as tf  # noqa: PLC0415
    import torch  # noqa: PLC0415

    import onnx_models  # noqa: PLC0415
    import torch_models  # noqa: PLC0415

    net = torch_models.cnn_module()
    x = torch_models.cnn_sample(batch=1, seed=7)  # [1,1,28,28]
    with torch.inference_mode():
        want = net(torch.from_numpy(x)).numpy()
    x_nhwc = np.ascontiguousarray(x.reshape(1, 28, 28, 1))  # one channel: the same bytes
    assert x_nhwc.tobytes() == x.tobytes()

    tfl_blob = tf.lite.TFLiteConverter.from_keras_model(keras_cnn(net)).convert()
    tfl_want = tflite_run(tfl_blob, x_nhwc)
    np.testing.assert_allclose(tfl_want, want, rtol=1e-4, atol=1e-5,
                               err_msg="the Keras/TFLite CNN differs from torch's")
    onnx_blob = onnx_models.cnn().blob
    sess = onnxruntime.InferenceSession(onnx_blob, providers=["CPUExecutionProvider"])
    onnx_want = sess.run(["output"], {"input": x})[0]
    np.testing.assert_allclose(onnx_want, want, rtol=1e-4, atol=1e-5,
                               err_msg="the ONNX CNN differs from torch's")

    (out / "input").write_bytes(x.tobytes())
    models = {}
    for kind, blob, shape, expected in (("TFLITE", tfl_blob, [1, 28, 28, 1], tfl_want),
                                        ("ONNX", onnx_blob, [1, 1, 28, 28], onnx_want)):
        path = out / f"cnn.{kind.lower()}"
        path.write_bytes(blob)
        (out / f"cnn_{kind.lower()}.expected").write_bytes(expected.astype(np.float32).tobytes())
        models[kind] = {"file": str(path), "bytes": len(blob), "shape": shape,
                        "expected": str(out / f"cnn_{kind.lower()}.expected")}
    return {"models": models, "input": str(out / "input"),
            "max_diff_tflite_onnx": float(np.max(np.abs(tfl_want - onnx_want))),
            "versions": {"tensorflow": tf.__version__, "onnxruntime": onnxruntime.__version__,
                         "torch": torch.__version__}}


def main() -> int:
    if len(sys.argv) != 2:
        sys.exit("usage: tflite_models.py OUTDIR")
    out = pathlib.Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    (out / "manifest.json").write_text(json.dumps(build(out), indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
