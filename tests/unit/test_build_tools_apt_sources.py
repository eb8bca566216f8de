"""build_tools/apt_sources.py: the header fetch takes the machine's own Debian archive.

Sample files are written to a tmp dir and parsed; where apt-get is present the
same files are also given to apt's own parser (`apt-get indextargets
--no-release-info`, which reads the sources without any network), and both must
agree. The last tests compare with this machine's real apt configuration.
No test here needs the network or a server.
"""
from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from build_tools import apt_sources as aps
from build_tools import headers
from build_tools.errors import BuildError

needs_apt = pytest.mark.skipif(shutil.which("apt-get") is None or shutil.which("apt-config") is None,
                               reason="apt-get/apt-config not installed (not a Debian machine)")

KEYRING = "/usr/share/keyrings/debian-archive-keyring.gpg"

ONE_LINE = """\
# the local mirror, with options
deb [ arch=amd64,i386 signed-by=/etc/apt/keyrings/mirror.gpg check-valid-until=no ] http://mirror.lan/debian bookworm main contrib # trailing comment
deb-src [signed-by=/etc/apt/keyrings/mirror.gpg check-valid-until=no] http://mirror.lan/debian bookworm main
#deb http://old.example/debian bookworm main
deb\thttp://mirror.lan/debian-security  bookworm-security   main

deb [arch+=arm64 lang=en] http://other.lan/debian trixie main non-free-firmware
"""

DEB822 = """\
# Two mirrors, two suites, both types
Types: deb deb-src
URIs: http://a.example/debian https://b.example/debian
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: http://disabled.example/debian
Suites: bookworm
Components: main
Enabled: no

# comments between stanzas
types: deb
uris: http://inline.example/debian
suites: trixie
components: main contrib
signed-by:
 -----BEGIN PGP PUBLIC KEY BLOCK-----
 .
 mQINBFxZ9FABEADPEDyIe2dfEVC8rn8vkMAOA2KJzq5KLZ4XmcjIwQqMnW5lPKaR
 =ATAA
 -----END PGP PUBLIC KEY BLOCK-----
Enabled: yes
"""


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def entry(kind: str, uri: str, suite: str, *components: str, origin: str = "x:1",
          **options: str) -> aps.SourceEntry:
    return aps.SourceEntry(kind, uri, suite, components,
                           tuple((k.replace("_", "-"), v) for k, v in options.items()), origin)


def apt_index_targets(*options: str) -> set[tuple[str, str, str, str, str]]:
    """(type, uri, suite, Sourcesentry, component) of every index target apt's parser configures.

    --no-release-info lists what `apt-get update` would fetch, from the sources alone.
    """
    out = subprocess.run(
        ["apt-get", *options, "indextargets", "--no-release-info",
         "--format", "$(TARGET_OF) $(REPO_URI) $(RELEASE) $(SOURCESENTRY) $(COMPONENT)"],
        capture_output=True, text=True, check=True, env={**os.environ, "LC_ALL": "C"}).stdout
    rows = set()
    for line in out.splitlines():
        kind, uri, suite, origin, component = line.split(" ")
        rows.add((kind, uri.rstrip("/"), suite, origin, component))
    return rows


def apt_targets(sourcelist: Path, sourceparts: Path, lists: Path) -> set[tuple[str, str, str, str]]:
    """(type, uri, suite, Sourcesentry) of the sample files, as apt's own parser reads them."""
    lists.mkdir(exist_ok=True)
    rows = apt_index_targets("-o", f"Dir::Etc::sourcelist={sourcelist}",
                             "-o", f"Dir::Etc::sourceparts={sourceparts}",
                             "-o", f"Dir::State::Lists={lists}")
    return {row[:4] for row in rows}


def ours(entries: list[aps.SourceEntry]) -> set[tuple[str, str, str, str]]:
    return {(e.type, e.uri.rstrip("/"), e.suite, e.origin) for e in entries}


# --- one-line format -----------------------------------------------------------

def test_one_line_with_options_comments_and_tabs(tmp_path: Path) -> None:
    path = write(tmp_path, "mirror.list", ONE_LINE)
    got = aps.parse_one_line(path.read_text(), str(path))
    assert [(e.type, e.uri, e.suite, e.components, e.origin) for e in got] == [
        ("deb", "http://mirror.lan/debian", "bookworm", ("main", "contrib"), f"{path}:2"),
        ("deb-src", "http://mirror.lan/debian", "bookworm", ("main",), f"{path}:3"),
        ("deb", "http://mirror.lan/debian-security", "bookworm-security", ("main",), f"{path}:5"),
        ("deb", "http://other.lan/debian", "trixie", ("main", "non-free-firmware"), f"{path}:7"),
    ]
    assert got[0].options == (("Architectures", "amd64,i386"),
                              ("Signed-By", "/etc/apt/keyrings/mirror.gpg"),
                              ("Check-Valid-Until", "no"))
    assert got[3].options == (("Architectures-Add", "arm64"), ("Languages", "en"))


def test_one_line_hash_inside_options_is_not_a_comment() -> None:
    got = aps.parse_one_line("deb [signed-by=/k#1.gpg] http://m/debian bookworm main # c\n", "f")
    assert got[0].option("Signed-By") == "/k#1.gpg"
    assert got[0].components == ("main",)


@pytest.mark.parametrize("line, reason", [
    ("deb http://m/debian", "without a URI and a suite"),
    ("deb [arch=amd64 http://m/debian bookworm main", "never closed"),
    ("deb [arch] http://m/debian bookworm main", "is not key=value"),
    ("rpm http://m/ x main", "unknown source type 'rpm'"),
])
def test_one_line_malformed_names_file_and_line(line: str, reason: str) -> None:
    with pytest.raises(BuildError) as exc:
        aps.parse_one_line("# first\n" + line + "\n", "/etc/apt/sources.list")
    assert str(exc.value).startswith("/etc/apt/sources.list:2: ")
    assert reason in str(exc.value)


# --- deb822 format -------------------------------------------------------------

def test_deb822_several_uris_suites_types_and_disabled(tmp_path: Path) -> None:
    path = write(tmp_path, "debian.sources", DEB822)
    got = aps.parse_deb822(path.read_text(), str(path))
    first = [(e.type, e.uri, e.suite) for e in got if e.origin == f"{path}:1"]
    assert first == [(t, u, s) for t in ("deb", "deb-src")
                     for u in ("http://a.example/debian", "https://b.example/debian")
                     for s in ("bookworm", "bookworm-updates")]
    assert all(e.option("Signed-By") == KEYRING for e in got if e.origin == f"{path}:1")
    assert not [e for e in got if "disabled" in e.uri]          # Enabled: no
    third = [e for e in got if e.origin == f"{path}:3"]         # stanza 3, lower-case names
    assert [(e.type, e.uri, e.suite, e.components) for e in third] == [
        ("deb", "http://inline.example/debian", "trixie", ("main", "contrib"))]
    key = third[0].option("Signed-By")
    assert key is not None and key.split("\n") == [
        "", "-----BEGIN PGP PUBLIC KEY BLOCK-----", "",
        "mQINBFxZ9FABEADPEDyIe2dfEVC8rn8vkMAOA2KJzq5KLZ4XmcjIwQqMnW5lPKaR",
        "=ATAA", "-----END PGP PUBLIC KEY BLOCK-----"]


def test_deb822_stanza_without_uris_is_an_error() -> None:
    with pytest.raises(BuildError, match=r"^f:5: stanza 2 has no URIs$"):
        aps.parse_deb822("Types: deb\nURIs: http://m/\nSuites: x\n\nTypes: deb\nSuites: x\n", "f")


@pytest.mark.parametrize("value, enabled", [
    ("yes", True), ("true", True), ("with", True), ("on", True), ("enable", True), ("1", True),
    ("no", False), ("False", False), ("without", False), ("off", False), ("disable", False),
    ("0", False), ("-0", False), ("maybe", True),   # apt's StringToBool: unknown -> default
])
def test_deb822_enabled_is_read_as_apt_reads_booleans(value: str, enabled: bool) -> None:
    got = aps.parse_deb822(f"Types: deb\nURIs: http://m/\nSuites: x\nEnabled: {value}\n", "f")
    assert bool(got) is enabled


@pytest.mark.parametrize("text, error", [
    (" continued\nTypes: deb\n", r"^f:1: continuation line outside a field$"),
    ("Types: deb\nURIs mirror.lan\n", r"^f:2: not a 'Field: value' line"),
    ("Types: deb\n: value\n", r"^f:2: not a 'Field: value' line"),
    ("Types: deb rpm\nURIs: http://m/\nSuites: x\n", r"^f:1: unknown source type 'rpm'"),
])
def test_deb822_malformed_names_file_and_line(text: str, error: str) -> None:
    with pytest.raises(BuildError, match=error):
        aps.parse_deb822(text, "f")


def test_sources_files_are_the_list_then_the_parts_apt_reads(tmp_path: Path) -> None:
    parts = tmp_path / "parts"
    for name in ("b.sources", "a.list", "c.list.save", "d.sources.disabled", "bad name.list"):
        write(parts, name, "deb http://m/debian bookworm main\n")
    (parts / "dir.list").mkdir()
    config = {"dir::etc::sourcelist": str(tmp_path / "sources.list"),
              "dir::etc::sourceparts": str(parts)}
    assert aps.source_files(config) == [parts / "a.list", parts / "b.sources"]
    main = write(tmp_path, "sources.list", "")
    assert aps.source_files(config) == [main, parts / "a.list", parts / "b.sources"]


def test_a_sources_file_is_read_in_the_format_its_name_says(tmp_path: Path) -> None:
    deb822 = write(tmp_path, "x.sources", "Types: deb\nURIs: http://m/\nSuites: s\n")
    one_line = write(tmp_path, "x.list", "deb http://m/ s main\n")
    assert [(e.uri, e.origin) for e in aps.parse_sources_file(deb822)] == [
        ("http://m/", f"{deb822}:1")]
    assert [(e.uri, e.origin) for e in aps.parse_sources_file(one_line)] == [
        ("http://m/", f"{one_line}:1")]
    with pytest.raises(BuildError, match=f"cannot read apt sources file {tmp_path}/gone.list"):
        aps.parse_sources_file(tmp_path / "gone.list")


@needs_apt
def test_samples_parse_as_apt_parses_them(tmp_path: Path) -> None:
    """Our entries of the sample files are exactly the ones apt's own parser configures."""
    main = write(tmp_path, "etc/sources.list", ONE_LINE)
    write(tmp_path, "etc/parts/debian.sources", DEB822)
    write(tmp_path, "etc/parts/old.list.save", "deb http://saved.example/debian bookworm main\n")
    write(tmp_path, "etc/parts/x.sources.disabled", "Types: deb\nURIs: http://d/\nSuites: x\n")
    config = {"dir::etc::sourcelist": str(main), "dir::etc::sourceparts": str(tmp_path / "etc/parts")}
    files = aps.source_files(config)
    assert files == [main, tmp_path / "etc/parts/debian.sources"]
    entries = [e for f in files for e in aps.parse_sources_file(f)]
    assert ours(entries) == apt_targets(main, tmp_path / "etc/parts", tmp_path / "lists")


# --- choosing the archive and writing the private sources ----------------------

MACHINE = [
    entry("deb-src", "http://src-only.example/debian", "bookworm", "main"),
    entry("deb", "http://mirror.lan/debian", "bookworm", "main", "contrib",
          origin="/etc/apt/sources.list:3", Signed_By=KEYRING, Architectures="amd64",
          Check_Valid_Until="no"),
    entry("deb", "http://mirror2.lan/debian", "bookworm", "main", origin="/etc/apt/x.sources:1"),
    entry("deb", "http://mirror.lan/debian", "bookworm", "main", origin="/etc/apt/dup.list:1"),
    entry("deb", "http://mirror.lan/debian", "bookworm-updates", "main"),
    entry("deb", "http://security.lan/debian-security", "bookworm-security", "main"),
    entry("deb", "http://contrib-only.lan/debian", "bookworm", "contrib"),
]


def test_archive_is_the_deb_entries_of_the_release_deb_src_skipped() -> None:
    got = aps.archive_entries(MACHINE, "bookworm", "main", "bookworm")
    assert [(e.uri, e.origin) for e in got] == [
        ("http://mirror.lan/debian", "/etc/apt/sources.list:3"),
        ("http://mirror2.lan/debian", "/etc/apt/x.sources:1")]


def test_another_suite_goes_to_the_machines_release_archive() -> None:
    got = aps.archive_entries(MACHINE, "trixie", "main", "bookworm")
    assert [e.uri for e in got] == ["http://mirror.lan/debian", "http://mirror2.lan/debian"]
    trixie = [*MACHINE, entry("deb", "http://trixie.lan/debian", "trixie", "main")]
    assert [e.uri for e in aps.archive_entries(trixie, "trixie", "main", "bookworm")] == [
        "http://trixie.lan/debian"]
    stable = [entry("deb", "http://m/debian", "stable", "main"),
              entry("deb", "http://m/debian-security", "stable-security", "main")]
    assert [e.uri for e in aps.archive_entries(stable, "trixie", "main", "bookworm")] == [
        "http://m/debian"]


def test_private_sources_keep_uri_and_trust_swap_suite_and_type() -> None:
    plan = aps.plan_private_sources(MACHINE, [], "deb-src", "bookworm", "main", "bookworm")
    assert plan.uris == ("http://mirror.lan/debian", "http://mirror2.lan/debian")
    assert plan.summary == "deb-src http://mirror.lan/debian http://mirror2.lan/debian bookworm main"
    assert plan.text == (
        "# from /etc/apt/sources.list:3\nTypes: deb-src\nURIs: http://mirror.lan/debian\n"
        "Suites: bookworm\nComponents: main\n"
        f"Signed-By: {KEYRING}\nCheck-Valid-Until: no\n"          # Architectures not carried
        "\n"
        "# from /etc/apt/x.sources:1\nTypes: deb-src\nURIs: http://mirror2.lan/debian\n"
        "Suites: bookworm\nComponents: main\n")
    assert plan.note == ("archive from this machine's apt sources, its bookworm entries: "
                         "/etc/apt/sources.list:3, /etc/apt/x.sources:1")


def test_inline_key_is_written_back_as_read(tmp_path: Path) -> None:
    got = aps.parse_deb822(DEB822, "d.sources")
    plan = aps.plan_private_sources(got, [], "deb", "trixie", "main", "bookworm")
    again = aps.parse_deb822(plan.text, "private.sources")
    assert again[0].option("Signed-By") == got[-1].option("Signed-By")
    assert " .\n mQINB" in plan.text


@pytest.mark.parametrize("entries, codename", [
    ([], "bookworm"),                                                        # no sources at all
    ([entry("deb", "http://ubuntu-mirror.lan/ubuntu", "noble", "main")], None),   # not Debian
    ([entry("deb-src", "http://m/debian", "bookworm", "main")], "bookworm"),       # deb-src only
    ([entry("deb", "http://m/debian", "bookworm", "contrib")], "bookworm"),        # no main
])
def test_no_debian_archive_is_an_error_that_says_so(
        entries: list[aps.SourceEntry], codename: str | None) -> None:
    """Without a Debian archive in the machine's sources the fetch stops: no mirror of the
    build's own is tried, and the message says what was read and what to add."""
    with pytest.raises(BuildError) as info:
        aps.plan_private_sources(entries, [Path("/etc/apt/sources.list")], "deb", "bookworm",
                                 "main", codename)
    text = str(info.value)
    assert text.startswith("no Debian archive in this machine's apt sources "
                           "(files read: /etc/apt/sources.list; release: "
                           f"{codename or 'not Debian (/etc/os-release)'}), so there is "
                           "nowhere to fetch deb bookworm main from"), text
    assert "never a mirror of its own" in text and "Add a `deb` entry" in text, text


def _fake_machine(monkeypatch: pytest.MonkeyPatch, etc: Path, codename: str | None) -> None:
    """apt's configuration of a machine whose sources are under etc (sources.list and
    sources.list.d/), and its release."""
    monkeypatch.setattr(aps, "machine_config", lambda: {
        "dir::etc::sourcelist": str(etc / "sources.list"),
        "dir::etc::sourceparts": str(etc / "sources.list.d")})
    monkeypatch.setattr(aps, "machine_codename", lambda: codename)


@pytest.mark.parametrize("name, text", [
    ("sources.list", "deb [signed-by=/k.gpg] http://list.lan/debian bookworm main\n"),
    ("sources.list.d/local.list", "deb http://part.lan/debian bookworm main contrib\n"),
    ("sources.list.d/local.sources", "Types: deb\nURIs: http://deb822.lan/debian\n"
                                     "Suites: bookworm bookworm-updates\nComponents: main\n"),
])
def test_machine_archive_comes_from_its_files_in_both_formats(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str, text: str) -> None:
    """The mirror of a sid source fetch is the one the machine's own release uses, read
    from a one-line sources.list, a .list part or a deb822 .sources part."""
    (tmp_path / "sources.list.d").mkdir()
    write(tmp_path, name, text)
    monkeypatch.delenv("http_proxy", raising=False)
    _fake_machine(monkeypatch, tmp_path, "bookworm")
    plan, proxy = aps.private_sources("deb-src", "sid", "main")
    uri = text.split("http://", 1)[1].split()[0]
    assert plan.uris == (f"http://{uri}",)
    assert plan.summary == f"deb-src http://{uri} sid main"
    assert f"# from {tmp_path / name}:1\nTypes: deb-src\n" in plan.text
    assert proxy == "none"


def test_machine_without_debian_sources_fails_clearly(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """Only another distribution's entries (and a disabled Debian stanza): a BuildError
    naming the files read, before any apt-get runs."""
    write(tmp_path, "sources.list.d/other.list", "deb http://ubuntu-mirror.lan/ubuntu noble main\n")
    write(tmp_path, "sources.list.d/off.sources", "Types: deb\nURIs: http://m.lan/debian\n"
                                                  "Suites: bookworm\nComponents: main\n"
                                                  "Enabled: no\n")
    _fake_machine(monkeypatch, tmp_path, None)
    with pytest.raises(BuildError, match="no Debian archive in this machine's apt sources") as info:
        aps.private_sources("deb", "bullseye", "main")
    assert str(tmp_path / "sources.list.d" / "other.list") in str(info.value)
    assert "release: not Debian" in str(info.value)


def test_debian_codename_from_os_release() -> None:
    assert aps.debian_codename('ID=debian\nVERSION_CODENAME=bookworm\n') == "bookworm"
    assert aps.debian_codename('ID="debian"\nVERSION_CODENAME="trixie"\n') == "trixie"
    assert aps.debian_codename('ID=ubuntu\nID_LIKE=debian\nVERSION_CODENAME=noble\n') is None
    assert aps.debian_codename('ID=debian\n') is None


# --- apt-config: paths and proxies ---------------------------------------------

DUMP = """\
Dir "/";
Dir::Etc "etc/apt";
Dir::Etc::sourcelist "sources.list";
Dir::Etc::sourceparts "/srv/apt/parts";
APT::NeverAutoRemove:: "^linux-image.*";
Acquire::http::Proxy "http://proxy.lan:3128/";
Acquire::http::Proxy::mirror.lan "DIRECT";
Acquire::https::Proxy::secure.lan "http://tls-proxy.lan:8080";
Acquire::Retries "3";
"""


def test_config_dump_paths_resolve_like_apt() -> None:
    config = aps.parse_config_dump(DUMP)
    assert config["acquire::retries"] == "3"
    assert aps.find_file(config, "Dir::Etc::sourcelist", "x") == Path("/etc/apt/sources.list")
    assert aps.find_file(config, "Dir::Etc::sourceparts", "x") == Path("/srv/apt/parts")
    chroot = aps.parse_config_dump('Dir "/chroot/";\nDir::Etc "etc/apt/";\n'
                                   'Dir::Etc::sourcelist "my.list";\n')
    assert aps.find_file(chroot, "Dir::Etc::sourcelist", "x") == Path("/chroot/etc/apt/my.list")
    assert aps.find_file({}, "Dir::Etc::sourcelist", "/etc/apt/sources.list") == Path(
        "/etc/apt/sources.list")


def test_proxy_from_apt_config_dump_and_environment() -> None:
    config = aps.parse_config_dump(DUMP)
    env = {"http_proxy": "http://env-proxy:1", "no_proxy": "internal.lan"}
    assert aps.effective_proxy("http://debian-mirror.lan/debian", config, env) == (
        "http://proxy.lan:3128/ (apt setting Acquire::http::Proxy)")   # apt's setting wins
    assert aps.effective_proxy("http://mirror.lan/debian", config, env) == (
        "none (DIRECT in Acquire::http::Proxy::mirror.lan)")
    assert aps.effective_proxy("https://secure.lan/debian", config, env) == (
        "http://tls-proxy.lan:8080 (apt setting Acquire::https::Proxy::secure.lan)")
    assert aps.effective_proxy("https://other.lan/debian", config, env) == (
        "http://proxy.lan:3128/ (apt setting Acquire::http::Proxy)")   # https falls back to http
    assert aps.effective_proxy("http://debian-mirror.lan/debian", {}, env) == (
        "http://env-proxy:1 (environment http_proxy)")
    assert aps.effective_proxy("http://a.internal.lan/debian", {}, env) == (
        "none (no_proxy names a.internal.lan)")
    assert aps.effective_proxy("http://debian-mirror.lan/debian", {}, {}) == "none"
    assert aps.effective_proxy("http://debian-mirror.lan/debian", {}, {"HTTP_PROXY": "x"}) == "none"
    assert aps.effective_proxy("file:/srv/mirror", config, env) == "none (file scheme)"


def test_proxy_auto_detect_mirror_lists_and_no_proxy_forms() -> None:
    detect = {"acquire::http::proxy-auto-detect": "/usr/bin/auto-apt-proxy"}
    assert aps.effective_proxy("https://mirror.lan/debian", detect, {}) == (
        "found by /usr/bin/auto-apt-proxy (apt setting Acquire::http::Proxy-Auto-Detect)")
    # mirror+file:/list is a list of http mirrors: the http settings apply
    http = {"acquire::http::proxy": "http://p:1"}
    assert aps.effective_proxy("mirror+file:/etc/apt/mirrors.txt", http, {}) == (
        "http://p:1 (apt setting Acquire::http::Proxy)")
    env = {"http_proxy": "http://env:1"}
    for no_proxy in ("*", ".mirrors.lan", "mirrors.lan", "x.lan, deb.mirrors.lan"):
        assert aps.effective_proxy("http://deb.mirrors.lan/", {}, {**env, "no_proxy": no_proxy}) \
            == "none (no_proxy names deb.mirrors.lan)", no_proxy
    assert aps.effective_proxy("http://deb.mirrors.lan/", {}, {**env, "no_proxy": "rrors.lan"}) \
        == "http://env:1 (environment http_proxy)"


# --- this machine --------------------------------------------------------------

@needs_apt
def test_machine_source_files_are_apts() -> None:
    out = subprocess.run(["apt-config", "shell", "L", "Dir::Etc::sourcelist/f",
                          "P", "Dir::Etc::sourceparts/d"],
                         capture_output=True, text=True, check=True).stdout
    shell = dict(line.split("=", 1) for line in out.split())
    config = aps.machine_config()
    assert str(aps.find_file(config, "Dir::Etc::sourcelist", "")) == shell["L"].strip("'")
    assert str(aps.find_file(config, "Dir::Etc::sourceparts", "")) == (
        shell["P"].strip("'").rstrip("/"))


@needs_apt
def test_machine_entries_and_archive_are_the_ones_apt_uses() -> None:
    """This machine's sources parse as apt reads them, and the fetch uses apt's own URIs."""
    targets = apt_index_targets()                      # the machine's apt, as configured
    config = aps.machine_config()
    entries = [e for f in aps.source_files(config) for e in aps.parse_sources_file(f)]
    assert ours(entries) == {row[:4] for row in targets}
    codename = aps.machine_codename()
    apt_uris = {uri for kind, uri, suite, _, component in targets
                if kind == "deb" and suite == codename and component == "main"}
    if codename is None or not apt_uris:
        pytest.skip("this machine has no deb entry for its own Debian release")
    assert codename is not None
    for kind, suite in (("deb-src", codename), ("deb", "a-suite-this-machine-lacks")):
        plan, _ = aps.private_sources(kind, suite, "main")
        assert {u.rstrip("/") for u in plan.uris} == apt_uris
        assert plan.note.startswith("archive from this machine's apt sources")


@needs_apt
def test_private_apt_reads_the_machines_acquire_settings(tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """A proxy set in apt's configuration reaches the private apt-get: only Dir:: keys differ.

    APT_CONFIG names a config file apt reads before apt.conf and apt.conf.d, as
    a proxy line in /etc/apt/apt.conf.d/ would be read.
    """
    conf = write(tmp_path, "proxy.conf", 'Acquire::http::Proxy "http://proxy.test:3128/";\n')
    monkeypatch.setenv("APT_CONFIG", str(conf))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    apt = headers.PrivateApt("probe")

    def dump(*options: str) -> dict[str, str]:
        out = subprocess.run(["apt-config", *options, "dump"], capture_output=True, text=True,
                             check=True).stdout
        return {k: v for k, v in aps.parse_config_dump(out).items()
                if not k.startswith(("dir::", "debug", "apt::sandbox::user", "commandline::"))}

    machine = dump()
    assert machine["acquire::http::proxy"] == "http://proxy.test:3128/"
    assert dump(*apt.options()) == machine
    assert aps.effective_proxy("http://mirror.lan/debian", aps.machine_config(), {}) == (
        "http://proxy.test:3128/ (apt setting Acquire::http::Proxy)")
    assert not (tmp_path / "redisai-build").exists()
