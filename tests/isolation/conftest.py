"""Fixtures of the isolation tests: the fault-injection backend built and laid out as an
install tree's backend folder, and what the backend-host tests start a host with."""
from __future__ import annotations

import os
import pathlib

import pytest

import iso_host_client as iso
from fault_injection import SO, lay_out
from native import build_target

KIND_CODES = {"TORCH": 2, "ONNX": 3}  # RAI_BackendKind


@pytest.fixture(scope="session")
def fault_so() -> pathlib.Path:
    return build_target("redisai_fault", SO)


@pytest.fixture(scope="session")
def fault_backend(fault_so: pathlib.Path,
                  tmp_path_factory: pytest.TempPathFactory) -> pathlib.Path:
    """The backend laid out as a tree's backend folder would be, manifest included."""
    return lay_out(fault_so, tmp_path_factory.mktemp("fault_backends"))


@pytest.fixture(scope="module")
def host_path(install_dir: pathlib.Path) -> pathlib.Path:
    path = install_dir / "redisai-backend-host"
    assert path.is_file() and os.access(path, os.X_OK), f"{path} is not installed"
    return path


def _host_backend(install_dir: pathlib.Path, so: pathlib.Path, kind: str) -> iso.Backend:
    """A backend of the install tree as a host is told it (kind, name, file, BACKENDSPATH)."""
    folder = pathlib.Path(os.path.realpath(so)).parent.name  # redisai_<name>
    return iso.Backend(kind, KIND_CODES[kind], folder[len("redisai_"):], so,
                       install_dir / "backends")


@pytest.fixture(scope="module")
def onnx_backend(install_dir: pathlib.Path, onnx_backend_path: pathlib.Path) -> iso.Backend:
    return _host_backend(install_dir, onnx_backend_path, "ONNX")


@pytest.fixture(scope="module")
def torch_backend(install_dir: pathlib.Path, torch_backend_path: pathlib.Path) -> iso.Backend:
    return _host_backend(install_dir, torch_backend_path, "TORCH")
