"""The HTTP servers of bench/bench_compare.py, run with .venv-compare's Python.

Each serves the models of a compare_models.py manifest (COMPARE_MANIFEST, a path) with
an ONNX Runtime InferenceSession in the serving process, at ONNX Runtime's default
settings, as a user of that stack would write it:

* FastAPI + uvicorn: ``python -m uvicorn compare_serve:fastapi_app --factory --workers 2``.
  POST /v1/<model> takes the inputs as raw bytes, concatenated in the model's input order
  (float32 or int64, C order), and answers the output as raw float32 bytes
  (application/octet-stream). Raw bytes rather than JSON: JSON would cost FastAPI a
  parse and a list of Python floats per request, which no module client pays.
* PyTriton: ``python compare_serve.py pytriton HTTP_PORT GRPC_PORT METRICS_PORT``.
  PyTriton's Triton binding with one infer_func per instance (two instances per model):
  the bundled tritonserver forwards each request through its Python backend and ZeroMQ
  to this process, which runs the session. Clients speak KServe v2 over HTTP.
"""
# No `from __future__ import annotations`: FastAPI reads the route's annotations (Request)
# as objects, and a string would name nothing in this module's globals.
import json
import os
import pathlib
import sys
from typing import Any, Callable

import numpy as np

NP_DTYPES = {"FLOAT": np.float32, "INT64": np.int64}


def _manifest() -> dict[str, Any]:
    return json.loads(pathlib.Path(os.environ["COMPARE_MANIFEST"]).read_text())["models"]


def _session(path: str) -> Any:
    import onnxruntime  # noqa: PLC0415

    return onnxruntime.InferenceSession(path, providers=["CPUExecutionProvider"])


def _splitter(entry: dict[str, Any]) -> Callable[[bytes], dict[str, np.ndarray]]:
    """Cuts a raw body into the model's named inputs."""
    parts = []
    for i in entry["inputs"]:
        dtype = NP_DTYPES[i["dtype"]]
        nbytes = int(np.prod(i["shape"])) * np.dtype(dtype).itemsize
        parts.append((i["name"], dtype, tuple(i["shape"]), nbytes))
    total = sum(p[3] for p in parts)

    def split(body: bytes) -> dict[str, np.ndarray]:
        if len(body) != total:
            raise ValueError(f"expected {total} bytes, got {len(body)}")
        feeds, off = {}, 0
        for name, dtype, shape, nbytes in parts:
            feeds[name] = np.frombuffer(body, dtype, count=nbytes // np.dtype(dtype).itemsize,
                                        offset=off).reshape(shape)
            off += nbytes
        return feeds

    return split


def fastapi_app() -> Any:
    """The ASGI app of one uvicorn worker: one session per model, loaded at start."""
    from fastapi import FastAPI, Request, Response  # noqa: PLC0415

    app = FastAPI()

    def route(name: str, entry: dict[str, Any]) -> None:
        sess, split, out = _session(entry["file"]), _splitter(entry), entry["output"]["name"]

        @app.post(f"/v1/{name}")
        async def infer(request: Request) -> Response:
            y = sess.run([out], split(await request.body()))[0]
            return Response(content=np.ascontiguousarray(y, np.float32).tobytes(),
                            media_type="application/octet-stream")

    for name, entry in _manifest().items():
        route(name, entry)

    @app.get("/health")
    async def health() -> dict[str, str]:
        return {"status": "ok"}

    ready = os.environ.get("COMPARE_READY_DIR")
    if ready:  # tells bench_compare.py that this worker's sessions are loaded
        (pathlib.Path(ready) / str(os.getpid())).touch()
    return app


def _pytriton_infer(entry: dict[str, Any]) -> Callable[[list[Any]], list[dict[str, np.ndarray]]]:
    sess, out = _session(entry["file"]), entry["output"]["name"]
    names = [i["name"] for i in entry["inputs"]]

    def infer(requests: list[Any]) -> list[dict[str, np.ndarray]]:
        return [{out: sess.run([out], {n: r[n] for n in names})[0]} for r in requests]

    return infer


def pytriton_serve(http_port: int, grpc_port: int, metrics_port: int) -> None:
    from pytriton.model_config import ModelConfig, Tensor  # noqa: PLC0415
    from pytriton.triton import Triton, TritonConfig  # noqa: PLC0415

    config = TritonConfig(http_port=http_port, grpc_port=grpc_port, metrics_port=metrics_port,
                          http_address="127.0.0.1", grpc_address="127.0.0.1")
    with Triton(config=config) as triton:
        for name, entry in _manifest().items():
            inputs = [Tensor(name=i["name"], dtype=NP_DTYPES[i["dtype"]], shape=tuple(i["shape"]))
                      for i in entry["inputs"]]
            o = entry["output"]
            triton.bind(model_name=name, infer_func=[_pytriton_infer(entry) for _ in range(2)],
                        inputs=inputs,
                        outputs=[Tensor(name=o["name"], dtype=np.float32, shape=tuple(o["shape"]))],
                        config=ModelConfig(batching=False))
        print("pytriton: serving", flush=True)
        triton.serve()


def main() -> int:
    if len(sys.argv) == 5 and sys.argv[1] == "pytriton":
        pytriton_serve(*(int(a) for a in sys.argv[2:5]))
        return 0
    sys.exit("usage: compare_serve.py pytriton HTTP_PORT GRPC_PORT METRICS_PORT "
             "(FastAPI: uvicorn compare_serve:fastapi_app --factory)")


if __name__ == "__main__":
    sys.exit(main())
