"""The manifest of a backend folder: what was installed, with sizes and SHA-256.

`build` writes `redisai_backend.manifest` in every backend folder of the install
tree; `check` verifies it; the module's LOADBACKEND reads it (module/backend_manifest.c:
the backend .so hashed and sized, every other file sized). A line-based text file,
so the C side needs no JSON parser:

    # RedisAI backend manifest
    format 1
    framework onnxruntime
    version 1.20.1
    variant cpu
    kind ONNX
    abi 1.3
    file <sha256 hex> <size> <path relative to the folder>
    link <target> <path relative to the folder>

The path is the last field (it may hold spaces); `..` and absolute paths are never
written and are refused when read.
"""
from __future__ import annotations

import hashlib
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from . import paths

MANIFEST_NAME = "redisai_backend.manifest"
FORMAT = 1
_CHUNK = 1 << 20


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(_CHUNK):
            h.update(chunk)
    return h.hexdigest()


def abi_version(root: Path = paths.ROOT) -> str:
    """RAI_ABI_MAJOR.RAI_ABI_MINOR from include/redisai/backend_abi.h."""
    text = (root / "include" / "redisai" / "backend_abi.h").read_text()
    major = re.search(r"#define\s+RAI_ABI_MAJOR\s+(\d+)", text)
    minor = re.search(r"#define\s+RAI_ABI_MINOR\s+(\d+)", text)
    if not (major and minor):
        raise ValueError("include/redisai/backend_abi.h has no RAI_ABI_MAJOR/RAI_ABI_MINOR")
    return f"{major.group(1)}.{minor.group(1)}"


@dataclass(frozen=True)
class FileEntry:
    sha256: str
    size: int
    path: str


@dataclass
class Manifest:
    header: dict[str, str] = field(default_factory=dict)
    files: list[FileEntry] = field(default_factory=list)
    links: dict[str, str] = field(default_factory=dict)   # path -> target

    def render(self) -> str:
        lines = ["# RedisAI backend manifest: `.venv/bin/python -m build_tools check` verifies it,",
                 "# AI.CONFIG LOADBACKEND checks the backend .so (SHA-256) and sizes against it",
                 f"format {FORMAT}"]
        lines += [f"{k} {v}" for k, v in self.header.items()]
        lines += [f"file {e.sha256} {e.size} {e.path}" for e in sorted(self.files,
                                                                      key=lambda e: e.path)]
        lines += [f"link {t} {p}" for p, t in sorted(self.links.items())]
        return "\n".join(lines) + "\n"


def _safe(rel: str) -> bool:
    return bool(rel) and not rel.startswith("/") and all(
        part not in ("", "..") for part in rel.split("/"))


def parse(text: str) -> Manifest:
    """Raises ValueError naming the line for anything malformed."""
    m = Manifest()
    for n, line in enumerate(text.splitlines(), 1):
        if not line or line.startswith("#"):
            continue
        key, _, rest = line.partition(" ")
        if key == "file":
            parts = rest.split(" ", 2)
            if (len(parts) != 3 or not re.fullmatch(r"[0-9a-f]{64}", parts[0])
                    or not parts[1].isdigit() or not _safe(parts[2])):
                raise ValueError(f"line {n}: malformed file line {line!r}")
            m.files.append(FileEntry(parts[0], int(parts[1]), parts[2]))
        elif key == "link":
            target, _, path = rest.partition(" ")
            if not target or not _safe(path):
                raise ValueError(f"line {n}: malformed link line {line!r}")
            m.links[path] = target
        else:
            m.header[key] = rest
    if m.header.get("format") != str(FORMAT):
        raise ValueError(f"format is {m.header.get('format')!r}, expected {FORMAT}")
    return m


def scan(root: Path, m: Manifest, *, exclude: str, skip_top: frozenset[str] = frozenset(),
         skip_hidden: bool = False, hashes: dict[str, tuple[str, int]] | None = None) -> None:
    """Adds every file and link under root to m (links not followed), except the manifest
    `exclude`, the top-level folders in skip_top and, with skip_hidden, dot names.
    hashes: relative path -> (sha256, size) already known; other files are hashed."""
    known = hashes or {}
    for dirpath, dirnames, filenames in os.walk(root):
        here = Path(dirpath)
        if here == root:
            dirnames[:] = [d for d in dirnames if d not in skip_top]
        for name in sorted(dirnames + filenames):
            p = here / name
            rel = str(p.relative_to(root))
            if rel == exclude or (skip_hidden and name.startswith(".")):
                continue
            if p.is_symlink():
                m.links[rel] = os.readlink(p)
                if name in dirnames:
                    dirnames.remove(name)
            elif p.is_file():
                sha, size = known.get(rel) or (sha256_file(p), p.stat().st_size)
                m.files.append(FileEntry(sha, size, rel))


def write(folder: Path, header: dict[str, str], hashes: dict[str, tuple[str, int]]) -> bool:
    """Writes folder/MANIFEST_NAME listing every file and link under folder.

    hashes: relative path -> (sha256, size) already known (from the sync record);
    files not in it are hashed here. Returns True when the file changed."""
    m = Manifest(header=dict(header))
    scan(folder, m, exclude=MANIFEST_NAME, skip_hidden=True, hashes=hashes)
    text = m.render()
    dst = folder / MANIFEST_NAME
    if dst.is_file() and dst.read_text() == text:
        return False
    tmp = folder / f".{MANIFEST_NAME}.tmp"
    tmp.write_text(text)
    os.replace(tmp, dst)
    return True


def verify(folder: Path, name: str = MANIFEST_NAME,
           skip: frozenset[str] = frozenset()) -> list[str]:
    """Every problem of folder against its manifest, one text each naming the file.

    name: the manifest's file name (core_manifest.py passes its own);
    skip: top-level entries of folder that the manifest does not cover."""
    path = folder / name
    if not path.is_file():
        return [f"no {name}"]
    try:
        m = parse(path.read_text())
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        return [f"{name}: {exc}"]
    problems: list[str] = []
    listed = {e.path for e in m.files} | set(m.links)
    for e in m.files:
        p = folder / e.path
        if not p.is_file() or p.is_symlink():
            problems.append(f"{e.path}: listed in the manifest but missing")
            continue
        size = p.stat().st_size
        if size != e.size:
            problems.append(f"{e.path}: size {size}, manifest says {e.size}")
            continue
        sha = sha256_file(p)
        if sha != e.sha256:
            problems.append(f"{e.path}: SHA-256 {sha}, manifest says {e.sha256}")
    for rel, target in m.links.items():
        p = folder / rel
        if not p.is_symlink() or os.readlink(p) != target:
            problems.append(f"{rel}: manifest says a link to {target}, it is not")
    for dirpath, dirnames, filenames in os.walk(folder):
        here = Path(dirpath)
        if here == folder:
            dirnames[:] = [d for d in dirnames if d not in skip]
            filenames = [f for f in filenames if f not in skip]
        for entry in dirnames + filenames:
            p = here / entry
            rel = str(p.relative_to(folder))
            if rel == name or (p.is_dir() and not p.is_symlink()):
                continue
            if rel not in listed:
                problems.append(f"{rel}: present but not listed in the manifest")
    return problems
