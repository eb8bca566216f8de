"""Finding the ML frameworks in an environment, without importing them.

Each framework is a row of FRAMEWORKS. Discovery uses importlib.metadata: the
version from the distribution's metadata, the paths from its RECORD (the
distribution's own file list), so nothing is imported and no framework code
runs. A backend is built when its framework is found AND its source folder
backends/<name>/ holds sources: adding a backend is adding a row here and a
call of add_redisai_backend() in CMakeLists.txt.

A row with a `pinned_wheel` (TFLITE's LiteRT) is not looked for in the
environment: the build downloads that pinned wheel into the cache and reads its
unpacked copy the same way (variants.pinned_framework).
"""
from __future__ import annotations

import importlib.metadata as md
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Sequence

from . import paths, pins
from .errors import BuildError


@dataclass(frozen=True)
class GpuSpec:
    """How a backend's `gpu` variant is built from a CUDA build's wheels (variants.py)."""

    distribution: str                 # the CUDA build's PyPI name
    # What pip downloads, with its dependencies: the CUDA libraries' wheels.
    requirement: str                  # "{distribution}", "{version}" replaced
    # Site-relative: linked --no-as-needed, since nothing in the backend names their
    # symbols and the framework registers CUDA from their constructors.
    link: tuple[str, ...] = ()
    # Site-relative globs: libraries the framework opens with dlopen.
    opened: tuple[str, ...] = ()


@dataclass(frozen=True)
class FrameworkSpec:
    """How one backend's framework is found, built against and laid out."""

    backend: str                      # backends/<backend>/, target redisai_<backend>
    display_name: str                 # for messages
    distributions: tuple[str, ...]    # PyPI names that provide it; the first found wins
    cmake_prefix: str                 # <prefix>_INCLUDE_DIR, _LIB_DIR, _VERSION in CMake
    serve_keyword: str                # redis-server --loadmodule redisai.so <keyword> <path>
    source_globs: tuple[str, ...]     # sources in backends/<backend>/
    # Relative to site-packages; "{version}" is replaced by the framework version.
    include_dirs: tuple[str, ...] = ()
    libraries: tuple[str, ...] = ()   # copied into the backend's lib/ (first: link dir)
    # (name in lib/, file it points to): for NEEDED names the wheel lacks.
    lib_aliases: tuple[tuple[str, str], ...] = ()
    patch_rpath: bool = False         # patchelf --set-rpath '$ORIGIN' on the copies
    # Include dirs from a header fetcher of headers.py instead of the wheel.
    fetched_headers: str | None = None
    # `build-variant` may build it from another version's wheel (variants.py):
    # only where that was built and tested side by side.
    side_by_side: bool = False
    gpu: GpuSpec | None = None        # how its `gpu` variant is built, if it has one
    # "<distribution>==<version>" (pins.py): the framework comes from this wheel,
    # downloaded by the build, never from the environment.
    pinned_wheel: str | None = None
    # Executables built beside the backend (CMake targets of that name), installed
    # into its folder with RUNPATH $ORIGIN/lib as the backend has.
    programs: tuple[str, ...] = ()


FRAMEWORKS: tuple[FrameworkSpec, ...] = (
    FrameworkSpec(
        backend="tensorflow", display_name="TensorFlow",
        distributions=("tensorflow-cpu", "tensorflow"),
        cmake_prefix="TF", serve_keyword="TF", source_globs=("*.c",),
        include_dirs=("tensorflow/include",),
        libraries=("tensorflow/libtensorflow_cc.so.2", "tensorflow/libtensorflow_framework.so.2"),
        patch_rpath=True,  # their RUNPATH carries dead Bazel paths
    ),
    FrameworkSpec(
        backend="torch", display_name="PyTorch",
        distributions=("torch",),
        cmake_prefix="TORCH", serve_keyword="TORCH", source_globs=("*.c", "*.cc", "*.cpp"),
        include_dirs=("torch/include", "torch/include/torch/csrc/api/include"),
        libraries=("torch/lib/libtorch_cpu.so", "torch/lib/libc10.so", "torch/lib/libgomp.so.1"),
        gpu=GpuSpec(
            distribution="torch", requirement="torch=={version}",
            link=("torch/lib/libtorch_cuda.so", "torch/lib/libc10_cuda.so"),
            opened=("torch/lib/libcaffe2_nvrtc.so", "torch/lib/libtorch_cuda_linalg.so",
                    "nvidia/cudnn/lib/libcudnn_*.so.*", "nvidia/*/lib/libnvrtc-builtins.so*")),
    ),
    FrameworkSpec(
        backend="onnxruntime", display_name="ONNX Runtime",
        distributions=("onnxruntime", "onnxruntime-gpu"),
        cmake_prefix="ORT", serve_keyword="ONNX", source_globs=("*.c", "*.cc", "*.cpp"),
        libraries=("onnxruntime/capi/libonnxruntime.so.{version}",),
        lib_aliases=(("libonnxruntime.so.1", "libonnxruntime.so.{version}"),),
        fetched_headers="onnxruntime",
        side_by_side=True,
        gpu=GpuSpec(
            distribution="onnxruntime-gpu", requirement="onnxruntime-gpu[cuda,cudnn]=={version}",
            # The CUDA provider NEEDs only cuBLAS, cuRAND and the runtime, and opens cuDNN,
            # cuFFT and NVRTC by name when a model uses them: all the [cuda,cudnn] wheels.
            opened=("onnxruntime/capi/libonnxruntime_providers_shared.so",
                    "onnxruntime/capi/libonnxruntime_providers_cuda.so", "nvidia/*/lib/*.so*")),
    ),
    FrameworkSpec(
        backend="tflite", display_name="TensorFlow Lite (LiteRT)",
        distributions=("ai-edge-litert",),
        cmake_prefix="LITERT", serve_keyword="TFLITE", source_globs=("*.c", "*.cpp"),
        # dlopened by the backend from its lib/ (no header, nothing linked): the only
        # file of the wheel the build takes.
        libraries=("ai_edge_litert/libLiteRt.so",),
        pinned_wheel=pins.LITERT_PIN,
        # The backend's validator program (backends/tflite/tfl_check_main.c).
        programs=("redisai_tflite_check",),
    ),
)


def spec_for(backend: str) -> FrameworkSpec:
    for spec in FRAMEWORKS:
        if spec.backend == backend:
            return spec
    raise KeyError(backend)


@dataclass(frozen=True)
class Framework:
    """A framework found in an environment."""

    spec: FrameworkSpec
    distribution: str
    version: str                      # public version: "2.13.0" for "2.13.0+cpu"
    site_packages: Path
    include_dirs: tuple[Path, ...]    # from the wheel; fetched ones are added by build
    libraries: tuple[Path, ...]
    lib_aliases: tuple[tuple[str, str], ...] = field(default=())
    # A `gpu` variant's libraries linked --no-as-needed (GpuSpec.link), and the
    # folders of everything they need, for the linker's -rpath-link.
    link_extra: tuple[Path, ...] = field(default=())
    rpath_link: tuple[Path, ...] = field(default=())

    @property
    def lib_dir(self) -> Path:
        return self.libraries[0].parent


def public_version(version: str) -> str:
    """The version without its local label (PEP 440 '+...')."""
    return version.split("+", 1)[0]


def _find_distribution(names: Iterable[str],
                       search_path: Sequence[str] | None) -> md.Distribution | None:
    for name in names:
        kwargs = {"name": name} if search_path is None else {"name": name, "path": list(search_path)}
        for dist in md.distributions(**kwargs):
            return dist
    return None


def discover(spec: FrameworkSpec, search_path: Sequence[str] | None = None) -> Framework | None:
    """The framework of `spec` in search_path (default: this interpreter's sys.path).

    None when no distribution of it is installed. Raises BuildError when one
    is installed but lacks a file the build needs (a broken or unexpected wheel).
    """
    dist = _find_distribution(spec.distributions, search_path)
    if dist is None:
        return None
    name = dist.metadata["Name"]
    version = public_version(dist.version)
    site = Path(str(dist.locate_file(""))).resolve()
    recorded = {str(f).replace("\\", "/") for f in (dist.files or ())}

    def need(rel: str, is_dir: bool) -> Path:
        rel = rel.format(version=version)
        listed = any(f.startswith(rel + "/") for f in recorded) if is_dir else rel in recorded
        path = site / rel
        ok = path.is_dir() if is_dir else path.is_file()
        if not (listed and ok):
            why = "not in its RECORD" if not listed else "missing on disk"
            raise BuildError(f"{spec.display_name}: {name} {dist.version} in {site} has no "
                             f"{rel} ({why})")
        return path

    includes = tuple(need(rel, True) for rel in spec.include_dirs)
    libs = tuple(need(rel, False) for rel in spec.libraries)
    aliases = tuple((a.format(version=version), t.format(version=version))
                    for a, t in spec.lib_aliases)
    return Framework(spec=spec, distribution=name, version=version, site_packages=site,
                     include_dirs=includes, libraries=libs, lib_aliases=aliases)


def backend_sources(spec: FrameworkSpec, root: Path = paths.ROOT) -> list[Path]:
    """The sources in backends/<backend>/ (empty when the folder is absent)."""
    folder = root / "backends" / spec.backend
    if not folder.is_dir():
        return []
    return sorted(p for pattern in spec.source_globs for p in folder.glob(pattern) if p.is_file())
