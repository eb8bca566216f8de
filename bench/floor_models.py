"""The models of bench/bench_floor.py, made by the real frameworks and written to a folder.

Run as a child process (``python bench/floor_models.py OUTDIR``) so that the benchmark
itself never imports TensorFlow or Torch: their idle thread pools would sit in the
client's process while it measures. Writes OUTDIR/manifest.json and, per model and
backend, the blob, the raw input tensors and the expected output (float32 bytes).

* trivial: 2x2 float, a*b for TF (tests/support/tf_graphs.py's mul graph), a+b for TORCH and ONNX;
* cnn: the MNIST-sized CNN of tests/support/torch_defs.py with fixed weights, [1,1,28,28] ->
  [1,10] (TF gets the same weights as an NHWC GraphDef, tf_cnn below).
"""
from __future__ import annotations

import json
import pathlib
import sys
from typing import Any, Callable

import numpy as np

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "tests" / "support"))

KINDS = ("TF", "TORCH", "ONNX")


def _write(out: pathlib.Path, name: str, data: bytes) -> str:
    path = out / name
    path.write_bytes(data)
    return str(path)


def _entry(out: pathlib.Path, tag: str, blob: bytes, inputs: list[tuple[str, np.ndarray]],
           outputs: list[str], expected: np.ndarray, named: bool) -> dict[str, Any]:
    """named: the model's input/output names go into MODELSTORE (TF needs them)."""
    return {
        "blob": _write(out, f"{tag}.model", blob),
        "inputs": [{"name": n, "dtype": "FLOAT", "shape": list(a.shape),
                    "file": _write(out, f"{tag}.in{i}", np.ascontiguousarray(a).tobytes())}
                   for i, (n, a) in enumerate(inputs)],
        "outputs": outputs,
        "named": named,
        "expected": _write(out, f"{tag}.expected", np.ascontiguousarray(expected).tobytes()),
        "expected_shape": list(expected.shape),
    }


def tf_cnn(net: Any) -> tuple[bytes, Callable[[np.ndarray], np.ndarray]]:
    """The torch CNN as a TF1 GraphDef (NHWC input `x` [n,28,28,1], output `out`), with
    the same weights, and an in-process tf.compat.v1.Session runner of that graph."""
    import tf_graphs
    tf = tf_graphs._tf()
    conv1, conv2 = net.features[0], net.features[3]
    fc1, fc2 = net.head[1], net.head[3]

    def w(t: Any) -> np.ndarray:
        return t.detach().numpy()

    g = tf.Graph()
    with g.as_default():
        x = tf.compat.v1.placeholder(tf.float32, [None, 28, 28, 1], name="x")

        def conv(h: Any, m: Any) -> Any:
            k = tf.constant(w(m.weight).transpose(2, 3, 1, 0))  # OIHW -> HWIO
            h = tf.nn.conv2d(h, k, strides=[1, 1, 1, 1], padding="VALID") + w(m.bias)
            return tf.nn.max_pool2d(tf.nn.relu(h), ksize=2, strides=2, padding="VALID")

        h = conv(conv(x, conv1), conv2)
        h = tf.reshape(tf.transpose(h, [0, 3, 1, 2]), [-1, 16 * 5 * 5])  # torch's flatten order
        h = tf.nn.relu(tf.matmul(h, tf.constant(w(fc1.weight).T)) + w(fc1.bias))
        h = tf.matmul(h, tf.constant(w(fc2.weight).T)) + w(fc2.bias)
        tf.nn.log_softmax(h, axis=1, name="out")
    blob = g.as_graph_def().SerializeToString()
    sess = tf.compat.v1.Session(graph=g)
    out = g.get_tensor_by_name("out:0")
    xin = g.get_tensor_by_name("x:0")
    return blob, lambda arr: sess.run(out, {xin: arr})


def build(out: pathlib.Path) -> dict[str, Any]:
    import torch  # noqa: PLC0415

    import onnx_models  # noqa: PLC0415
    import tf_graphs  # noqa: PLC0415
    import torch_models  # noqa: PLC0415

    a = np.array([[2, 3], [2, 3]], np.float32)
    trivial = {
        "TF": _entry(out, "trivial_tf", tf_graphs.mul_graph(), [("a", a), ("b", a)], ["mul"],
                     a * a, True),
        "TORCH": _entry(out, "trivial_torch", torch_models.add().blob, [("a", a), ("b", a)],
                        ["c"], a + a, False),
        "ONNX": _entry(out, "trivial_onnx", onnx_models.add().blob, [("a", a), ("b", a)], ["c"],
                       a + a, False),
    }
    x = torch_models.cnn_sample(batch=1, seed=7)
    net = torch_models.cnn_module()
    with torch.inference_mode():
        want = net(torch.from_numpy(x)).numpy()
    tf_blob, tf_run = tf_cnn(net)
    x_nhwc = np.ascontiguousarray(x.transpose(0, 2, 3, 1))
    np.testing.assert_allclose(tf_run(x_nhwc), want, rtol=1e-4, atol=1e-5)
    cnn = {
        "TF": _entry(out, "cnn_tf", tf_blob, [("x", x_nhwc)], ["out"], want, True),
        "TORCH": _entry(out, "cnn_torch", torch_models.cnn().blob, [("x", x)], ["y"], want, False),
        "ONNX": _entry(out, "cnn_onnx", onnx_models.cnn().blob, [("input", x)], ["output"], want,
                       False),
    }
    import onnxruntime  # noqa: PLC0415

    versions = {"TF": tf_graphs.tensorflow_version(), "TORCH": torch.__version__,
                "ONNX": onnxruntime.__version__}
    return {"trivial": trivial, "cnn": cnn, "versions": versions}


def main() -> int:
    if len(sys.argv) != 2:
        sys.exit("usage: floor_models.py OUTDIR")
    out = pathlib.Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    manifest = build(out)
    (out / "manifest.json").write_text(json.dumps(manifest, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
