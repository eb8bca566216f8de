"""The PEP 517 build backend of `pip install .` and `pip wheel .` (pyproject.toml).

setuptools' own backend, running setup.py, with one addition: the wheel's build
requirements include the pinned frameworks and build tools (pins.build_requires();
CMake from PyPI too where the machine has none on PATH), so that pip's build
isolation installs them into its throwaway environment and the build compiles
against them there. Pins stay in pins.py alone: pyproject.toml
names only setuptools, which this module needs to be imported at all.

`pip install --no-build-isolation .` (the fast path) skips all of this: pip
installs nothing and the build uses the frameworks of the environment pip runs in.

PyTorch: `torch==2.13.0` on PyPI is, on Linux x86_64, the CUDA build (several GB
with its nvidia-* wheels). The CPU build is on PyTorch's own index, which no
pyproject.toml can name; pip hands its own index options (--extra-index-url,
--find-links, PIP_EXTRA_INDEX_URL, pip.conf) to the build environment's install,
so `pip install . --extra-index-url <PyTorch's CPU wheel index>` gets
2.13.0+cpu (a local version sorts above the plain one). See docs/install.md.
"""
from __future__ import annotations

import shutil
from typing import Any

from setuptools import build_meta as _setuptools
from setuptools.build_meta import (  # noqa: F401  (the PEP 517 hooks pip calls)
    build_sdist,
    build_wheel,
    get_requires_for_build_sdist,
    prepare_metadata_for_build_wheel,
)

from . import pins


def get_requires_for_build_wheel(config_settings: dict[str, Any] | None = None) -> list[str]:
    """setuptools' requirements plus the frameworks and tools of the native build
    (CMake too when none is on PATH)."""
    own = pins.build_requires(cmake_on_path=shutil.which("cmake") is not None)
    return list(_setuptools.get_requires_for_build_wheel(config_settings)) + own
