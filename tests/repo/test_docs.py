"""The documentation stays in step with the code, and the repository stands alone.

Every registered command, module argument and AI.CONFIG subcommand is documented; every error
text the commands can answer is written in the docs; every LLAPI function and INFO field is
documented, and the INFO sections in their order; the versions the docs state (backend ABI, RDB
encoding, the module's and the frameworks') are the code's; every file a doc names exists, and
every relative link and anchor in README.md and docs/ resolves; no file refers to anything
outside the repository. Reads sources only; starts no server.
"""
from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from build_tools import pins
from paths import ROOT

DOCS = ROOT / "docs"
PAGES = sorted(DOCS.glob("*.md"))


def _read(path: Path) -> str:
    return path.read_text(encoding="utf-8")


def _flat(text: str) -> str:
    """Text with every run of white space made one space: doc tables and paragraphs wrap."""
    return re.sub(r"\s+", " ", text)


def _registered_commands() -> list[str]:
    table = _read(ROOT / "module" / "redisai.c")
    names = re.findall(r'\{"(ai\.[a-z_]+)",', table)
    assert len(names) >= 20, "command table of module/redisai.c not found"
    return [n.upper() for n in names]


def _headings(path: Path) -> list[str]:
    return [m.group(1) for m in re.finditer(r"^#+\s+(.*)$", _read(path), re.M)]


def _anchor(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def _tracked_files() -> list[Path]:
    """The files git tracks (the repository as it would be cloned)."""
    out = subprocess.run(["git", "-C", str(ROOT), "ls-files", "-z"], capture_output=True,
                         check=True).stdout
    return [ROOT / name for name in out.decode().split("\0") if name]


def _c_string_literals(source: str) -> list[str]:
    """C string literals, adjacent literals joined ("a" "b" is "ab")."""
    source = re.sub(r'"\s*\\?\s*\n\s*"', "", source)
    source = re.sub(r'"\s+"', "", source)
    return [s.replace('\\"', '"') for s in re.findall(r'"((?:[^"\\]|\\.)*)"', source)]


# --------------------------------------------------------------------------------------
# The repository stands alone
# --------------------------------------------------------------------------------------

# Spelled in parts so that this file does not match itself.
OUTSIDE_REFERENCES = ["../" + "shared", "shared" + "/spec", "/work" + "/shared"]
SPEC_CITATION = re.compile(r"\b[Ss]pec" + r"(?:\s+sections?)?\s+\d|\bspec" + r"'s (?:check )?order")


def test_no_file_refers_outside_the_repository() -> None:
    found = []
    for path in _tracked_files():
        if not path.is_file():
            continue
        try:
            text = _read(path)
        except UnicodeDecodeError:
            continue  # binary: pictures, archives
        for n, line in enumerate(text.splitlines(), 1):
            if any(ref in line for ref in OUTSIDE_REFERENCES):
                found.append(f"{path.relative_to(ROOT)}:{n}: {line.strip()[:100]}")
    assert not found, "references to files outside the repository:\n" + "\n".join(found)


def test_no_citation_of_an_outside_spec() -> None:
    """Comments and docs cite this repository's docs ("docs/commands.md, AI.MODELSTORE"),
    never the numbered sections of a specification that is not in it."""
    found = []
    for path in _tracked_files():
        if not path.is_file() or path.suffix not in {".c", ".h", ".cpp", ".py", ".md", ".sh",
                                                      ".txt", ".toml", ".cfg", ".map"}:
            continue
        for n, line in enumerate(_read(path).splitlines(), 1):
            if SPEC_CITATION.search(line):
                found.append(f"{path.relative_to(ROOT)}:{n}: {line.strip()[:100]}")
    assert not found, "citations of spec sections:\n" + "\n".join(found)


# --------------------------------------------------------------------------------------
# Commands, arguments, error texts
# --------------------------------------------------------------------------------------

def test_every_command_has_a_section() -> None:
    headings = " ".join(_headings(DOCS / "commands.md"))
    missing = [c for c in _registered_commands() if not re.search(rf"\b{re.escape(c)}\b", headings)]
    assert not missing, f"docs/commands.md has no section for {missing}"


def test_every_module_argument_and_subcommand_is_documented() -> None:
    # The module arguments and AI.CONFIG (commands/config_commands.c).
    config_c = _read(ROOT / "module" / "commands" / "config_commands.c")
    keys = set(re.findall(r'strcasecmp\((?:key|sub|n), "([A-Z_]+)"\)', config_c))
    kinds_c = _read(ROOT / "module" / "core" / "backend_kind.c")  # the kind names' table
    kinds = set(re.findall(r'\[RAI_BACKEND_[A-Z]+\] = "([A-Z]+)"', kinds_c))
    assert {"BACKENDSPATH", "LOADBACKEND", "LIST", "THREADS_PER_QUEUE"} <= keys
    assert {"TF", "TORCH", "ONNX"} <= kinds
    doc = _read(DOCS / "configuration.md")
    missing = sorted(k for k in keys | kinds if f"`{k}" not in doc)
    assert not missing, f"docs/configuration.md does not mention {missing}"


# Where the texts a client can get back are made: command parsers and replies, the engine, the
# key types and the core's shared messages.
ERROR_SOURCES = ["module/commands/*.c", "module/engine/*.[ch]", "module/types/*.[ch]",
                 "module/core/*.[ch]", "module/llapi/*.c"]
ERROR_PAGES = ["commands.md", "configuration.md", "llapi.md", "persistence.md", "info.md"]


def test_every_error_text_is_documented() -> None:
    """Each `ERR ...`, `NOPERM ...`, `WRONGTYPE ...` and `OOM ...` literal of the sources is
    written in the docs, word for word (the parts around a %s each)."""
    docs = _flat(" ".join(_read(DOCS / page) for page in ERROR_PAGES))
    checked, missing = 0, []
    for pattern in ERROR_SOURCES:
        for path in sorted(ROOT.glob(pattern)):
            for literal in _c_string_literals(_read(path)):
                if not re.match(r"(ERR|NOPERM|WRONGTYPE|OOM) ", literal):
                    continue
                checked += 1
                parts = re.split(r"%[-.*0-9]*(?:zu|lld|llu|ld|s|d|u)", literal)
                if any(p.strip() and _flat(p).strip() not in docs for p in parts):
                    missing.append(f"{path.relative_to(ROOT)}: {literal}")
    assert checked > 100, "error texts of the sources not found"
    assert not missing, "error texts in no page of docs/:\n" + "\n".join(sorted(set(missing)))


def test_every_llapi_function_is_documented() -> None:
    header = _read(ROOT / "include" / "redisai" / "llapi.h")
    names = re.findall(r"^\s*X\([^,]+, (RedisAI_\w+), ", header, re.M)
    count = int(re.search(r"#define REDISAI_LLAPI_FUNCTION_COUNT (\d+)", header).group(1))
    assert len(names) == count
    doc = _read(DOCS / "llapi.md")
    missing = [n for n in names if not re.search(rf"\b{n}\(", doc)]
    assert not missing, f"docs/llapi.md does not document {missing}"
    assert f"same {count} functions" in doc


# --------------------------------------------------------------------------------------
# INFO MODULES
# --------------------------------------------------------------------------------------

def _info_sections_in_code() -> list[str]:
    sources = [p for p in (ROOT / "module").rglob("*.c")
               if 'InfoAddSection(ctx, "versions")' in _read(p)]
    assert len(sources) == 1, "the INFO callback of the module not found"
    sections = re.findall(r'InfoAddSection\(ctx, "(\w+)"\)', _read(sources[0]))
    # The isolation hosts' section, added last by its own file.
    iso = re.findall(r'InfoAddSection\(ctx, "(\w+)"\)',
                     _read(ROOT / "module" / "isolation" / "core" / "iso_info.c"))
    return sections + iso


# RedisAI 1.2's sections, in 1.2's order: tools split INFO on '#' and take them by position.
INFO_SECTIONS_1_2 = ["versions", "git", "load_time_configs", "backends_info", "cpu"]


def test_info_sections_in_order() -> None:
    doc = _read(DOCS / "info.md")
    table = re.findall(r"^\| \d+ \| `ai_(\w+)` \|", doc, re.M)
    code = _info_sections_in_code()
    assert table == code
    assert code[:len(INFO_SECTIONS_1_2)] == INFO_SECTIONS_1_2, code
    origin = re.findall(r"^\| \d+ \| `ai_\w+` \| ([^|]*?) \|", doc, re.M)
    assert origin[:len(INFO_SECTIONS_1_2)] == ["1.2"] * len(INFO_SECTIONS_1_2), origin
    assert "1.2" not in origin[len(INFO_SECTIONS_1_2):], origin


def test_every_info_field_is_documented() -> None:
    doc = _read(DOCS / "info.md")
    fields = set()
    for path in list((ROOT / "module").rglob("*.c")) + list((ROOT / "backends").rglob("*.c")):
        fields |= set(re.findall(r'(?:InfoAddField\w*|addTime|add)\(\s*ctx,\s*"(\w+)"',
                                 _read(path)))
    assert {"RedisAI_version", "rdb_version", "onnxruntime_memory", "self_used_cpu_sys",
            "isolated_backends", "restarts"} <= fields
    missing = sorted(f for f in fields if f"`ai_{f}`" not in doc and f"`{f}`" not in doc)
    assert not missing, f"docs/info.md does not document {missing}"


# --------------------------------------------------------------------------------------
# Versions the docs state
# --------------------------------------------------------------------------------------

def test_backend_abi_version_is_the_headers() -> None:
    header = _read(ROOT / "include" / "redisai" / "backend_abi.h")
    major = re.search(r"#define RAI_ABI_MAJOR (\d+)", header).group(1)
    minor = re.search(r"#define RAI_ABI_MINOR (\d+)", header).group(1)
    doc = _read(DOCS / "backends.md")
    assert f"The current version is {major}.{minor}" in doc
    note = re.search(r"description data: ((?:[0-9a-f]{2} ?){12})", doc).group(1).split()
    assert (int(note[0], 16), int(note[4], 16)) == (int(major), int(minor))
    stated = set()
    for page in [ROOT / "README.md", *PAGES]:
        stated |= set(re.findall(r"\babi[\" =>]+\"?(\d+\.\d+)", _read(page)))
    assert stated <= {f"{major}.{minor}"}, f"ABI versions in the docs: {stated}"


def test_rdb_encoding_version_is_the_codes() -> None:
    enc = re.search(r"#define RAI_ENC_VER (\d+)",
                    _read(ROOT / "module" / "types" / "rdb_io.h")).group(1)
    stated = set()
    for page in [ROOT / "README.md", *PAGES]:
        stated |= set(re.findall(r"ai_rdb_version:(\d+)", _read(page)))
    assert stated == {enc}
    assert f"register version **{enc}**" in _flat(_read(DOCS / "persistence.md"))


def test_project_and_framework_versions_are_the_pins() -> None:
    pinned = dict(p.split("==") for p in (*pins.PYPI_PINS, *pins.CLIENT_PYPI_PINS[:2]))
    stated = set()
    for page in [ROOT / "README.md", *PAGES]:
        stated |= set(re.findall(r"install/redisai-(\d+\.\d+\.\d+)/", _read(page)))
    assert stated == {pins.VERSION}
    readme = _read(ROOT / "README.md")
    support = readme.split("## What is supported", 1)[1].split("\n## ", 1)[0]
    for version in (pins.REDIS_VERSION, pinned["tensorflow-cpu"], pinned["torch"],
                    pinned["onnxruntime"], pins.ORT_SIDE_BY_SIDE.split("==")[1],
                    pins.CLIENT_PYPI_PINS[0].split("==")[1], pinned["redis"]):
        assert version in support, f"README's support table lacks {version}"
    for pin in pins.SERVER_PINS:  # the servers of the CI matrix, and the wheels they come from
        distribution, version = pin.wheel.split("==")
        for stated in (pin.version, f"`{distribution}` {version}"):
            assert stated in support, f"README's support table lacks {stated} ({pin.name})"
    install = _flat(_read(DOCS / "install.md"))
    for source_pin in pins.SOURCE_SERVER_PINS:  # and the source packages the others are built from
        for stated in (source_pin.version, f"`{source_pin.package}` {source_pin.package_version}"):
            assert stated in support, f"README's support table lacks {stated} ({source_pin.name})"
            assert stated in install, f"docs/install.md lacks {stated} ({source_pin.name})"


# --------------------------------------------------------------------------------------
# Files and links
# --------------------------------------------------------------------------------------

def test_named_files_exist() -> None:
    named: set[tuple[str, str]] = set()
    for page in [ROOT / "README.md", *PAGES]:
        for path in re.findall(
                r"`((?:module|backends|build_tools|tests|bench|ci|include|python)/[\w./-]+)`",
                _read(page)):
            named.add((page.name, path))
    assert len(named) > 20
    # Paths inside an install tree (backends/redisai_torch/redisai_torch.so) are not sources.
    missing = sorted(f"{page}: {p}" for page, p in named
                     if "<" not in p and not p.endswith(".so")
                     and not p.startswith("backends/redisai_") and not (ROOT / p).exists())
    assert not missing, "files named in the docs that do not exist:\n" + "\n".join(missing)


@pytest.mark.parametrize("page", [ROOT / "README.md", *PAGES], ids=lambda p: p.name)
def test_links_resolve(page: Path) -> None:
    text = re.sub(r"```.*?```", "", _read(page), flags=re.S)
    bad = []
    for link in re.findall(r"\]\(([^)\s]+)\)", text):
        if re.match(r"[a-z]+:", link):
            continue
        path, _, anchor = link.partition("#")
        target = (page.parent / path).resolve() if path else page
        if not target.exists():
            bad.append(f"{link}: no such file")
        elif anchor and target.suffix == ".md" and anchor not in map(_anchor, _headings(target)):
            bad.append(f"{link}: no such heading")
    assert not bad, f"{page.name}: {bad}"


def test_readme_links_every_doc() -> None:
    readme = _read(ROOT / "README.md")
    missing = [p.name for p in PAGES if p.name != "README.md" and f"docs/{p.name}" not in readme]
    assert not missing, f"README.md does not link {missing}"


def test_docs_index_links_every_page() -> None:
    index = _read(DOCS / "README.md")
    missing = [p.name for p in PAGES if p.name != "README.md" and f"]({p.name})" not in index]
    assert not missing, f"docs/README.md does not link {missing}"


# A fresh Debian 12 shell has no `python`, and its python3 lacks the frameworks: the pages name
# the interpreter of .venv/, and python3 only for what makes or lists it (setup, servers).
BARE_PYTHON = re.compile(r"(?<![\w/.-])python (?:-m |bench/|tests/)")
SYSTEM_PYTHON_BUILD = re.compile(r"(?<![\w/.-])python3 -m build_tools (?!setup|servers|headers)")


def test_pages_name_an_interpreter_a_fresh_shell_has() -> None:
    pages = [ROOT / "README.md", ROOT / "bench" / "README.md", ROOT / "tests" / "README.md",
             *PAGES]
    found = []
    for page in pages:
        for n, line in enumerate(_read(page).splitlines(), 1):
            if BARE_PYTHON.search(line) or SYSTEM_PYTHON_BUILD.search(line):
                found.append(f"{page.relative_to(ROOT)}:{n}: {line.strip()[:100]}")
    assert not found, ("commands a fresh shell cannot run (say .venv/bin/python):\n"
                       + "\n".join(found))
