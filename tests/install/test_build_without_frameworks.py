"""`python -m build_tools build` run by a Python that lacks the frameworks (the system's
`python3`, as a page once told a reader to run it) removes nothing from a built install tree:
it stops before laying anything out, exits non-zero and names the interpreter to use. It used
to print `skipped (PyTorch not installed ...)`, exit 0 and remove every TF, TORCH and ONNX
backend folder while servers ran from them."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from paths import ROOT


def _tree(install: Path) -> list[tuple[str, int]]:
    return sorted((str(p.relative_to(install)), p.lstat().st_size)
                  for p in install.rglob("*"))


def test_a_build_without_the_frameworks_removes_nothing(install_dir: Path) -> None:
    bare = Path(sys.base_prefix) / "bin" / "python3"
    if not bare.is_file():
        pytest.skip(f"no base interpreter at {bare}")
    has = subprocess.run([str(bare), "-c", "import torch"], capture_output=True)
    if has.returncode == 0:
        pytest.skip(f"{bare} has torch: not a Python without the frameworks")
    before = _tree(install_dir)
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")}
    res = subprocess.run([str(bare), "-m", "build_tools", "build"], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=600)
    out = res.stdout + res.stderr
    assert res.returncode != 0, out
    assert "is not installed for" in out and ".venv/bin/python -m build_tools build" in out, out
    assert _tree(install_dir) == before
