"""`python -m build_tools build`: headers, frameworks, cmake, install tree.

1. redismodule.h (and the ONNX Runtime headers when that backend is built)
   from the header cache (headers.py);
2. every framework of frameworks.FRAMEWORKS found in THIS interpreter's
   environment whose backends/<name>/ folder has sources;
3. cmake configure + build in build/ (Unix Makefiles), output shown as it comes;
4. install/redisai-<version>/ laid out by layout.py.

With sanitize="address" the same happens in build-asan/ and
install-asan/redisai-<version>/, with cmake's REDISAI_SANITIZE=address: the
module and the backends get AddressSanitizer, the frameworks stay as shipped.
"""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from . import headers, paths, pins
from ._proc import run_quiet, run_tee
from .errors import BuildError
from .frameworks import FRAMEWORKS, Framework, backend_sources, discover
from .layout import BuiltBackend, lay_out

_GENERATOR = "Unix Makefiles"


def _say(msg: str) -> None:
    print(f"[build] {msg}", flush=True)


def git_sha(root: Path = paths.ROOT) -> str:
    """The short commit id of HEAD, or "unknown" (no git, no commit yet, an sdist)."""
    try:
        proc = subprocess.run(["git", "-C", str(root), "rev-parse", "--short=12", "HEAD"],
                              capture_output=True, text=True, check=False)
    except OSError:
        return "unknown"
    sha = proc.stdout.strip()
    return sha if proc.returncode == 0 and sha else "unknown"


def _cached_generator(build_dir: Path) -> str | None:
    cache = build_dir / "CMakeCache.txt"
    if not cache.is_file():
        return None
    for line in cache.read_text(errors="replace").splitlines():
        if line.startswith("CMAKE_GENERATOR:INTERNAL="):
            return line.split("=", 1)[1]
    return None


def _select_backends() -> list[Framework]:
    """The frameworks whose backend will be built; says why each other one is not."""
    chosen: list[Framework] = []
    for spec in FRAMEWORKS:
        sources = backend_sources(spec)
        fw = discover(spec)
        if fw is None:
            _say(f"{spec.backend}: skipped ({spec.display_name} not installed: "
                 f"no {' or '.join(spec.distributions)} in this environment)")
        elif not sources:
            _say(f"{spec.backend}: skipped (no sources in backends/{spec.backend}/; "
                 f"{spec.display_name} {fw.version} is installed)")
        else:
            _say(f"{spec.backend}: {spec.display_name} {fw.version} from {fw.site_packages}, "
                 f"{len(sources)} source file(s)")
            chosen.append(fw)
    return chosen


def _include_dirs(fw: Framework) -> list[Path]:
    dirs = list(fw.include_dirs)
    if fw.spec.fetched_headers == "onnxruntime":
        dirs.append(headers.onnxruntime_include_dir())
    elif fw.spec.fetched_headers is not None:
        raise BuildError(f"{fw.spec.backend}: unknown header source {fw.spec.fetched_headers!r}")
    return dirs


def configure_args(build_dir: Path, redismodule_dir: Path, chosen: list[Framework],
                   variant: str, sha: str, sanitize: str = "") -> list[str]:
    """The cmake configure command. Every backend's variables are passed, empty
    for backends not built, so a previous configure's values never linger."""
    args = ["cmake", "-S", str(paths.ROOT), "-B", str(build_dir), "-G", _GENERATOR,
            f"-DREDISAI_VERSION={pins.VERSION}",
            f"-DREDISAI_GIT_SHA={sha}",
            f"-DREDISMODULE_INCLUDE_DIR={redismodule_dir}",
            f"-DREDISAI_BACKEND_VARIANT={variant}",
            f"-DREDISAI_SANITIZE={sanitize}"]
    by_backend = {fw.spec.backend: fw for fw in chosen}
    for spec in FRAMEWORKS:
        fw = by_backend.get(spec.backend)
        p = spec.cmake_prefix
        if fw is None:
            args += [f"-D{p}_INCLUDE_DIR=", f"-D{p}_LIB_DIR=", f"-D{p}_VERSION="]
        else:
            incs = ";".join(str(d) for d in _include_dirs(fw))
            args += [f"-D{p}_INCLUDE_DIR={incs}", f"-D{p}_LIB_DIR={fw.lib_dir}",
                     f"-D{p}_VERSION={fw.version}"]
    return args


def build(variant: str = "cpu", jobs: int = 2, build_dir: Path | None = None,
          install: Path | None = None, sanitize: str = "") -> Path:
    """The whole `build` command. Returns the install tree."""
    if shutil.which("cmake") is None:
        raise BuildError("cmake not found: run `python3 -m build_tools setup`")
    if not variant.isidentifier():
        raise BuildError(f"bad variant {variant!r}: use a plain name such as cpu or gpu")
    if sanitize and sanitize not in paths.SANITIZERS:
        raise BuildError(f"bad sanitizer {sanitize!r}: supported: {', '.join(paths.SANITIZERS)}")
    if sanitize:
        build_dir = build_dir or paths.sanitized_build_dir(sanitize)
        install = install or paths.sanitized_install_dir(sanitize)
    build_dir = build_dir or paths.BUILD_DIR
    install = install or paths.install_dir()
    _say(f"RedisAI {pins.VERSION} ({pins.VERSION_NUM}), variant {variant}"
         + (f", sanitizer {sanitize}" if sanitize else ""))
    redismodule_dir = headers.redismodule_include_dir()
    _say(f"redismodule.h from {redismodule_dir}")
    chosen = _select_backends()

    generator = _cached_generator(build_dir)
    if generator is not None and generator != _GENERATOR:
        _say(f"{build_dir} was configured for {generator!r}: starting it afresh")
        shutil.rmtree(build_dir)
    sha = git_sha()
    _say(f"cmake configure in {build_dir} (git {sha})")
    run_quiet(configure_args(build_dir, redismodule_dir, chosen, variant, sha, sanitize),
              "cmake configure")
    _say(f"cmake build -j{jobs}")
    try:
        run_tee(["cmake", "--build", str(build_dir), "--parallel", str(jobs)], "compiling")
    except BuildError:
        _say("compile failed: the end of the compiler's output is repeated below")
        raise

    core = build_dir / "redisai.so"
    if not core.is_file():
        raise BuildError(f"the build produced no {core}")
    built: list[BuiltBackend] = []
    for fw in chosen:
        lib = build_dir / f"redisai_{fw.spec.backend}.so"
        if not lib.is_file():
            raise BuildError(f"the build produced no {lib}")
        built.append(BuiltBackend(framework=fw, library=lib, variant=variant))

    _say(f"laying out {install}")
    lay_out(install, core, built, build_dir / "install-manifest.json")
    for b in built:
        _say(f"backend {b.name}: {install}/backends/redisai_{b.name}/redisai_{b.name}.so")
    _say("done")
    return install
