"""AI.CONFIG LIST and loading a backend by folder name (issue 12, items 1 and 2).

LIST replies one entry per `redisai_*` folder under BACKENDSPATH (versioned folders and
the default links) and per loaded backend: facts from the manifests, never by opening a
backend; loaded or not, when, and how many models and scripts live on it. RESP3 clients get
a map per entry, RESP2 clients flat field/value arrays. Admin-only like LOADBACKEND.

`AI.CONFIG LOADBACKEND TORCH torch-2.13.0-cpu` (and the module argument of the same form)
loads the backend of folder `redisai_torch-2.13.0-cpu`; an unknown name is refused with the
names there are for that kind.
"""
from __future__ import annotations

import os
import pathlib
import shutil
import time
from typing import Any

import pytest

from acl_wording import learn
from helpers import LOAD_ERR, arity, assert_error, assert_error_startswith, assert_ok
from redis_server import RedisServer, isolate_args, start_expecting_failure
from resp import RawClient, RespError

from build_tools import manifest

FIELDS = ["name", "kind", "framework", "version", "variant", "abi", "path", "link", "manifest",
          "loaded", "loaded_at", "load_seconds", "models", "scripts", "isolated"]
SO_NAME = {"TF": "redisai_tensorflow.so", "TORCH": "redisai_torch.so",
           "ONNX": "redisai_onnxruntime.so", "TFLITE": "redisai_tflite.so"}
RESTRICTED = ["on", ">pw", "+@all", "-@admin", "-@dangerous", "~*"]
SCRIPT = "def bar(tensors: List[Tensor], keys: List[str], args: List[str]):\n" \
         "    return tensors[0] + tensors[1]\n"


# --------------------------------------------------------------------------------------
# Helpers: the reply as dicts, and what the install tree says it should be.
# --------------------------------------------------------------------------------------

def _text(v: Any) -> Any:
    return v.decode() if isinstance(v, bytes) else v


def entries_resp2(reply: Any) -> list[dict[str, Any]]:
    """RESP2: an array of flat [field, value, ...] arrays, fields in the documented order."""
    assert isinstance(reply, list), reply
    out = []
    for e in reply:
        assert isinstance(e, list) and len(e) == 2 * len(FIELDS), e
        assert [_text(k) for k in e[::2]] == FIELDS, e
        out.append({_text(k): _text(v) for k, v in zip(e[::2], e[1::2])})
    return out


def entries_resp3(reply: Any) -> list[dict[str, Any]]:
    """RESP3: an array of maps."""
    assert isinstance(reply, list), reply
    out = []
    for e in reply:
        assert isinstance(e, dict), e
        assert [_text(k) for k in e] == FIELDS, e
        out.append({_text(k): _text(v) for k, v in e.items()})
    return out


def _isolated(kind: str) -> bool:
    """Whether the suite runs this kind's backends isolated (pytest --isolate)."""
    args = isolate_args()
    return any(a == "ISOLATE" and b == kind for a, b in zip(args[::2], args[1::2]))


def by_name(entries: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {e["name"]: e for e in entries}


def list_entries(c: RawClient) -> list[dict[str, Any]]:
    return entries_resp2(c.execute("AI.CONFIG", "LIST"))


def expected_folders(backends: pathlib.Path) -> dict[str, dict[str, Any]]:
    """What LIST must say of every redisai_* folder of a tree before anything loads."""
    out = {}
    for d in sorted(backends.glob("redisai_*")):
        if not d.is_dir():
            continue
        m = manifest.parse((d / manifest.MANIFEST_NAME).read_text())
        kind = m.header["kind"]
        out[d.name[len("redisai_"):]] = {
            "name": d.name[len("redisai_"):], "kind": kind,
            "framework": m.header["framework"], "version": m.header["version"],
            "variant": m.header["variant"], "abi": m.header["abi"],
            "path": str(d / SO_NAME[kind]),
            "link": os.readlink(d) if d.is_symlink() else None, "manifest": "present",
            "loaded": 0, "loaded_at": None, "load_seconds": None, "models": 0, "scripts": 0,
            "isolated": None}
    return out


def versioned(tree: dict[str, dict[str, Any]], kind: str) -> str:
    """The versioned folder name of a kind that its default link points to (a tree may
    hold other versions side by side: test_backend_variants.py)."""
    names = [n for n, e in tree.items() if e["kind"] == kind and e["link"] is None]
    if not names:
        pytest.skip(f"no {kind} backend built")
    targets = [e["link"][len("redisai_"):] for e in tree.values()
               if e["kind"] == kind and e["link"] is not None]
    return next((n for n in names if n in targets), names[0])


def default_link(tree: dict[str, dict[str, Any]], kind: str) -> str:
    return next(n for n, e in tree.items() if e["kind"] == kind and e["link"] is not None)


@pytest.fixture(scope="module")
def backends_dir(install_dir: pathlib.Path) -> pathlib.Path:
    return install_dir / "backends"


@pytest.fixture(scope="module")
def tree(backends_dir: pathlib.Path) -> dict[str, dict[str, Any]]:
    t = expected_folders(backends_dir)
    if not t:
        pytest.skip(f"no backend folders in {backends_dir}")
    return t


def _link_or_copy(src: str, dst: str) -> None:
    try:
        os.link(src, dst)
    except OSError:  # another file system
        shutil.copy2(src, dst)


def clone_folder(src: pathlib.Path, dst: pathlib.Path) -> None:
    """A copy of a backend folder (hard links where possible: the libraries are large)."""
    shutil.copytree(src, dst, symlinks=True, copy_function=_link_or_copy)


def onnx_blob() -> bytes:
    from onnx_models import add  # noqa: PLC0415 - imports onnx
    return add().blob


# --------------------------------------------------------------------------------------
# 1. LIST before and after loads, RESP2 and RESP3, counts.
# --------------------------------------------------------------------------------------

def test_list_before_any_load_is_the_install_tree(fresh, tree):
    """Every folder and default link, sorted by name, facts from the manifests, nothing
    loaded; listing loads nothing (INFO still shows no backend)."""
    with RawClient(fresh.port) as c:
        got = list_entries(c)
        assert [e["name"] for e in got] == sorted(tree), got
        assert by_name(got) == tree
        info = c.execute("INFO", "ai_backends_paths")
        assert b"_path:" not in info, info


def test_list_after_loads_resp2_and_resp3(fresh, tree):
    """LOADBACKEND by name marks that folder and the default link to it loaded, with the
    load time; RESP3 (HELLO 3) gets the same as maps with booleans and nulls."""
    onnx = versioned(tree, "ONNX")
    link = default_link(tree, "ONNX")
    with RawClient(fresh.port) as c, RawClient(fresh.port) as c3:
        before = int(time.time())
        assert_ok(c.execute("AI.CONFIG", "LOADBACKEND", "ONNX", onnx))
        after = int(time.time())
        got = by_name(list_entries(c))
        assert set(got) == set(tree)
        for name, e in got.items():
            want = dict(tree[name])
            if name in (onnx, link):
                assert before <= e["loaded_at"] <= after, e
                assert float(e["load_seconds"]) > 0, e
                want.update(loaded=1, loaded_at=e["loaded_at"], load_seconds=e["load_seconds"],
                            isolated="yes" if _isolated("ONNX") else "no")
            assert e == want, name

        assert c3.execute("HELLO", "3")[b"proto"] == 3
        got3 = by_name(entries_resp3(c3.execute("AI.CONFIG", "LIST")))
        assert set(got3) == set(tree)
        for name, e in got3.items():
            is_loaded = name in (onnx, link)
            assert e["loaded"] is is_loaded, e
            assert isinstance(e["load_seconds"], float) if is_loaded else e["load_seconds"] is None
            assert e["loaded_at"] == (got[name]["loaded_at"] if is_loaded else None)
            assert e["link"] == tree[name]["link"]
            for f in ("kind", "framework", "version", "variant", "abi", "path", "manifest",
                      "models", "scripts"):
                assert e[f] == tree[name][f], (name, f)
            want_isolated = "yes" if _isolated("ONNX") else "no"
            assert e["isolated"] == (want_isolated if is_loaded else None), e
        # INFO names the file the name resolved to.
        info = c.execute("INFO", "ai_backends_paths").decode()
        assert str(pathlib.Path(tree[onnx]["path"])) in info, info


def test_counts_follow_store_overwrite_and_delete(fresh, tree):
    """models/scripts count what lives on each backend: MODELSTORE adds, a re-store at the
    same key replaces, MODELDEL removes; equal key names in two databases are two models;
    scripts count on the TORCH backend (loaded lazily through its default link)."""
    onnx = versioned(tree, "ONNX")
    torch = versioned(tree, "TORCH")
    blob = onnx_blob()

    def counts(c: RawClient, name: str) -> tuple[int, int]:
        e = by_name(list_entries(c))[name]
        return e["models"], e["scripts"]

    with RawClient(fresh.port) as c:
        assert counts(c, onnx) == (0, 0)
        for key in ("m1", "m2"):
            assert_ok(c.execute("AI.MODELSTORE", key, "ONNX", "CPU", "BLOB", blob))
        assert counts(c, onnx) == (2, 0)
        assert_ok(c.execute("AI.MODELSTORE", "m1", "ONNX", "CPU", "BLOB", blob))
        assert counts(c, onnx) == (2, 0)
        assert_ok(c.execute("SELECT", 1))
        assert_ok(c.execute("AI.MODELSTORE", "m1", "ONNX", "CPU", "BLOB", blob))
        assert counts(c, onnx) == (3, 0)
        assert_ok(c.execute("AI.MODELDEL", "m1"))
        assert_ok(c.execute("SELECT", 0))
        assert_ok(c.execute("AI.MODELDEL", "m2"))
        assert counts(c, onnx) == (1, 0)
        # A failed store adds nothing.
        assert isinstance(c.execute("AI.MODELSTORE", "bad", "ONNX", "CPU", "BLOB", b"junk"),
                          RespError)
        assert counts(c, onnx) == (1, 0)

        assert counts(c, torch) == (0, 0)
        for key in ("s1", "s2"):
            assert_ok(c.execute("AI.SCRIPTSTORE", key, "CPU", "ENTRY_POINTS", 1, "bar",
                                "SOURCE", SCRIPT))
        assert counts(c, torch) == (0, 2)
        assert counts(c, default_link(tree, "TORCH")) == (0, 2)
        assert_ok(c.execute("AI.SCRIPTSTORE", "s1", "CPU", "ENTRY_POINTS", 1, "bar",
                            "SOURCE", SCRIPT))
        assert_ok(c.execute("AI.SCRIPTDEL", "s2"))
        assert counts(c, torch) == (0, 1)
        assert c.execute("DEL", "s1") == 1
        assert counts(c, torch) == (0, 0)
        assert counts(c, onnx) == (1, 0)
        # An RDB round trip frees every object and builds it again.
        assert_ok(c.execute("DEBUG", "RELOAD"))
        assert counts(c, onnx) == (1, 0)
        assert_ok(c.execute("FLUSHALL", "SYNC"))
        assert counts(c, onnx) == (0, 0)


# --------------------------------------------------------------------------------------
# 2. Permissions: admin-only like LOADBACKEND; the 1.2 subcommands unchanged.
# --------------------------------------------------------------------------------------

def test_restricted_user_refused_with_acl_log(fresh):
    """A user who may not MODULE LOAD gets NOPERM and an ACL LOG entry; a user granted
    only `+module|load` may list; COMMAND INFO of AI.CONFIG is unchanged."""
    wording = learn(fresh.port)
    noperm_list = wording.command("dev", "ai.config|list")
    with RawClient(fresh.port) as admin, RawClient(fresh.port) as dev:
        assert_ok(admin.execute("ACL", "SETUSER", "dev", *RESTRICTED))
        assert_ok(admin.execute("ACL", "SETUSER", "loader", "on", ">pw", "-@all",
                                "+ai.config", "+module|load"))
        assert_ok(admin.execute("ACL", "LOG", "RESET"))
        assert_ok(dev.execute("AUTH", "dev", "pw"))
        assert_error(dev.execute("AI.CONFIG", "LIST"), noperm_list)
        assert_error(dev.execute("ai.config", "list", "extra"), noperm_list)
        # What stays open to dev is as before.
        assert dev.execute("AI.CONFIG", "GET", "BACKENDSPATH") == \
            admin.execute("AI.CONFIG", "GET", "BACKENDSPATH")
        entries = [dict(zip(e[::2], e[1::2])) for e in admin.execute("ACL", "LOG")]
        got = [(e[b"username"], e[b"object"], e[b"reason"], e[b"context"], e[b"count"])
               for e in entries]
        assert got == [(b"dev", b"ai.config|list", b"command", b"module", 2)], got
        assert isinstance(admin.execute("AI.CONFIG", "LIST"), list)
        # From Lua there is no safe way to learn the caller: refused, as LOADBACKEND is, in
        # 7.0's words on every server (the module cannot name the user there).
        assert_error_startswith(
            admin.execute("EVAL", "return redis.call('AI.CONFIG', 'LIST')", 0),
            "NOPERM this user has no permissions to run the 'ai.config|list' command script: ")
        assert_ok(dev.execute("AUTH", "loader", "pw"))
        assert isinstance(dev.execute("AI.CONFIG", "LIST"), list)
        # The command table does not know subcommands: ACL and COMMAND INFO as before.
        info = admin.execute("COMMAND", "INFO", "ai.config")[0]
        assert info[:2] == [b"ai.config", -1] and info[3:6] == [0, 0, 0], info
        assert sorted(str(f) for f in info[2]) == ["module", "write"], info
        assert_ok(admin.execute("ACL", "DRYRUN", "dev", "AI.CONFIG", "LIST"))


def test_other_subcommands_reply_as_in_1_2(fresh):
    """docs/configuration.md, AI.CONFIG: the replies around the new subcommand are unchanged."""
    with RawClient(fresh.port) as c:
        assert_error(c.execute("AI.CONFIG"), arity("ai.config"))
        assert_error(c.execute("AI.CONFIG", "LISTS"), "ERR unsupported subcommand")
        assert_error(c.execute("AI.CONFIG", "NOPE"), "ERR unsupported subcommand")
        assert c.execute("AI.CONFIG", "GET", "LIST") is None
        assert_error(c.execute("AI.CONFIG", "GET"), arity("ai.config"))
        assert_error(c.execute("AI.CONFIG", "LOADBACKEND", "TORCH"), arity("ai.config"))
        assert_error(c.execute("AI.CONFIG", "LOADBACKEND", "FOO", "torch"),
                     "ERR unsupported backend")
        assert_error(c.execute("AI.CONFIG", "BACKENDSPATH"),
                     "ERR BACKENDSPATH: missing path argument")


# --------------------------------------------------------------------------------------
# 3. Load by name.
# --------------------------------------------------------------------------------------

def test_load_by_name_command_runs_scripts(fresh, tree):
    """LOADBACKEND TORCH <versioned name> loads that folder's .so; it runs a script; a
    second load by the default link's name is refused as already loaded (from that file)."""
    torch = versioned(tree, "TORCH")
    with RawClient(fresh.port) as c:
        assert_ok(c.execute("AI.CONFIG", "LOADBACKEND", "torch", torch))
        assert_ok(c.execute("AI.SCRIPTSTORE", "s", "CPU", "ENTRY_POINTS", 1, "bar",
                            "SOURCE", SCRIPT))
        assert_ok(c.execute("AI.TENSORSET", "a", "FLOAT", 1, "VALUES", 2))
        assert_ok(c.execute("AI.TENSORSET", "b", "FLOAT", 1, "VALUES", 3))
        assert_ok(c.execute("AI.SCRIPTEXECUTE", "s", "bar", "KEYS", 1, "a", "INPUTS", 2, "a",
                            "b", "OUTPUTS", 1, "c"))
        assert c.execute("AI.TENSORGET", "c", "VALUES") == [b"5"]
        e = by_name(list_entries(c))[torch]
        assert (e["loaded"], e["scripts"]) == (1, 1)
        text = assert_error_startswith(
            c.execute("AI.CONFIG", "LOADBACKEND", "TORCH", default_link(tree, "TORCH")),
            LOAD_ERR)
        if _isolated("TORCH"):
            # Isolated, a kind may have several backends, but never two of one name.
            assert text.startswith(f"{LOAD_ERR}a backend named {torch} is already loaded (from "
                                   f"{tree[torch]['path']})"), text
        else:
            assert text == f"{LOAD_ERR}TORCH backend already loaded from {tree[torch]['path']}"


def test_load_by_name_module_argument_and_default_link(module_path, tree):
    """`ONNX <name>` as a module argument loads that folder at start; the default link's
    own name (`onnxruntime`) loads the default, as lazy loading would."""
    onnx = versioned(tree, "ONNX")
    link = default_link(tree, "ONNX")
    for name in (onnx, link):
        s = RedisServer(module_path, ["ONNX", name])
        try:
            with RawClient(s.port) as c:
                got = by_name(list_entries(c))
                assert got[name]["loaded"] == 1
                assert got[onnx]["loaded"] == 1 and got[link]["loaded"] == 1
                info = c.execute("INFO", "ai_backends_paths").decode()
                assert tree[name]["path"] in info, info
                assert_ok(c.execute("AI.MODELSTORE", "m", "ONNX", "CPU", "BLOB", onnx_blob()))
                assert_ok(c.execute("AI.TENSORSET", "a", "FLOAT", 1, "VALUES", 2))
                assert_ok(c.execute("AI.MODELEXECUTE", "m", "INPUTS", 2, "a", "a",
                                    "OUTPUTS", 1, "b"))
                assert c.execute("AI.TENSORGET", "b", "VALUES") == [b"4"]
        finally:
            s.stop()


def test_unknown_name_lists_the_names_of_its_kind(fresh, tree, backends_dir, module_path):
    """An unknown name, or the name of another kind's folder, is refused with the folder
    looked for and the names there are for the kind asked; nothing gets loaded."""
    torch_names = ", ".join(n for n in sorted(tree) if tree[n]["kind"] == "TORCH")
    onnx_names = ", ".join(n for n in sorted(tree) if tree[n]["kind"] == "ONNX")
    root = str(backends_dir)
    with RawClient(fresh.port) as c:
        assert_error(
            c.execute("AI.CONFIG", "LOADBACKEND", "TORCH", "torch-0.0.1-cpu"),
            f"{LOAD_ERR}{root}/redisai_torch-0.0.1-cpu/redisai_torch.so: no TORCH backend "
            f"named torch-0.0.1-cpu under BACKENDSPATH {root}; TORCH backends there: "
            f"{torch_names}")
        other = versioned(tree, "TORCH")
        assert_error(
            c.execute("AI.CONFIG", "LOADBACKEND", "ONNX", other),
            f"{LOAD_ERR}{root}/redisai_{other}/redisai_onnxruntime.so: no ONNX backend named "
            f"{other} under BACKENDSPATH {root}; ONNX backends there: {onnx_names}")
        assert not any(e["loaded"] for e in list_entries(c))
    log = start_expecting_failure(module_path, ["TORCH", "torch-0.0.1-cpu"])
    assert f"TORCH backends there: {torch_names}" in log, log
    assert "ERR error processing argument: TORCH torch-0.0.1-cpu" in log, log


def test_name_like_paths_stay_paths(module_path, tree, backends_dir, tmp_path):
    """A path with a '/' or ending in .so is a path as in 1.2; a name that matches no folder
    but is a file under BACKENDSPATH still loads that file; a folder without any backend of
    the kind is reported with 'holds no ... backend folder'."""
    onnx = versioned(tree, "ONNX")
    root = tmp_path / "root"
    clone_folder(backends_dir / f"redisai_{onnx}", root / f"redisai_{onnx}")
    os.symlink(f"redisai_{onnx}/redisai_onnxruntime.so", root / "plainfile")
    # BACKENDSPATH applies first whatever the order of the module arguments.
    s = RedisServer(module_path, ["ONNX", "plainfile", "BACKENDSPATH", str(root)])
    try:
        with RawClient(s.port) as c:
            assert_error(
                c.execute("AI.CONFIG", "LOADBACKEND", "TF", "tensorflow"),
                f"{LOAD_ERR}{root}/redisai_tensorflow/redisai_tensorflow.so: no TF backend "
                f"named tensorflow under BACKENDSPATH {root}, which holds no TF backend folder")
            got = list_entries(c)
            assert [e["name"] for e in got] == [onnx]
            assert got[0]["loaded"] == 1  # plainfile is a link to that folder's .so
    finally:
        s.stop()


def test_by_name_keeps_every_trust_check(module_path, tree, backends_dir, tmp_path):
    """The name resolves to a path, and that path goes through issue 10's checks: a folder
    link leading outside BACKENDSPATH under BACKENDS_CONFINED, a .so that no longer matches
    its manifest, a text file in place of the .so are refused by name as by path."""
    onnx = versioned(tree, "ONNX")
    root, outside = tmp_path / "root", tmp_path / "outside"
    root.mkdir()
    clone_folder(backends_dir / f"redisai_{onnx}", outside / "redisai_onnx-out")
    os.symlink(outside / "redisai_onnx-out", root / "redisai_onnx-out")
    tampered = root / "redisai_onnx-tampered"
    clone_folder(backends_dir / f"redisai_{onnx}", tampered)
    text = (tampered / manifest.MANIFEST_NAME).read_text()
    (tampered / manifest.MANIFEST_NAME).unlink()  # a hard link: never write through it
    lines = [(" ".join(["file", "0" * 64] + ln.split(" ")[2:])
              if ln.startswith("file ") and ln.endswith(" redisai_onnxruntime.so") else ln)
             for ln in text.splitlines()]
    (tampered / manifest.MANIFEST_NAME).write_text("\n".join(lines) + "\n")
    textso = root / "redisai_onnx-text"
    textso.mkdir()
    (textso / "redisai_onnxruntime.so").write_text("not a library\n")
    clone_folder(backends_dir / f"redisai_{onnx}", root / "redisai_onnx-good")
    s = RedisServer(module_path, ["BACKENDSPATH", str(root), "BACKENDS_CONFINED", "yes"])
    try:
        with RawClient(s.port) as c:
            for name, reason in (("onnx-out", "and BACKENDS_CONFINED is yes"),
                                 ("onnx-tampered", "does not match its manifest"),
                                 ("onnx-text", "not an ELF file")):
                reply = c.execute("AI.CONFIG", "LOADBACKEND", "ONNX", name)
                got = assert_error_startswith(reply, f"{LOAD_ERR}{root}/redisai_{name}/")
                assert reason in got, got
            assert not any(e["loaded"] for e in list_entries(c))
            assert_ok(c.execute("AI.CONFIG", "LOADBACKEND", "ONNX", "onnx-good"))
            assert by_name(list_entries(c))["onnx-good"]["loaded"] == 1
    finally:
        s.stop()


# --------------------------------------------------------------------------------------
# 4. LIST with odd folders, and with a backend loaded from elsewhere.
# --------------------------------------------------------------------------------------

def test_list_with_bogus_folders_still_answers(module_path, tree, backends_dir, tmp_path):
    """A folder with no manifest and nothing in it, one whose manifest is not format 1, one
    with a backend .so but no manifest, a file named redisai_*: LIST answers, marking what it
    cannot know as unknown; loading by name from there still goes through every check; a
    backend loaded from outside BACKENDSPATH's folders is listed by its backend name."""
    onnx = versioned(tree, "ONNX")
    root = tmp_path / "root"
    root.mkdir()
    (root / "redisai_bogus-1.0-cpu").mkdir()
    (root / "redisai_bogus-1.0-cpu" / "README").write_text("not a backend\n")
    (root / "redisai_badmanifest").mkdir()
    (root / "redisai_badmanifest" / manifest.MANIFEST_NAME).write_text("format 9\nkind TF\n")
    nomf = root / "redisai_onnx-nomanifest"
    clone_folder(backends_dir / f"redisai_{onnx}", nomf)
    (nomf / manifest.MANIFEST_NAME).unlink()
    (root / "redisai_file.txt").write_text("a file, not a folder\n")
    (root / "other").mkdir()
    s = RedisServer(module_path, ["BACKENDSPATH", str(root)])
    try:
        with RawClient(s.port) as c, RawClient(s.port) as c3:
            got = by_name(list_entries(c))
            assert sorted(got) == ["badmanifest", "bogus-1.0-cpu", "onnx-nomanifest"]
            unknown = dict(kind="unknown", framework="unknown", version="unknown",
                           variant="unknown", abi="unknown", link=None, loaded=0,
                           loaded_at=None, load_seconds=None, models=0, scripts=0,
                           isolated=None)
            assert got["bogus-1.0-cpu"] == dict(unknown, name="bogus-1.0-cpu",
                                                path=str(root / "redisai_bogus-1.0-cpu"),
                                                manifest="missing")
            bad = got["badmanifest"]
            assert bad == dict(unknown, name="badmanifest", path=str(root / "redisai_badmanifest"),
                               manifest=bad["manifest"])
            assert "not a format 1 manifest" in bad["manifest"], bad
            # Kind from the .so the folder holds; the rest unknown until it is loaded.
            assert got["onnx-nomanifest"] == dict(
                unknown, name="onnx-nomanifest", kind="ONNX",
                path=str(nomf / "redisai_onnxruntime.so"), manifest="missing")
            # Names: the folders of a kind (a folder of unknown kind is none).
            assert_error(
                c.execute("AI.CONFIG", "LOADBACKEND", "ONNX", "bogus-1.0-cpu"),
                f"{LOAD_ERR}{root}/redisai_bogus-1.0-cpu/redisai_onnxruntime.so: no ONNX "
                f"backend named bogus-1.0-cpu under BACKENDSPATH {root}; ONNX backends "
                "there: onnx-nomanifest")
            assert_ok(c.execute("AI.CONFIG", "LOADBACKEND", "ONNX", "onnx-nomanifest"))
            e = by_name(list_entries(c))["onnx-nomanifest"]
            # Loaded: the facts the backend itself gives (descriptor, ABI note).
            assert (e["loaded"], e["kind"], e["framework"], e["variant"]) == \
                (1, "ONNX", "ONNX Runtime", tree[onnx]["variant"])
            assert e["version"] == tree[onnx]["version"]
            assert e["abi"].count(".") == 1 and e["manifest"] == "missing"
            # A TORCH backend loaded by absolute path from the install tree: listed after
            # the folders, named after the folder its real file lies in (its backend name),
            # facts from the manifest beside its real file.
            torch = versioned(tree, "TORCH")
            assert_ok(c.execute("AI.CONFIG", "LOADBACKEND", "TORCH", tree[torch]["path"]))
            assert c3.execute("HELLO", "3")[b"proto"] == 3
            got3 = entries_resp3(c3.execute("AI.CONFIG", "LIST"))
            assert [e["name"] for e in got3] == ["badmanifest", "bogus-1.0-cpu",
                                                 "onnx-nomanifest", torch]
            last = got3[-1]
            assert last["loaded"] is True and last["path"] == tree[torch]["path"]
            for f in ("kind", "framework", "version", "variant", "abi", "manifest"):
                assert last[f] == tree[torch][f], f
            # BACKENDSPATH that does not exist: the loaded backends only.
            assert_ok(c.execute("AI.CONFIG", "BACKENDSPATH", str(tmp_path / "nowhere")))
            names = [(e["name"], e["kind"]) for e in list_entries(c)]
            assert names == [(torch, "TORCH"), ("onnx-nomanifest", "ONNX")], names
    finally:
        s.stop()
