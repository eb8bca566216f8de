"""`.venv/bin/python -m build_tools build`: headers, frameworks, cmake, install tree.

1. redismodule.h (and the ONNX Runtime headers when that backend is built)
   from the header cache (headers.py);
2. every framework of frameworks.FRAMEWORKS found in THIS interpreter's
   environment whose backends/<name>/ folder has sources; a framework with a
   pinned wheel (TFLITE's LiteRT) from that wheel, downloaded into the cache;
3. cmake configure + build in build/ (Unix Makefiles), output shown as it comes;
4. install/redisai-<version>/ laid out by layout.py.

Side-by-side backends (variants.py): `build --with onnxruntime==1.21.0` also
builds the ONNX backend against that version's wheel, in build/variants/<folder>/,
into its own folder of the tree; every such folder the tree already holds is
rebuilt the same way (its manifest's `source` line names the wheel), so it follows
the backend's sources. `build --default onnxruntime==1.21.0` points the default
link at that folder; without it the link names this environment's version.
`build-variant onnxruntime==1.21.0` builds one such folder alone.

With sanitize="address" the same happens in build-asan/ and
install-asan/redisai-<version>/, with cmake's REDISAI_SANITIZE=address: the
module and the backends get AddressSanitizer, the frameworks stay as shipped.
"""
from __future__ import annotations

import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from . import headers, paths, pins, variants
from ._proc import run_quiet, run_tee
from .errors import BuildError
from .frameworks import FRAMEWORKS, Framework, backend_sources, discover
from .layout import BuiltBackend, backend_folder_name, lay_out, lay_out_folder

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
        if spec.pinned_wheel is not None:
            if not sources:
                _say(f"{spec.backend}: skipped (no sources in backends/{spec.backend}/)")
                continue
            fw = variants.pinned_framework(spec)
            _say(f"{spec.backend}: {spec.display_name} {fw.version} from the "
                 f"{spec.pinned_wheel} wheel ({fw.site_packages}), "
                 f"{len(sources)} source file(s)")
            chosen.append(fw)
            continue
        fw = discover(spec)
        if fw is None and sources:
            # Skipping would lay the tree out without this backend, removing the one a
            # server may be running from: refuse, and say which Python has the frameworks.
            raise BuildError(
                f"{spec.backend}: {spec.display_name} is not installed for {sys.executable} "
                f"(no {' or '.join(spec.distributions)}), and backends/{spec.backend}/ has "
                "sources: building without it would remove its backend from the install tree. "
                "Run the build with the project's environment: .venv/bin/python -m build_tools "
                "build (python3 -m build_tools setup makes .venv)")
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
            args += [f"-D{p}_INCLUDE_DIR=", f"-D{p}_LIB_DIR=", f"-D{p}_VERSION=",
                     f"-D{p}_EXTRA_LIBS="]
        else:
            incs = ";".join(str(d) for d in _include_dirs(fw))
            args += [f"-D{p}_INCLUDE_DIR={incs}", f"-D{p}_LIB_DIR={fw.lib_dir}",
                     f"-D{p}_VERSION={fw.version}", f"-D{p}_EXTRA_LIBS={_extra_libs(fw)}"]
    return args


def _extra_libs(fw: Framework) -> str:
    """A gpu variant's CUDA libraries, linked even though the backend names none of
    their symbols (they register CUDA with the framework when loaded); -rpath-link
    lets the linker find what they need in the unpacked wheels."""
    if not fw.link_extra:
        return ""
    flags = ["-Wl,--no-as-needed", *(f"-l:{p.name}" for p in fw.link_extra), "-Wl,--as-needed"]
    flags += [f"-Wl,-rpath-link,{d}" for d in fw.rpath_link]
    return ";".join(flags)


def _compile(build_dir: Path, redismodule_dir: Path, chosen: list[Framework], variant: str,
             sha: str, sanitize: str, jobs: int, target: str | None = None) -> None:
    """cmake configure and build (all targets, or only `target`) in build_dir."""
    generator = _cached_generator(build_dir)
    if generator is not None and generator != _GENERATOR:
        _say(f"{build_dir} was configured for {generator!r}: starting it afresh")
        shutil.rmtree(build_dir)
    _say(f"cmake configure in {build_dir} (git {sha})")
    run_quiet(configure_args(build_dir, redismodule_dir, chosen, variant, sha, sanitize),
              "cmake configure")
    what = f" --target {target}" if target else ""
    _say(f"cmake build{what} -j{jobs}")
    cmd = ["cmake", "--build", str(build_dir), "--parallel", str(jobs)]
    if target:
        cmd += ["--target", target]
    try:
        run_tee(cmd, "compiling")
    except BuildError:
        _say("compile failed: the end of the compiler's output is repeated below")
        raise


@dataclass(frozen=True)
class _Side:
    """A side-by-side backend compiled from a wheel, to be laid out."""

    backend: BuiltBackend
    wheel: str


def _compile_side(req: variants.Request, redismodule_dir: Path, sha: str,
                  jobs: int, build_root: Path) -> _Side:
    """Compiles one backend against req's wheel in build/variants/<folder>/."""
    fw, wheel = variants.framework_from_wheel(req)
    variant = req.variant
    folder = backend_folder_name(fw.spec.backend, fw.version, variant)
    _say(f"{folder}: {fw.spec.display_name} {fw.version} from {wheel}; {variants.headers_note(fw)}")
    build_dir = build_root / "variants" / folder
    target = f"redisai_{fw.spec.backend}"
    _compile(build_dir, redismodule_dir, [fw], variant, sha, "", jobs, target)
    lib = build_dir / f"{target}.so"
    if not lib.is_file():
        raise BuildError(f"the build produced no {lib}")
    return _Side(BuiltBackend(framework=fw, library=lib, variant=variant), wheel)


def _lay_out_side(install: Path, side: _Side, build_root: Path, make_default: bool) -> None:
    b = side.backend
    record = build_root / "variants" / b.folder / "install-manifest.json"
    lay_out_folder(install, b, record, side.wheel, make_default)
    _say(f"backend {b.name} {b.framework.version} side by side: {install}/{b.folder_path}/"
         f"redisai_{b.name}.so (LOADBACKEND {b.framework.spec.serve_keyword} "
         f"{b.folder[len('redisai_'):]})")


def _check_variant_name(variant: str) -> None:
    if not variant.isidentifier():
        raise BuildError(f"bad variant {variant!r}: use a plain name such as cpu or gpu")


def _check_whole_build_variant(variant: str) -> None:
    # .venv's frameworks are CPU builds: named gpu they would be a CPU backend under
    # a GPU name, which is what the gpu variant must never be.
    if variant == "gpu":
        raise BuildError("`build --variant gpu` would build .venv's CPU frameworks under a GPU "
                         "name: build the gpu variant with `build-variant torch==<version> "
                         "--variant gpu` (or onnxruntime-gpu==<version>), docs/gpu.md")


def build_variant(request: str, variant: str = "cpu", jobs: int = 2,
                  make_default: bool = False, install: Path | None = None,
                  build_root: Path | None = None) -> Path:
    """`build-variant`: one backend from another framework version's wheel, into its
    own folder of an existing install tree; nothing else in the tree changes (but
    the default link with make_default). Returns the folder."""
    if shutil.which("cmake") is None:
        raise BuildError("cmake not found: run `python3 -m build_tools setup`")
    _check_variant_name(variant)
    req = variants.parse_request(request, variant)
    install = (install or paths.install_dir()).resolve()
    build_root = build_root or paths.BUILD_DIR
    if not (install / "redisai.so").is_file():
        raise BuildError(f"{install} is not an install tree (no redisai.so): "
                         "run `.venv/bin/python -m build_tools build` first")
    own = discover(req.spec)
    if own is not None and own.version == req.version:
        raise BuildError(f"{req} is the version in this environment: `.venv/bin/python -m "
                         f"build_tools build` builds it (folder redisai_{req.spec.backend}-{own.version}-"
                         f"{variant})")
    _say(f"{req}, variant {variant}, into {install}")
    side = _compile_side(req, headers.redismodule_include_dir(), git_sha(), jobs,
                         build_root)
    _lay_out_side(install, side, build_root, make_default)
    _say("done")
    return install / side.backend.folder_path


def build(variant: str = "cpu", jobs: int = 2, build_dir: Path | None = None,
          install: Path | None = None, sanitize: str = "",
          with_versions: Sequence[str] = (), defaults: Sequence[str] = ()) -> Path:
    """The whole `build` command. Returns the install tree.

    with_versions: `<framework>==<version>` backends to build side by side from
    their wheels (variants.py), besides those already in the tree, which are
    rebuilt too. defaults: `<framework>==<version>` whose folder the backend's
    default link points to (else: the version in this environment)."""
    _check_variant_name(variant)
    _check_whole_build_variant(variant)
    if shutil.which("cmake") is None:
        raise BuildError("cmake not found: run `python3 -m build_tools setup`")
    if sanitize and sanitize not in paths.SANITIZERS:
        raise BuildError(f"bad sanitizer {sanitize!r}: supported: {', '.join(paths.SANITIZERS)}")
    if sanitize and (with_versions or defaults):
        raise BuildError("--with and --default are not supported with --sanitize")
    requests = [variants.parse_request(t, variant) for t in with_versions]
    wanted_defaults = [variants.parse_request(t, variant) for t in defaults]
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

    # Side-by-side folders: those the tree holds (rebuilt, so that they follow the
    # backend's sources) and those asked for now. Checked before anything compiles.
    main_folders = {backend_folder_name(fw.spec.backend, fw.version, variant) for fw in chosen}
    wanted: dict[str, variants.Request] = {}
    for sf in variants.side_folders(install):
        if sf.folder in main_folders:
            _say(f"{sf.folder}: now this environment's version: built as such")
            continue
        wanted[sf.folder] = sf.request
    for req in requests:
        folder = backend_folder_name(req.spec.backend, req.version, variant)
        if folder in main_folders:
            raise BuildError(f"--with {req}: that is the version in this environment, "
                             "built anyway")
        wanted[folder] = req
    links: dict[str, str] = {}
    for req in wanted_defaults:
        folder = backend_folder_name(req.spec.backend, req.version, variant)
        if folder not in main_folders and folder not in wanted:
            raise BuildError(f"--default {req}: no folder {folder} is built (add --with {req})")
        links[req.spec.backend] = folder

    sha = git_sha()
    _compile(build_dir, redismodule_dir, chosen, variant, sha, sanitize, jobs)

    core = build_dir / "redisai.so"
    if not core.is_file():
        raise BuildError(f"the build produced no {core}")
    built: list[BuiltBackend] = []
    for fw in chosen:
        lib = build_dir / f"redisai_{fw.spec.backend}.so"
        b = BuiltBackend(framework=fw, library=lib, variant=variant)
        for made in (lib, *b.programs):
            if not made.is_file():
                raise BuildError(f"the build produced no {made}")
        built.append(b)
    sides = [_compile_side(req, redismodule_dir, sha, jobs, build_dir) for req in wanted.values()]

    _say(f"laying out {install}")
    lay_out(install, core, built, build_dir / "install-manifest.json",
            keep_folders=[s.backend.folder for s in sides], defaults=links)
    for side in sides:
        _lay_out_side(install, side, build_dir, make_default=False)
    for b in built:
        _say(f"backend {b.name}: {install}/backends/redisai_{b.name}/redisai_{b.name}.so"
             f" -> {links.get(b.name, b.folder)}")
    _say("done")
    return install
