"""Trusted backend loading (issue 10, items 1-3 and the backend-fault catalogue).

* Who may load: AI.CONFIG LOADBACKEND and BACKENDSPATH need the right to run MODULE LOAD
  (Redis's own ACL, checked with the caller's user); a refusal is NOPERM and an ACL LOG
  entry; GET and MODEL_CHUNK_SIZE stay open.
* What may load: the file is read as data before dlopen (regular file, ELF for this
  machine, not truncated, exports RAI_BackendEntry, carries the RedisAI ABI note of our
  major and of the kind asked for). Fixtures with a constructor that creates a marker file
  prove that nothing of a refused file runs.
* From where: BACKENDS_CONFINED yes refuses real paths outside BACKENDSPATH.
* Integrity: the folder's redisai_backend.manifest (SHA-256 of the .so, sizes of the rest).

Every refusal: `ERR error loading backend: <file>: <reason>`, the same in the log, the
server up, and a later good load still working.
"""
from __future__ import annotations

import os
import pathlib
import re
import shutil
from dataclasses import dataclass

import numpy as np
import pytest

from acl_wording import AclWording, learn
from helpers import LOAD_ERR, LogMark, assert_error, assert_error_startswith, assert_ok
from native import cc_shared
from paths import ROOT
from redis_server import Connect, RedisServer, start_expecting_failure
from resp import RawClient, RespError

from build_tools import manifest

FIXTURES = ROOT / "tests" / "fixtures" / "backends"
MANIFEST = "redisai_backend.manifest"
RESTRICTED = ["on", ">pw", "+@all", "-@admin", "-@dangerous", "~*"]


def _abi() -> tuple[int, int]:
    text = (ROOT / "include" / "redisai" / "backend_abi.h").read_text()
    major = int(re.search(r"#define\s+RAI_ABI_MAJOR\s+(\d+)", text).group(1))
    minor = int(re.search(r"#define\s+RAI_ABI_MINOR\s+(\d+)", text).group(1))
    return major, minor


def _noperm(wording: AclWording, user: str, sub: str) -> str:
    """The refusal of AI.CONFIG <sub> for `user`, in the server's own words."""
    return wording.command(user, f"ai.config|{sub}")


# --------------------------------------------------------------------------------------
# Fixture backends of this file, each with a constructor that creates its marker file.
# --------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Trust:
    dir: pathlib.Path
    markers: pathlib.Path
    ctor_no_entry: pathlib.Path    # constructor + note, no RAI_BackendEntry
    no_note: pathlib.Path          # a complete ONNX backend without the ABI note
    note_torch: pathlib.Path       # note says TORCH, descriptor says ONNX
    major_next: pathlib.Path       # note and descriptor: ABI major + 1
    major_999: pathlib.Path        # note and descriptor: ABI major 999
    old_minor: pathlib.Path        # note 1.0, descriptor of 1.0's size: must load and run
    onnx_ok: pathlib.Path          # the current onnx_kind fixture, with a marker too

    def marker(self, so: pathlib.Path) -> pathlib.Path:
        return self.markers / so.name

    def ran(self) -> list[str]:
        """Names of the fixtures whose constructor ran (in any server)."""
        return sorted(p.name for p in self.markers.iterdir())


@pytest.fixture(scope="module")
def trust(tmp_path_factory: pytest.TempPathFactory) -> Trust:
    d = tmp_path_factory.mktemp("trust_backends")
    markers = d / "markers"
    markers.mkdir()
    major, _ = _abi()

    def build(name: str, src: str, *defs: str) -> pathlib.Path:
        out = d / f"{name}.so"
        cc_shared("-o", str(out), f'-DRAI_FIXTURE_MARKER="{markers / out.name}"', *defs,
            str(FIXTURES / src))
        return out

    next_major = d / "major_next.c"
    next_major.write_text(
        (FIXTURES / "abi_major_999.c").read_text()
        .replace('#include "marker.h"', f'#include "{FIXTURES / "marker.h"}"')
        .replace("999", "(RAI_ABI_MAJOR + 1)"))
    out_next = d / "major_next.so"
    cc_shared("-o", str(out_next), f'-DRAI_FIXTURE_MARKER="{markers / out_next.name}"',
        str(next_major))
    return Trust(
        dir=d, markers=markers,
        ctor_no_entry=build("ctor_no_entry", "ctor_no_entry.c"),
        no_note=build("no_note", "onnx_kind.c", "-DFIXTURE_NO_NOTE"),
        note_torch=build("note_torch", "onnx_kind.c", "-DFIXTURE_NOTE_KIND=RAI_BACKEND_TORCH"),
        major_next=out_next,
        major_999=build("major_999", "abi_major_999.c"),
        old_minor=build("old_minor", "onnx_kind.c", "-DFIXTURE_OLD_MINOR"),
        onnx_ok=build("onnx_ok", "onnx_kind.c"))


@pytest.fixture(scope="module")
def srv(server: RedisServer) -> RedisServer:
    """conftest's `server`: one where loads are only refused (no slot is ever taken)."""
    return server


@pytest.fixture
def c(srv: RedisServer, connect: Connect) -> RawClient:
    return connect(srv, flush=False)


def refused(srv: RedisServer, c: RawClient, kind: str, path: pathlib.Path | str,
            *parts: str) -> str:
    """LOADBACKEND is refused with the file and every part in the reply and in one log
    line; the server still answers."""
    mark = LogMark(srv.logfile)
    reply = c.execute("AI.CONFIG", "LOADBACKEND", kind, str(path))
    text = assert_error_startswith(reply, LOAD_ERR)
    assert str(path) in text, text
    for p in parts:
        assert p in text, f"{p!r} not in {text!r}"
    mark.wait_for_line(str(path), *parts)
    assert c.execute("PING") == "PONG"
    return text[len(LOAD_ERR):]


def real_folder(install_dir: pathlib.Path, name: str) -> pathlib.Path:
    folder = (install_dir / "backends" / f"redisai_{name}").resolve()
    if not (folder / f"redisai_{name}.so").is_file():
        pytest.skip(f"{name} backend not built in {install_dir}")
    return folder


def copy_backend(install_dir: pathlib.Path, name: str, dst: pathlib.Path,
                 manifest: bool = True) -> pathlib.Path:
    """A copy of a real backend folder (lib/ aliases stay links); returns its .so."""
    shutil.copytree(real_folder(install_dir, name), dst, symlinks=True)
    if not manifest:
        (dst / MANIFEST).unlink()
    return dst / f"redisai_{name}.so"


def elf_layout(path: pathlib.Path) -> tuple[tuple[int, int], list[tuple[int, int]]]:
    """(.text offset, size) and the file ranges (offset, end) of the PT_LOAD segments."""
    from elftools.elf.elffile import ELFFile
    with open(path, "rb") as f:
        elf = ELFFile(f)
        text = elf.get_section_by_name(".text")
        loads = [(s["p_offset"], s["p_offset"] + s["p_filesz"]) for s in elf.iter_segments()
                 if s["p_type"] == "PT_LOAD"]
        index = [i for i, s in enumerate(elf.iter_segments()) if s["p_type"] == "PT_LOAD"]
        return (text["sh_offset"], text["sh_size"]), list(zip(index, loads))  # type: ignore


def patch(path: pathlib.Path, offset: int, data: bytes) -> None:
    with open(path, "r+b") as f:
        f.seek(offset)
        f.write(data)


# --------------------------------------------------------------------------------------
# 1. Permissions through Redis's own ACL.
# --------------------------------------------------------------------------------------

def test_restricted_user_may_not_load_or_move_backendspath(module_path, trust, tmp_path):
    """`dev` (+@all -@admin -@dangerous ~*) gets NOPERM for LOADBACKEND and BACKENDSPATH,
    with ACL LOG entries; GET and MODEL_CHUNK_SIZE still work; nothing of the file runs;
    the lazy load of MODELSTORE uses the admin's BACKENDSPATH, not a folder dev planted."""
    admin_path = tmp_path / "admin_backends"
    admin_path.mkdir()
    planted = tmp_path / "planted" / "redisai_onnxruntime"
    planted.mkdir(parents=True)
    shutil.copyfile(trust.no_note, planted / "redisai_onnxruntime.so")
    s = RedisServer(module_path, ["BACKENDSPATH", str(admin_path)])
    try:
        wording = learn(s.port)

        def noperm(sub: str) -> str:
            return _noperm(wording, "dev", sub)

        with RawClient(s.port) as admin, RawClient(s.port) as dev:
            assert_ok(admin.execute("ACL", "SETUSER", "dev", *RESTRICTED))
            assert_ok(dev.execute("AUTH", "dev", "pw"))
            assert_ok(admin.execute("ACL", "LOG", "RESET"))
            for kind, path in (("TF", trust.ctor_no_entry), ("ONNX", trust.onnx_ok)):
                assert_error(dev.execute("AI.CONFIG", "LOADBACKEND", kind, str(path)),
                             noperm("loadbackend"))
            assert_error(dev.execute("AI.CONFIG", "BACKENDSPATH", str(planted.parent)),
                         noperm("backendspath"))
            # Case does not matter, nor does MULTI: the same check.
            assert_error(dev.execute("ai.config", "loadbackend", "onnx", str(trust.onnx_ok)),
                         noperm("loadbackend"))
            assert_ok(dev.execute("MULTI"))
            dev.execute("AI.CONFIG", "BACKENDSPATH", str(planted.parent))
            assert dev.execute("EXEC") == [RespError(noperm("backendspath"))]
            # What stays open to dev.
            assert dev.execute("AI.CONFIG", "GET", "BACKENDSPATH") == str(admin_path).encode()
            assert_ok(dev.execute("AI.CONFIG", "MODEL_CHUNK_SIZE", 4096))
            assert dev.execute("AI.CONFIG", "GET", "MODEL_CHUNK_SIZE") == 4096
            # The lazy load looks where the admin said: nothing there, nothing planted ran.
            assert_error(dev.execute("AI.MODELSTORE", "m", "ONNX", "CPU", "BLOB", b"x"),
                         "ERR Could not load backend")
            assert trust.ran() == []
            # ACL LOG: Redis groups equal refusals into one entry with a count.
            entries = [dict(zip(e[::2], e[1::2])) for e in admin.execute("ACL", "LOG")]
            got = [(e[b"username"], e[b"object"], e[b"reason"], e[b"context"], e[b"count"])
                   for e in entries]
            assert got == [(b"dev", b"ai.config|backendspath", b"command", b"module", 2),
                           (b"dev", b"ai.config|loadbackend", b"command", b"module", 3)], got
            # The admin (default user) may: the slot is free, the good file loads and runs.
            assert_ok(admin.execute("AI.CONFIG", "LOADBACKEND", "ONNX", str(trust.onnx_ok)))
            assert_ok(dev.execute("AI.MODELSTORE", "m", "ONNX", "CPU", "BLOB", b"x"))
            assert_ok(dev.execute("AI.TENSORSET", "a", "FLOAT", 1, "VALUES", 3))
            assert_ok(dev.execute("AI.MODELEXECUTE", "m", "INPUTS", 1, "a", "OUTPUTS", 1, "b"))
            assert dev.execute("AI.TENSORGET", "b", "VALUES") == [b"3"]
            assert trust.ran() == ["onnx_ok.so"]
    finally:
        s.stop()
        for p in trust.markers.iterdir():
            p.unlink()


def test_acl_rules_decide_exactly_module_load(module_path, trust):
    """An admin user (+@all) may; a user denied only `module|load` may not; a user with
    no @admin but `+module|load` may (the check is Redis's ACL for MODULE LOAD)."""
    s = RedisServer(module_path)
    try:
        wording = learn(s.port)

        def noperm(sub: str) -> str:
            return _noperm(wording, "nomod", sub)

        with RawClient(s.port) as admin, RawClient(s.port) as u:
            assert_ok(admin.execute("ACL", "SETUSER", "ops", "on", ">pw", "+@all", "~*"))
            assert_ok(admin.execute("ACL", "SETUSER", "nomod", "on", ">pw", "+@all",
                                    "-module|load", "~*"))
            assert_ok(admin.execute("ACL", "SETUSER", "loader", "on", ">pw", "-@all",
                                    "+ai.config", "+module|load", "+ping"))
            assert_ok(u.execute("AUTH", "nomod", "pw"))
            assert_error(u.execute("AI.CONFIG", "BACKENDSPATH", "/tmp"), noperm("backendspath"))
            assert_error(u.execute("AI.CONFIG", "LOADBACKEND", "TF", str(trust.major_999)),
                         noperm("loadbackend"))
            assert_ok(u.execute("AUTH", "loader", "pw"))
            before = admin.execute("AI.CONFIG", "GET", "BACKENDSPATH")
            assert_ok(u.execute("AI.CONFIG", "BACKENDSPATH", str(trust.dir)))
            assert_ok(u.execute("AUTH", "ops", "pw"))
            assert_ok(u.execute("AI.CONFIG", "BACKENDSPATH", before))
            # Permitted calls reply as before: here a refused file, not NOPERM.
            reply = u.execute("AI.CONFIG", "LOADBACKEND", "TF", str(trust.major_999))
            assert_error_startswith(reply, LOAD_ERR)
            assert_ok(u.execute("AI.CONFIG", "LOADBACKEND", "ONNX", str(trust.onnx_ok)))
    finally:
        s.stop()
        for p in trust.markers.iterdir():
            p.unlink()


# The module's refusal where it cannot name the user (Lua, another module's call): 7.0's
# words on every server (docs/security.md, "The server's own words").
UNNAMED_NOPERM = "NOPERM this user has no permissions to run the 'ai.config|{}' command"


def test_scripts_cannot_load_backends(srv, c, trust):
    """From Lua (even as the default user) the caller cannot be checked: refused."""
    for sub, args in (("loadbackend", ["ONNX", str(trust.onnx_ok)]),
                      ("backendspath", ["/tmp"])):
        script = "return redis.call('AI.CONFIG', ARGV[1], ARGV[2], ARGV[3])"
        reply = c.execute("EVAL", script, 0, sub.upper(), *(args + [""])[:2])
        assert isinstance(reply, RespError), reply
        assert str(reply).startswith(UNNAMED_NOPERM.format(sub) + " script: "), reply
    assert trust.ran() == []


CONFIG_SCRIPT = """
def set_path(tensors: List[Tensor], keys: List[str], args: List[str]):
    redis.execute("AI.CONFIG", "BACKENDSPATH", args[0])

def load(tensors: List[Tensor], keys: List[str], args: List[str]):
    redis.execute("AI.CONFIG", "LOADBACKEND", "ONNX", args[0])
"""


def test_torchscript_redis_execute_cannot_load_backends(module_path, install_dir, trust):
    """redis.execute runs through a module call, where the caller cannot be checked:
    refused, whoever runs the script."""
    real_folder(install_dir, "torch")
    s = RedisServer(module_path)
    try:
        wording = learn(s.port)
        with RawClient(s.port) as c:
            before = c.execute("AI.CONFIG", "GET", "BACKENDSPATH")
            assert_ok(c.execute("AI.SCRIPTSTORE", "s", "CPU", "ENTRY_POINTS", 2, "set_path",
                                "load", "SOURCE", CONFIG_SCRIPT))
            for fn, sub, arg in (("set_path", "backendspath", "/tmp"),
                                 ("load", "loadbackend", str(trust.onnx_ok))):
                reply = c.execute("AI.SCRIPTEXECUTE", "s", fn, "KEYS", 1, "k", "ARGS", 1, arg)
                assert isinstance(reply, RespError), reply
                assert _noperm(wording, "default", sub) in str(reply), reply
            assert c.execute("AI.CONFIG", "GET", "BACKENDSPATH") == before
            assert trust.ran() == []
            assert c.execute("PING") == "PONG"
    finally:
        s.stop()


# --------------------------------------------------------------------------------------
# 2. No code from a file that is not a backend: the catalogue, on one server.
# --------------------------------------------------------------------------------------

def test_text_file_directory_fifo_device(srv, c, fixture_backends, tmp_path):
    refused(srv, c, "TF", fixture_backends.not_elf, "not an ELF file")
    refused(srv, c, "TF", tmp_path, "not a regular file (a directory)")
    fifo = tmp_path / "fifo.so"
    os.mkfifo(fifo)
    refused(srv, c, "TF", fifo, "not a regular file")
    refused(srv, c, "TF", "/dev/null", "not a regular file")
    empty = tmp_path / "empty.so"
    empty.write_bytes(b"")
    refused(srv, c, "TF", empty, "not an ELF file (0 bytes")
    short = tmp_path / "short.so"
    short.write_bytes(b"\x7fELF\x02\x01\x01")
    refused(srv, c, "TF", short, "truncated: 7 bytes, shorter than an ELF header")


def test_wrong_class_machine_type(srv, c, trust, tmp_path):
    cases = [(4, b"\x01", "wrong ELF class 1"),            # EI_CLASS: 32-bit
             (5, b"\x02", "wrong byte order"),             # EI_DATA: big-endian
             (18, (183).to_bytes(2, "little"), "wrong machine: ELF machine 183"),  # AArch64
             (16, (2).to_bytes(2, "little"), "not a shared object (ELF type 2")]   # ET_EXEC
    import platform
    if platform.machine() == "aarch64":
        cases[2] = (18, (62).to_bytes(2, "little"), "wrong machine: ELF machine 62")
    for i, (offset, data, why) in enumerate(cases):
        bad = tmp_path / f"patched{i}.so"
        shutil.copyfile(trust.onnx_ok, bad)
        patch(bad, offset, data)
        refused(srv, c, "ONNX", bad, why)
    assert trust.ran() == []


def test_fixture_refusals_never_run_the_file(srv, c, trust, fixture_backends):
    major, minor = _abi()
    refused(srv, c, "TF", trust.ctor_no_entry,
            "does not export the entry symbol RAI_BackendEntry")
    refused(srv, c, "ONNX", trust.ctor_no_entry, "does not export the entry symbol")
    refused(srv, c, "TF", fixture_backends.no_entry, "does not export the entry symbol")
    refused(srv, c, "ONNX", trust.no_note, "no RedisAI ABI note")
    # The descriptor would say ONNX: the note decides, before any of it runs.
    refused(srv, c, "ONNX", trust.note_torch, "file is a TORCH backend, not ONNX")
    refused(srv, c, "TF", trust.major_next,
            f"backend ABI major {major + 1} (note says {major + 1}.0) does not match the "
            f"core's ABI major {major}")
    refused(srv, c, "TF", trust.major_999, "backend ABI major 999")
    refused(srv, c, "TORCH", trust.onnx_ok, "file is a ONNX backend, not TORCH")
    assert trust.ran() == [], "a refused file's constructor ran"


def test_note_survives_gc_sections_and_version_script(srv, c, tmp_path):
    """Built as the backends are linked (version script exporting only the entry) plus
    --gc-sections: the note is still there, so the file is refused for its kind (read
    from the note), not for a missing note."""
    so = tmp_path / "gc.so"
    cc_shared("-o", str(so), "-ffunction-sections", "-fdata-sections", "-Wl,--gc-sections",
        f"-Wl,--version-script={ROOT / 'backends' / 'common' / 'backend.map'}",
        str(FIXTURES / "onnx_kind.c"))
    refused(srv, c, "TF", so, "file is a ONNX backend, not TF")
    # The same with the entry left hidden: it is not exported, so it is no backend.
    hidden = tmp_path / "hidden.so"
    cc_shared("-o", str(hidden), "-fvisibility=hidden", str(FIXTURES / "onnx_kind.c"))
    refused(srv, c, "ONNX", hidden, "does not export the entry symbol RAI_BackendEntry")


@pytest.mark.inprocess_only("looks for the refused file in redis-server's own maps")
def test_refused_after_its_entry_ran_stays_mapped(module_path, tmp_path):
    """Crash 5's second line: a backend refused after its entry ran (note TF, descriptor
    ONNX) has a thread running its code; the loader must not dlclose it. The server keeps
    answering while that thread runs, and a good load follows."""
    so = tmp_path / "thread_kind_mismatch.so"
    cc_shared("-o", str(so), "-pthread", str(FIXTURES / "thread_kind_mismatch.c"))
    s = RedisServer(module_path)
    try:
        with RawClient(s.port) as c:
            refused(s, c, "TF", so, "file is a ONNX backend (FixtureThread), not TF")
            for _ in range(200):   # the thread ticks every 0.5 ms meanwhile
                assert c.execute("AI.TENSORSET", "t", "FLOAT", 1, "VALUES", 1) == "OK"
            maps = pathlib.Path(f"/proc/{s.proc.pid}/maps").read_text()
            assert str(so) in maps, "the refused backend was unmapped"
            assert s.alive()
    finally:
        s.stop()


def test_constructor_file_at_module_load(module_path, trust):
    log = start_expecting_failure(module_path, ["TF", str(trust.ctor_no_entry)])
    assert f"{trust.ctor_no_entry}: does not export the entry symbol" in log, log
    assert trust.ran() == []


def test_mutated_headers_never_crash_the_inspection(srv, c, trust, tmp_path):
    """Seeded mutations of the bytes the inspection reads (ELF header, program and
    section header tables; the note itself left intact) and of the file length: every
    load is refused with a reason naming the file (asked as TF, the file's note says
    ONNX, so nothing reaches dlopen), and the server stays up."""
    import random
    from elftools.elf.elffile import ELFFile
    base = trust.onnx_ok.read_bytes()
    with open(trust.onnx_ok, "rb") as f:
        elf = ELFFile(f)
        ph = (elf["e_phoff"], elf["e_phnum"] * elf["e_phentsize"])
        sh = (elf["e_shoff"], elf["e_shnum"] * elf["e_shentsize"])
    regions = [(0, 64), ph, sh]
    rng = random.Random(10)
    bad = tmp_path / "mutant.so"
    reasons: dict[str, int] = {}
    for i in range(300):
        data = bytearray(base)
        for _ in range(rng.choice((1, 2, 4, 8))):
            start, length = rng.choice(regions)
            pos = start + rng.randrange(length)
            data[pos] = rng.choice((0, 0xFF, rng.randrange(256), data[pos] ^ 0x80))
        if i % 10 == 0:
            data = data[:rng.randrange(len(data))]
        bad.write_bytes(bytes(data))
        reply = c.execute("AI.CONFIG", "LOADBACKEND", "TF", str(bad))
        text = assert_error_startswith(reply, LOAD_ERR + str(bad) + ": ")
        key = text[len(LOAD_ERR + str(bad) + ": "):].split(" ")[0]
        reasons[key] = reasons.get(key, 0) + 1
    assert c.execute("PING") == "PONG"
    # Several distinct refusals were reached, not one early exit for all.
    print("refusals by first word:", reasons)
    assert len(reasons) >= 4, reasons


def test_truncated_real_backend(srv, c, install_dir, tmp_path):
    """A copy of the real ONNX backend (its lib/ intact) cut inside its code, and cut
    inside its last loaded segment: refused from the headers, with or without manifest."""
    (text_off, text_size), loads = elf_layout(real_folder(install_dir, "onnxruntime") /
                                              "redisai_onnxruntime.so")
    last_index, (last_start, last_end) = loads[-1]
    for manifest in (False, True):
        so = copy_backend(install_dir, "onnxruntime", tmp_path / f"code{manifest}", manifest)
        cut = text_off + text_size // 2
        os.truncate(so, cut)
        refused(srv, c, "ONNX", so, "truncated: loaded segment",
                f"past the file size {cut}")
        so = copy_backend(install_dir, "onnxruntime", tmp_path / f"last{manifest}", manifest)
        cut = last_end - 1
        os.truncate(so, cut)
        refused(srv, c, "ONNX", so,
                f"truncated: loaded segment {last_index} ends at {last_end} past the file "
                f"size {cut}")


def test_empty_lib_folder(srv, c, install_dir, tmp_path):
    so = copy_backend(install_dir, "onnxruntime", tmp_path / "with_manifest")
    lib = so.parent / "lib"
    libs = sorted(p.name for p in lib.iterdir() if not p.is_symlink())
    for p in lib.iterdir():
        p.unlink()
    refused(srv, c, "ONNX", so, f"{os.path.realpath(lib)}/{libs[0]}: listed in", "but missing")
    so = copy_backend(install_dir, "onnxruntime", tmp_path / "no_manifest", manifest=False)
    for p in (so.parent / "lib").iterdir():
        p.unlink()
    reason = refused(srv, c, "ONNX", so, "dlopen failed")
    assert "libonnxruntime.so" in reason, reason


def test_manifest_mismatches(srv, c, install_dir, tmp_path):
    (text_off, _), _ = elf_layout(real_folder(install_dir, "onnxruntime") /
                                  "redisai_onnxruntime.so")
    # One byte of code changed, same size: only the SHA-256 can tell.
    so = copy_backend(install_dir, "onnxruntime", tmp_path / "tampered")
    data = so.read_bytes()
    patch(so, text_off + 16, bytes([data[text_off + 16] ^ 0xFF]))
    import hashlib
    got = hashlib.sha256(so.read_bytes()).hexdigest()
    refused(srv, c, "ONNX", so, f"SHA-256 {got} does not match its manifest's")
    # A library one byte longer: named, with both sizes.
    so = copy_backend(install_dir, "onnxruntime", tmp_path / "grown")
    lib = next(p for p in (so.parent / "lib").iterdir() if not p.is_symlink())
    size = lib.stat().st_size
    with open(lib, "ab") as f:
        f.write(b"\0")
    refused(srv, c, "ONNX", so, f"{os.path.realpath(lib)}: size {size + 1} bytes, its manifest",
            f"says {size}")
    # The .so not listed; a malformed line.
    so = copy_backend(install_dir, "onnxruntime", tmp_path / "unlisted")
    m = so.parent / MANIFEST
    m.write_text("".join(ln for ln in m.read_text().splitlines(keepends=True)
                         if not ln.rstrip().endswith(" redisai_onnxruntime.so")))
    refused(srv, c, "ONNX", so, "not listed in its folder's manifest")
    m.write_text(m.read_text() + "file nothex 12 ../../etc/passwd\n")
    refused(srv, c, "ONNX", so, f"manifest {os.path.realpath(m)}: malformed file line")


def test_sha256_agrees_with_hashlib(srv, c, fixture_backends, tmp_path):
    """The loader's own SHA-256 against Python's hashlib, over sizes that hit every
    padding case (size mod 64 = 0, 1, 55, 56, 57, 63) and several 64 KiB read chunks:
    a correct manifest lets the file through to its descriptor check (small_table is
    refused there, after the manifest), a one-byte change is refused by the manifest."""
    base = fixture_backends.small_table.read_bytes()
    targets = [len(base) + k for k in range(0, 64)]
    wanted = {0, 1, 55, 56, 57, 63}
    sizes = [n for n in targets if n % 64 in wanted] + [3 * 65536 + 7, 65536 * 2]
    for n in sizes:
        folder = tmp_path / f"s{n}"
        folder.mkdir()
        so = folder / "small.so"
        so.write_bytes(base + bytes((i * 7) & 0xFF for i in range(n - len(base))))
        manifest.write(folder, {"framework": "fixture", "kind": "TF"}, {})
        reason = refused(srv, c, "TF", so, "backend descriptor size 8")
        assert "SHA-256" not in reason
        patch(so, n - 1, bytes([so.read_bytes()[-1] ^ 1]))
        refused(srv, c, "TF", so, "does not match its manifest's")


# --------------------------------------------------------------------------------------
# Good loads after refusals; the crash-5 sequence; an older minor.
# --------------------------------------------------------------------------------------

def test_crash5_sequence_wrong_kind_then_tf_then_onnx(module_path, install_dir, tmp_path):
    """On a server with no backend: the real ONNX .so as TORCH (refused: wrong kind, from
    its note), then TF, then ONNX load; models of both run."""
    onnx_so = real_folder(install_dir, "onnxruntime") / "redisai_onnxruntime.so"
    tf_so = real_folder(install_dir, "tensorflow") / "redisai_tensorflow.so"
    s = RedisServer(module_path)
    try:
        with RawClient(s.port) as c:
            refused(s, c, "TORCH", onnx_so, "file is a ONNX backend, not TORCH")
            refused(s, c, "TF", onnx_so, "file is a ONNX backend, not TF")
            mark = LogMark(s.logfile)
            assert_ok(c.execute("AI.CONFIG", "LOADBACKEND", "TF", str(tf_so)))
            assert_ok(c.execute("AI.CONFIG", "LOADBACKEND", "ONNX", str(onnx_so)))
            mark.wait_for_line("Loaded ONNX backend", "manifest verified")
            mark.wait_for_line("Loaded TF backend", "manifest verified")
            import onnx_models
            from tf_graphs import mul_graph
            m = onnx_models.add()
            assert_ok(c.execute("AI.MODELSTORE", "o", "ONNX", "CPU", "BLOB", m.blob))
            a, b = m.sample
            assert_ok(c.execute("AI.TENSORSET", "a", "FLOAT", *a.shape, "BLOB", a.tobytes()))
            assert_ok(c.execute("AI.TENSORSET", "b", "FLOAT", *b.shape, "BLOB", b.tobytes()))
            assert_ok(c.execute("AI.MODELEXECUTE", "o", "INPUTS", 2, "a", "b",
                                "OUTPUTS", 1, "c"))
            got = np.frombuffer(c.execute("AI.TENSORGET", "c", "BLOB"), dtype=np.float32)
            np.testing.assert_allclose(got, (a + b).ravel())
            assert_ok(c.execute("AI.MODELSTORE", "t", "TF", "CPU", "INPUTS", 2, "a", "b",
                                "OUTPUTS", 1, "mul", "BLOB", mul_graph()))
            assert_ok(c.execute("AI.MODELEXECUTE", "t", "INPUTS", 2, "a", "b",
                                "OUTPUTS", 1, "d"))
            got = np.frombuffer(c.execute("AI.TENSORGET", "d", "BLOB"), dtype=np.float32)
            np.testing.assert_allclose(got, (a * b).ravel())
            assert c.execute("PING") == "PONG"
    finally:
        s.stop()


def test_older_minor_loads_and_runs(module_path, trust):
    """A backend of ABI 1.0 (note 1.0, a 1.0-sized descriptor) still loads: the ABI is
    append-only within a major."""
    s = RedisServer(module_path)
    try:
        with RawClient(s.port) as c:
            mark = LogMark(s.logfile)
            assert_ok(c.execute("AI.CONFIG", "LOADBACKEND", "ONNX", str(trust.old_minor)))
            line = mark.wait_for_line(str(trust.old_minor), "FixtureONNX-ABI-1.0")
            assert "ABI 1.0" in line and "no manifest" in line, line
            assert_ok(c.execute("AI.MODELSTORE", "m", "ONNX", "CPU", "BLOB", b"x"))
            assert_ok(c.execute("AI.TENSORSET", "a", "INT8", 2, "VALUES", 4, 5))
            assert_ok(c.execute("AI.MODELEXECUTE", "m", "INPUTS", 1, "a", "OUTPUTS", 1, "b"))
            assert c.execute("AI.TENSORGET", "b", "VALUES") == [4, 5]
            # INFO reads no 1.2 member from a 1.0-sized descriptor.
            assert b"ai_" in c.execute("INFO", "MODULES")
            assert c.execute("PING") == "PONG"
    finally:
        s.stop()
        for p in trust.markers.iterdir():
            p.unlink()


def test_good_load_after_every_refusal(srv, c, trust, fixture_backends):
    """The shared server refused everything above; the slots are free and a good load
    works there (last test of the module on `srv`)."""
    assert_ok(c.execute("AI.CONFIG", "LOADBACKEND", "ONNX", str(fixture_backends.onnx_kind)))
    assert_ok(c.execute("AI.MODELSTORE", "good", "ONNX", "CPU", "BLOB", b"x"))
    assert c.execute("TYPE", "good") == "AI__MODEL"


# --------------------------------------------------------------------------------------
# 3. BACKENDS_CONFINED.
# --------------------------------------------------------------------------------------

def _confined_tree(tmp_path: pathlib.Path, trust: Trust) -> tuple[pathlib.Path, pathlib.Path]:
    bp = tmp_path / "bp"
    (bp / "sub").mkdir(parents=True)
    outside = tmp_path / "outside"
    outside.mkdir()
    shutil.copyfile(trust.onnx_ok, bp / "sub" / "inside.so")
    shutil.copyfile(trust.onnx_ok, outside / "outside.so")
    os.symlink(outside / "outside.so", bp / "escape.so")
    os.symlink(bp / "sub" / "inside.so", bp / "alias.so")
    # The lazy-load default path, a symlinked folder that leads outside.
    os.symlink(outside, bp / "redisai_onnxruntime")
    shutil.copyfile(trust.onnx_ok, outside / "redisai_onnxruntime.so")
    return bp, outside


def test_confined_refuses_outside_paths(module_path, trust, tmp_path):
    bp, outside = _confined_tree(tmp_path, trust)
    s = RedisServer(module_path, ["BACKENDS_CONFINED", "yes", "BACKENDSPATH", str(bp)])
    try:
        with RawClient(s.port) as c:
            real_bp = os.path.realpath(bp)
            reason = refused(s, c, "ONNX", bp / "escape.so", "lies outside BACKENDSPATH",
                             str(outside / "outside.so"), str(bp), "BACKENDS_CONFINED is yes")
            assert real_bp in reason
            refused(s, c, "ONNX", outside / "outside.so", "lies outside BACKENDSPATH")
            # A relative path climbing out resolves under BACKENDSPATH, then out of it.
            mark = LogMark(s.logfile)
            reply = c.execute("AI.CONFIG", "LOADBACKEND", "ONNX", "../outside/outside.so")
            assert "lies outside BACKENDSPATH" in assert_error_startswith(reply, LOAD_ERR)
            mark.wait_for_line("../outside/outside.so", "lies outside BACKENDSPATH")
            # The lazy load follows the same rule.
            mark = LogMark(s.logfile)
            assert_error(c.execute("AI.MODELSTORE", "m", "ONNX", "CPU", "BLOB", b"x"),
                         "ERR Could not load backend")
            mark.wait_for_line("redisai_onnxruntime.so", "lies outside BACKENDSPATH")
            assert trust.ran() == []
            # Inside (also through a symlink that stays inside): loads.
            assert_ok(c.execute("AI.CONFIG", "LOADBACKEND", "ONNX", "alias.so"))
            assert_ok(c.execute("AI.MODELSTORE", "m", "ONNX", "CPU", "BLOB", b"x"))
    finally:
        s.stop()
        for p in trust.markers.iterdir():
            p.unlink()


def test_confined_module_argument(module_path, trust, tmp_path):
    bp, outside = _confined_tree(tmp_path, trust)
    log = start_expecting_failure(module_path, ["ONNX", str(bp / "escape.so"),
                                                "BACKENDS_CONFINED", "YES", "BACKENDSPATH",
                                                str(bp)])
    assert f"{bp / 'escape.so'}: its real path {outside / 'outside.so'} lies outside" in log, log
    assert trust.ran() == []
    log = start_expecting_failure(module_path, ["BACKENDS_CONFINED", "maybe"])
    assert "ERR error processing argument: BACKENDS_CONFINED maybe" in log, log
    # Default (no): RedisAI's behaviour, the symlink out of BACKENDSPATH loads.
    s = RedisServer(module_path, ["BACKENDSPATH", str(bp), "ONNX", "escape.so"])
    try:
        with RawClient(s.port) as c:
            assert_ok(c.execute("AI.MODELSTORE", "m", "ONNX", "CPU", "BLOB", b"x"))
    finally:
        s.stop()
        for p in trust.markers.iterdir():
            p.unlink()
