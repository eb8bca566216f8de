"""Unpacking a package archive safely into an empty staging folder.

The archive is read as a stream (one pass over the gzip data, however large),
member by member; each is checked against archive_rules before anything is
written: one top folder, no absolute name or `..`, no member below a link,
no member twice, links relative and inside, no hard links, devices or fifos.
Files are created with O_EXCL|O_NOFOLLOW, so nothing written can land
outside the staging folder even if a check were wrong. The first refused
member stops the whole unpacking, naming the member and the reason.
"""
from __future__ import annotations

import os
import shutil
import tarfile
import zlib
from pathlib import Path
from typing import IO

from . import archive_rules
from .errors import BuildError
from .progress import CountingReader, Progress

_CHUNK = 1 << 20


def _refuse(archive: Path, member: str, why: str) -> BuildError:
    return BuildError(f"{archive.name}: refused member {member!r}: {why}")


def _write_file(src: IO[bytes], dst: Path, mode: int) -> None:
    fd = os.open(dst, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, mode)
    with os.fdopen(fd, "wb") as out:
        shutil.copyfileobj(src, out, _CHUNK)


def unpack(archive: Path, staging: Path) -> str:
    """Unpacks archive into staging (an empty folder); returns the archive's top folder."""
    progress = Progress("[install-package]", f"{archive.name} read",
                        archive.stat().st_size)
    top: str | None = None
    links: set[str] = set()
    try:
        with open(archive, "rb") as raw:
            counted = CountingReader(raw, progress)
            with tarfile.open(fileobj=counted, mode="r|gz") as tar:  # type: ignore[call-overload]
                for member in tar:
                    name = member.name.rstrip("/")
                    problem = archive_rules.name_problem(member.name)
                    if problem:
                        raise _refuse(archive, member.name, problem)
                    parts = name.split("/")
                    if top is None:
                        top = parts[0]
                    elif parts[0] != top:
                        raise _refuse(archive, member.name, f"outside the top folder {top}/")
                    for i in range(1, len(parts)):
                        if "/".join(parts[:i]) in links:
                            raise _refuse(archive, member.name, "below a symbolic link")
                    dst = staging / name
                    if dst.exists() or dst.is_symlink():
                        if not (member.isdir() and dst.is_dir() and not dst.is_symlink()):
                            raise _refuse(archive, member.name, "appears twice")
                    if member.isdir():
                        dst.mkdir(parents=True, exist_ok=True)
                    elif member.issym():
                        problem = archive_rules.link_problem(member.linkname)
                        if problem:
                            raise _refuse(archive, member.name, problem)
                        dst.parent.mkdir(parents=True, exist_ok=True)
                        os.symlink(member.linkname, dst)
                        links.add(name)
                    elif member.isreg():
                        dst.parent.mkdir(parents=True, exist_ok=True)
                        src = tar.extractfile(member)
                        assert src is not None
                        _write_file(src, dst, 0o755 if member.mode & 0o111 else 0o644)
                        os.utime(dst, (member.mtime, member.mtime))
                    elif member.islnk():
                        raise _refuse(archive, member.name, "hard link")
                    else:
                        raise _refuse(archive, member.name,
                                      "device file, fifo or other special file")
    except (tarfile.TarError, EOFError, zlib.error, OSError) as exc:
        raise BuildError(f"{archive}: cannot unpack: {exc}") from None
    if top is None:
        raise BuildError(f"{archive}: empty archive")
    progress.finish()
    return top
