"""The layer order of the C sources, read from their `#include "..."` lines.

The core (module/) is in folders by layer, each using only the folders below it:

    module/redisai.c -> llapi/ -> commands/ -> engine/ -> types/ -> loader/
        -> isolation/core/ -> isolation/ -> core/ -> include/redisai/

Beside that line stand programs of their own, each with the folders it may use: the
backend host (module/isolation/host/), the backends (backends/<framework>/ and
backends/common/), the test backends and modules, and the benchmark floor.

An include is resolved as the compiler does: the including file's own folder first,
then the include directories CMakeLists.txt gives its target, in order. Each must be
spelled from one of those directories ("engine/dag.h", not "dag.h" from inside
engine/), point at a folder the including folder may use, and take part in no cycle
between units (a .c and its .h are one unit). `check` returns every violation, and
`check_calls` the same rules applied to what the built objects call (nm); `figures`
counts the files at the module/ root, the units in include cycles and the backends'
includes of core headers.
"""
from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

from . import paths

# The main line, bottom first: a folder may include only its own and lower ones.
LINE: tuple[str, ...] = (
    "include/redisai",
    "module/core",
    "module/isolation",
    "module/isolation/core",
    "module/loader",
    "module/types",
    "module/engine",
    "module/commands",
    "module/llapi",
    "module",
)


@dataclass(frozen=True)
class Program:
    """Sources compiled with one set of include directories (CMakeLists.txt)."""
    folders: tuple[str, ...]      # where its sources lie
    include_dirs: tuple[str, ...]  # -I, in order, as CMake passes them
    may_use: tuple[str, ...]      # folders (or single headers) it may include
    # Test and benchmark programs keep their own headers beside their sources and
    # include them by name; the core and the backends spell every include from an
    # include directory.
    local_names: bool = False


_CORE_DIRS = ("module", "include")
_BACKEND_DIRS = ("include", "backends")

PROGRAMS: tuple[Program, ...] = (
    # redisai.so: every module/ folder but the host's; the order is LINE's.
    Program(tuple(f for f in LINE if f != "include/redisai"), _CORE_DIRS, LINE),
    Program(("include/redisai",), (), ("include/redisai",)),
    # include/redisai_llapi.h: the LLAPI header's old path, a one-line include.
    Program(("include",), ("include",), ("include/redisai",)),
    # redisai-backend-host: the contracts, the core's leaves it compiles in, the
    # wire and shared memory, and the loader's reading of a backend file.
    Program(("module/isolation/host",), _CORE_DIRS,
            ("include/redisai", "module/core", "module/isolation", "module/isolation/host",
             "module/loader/backend_file.h", "module/loader/backend_manifest.h")),
    Program(("backends/common",), _BACKEND_DIRS, ("include/redisai", "backends/common")),
    Program(("backends/tensorflow",), _BACKEND_DIRS,
            ("include/redisai", "backends/common", "backends/tensorflow")),
    Program(("backends/torch",), _BACKEND_DIRS,
            ("include/redisai", "backends/common", "backends/torch")),
    Program(("backends/onnxruntime",), _BACKEND_DIRS,
            ("include/redisai", "backends/common", "backends/onnxruntime")),
    # The TFLITE backend, and its check program (tfl_check_main.c) from the same folder.
    Program(("backends/tflite",), _BACKEND_DIRS,
            ("include/redisai", "backends/common", "backends/tflite")),
    Program(("tests/fault_backend",), _BACKEND_DIRS,
            ("include/redisai", "backends/common", "tests/fault_backend"), local_names=True),
    Program(("tests/fixtures/backends",), ("include",),
            ("include/redisai", "tests/fixtures/backends"), local_names=True),
    Program(("tests/llapi",), ("include",), ("include/redisai", "include", "tests/llapi"),
            local_names=True),
    Program(("tests/llapi_impl",), ("include",),
            ("include/redisai", "include", "tests/llapi_impl"), local_names=True),
    # The floor tools; tflite_floor.c compiles the TFLITE backend's LiteRT calls and instances.
    Program(("bench/floor",), _BACKEND_DIRS,
            ("include/redisai", "backends/common", "backends/tflite", "bench/floor"),
            local_names=True),
)

SOURCE_SUFFIXES = (".c", ".h", ".cpp", ".cc")
_INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


@dataclass(frozen=True)
class Include:
    source: str        # repository-relative path of the including file
    line: int
    spelled: str       # as written between the quotes
    target: str | None  # repository-relative path it resolves to; None: outside the repo


def _folder_of(path: str) -> str:
    return path.rsplit("/", 1)[0] if "/" in path else ""


def program_of(path: str) -> Program | None:
    """The program a source belongs to: the one naming its folder."""
    folder = _folder_of(path)
    best: Program | None = None
    best_len = -1
    for prog in PROGRAMS:
        for f in prog.folders:
            if folder == f and len(f) > best_len:
                best, best_len = prog, len(f)
    return best


def sources(root: Path = paths.ROOT) -> list[str]:
    """Every C/C++ source and header of the programs, repository-relative, sorted."""
    found: set[str] = set()
    for prog in PROGRAMS:
        for f in prog.folders:
            d = root / f
            if not d.is_dir():
                continue
            for p in d.iterdir():
                if p.is_file() and p.suffix in SOURCE_SUFFIXES:
                    found.add(p.relative_to(root).as_posix())
    return sorted(found)


def _resolve(root: Path, source: str, spelled: str,
             include_dirs: Iterable[str]) -> tuple[str | None, bool]:
    """(target, found only in the including file's own folder), searching as the compiler
    searches a quoted include: the including file's folder, then the -I directories."""
    def found(p: Path) -> str | None:
        return p.resolve().relative_to(root.resolve()).as_posix() if p.is_file() else None

    via_dirs = next((t for t in (found(root / d / spelled) for d in include_dirs) if t), None)
    beside = found(root / _folder_of(source) / spelled)
    if beside is not None:
        return beside, via_dirs is None
    return via_dirs, False


def includes(root: Path = paths.ROOT) -> tuple[list[Include], list[str]]:
    """Every quoted include of every source, and the problems of spelling found on the way:
    an include found only beside the including file (not spelled from an include
    directory), and one spelled like a project header that resolves nowhere."""
    found: list[Include] = []
    problems: list[str] = []
    basenames = {Path(s).name for s in sources(root) if s.endswith(".h")}
    for src in sources(root):
        prog = program_of(src)
        assert prog is not None
        text = (root / src).read_text(encoding="utf-8", errors="replace")
        for m in _INCLUDE.finditer(text):
            line = text.count("\n", 0, m.start()) + 1
            spelled = m.group(1)
            target, local_only = _resolve(root, src, spelled, prog.include_dirs)
            where = f"{src}:{line}: \"{spelled}\""
            if target is None and Path(spelled).name in basenames:
                problems.append(f"{where} names a project header but resolves to none: spell it "
                                f"from {', '.join(prog.include_dirs) or 'the folder'}")
            elif local_only and not prog.local_names:
                problems.append(f"{where} resolves only beside the file: spell it from "
                                f"{' or '.join(prog.include_dirs)} (folder-qualified)")
            found.append(Include(src, line, spelled, target))
    return found, problems


def _rank(path: str) -> int:
    """Position on LINE of the folder holding path (-1: not on it)."""
    folder = _folder_of(path)
    return LINE.index(folder) if folder in LINE else -1


def _allowed(src: str, target: str) -> bool:
    if _folder_of(src) == _folder_of(target):
        return True
    prog = program_of(src)
    assert prog is not None
    if prog.may_use is LINE:
        rank = _rank(target)
        return rank >= 0 and rank <= _rank(src)
    return any(unit_of(target) == unit_of(u) or _folder_of(target) == u for u in prog.may_use)


def unit_of(path: str) -> str:
    """A .c and its .h are one unit: the path without its suffix."""
    return path.rsplit(".", 1)[0]


def unit_graph(found: Iterable[Include]) -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {}
    for inc in found:
        if inc.target is None:
            continue
        a, b = unit_of(inc.source), unit_of(inc.target)
        graph.setdefault(a, set())
        graph.setdefault(b, set())
        if a != b:
            graph[a].add(b)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected parts of more than one unit (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []
    counter = 0
    for start in sorted(graph):
        if start in index:
            continue
        work: list[tuple[str, list[str]]] = [(start, sorted(graph[start]))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, todo = work[-1]
            if todo:
                nxt = todo.pop()
                if nxt not in index:
                    index[nxt] = low[nxt] = counter
                    counter += 1
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, sorted(graph.get(nxt, ()))))
                elif nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                part: list[str] = []
                while True:
                    n = stack.pop()
                    on_stack.discard(n)
                    part.append(n)
                    if n == node:
                        break
                if len(part) > 1:
                    out.append(sorted(part))
    return out


def check(root: Path = paths.ROOT) -> list[str]:
    """Every violation of the layer rules, one line each; empty when the tree keeps them."""
    found, problems = includes(root)
    for inc in found:
        if inc.target is not None and not _allowed(inc.source, inc.target):
            problems.append(f"{inc.source}:{inc.line}: \"{inc.spelled}\" -> {inc.target}: "
                            f"{_folder_of(inc.source)}/ may not use {_folder_of(inc.target)}/")
    for part in cycles(unit_graph(found)):
        problems.append("include cycle between units: " + " <-> ".join(part))
    return problems


def figures(root: Path = paths.ROOT) -> dict[str, int]:
    """Files at the module/ root, units in include cycles, backend includes of core headers."""
    found, _ = includes(root)
    in_cycles = sum(len(p) for p in cycles(unit_graph(found)))
    backend_core = sum(1 for i in found
                       if i.source.startswith("backends/") and i.target is not None
                       and i.target.startswith("module/"))
    at_root = sum(1 for p in (root / "module").iterdir()
                  if p.is_file() and p.suffix in SOURCE_SUFFIXES)
    return {"module_root_files": at_root, "units_in_cycles": in_cycles,
            "backend_includes_of_core_headers": backend_core}


# --------------------------------------------------------------------------------------
# The same rules on calls: what each object file of a build refers to
# --------------------------------------------------------------------------------------

_TARGETS = ("redisai", "redisai-backend-host", "redisai_tensorflow", "redisai_torch",
            "redisai_onnxruntime", "redisai_tflite", "redisai_tflite_check")


def _nm(obj: Path) -> tuple[set[str], set[str]]:
    """(defined, undefined) global symbols of an object file. Common symbols (the
    RedisModule_* pointers redismodule.h puts in every file) count as neither."""
    out = subprocess.run(["nm", "--format=posix", str(obj)], capture_output=True, text=True,
                         check=True).stdout
    defined: set[str] = set()
    undefined: set[str] = set()
    for line in out.splitlines():
        parts = line.split()
        if len(parts) < 2:
            continue
        name, kind = parts[0], parts[1]
        if kind == "U":
            undefined.add(name)
        elif kind in "TDBRVW":
            defined.add(name)
    return defined, undefined


def call_graph(build_dir: Path = paths.BUILD_DIR) -> dict[str, dict[str, set[str]]]:
    """Per target: unit -> units whose functions or data its object refers to."""
    graphs: dict[str, dict[str, set[str]]] = {}
    for target in _TARGETS:
        tdir = build_dir / "CMakeFiles" / f"{target}.dir"
        link = tdir / "link.txt"
        if not link.is_file():
            continue
        # The objects the target links now (a moved file leaves its old object behind).
        words = [w.strip('"') for w in link.read_text().split()]
        objs = [build_dir / w for w in words if w.endswith(".o")]
        units: dict[str, tuple[set[str], set[str]]] = {}
        for obj in objs:
            rel = obj.relative_to(tdir).as_posix()
            src = rel[:-2]  # module/engine/dag.c.o -> module/engine/dag.c
            units[unit_of(src)] = _nm(obj)
        owner: dict[str, str] = {}
        for unit, (defined, _) in units.items():
            for name in defined:
                owner.setdefault(name, unit)
        graph: dict[str, set[str]] = {u: set() for u in units}
        for unit, (_, undefined) in units.items():
            for name in undefined:
                to = owner.get(name)
                if to is not None and to != unit:
                    graph[unit].add(to)
        graphs[target] = graph
    return graphs


def check_calls(build_dir: Path = paths.BUILD_DIR) -> list[str]:
    """Calls (and references to data) between the object files of each program must keep
    the include rules: down the layer order, and no cycle between units.
    This also sees what an include cannot: a hand-written prototype, or one header
    shared by a folder (isolation/core, llapi/)."""
    problems: list[str] = []
    for target, graph in call_graph(build_dir).items():
        for unit, tos in sorted(graph.items()):
            for to in sorted(tos):
                if not _allowed(unit + ".c", to + ".c"):
                    problems.append(f"{target}: {unit} calls into {to}: "
                                    f"{_folder_of(unit)}/ may not use {_folder_of(to)}/")
        for part in cycles(graph):
            problems.append(f"{target}: call cycle between units: " + " <-> ".join(part))
    return problems
