"""build_tools: the Python-driven build of RedisAI (redisai.so and its backends).

Commands (python -m build_tools <command>):
  setup    system packages, .venv and the PyPI pins (system python3, stdlib only)
  headers  fetch redismodule.h and the ONNX Runtime C headers into the cache
  servers  fetch (or build from source) the other servers the tests run against into the cache
  build    cmake configure + build, then lay out install/redisai-<version>/
  check    verify RUNPATH, NEEDED and exported symbols of an install tree
  serve    run redis-server with the module and every installed backend

Public surface: BuildError, pins, and the functions below. Modules import
only the stdlib at top level, so `setup` works before the venv exists.
"""
from __future__ import annotations

from . import pins
from .errors import BuildError

__all__ = ["BuildError", "pins", "__version__"]
__version__: str = pins.VERSION
