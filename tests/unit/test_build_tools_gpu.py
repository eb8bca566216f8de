"""The `gpu` variant's build logic (build_tools/gpu_libs.py, variants.py, build.py,
check.py) without the several GB of CUDA wheels: requests, which members of which wheel
are unpacked, the library closure, the link flags, and what `check` lets a gpu folder
take from the system. The real build is opt-in (docs/gpu.md); pip must not run here."""
from __future__ import annotations

import platform
import sys
import zipfile
from pathlib import Path

import pytest

from build_tools import build, check, gpu_libs, manifest, variants
from build_tools.errors import BuildError
from build_tools.frameworks import Framework, spec_for

TAG = f"cp{sys.version_info.major}{sys.version_info.minor}"


def make_wheel(path: Path, members: list[str]) -> Path:
    with zipfile.ZipFile(path, "w") as z:
        for name in members:
            info = zipfile.ZipInfo(name)
            info.external_attr = 0o755 << 16
            z.writestr(info, b"\x7fELF" if ".so" in name else b"")
    return path


def touch(site: Path, *rels: str) -> list[Path]:
    out = []
    for rel in rels:
        p = site / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(b"\x7fELF")
        out.append(p)
    return out


# --- requests ------------------------------------------------------------------------------

def test_a_gpu_request_is_built_from_the_cuda_build() -> None:
    torch = variants.parse_request("torch==2.14.1", "gpu")
    assert (torch.spec.backend, torch.distribution, torch.variant) == ("torch", "torch", "gpu")
    # whatever ONNX Runtime name is typed, its gpu variant comes from onnxruntime-gpu
    for name in ("onnxruntime", "onnxruntime-gpu"):
        ort = variants.parse_request(f"{name}==1.31.1", "gpu")
        assert (ort.distribution, ort.variant) == ("onnxruntime-gpu", "gpu")


def test_a_framework_without_a_gpu_variant_is_refused() -> None:
    with pytest.raises(BuildError, match="TensorFlow has no gpu variant here.*: torch, "
                                         "onnxruntime$"):
        variants.parse_request("tensorflow==2.21.0", "gpu")


def test_torch_from_another_wheel_stays_refused_as_cpu() -> None:
    with pytest.raises(BuildError, match="cannot be built side by side"):
        variants.parse_request("torch==2.14.1")


def test_a_whole_build_named_gpu_is_refused() -> None:
    # .venv's frameworks are CPU builds: named gpu they would be a CPU backend under a GPU name
    with pytest.raises(BuildError, match="CPU frameworks under a GPU name.*build-variant"):
        build.build(variant="gpu")


# --- wheels --------------------------------------------------------------------------------

def test_the_cached_download_gives_the_framework_wheel_first(cache: Path) -> None:
    req = variants.parse_request("torch==2.14.1", "gpu")
    folder = cache / "wheels" / "torch-2.14.1-gpu"
    folder.mkdir(parents=True)
    main = f"torch-2.14.1-{TAG}-{TAG}-manylinux_2_28_{platform.machine()}.whl"
    for name in (main, "nvidia_cudnn_cu13-9.24.0.43-py3-none-manylinux_2_27_x86_64.whl",
                 "nvidia_cublas-13.1.1.3-py3-none-manylinux_2_27_x86_64.whl",
                 "sympy-1.14.0-py3-none-any.whl"):
        (folder / name).write_bytes(b"")
    (folder / ".complete").write_text("torch==2.14.1\n")
    got = [w.name for w in variants.fetch_gpu_wheels(req)]
    assert got == [main, "nvidia_cublas-13.1.1.3-py3-none-manylinux_2_27_x86_64.whl",
                   "nvidia_cudnn_cu13-9.24.0.43-py3-none-manylinux_2_27_x86_64.whl"]


def test_a_download_without_cuda_wheels_is_not_a_cuda_build(cache: Path) -> None:
    req = variants.parse_request("torch==2.14.1", "gpu")
    folder = cache / "wheels" / "torch-2.14.1-gpu"
    folder.mkdir(parents=True)
    (folder / f"torch-2.14.1-{TAG}-{TAG}-manylinux_2_28_{platform.machine()}.whl").write_bytes(b"")
    (folder / ".complete").write_text("")
    with pytest.raises(BuildError, match="required no nvidia_\\* wheel.*not a CUDA build"):
        variants.fetch_gpu_wheels(req)


def test_unpack_keeps_the_libraries_headers_and_metadata_only(cache: Path,
                                                               tmp_path: Path) -> None:
    req = variants.parse_request("torch==2.14.1", "gpu")
    main = make_wheel(tmp_path / f"torch-2.14.1-{TAG}-{TAG}-linux_x86_64.whl", [
        "torch-2.14.1.dist-info/METADATA", "torch/__init__.py",
        "torch/include/torch/script.h", "torch/include/torch/csrc/api/include/torch/all.h",
        "torch/lib/libtorch_cpu.so", "torch/lib/libtorch_cuda.so", "torch/lib/libshm.so",
        "torch/lib/libtorch_cuda_linalg.so", "torch/bin/torch_shm_manager"])
    cuda = make_wheel(tmp_path / "nvidia_cudnn_cu13-9.24.0.43-py3-none-any.whl", [
        "nvidia_cudnn_cu13-9.24.0.43.dist-info/METADATA", "nvidia/__init__.py",
        "nvidia/cudnn/include/cudnn.h", "nvidia/cudnn/lib/libcudnn.so.9",
        "nvidia/cudnn/lib/libcudnn_ops.so.9"])
    site = variants.unpack_gpu_wheels([main, cuda], req)
    assert site == cache / "frameworks" / f"{main.stem}-gpu"
    got = sorted(str(p.relative_to(site)) for p in site.rglob("*") if p.is_file())
    assert got == [".complete", "nvidia/cudnn/lib/libcudnn.so.9",
                   "nvidia/cudnn/lib/libcudnn_ops.so.9", "torch-2.14.1.dist-info/METADATA",
                   "torch/include/torch/csrc/api/include/torch/all.h",
                   "torch/include/torch/script.h", "torch/lib/libshm.so",
                   "torch/lib/libtorch_cpu.so", "torch/lib/libtorch_cuda.so",
                   "torch/lib/libtorch_cuda_linalg.so"]


# --- the closure ---------------------------------------------------------------------------

NEEDED = {
    "libtorch_cpu.so": ["libc10.so", "libgomp.so.1", "libc.so.6", "libstdc++.so.6"],
    "libc10.so": ["libc.so.6"],
    "libgomp.so.1": ["libdl.so.2"],
    "libtorch_cuda.so": ["libc10_cuda.so", "libcudart.so.13", "libcublas.so.13"],
    "libc10_cuda.so": ["libcudart.so.13"],
    "libcudart.so.13": ["libutil.so.1"],
    "libcublas.so.13": ["libcublasLt.so.13"],
    "libcublasLt.so.13": [],
    "libcaffe2_nvrtc.so": ["libcuda.so.1", "libnvrtc.so.13"],   # the driver: never carried
    "libnvrtc.so.13": [],
    "libcudnn_ops.so.9": ["libcudnn_graph.so.9", "libz.so.1"],   # zlib: the system's
    "libcudnn_graph.so.9": [],
    "libnccl.so.2": [],                                          # in a wheel, needed by none
}


def needed_of(path: Path) -> list[str]:
    return NEEDED[path.name]


def cuda_site(tmp_path: Path) -> Path:
    site = tmp_path / "site"
    touch(site, "torch-2.14.1.dist-info/METADATA")
    for name in NEEDED:
        where = "torch/lib" if name.startswith(("libtorch", "libc10", "libgomp", "libcaffe2")) \
            else "nvidia/cu13/lib" if not name.startswith("libcudnn") else "nvidia/cudnn/lib"
        touch(site, f"{where}/{name}")
    return site


def test_the_closure_follows_needed_from_the_roots_and_nothing_else(tmp_path: Path) -> None:
    site = cuda_site(tmp_path)
    roots = [site / "torch/lib/libtorch_cpu.so", site / "torch/lib/libtorch_cuda.so"]
    got = [p.name for p in gpu_libs.closure(site, roots, needed_of, check.is_system_runtime)]
    assert got == ["libtorch_cpu.so", "libtorch_cuda.so", "libc10.so", "libgomp.so.1",
                   "libc10_cuda.so", "libcudart.so.13", "libcublas.so.13", "libcublasLt.so.13"]
    opened = gpu_libs.matching(site, ["torch/lib/libcaffe2_nvrtc.so", "nvidia/cudnn/lib/libcudnn_*.so.*"])
    assert sorted(p.name for p in opened) == ["libcaffe2_nvrtc.so", "libcudnn_graph.so.9",
                                              "libcudnn_ops.so.9"]
    got = [p.name for p in gpu_libs.closure(site, opened, needed_of, check.is_system_runtime)]
    assert "libnvrtc.so.13" in got and "libnccl.so.2" not in got


def test_a_library_in_no_wheel_names_itself_and_who_needs_it(tmp_path: Path) -> None:
    site = cuda_site(tmp_path)
    (site / "nvidia/cu13/lib/libcublasLt.so.13").unlink()
    with pytest.raises(BuildError, match=r"libcublasLt\.so\.13 \(NEEDED by libcublas\.so\.13\) "
                                         "is in none of its wheels"):
        gpu_libs.closure(site, [site / "torch/lib/libtorch_cuda.so"], needed_of,
                         check.is_system_runtime)


def test_the_gpu_framework_links_cuda_and_carries_the_closure(tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch
                                                              ) -> None:
    site = cuda_site(tmp_path)
    monkeypatch.setattr(check, "read_elf",
                        lambda p, with_exports: check.ElfInfo(needed=NEEDED[p.name]))
    spec = spec_for("torch")
    fw = Framework(spec=spec, distribution="torch", version="2.14.1", site_packages=site,
                   include_dirs=(), libraries=tuple(site / r for r in spec.libraries))
    gpu = variants.gpu_framework(fw, site)
    assert gpu.libraries[:3] == fw.libraries and gpu.lib_dir == site / "torch/lib"
    names = {p.name for p in gpu.libraries}
    assert {"libtorch_cuda.so", "libcublasLt.so.13", "libcaffe2_nvrtc.so", "libnvrtc.so.13",
            "libcudnn_ops.so.9", "libcudnn_graph.so.9"} <= names
    assert "libnccl.so.2" not in names and "libcuda.so.1" not in names
    assert [p.name for p in gpu.link_extra] == ["libtorch_cuda.so", "libc10_cuda.so"]
    assert gpu.spec.patch_rpath and not spec.patch_rpath
    flags = build._extra_libs(gpu).split(";")
    assert flags[:4] == ["-Wl,--no-as-needed", "-l:libtorch_cuda.so", "-l:libc10_cuda.so",
                         "-Wl,--as-needed"]
    assert f"-Wl,-rpath-link,{site / 'nvidia/cu13/lib'}" in flags
    assert build._extra_libs(fw) == ""


def test_a_cpu_wheel_is_not_a_cuda_build(tmp_path: Path) -> None:
    site = cuda_site(tmp_path)
    (site / "torch/lib/libtorch_cuda.so").unlink()
    spec = spec_for("torch")
    fw = Framework(spec=spec, distribution="torch", version="2.14.1", site_packages=site,
                   include_dirs=(), libraries=tuple(site / r for r in spec.libraries))
    with pytest.raises(BuildError, match="has no torch/lib/libtorch_cuda.so: not a CUDA build"):
        variants.gpu_framework(fw, site)


# --- check ---------------------------------------------------------------------------------

@pytest.mark.parametrize("variant, allowed", [("gpu", True), ("cpu", False)])
def test_check_lets_only_a_gpu_folder_take_the_driver_and_zlib(tmp_path: Path, variant: str,
                                                                allowed: bool) -> None:
    folder = tmp_path / "backends" / f"redisai_torch-2.14.1-{variant}"
    (folder / "lib").mkdir(parents=True)
    checker = check._Checker(tmp_path)
    row = check.Row("lib/libtorch_cuda.so", "$ORIGIN")
    info = check.ElfInfo(needed=["libcuda.so.1", "libz.so.1"], runpath=["$ORIGIN"])
    checker._resolve_needed(row, folder / "lib" / "libtorch_cuda.so", info, folder, set(), [])
    if allowed:
        assert row.problems == []
    else:
        assert any("NEEDED libcuda.so.1" in p for p in row.problems), row.problems
        assert any("NEEDED libz.so.1" in p for p in row.problems), row.problems


# --- a tree's gpu folders ------------------------------------------------------------------

def test_a_torch_gpu_folder_of_a_tree_is_rebuilt_as_gpu(tmp_path: Path) -> None:
    # `build` rebuilds every side-by-side folder of its tree: a Torch gpu folder must come
    # back as a gpu request, although Torch is never built side by side as cpu
    folder = tmp_path / "backends" / "redisai_torch-2.14.1-gpu"
    folder.mkdir(parents=True)
    manifest.write(folder, {"kind": "TORCH", "framework": "torch", "version": "2.14.1",
                            "variant": "gpu",
                            "source": f"torch-2.14.1-{TAG}-{TAG}-manylinux_2_28_x86_64.whl"}, {})
    [found] = variants.side_folders(tmp_path)
    assert (found.folder, found.variant) == ("redisai_torch-2.14.1-gpu", "gpu")
    assert (found.request.distribution, found.request.variant) == ("torch", "gpu")
