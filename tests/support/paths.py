"""Where things are: the repository, the install tree under test and its backend files, and
the CMake build folder that goes with that tree. Shared by the tests and bench/."""
from __future__ import annotations

import os
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]


def find_install_dir() -> pathlib.Path:
    """The newest install/redisai-<version>/ tree, or REDISAI_INSTALL_DIR."""
    env = os.environ.get("REDISAI_INSTALL_DIR")
    if env:
        return pathlib.Path(env)
    trees = sorted((ROOT / "install").glob("redisai-*/redisai.so"))
    if not trees:
        pytest.exit("no install/redisai-*/redisai.so: run "
                    "`.venv/bin/python -m build_tools build` first", 2)
    return trees[-1].parent


def backend_file(install_dir: pathlib.Path, name: str) -> pathlib.Path:
    """install_dir/backends/redisai_<name>/redisai_<name>.so (the lazy-loading default)."""
    return install_dir / "backends" / f"redisai_{name}" / f"redisai_{name}.so"


def build_dir() -> pathlib.Path:
    """Where build_tools configured CMake for the tree under test: build-asan/ for an
    install-asan/ tree (REDISAI_INSTALL_DIR, set by ci/asan-tests.sh), build/ otherwise."""
    install = os.environ.get("REDISAI_INSTALL_DIR", "")
    if "install-asan" in pathlib.Path(install).parts:
        return ROOT / "build-asan"
    return ROOT / "build"
