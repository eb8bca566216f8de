"""The PyPI `redisai` client (1.3.0) drives the server unchanged: numpy tensors, model
store and execute for TF, TORCH, ONNX and TFLITE (a quantized uint8 MNIST-sized CNN made by
TensorFlow's converter, outputs compared bit for bit with tf.lite.Interpreter's), script store
and execute.

The client needs redis<5, so it lives in its own virtual env, .venv-client/ (made by
`python3 -m build_tools setup`). This test makes the models with the real frameworks in
the project's .venv, starts a server with all three backends, and runs
tests/support/pypi_client_check.py with .venv-client/bin/python against it; that script asserts
as it goes. The test checks its exit code and output.
"""
from __future__ import annotations

import subprocess

import numpy as np
import pytest

import onnx_models as om
import tf_graphs
import tflite_models
import torch_models as tm
from paths import ROOT
from redis_server import RedisServer

CLIENT_PYTHON = ROOT / ".venv-client" / "bin" / "python"
CHECK = ROOT / "tests" / "support" / "pypi_client_check.py"

CLIENT_SCRIPT = '''
def bar(tensors: List[Tensor], keys: List[str], args: List[str]):
    return tensors[0] + tensors[1]

def counts(tensors: List[Tensor], keys: List[str], args: List[str]):
    return torch.tensor([len(tensors), len(keys), len(args)])

def tuple_out(tensors: List[Tensor], keys: List[str], args: List[str]) -> Tuple[Tensor, Tensor]:
    return tensors[0] + tensors[1], tensors[0] - tensors[1]

def legacy_add(a, b):
    return a + b
'''


@pytest.fixture(scope="module")
def client_python():
    if not CLIENT_PYTHON.exists():
        pytest.skip(f"{CLIENT_PYTHON} is missing: run `python3 -m build_tools setup` to create "
                    ".venv-client with the PyPI redisai client")
    return CLIENT_PYTHON


def test_pypi_redisai_client(module_path, all_backend_paths, tflite_backend_path, client_python,
                             tmp_path):
    art = tmp_path / "artifacts"
    art.mkdir()
    (art / "tf_mul.pb").write_bytes(tf_graphs.mul_graph())
    (art / "torch_cnn.pt").write_bytes(tm.cnn().blob)
    (art / "onnx_cnn.onnx").write_bytes(om.cnn().blob)
    x = tm.cnn_sample(batch=2, seed=42)
    np.save(art / "cnn_x.npy", x)
    np.save(art / "cnn_torch.npy", tm.cnn().run(x)[0])
    np.save(art / "cnn_onnx.npy", om.cnn().run(x)[0])
    (art / "script.py").write_text(CLIENT_SCRIPT)
    quantized = tflite_models.cnn_uint8()
    (art / "mnist_uint8.tflite").write_bytes(quantized.blob)
    qx = quantized.sample(seed=7, batch=2)[0]
    np.save(art / "mnist_uint8_x.npy", qx)
    np.save(art / "mnist_uint8_y.npy", tflite_models.reference(quantized, [qx])[0])

    args: list[str] = []
    for kind, path in {**all_backend_paths, "TFLITE": tflite_backend_path}.items():
        args += [kind, str(path)]
    srv = RedisServer(module_path, args)
    try:
        res = subprocess.run([str(client_python), str(CHECK), str(srv.port), str(art)],
                             capture_output=True, text=True, timeout=300, cwd=tmp_path)
        out = res.stdout + res.stderr
        assert res.returncode == 0, f"client check failed ({res.returncode}):\n{out}"
        assert "ALL OK" in res.stdout, out
        for line in ("tensorset/tensorget with numpy", "TF modelstore/modelexecute",
                     "TORCH modelstore", "ONNX modelstore", "TFLITE quantized MNIST",
                     "scriptstore/scriptget/scriptexecute",
                     "scriptset/scriptrun/scriptdel", "errors"):
            assert f"ok: {line}" in res.stdout, out
        assert srv.alive(), srv.log()
    finally:
        srv.stop()
