"""RedisAI as a Python package: redisai.so and its backends, built by build_tools.

The wheel (`pip install .`, see setup.py) holds the install tree beside this file:

    redisai_module/redisai-<version>/redisai.so
    redisai_module/redisai-<version>/backends/redisai_<name>-<version>-<variant>/...

Wheels cannot hold symlinks, so the default links backends/redisai_<name> of a
build_tools tree are absent; backend_paths() finds the folders instead.
Console command: `redisai-server` (server.py); `python -m redisai_module` prints
the paths (__main__.py).
"""
from __future__ import annotations

from pathlib import Path

from ._build_info import SERVE_KEYWORDS, VERSION

__all__ = ["VERSION", "SERVE_KEYWORDS", "install_dir", "module_path", "backends_path",
           "backend_paths", "backend_folders"]

_MANIFEST = "redisai_backend.manifest"


def install_dir() -> Path:
    """The install tree: redisai.so and backends/."""
    return Path(__file__).resolve().parent / f"redisai-{VERSION}"


def module_path() -> Path:
    """The module, for redis-server --loadmodule."""
    return install_dir() / "redisai.so"


def backends_path() -> Path:
    """BACKENDSPATH: the module's default, the backends/ folder beside redisai.so."""
    return install_dir() / "backends"


def backend_folders() -> list[Path]:
    """Every backend folder of the tree (redisai_<name>-<version>-<variant>), sorted."""
    return sorted(p.parent for p in backends_path().glob("redisai_*-*/" + _MANIFEST))


def _side_by_side(folder: Path) -> bool:
    """A folder built from another framework version's wheel (`build-variant`):
    its manifest has a `source <wheel>` line."""
    text = (folder / _MANIFEST).read_text(errors="replace")
    return any(line.startswith("source ") for line in text.splitlines())


def backend_paths() -> dict[str, Path]:
    """Backend name (tensorflow, torch, onnxruntime) -> its .so: the build's own
    version, not a side-by-side one."""
    found: dict[str, Path] = {}
    for folder in backend_folders():
        for so in sorted(folder.glob("redisai_*.so")):
            name = so.stem[len("redisai_"):]
            if name not in found or not _side_by_side(folder):
                found[name] = so
    return found
