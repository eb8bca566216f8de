"""The manifest of the core: the install tree's top level, backends/ aside.

Same line format as a backend's (manifest.py), in `redisai_core.manifest` at
the top of the tree:

    format 1
    kind core
    version 1.3.0
    abi 1.4
    file <sha256 hex> <size> redisai.so

`package` writes it into the core archive (it lists redisai.so and whatever
else the tree's top level holds, except backends/, which has a manifest per
folder); `install-package` verifies it after unpacking; `check` verifies it
whenever a tree has one (a tree built in place has none).
"""
from __future__ import annotations

from pathlib import Path

from . import manifest

CORE_MANIFEST_NAME = "redisai_core.manifest"
BACKENDS = "backends"
_SKIP = frozenset({BACKENDS})


def collect(tree: Path, version: str) -> manifest.Manifest:
    """The manifest of tree's top level as it is now (every file hashed)."""
    m = manifest.Manifest(header={"kind": "core", "version": version,
                                  "abi": manifest.abi_version()})
    manifest.scan(tree, m, exclude=CORE_MANIFEST_NAME, skip_top=_SKIP)
    return m


def render(m: manifest.Manifest) -> str:
    body = [line for line in m.render().splitlines() if not line.startswith("#")]
    head = ["# RedisAI core manifest: the install tree's top level (backends/ has its own);",
            "# `.venv/bin/python -m build_tools check` and install-package verify it"]
    return "\n".join(head + body) + "\n"


def verify(tree: Path) -> list[str]:
    """Every problem of tree's top level against its core manifest, naming the file."""
    return manifest.verify(tree, name=CORE_MANIFEST_NAME, skip=_SKIP)
