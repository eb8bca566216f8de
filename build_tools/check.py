"""`python -m build_tools check [install dir]`: is an install tree self-contained?

For every backend .so (in the versioned folders; the unversioned names are
symlinks and are checked as links only):
- RUNPATH is exactly $ORIGIN/lib and there is no DT_RPATH;
- every NEEDED entry resolves inside the tree (lib/ beside it, then the libs
  in lib/ recursively through their own RUNPATH/RPATH, $ORIGIN honoured), or
  to the system C/C++ runtime found in the standard system folders; nothing
  may resolve outside the backend's folder (such as site-packages);
- the only exported dynamic symbol is RAI_BackendEntry;
- its folder's redisai_backend.manifest (manifest.py) matches: every listed file
  present with its size and SHA-256, no file beside it unlisted; and the folder's
  name redisai_<framework>-<version>-<variant> says what the manifest says.
Every versioned folder is checked, side-by-side builds of another framework
version (variants.py) as well as those of the venv's versions.
A tree installed from packages also has redisai_core.manifest (core_manifest.py)
at its top: when present it must match the same way.
redisai.so: no RPATH/RUNPATH, NEEDED only the system runtime, the only
export RedisModule_OnLoad.
redisai-backend-host (beside redisai.so, docs/isolation.md): present, an ELF
executable, executable and not writable by group or others (the core refuses
to spawn it otherwise), no RPATH/RUNPATH, NEEDED only the system runtime.
A backend's programs (frameworks.FrameworkSpec.programs: TFLITE's
redisai_tflite_check) in its folder: the same, but with RUNPATH exactly
$ORIGIN/lib as the backend has, NEEDED resolving as the backend's does.

A tree built with `build --sanitize address` (install-asan/...) is recognised
by redisai.so's NEEDED libasan.so.N; there, and only there, libasan.so.N from
the system folders counts as part of the system runtime (the sanitized .so
files need it; redis-server is started with it preloaded).

ELF files are read with pyelftools (from the venv), never by parsing readelf.
"""
from __future__ import annotations

import os
import platform
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Iterator

from . import core_manifest, gpu_libs, manifest
from .errors import BuildError
from .frameworks import FRAMEWORKS

CORE_EXPORT = "RedisModule_OnLoad"
BACKEND_EXPORT = "RAI_BackendEntry"
BACKEND_RUNPATH = "$ORIGIN/lib"
HOST_NAME = "redisai-backend-host"

# The system C/C++ runtime a backend may need from outside its folder.
_SYSTEM_RUNTIME = re.compile(
    r"^(?:lib(?:c|m|dl|pthread|rt|util|stdc\+\+|gcc_s)\.so(?:\.\d+)*"
    r"|ld-linux(?:-[\w-]+)?\.so\.\d+)$")


def is_system_runtime(name: str) -> bool:
    """Whether a NEEDED name is the system C/C++ runtime's (never carried in a tree)."""
    return bool(_SYSTEM_RUNTIME.match(name))


def _system_dirs() -> tuple[Path, ...]:
    triplet = f"{platform.machine()}-linux-gnu"
    dirs = [f"/lib/{triplet}", f"/usr/lib/{triplet}", "/lib64", "/usr/lib64", "/lib", "/usr/lib"]
    return tuple(Path(d) for d in dirs)


SYSTEM_DIRS: tuple[Path, ...] = _system_dirs()

# AddressSanitizer's runtime: allowed as system runtime in a sanitized tree only.
_ASAN_RUNTIME = re.compile(r"^libasan\.so(?:\.\d+)*$")


# The ABI note of module/backend_abi.h (RAI_BACKEND_ABI_NOTE): name, type, kind numbers.
ABI_NOTE_NAME = "RedisAI"
ABI_NOTE_TYPE = 0x52414901
KIND_NUMBERS = {"tensorflow": 0, "tflite": 1, "torch": 2, "onnxruntime": 3}


@dataclass
class ElfInfo:
    needed: list[str] = field(default_factory=list)
    runpath: list[str] | None = None   # None: no DT_RUNPATH
    rpath: list[str] | None = None     # None: no DT_RPATH
    exports: list[str] = field(default_factory=list)
    abi_notes: list[tuple[int, int, int]] = field(default_factory=list)  # (major, minor, kind)
    elf_type: str = ""                 # e_type: ET_DYN, ET_EXEC ...
    has_interp: bool = False           # a PT_INTERP segment: a program, not a library


def require_pyelftools() -> None:
    """Raises the BuildError read_elf would, before a caller starts work that needs check."""
    try:
        import elftools  # noqa: F401
    except ImportError:
        raise BuildError("pyelftools is missing: run with .venv/bin/python "
                         "(python3 -m build_tools setup installs it)") from None


def read_elf(path: Path, with_exports: bool) -> ElfInfo:
    """NEEDED, RUNPATH, RPATH and (optionally) the exported dynamic symbols of path."""
    try:
        from elftools.common.exceptions import ELFError
        from elftools.elf.dynamic import DynamicSection, DynamicSegment
        from elftools.elf.elffile import ELFFile
        from elftools.elf.sections import SymbolTableSection
    except ImportError:
        raise BuildError("pyelftools is missing: run check with .venv/bin/python "
                         "(python3 -m build_tools setup installs it)") from None
    info = ElfInfo()
    try:
        with open(path, "rb") as f:
            elf = ELFFile(f)
            info.elf_type = str(elf.header["e_type"])
            info.has_interp = any(seg["p_type"] == "PT_INTERP" for seg in elf.iter_segments())
            dyn = next((s for s in elf.iter_sections() if isinstance(s, DynamicSection)), None)
            if dyn is None:
                dyn = next((s for s in elf.iter_segments() if isinstance(s, DynamicSegment)),
                           None)
            if dyn is None:
                raise BuildError(f"{path}: no dynamic section (not a shared object?)")
            for tag in dyn.iter_tags():
                kind = tag.entry.d_tag
                if kind == "DT_NEEDED":
                    info.needed.append(tag.needed)
                elif kind == "DT_RUNPATH":
                    info.runpath = tag.runpath.split(":") if tag.runpath else []
                elif kind == "DT_RPATH":
                    info.rpath = tag.rpath.split(":") if tag.rpath else []
            for sec in elf.iter_sections():
                if sec["sh_type"] != "SHT_NOTE":
                    continue
                for note in sec.iter_notes():
                    if note["n_name"] == ABI_NOTE_NAME and note["n_type"] == ABI_NOTE_TYPE:
                        desc = note["n_desc"]
                        raw = desc if isinstance(desc, bytes) else bytes.fromhex(desc)
                        if len(raw) >= 12:
                            info.abi_notes.append(tuple(  # type: ignore[arg-type]
                                int.from_bytes(raw[i:i + 4], "little") for i in (0, 4, 8)))
            if with_exports:
                dynsym = elf.get_section_by_name(".dynsym")
                if not isinstance(dynsym, SymbolTableSection):
                    raise BuildError(f"{path}: no .dynsym section")
                for sym in dynsym.iter_symbols():
                    if (sym.name and sym["st_shndx"] != "SHN_UNDEF"
                            and sym["st_info"]["bind"] in ("STB_GLOBAL", "STB_WEAK",
                                                           "STB_GNU_UNIQUE", "STB_LOOS")
                            and sym["st_other"]["visibility"] in ("STV_DEFAULT",
                                                                  "STV_PROTECTED")):
                        info.exports.append(sym.name)
    except (OSError, ELFError) as exc:
        raise BuildError(f"{path}: cannot read as ELF: {exc}") from None
    return info


def _expand(entry: str, origin: Path) -> Path:
    for token in ("${ORIGIN}", "$ORIGIN"):
        entry = entry.replace(token, str(origin))
    return Path(os.path.normpath(entry)) if entry else origin


def _inside(path: Path, folder: Path) -> bool:
    try:
        path.resolve().relative_to(folder.resolve())
        return True
    except ValueError:
        return False


@dataclass
class Row:
    file: str
    runpath: str
    needed_ok: bool = True
    exports_ok: bool | None = True     # None: not checked
    problems: list[str] = field(default_factory=list)


class _Checker:
    def __init__(self, install: Path, sanitized: bool = False) -> None:
        self.install = install
        self.sanitized = sanitized
        self.rows: list[Row] = []

    def _system_runtime(self, name: str) -> bool:
        return is_system_runtime(name) or bool(self.sanitized and _ASAN_RUNTIME.match(name))

    def rel(self, path: Path) -> str:
        try:
            return str(path.relative_to(self.install))
        except ValueError:
            return str(path)

    def _runpath_text(self, info: ElfInfo) -> str:
        parts = []
        if info.runpath is not None:
            parts.append(":".join(info.runpath) or "''")
        if info.rpath is not None:
            parts.append("RPATH=" + (":".join(info.rpath) or "''"))
        return " ".join(parts) or "-"

    def _exports(self, row: Row, info: ElfInfo, expected: str) -> None:
        extra = sorted(set(info.exports) - {expected})
        if expected not in info.exports:
            row.exports_ok = False
            row.problems.append(f"does not export {expected}")
        if extra:
            row.exports_ok = False
            shown = ", ".join(extra[:8]) + (f" (+{len(extra) - 8} more)" if len(extra) > 8 else "")
            row.problems.append(f"exports more than {expected}: {shown}")

    def _resolve_needed(self, row: Row, owner: Path, info: ElfInfo, folder: Path | None,
                        seen: set[Path], libs: list[Path]) -> None:
        """Checks owner's NEEDED entries; in-tree libraries found go to libs."""
        origin = owner.parent
        search = [_expand(e, origin) for e in (info.rpath or []) + (info.runpath or [])]
        gpu = folder is not None and _is_gpu_folder(folder)
        for name in info.needed:
            if gpu and gpu_libs.DRIVER.match(name):
                continue   # the NVIDIA driver's: from the system, absent without a GPU
            system = self._system_runtime(name) or bool(gpu and gpu_libs.SYSTEM.match(name))
            found: Path | None = None
            for d in search:
                cand = d / name
                if cand.exists():
                    found = cand
                    break
            if found is not None:
                if folder is not None and _inside(found, folder):
                    real = found.resolve()
                    if real not in seen:
                        seen.add(real)
                        libs.append(found)
                    continue
                if not system:
                    row.needed_ok = False
                    row.problems.append(f"NEEDED {name} resolves outside the tree: {found}")
                    continue
            if system:
                if any((d / name).exists() for d in SYSTEM_DIRS):
                    continue
                row.needed_ok = False
                row.problems.append(f"NEEDED {name} (system runtime) not found in "
                                    + ", ".join(str(d) for d in SYSTEM_DIRS))
            else:
                row.needed_ok = False
                where = "lib/ beside it" if folder is not None else "the system runtime"
                row.problems.append(f"NEEDED {name} is neither in {where} nor a system "
                                    "C/C++ runtime library")

    def check_core(self, path: Path) -> None:
        info = read_elf(path, with_exports=True)
        row = Row(self.rel(path), self._runpath_text(info))
        if info.runpath is not None or info.rpath is not None:
            row.problems.append(f"has RUNPATH/RPATH {row.runpath}; redisai.so needs none")
        self._resolve_needed(row, path, info, None, set(), [])
        self._exports(row, info, CORE_EXPORT)
        self.rows.append(row)

    def check_host(self, path: Path) -> None:
        self._check_program(path, "isolated backends (ISOLATE) cannot start without it", None)

    def _check_program(self, path: Path, needed_for: str, folder: Path | None) -> None:
        """An executable the module spawns: redisai-backend-host (folder None: no
        RUNPATH, the system runtime only) or a backend's program in its folder
        (RUNPATH exactly $ORIGIN/lib, NEEDED resolving in the folder's lib/)."""
        row = Row(self.rel(path), "-", exports_ok=None)
        self.rows.append(row)
        if not path.is_file() or path.is_symlink():
            row.needed_ok = False
            row.problems.append(f"missing: {needed_for}")
            return
        mode = path.stat().st_mode
        if not mode & 0o100:
            row.problems.append(f"mode {mode & 0o7777:o}: not executable")
        if mode & 0o022:
            row.problems.append(f"mode {mode & 0o7777:o}: writable by group or others "
                                "(the core refuses to spawn it)")
        try:
            info = read_elf(path, with_exports=False)
        except BuildError as e:
            row.needed_ok = False
            row.problems.append(str(e))
            return
        if info.elf_type not in ("ET_EXEC", "ET_DYN") or not info.has_interp:
            row.problems.append(f"ELF type {info.elf_type} without a program interpreter: "
                                "not an executable")
        row.runpath = self._runpath_text(info)
        if folder is None:
            if info.runpath is not None or info.rpath is not None:
                row.problems.append(f"has RUNPATH/RPATH {row.runpath}; the host needs none")
            self._resolve_needed(row, path, info, None, set(), [])
            return
        self._backend_search_path(row, info)
        libs: list[Path] = []
        self._resolve_needed(row, path, info, folder, set(), libs)

    def _backend_search_path(self, row: Row, info: ElfInfo) -> None:
        if info.rpath is not None:
            row.problems.append(f"has DT_RPATH {':'.join(info.rpath)!r}; only RUNPATH is allowed")
        if info.runpath != [BACKEND_RUNPATH]:
            got = "none" if info.runpath is None else repr(":".join(info.runpath))
            row.problems.append(f"RUNPATH is {got}, must be exactly {BACKEND_RUNPATH!r}")

    def check_backend(self, path: Path) -> None:
        folder = path.parent
        info = read_elf(path, with_exports=True)
        row = Row(self.rel(path), self._runpath_text(info))
        self._backend_search_path(row, info)
        seen: set[Path] = set()
        libs: list[Path] = []
        self._resolve_needed(row, path, info, folder, seen, libs)
        self._exports(row, info, BACKEND_EXPORT)
        name = path.stem[len("redisai_"):]
        want = KIND_NUMBERS.get(name)
        if len(info.abi_notes) != 1:
            row.problems.append(f"{len(info.abi_notes)} RedisAI ABI notes (.note.redisai), "
                                "must be exactly 1")
        elif want is not None and info.abi_notes[0][2] != want:
            row.problems.append(f"ABI note says kind {info.abi_notes[0][2]}, a {name} backend "
                                f"is {want}")
        self.rows.append(row)
        for program in _PROGRAMS.get(name, ()):
            self._check_program(folder / program, f"the {name} backend's own program",
                                folder)
        # The libraries the backend pulls from lib/, and theirs, recursively; then
        # those nothing NEEDs (a framework opens them with dlopen), each the same way.
        self._check_libs(folder, libs, seen)
        for lib in sorted((folder / "lib").glob("*.so*")):
            if lib.is_file() and not lib.is_symlink() and lib.resolve() not in seen:
                seen.add(lib.resolve())
                self._check_libs(folder, [lib], seen)

    def _check_libs(self, folder: Path, libs: list[Path], seen: set[Path]) -> None:
        """A row for each of libs and for each library of folder they need, recursively."""
        while libs:
            lib = libs.pop(0)
            linfo = read_elf(lib.resolve(), with_exports=False)
            lrow = Row(self.rel(lib), self._runpath_text(linfo), exports_ok=None)
            for entry in (linfo.rpath or []) + (linfo.runpath or []):
                target = _expand(entry, lib.resolve().parent)
                if not _inside(target, folder):
                    lrow.needed_ok = False
                    lrow.problems.append(f"search path {entry!r} leads outside "
                                         f"{self.rel(folder)}/ (to {target})")
            self._resolve_needed(lrow, lib.resolve(), linfo, folder, seen, libs)
            self.rows.append(lrow)

    def check_manifest(self, folder: Path) -> None:
        path = folder / manifest.MANIFEST_NAME
        row = Row(self.rel(path), "-", needed_ok=True, exports_ok=None)
        row.problems += manifest.verify(folder)
        row.problems += _name_vs_manifest(folder)
        self.rows.append(row)

    def check_core_manifest(self) -> None:
        path = self.install / core_manifest.CORE_MANIFEST_NAME
        row = Row(self.rel(path), "-", needed_ok=True, exports_ok=None)
        row.problems += core_manifest.verify(self.install)
        self.rows.append(row)

    def check_links(self, backends: Path) -> None:
        for link in sorted(p for p in backends.iterdir() if p.is_symlink()):
            row = Row(self.rel(link), "-", exports_ok=None)
            target = os.readlink(link)
            row.runpath = f"-> {target}"
            if os.path.isabs(target):
                row.problems.append(f"symlink target {target!r} is absolute; must be relative")
            elif not (link.resolve().is_dir() and _inside(link, backends)):
                row.problems.append(f"symlink target {target!r} is not a folder in backends/")
            else:
                so = link / f"{link.name}.so"
                if not so.is_file():
                    row.problems.append(f"{link.name}/{so.name} does not exist")
            self.rows.append(row)


# Backend name -> the programs its folder must hold beside the backend.
_PROGRAMS: dict[str, tuple[str, ...]] = {spec.backend: spec.programs for spec in FRAMEWORKS}

_FOLDER_NAME = re.compile(r"^redisai_(?P<framework>[a-z0-9]+)-(?P<version>.+)-(?P<variant>\w+)$")


def _is_gpu_folder(folder: Path) -> bool:
    m = _FOLDER_NAME.match(folder.name)
    return m is not None and m.group("variant") == "gpu"


def _name_vs_manifest(folder: Path) -> list[str]:
    """A folder's name must say what its manifest says: LOADBACKEND by name and LIST
    show the name, so a renamed folder (another version's files) would mislead."""
    try:
        header = manifest.parse((folder / manifest.MANIFEST_NAME).read_text()).header
    except (OSError, UnicodeDecodeError, ValueError):
        return []  # manifest.verify() already names the problem
    m = _FOLDER_NAME.match(folder.name)
    if m is None:
        return [f"the folder's name is not redisai_<framework>-<version>-<variant>"]
    return [f"the folder's name says {key} {m[key]}, its manifest {header.get(key)}"
            for key in ("framework", "version", "variant") if header.get(key) != m[key]]


def backend_libraries(install: Path) -> Iterator[Path]:
    """The backend .so files in the versioned (real) folders of install/backends/."""
    backends = install / "backends"
    if not backends.is_dir():
        return
    for folder in sorted(backends.iterdir()):
        if folder.is_symlink() or not folder.is_dir():
            continue
        yield from sorted(folder.glob("redisai_*.so"))


def _print_table(rows: Iterable[Row]) -> None:
    rows = list(rows)
    def mark(ok: bool | None) -> str:
        return "n/a" if ok is None else ("ok" if ok else "bad")
    table = [("file", "RUNPATH", "NEEDED", "exports")]
    for r in rows:
        table.append((r.file, r.runpath, mark(r.needed_ok), mark(r.exports_ok)))
    widths = [max(len(row[i]) for row in table) for i in range(4)]
    for i, row in enumerate(table):
        print("  ".join(cell.ljust(widths[j]) for j, cell in enumerate(row)).rstrip())
        if i == 0:
            print("  ".join("-" * w for w in widths))


def check_tree(install: Path) -> bool:
    """Checks install; prints a table and each problem. True when there is none."""
    install = install.resolve()
    core = install / "redisai.so"
    if not core.is_file():
        raise BuildError(f"{install} is not an install tree: no redisai.so")
    sanitized = any(_ASAN_RUNTIME.match(n) for n in read_elf(core, with_exports=False).needed)
    checker = _Checker(install, sanitized)
    checker.check_core(core)
    checker.check_host(install / HOST_NAME)
    backends = list(backend_libraries(install))
    for lib in backends:
        checker.check_backend(lib)
    for folder in sorted({lib.parent for lib in backends}):
        checker.check_manifest(folder)
    if (install / core_manifest.CORE_MANIFEST_NAME).is_file():
        checker.check_core_manifest()
    if (install / "backends").is_dir():
        checker.check_links(install / "backends")
    return _report(checker, install, bool(backends))


def _report(checker: _Checker, install: Path, any_backend: bool) -> bool:
    print(f"[check] {install}")
    if checker.sanitized:
        print("[check] note: AddressSanitizer tree (redisai.so needs libasan): libasan.so "
              "counts as system runtime; load it with libasan preloaded (ci/asan-tests.sh)")
    _print_table(checker.rows)
    problems = [(r.file, p) for r in checker.rows for p in r.problems]
    if not any_backend:
        print("[check] note: no backend in this tree")
    for file, p in problems:
        print(f"[check] problem: {file}: {p}")
    print(f"[check] {len(checker.rows)} file(s), {len(problems)} problem(s)")
    return not problems


def check_backend_folder(folder: Path) -> bool:
    """Checks one backend folder on its own (a BACKENDSPATH folder with no core
    beside it): its .so, the libraries it pulls from lib/, its manifest. Prints
    the same table; True when there is no problem."""
    folder = folder.resolve()
    libs = sorted(folder.glob("redisai_*.so"))
    if not libs:
        raise BuildError(f"{folder} is not a backend folder: no redisai_<name>.so")
    checker = _Checker(folder.parent)
    for lib in libs:
        checker.check_backend(lib)
    checker.check_manifest(folder)
    return _report(checker, folder, True)
