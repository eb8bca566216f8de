"""The CUDA libraries a `gpu` variant carries in its lib/.

A CUDA build of a framework comes as its own wheel plus the `nvidia-*` wheels it
requires (torch's dependencies, onnxruntime-gpu's `[cuda,cudnn]` extras). Inside
Python the framework finds them through its own loader; a backend folder has no
Python, so every library it can load must lie in its lib/ (RUNPATH `$ORIGIN`).
Which ones: the DT_NEEDED closure of the libraries the backend links and of
those the framework opens with dlopen (cuDNN's engines, ONNX Runtime's CUDA
provider), over the .so files of the unpacked wheels. A name found in no wheel
must be the system's C/C++ runtime, zlib (SYSTEM) or the NVIDIA driver's
`libcuda.so.1`, which comes with the driver and never travels with a tree.
"""
from __future__ import annotations

import fnmatch
import re
from pathlib import Path
from typing import Callable, Sequence

from .errors import BuildError

# The driver's library: installed with the NVIDIA driver on a GPU machine, absent
# elsewhere; a CUDA tree needs it from the system and must never carry it.
DRIVER = re.compile(r"^libcuda\.so\.1$")
# What the CUDA wheels themselves take from the system beyond the C/C++ runtime:
# cuDNN links zlib, which every distribution has (CPython's zlib module needs it).
SYSTEM = re.compile(r"^libz\.so\.1$")


def shared_objects(site: Path) -> dict[str, Path]:
    """File name -> path of every shared object under site (the first by path order)."""
    index: dict[str, Path] = {}
    for path in sorted(site.rglob("*.so*")):
        if path.is_file() and not path.is_symlink() and re.search(r"\.so(\.\d+)*$", path.name):
            index.setdefault(path.name, path)
    return index


def matching(site: Path, patterns: Sequence[str]) -> list[Path]:
    """The shared objects under site whose site-relative path matches a pattern."""
    found: list[Path] = []
    for path in shared_objects(site).values():
        rel = path.relative_to(site).as_posix()
        if any(fnmatch.fnmatchcase(rel, p) for p in patterns):
            found.append(path)
    return found


def closure(site: Path, roots: Sequence[Path], needed_of: Callable[[Path], list[str]],
            from_system: Callable[[str], bool]) -> list[Path]:
    """roots and every shared object of site they need, directly or not, in the
    order found. Raises BuildError naming each name that is in no wheel and not
    the system's (from_system) nor the driver's."""
    index = shared_objects(site)
    order: list[Path] = []
    seen: set[str] = set()
    missing: list[str] = []
    queue = list(roots)
    while queue:
        lib = queue.pop(0)
        if lib.name in seen:
            continue
        seen.add(lib.name)
        order.append(lib)
        for name in needed_of(lib):
            if name in index:
                queue.append(index[name])
            elif not (DRIVER.match(name) or SYSTEM.match(name) or from_system(name)):
                missing.append(f"{name} (NEEDED by {lib.name})")
    if missing:
        raise BuildError(f"the CUDA libraries of {site} are incomplete: "
                         f"{', '.join(sorted(set(missing)))} is in none of its wheels "
                         "and is not a system C/C++ runtime library")
    return order
