"""The ONNX files of bench/bench_compare.py: every stack serves these very files.

Run as a child process (``python bench/compare_models.py OUTDIR [--big-mib N]``), as
floor_models.py is, so that the benchmark's own process never imports Torch. Writes to
OUTDIR, per model, the .onnx file, each input as raw bytes, and the output ONNX Runtime
itself computes from those inputs (the reference every stack's reply is checked
against), with OUTDIR/manifest.json describing them:

* cnn: the MNIST-sized CNN of tests/support/torch_models.py exported by torch.onnx
  (onnx_models.cnn()): input [1,1,28,28] -> output [1,10];
* fraud: a fraud-detection MLP shaped like RedisAI's 2020 benchmark model: a
  transaction [1,30] and a reference [1,256] -> Concat -> 286x128 Relu -> 128x64 Relu
  -> 64x2 -> Softmax [1,2], fixed random weights, built with onnx.helper;
* big: a Gather over a float initializer of --big-mib MiB (cluster_load.py's
  big_gather_model): input int64 [1] -> output float [1]; the file is over 100 MB.
"""
from __future__ import annotations

import json
import pathlib
import sys
from typing import Any

import numpy as np

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests" / "support"))

# RedisAI type names and the matching numpy / KServe v2 type names.
DTYPES: dict[str, tuple[str, str]] = {"FLOAT": ("float32", "FP32"), "INT64": ("int64", "INT64")}


def fraud_model(seed: int = 5) -> bytes:
    """The fraud MLP: inputs `transaction` [1,30] and `reference` [1,256], output `score`."""
    import onnx  # noqa: PLC0415

    h, TP = onnx.helper, onnx.TensorProto
    rng = np.random.default_rng(seed)
    sizes = [(286, 128), (128, 64), (64, 2)]
    inits, nodes, prev = [], [h.make_node("Concat", ["transaction", "reference"], ["x0"], axis=1)], "x0"
    for n, (fan_in, fan_out) in enumerate(sizes):
        w = (rng.standard_normal((fan_in, fan_out)) / np.sqrt(fan_in)).astype(np.float32)
        b = (rng.standard_normal(fan_out) * 0.01).astype(np.float32)
        inits += [onnx.numpy_helper.from_array(w, f"w{n}"), onnx.numpy_helper.from_array(b, f"b{n}")]
        nodes.append(h.make_node("Gemm", [prev, f"w{n}", f"b{n}"], [f"g{n}"]))
        prev = f"g{n}"
        if n < len(sizes) - 1:
            nodes.append(h.make_node("Relu", [prev], [f"r{n}"]))
            prev = f"r{n}"
    nodes.append(h.make_node("Softmax", [prev], ["score"], axis=1))
    graph = h.make_graph(nodes, "fraud",
                         [h.make_tensor_value_info("transaction", TP.FLOAT, [1, 30]),
                          h.make_tensor_value_info("reference", TP.FLOAT, [1, 256])],
                         [h.make_tensor_value_info("score", TP.FLOAT, [1, 2])], inits)
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 13)])
    model.ir_version = 8
    return model.SerializeToString()


def _entry(out: pathlib.Path, name: str, blob: bytes, inputs: list[tuple[str, str, np.ndarray]],
           output: str) -> dict[str, Any]:
    """Writes the model, its inputs and ONNX Runtime's output; returns the manifest entry."""
    import onnxruntime  # noqa: PLC0415

    path = out / f"{name}.onnx"
    path.write_bytes(blob)
    sess = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    want = sess.run([output], {n: a for n, _, a in inputs})[0]
    (out / f"{name}.expected").write_bytes(np.ascontiguousarray(want).tobytes())
    entry_inputs = []
    for i, (n, dtype, a) in enumerate(inputs):
        f = out / f"{name}.in{i}"
        f.write_bytes(np.ascontiguousarray(a).tobytes())
        entry_inputs.append({"name": n, "dtype": dtype, "shape": list(a.shape), "file": str(f)})
    return {"file": str(path), "bytes": len(blob), "inputs": entry_inputs,
            "output": {"name": output, "dtype": "FLOAT", "shape": list(want.shape),
                       "expected": str(out / f"{name}.expected")}}


def build(out: pathlib.Path, big_mib: int) -> dict[str, Any]:
    import cluster_load  # noqa: PLC0415
    import onnx_models  # noqa: PLC0415
    import onnxruntime  # noqa: PLC0415
    import torch_models  # noqa: PLC0415

    rng = np.random.default_rng(11)
    models = {
        "cnn": _entry(out, "cnn", onnx_models.cnn().blob,
                      [("input", "FLOAT", torch_models.cnn_sample(batch=1, seed=7))], "output"),
        "fraud": _entry(out, "fraud", fraud_model(),
                        [("transaction", "FLOAT", rng.random((1, 30), dtype=np.float32)),
                         ("reference", "FLOAT", rng.random((1, 256), dtype=np.float32))], "score"),
        "big": _entry(out, "big", cluster_load.big_gather_model(big_mib),
                      [("i", "INT64", np.array([123457], np.int64))], "out"),
    }
    return {"models": models, "onnxruntime": onnxruntime.__version__, "big_mib": big_mib}


def main() -> int:
    args = sys.argv[1:]
    big_mib = 128
    if len(args) == 3 and args[1] == "--big-mib":
        big_mib = int(args[2])
    elif len(args) != 1:
        sys.exit("usage: compare_models.py OUTDIR [--big-mib N]")
    out = pathlib.Path(args[0])
    out.mkdir(parents=True, exist_ok=True)
    (out / "manifest.json").write_text(json.dumps(build(out, big_mib), indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
