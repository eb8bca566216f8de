"""build_tools/source_servers.py: the servers built from Debian source packages, their pins,
what SOURCE says, and when setup keeps or builds a folder again. Temporary folders only: the
cache is pointed at tmp_path, apt-get never runs (a fake PrivateApt stands in), and the "source
tree" is a Makefile that writes a shell script answering `--version`."""
from __future__ import annotations

import dataclasses
import os
import sys
from pathlib import Path

import pytest

from build_tools import _proc, apt_sources, pins, servers, source_servers
from build_tools.errors import BuildError

FAKE = pins.SourceServerPin("redis-9.9", "Redis", "9.9.1", "redis", "5:9.9.1-2", "redis-server")

SOURCES = apt_sources.PrivateSources(text="Types: deb-src\n", uris=("http://archive.test/debian",),
                                     summary="deb-src http://archive.test/debian sid main",
                                     note="archive from a test")


class FakeApt:
    """headers.PrivateApt without apt-get: records what it is asked; fails where told."""

    def __init__(self, fail: str = "") -> None:
        self.calls: list[list[str]] = []
        self.fail = fail
        self.discarded = False

    def prepare(self, sources: apt_sources.PrivateSources, proxy: str) -> None:
        self.calls.append(["prepare"])

    def update(self, what: str) -> None:
        self.calls.append(["update"])
        if self.fail == "update":
            raise BuildError(f"{what} failed", command=["apt-get", "update"], returncode=100,
                             output="Err:1 http://archive.test/debian sid InRelease\n"
                                    "  Could not resolve 'archive.test'")

    def run(self, args: list[str], what: str, cwd: Path | None = None) -> str:
        self.calls.append(args)
        if self.fail == "source":
            raise BuildError(f"{what} failed", command=["apt-get", *args], returncode=100,
                             output="E: Can not find version '5:9.9.1-2' of package 'redis'")
        return ""

    def discard(self) -> None:
        self.discarded = True


def version_script(line: str) -> str:
    return f"#!/bin/sh\necho '{line}'\n"


def fake_tree(where: Path, line: str = "Redis server v=9.9.1 sha=0:0 x=y", *,
              fails: bool = False) -> Path:
    """A source tree whose `make` leaves src/redis-server (a script that prints `line`)."""
    tree = where / "tree"
    tree.mkdir()
    (tree / "redis-server.in").write_text(version_script(line))
    recipe = ("\techo 'src/server.c:1: error: no such thing' && false\n" if fails else
              "\tmkdir -p src && cp redis-server.in src/redis-server && chmod +x src/redis-server\n")
    (tree / "Makefile").write_text("all:\n" + recipe)
    return tree


@pytest.fixture
def no_fetch(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """fetch_source makes fake_tree (recording the pins it was asked for) instead of apt-get."""
    fetched: list[str] = []

    def fetch(pin: pins.SourceServerPin, apt: object, where: Path, archive: str) -> Path:
        fetched.append(source_servers.package_spec(pin))
        return fake_tree(where, f"{pin.product} server v={pin.version} sha=0:0 x=y")

    monkeypatch.setattr(source_servers, "fetch_source", fetch)
    return fetched


@pytest.fixture
def fake_apt(monkeypatch: pytest.MonkeyPatch) -> FakeApt:
    apt = FakeApt()
    monkeypatch.setattr(source_servers.apt_sources, "private_sources",
                        lambda *args: (SOURCES, "none"))
    monkeypatch.setattr(source_servers.headers, "PrivateApt", lambda *args, **kw: apt)
    monkeypatch.setattr(source_servers.shutil, "which", lambda cmd: f"/usr/bin/{cmd}")
    return apt


# --- pins and names ------------------------------------------------------------------------

@pytest.mark.parametrize("package_version, upstream", [
    ("5:8.0.6-3", "8.0.6"), ("9.1.2-1", "9.1.2"), ("1:2.0-rc1-0+deb13u1", "2.0-rc1"),
])
def test_upstream_version(package_version: str, upstream: str) -> None:
    assert source_servers.upstream_version(package_version) == upstream


@pytest.mark.parametrize("bad", ["8.0.6", "5:8.0.6", "-3", ""])
def test_upstream_version_wants_a_debian_revision(bad: str) -> None:
    with pytest.raises(BuildError, match="bad Debian version"):
        source_servers.upstream_version(bad)


def test_each_source_pin_is_its_packages_upstream_version() -> None:
    assert [p.name for p in pins.SOURCE_SERVER_PINS] == ["redis-8.0", "valkey-9.1"]
    for pin in pins.SOURCE_SERVER_PINS:
        assert pin.version == source_servers.upstream_version(pin.package_version), pin
        assert pin.name == f"{pin.product.lower()}-{'.'.join(pin.version.split('.')[:2])}"
        assert pin.executable == f"{pin.product.lower()}-server"
        assert pin.package == pin.product.lower()


def test_server_names_and_lookup_know_the_source_servers() -> None:
    names = servers.server_names()
    assert names[-2:] == ["redis-8.0", "valkey-9.1"] and len(set(names)) == len(names)
    pin = servers.pin_for("valkey-9.1")
    assert isinstance(pin, pins.SourceServerPin) and pin.package_version == "9.1.2-1"
    assert servers.executable_name(pin) == "valkey-server"
    assert servers.pins_table(pin) == "pins.SOURCE_SERVER_PINS"
    assert servers.pins_table(servers.pin_for("redis-7.4")) == "pins.SERVER_PINS"


def test_spec_dsc_and_source_text() -> None:
    assert source_servers.package_spec(FAKE) == "redis=5:9.9.1-2"
    assert source_servers.dsc_name(FAKE) == "redis_9.9.1-2.dsc"  # no epoch in file names
    assert source_servers.make_command() == ["make", "-j2", "BUILD_TLS=no", "USE_SYSTEMD=no",
                                             "BUILD_WITH_MODULES=no"]
    text = source_servers.source_text(FAKE)
    assert text == ("debian source package redis=5:9.9.1-2 (sid)\n"
                    "version 9.9.1\n"
                    "built with make -j2 BUILD_TLS=no USE_SYSTEMD=no BUILD_WITH_MODULES=no\n")
    # Another Debian revision of the same upstream version is another SOURCE: built again.
    assert source_servers.source_text(dataclasses.replace(FAKE, package_version="5:9.9.1-3")) != text


# --- the cache -----------------------------------------------------------------------------

def test_executable_of_a_server_not_built_says_how_to_get_it(cache: Path) -> None:
    with pytest.raises(BuildError, match=r"server redis-8.0 \(Redis 8.0.6\) is not in .*: "
                                         r"run `python3 -m build_tools setup`"):
        servers.executable("redis-8.0")


def test_ensure_builds_once_and_keeps_a_current_folder(cache: Path, no_fetch: list[str],
                                                       fake_apt: FakeApt,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(servers.pins, "SOURCE_SERVER_PINS", (FAKE,))
    source_servers.ensure_source_servers([FAKE])
    exe = cache / "servers" / "redis-9.9" / "bin" / "redis-server"
    assert servers.executable("redis-9.9") == exe and os.access(exe, os.X_OK)
    assert (exe.parent.parent / "SOURCE").read_text() == source_servers.source_text(FAKE)
    assert sorted(p.name for p in exe.parent.parent.iterdir()) == ["SOURCE", "bin"]
    assert oct(exe.parent.parent.stat().st_mode & 0o777) == "0o755"
    assert no_fetch == ["redis=5:9.9.1-2"] and fake_apt.calls == [["prepare"], ["update"]]
    assert fake_apt.discarded
    # Kept as is (no apt, no make) while SOURCE and `--version` agree with the pin...
    exe.write_text(version_script("Redis server v=9.9.1 sha=kept x=y"))
    source_servers.ensure_source_servers([FAKE])
    assert "sha=kept" in exe.read_text() and len(no_fetch) == 1
    # ...built again when the executable no longer says the pinned version...
    exe.write_text(version_script("Redis server v=9.9.0 sha=old x=y"))
    source_servers.ensure_source_servers([FAKE])
    assert "v=9.9.1" in exe.read_text() and len(no_fetch) == 2
    # ...or when the pin moved to another Debian revision.
    newer = dataclasses.replace(FAKE, package_version="5:9.9.1-3")
    source_servers.ensure_source_servers([newer])
    assert no_fetch[-1] == "redis=5:9.9.1-3"
    assert (exe.parent.parent / "SOURCE").read_text() == source_servers.source_text(newer)


def test_a_server_that_is_not_the_pinned_one_is_refused(cache: Path, fake_apt: FakeApt,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(source_servers, "fetch_source",
                        lambda pin, apt, where, archive: fake_tree(where, "Valkey server v=9.9.1 x"))
    with pytest.raises(BuildError, match="is Valkey 9.9.1, pins.SOURCE_SERVER_PINS says Redis 9.9.1"):
        source_servers.ensure_source_servers([FAKE])
    assert not (cache / "servers" / "redis-9.9").exists()
    assert [p.name for p in (cache / "servers").iterdir()] == []  # no temp folder left


def test_a_failed_make_shows_its_command_and_output(cache: Path, fake_apt: FakeApt,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(source_servers, "fetch_source",
                        lambda pin, apt, where, archive: fake_tree(where, fails=True))
    with pytest.raises(BuildError) as err:
        source_servers.ensure_source_servers([FAKE])
    text = str(err.value)
    assert "make of redis 5:9.9.1-2 failed" in text
    assert "command: make -j2 BUILD_TLS=no USE_SYSTEMD=no BUILD_WITH_MODULES=no" in text
    assert "src/server.c:1: error: no such thing" in text
    assert not (cache / "servers" / "redis-9.9").exists() and fake_apt.discarded


def test_an_archive_that_does_not_answer_names_the_packages(cache: Path, fake_apt: FakeApt) -> None:
    fake_apt.fail = "update"
    with pytest.raises(BuildError) as err:
        source_servers.ensure_source_servers([FAKE])
    text = str(err.value)
    assert text.startswith("cannot fetch the Debian source packages redis=5:9.9.1-2: the archive "
                           "(deb-src http://archive.test/debian sid main) did not answer")
    assert "Could not resolve 'archive.test'" in text and fake_apt.discarded


def test_a_version_gone_from_the_suite_names_the_package_and_the_pin(tmp_path: Path) -> None:
    with pytest.raises(BuildError) as err:
        source_servers.fetch_source(FAKE, FakeApt(fail="source"), tmp_path,  # type: ignore[arg-type]
                                    SOURCES.summary)
    text = str(err.value)
    assert text.startswith("redis-9.9: cannot fetch the Debian source package redis=5:9.9.1-2 "
                           "from deb-src http://archive.test/debian sid main")
    assert "no longer in sid (then move pins.SOURCE_SERVER_PINS)" in text
    assert "Can not find version '5:9.9.1-2'" in text


def test_a_download_without_the_dsc_is_refused(tmp_path: Path) -> None:
    with pytest.raises(BuildError, match=r"left no redis_9.9.1-2.dsc \(got: nothing\)"):
        source_servers.fetch_source(FAKE, FakeApt(), tmp_path,  # type: ignore[arg-type]
                                    SOURCES.summary)


# --- run_logged: the make's output in a log, a line now and then --------------------------

def test_run_logged_beats_while_it_runs_and_repeats_the_tail_on_failure(tmp_path: Path) -> None:
    beats: list[float] = []
    log = tmp_path / "out.log"
    _proc.run_logged([sys.executable, "-c", "import time; print('hello'); time.sleep(0.35)"],
                     "sleeping", log=log, heartbeat=beats.append, every_s=0.1)
    assert log.read_text() == "hello\n" and len(beats) >= 2 and beats == sorted(beats)
    script = "for i in range(400): print('line', i)\nraise SystemExit(3)"
    with pytest.raises(BuildError) as err:
        _proc.run_logged([sys.executable, "-c", script], "counting", log=log,
                         heartbeat=beats.append)
    text = str(err.value)
    assert "counting failed" in text and "exit code: 3" in text
    assert "line 399" in text and "line 249" not in text and "(last 150 lines of" in text
