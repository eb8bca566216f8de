"""The HTTP stacks of bench/bench_compare.py and wrk, the load generator that drives them.

* FastAPI: uvicorn (uvloop, httptools), 2 workers, compare_serve.fastapi_app; raw bytes in
  and out (POST /v1/<model>).
* Triton: the tritonserver executable that nvidia-pytriton's wheel bundles, run directly
  on a model repository of Python-backend models (compare_triton_model.py, two instances
  each); KServe v2 with the binary tensor extension.
* PyTriton: nvidia-pytriton's own binding (compare_serve.py pytriton); same protocol.

wrk runs closed-loop, one thread, N connections, each with one request in flight, and a
Lua script sets the POST body and prints one JSON line at the end (latency in us).
"""
from __future__ import annotations

import json
import os
import pathlib
import shutil
import signal
import subprocess
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import Any

import numpy as np

import compare_env
from redis_server import free_port  # tests/support/ (bench.py puts it on sys.path)

HERE = pathlib.Path(__file__).resolve().parent
KSERVE_TYPES = {"FLOAT": "FP32", "INT64": "INT64"}

# --- requests: body, headers, the answer -----------------------------------------------


@dataclass
class HttpRequest:
    path: str
    body: bytes
    headers: dict[str, str]


def raw_request(name: str, entry: dict[str, Any]) -> HttpRequest:
    """FastAPI's: the inputs' bytes, concatenated in input order."""
    body = b"".join(pathlib.Path(i["file"]).read_bytes() for i in entry["inputs"])
    return HttpRequest(f"/v1/{name}", body, {"Content-Type": "application/octet-stream"})


def kserve_request(name: str, entry: dict[str, Any]) -> HttpRequest:
    """KServe v2 with Triton's binary tensor extension: a JSON header, then the raw inputs;
    the output asked for as binary too."""
    datas = [pathlib.Path(i["file"]).read_bytes() for i in entry["inputs"]]
    header = {"inputs": [{"name": i["name"], "shape": i["shape"],
                          "datatype": KSERVE_TYPES[i["dtype"]],
                          "parameters": {"binary_data_size": len(d)}}
                         for i, d in zip(entry["inputs"], datas)],
              "outputs": [{"name": entry["output"]["name"], "parameters": {"binary_data": True}}]}
    head = json.dumps(header, separators=(",", ":")).encode()
    return HttpRequest(f"/v2/models/{name}/infer", head + b"".join(datas),
                       {"Content-Type": "application/octet-stream",
                        "Inference-Header-Content-Length": str(len(head))})


def post(port: int, req: HttpRequest) -> tuple[bytes, dict[str, str]]:
    r = urllib.request.Request(f"http://127.0.0.1:{port}{req.path}", data=req.body,
                               headers=req.headers, method="POST")
    with urllib.request.urlopen(r, timeout=60) as resp:
        return resp.read(), dict(resp.headers)


def answer_floats(body: bytes, headers: dict[str, str]) -> np.ndarray:
    """The output of a raw or a KServe binary answer as float32."""
    head_len = next((v for k, v in headers.items() if k.lower() == "inference-header-content-length"),
                    None)
    if head_len is None:
        return np.frombuffer(body, np.float32)
    head = json.loads(body[:int(head_len)])
    out = head["outputs"][0]
    if "data" in out:
        return np.asarray(out["data"], np.float32)
    return np.frombuffer(body[int(head_len):], np.float32)


def wait_http(port: int, path: str, proc: subprocess.Popen, timeout: float, log: pathlib.Path) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"exited with {proc.returncode}:\n{log.read_text(errors='replace')[-4000:]}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=2) as resp:
                if resp.status == 200:
                    return
        except (urllib.error.URLError, ConnectionError, OSError):
            pass
        time.sleep(0.1)
    raise RuntimeError(f"no answer on {path} in {timeout:.0f} s:\n"
                       f"{log.read_text(errors='replace')[-4000:]}")


# --- the servers ----------------------------------------------------------------------

class HttpStack:
    """One server process (and its descendants) on a free port."""

    name = ""
    request_kind = "raw"

    def __init__(self, work: pathlib.Path) -> None:
        self.work = work
        self.port = free_port()
        self.log = work / f"{self.name}.log"
        self.proc: subprocess.Popen | None = None

    def _spawn(self, argv: list[str], env: dict[str, str], cwd: pathlib.Path | None = None) -> None:
        with open(self.log, "wb") as out:
            self.proc = subprocess.Popen(argv, env=env, cwd=cwd, stdout=out, stderr=subprocess.STDOUT,
                                         start_new_session=True)

    def request(self, name: str, entry: dict[str, Any]) -> HttpRequest:
        return kserve_request(name, entry) if self.request_kind == "kserve" else raw_request(name, entry)

    def pids(self) -> list[int]:
        return [self.proc.pid] if self.proc else []

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        os.killpg(self.proc.pid, signal.SIGINT)
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()


def _env(manifest: pathlib.Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    env["COMPARE_MANIFEST"] = str(manifest)
    return env


class FastAPIStack(HttpStack):
    name = "fastapi"
    description = "FastAPI + uvicorn (2 workers, uvloop, httptools), ONNX Runtime in-process, raw bytes"

    def start(self, manifest: pathlib.Path, timeout: float = 120) -> None:
        argv = [str(compare_env.venv_python()), "-m", "uvicorn", "compare_serve:fastapi_app", "--factory",
                "--app-dir", str(HERE), "--host", "127.0.0.1", "--port", str(self.port), "--workers", "2",
                "--log-level", "warning", "--no-access-log"]
        ready = self.work / "fastapi-ready"
        ready.mkdir(exist_ok=True)
        env = {**_env(manifest), "COMPARE_READY_DIR": str(ready)}
        self._spawn(argv, env)
        wait_http(self.port, "/health", self.proc, timeout, self.log)
        deadline = time.monotonic() + timeout
        while len(list(ready.iterdir())) < 2:  # each worker leaves a file once its sessions load
            if time.monotonic() > deadline or self.proc.poll() is not None:
                raise RuntimeError(f"2 uvicorn workers not ready:\n{self.log.read_text(errors='replace')[-4000:]}")
            time.sleep(0.1)


def _pytriton_root() -> pathlib.Path:
    site = next((compare_env.VENV / "lib").glob("python3*/site-packages"))
    return site / "pytriton"


class TritonStack(HttpStack):
    name = "triton"
    request_kind = "kserve"
    description = ("Triton (nvidia-pytriton's tritonserver), python backend model calling ONNX Runtime, "
                   "2 instances, KServe v2 binary tensors")

    def _backends(self) -> pathlib.Path:
        """A backend directory: the wheel's python backend with the stub of this Python."""
        server = _pytriton_root() / "tritonserver"
        py = self.work / "triton-backends" / "python"
        py.mkdir(parents=True, exist_ok=True)
        for f in (server / "backends" / "python").iterdir():
            if f.is_file():
                shutil.copy(f, py / f.name)
        ver = subprocess.run([str(compare_env.venv_python()), "-c",
                              "import sys; print('%d.%d' % sys.version_info[:2])"],
                             capture_output=True, text=True, check=True).stdout.strip()
        shutil.copy(server / "python_backend_stubs" / ver / "triton_python_backend_stub",
                    py / "triton_python_backend_stub")
        return py.parent

    def _repository(self, models: dict[str, dict[str, Any]]) -> pathlib.Path:
        repo = self.work / "triton-models"
        for name, entry in models.items():
            (repo / name / "1").mkdir(parents=True, exist_ok=True)
            shutil.copy(HERE / "compare_triton_model.py", repo / name / "1" / "model.py")
            ins = ",\n".join(
                f'  {{ name: "{i["name"]}" data_type: TYPE_{KSERVE_TYPES[i["dtype"]]} '
                f'dims: [{", ".join(str(d) for d in i["shape"])}] }}' for i in entry["inputs"])
            o = entry["output"]
            (repo / name / "config.pbtxt").write_text(
                f'name: "{name}"\nbackend: "python"\nmax_batch_size: 0\n'
                f'input [\n{ins}\n]\n'
                f'output [ {{ name: "{o["name"]}" data_type: TYPE_FP32 '
                f'dims: [{", ".join(str(d) for d in o["shape"])}] }} ]\n'
                'instance_group [ { count: 2 kind: KIND_CPU } ]\n'
                f'parameters {{ key: "onnx_file" value: {{ string_value: "{entry["file"]}" }} }}\n')
        return repo

    def start(self, manifest: pathlib.Path, timeout: float = 180) -> None:
        models = json.loads(manifest.read_text())["models"]
        root = _pytriton_root()
        env = _env(manifest)
        libs = root.parent / "nvidia_pytriton.libs"
        env["LD_LIBRARY_PATH"] = ":".join(p for p in (str(libs), env.get("LD_LIBRARY_PATH", "")) if p)
        # The stub embeds the system's libpython and finds its prefix through `python` on
        # PATH (as PyTriton runs it): .venv-compare's, whence numpy and onnxruntime.
        env["PATH"] = f"{compare_env.VENV / 'bin'}:{env.get('PATH', '')}"
        argv = [str(root / "tritonserver" / "bin" / "tritonserver"),
                f"--model-repository={self._repository(models)}",
                f"--backend-directory={self._backends()}",
                f"--cache-directory={root / 'tritonserver' / 'caches'}",
                "--http-address=127.0.0.1", f"--http-port={self.port}",
                "--allow-grpc=false", "--allow-metrics=false", "--allow-gpu-metrics=false",
                "--log-info=false", "--exit-on-error=true"]
        self._spawn(argv, env)
        wait_http(self.port, "/v2/health/ready", self.proc, timeout, self.log)


class PyTritonStack(HttpStack):
    name = "pytriton"
    request_kind = "kserve"
    description = ("PyTriton (nvidia-pytriton's Triton binding, infer_func calling ONNX Runtime, "
                   "2 instances), KServe v2 binary tensors")

    def start(self, manifest: pathlib.Path, timeout: float = 240) -> None:
        argv = [str(compare_env.venv_python()), str(HERE / "compare_serve.py"), "pytriton",
                str(self.port), str(free_port()), str(free_port())]
        self._spawn(argv, _env(manifest), cwd=self.work)
        # The server is up before bind() loads the models: wait for each of them.
        deadline = time.monotonic() + timeout
        for name in json.loads(manifest.read_text())["models"]:
            wait_http(self.port, f"/v2/models/{name}/ready", self.proc,
                      max(1.0, deadline - time.monotonic()), self.log)


def server_version(port: int) -> str:
    """Triton's version, from its server metadata (GET /v2)."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/v2", timeout=10) as resp:
        meta = json.loads(resp.read())
    return f"{meta.get('name', '')} {meta.get('version', '')}".strip()


# --- wrk -----------------------------------------------------------------------------

_LUA = """\
wrk.method = "POST"
local f = assert(io.open({body!r}, "rb"))
wrk.body = f:read("*all")
f:close()
{headers}
done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    '\\n{{"requests": %d, "duration_us": %d, "p50_us": %.1f, "p99_us": %.1f, "mean_us": %.1f, '
    .. '"errors": %d, "status_errors": %d}}\\n',
    summary.requests, summary.duration, latency:percentile(50), latency:percentile(99),
    latency.mean, e.connect + e.read + e.write + e.timeout, e.status))
end
"""


class Wrk:
    """wrk against one HTTP stack and one request: a Lua script per request."""

    def __init__(self, exe: str, port: int, req: HttpRequest, work: pathlib.Path, tag: str) -> None:
        self.exe = exe
        self.url = f"http://127.0.0.1:{port}{req.path}"
        body = work / f"{tag}.body"
        body.write_bytes(req.body)
        headers = "\n".join(f'wrk.headers["{k}"] = "{v}"' for k, v in req.headers.items())
        self.script = work / f"{tag}.lua"
        self.script.write_text(_LUA.format(body=str(body), headers=headers))

    def run(self, clients: int, seconds: float) -> dict[str, Any]:
        """count, rps, p50_us, p99_us, mean_us (one thread, `clients` connections)."""
        argv = [self.exe, "-t1", f"-c{clients}", f"-d{max(1, round(seconds))}s", "--timeout", "30s",
                "-s", str(self.script), self.url]
        res = subprocess.run(argv, capture_output=True, text=True, timeout=seconds + 120)
        line = next((ln for ln in reversed(res.stdout.splitlines()) if ln.startswith("{")), None)
        if res.returncode != 0 or line is None:
            raise RuntimeError(f"wrk exited {res.returncode}:\n{res.stdout}\n{res.stderr}")
        out = json.loads(line)
        if out["errors"] or out["status_errors"]:
            raise RuntimeError(f"wrk: {out['errors']} socket errors, {out['status_errors']} non-2xx "
                               f"answers against {self.url}:\n{res.stdout}")
        window = out["duration_us"] / 1e6
        return {"count": out["requests"], "rps": out["requests"] / window, "p50_us": out["p50_us"],
                "p99_us": out["p99_us"], "mean_us": out["mean_us"], "window_s": window}
