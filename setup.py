"""pip entry point: `pip install --no-build-isolation .` runs build_tools' build
(from the build_ext step).

The build uses the frameworks of the environment pip runs in (build isolation
would install them again into a throwaway environment, over 1 GB, so it is
refused). The wheel holds one package, `redisai_module`, with the install
tree in it:

    redisai_module/redisai-<version>/redisai.so
    redisai_module/redisai-<version>/backends/redisai_<name>-<version>-<variant>/...

Wheels cannot hold symlinks: the unversioned backends/redisai_<name> links
are left out (redisai_module.backend_paths() finds the folders) and symlinks
in lib/ become copies of their targets.
"""
from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

from setuptools import Distribution, setup
from setuptools.command.build_ext import build_ext

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT))

from build_tools import pins  # noqa: E402

PACKAGE = "redisai_module"

_INIT = '''"""RedisAI {version}: redisai.so and its backends, built by build_tools."""
from __future__ import annotations

from pathlib import Path

VERSION = "{version}"


def install_dir() -> Path:
    """The install tree: redisai.so and backends/."""
    return Path(__file__).resolve().parent / "redisai-{version}"


def module_path() -> Path:
    """The module, for redis-server --loadmodule."""
    return install_dir() / "redisai.so"


def backend_paths() -> dict[str, Path]:
    """Backend name (tensorflow, torch, onnxruntime) -> its .so: the build's own
    version, not a side-by-side one (`build-variant`: its manifest has a source line)."""
    found: dict[str, Path] = {{}}
    for so in sorted((install_dir() / "backends").glob("redisai_*-*/redisai_*.so")):
        name = so.stem[len("redisai_"):]
        text = (so.parent / "redisai_backend.manifest").read_text(errors="replace")
        if name not in found or "\nsource " not in text:
            found[name] = so
    return found
'''


def _in_build_isolation() -> bool:
    return any("pip-build-env-" in entry for entry in sys.path)


def _copy_for_wheel(src: Path, dst: Path) -> None:
    """Copies the install tree without symlinks (wheels cannot hold them)."""
    for dirpath, dirnames, filenames in os.walk(src):
        here = Path(dirpath)
        out = dst / here.relative_to(src)
        out.mkdir(parents=True, exist_ok=True)
        for name in list(dirnames):
            if (here / name).is_symlink():
                dirnames.remove(name)      # backends/redisai_<name> -> versioned folder
        for name in filenames:
            shutil.copy2(here / name, out / name)   # follows symlinks in lib/


class BuildRedisAI(build_ext):
    """build_ext that builds redisai.so and its backends with build_tools.

    There are no setuptools Extensions: the native build is CMake's, driven
    by build_tools exactly as `python -m build_tools build` does.
    """

    def run(self) -> None:
        if _in_build_isolation():
            raise SystemExit(
                "error: build isolation hides this environment's frameworks and would "
                "download them again.\n  Install with: python -m pip install "
                "--no-build-isolation .")
        from build_tools.build import build
        from build_tools.errors import BuildError
        try:
            install = build()
        except BuildError as exc:
            raise SystemExit(f"error: {exc}") from None
        package = Path(self.build_lib) / PACKAGE
        if package.exists():
            shutil.rmtree(package)
        _copy_for_wheel(install, package / install.name)
        (package / "__init__.py").write_text(_INIT.format(version=pins.VERSION))


class BinaryDistribution(Distribution):
    """The wheel holds native code: tag it for this platform and Python."""

    def has_ext_modules(self) -> bool:
        return True


setup(
    name="redisai-module",
    version=pins.VERSION,
    description="RedisAI as a Redis module (redisai.so) with TensorFlow, PyTorch "
                "and ONNX Runtime backends",
    python_requires=">=3.11",
    packages=[],
    cmdclass={"build_ext": BuildRedisAI},
    distclass=BinaryDistribution,
    # build/ is CMake's (build_tools'); keep setuptools' own files beneath it.
    options={"build": {"build_base": "build/setuptools"}},
    zip_safe=False,
)
