"""The machine's own Debian archive, read from its apt configuration.

The header fetch (headers.py) runs apt-get with a private sources file, so
that the system's lists and caches are never touched. That file must not
name a mirror of its own: a machine behind a local mirror, an apt proxy or
an authenticated archive only reaches Debian the way its apt is set up. So
the private file takes the URIs (and their trust options: Signed-By,
Trusted, ...) of the machine's `deb` entries for the wanted suite or, when
there is none, for the machine's own Debian release, and only swaps in the
suite and the type the fetch needs (e.g. `deb-src ... bookworm main`).

What is read, the way apt reads it:
- `apt-config dump` gives the configuration apt itself uses: where the
  sources are (Dir::Etc::sourcelist, Dir::Etc::sourceparts, resolved like
  apt's FindFile) and the proxies (Acquire::http::Proxy and friends).
- sources.list and sources.list.d/*.list in the one-line format
  (`deb [opt=val ...] URI SUITE COMPONENT...`), sources.list.d/*.sources in
  the deb822 format (Types, URIs, Suites, Components, Signed-By, Enabled).

The private apt-get reads the machine's apt.conf and apt.conf.d/ as any
apt-get does (only the sources and state folders are overridden) and gets
the caller's environment, so the proxy in use is apt's own; it is parsed
here only to say it in the progress output. No archive is ever named here:
a machine whose sources hold no Debian archive at all (not Debian, or no
`deb` entry for its release) fails the fetch with a BuildError that says so
and what to add.

The parsing functions are pure (text in, values out); the `machine_*`
functions and `private_sources` read this machine.
"""
from __future__ import annotations

import os
import re
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Mapping, Sequence
from urllib.parse import urlsplit

from ._proc import run_quiet
from .errors import BuildError

# deb822 field names, by their lower-case form (field names are case-insensitive).
_FIELDS: dict[str, str] = {name.lower(): name for name in (
    "Types", "URIs", "Suites", "Components", "Enabled",
    "Architectures", "Languages", "Targets", "PDiffs", "By-Hash",
    "Allow-Insecure", "Allow-Weak", "Allow-Downgrade-To-Insecure", "Trusted",
    "Signed-By", "Check-Valid-Until", "Valid-Until-Min", "Valid-Until-Max",
    "Check-Date", "Date-Max-Future", "InRelease-Path", "Snapshot",
)}

# One-line `[options]` names -> their deb822 fields (sources.list(5)).
_ONE_LINE_OPTIONS: dict[str, str] = {
    "arch": "Architectures", "lang": "Languages", "target": "Targets",
    "pdiffs": "PDiffs", "by-hash": "By-Hash", "allow-insecure": "Allow-Insecure",
    "allow-weak": "Allow-Weak", "allow-downgrade-to-insecure": "Allow-Downgrade-To-Insecure",
    "trusted": "Trusted", "signed-by": "Signed-By", "check-valid-until": "Check-Valid-Until",
    "valid-until-min": "Valid-Until-Min", "valid-until-max": "Valid-Until-Max",
    "check-date": "Check-Date", "date-max-future": "Date-Max-Future",
    "inrelease-path": "InRelease-Path", "snapshot": "Snapshot",
}

# What the private sources keep of an entry's options: how to trust and reach
# that archive. Which indexes to fetch (Architectures, Languages, Targets,
# PDiffs) and a Snapshot pin are the machine's choices for its own packages,
# not the fetch's (Targets could even leave out the Sources index it needs).
CARRIED_OPTIONS: tuple[str, ...] = (
    "Signed-By", "Trusted", "Allow-Insecure", "Allow-Weak", "Allow-Downgrade-To-Insecure",
    "Check-Valid-Until", "Valid-Until-Min", "Valid-Until-Max", "Check-Date",
    "Date-Max-Future", "By-Hash", "InRelease-Path",
)

# Debian's suite aliases: on a Debian machine a `stable` entry is its release too.
_RELEASE_ALIASES: tuple[str, ...] = ("stable", "oldstable", "testing", "unstable", "sid")

# apt reads only these names in sources.list.d/ (others are ignored).
_PART_RE = re.compile(r"^[A-Za-z0-9_.\-]+\.(list|sources)$")


@dataclass(frozen=True)
class SourceEntry:
    """One (type, URI, suite) of the machine's apt sources."""

    type: str                              # "deb" or "deb-src"
    uri: str
    suite: str
    components: tuple[str, ...]
    options: tuple[tuple[str, str], ...]   # (deb822 field, value), in file order
    origin: str    # apt's Sourcesentry: FILE:LINE (one-line), FILE:STANZA (deb822)

    def option(self, field: str) -> str | None:
        for name, value in self.options:
            if name == field:
                return value
        return None


@dataclass(frozen=True)
class PrivateSources:
    """What the private apt-get is given, and how to say where it came from."""

    text: str        # a deb822 .sources file
    uris: tuple[str, ...]
    summary: str     # "deb-src http://mirror.lan/debian bookworm main"
    note: str        # where the URIs came from


# --- parsing (pure) ----------------------------------------------------------

def _apt_bool(value: str, default: bool = True) -> bool:
    """apt's StringToBool: yes/true/with/on/enable and their opposites, or a number."""
    v = value.strip().lower()
    if v in ("yes", "true", "with", "on", "enable"):
        return True
    if v in ("no", "false", "without", "off", "disable"):
        return False
    if v.lstrip("-").isdigit():
        return int(v) != 0
    return default


def _strip_comment(line: str) -> str:
    """Cuts a `#` comment as apt does: anywhere, except inside `[...]` options."""
    pos = 0
    while (pos := line.find("#", pos)) != -1:
        if line.count("[", 0, pos) > line.count("]", 0, pos):
            pos += 1
            continue
        return line[:pos]
    return line


def _one_line_options(text: str, origin: str) -> tuple[tuple[str, str], ...]:
    options: list[tuple[str, str]] = []
    for word in text.split():
        key, sep, value = word.partition("=")
        if not sep or not key:
            raise BuildError(f"{origin}: option {word!r} is not key=value")
        suffix = ""
        if key.endswith(("+", "-")):
            suffix = "-Add" if key.endswith("+") else "-Remove"
            key = key[:-1]
        field = _ONE_LINE_OPTIONS.get(key.lower(), key)
        options.append((field + suffix, value))
    return tuple(options)


def parse_one_line(text: str, filename: str) -> list[SourceEntry]:
    """Entries of a sources.list-format file (`deb [opt=val ...] URI SUITE [COMPONENT...]`)."""
    entries: list[SourceEntry] = []
    for lineno, raw in enumerate(text.splitlines(), start=1):
        line = _strip_comment(raw).strip()
        if not line:
            continue
        origin = f"{filename}:{lineno}"
        kind, rest = (line.split(None, 1) + [""])[:2]
        if kind not in ("deb", "deb-src"):
            raise BuildError(f"{origin}: unknown source type {kind!r} (apt wants deb or deb-src)")
        rest = rest.strip()
        options: tuple[tuple[str, str], ...] = ()
        if rest.startswith("["):
            end = rest.find("]")
            if end == -1:
                raise BuildError(f"{origin}: '[' of the options is never closed")
            options = _one_line_options(rest[1:end], origin)
            rest = rest[end + 1:]
        words = rest.split()
        if len(words) < 2:
            raise BuildError(f"{origin}: {kind} entry without a URI and a suite: {raw.strip()!r}")
        uri, suite, components = words[0], words[1], tuple(words[2:])
        entries.append(SourceEntry(kind, uri, suite, components, options, origin))
    return entries


def _deb822_stanzas(text: str, filename: str) -> list[tuple[int, dict[str, str]]]:
    """(first line, {field: value}) per stanza; folded values keep their lines."""
    stanzas: list[tuple[int, dict[str, str]]] = []
    fields: dict[str, str] = {}
    start = 0
    current: str | None = None
    for lineno, line in enumerate(text.splitlines(), start=1):
        if line.startswith("#"):
            continue
        if not line.strip():
            if fields:
                stanzas.append((start, fields))
            fields, current = {}, None
            continue
        if line[0] in " \t":
            if current is None:
                raise BuildError(f"{filename}:{lineno}: continuation line outside a field")
            more = line[1:]
            fields[current] += "\n" + ("" if more.strip() == "." else more.rstrip())
            continue
        name, sep, value = line.partition(":")
        if not sep or not name.strip():
            raise BuildError(f"{filename}:{lineno}: not a 'Field: value' line: {line!r}")
        if not fields:
            start = lineno
        current = _FIELDS.get(name.strip().lower(), name.strip())
        fields[current] = value.strip()
    if fields:
        stanzas.append((start, fields))
    return stanzas


def parse_deb822(text: str, filename: str) -> list[SourceEntry]:
    """Entries of a .sources file: one per type x URI x suite of each enabled stanza."""
    entries: list[SourceEntry] = []
    for number, (start, fields) in enumerate(_deb822_stanzas(text, filename), start=1):
        origin = f"{filename}:{number}"  # apt's Sourcesentry: the stanza's number
        if not _apt_bool(fields.get("Enabled", "yes")):
            continue
        missing = [f for f in ("Types", "URIs", "Suites") if not fields.get(f, "").strip()]
        if missing:
            raise BuildError(f"{filename}:{start}: stanza {number} has no {', '.join(missing)}")
        options = tuple((name, value) for name, value in fields.items()
                        if name not in ("Types", "URIs", "Suites", "Components", "Enabled"))
        components = tuple(fields.get("Components", "").split())
        for kind in fields["Types"].split():
            if kind not in ("deb", "deb-src"):
                raise BuildError(f"{origin}: unknown source type {kind!r} (apt wants deb or deb-src)")
            for uri in fields["URIs"].split():
                for suite in fields["Suites"].split():
                    entries.append(SourceEntry(kind, uri, suite, components, options, origin))
    return entries


def parse_config_dump(text: str) -> dict[str, str]:
    """`apt-config dump` output -> {lower-case key: value} (apt keys are case-insensitive)."""
    config: dict[str, str] = {}
    for line in text.splitlines():
        m = re.match(r'^(\S+) "(.*)";$', line.strip())
        if m:
            value = m.group(2).replace('\\"', '"').replace("\\\\", "\\")
            config[m.group(1).lower()] = value
    return config


def find_file(config: Mapping[str, str], key: str, default: str) -> Path:
    """A path setting resolved like apt's Configuration::FindFile.

    A relative value is joined to its parents' values (Dir::Etc::sourcelist
    under Dir::Etc under Dir) until one is absolute; RootDir prefixes all.
    """
    parts = key.split("::")
    value = config.get(key.lower(), "")
    if not value:
        value = default
    else:
        for depth in range(len(parts) - 1, 0, -1):
            if value.startswith(("/", "./", "~/", "../")):
                break
            parent = config.get("::".join(parts[:depth]).lower(), "")
            if parent:
                value = parent.rstrip("/") + "/" + value
    root = config.get("rootdir", "")
    if root:
        value = root.rstrip("/") + "/" + value.lstrip("/")
    return Path(os.path.normpath(value))


def debian_codename(os_release: str) -> str | None:
    """VERSION_CODENAME of /etc/os-release text when ID is debian, else None."""
    values: dict[str, str] = {}
    for line in os_release.splitlines():
        key, sep, value = line.strip().partition("=")
        if sep:
            values[key] = value.strip().strip("\"'")
    if values.get("ID") != "debian":
        return None
    return values.get("VERSION_CODENAME") or None


def _no_proxy_matches(host: str, no_proxy: str) -> bool:
    for item in no_proxy.split(","):
        item = item.strip().lstrip(".")
        if item == "*" or (item and (host == item or host.endswith("." + item))):
            return True
    return False


def effective_proxy(uri: str, config: Mapping[str, str], environ: Mapping[str, str]) -> str:
    """The proxy apt uses for `uri`, and the setting it comes from, in words.

    As apt's http method: Acquire::<scheme>::Proxy::<host>, then
    Acquire::<scheme>::Proxy (https falls back to the http settings), then
    Proxy-Auto-Detect, then the <scheme>_proxy environment variable unless
    no_proxy names the host (apt reads only the lower-case variables).
    "DIRECT" means no proxy.
    """
    if uri.startswith("mirror"):  # mirror+file:/list: the mirrors listed there (http)
        uri = "http://"
    parts = urlsplit(uri)
    scheme, host = parts.scheme, parts.hostname or ""
    if scheme not in ("http", "https"):
        return f"none ({scheme or 'no'} scheme)"
    methods = ("https", "http") if scheme == "https" else ("http",)
    keys = [f"Acquire::{m}::Proxy::{host}" for m in methods]
    keys += [f"Acquire::{m}::Proxy" for m in methods]
    for key in keys:
        value = config.get(key.lower())
        if value:
            if value.upper() == "DIRECT":
                return f"none (DIRECT in {key})"
            return f"{value} (apt setting {key})"
    for m in methods:
        key = f"Acquire::{m}::Proxy-Auto-Detect"
        detect = config.get(key.lower())
        if detect:
            return f"found by {detect} (apt setting {key})"
    var = f"{scheme}_proxy"
    value = environ.get(var)
    if value:
        if _no_proxy_matches(host, environ.get("no_proxy", "")):
            return f"none (no_proxy names {host})"
        return f"{value} (environment {var})"
    return "none"


def archive_entries(entries: Iterable[SourceEntry], suite: str, component: str,
                    codename: str | None) -> list[SourceEntry]:
    """The `deb` entries that reach the Debian archive serving `suite`/`component`.

    Those of `suite` itself if the machine has any, else those of the
    machine's own Debian release (`codename`, or a Debian alias such as
    stable). deb-src entries are not used: the URIs of what the machine
    installs from are the ones known to work. One entry per URI.
    """
    debs = [e for e in entries if e.type == "deb" and component in e.components]
    wanted: list[set[str]] = [{suite}]
    if codename:
        wanted.append({codename, *_RELEASE_ALIASES})
    for suites in wanted:
        found: dict[str, SourceEntry] = {}
        for entry in debs:
            if entry.suite in suites:
                found.setdefault(entry.uri, entry)
        if found:
            return list(found.values())
    return []


def _field(name: str, value: str) -> list[str]:
    first, *more = value.split("\n")
    lines = [f"{name}: {first}" if first else f"{name}:"]
    lines += [" " + (line if line.strip() else ".") for line in more]
    return lines


def render_deb822(kind: str, suite: str, component: str,
                  entries: Sequence[SourceEntry]) -> str:
    """A .sources file: `kind suite component` at each entry's URI, with its carried options."""
    stanzas: list[str] = []
    for entry in entries:
        lines = [f"# from {entry.origin}", f"Types: {kind}", f"URIs: {entry.uri}",
                 f"Suites: {suite}", f"Components: {component}"]
        for name, value in entry.options:
            if name in CARRIED_OPTIONS:
                lines += _field(name, value)
        stanzas.append("\n".join(lines) + "\n")
    return "\n".join(stanzas)


def no_archive_message(files: Sequence[Path], kind: str, suite: str, component: str,
                       codename: str | None) -> str:
    """Why a fetch of `kind suite component` found no archive, and what would fix it."""
    read = ", ".join(str(f) for f in files) or "none"
    release = codename or "not Debian (/etc/os-release)"
    return (f"no Debian archive in this machine's apt sources (files read: {read}; "
            f"release: {release}), so there is nowhere to fetch {kind} {suite} {component} "
            f"from: the build uses only the machine's own apt sources, never a mirror of its "
            f"own. Add a `deb` entry with component {component} for {suite} or for the "
            f"machine's Debian release (sources.list, or a .list or deb822 .sources file in "
            f"sources.list.d/), then run the build again")


def plan_private_sources(entries: Sequence[SourceEntry], files: Sequence[Path],
                         kind: str, suite: str, component: str,
                         codename: str | None) -> PrivateSources:
    """The private sources for one fetch, from the machine's entries (pure); a BuildError
    (no_archive_message) when they hold no Debian archive."""
    chosen = archive_entries(entries, suite, component, codename)
    if not chosen:
        raise BuildError(no_archive_message(files, kind, suite, component, codename))
    where = ", ".join(dict.fromkeys(e.origin for e in chosen))
    via = (f"its {suite} entries" if chosen[0].suite == suite
           else f"the machine's own release ({chosen[0].suite}) entries")
    note = f"archive from this machine's apt sources, {via}: {where}"
    uris = " ".join(e.uri for e in chosen)
    return PrivateSources(text=render_deb822(kind, suite, component, chosen),
                          uris=tuple(e.uri for e in chosen),
                          summary=f"{kind} {uris} {suite} {component}", note=note)


# --- this machine --------------------------------------------------------------

def machine_config() -> dict[str, str]:
    """apt's configuration as `apt-config dump` prints it; {} without apt-config."""
    if shutil.which("apt-config") is None:
        return {}
    out = run_quiet(["apt-config", "dump"], "apt-config dump", env={"LC_ALL": "C"})
    return parse_config_dump(out)


def source_files(config: Mapping[str, str]) -> list[Path]:
    """The sources files apt reads, in apt's order: sourcelist, then sourceparts/*."""
    main = find_file(config, "Dir::Etc::sourcelist", "/etc/apt/sources.list")
    parts = find_file(config, "Dir::Etc::sourceparts", "/etc/apt/sources.list.d")
    files = [main] if main.is_file() else []
    if parts.is_dir():
        files += sorted(p for p in parts.iterdir() if _PART_RE.match(p.name) and p.is_file())
    return files


def parse_sources_file(path: Path) -> list[SourceEntry]:
    """Entries of one file, in the format its name says (.sources: deb822)."""
    try:
        text = path.read_text(errors="replace")
    except OSError as exc:
        raise BuildError(f"cannot read apt sources file {path}: {exc.strerror}") from None
    if path.suffix == ".sources":
        return parse_deb822(text, str(path))
    return parse_one_line(text, str(path))


def machine_codename(os_release: Path = Path("/etc/os-release")) -> str | None:
    try:
        return debian_codename(os_release.read_text(errors="replace"))
    except OSError:
        return None


def private_sources(kind: str, suite: str, component: str) -> tuple[PrivateSources, str]:
    """The private sources for `kind suite component` on this machine, and its proxy in words;
    a BuildError when the machine's sources hold no Debian archive."""
    config = machine_config()
    files = source_files(config)
    entries = [e for f in files for e in parse_sources_file(f)]
    plan = plan_private_sources(entries, files, kind, suite, component, machine_codename())
    return plan, effective_proxy(plan.uris[0], config, os.environ)
