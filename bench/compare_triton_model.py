"""model.py of a Triton Python-backend model of bench/bench_compare.py.

bench_compare.py copies this file into <repository>/<model>/1/model.py; the model's
config.pbtxt names the ONNX file (parameter `onnx_file`). Triton's python backend stub
runs it with its own embedded Python; numpy and onnxruntime come from .venv-compare
(PYTHONPATH). Each instance holds one InferenceSession at ONNX Runtime's defaults.
"""
from __future__ import annotations

import json
from typing import Any

import onnxruntime
import triton_python_backend_utils as pb_utils  # provided by the stub


class TritonPythonModel:
    def initialize(self, args: dict[str, str]) -> None:
        config = json.loads(args["model_config"])
        path = config["parameters"]["onnx_file"]["string_value"]
        self.session = onnxruntime.InferenceSession(path, providers=["CPUExecutionProvider"])
        self.inputs = [i["name"] for i in config["input"]]
        self.output = config["output"][0]["name"]

    def execute(self, requests: list[Any]) -> list[Any]:
        responses = []
        for request in requests:
            feeds = {n: pb_utils.get_input_tensor_by_name(request, n).as_numpy() for n in self.inputs}
            y = self.session.run([self.output], feeds)[0]
            responses.append(pb_utils.InferenceResponse(output_tensors=[pb_utils.Tensor(self.output, y)]))
        return responses
