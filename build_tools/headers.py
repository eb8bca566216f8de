"""C headers no wheel ships, fetched from Debian into a cache outside the repo.

- redismodule.h: from the redis SOURCE package of the server's suite
  (pins.REDIS_SUITE), via a private apt configuration; only the header is
  kept, at <cache>/redis-<version>/include/redismodule.h.
- ONNX Runtime's C API headers: from trixie's libonnxruntime-dev .deb,
  downloaded with a private apt configuration and unpacked with dpkg -x
  (never installed), at <cache>/onnxruntime-api<N>/include/onnxruntime/*.h.

The system's apt configuration, lists and caches are never touched: every
apt-get call names its own sources file, lists and cache folders. The
private sources file takes its archive URIs (and their Signed-By keyrings)
from the machine's own apt sources, and apt-get reads the machine's
apt.conf.d (proxies, auth) as usual: see apt_sources.py. A cached header is
used as is; delete the cache folder (or point XDG_CACHE_HOME elsewhere) to
fetch again.
"""
from __future__ import annotations

import os
import re
import shutil
import tarfile
import tempfile
from pathlib import Path
from typing import Callable

from . import apt_sources, paths, pins
from ._proc import run_quiet
from .errors import BuildError


def _say(msg: str) -> None:
    print(f"[headers] {msg}", flush=True)


class PrivateApt:
    """apt-get with its own sources, lists and caches under <cache>/apt/<name>/
    (servers.py fetches OpenSSL 1.1 with it too; `say` prints its progress lines)."""

    def __init__(self, name: str, say: Callable[[str], None] = _say) -> None:
        self.say = say
        self.root = paths.cache_dir() / "apt" / name
        # A .sources name: apt reads Dir::Etc::sourcelist as deb822 then, which
        # keeps Signed-By (even an inline key) as the machine's entry has it.
        self.sources = self.root / "private.sources"
        self.lists = self.root / "lists"
        self.cache = self.root / "cache"

    def options(self) -> list[str]:
        opts = {
            "Dir::Etc::sourcelist": str(self.sources),
            "Dir::Etc::sourceparts": "/nonexistent",
            "Dir::State::Lists": str(self.lists),
            "Dir::Cache": str(self.cache),
            "Dir::Cache::archives": str(self.cache / "archives"),
            "Debug::NoLocking": "true" if os.geteuid() != 0 else "false",
        }
        if os.geteuid() == 0:
            # The cache lies in root's home, which apt's _apt user cannot write.
            opts["APT::Sandbox::User"] = "root"
        out: list[str] = []
        for key, value in opts.items():
            out += ["-o", f"{key}={value}"]
        return out

    def prepare(self, sources: apt_sources.PrivateSources, proxy: str) -> None:
        for d in (self.lists / "partial", self.cache / "archives" / "partial"):
            d.mkdir(parents=True, exist_ok=True)
        self.sources.write_text(sources.text)
        self.say(sources.note)
        self.say(f"proxy: {proxy}")

    def discard(self) -> None:
        """Drops the lists and caches: only the extracted headers are kept."""
        shutil.rmtree(self.root, ignore_errors=True)
        try:
            self.root.parent.rmdir()  # <cache>/apt, when no other fetch left files
        except OSError:
            pass

    def update(self, what: str) -> None:
        # Without --error-on=any an unreachable mirror is only a warning, and
        # the failure surfaces later as a puzzling "no deb-src URIs".
        self.run(["update", "--error-on=any"], what)

    def run(self, args: list[str], what: str, cwd: Path | None = None) -> str:
        return run_quiet(["apt-get", *self.options(), *args], what, cwd=cwd,
                         env={"DEBIAN_FRONTEND": "noninteractive", "LC_ALL": "C"})


def atomic_dir(final: Path, fill_tmp: Callable[[Path], None]) -> None:
    """Builds a folder in a temp dir beside `final`, then renames it into place."""
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{final.name}.", dir=final.parent))
    try:
        fill_tmp(tmp)
        if final.exists():
            shutil.rmtree(final)
        os.replace(tmp, final)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)


# --- redismodule.h -----------------------------------------------------------

def redismodule_include_dir() -> Path:
    """The folder holding redismodule.h for pins.REDIS_VERSION; fetched on first use."""
    final = paths.cache_dir() / f"redis-{pins.REDIS_VERSION}" / "include"
    if (final / "redismodule.h").is_file():
        return final
    sources, proxy = apt_sources.private_sources("deb-src", pins.REDIS_SUITE, "main")
    apt = PrivateApt(f"{pins.REDIS_SUITE}-src")

    def fill(tmp: Path) -> None:
        apt.prepare(sources, proxy)
        _say(f"fetching redismodule.h: apt-get update ({sources.summary})")
        apt.update(f"apt-get update for {pins.REDIS_SUITE} sources")
        download = tmp / "download"
        download.mkdir()
        _say(f"apt-get source --download-only {pins.REDIS_SOURCE_PACKAGE}")
        apt.run(["source", "--download-only", pins.REDIS_SOURCE_PACKAGE],
                "apt-get source", cwd=download)
        tarball = download / pins.REDIS_ORIG_TARBALL
        if not tarball.is_file():
            got = ", ".join(sorted(p.name for p in download.iterdir())) or "nothing"
            raise BuildError(f"the {pins.REDIS_SUITE} redis source package has no "
                             f"{pins.REDIS_ORIG_TARBALL} (got: {got}); "
                             "update pins.REDIS_VERSION")
        with tarfile.open(tarball, "r:gz") as tar:
            try:
                member = tar.getmember(pins.REDIS_HEADER_MEMBER)
            except KeyError:
                raise BuildError(f"{tarball.name} has no {pins.REDIS_HEADER_MEMBER}") from None
            src = tar.extractfile(member)
            if src is None:
                raise BuildError(f"{pins.REDIS_HEADER_MEMBER} in {tarball.name} is not a file")
            with src:
                (tmp / "redismodule.h").write_bytes(src.read())
        shutil.rmtree(download)

    try:
        atomic_dir(final, fill)
    finally:
        apt.discard()
    _say(f"redismodule.h cached in {final}")
    return final


# --- ONNX Runtime C headers --------------------------------------------------

_ORT_API_RE = re.compile(rb"^#define\s+ORT_API_VERSION\s+(\d+)\s*$", re.MULTILINE)


def onnxruntime_include_dir() -> Path:
    """The folder holding onnxruntime_c_api.h (API pins.ORT_API_VERSION); fetched on first use."""
    final = paths.cache_dir() / f"onnxruntime-api{pins.ORT_API_VERSION}" / "include" / "onnxruntime"
    if (final / "onnxruntime_c_api.h").is_file():
        return final
    sources, proxy = apt_sources.private_sources("deb", pins.ORT_HEADERS_SUITE, "main")
    apt = PrivateApt(pins.ORT_HEADERS_SUITE)

    def fill(tmp: Path) -> None:
        apt.prepare(sources, proxy)
        _say(f"fetching ONNX Runtime headers: apt-get update ({sources.summary})")
        apt.update(f"apt-get update for {pins.ORT_HEADERS_SUITE}")
        download = tmp / "download"
        download.mkdir()
        _say(f"apt-get download {pins.ORT_HEADERS_PACKAGE} (not installed)")
        apt.run(["download", pins.ORT_HEADERS_PACKAGE], "apt-get download", cwd=download)
        debs = sorted(download.glob(f"{pins.ORT_HEADERS_PACKAGE}_*.deb"))
        if len(debs) != 1:
            raise BuildError(f"apt-get download left {[p.name for p in debs]}, "
                             f"expected one {pins.ORT_HEADERS_PACKAGE}_*.deb")
        unpacked = tmp / "unpacked"
        run_quiet(["dpkg", "-x", str(debs[0]), str(unpacked)], f"dpkg -x {debs[0].name}")
        headers = unpacked / "usr" / "include" / "onnxruntime"
        api_h = headers / "onnxruntime_c_api.h"
        if not api_h.is_file():
            raise BuildError(f"{debs[0].name} has no usr/include/onnxruntime/onnxruntime_c_api.h")
        m = _ORT_API_RE.search(api_h.read_bytes())
        found = int(m.group(1)) if m else None
        if found != pins.ORT_API_VERSION:
            raise BuildError(f"{debs[0].name} has ORT_API_VERSION {found}, "
                             f"pins.ORT_API_VERSION is {pins.ORT_API_VERSION}")
        (tmp / "include").mkdir()
        os.replace(headers, tmp / "include" / "onnxruntime")
        (tmp / "SOURCE").write_text(debs[0].name + "\n")
        shutil.rmtree(download)
        shutil.rmtree(unpacked)

    try:
        atomic_dir(final.parent.parent, fill)
    finally:
        apt.discard()
    _say(f"ONNX Runtime headers cached in {final}")
    return final


def onnxruntime_headers_version() -> str | None:
    """The ONNX Runtime version of the cached headers ("1.21.0"), from the name of the
    .deb they came from (<cache>/onnxruntime-api<N>/SOURCE); None when unknown."""
    source = onnxruntime_include_dir().parent.parent / "SOURCE"
    try:
        deb = source.read_text().strip()
    except OSError:
        return None
    m = re.match(rf"^{re.escape(pins.ORT_HEADERS_PACKAGE)}_(\d+(?:\.\d+)+)", deb)
    return m.group(1) if m else None
