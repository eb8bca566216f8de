"""`python -m build_tools install-package ARCHIVE [DEST]`: unpack, verify, check.

The archive (made by `package`) is unpacked safely (unpack.py) into a staging
folder next to its destination, verified against the manifest it carries
(every file's size and SHA-256, nothing unlisted: a changed byte names the
file), and only then moved into place:

- the core archive (`redisai-<version>/`): its files go into DEST, the
  install tree (default: install/redisai-<version>/ of this checkout);
- a backend archive (`redisai_<name>-<version>-<variant>/`): into DEST/backends/
  when DEST holds a core (redisai.so), else into DEST itself taken as a
  BACKENDSPATH folder (default DEST: the newest install/redisai-*); the
  default link redisai_<name> is made beside it when there is none.

Existing files or folders are never overwritten unless force is set.
Finally `check` runs on DEST (on the backend folder alone when DEST has no
core); its result is the command's.
"""
from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from . import archive_rules, core_manifest, manifest, paths
from .check import check_backend_folder, check_tree, require_pyelftools
from .errors import BuildError
from .unpack import unpack


def _say(msg: str) -> None:
    print(f"[install-package] {msg}", flush=True)


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    else:
        path.unlink()


def _occupied(path: Path) -> bool:
    return path.exists() or path.is_symlink()


def _verify(staged: Path, kind: str, archive: Path) -> None:
    if kind == "core":
        if (staged / core_manifest.BACKENDS).exists():
            raise BuildError(f"{archive.name}: a core archive must not hold backends/")
        problems = core_manifest.verify(staged)
    else:
        problems = manifest.verify(staged)
    if problems:
        raise BuildError(f"{archive.name}: does not match the manifest it carries; "
                         "nothing installed:\n  " + "\n  ".join(problems))
    _say(f"{archive.name}: every file matches its manifest (size, SHA-256)")


def _kind(top: str, archive: Path) -> str:
    if archive_rules.CORE_TOP.match(top):
        return "core"
    if archive_rules.BACKEND_TOP.match(top):
        return "backend"
    raise BuildError(f"{archive.name}: top folder {top!r} is neither redisai-<version> "
                     "nor redisai_<name>-<version>-<variant>")


def _place_core(staged: Path, dest: Path, force: bool) -> None:
    entries = sorted(staged.iterdir())
    taken = [e.name for e in entries if _occupied(dest / e.name)]
    if taken and not force:
        raise BuildError(f"{dest} already holds {', '.join(taken)}: nothing installed "
                         "(--force replaces)")
    for entry in entries:
        target = dest / entry.name
        if _occupied(target):
            _remove(target)
        os.replace(entry, target)
    _say(f"core -> {dest}")


def _place_backend(staged: Path, backends: Path, force: bool) -> Path:
    target = backends / staged.name
    if _occupied(target):
        if not force:
            raise BuildError(f"{target} exists: nothing installed (--force replaces)")
        _remove(target)
    os.replace(staged, target)
    _say(f"backend -> {target}")
    name = archive_rules.BACKEND_TOP.match(staged.name).group("name")  # type: ignore[union-attr]
    link = backends / f"redisai_{name}"
    if _occupied(link):
        shown = f" -> {os.readlink(link)}" if link.is_symlink() else ""
        _say(f"default link kept: {link.name}{shown}")
    else:
        os.symlink(staged.name, link)
        _say(f"default link {link.name} -> {staged.name}")
    return target


def _default_dest(top: str) -> Path:
    if archive_rules.CORE_TOP.match(top):
        return paths.INSTALL_ROOT / top
    found = paths.newest_install_dir()
    if found is None:
        raise BuildError(f"no install tree under {paths.INSTALL_ROOT} to put a backend in: "
                         "install the core archive first or give DEST")
    return found


def install_package(archive: Path, dest: Path | None = None, force: bool = False) -> bool:
    """Installs archive; True when `check` passes on the result."""
    try:
        return _install(archive, dest, force)
    except OSError as exc:   # permissions, a full disk, DEST/backends on another filesystem
        raise BuildError(f"install-package {archive.name}: {exc}") from None


def _install(archive: Path, dest: Path | None, force: bool) -> bool:
    if not archive.is_file():
        raise BuildError(f"{archive}: no such archive")
    archive = archive.resolve()
    require_pyelftools()   # check must be able to run before anything is installed
    parent = dest if dest is not None else paths.INSTALL_ROOT
    parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".redisai-unpack-", dir=parent))
    try:
        top = unpack(archive, staging)
        kind = _kind(top, archive)
        staged = staging / top
        if not staged.is_dir() or staged.is_symlink():
            raise BuildError(f"{archive.name}: {top} is not a folder")
        _verify(staged, kind, archive)
        where = (dest if dest is not None else _default_dest(top)).resolve()
        if kind == "core":
            where.mkdir(parents=True, exist_ok=True)
            _place_core(staged, where, force)
            folder = None
        else:
            has_core = (where / "redisai.so").is_file()
            backends = where / core_manifest.BACKENDS if has_core else where
            backends.mkdir(parents=True, exist_ok=True)
            folder = _place_backend(staged, backends, force)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    # The staging folder is gone before check walks the tree.
    if folder is None or (where / "redisai.so").is_file():
        return check_tree(where)
    return check_backend_folder(folder)
