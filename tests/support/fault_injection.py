"""The fault-injection backend (tests/fault_backend/, CMake target redisai_fault): its file
names and the environment flags it reads. tests/isolation/conftest.py builds and lays it out;
the isolation tests load it in-process and in a backend host."""
from __future__ import annotations

import os
import pathlib
import shutil

from build_tools import manifest

FOLDER = "redisai_fault-1.0-cpu"
SO = "redisai_fault.so"
IN_PROCESS = "REDISAI_FAULT_BACKEND_IN_PROCESS"
HOST_FLAG = "REDISAI_BACKEND_HOST"


def fault_env(**extra: str) -> dict[str, str]:
    """This process's environment without either flag, plus extra: the backend must see
    only what the test sets."""
    env = {k: v for k, v in os.environ.items() if k not in (IN_PROCESS, HOST_FLAG)}
    env.update(extra)
    return env


def lay_out(so: pathlib.Path, parent: pathlib.Path) -> pathlib.Path:
    """The built backend copied into parent/FOLDER with its manifest, as an install tree's
    backend folder holds it (a host re-checks the folder); returns the copy's path."""
    folder = parent / FOLDER
    folder.mkdir()
    shutil.copy2(so, folder / SO)
    header = {"framework": "fault", "version": "1.0", "variant": "cpu", "kind": "ONNX",
              "abi": manifest.abi_version()}
    manifest.write(folder, header, {})
    return folder / SO
