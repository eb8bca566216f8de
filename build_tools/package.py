"""`python -m build_tools package`: relocatable archives of an install tree.

Writes into dist/ (default) one gzip'ed tar per backend folder,
`redisai_<name>-<version>-<variant>.tar.gz` holding `redisai_<name>-<version>-<variant>/`
with its redisai_backend.manifest, and one for the core,
`redisai-<version>-core.tar.gz` holding `redisai-<version>/` (redisai.so and the
rest of the tree's top level, backends/ aside) with a redisai_core.manifest
made here (a tree that already has one, installed from packages, must match
it first). The default links (backends/redisai_<name>) are not packed:
install-package makes them. Every backend folder is verified against its
manifest first: a tree that does not match is not packed.

The archives are reproducible: sorted members, owner root, gzip header
without a time stamp. Each is written under a temporary name and renamed.
"""
from __future__ import annotations

import gzip
import io
import os
import stat
import tarfile
from dataclasses import dataclass
from pathlib import Path

from . import archive_rules, core_manifest, manifest, pins
from .errors import BuildError
from .progress import CountingReader, Progress

# gzip level: on the 864 MB TensorFlow folder level 1 took 8.2 s for 221 MB,
# level 6 26.7 s (3.2x) for 192 MB (0.87x), level 9 72.8 s for 191 MB
# (bench/bench_package_levels.py): 1 is the default, --level chooses another.
DEFAULT_LEVEL = 1


def _say(msg: str) -> None:
    print(f"[package] {msg}", flush=True)


@dataclass(frozen=True)
class Packed:
    path: Path
    tree_bytes: int      # bytes of the files packed
    seconds: float


def _info(name: str, st: os.stat_result) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.mtime = int(st.st_mtime)
    info.uid = info.gid = 0
    info.uname = info.gname = "root"
    return info


def _entries(folder: Path, top: str, skip: frozenset[str]) -> list[tuple[Path, str]]:
    """(path, member name) of folder and everything under it, sorted, skip aside."""
    out: list[tuple[Path, str]] = [(folder, top)]
    for dirpath, dirnames, filenames in os.walk(folder):
        here = Path(dirpath)
        if here == folder:
            dirnames[:] = [d for d in dirnames if d not in skip]
            filenames = [f for f in filenames if f not in skip]
        dirnames.sort()
        for name in sorted(dirnames + filenames):
            p = here / name
            out.append((p, f"{top}/{p.relative_to(folder)}"))
            if p.is_symlink() and name in dirnames:
                dirnames.remove(name)
    return out


def _total_bytes(entries: list[tuple[Path, str]]) -> int:
    return sum(p.lstat().st_size for p, _ in entries if stat.S_ISREG(p.lstat().st_mode))


def _add(tar: tarfile.TarFile, path: Path, name: str, progress: Progress) -> None:
    problem = archive_rules.name_problem(name)
    if problem:
        raise BuildError(f"cannot pack {path}: {problem}")
    st = path.lstat()
    info = _info(name, st)
    if stat.S_ISLNK(st.st_mode):
        target = os.readlink(path)
        problem = archive_rules.link_problem(target)
        if problem:
            raise BuildError(f"cannot pack {path}: {problem}")
        info.type = tarfile.SYMTYPE
        info.linkname = target
        info.mode = 0o777
        tar.addfile(info)
    elif stat.S_ISDIR(st.st_mode):
        info.type = tarfile.DIRTYPE
        info.mode = 0o755
        tar.addfile(info)
    elif stat.S_ISREG(st.st_mode):
        info.size = st.st_size
        info.mode = 0o755 if st.st_mode & 0o111 else 0o644
        with open(path, "rb") as f:
            tar.addfile(info, CountingReader(f, progress))  # type: ignore[arg-type]
    else:
        raise BuildError(f"cannot pack {path}: not a file, folder or symbolic link")


def _add_text(tar: tarfile.TarFile, name: str, text: str, like: Path) -> None:
    """A member made here (the core manifest), dated like the file it describes."""
    data = text.encode()
    info = _info(name, like.stat())
    info.size = len(data)
    info.mode = 0o644
    tar.addfile(info, io.BytesIO(data))


def _write(dest: Path, entries: list[tuple[Path, str]], level: int,
           extra: tuple[str, str, Path] | None = None) -> Packed:
    """Writes dest from entries (and extra: member name, text, file dated like), with
    progress."""
    progress = Progress("[package]", dest.name, _total_bytes(entries))
    tmp = dest.with_name(f".{dest.name}.tmp")
    try:
        with open(tmp, "wb") as raw, \
                gzip.GzipFile(filename="", mode="wb", compresslevel=level, fileobj=raw,
                              mtime=0) as gz, \
                tarfile.open(fileobj=gz, mode="w", format=tarfile.PAX_FORMAT) as tar:
            for path, name in entries:
                _add(tar, path, name, progress)
            if extra is not None:
                _add_text(tar, *extra)
        os.replace(tmp, dest)
    except OSError as exc:
        raise BuildError(f"cannot write {dest}: {exc}") from None
    finally:
        if tmp.exists():
            tmp.unlink()
    size = dest.stat().st_size
    progress.finish(f", archive {size / 1e6:.1f} MB")
    return Packed(dest, progress.done, progress.elapsed())


def tree_version(install: Path) -> str:
    """The version a tree's folder name says (redisai-<version>), else this build's."""
    m = archive_rules.CORE_TOP.match(install.name)
    return m.group("version") if m else pins.VERSION


def backend_folders(install: Path) -> list[Path]:
    backends = install / core_manifest.BACKENDS
    if not backends.is_dir():
        return []
    return sorted(p for p in backends.iterdir() if p.is_dir() and not p.is_symlink())


def package_tree(install: Path, dist: Path, level: int = DEFAULT_LEVEL) -> list[Packed]:
    """Packs install's core and each backend folder into dist/; returns what was written."""
    install = install.resolve()
    if not (install / "redisai.so").is_file():
        raise BuildError(f"{install} is not an install tree: no redisai.so")
    if not 0 <= level <= 9:
        raise BuildError(f"gzip level {level}: must be 0..9")
    folders = backend_folders(install)
    for folder in folders:
        if not archive_rules.BACKEND_TOP.match(folder.name):
            raise BuildError(f"{folder}: not a backend folder name "
                             "(redisai_<name>-<version>-<variant>)")
        problems = manifest.verify(folder)
        if problems:
            raise BuildError(f"{folder} does not match its {manifest.MANIFEST_NAME}; "
                             "rebuild it before packing:\n  " + "\n  ".join(problems))
    if (install / core_manifest.CORE_MANIFEST_NAME).is_file():
        # A tree installed from packages: a changed core file must not be re-blessed.
        problems = core_manifest.verify(install)
        if problems:
            raise BuildError(f"{install} does not match its {core_manifest.CORE_MANIFEST_NAME}:"
                             "\n  " + "\n  ".join(problems))
    dist.mkdir(parents=True, exist_ok=True)
    version = tree_version(install)
    top = f"redisai-{version}"
    _say(f"{install} -> {dist} (gzip level {level})")

    packed: list[Packed] = []
    core_text = core_manifest.render(core_manifest.collect(install, version))
    core_entries = _entries(install, top, frozenset({core_manifest.BACKENDS,
                                                     core_manifest.CORE_MANIFEST_NAME}))
    packed.append(_write(dist / archive_rules.core_archive_name(version), core_entries, level,
                         (f"{top}/{core_manifest.CORE_MANIFEST_NAME}", core_text,
                          install / "redisai.so")))
    for folder in folders:
        entries = _entries(folder, folder.name, frozenset())
        packed.append(_write(dist / archive_rules.backend_archive_name(folder.name), entries,
                             level))
    for p in packed:
        _say(f"{p.path.name}: {p.path.stat().st_size / 1e6:.1f} MB "
             f"({p.tree_bytes / 1e6:.1f} MB of files) in {p.seconds:.1f} s")
    return packed

