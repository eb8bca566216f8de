"""build_tools/layout.py: an install tree laid out from build outputs, synchronised (unchanged
files kept, stale ones removed), side-by-side folders kept and laid out one at a time. The
"build outputs" and "framework libraries" are small files in a temporary folder."""
from __future__ import annotations

import dataclasses
import os
import shutil
from pathlib import Path

import pytest

from build_tools import layout, manifest
from build_tools.errors import BuildError
from build_tools.frameworks import Framework, FrameworkSpec

SPEC = FrameworkSpec(backend="fake", display_name="Fake", distributions=("fake",),
                     cmake_prefix="FAKE", serve_keyword="ONNX", source_globs=("*.c",),
                     libraries=("fake/libfake.so.{version}",),
                     lib_aliases=(("libfake.so.1", "libfake.so.{version}"),))


class Build:
    """Build outputs in tmp_path/build and a fake framework of one version per call."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.dir = root / "build"
        self.dir.mkdir()
        self.core = self.write("redisai.so", b"core")
        self.record = self.dir / "install_manifest.json"
        self.install = root / "install" / "redisai-1.0"

    def write(self, rel: str, data: bytes) -> Path:
        path = self.dir / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        return path

    def backend(self, version: str, aliases: bool = True) -> layout.BuiltBackend:
        lib = self.write(f"site/fake/libfake.so.{version}", f"lib {version}".encode())
        fw = Framework(spec=SPEC, distribution="fake", version=version,
                       site_packages=self.dir / "site", include_dirs=(), libraries=(lib,),
                       lib_aliases=(("libfake.so.1", lib.name),) if aliases else ())
        so = self.write(f"redisai_fake-{version}.so", f"backend {version}".encode())
        return layout.BuiltBackend(framework=fw, library=so, variant="cpu")

    def lay_out(self, backends: list[layout.BuiltBackend], **kw) -> None:
        layout.lay_out(self.install, self.core, backends, self.record, **kw)


@pytest.fixture
def build(tmp_path: Path) -> Build:
    return Build(tmp_path)


def test_the_tree_holds_core_backend_folder_libs_links_and_manifest(build: Build) -> None:
    b = build.backend("2.0")
    build.lay_out([b])
    tree = build.install
    assert b.folder == "redisai_fake-2.0-cpu" == layout.backend_folder_name("fake", "2.0", "cpu")
    assert (tree / "redisai.so").read_bytes() == b"core"
    folder = tree / "backends" / b.folder
    assert (folder / "redisai_fake.so").read_bytes() == b"backend 2.0"
    assert (folder / "lib" / "libfake.so.2.0").read_bytes() == b"lib 2.0"
    assert os.readlink(folder / "lib" / "libfake.so.1") == "libfake.so.2.0"
    assert os.readlink(tree / "backends" / "redisai_fake") == b.folder   # relative
    # Copies, never hard links: patchelf and later builds must not touch the sources.
    assert (tree / "redisai.so").stat().st_ino != build.core.stat().st_ino
    header = manifest.parse((folder / manifest.MANIFEST_NAME).read_text()).header
    assert (header["framework"], header["version"], header["variant"], header["kind"]) == (
        "fake", "2.0", "cpu", "ONNX")
    assert header["abi"] == manifest.abi_version()
    assert manifest.verify(folder) == []


def test_a_backends_programs_are_installed_beside_it_and_in_its_manifest(build: Build) -> None:
    """TFLITE's redisai_tflite_check: built beside the backend, copied into its folder
    (still executable), listed in its manifest, refreshed when rebuilt."""
    b = build.backend("2.0")
    spec = dataclasses.replace(SPEC, programs=("redisai_fake_check",))
    b = dataclasses.replace(b, framework=dataclasses.replace(b.framework, spec=spec))
    program = build.write("redisai_fake_check", b"program 1")
    program.chmod(0o755)
    assert b.programs == (program,)
    build.lay_out([b])
    installed = build.install / "backends" / b.folder / "redisai_fake_check"
    assert installed.read_bytes() == b"program 1"
    assert installed.stat().st_mode & 0o777 == 0o755
    listed = manifest.parse((installed.parent / manifest.MANIFEST_NAME).read_text())
    assert "redisai_fake_check" in {e.path for e in listed.files}
    build.write("redisai_fake_check", b"program 2")
    build.lay_out([b])
    assert installed.read_bytes() == b"program 2"
    assert manifest.verify(installed.parent) == []


def test_the_backend_host_is_installed_when_built(build: Build) -> None:
    build.lay_out([])
    assert not (build.install / layout.HOST_NAME).exists()
    build.write(layout.HOST_NAME, b"host")
    build.lay_out([])
    assert (build.install / layout.HOST_NAME).read_bytes() == b"host"


def test_a_second_run_copies_only_what_changed(build: Build,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    b = build.backend("2.0")
    build.lay_out([b])
    lib = build.install / "backends" / b.folder / "lib" / "libfake.so.2.0"
    before = lib.stat().st_ino
    capsys.readouterr()
    build.lay_out([b])
    assert "0 file(s) installed, 3 unchanged" in capsys.readouterr().out
    assert lib.stat().st_ino == before
    b.library.write_bytes(b"backend 2.0, rebuilt")
    build.lay_out([b])
    assert "1 file(s) installed, 2 unchanged" in capsys.readouterr().out
    assert (build.install / "backends" / b.folder / "redisai_fake.so").read_bytes() == \
        b"backend 2.0, rebuilt"
    assert manifest.verify(build.install / "backends" / b.folder) == []


def test_a_changed_installed_file_is_copied_again(build: Build) -> None:
    b = build.backend("2.0")
    build.lay_out([b])
    (build.install / "redisai.so").write_bytes(b"edited in the tree")
    build.lay_out([b])
    assert (build.install / "redisai.so").read_bytes() == b"core"


def test_a_record_of_another_tree_is_not_trusted(build: Build,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    # A copy of the tree (same sizes and mtimes) is not vouched for by the first's record.
    build.lay_out([])
    copy = build.root / "install" / "elsewhere"
    shutil.copytree(build.install, copy, symlinks=True)
    build.install = copy
    capsys.readouterr()
    build.lay_out([])
    assert "1 file(s) installed, 0 unchanged" in capsys.readouterr().out


def test_stale_files_are_removed_and_kept_folders_stay(build: Build) -> None:
    old, new = build.backend("1.0"), build.backend("2.0")
    build.lay_out([old])
    backends = build.install / "backends"
    (build.install / "leftover.txt").write_text("x")
    side = backends / "redisai_fake-0.9-cpu"
    (side / "lib").mkdir(parents=True)
    (side / "lib" / "libfake.so.0.9").write_text("side by side")
    build.lay_out([new], keep_folders=[side.name])
    assert sorted(p.name for p in backends.iterdir()) == [
        "redisai_fake", "redisai_fake-0.9-cpu", "redisai_fake-2.0-cpu"]
    assert not (build.install / "leftover.txt").exists()
    assert (side / "lib" / "libfake.so.0.9").read_text() == "side by side"
    build.lay_out([new], keep_folders=[side.name], defaults={"fake": side.name})
    assert os.readlink(backends / "redisai_fake") == side.name


def test_a_default_that_is_not_in_the_tree_is_an_error(build: Build) -> None:
    with pytest.raises(BuildError, match="the default fake backend redisai_fake-9-cpu is not in"):
        build.lay_out([build.backend("2.0")], defaults={"fake": "redisai_fake-9-cpu"})


def test_a_lib_alias_to_a_library_not_copied_is_an_error(build: Build) -> None:
    b = build.backend("2.0", aliases=False)
    fw = Framework(spec=SPEC, distribution="fake", version="2.0", site_packages=build.dir,
                   include_dirs=(), libraries=b.framework.libraries,
                   lib_aliases=(("libfake.so.1", "libother.so.2"),))
    with pytest.raises(BuildError, match="lib alias libfake.so.1 -> libother.so.2"):
        build.lay_out([layout.BuiltBackend(framework=fw, library=b.library, variant="cpu")])


def test_a_missing_build_output_is_an_error(build: Build) -> None:
    b = build.backend("2.0")
    b.library.unlink()
    with pytest.raises(BuildError, match=r"cannot install backends/redisai_fake-2.0-cpu/"
                                         r"redisai_fake.so: .* is not a file"):
        build.lay_out([b])


# --- one side-by-side folder -----------------------------------------------------------------

def test_lay_out_folder_touches_one_folder_and_names_its_source(build: Build) -> None:
    main = build.backend("2.0")
    build.lay_out([main])
    (build.install / "backends" / main.folder / "extra").write_text("kept")
    side = build.backend("1.5")
    layout.lay_out_folder(build.install, side, build.record, "fake-1.5-cp311.whl")
    folder = build.install / "backends" / side.folder
    header = manifest.parse((folder / manifest.MANIFEST_NAME).read_text()).header
    assert header["source"] == "fake-1.5-cp311.whl" and header["version"] == "1.5"
    assert manifest.verify(folder) == []
    assert (build.install / "backends" / main.folder / "extra").read_text() == "kept"
    assert os.readlink(build.install / "backends" / "redisai_fake") == main.folder
    (folder / "stale").write_text("x")
    layout.lay_out_folder(build.install, side, build.record, "fake-1.5-cp311.whl",
                          make_default=True)
    assert not (folder / "stale").exists()
    assert os.readlink(build.install / "backends" / "redisai_fake") == side.folder


def test_lay_out_folder_needs_an_install_tree(build: Build) -> None:
    with pytest.raises(BuildError, match="is not an install tree"):
        layout.lay_out_folder(build.install, build.backend("1.5"), build.record, "w.whl")
