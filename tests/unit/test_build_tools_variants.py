"""build_tools/variants.py: side-by-side backend requests, the cached wheel, what is unpacked
from it, and the side-by-side folders found in a tree. Temporary folders only: the cache is
pointed at tmp_path, and pip (the one step that would use the network) must not run."""
from __future__ import annotations

import platform
import sys
import zipfile
from pathlib import Path

import pytest

from build_tools import manifest, pins, variants
from build_tools.errors import BuildError
from build_tools.frameworks import spec_for

API = pins.ORT_API_VERSION
NEW_ENOUGH = f"1.{API}.0"


def wheel_name(dist: str, version: str) -> str:
    """A wheel file name of this interpreter and machine, as pip would download it."""
    tag = f"cp{sys.version_info.major}{sys.version_info.minor}"
    return f"{dist}-{version}-{tag}-{tag}-manylinux_2_27_{platform.machine()}.whl"


# --- requests ----------------------------------------------------------------------------

@pytest.mark.parametrize("text, dist", [
    (f"onnxruntime=={NEW_ENOUGH}", "onnxruntime"),
    (f" ONNXRuntime_GPU == {NEW_ENOUGH} ", "onnxruntime-gpu"),   # PyPI spelling normalised
])
def test_request_names_the_distribution_and_version(text: str, dist: str) -> None:
    req = variants.parse_request(text)
    assert (req.spec.backend, req.distribution, req.version) == ("onnxruntime", dist, NEW_ENOUGH)
    assert str(req) == f"{dist}=={NEW_ENOUGH}"


def test_request_by_backend_name_takes_its_first_distribution() -> None:
    req = variants.parse_request(f"onnxruntime=={NEW_ENOUGH}")
    assert req.distribution == spec_for("onnxruntime").distributions[0]


@pytest.mark.parametrize("text", ["onnxruntime", "onnxruntime>=1.21.0", "==1.21.0",
                                  "onnxruntime==1", "onnxruntime==1.21.0+cpu",
                                  "onnxruntime==1.21.0.1.2", "onnxruntime==latest"])
def test_request_must_be_an_exact_release(text: str) -> None:
    with pytest.raises(BuildError, match="bad framework version"):
        variants.parse_request(text)


def test_request_of_an_unknown_framework_lists_the_known_ones() -> None:
    with pytest.raises(BuildError, match=r"unknown framework 'jax'.*: one of .*onnxruntime"):
        variants.parse_request("jax==0.4.30")


@pytest.mark.parametrize("text", ["torch==2.3.0", "tensorflow==2.16.1"])
def test_request_of_a_backend_not_built_side_by_side_is_refused(text: str) -> None:
    with pytest.raises(BuildError, match="cannot be built side by side.*backends that can: "
                                         "onnxruntime; as variant gpu: torch, onnxruntime$"):
        variants.parse_request(text)


def test_onnx_runtime_older_than_the_c_api_the_backend_asks_for_is_refused() -> None:
    with pytest.raises(BuildError, match=f"serves C API versions up to {API - 1}.*"
                                         f"choose 1.{API}.0 or newer"):
        variants.parse_request(f"onnxruntime==1.{API - 1}.9")
    for version in (f"1.{API}.0", f"1.{API + 3}.1", "2.0.0"):
        assert variants.parse_request(f"onnxruntime=={version}").version == version


# --- the wheel -----------------------------------------------------------------------------

def test_a_cached_wheel_of_this_python_is_used_without_pip(cache: Path) -> None:
    wheels = cache / "wheels"
    wheels.mkdir(parents=True)
    req = variants.parse_request(f"onnxruntime-gpu=={NEW_ENOUGH}")
    other_python = f"onnxruntime_gpu-{NEW_ENOUGH}-cp27-cp27mu-manylinux1_{platform.machine()}.whl"
    other_machine = f"onnxruntime_gpu-{NEW_ENOUGH}-cp311-cp311-manylinux_2_27_sparc64.whl"
    other_version = wheel_name("onnxruntime_gpu", "1.99.0")
    cpu_package = wheel_name("onnxruntime", NEW_ENOUGH)
    good = wheel_name("onnxruntime_gpu", NEW_ENOUGH)
    for name in (other_python, other_machine, other_version, cpu_package, good):
        (wheels / name).write_bytes(b"")
    assert variants.fetch_wheel(req) == wheels / good


def make_wheel(path: Path, members: dict[str, tuple[bytes, int]]) -> Path:
    with zipfile.ZipFile(path, "w") as z:
        for name, (data, mode) in members.items():
            info = zipfile.ZipInfo(name)
            info.external_attr = mode << 16
            z.writestr(info, data)
    return path


def test_unpack_keeps_dist_info_libraries_and_modes_only(cache: Path, tmp_path: Path) -> None:
    req = variants.parse_request(f"onnxruntime=={NEW_ENOUGH}")
    lib = f"onnxruntime/capi/libonnxruntime.so.{NEW_ENOUGH}"
    wheel = make_wheel(tmp_path / wheel_name("onnxruntime", NEW_ENOUGH), {
        f"onnxruntime-{NEW_ENOUGH}.dist-info/METADATA": (b"Name: onnxruntime\n", 0o644),
        lib: (b"\x7fELF", 0o755),
        "onnxruntime/capi/libonnxruntime_providers_shared.so": (b"\x7fELF", 0o755),
        "onnxruntime/__init__.py": (b"", 0o644),
    })
    site = variants.unpack_wheel(wheel, req)
    assert site == cache / "frameworks" / wheel.stem
    got = sorted(str(p.relative_to(site)) for p in site.rglob("*") if p.is_file())
    assert got == [".complete", f"onnxruntime-{NEW_ENOUGH}.dist-info/METADATA", lib]
    assert (site / lib).stat().st_mode & 0o777 == 0o755
    # Unpacked once: a second call takes the folder as it is.
    (site / lib).write_bytes(b"changed")
    assert variants.unpack_wheel(wheel, req) == site
    assert (site / lib).read_bytes() == b"changed"


def test_unpack_refuses_a_member_that_leaves_the_folder(cache: Path, tmp_path: Path) -> None:
    req = variants.parse_request(f"onnxruntime=={NEW_ENOUGH}")
    evil = f"onnxruntime-{NEW_ENOUGH}.dist-info/../../escaped"
    wheel = make_wheel(tmp_path / wheel_name("onnxruntime", NEW_ENOUGH),
                       {evil: (b"x", 0o644)})
    with pytest.raises(BuildError, match="leaves the folder"):
        variants.unpack_wheel(wheel, req)
    assert not (cache / "frameworks" / wheel.stem).exists()
    assert not list((cache / "frameworks").iterdir())   # the half-made folder is gone
    assert not (cache / "escaped").exists()


# --- a framework from a pinned wheel (TFLITE's LiteRT) ---------------------------------------

def test_a_pinned_wheel_framework_comes_from_the_cached_wheel_with_its_library_only(
        cache: Path) -> None:
    """ai-edge-litert is never installed: its cached wheel (pip must not run) is unpacked,
    and of its shared objects only libLiteRt.so is taken; the rest of the wheel (Python
    bindings, other accelerators' plugins) stays out of the unpacked folder."""
    spec = spec_for("tflite")
    assert spec.pinned_wheel == pins.LITERT_PIN
    dist, version = pins.LITERT_PIN.split("==")
    lib = "ai_edge_litert/libLiteRt.so"
    info = f"ai_edge_litert-{version}.dist-info"
    others = ["ai_edge_litert/libpywrap_litert_common.so", "ai_edge_litert/__init__.py",
              "ai_edge_litert/vendors/qualcomm/compiler/libLiteRtCompilerPlugin_Qualcomm.so"]
    record = "".join(f"{n},,\n" for n in [lib, *others, f"{info}/METADATA", f"{info}/RECORD"])
    (cache / "wheels").mkdir(parents=True)
    make_wheel(cache / "wheels" / wheel_name("ai_edge_litert", version), {
        f"{info}/METADATA": (f"Name: {dist}\nVersion: {version}\n".encode(), 0o644),
        f"{info}/RECORD": (record.encode(), 0o644),
        lib: (b"\x7fELF", 0o644),
        **{n: (b"\x7fELF", 0o644) for n in others},
    })
    fw = variants.pinned_framework(spec)
    assert (fw.distribution, fw.version) == (dist, version)
    assert fw.libraries == (fw.site_packages / lib,)
    assert fw.site_packages.parent == cache / "frameworks"
    got = sorted(str(p.relative_to(fw.site_packages)) for p in fw.site_packages.rglob("*")
                 if p.is_file())
    assert got == [".complete", f"{info}/METADATA", f"{info}/RECORD", lib]


def test_a_backend_from_a_pinned_wheel_is_not_built_side_by_side() -> None:
    with pytest.raises(BuildError, match="TensorFlow Lite .* cannot be built side by side"):
        variants.parse_request("ai-edge-litert==2.2.0")


# --- side-by-side folders in a tree ----------------------------------------------------------

def backend_folder(backends: Path, name: str, **header: str) -> Path:
    folder = backends / name
    folder.mkdir(parents=True)
    manifest.write(folder, {"kind": "ONNX", **header}, {})
    return folder


def test_side_folders_are_those_with_a_source_line(tmp_path: Path) -> None:
    backends = tmp_path / "backends"
    old = f"onnxruntime-{NEW_ENOUGH}"
    backend_folder(backends, f"redisai_{old}-cpu", framework="onnxruntime",
                   version=NEW_ENOUGH, variant="cpu",
                   source=wheel_name("onnxruntime", NEW_ENOUGH))
    backend_folder(backends, f"redisai_{old}-gpu", framework="onnxruntime",
                   version=NEW_ENOUGH, variant="gpu",
                   source=wheel_name("onnxruntime_gpu", NEW_ENOUGH))
    backend_folder(backends, "redisai_onnxruntime-1.32.0-cpu", framework="onnxruntime",
                   version="1.32.0", variant="cpu")                       # built from .venv
    (backends / "redisai_broken").mkdir()
    (backends / "redisai_broken" / manifest.MANIFEST_NAME).write_text("format 9\n")
    (backends / "redisai_onnxruntime").symlink_to(f"redisai_{old}-cpu")  # the default link
    (backends / "README").write_text("not a folder")
    found = variants.side_folders(tmp_path)
    assert [(f.folder, f.request.distribution, f.request.version, f.variant) for f in found] == [
        (f"redisai_{old}-cpu", "onnxruntime", NEW_ENOUGH, "cpu"),
        (f"redisai_{old}-gpu", "onnxruntime-gpu", NEW_ENOUGH, "gpu")]
    assert found[1].wheel == wheel_name("onnxruntime_gpu", NEW_ENOUGH)


def test_side_folder_that_cannot_be_rebuilt_is_an_error(tmp_path: Path) -> None:
    backend_folder(tmp_path / "backends", "redisai_torch-2.3.0-cpu", framework="torch",
                   version="2.3.0", source=wheel_name("torch", "2.3.0"))
    with pytest.raises(BuildError, match=r"redisai_torch-2.3.0-cpu: its manifest names "
                                         r"torch==2.3.0 from .*which cannot be rebuilt"):
        variants.side_folders(tmp_path)


def test_no_backends_folder_means_no_side_folders(tmp_path: Path) -> None:
    assert variants.side_folders(tmp_path) == []
