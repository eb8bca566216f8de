"""The C unit tests of the leaf units (tests/unit/c/), one pytest test per unit.

Each tests/unit/c/test_<unit>.c is a program of its own, compiled from the unit's .c files
and a shim of Redis's allocator, registered with CTest under the label `unit`
(CMakeLists.txt, "tests only: C unit tests"). The targets are EXCLUDE_FROM_ALL: this file
builds them on first use (`cmake --build <build dir> --target unit_tests`) and runs each
with `ctest --test-dir <build dir> -L unit -R ^unit_<unit>$`. Under an install-asan/ tree
(REDISAI_INSTALL_DIR, ci/asan-tests.sh) the build dir is build-asan/, so the units run
with AddressSanitizer.
"""
from __future__ import annotations

import os
import pathlib
import re
import subprocess

import pytest

_ROOT = pathlib.Path(__file__).resolve().parents[2]
_SOURCES = _ROOT / "tests" / "unit" / "c"
_UNITS = sorted(p.stem.removeprefix("test_") for p in _SOURCES.glob("test_*.c"))


def _build_dir() -> pathlib.Path:
    """Where build_tools configured CMake for the tree under test: build-asan/ for an
    install-asan/ tree (REDISAI_INSTALL_DIR), build/ otherwise."""
    install = os.environ.get("REDISAI_INSTALL_DIR", "")
    if "install-asan" in pathlib.Path(install).parts:
        return _ROOT / "build-asan"
    return _ROOT / "build"


def _output(res: subprocess.CompletedProcess[str]) -> str:
    return f"{res.stdout}{res.stderr}"


@pytest.fixture(scope="session")
def unit_build() -> pathlib.Path:
    """The build dir, with every unit test program built."""
    build = _build_dir()
    if not (build / "CMakeCache.txt").is_file():
        pytest.fail(f"{build} is not configured: run `.venv/bin/python -m build_tools build` first")
    res = subprocess.run(["cmake", "--build", str(build), "--target", "unit_tests",
                          "--parallel", "2"], capture_output=True, text=True)
    assert res.returncode == 0, f"building unit_tests failed:\n{_output(res)}"
    return build


def test_units_found() -> None:
    """The sources are where the parametrization looks (an empty list would pass)."""
    assert {"sha256", "device", "script_depth", "backend_manifest", "backend_file", "tensor",
            "args", "server", "cluster_nodes"} <= set(_UNITS)


@pytest.mark.parametrize("unit", _UNITS)
def test_c_unit(unit_build: pathlib.Path, unit: str) -> None:
    """One unit's program under CTest (-V: its output, failures included): it exits
    nonzero when a check fails and prints `<unit>: <n> checks, <m> failed`."""
    res = subprocess.run(["ctest", "--test-dir", str(unit_build), "-L", "unit",
                          "-R", f"^unit_{unit}$", "--no-tests=error", "-V"],
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, f"unit_{unit} failed:\n{_output(res)}"
    counts = re.search(rf"^(?:\d+: )?{unit}: (\d+) checks, (\d+) failed$", res.stdout, re.M)
    assert counts is not None, f"unit_{unit} printed no counts:\n{_output(res)}"
    assert int(counts.group(1)) > 0 and int(counts.group(2)) == 0, _output(res)
