"""Redis 8 and Valkey 9 for the tests, built from Debian unstable's source packages.

No PyPI wheel carries them, and Debian unstable's binary packages need a newer
glibc than Debian 12's; their sources build with Debian 12's toolchain. `setup`
makes one folder per server (pins.SOURCE_SERVER_PINS) in the layout servers.py
uses for the wheels' servers:

    <cache>/servers/<name>/bin/<executable>    built from the source package
    <cache>/servers/<name>/SOURCE              the package, its version, the make command

1. one `apt-get update` of a private deb-src list for pins.SOURCE_SERVERS_SUITE,
   at the machine's own Debian archive with its keyring (apt_sources.py,
   headers.PrivateApt: the machine's sources, lists and caches are not touched);
2. `apt-get source --download-only <package>=<version>`: apt checks the .dsc and
   the tarballs against the hashes of the signed Sources index; then
   `dpkg-source -x` (from dpkg-dev) checks the tarballs against the .dsc's
   checksums again, unpacks them and applies Debian's patches (its security
   fixes among them). apt-get source would unpack with `dpkg-source --no-check`,
   so the unpacking is done here;
3. `make` (MAKE_ARGS) with the dependencies the sources bundle (jemalloc, Lua,
   hiredis, ...): nothing is downloaded. Redis 8's vector sets are compiled into
   the server; the modules that download their own dependencies
   (BUILD_WITH_MODULES=yes) are not built. About 1-3 minutes each on 2 cores,
   with a progress line every MAKE_HEARTBEAT_S seconds;
4. the executable must answer `--version` with the pinned product and version;
   it is copied into bin/ and the source tree is deleted.

A folder whose SOURCE matches the pin and whose executable answers `--version`
is kept: setup is idempotent, and a changed pin builds again. Tests find the
executables through servers.executable(name), which never builds anything.
"""
from __future__ import annotations

import os
import platform
import shlex
import shutil
import tempfile
import time
from pathlib import Path
from typing import Sequence

from . import apt_sources, headers, pins, servers
from ._proc import run_logged, run_quiet
from .errors import BuildError

MAKE_JOBS = 2
# No TLS (the tests use none, and it would need libssl-dev), no systemd
# notification; BUILD_WITH_MODULES=no keeps Redis 8's downloading modules out.
MAKE_ARGS: tuple[str, ...] = ("BUILD_TLS=no", "USE_SYSTEMD=no", "BUILD_WITH_MODULES=no")
MAKE_HEARTBEAT_S = 15.0


def _say(msg: str) -> None:
    print(f"[servers] {msg}", flush=True)


# --- names and texts (pure) --------------------------------------------------------

def upstream_version(package_version: str) -> str:
    """A Debian version without its epoch and revision: `5:8.0.6-3` -> `8.0.6`."""
    _, _, rest = package_version.rpartition(":")
    upstream, sep, revision = rest.rpartition("-")
    if not sep or not upstream or not revision:
        raise BuildError(f"bad Debian version {package_version!r}: "
                         "write [epoch:]upstream-revision")
    return upstream


def package_spec(pin: pins.SourceServerPin) -> str:
    """`redis=5:8.0.6-3`: what apt-get source is asked for."""
    return f"{pin.package}={pin.package_version}"


def dsc_name(pin: pins.SourceServerPin) -> str:
    """`redis_8.0.6-3.dsc`: the .dsc file's name (without the epoch)."""
    return f"{pin.package}_{pin.package_version.rpartition(':')[2]}.dsc"


def make_command(jobs: int = MAKE_JOBS) -> list[str]:
    return ["make", f"-j{jobs}", *MAKE_ARGS]


def source_text(pin: pins.SourceServerPin) -> str:
    """What SOURCE holds for this pin: a changed pin or make command makes the folder stale."""
    return (f"debian source package {package_spec(pin)} ({pins.SOURCE_SERVERS_SUITE})\n"
            f"version {pin.version}\n"
            f"built with {shlex.join(make_command())}\n")


# --- fetching and building ---------------------------------------------------------

def fetch_source(pin: pins.SourceServerPin, apt: headers.PrivateApt, where: Path,
                 archive: str) -> Path:
    """The unpacked, patched source tree of the pin's package under `where`.

    `archive` names the private sources in messages. A failed download is a
    BuildError that names the package: the archive did not answer, or the pinned
    version left the suite.
    """
    spec = package_spec(pin)
    download = where / "download"
    download.mkdir()
    _say(f"{pin.name}: apt-get source --download-only {spec} (files checked against the "
         "signed Sources index)")
    try:
        apt.run(["source", "--download-only", spec], f"apt-get source {spec}", cwd=download)
    except BuildError as exc:
        raise BuildError(
            f"{pin.name}: cannot fetch the Debian source package {spec} from {archive}: "
            f"the archive did not answer, or {spec} is no longer in "
            f"{pins.SOURCE_SERVERS_SUITE} (then move {servers.pins_table(pin)})",
            command=exc.command, returncode=exc.returncode, output=exc.output) from None
    dsc = download / dsc_name(pin)
    if not dsc.is_file():
        got = ", ".join(sorted(p.name for p in download.iterdir())) or "nothing"
        raise BuildError(f"apt-get source {spec} left no {dsc.name} (got: {got})")
    tree = where / "tree"
    _say(f"{pin.name}: dpkg-source -x {dsc.name} (checksums of the .dsc checked again, "
         "Debian's patches applied)")
    run_quiet(["dpkg-source", "-x", dsc.name, str(tree)], f"dpkg-source -x {dsc.name}",
              cwd=download, env={"LC_ALL": "C"})
    shutil.rmtree(download)
    if not (tree / "Makefile").is_file():
        raise BuildError(f"{dsc.name} unpacked without a Makefile in {tree}")
    return tree


def build_tree(pin: pins.SourceServerPin, tree: Path) -> Path:
    """Runs make in the tree, printing a line now and then; the built executable."""
    cmd = make_command()
    log = tree / "make.log"
    _say(f"building {pin.product} {pin.version} ({shlex.join(cmd)}, about 1-3 minutes on 2 "
         "cores; a failure repeats the end of its output)")
    started = time.monotonic()

    def heartbeat(elapsed: float) -> None:
        _say(f"building {pin.product} {pin.version}: {elapsed:.0f} s")

    run_logged(cmd, f"make of {pin.package} {pin.package_version}", log=log, cwd=tree,
               heartbeat=heartbeat, every_s=MAKE_HEARTBEAT_S)
    exe = tree / "src" / pin.executable
    if not os.access(exe, os.X_OK):
        raise BuildError(f"make of {pin.package} {pin.package_version} left no src/{pin.executable}")
    _say(f"built {pin.product} {pin.version} in {time.monotonic() - started:.0f} s")
    return exe


def build_server(pin: pins.SourceServerPin, apt: headers.PrivateApt, archive: str) -> Path:
    """The pin's folder in the cache, made from its source package; its executable."""
    final = servers.server_dir(pin)

    def fill(tmp: Path) -> None:
        os.chmod(tmp, 0o755)  # mkdtemp's 0700 would hide the server from other users
        with tempfile.TemporaryDirectory(prefix="source-", dir=tmp) as work:
            built = build_tree(pin, fetch_source(pin, apt, Path(work), archive))
            exe = tmp / "bin" / pin.executable
            exe.parent.mkdir()
            shutil.copy2(built, exe)
        _say(f"{pin.name}: {exe.name} --version: {servers.check_version(pin, exe)}")
        (tmp / servers.SOURCE_NAME).write_text(source_text(pin))

    headers.atomic_dir(final, fill)
    _say(f"{pin.name}: {servers.executable_path(pin)}")
    return servers.executable_path(pin)


def ensure_source_servers(wanted: Sequence[pins.SourceServerPin] = pins.SOURCE_SERVER_PINS
                          ) -> None:
    """Every source-built server in the cache (the `setup` step): one apt-get update for
    all that are missing or stale, then a build each."""
    stale = []
    for pin in wanted:
        if servers.is_current(pin, source_text(pin)):
            _say(f"{pin.name}: {pin.product} {pin.version} present in {servers.server_dir(pin)}")
        else:
            stale.append(pin)
    if not stale:
        return
    if platform.system() != "Linux" or shutil.which("apt-get") is None:
        _say(f"skipped {', '.join(p.name for p in stale)}: building them needs Debian's "
             "apt-get; the tests run on the other servers")
        return
    if shutil.which("dpkg-source") is None:
        raise BuildError("dpkg-source is not on PATH: install dpkg-dev "
                         "(`python3 -m build_tools setup` does)")
    suite = pins.SOURCE_SERVERS_SUITE
    sources, proxy = apt_sources.private_sources("deb-src", suite, "main")
    apt = headers.PrivateApt(f"{suite}-src", say=_say)
    try:
        apt.prepare(sources, proxy)
        names = ", ".join(package_spec(p) for p in stale)
        _say(f"fetching {names}: apt-get update ({sources.summary})")
        try:
            apt.update(f"apt-get update for {suite} sources")
        except BuildError as exc:
            raise BuildError(
                f"cannot fetch the Debian source packages {names}: the archive "
                f"({sources.summary}) did not answer apt-get update",
                command=exc.command, returncode=exc.returncode, output=exc.output) from None
        for pin in stale:
            build_server(pin, apt, sources.summary)
    finally:
        apt.discard()
