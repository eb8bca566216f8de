"""Where things are: the repository, its venv, build and install trees, the cache."""
from __future__ import annotations

import os
import re
from pathlib import Path

from . import pins

ROOT: Path = Path(__file__).resolve().parent.parent
VENV: Path = ROOT / ".venv"
CLIENT_VENV: Path = ROOT / ".venv-client"  # the PyPI redisai client (pins.CLIENT_PYPI_PINS)
BUILD_DIR: Path = ROOT / "build"
INSTALL_ROOT: Path = ROOT / "install"

# Sanitized builds live apart from the normal tree (build-<kind>/, install-<kind>/),
# so that nothing which picks "the newest install/redisai-*" ever gets one.
SANITIZERS: dict[str, str] = {"address": "asan"}


def venv_python(venv: Path = VENV) -> Path:
    return venv / "bin" / "python"


def install_dir(version: str = pins.VERSION) -> Path:
    """install/redisai-<version>/, the tree `build` lays out."""
    return INSTALL_ROOT / f"redisai-{version}"


def sanitized_build_dir(sanitize: str) -> Path:
    """build-asan/ for --sanitize address."""
    return ROOT / f"build-{SANITIZERS[sanitize]}"


def sanitized_install_dir(sanitize: str, version: str = pins.VERSION) -> Path:
    """install-asan/redisai-<version>/ for --sanitize address."""
    return ROOT / f"install-{SANITIZERS[sanitize]}" / f"redisai-{version}"


def newest_install_dir() -> Path | None:
    """The install/redisai-*/ holding redisai.so with the highest version, if any."""
    def key(path: Path) -> tuple[int, ...]:
        nums = re.findall(r"\d+", path.name)
        return tuple(int(n) for n in nums)
    trees = [p.parent for p in INSTALL_ROOT.glob("redisai-*/redisai.so")]
    return max(trees, key=key) if trees else None


def cache_dir() -> Path:
    """$XDG_CACHE_HOME/redisai-build, else ~/.cache/redisai-build (outside the repo)."""
    base = os.environ.get("XDG_CACHE_HOME")
    root = Path(base) if base else Path.home() / ".cache"
    return root / "redisai-build"
