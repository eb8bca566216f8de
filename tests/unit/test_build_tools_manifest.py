"""build_tools/manifest.py: a backend folder's manifest written, read back and verified, and
the ABI version read from include/redisai/backend_abi.h. Temporary folders only."""
from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

from build_tools import manifest
from paths import ROOT

SHA_A = "a" * 64


def folder_with_files(root: Path) -> Path:
    """A backend folder: the .so, a library, a lib/ alias link and a hidden temp file."""
    folder = root / "redisai_x-1.0-cpu"
    (folder / "lib").mkdir(parents=True)
    (folder / "redisai_x.so").write_bytes(b"backend")
    (folder / "lib" / "libx.so.1.0").write_bytes(b"library bytes")
    os.symlink("libx.so.1.0", folder / "lib" / "libx.so.1")
    (folder / ".redisai_x.so.tmp").write_bytes(b"half written")
    return folder


# --- text form ---------------------------------------------------------------------------

def test_render_then_parse_gives_the_same_manifest() -> None:
    m = manifest.Manifest(header={"framework": "onnxruntime", "version": "1.20.1", "kind": "ONNX"},
                          files=[manifest.FileEntry(SHA_A, 12, "lib/a b.so"),
                                 manifest.FileEntry("0" * 64, 3, "redisai_x.so")],
                          links={"lib/a b.so.1": "a_b.so"})
    text = m.render()
    assert text.splitlines()[2:] == [
        "format 1", "framework onnxruntime", "version 1.20.1", "kind ONNX",
        f"file {SHA_A} 12 lib/a b.so", f"file {'0' * 64} 3 redisai_x.so",
        "link a_b.so lib/a b.so.1"]
    back = manifest.parse(text)
    assert back.header == {"format": "1", **m.header}
    assert back.files == m.files and back.links == m.links


def test_files_are_rendered_sorted_by_path() -> None:
    m = manifest.Manifest(files=[manifest.FileEntry(SHA_A, 1, "z"),
                                 manifest.FileEntry(SHA_A, 1, "a")])
    assert [e.path for e in manifest.parse(m.render()).files] == ["a", "z"]


def test_comments_and_blank_lines_are_skipped() -> None:
    m = manifest.parse(f"# a comment\n\nformat 1\n# file {SHA_A} 1 not-a-file\n")
    assert m.files == [] and m.header == {"format": "1"}


@pytest.mark.parametrize("line", [
    f"file {'A' * 64} 1 x",          # upper-case hex
    f"file {'a' * 63} 1 x",          # short hash
    f"file {SHA_A} -1 x",            # not a size
    f"file {SHA_A} 1",               # no path
    f"file {SHA_A} 1 /etc/passwd",   # absolute
    f"file {SHA_A} 1 lib/../../x",   # leaves the folder
    f"file {SHA_A} 1 lib//x",        # empty part
    "link target",                   # no path
    "link target ../x",              # leaves the folder
])
def test_malformed_file_and_link_lines_are_refused_with_their_line(line: str) -> None:
    with pytest.raises(ValueError, match=r"^line 2: malformed (file|link) line"):
        manifest.parse(f"format 1\n{line}\n")


@pytest.mark.parametrize("text", ["framework x\n", "format 2\n"])
def test_unknown_or_missing_format_is_refused(text: str) -> None:
    with pytest.raises(ValueError, match="expected 1"):
        manifest.parse(text)


# --- writing a folder's manifest -----------------------------------------------------------

def test_write_lists_files_and_links_but_not_itself_nor_dot_names(tmp_path: Path) -> None:
    folder = folder_with_files(tmp_path)
    assert manifest.write(folder, {"framework": "x", "kind": "ONNX"}, {})
    m = manifest.parse((folder / manifest.MANIFEST_NAME).read_text())
    assert m.header == {"format": "1", "framework": "x", "kind": "ONNX"}
    assert {e.path: (e.sha256, e.size) for e in m.files} == {
        "redisai_x.so": (hashlib.sha256(b"backend").hexdigest(), 7),
        "lib/libx.so.1.0": (hashlib.sha256(b"library bytes").hexdigest(), 13)}
    assert m.links == {"lib/libx.so.1": "libx.so.1.0"}


def test_write_takes_known_hashes_as_given(tmp_path: Path) -> None:
    # The sync record's hashes are trusted: a file it knows is not hashed again.
    folder = folder_with_files(tmp_path)
    manifest.write(folder, {}, {"redisai_x.so": (SHA_A, 99)})
    m = manifest.parse((folder / manifest.MANIFEST_NAME).read_text())
    assert manifest.FileEntry(SHA_A, 99, "redisai_x.so") in m.files


def test_write_says_whether_the_file_changed(tmp_path: Path) -> None:
    folder = folder_with_files(tmp_path)
    assert manifest.write(folder, {"framework": "x"}, {}) is True
    assert manifest.write(folder, {"framework": "x"}, {}) is False
    assert manifest.write(folder, {"framework": "y"}, {}) is True
    assert not list(folder.glob(f".{manifest.MANIFEST_NAME}*"))   # no temp file left


def test_sha256_of_a_file_larger_than_one_read(tmp_path: Path) -> None:
    data = os.urandom(3 * (1 << 20) + 5)
    (tmp_path / "big").write_bytes(data)
    assert manifest.sha256_file(tmp_path / "big") == hashlib.sha256(data).hexdigest()


# --- verifying a folder ----------------------------------------------------------------------

@pytest.fixture
def written(tmp_path: Path) -> Path:
    folder = folder_with_files(tmp_path)
    (folder / ".redisai_x.so.tmp").unlink()  # verify, unlike write, lists dot names too
    manifest.write(folder, {"framework": "x"}, {})
    assert manifest.verify(folder) == []
    return folder


def test_verify_names_a_file_of_another_size(written: Path) -> None:
    (written / "redisai_x.so").write_bytes(b"backend, longer")
    assert manifest.verify(written) == ["redisai_x.so: size 15, manifest says 7"]


def test_verify_names_a_file_of_the_same_size_and_other_bytes(written: Path) -> None:
    (written / "redisai_x.so").write_bytes(b"BACKEND")
    [problem] = manifest.verify(written)
    assert problem.startswith("redisai_x.so: SHA-256 ") and "manifest says" in problem


def test_verify_names_missing_extra_and_retargeted_entries(written: Path) -> None:
    (written / "lib" / "libx.so.1.0").unlink()
    (written / "lib" / "libx.so.1").unlink()
    os.symlink("elsewhere", written / "lib" / "libx.so.1")
    (written / "stray.txt").write_text("x")
    assert sorted(manifest.verify(written)) == [
        "lib/libx.so.1.0: listed in the manifest but missing",
        "lib/libx.so.1: manifest says a link to libx.so.1.0, it is not",
        "stray.txt: present but not listed in the manifest"]


def test_verify_skips_the_top_level_entries_it_is_told_to(written: Path) -> None:
    (written / "backends").mkdir()
    (written / "backends" / "b.so").write_text("x")
    (written / "notes").write_text("x")
    assert manifest.verify(written, skip=frozenset({"backends", "notes"})) == []


def test_verify_without_or_with_an_unreadable_manifest(tmp_path: Path) -> None:
    assert manifest.verify(tmp_path) == [f"no {manifest.MANIFEST_NAME}"]
    (tmp_path / manifest.MANIFEST_NAME).write_text("format 1\nfile zz 1 x\n")
    [problem] = manifest.verify(tmp_path)
    assert problem.startswith(f"{manifest.MANIFEST_NAME}: line 2: malformed file line")


# --- the ABI version -----------------------------------------------------------------------

def abi_header(root: Path, text: str) -> Path:
    header = root / "include" / "redisai" / "backend_abi.h"
    header.parent.mkdir(parents=True)
    header.write_text(text)
    return root


def test_abi_version_reads_major_and_minor(tmp_path: Path) -> None:
    root = abi_header(tmp_path, "#ifndef X\n#define RAI_ABI_MAJOR  12\n"
                                "#define RAI_ABI_MINOR_SOMETHING 7\n#define\tRAI_ABI_MINOR 3\n")
    assert manifest.abi_version(root) == "12.3"


def test_abi_version_without_the_defines_is_an_error(tmp_path: Path) -> None:
    root = abi_header(tmp_path, "#define RAI_ABI_MAJOR 1\n")
    with pytest.raises(ValueError, match="no RAI_ABI_MAJOR/RAI_ABI_MINOR"):
        manifest.abi_version(root)


def test_abi_version_of_this_tree_is_the_headers() -> None:
    major, minor = manifest.abi_version().split(".")
    text = (ROOT / "include" / "redisai" / "backend_abi.h").read_text()
    assert f"RAI_ABI_MAJOR {major}" in " ".join(text.split())
    assert f"RAI_ABI_MINOR {minor}" in " ".join(text.split())
