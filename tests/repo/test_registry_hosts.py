"""No package registry's host name appears in the repository: code, tests, docs, CI.

The build reaches Debian through the machine's own apt sources (build_tools/apt_sources.py)
and Python packages through pip's own configuration, so nothing in the tree names a registry
or a mirror of one. Scans every file git tracks or would add (untracked, not ignored); reads
sources only, starts no server.
"""
from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from paths import ROOT

# Registry domains, spelled in parts so that this file does not match itself. A host is a
# registry's when it is one of these or ends with "." and one of these.
REGISTRY_DOMAINS: tuple[str, ...] = tuple(".".join(parts) for parts in (
    ("pypi", "org"), ("pythonhosted", "org"), ("pypi", "python", "org"),
    ("debian", "org"),                      # deb., ftp.<cc>., security., archive., snapshot.
    ("archive", "ubuntu", "com"), ("security", "ubuntu", "com"), ("ports", "ubuntu", "com"),
    ("npmjs", "org"), ("npmjs", "com"), ("yarnpkg", "com"),
    ("download", "pytorch", "org"), ("anaconda", "org"), ("repo", "anaconda", "com"),
    ("crates", "io"), ("rubygems", "org"), ("proxy", "golang", "org"),
    ("repo1", "maven", "org"), ("repo", "maven", "apache", "org"),
    ("deb", "nodesource", "com"),
))

_HOST = re.compile(
    r"(?<![\w-])((?:[a-z0-9-]+\.)*(?:" + "|".join(re.escape(d) for d in REGISTRY_DOMAINS)
    + r"))(?![\w-]|\.\w)", re.IGNORECASE)


def registry_hosts(text: str) -> list[str]:
    """The registry host names in text, in order."""
    return _HOST.findall(text)


def _repository_files() -> list[Path]:
    out = subprocess.run(["git", "-C", str(ROOT), "ls-files", "-z", "--cached", "--others",
                          "--exclude-standard"], capture_output=True, check=True).stdout
    return [ROOT / name for name in sorted(set(out.decode().split("\0"))) if name]


@pytest.mark.parametrize("line, hosts", [
    ("fallback http://deb.{d}/debian", ["deb.{d}"]),
    ("URIs: https://ftp.de.{d}/debian-security", ["ftp.de.{d}"]),
    ("no_proxy=.{d}", ["{d}"]),
    ("see {d}.example and my{d}", []),       # another host, another name
])
def test_the_scan_finds_hosts_and_their_subdomains(line: str, hosts: list[str]) -> None:
    d = ".".join(("debian", "org"))
    assert registry_hosts(line.format(d=d)) == [h.format(d=d) for h in hosts]
    pypi = ".".join(("files", "pythonhosted", "org"))
    assert registry_hosts(f"pip download https://{pypi.upper()}/x.whl") == [pypi.upper()]


def test_no_registry_host_in_the_repository() -> None:
    found = []
    files = _repository_files()
    assert len(files) > 100 and ROOT / "build_tools" / "pins.py" in files
    for path in files:
        if not path.is_file():
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue  # binary: pictures, archives
        for n, line in enumerate(text.splitlines(), 1):
            hosts = registry_hosts(line)
            if hosts:
                found.append(f"{path.relative_to(ROOT)}:{n}: {', '.join(hosts)}")
    assert not found, "package registry hosts in the repository:\n" + "\n".join(found)
