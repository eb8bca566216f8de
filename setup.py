"""pip entry point: `pip install .` / `pip wheel .` run build_tools' build (from
the build_ext step), through the build backend build_tools/pip_backend.py.

Two ways in:
  * `pip install --no-build-isolation .` (the fast path) builds with the
    frameworks of the environment pip runs in. Run by the project's .venv it
    uses build/ and install/ exactly as `python -m build_tools build` does, so an
    up-to-date tree is only re-checked and packed.
  * `pip install .` (build isolation): pip first installs the pinned frameworks
    into a throwaway environment (pip_backend.py adds them to the build
    requirements); the build compiles against them there.
  Any environment other than the project's .venv builds in build/pip-env/ and lays
  out build/pip-env/install/, leaving the developer's build/ and install/ alone.

The wheel holds one package, `redisai_module` (python/redisai_module/: the paths,
`python -m redisai_module`, the `redisai-server` command) with the checked install
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

from build_tools import paths, pins  # noqa: E402
from build_tools.frameworks import FRAMEWORKS  # noqa: E402

PACKAGE = "redisai_module"
PACKAGE_SOURCES = ROOT / "python" / PACKAGE

_BUILD_INFO = '''"""Written by setup.py at build time."""
from __future__ import annotations

VERSION = {version!r}
# Backend name -> its redis-server module argument keyword.
SERVE_KEYWORDS: dict[str, str] = {keywords!r}
'''


def _is_project_venv() -> bool:
    """Whether this interpreter is the project's .venv (build/ and install/ are its)."""
    try:
        return Path(sys.prefix).resolve() == paths.VENV.resolve()
    except OSError:
        return False


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
        from build_tools.build import build
        from build_tools.check import check_tree
        from build_tools.errors import BuildError
        if _is_project_venv():
            where = {}
        else:
            other = paths.BUILD_DIR / "pip-env"
            print(f"[setup.py] building with the frameworks of {sys.prefix} in {other}/",
                  flush=True)
            where = {"build_dir": other / "cmake",
                     "install": other / "install" / paths.install_dir().name}
        try:
            install = build(**where)
            if not check_tree(install):
                raise BuildError(f"{install} fails `build_tools check` (problems above)")
        except BuildError as exc:
            raise SystemExit(f"error: {exc}") from None
        package = Path(self.build_lib) / PACKAGE
        if package.exists():
            shutil.rmtree(package)
        shutil.copytree(PACKAGE_SOURCES, package,
                        ignore=shutil.ignore_patterns("__pycache__", "_build_info.py"))
        keywords = {spec.backend: spec.serve_keyword for spec in FRAMEWORKS}
        (package / "_build_info.py").write_text(
            _BUILD_INFO.format(version=pins.VERSION, keywords=keywords))
        print(f"[setup.py] packing {install} into the wheel", flush=True)
        _copy_for_wheel(install, package / install.name)


class BinaryDistribution(Distribution):
    """The wheel holds native code: tag it for this platform and Python."""

    def has_ext_modules(self) -> bool:
        return True


setup(
    name="redisai-module",
    version=pins.VERSION,
    description="RedisAI as a Redis module (redisai.so) with TensorFlow, TensorFlow Lite, "
                "PyTorch and ONNX Runtime backends",
    python_requires=">=3.11",
    packages=[],
    entry_points={"console_scripts": [
        "redisai-server = redisai_module.server:main",
    ]},
    cmdclass={"build_ext": BuildRedisAI},
    distclass=BinaryDistribution,
    # build/ is CMake's (build_tools'); keep setuptools' own files beneath it, apart
    # for another environment's build (a `pip install .` while .venv's runs).
    options={"build": {"build_base": "build/setuptools" if _is_project_venv()
                       else "build/pip-env/setuptools"}},
    zip_safe=False,
)
