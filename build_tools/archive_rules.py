"""What a RedisAI package archive may hold; shared by package and install-package.

One top folder (`redisai-<version>/` for the core, `redisai_<name>-<version>-<variant>/`
for a backend), and under it only folders, regular files and symbolic links
whose target is relative and stays beside them (no `..`): the lib/ aliases of
a backend are such links. Never absolute names, `..`, hard links, devices or
fifos. `package` refuses to write anything else, `install-package` to unpack it.
"""
from __future__ import annotations

import re

ARCHIVE_SUFFIX = ".tar.gz"
CORE_TOP = re.compile(r"^redisai-(?P<version>[0-9][0-9A-Za-z.+]*)$")
BACKEND_TOP = re.compile(
    r"^redisai_(?P<name>[a-z]+)-(?P<version>[0-9][0-9A-Za-z.+]*)-(?P<variant>[A-Za-z0-9_]+)$")


def core_archive_name(version: str) -> str:
    return f"redisai-{version}-core{ARCHIVE_SUFFIX}"


def backend_archive_name(folder: str) -> str:
    return f"{folder}{ARCHIVE_SUFFIX}"


def name_problem(name: str) -> str | None:
    """Why a member name is refused, or None."""
    if not name:
        return "empty name"
    if name.startswith("/"):
        return "absolute path"
    parts = name.rstrip("/").split("/")
    if ".." in parts:
        return "'..' in the path"
    if any(p in ("", ".") for p in parts):
        return "empty or '.' path component"
    return None


def link_problem(target: str) -> str | None:
    """Why a symbolic link target is refused, or None."""
    if not target:
        return "empty link target"
    if target.startswith("/"):
        return f"link to an absolute path {target!r}"
    if ".." in target.split("/"):
        return f"link target {target!r} leaves its folder ('..')"
    return None
