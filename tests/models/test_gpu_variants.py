"""The real `gpu` variants, where this tree has them (docs/gpu.md: `build-variant torch==<v>
--variant gpu`, `build-variant onnxruntime-gpu==<v> --variant gpu`; opt-in, several GB, so
CI's tree has none and these tests skip there). On a machine without a GPU each one loads by
name beside the `cpu` folders, is listed with variant `gpu`, refuses `GPU` as docs/gpu.md's
table says, leaves nothing behind for the refused store, and runs the CNN on `CPU` with the
results of the `cpu` variant in the same tree."""
from __future__ import annotations

import pathlib

import numpy as np
import pytest

from redis_server import Connect, StartServer
from resp import RespError

pytestmark = pytest.mark.inprocess_only("one in-process backend per server, chosen by name")

KINDS = {"torch": ("TORCH", "torch"), "onnxruntime": ("ONNX", "onnxruntime")}


def gpu_folders(install: pathlib.Path) -> list[pathlib.Path]:
    backends = install / "backends"
    return sorted(p for p in backends.glob("redisai_*-gpu") if p.is_dir() and not p.is_symlink())


def cnn_blob(framework: str) -> bytes:
    if framework == "torch":
        import torch_models  # noqa: PLC0415
        return torch_models.cnn().blob
    import onnx_models  # noqa: PLC0415
    return onnx_models.cnn().blob


def run_cnn(c, kind: str, blob: bytes, x: np.ndarray) -> np.ndarray:  # type: ignore[no-untyped-def]
    assert c.execute("AI.MODELSTORE", "m", kind, "CPU", "BLOB", blob) == "OK"
    assert c.execute("AI.TENSORSET", "x", "FLOAT", *x.shape, "BLOB", x.tobytes()) == "OK"
    assert c.execute("AI.MODELEXECUTE", "m", "INPUTS", 1, "x", "OUTPUTS", 1, "y") == "OK"
    return np.frombuffer(c.execute("AI.TENSORGET", "y", "BLOB"), np.float32)


@pytest.mark.parametrize("framework", sorted(KINDS))
def test_a_gpu_variant_loads_refuses_gpu_here_and_runs_cpu(framework: str,
                                                           install_dir: pathlib.Path,
                                                           start_server: StartServer,
                                                           connect: Connect) -> None:
    folders = [f for f in gpu_folders(install_dir) if f.name.startswith(f"redisai_{framework}-")]
    if not folders:
        pytest.skip(f"no {framework} gpu variant in {install_dir} (opt-in: docs/gpu.md)")
    kind, default = KINDS[framework]
    import torch_models  # noqa: PLC0415
    x = torch_models.cnn_sample(batch=1, seed=7)
    blob = cnn_blob(framework)
    for folder in folders:
        name = folder.name[len("redisai_"):]
        c = connect(start_server([kind, name]))
        rows = [dict(zip(r[::2], r[1::2])) for r in c.execute("AI.CONFIG", "LIST")]
        loaded = [r for r in rows if r[b"loaded"] in (1, b"1")]
        assert [(r[b"name"], r[b"variant"]) for r in loaded] == [(name.encode(), b"gpu")], rows
        for device in ("GPU", "GPU:0"):
            reply = c.execute("AI.MODELSTORE", "g", kind, device, "BLOB", blob)
            assert isinstance(reply, RespError), reply
            if framework == "torch":
                assert reply == "GPU requested but Torch couldn't find CUDA"
            else:
                assert "libonnxruntime_providers_cuda.so" in reply and "libcuda.so.1" in reply
            assert c.execute("EXISTS", "g") == 0
        info = c.execute("INFO", "MODULES").decode()
        assert "ai_queue_GPU" not in info, info
        got = run_cnn(c, kind, blob, x)
        ref = connect(start_server([kind, default]))
        np.testing.assert_allclose(got, run_cnn(ref, kind, blob, x), rtol=1e-5, atol=1e-6)


def test_the_torch_gpu_variant_runs_isolated_beside_the_cpu_one(install_dir: pathlib.Path,
                                                                 start_server: StartServer,
                                                                 connect: Connect) -> None:
    folders = [f for f in gpu_folders(install_dir) if f.name.startswith("redisai_torch-")]
    if not folders:
        pytest.skip(f"no torch gpu variant in {install_dir} (opt-in: docs/gpu.md)")
    name = folders[0].name[len("redisai_"):]
    import torch_models  # noqa: PLC0415
    blob, x = torch_models.cnn().blob, torch_models.cnn_sample(batch=1, seed=7)
    c = connect(start_server(["TORCH", "torch"]))
    assert c.execute("AI.CONFIG", "LOADBACKEND", "TORCH", name, "ISOLATED") == "OK"
    reply = c.execute("AI.MODELSTORE", "g", "TORCH", "GPU:0", "BACKEND", name, "BLOB", blob)
    assert reply == "GPU requested but Torch couldn't find CUDA"
    assert c.execute("AI.MODELSTORE", "on_gpu_variant", "TORCH", "CPU", "BACKEND", name,
                     "BLOB", blob) == "OK"
    got = run_cnn(c, "TORCH", blob, x)   # stores "m" on the kind's default: the cpu variant
    assert c.execute("AI.MODELEXECUTE", "on_gpu_variant", "INPUTS", 1, "x", "OUTPUTS", 1,
                     "y2") == "OK"
    np.testing.assert_allclose(np.frombuffer(c.execute("AI.TENSORGET", "y2", "BLOB"),
                                             np.float32), got, rtol=1e-5, atol=1e-6)
    rows = [dict(zip(r[::2], r[1::2])) for r in c.execute("AI.CONFIG", "LIST")]
    loaded = {r[b"name"]: (r[b"variant"], r[b"isolated"]) for r in rows if r[b"loaded"] in (1, b"1")}
    assert loaded[name.encode()] == (b"gpu", b"yes"), loaded
