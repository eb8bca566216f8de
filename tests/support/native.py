"""C code built for the tests: fixture backends compiled from tests/fixtures/backends/ with
`cc -shared`, and the test-only CMake targets (llapitest, llapiimpl, redisai_fault) built in
the CMake folder of the tree under test."""
from __future__ import annotations

import dataclasses
import os
import pathlib
import shutil
import subprocess

import pytest

from paths import ROOT, build_dir

FIXTURE_SRC = ROOT / "tests" / "fixtures" / "backends"
ABI_INCLUDE = ROOT / "include"


def cc_shared(*args: str) -> None:
    """`cc -shared -fPIC` with include/ on the include path; raises with the compiler's
    output when it fails."""
    cc = os.environ.get("CC", "cc")
    cmd = [cc, "-shared", "-fPIC", "-O0", "-Wall", f"-I{ABI_INCLUDE}", *args]
    res = subprocess.run(cmd, capture_output=True, text=True)
    if res.returncode != 0:
        raise RuntimeError(f"fixture compile failed ({res.returncode}): {' '.join(cmd)}\n"
                           f"{res.stdout}{res.stderr}")


@dataclasses.dataclass(frozen=True)
class FixtureBackends:
    """Paths of the backends compiled from tests/fixtures/backends/ for this session."""

    dir: pathlib.Path
    missing: pathlib.Path        # does not exist
    not_elf: pathlib.Path        # a text file named .so
    no_entry: pathlib.Path       # a shared object without RAI_BackendEntry
    abi_major_999: pathlib.Path  # descriptor abi_major = 999
    small_table: pathlib.Path    # descriptor size = 8
    needs_missing_lib: pathlib.Path  # NEEDED library deleted after linking
    missing_lib_name: str
    onnx_kind: pathlib.Path      # a working no-op backend of kind ONNX


def build_fixture_backends(d: pathlib.Path) -> FixtureBackends:
    """Compiles the C fixture backends into d."""
    out = {}
    for name in ("no_entry", "abi_major_999", "small_table", "onnx_kind"):
        out[name] = d / f"{name}.so"
        cc_shared("-o", str(out[name]), str(FIXTURE_SRC / f"{name}.c"))
    # A backend whose NEEDED library is gone: build the library, link against it, delete it.
    libname = "raifixturegone"
    lib = d / f"lib{libname}.so"
    cc_shared("-o", str(lib), str(FIXTURE_SRC / "dummy_lib.c"))
    needs = d / "needs_missing_lib.so"
    cc_shared("-o", str(needs), str(FIXTURE_SRC / "needs_missing_lib.c"),
              f"-L{d}", "-Wl,--no-as-needed", f"-l{libname}")
    lib.unlink()
    not_elf = d / "not_a_library.so"
    shutil.copyfile(FIXTURE_SRC / "not_a_library.so.txt", not_elf)
    return FixtureBackends(
        dir=d, missing=d / "no_such_dir" / "no_such_backend.so", not_elf=not_elf,
        no_entry=out["no_entry"], abi_major_999=out["abi_major_999"],
        small_table=out["small_table"], needs_missing_lib=needs,
        missing_lib_name=f"lib{libname}.so", onnx_kind=out["onnx_kind"])


def build_target(target: str, output: str) -> pathlib.Path:
    """Builds a test-only CMake target (EXCLUDE_FROM_ALL: `build_tools build` leaves it out)
    in build_dir() and returns build_dir()/output."""
    build = build_dir()
    if not (build / "CMakeCache.txt").is_file():
        pytest.fail(f"{build} is not configured: run `.venv/bin/python -m build_tools build` first")
    cmd = ["cmake", "--build", str(build), "--target", target]
    res = subprocess.run(cmd, capture_output=True, text=True)
    if res.returncode != 0 and target in res.stderr and "No rule" in res.stderr:
        # A build folder configured before the target existed: configure it again (its
        # cache keeps every setting) and retry.
        subprocess.run(["cmake", str(build)], capture_output=True, text=True, check=True)
        res = subprocess.run(cmd, capture_output=True, text=True)
    assert res.returncode == 0, f"building {target} failed:\n{res.stdout}{res.stderr}"
    so = build / output
    assert so.is_file(), f"the {target} target produced no {so}"
    return so
