"""The documentation stays in step with the code: every registered command, module argument and
AI.CONFIG subcommand is documented, every file a doc names exists, and every relative link and
anchor in README.md and docs/ resolves. Reads sources only; starts no server."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from paths import ROOT

DOCS = ROOT / "docs"
PAGES = sorted(DOCS.glob("*.md"))


def _read(path: Path) -> str:
    return path.read_text(encoding="utf-8")


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


def test_every_command_has_a_section() -> None:
    headings = " ".join(_headings(DOCS / "commands.md"))
    missing = [c for c in _registered_commands() if not re.search(rf"\b{re.escape(c)}\b", headings)]
    assert not missing, f"docs/commands.md has no section for {missing}"


def test_every_module_argument_and_subcommand_is_documented() -> None:
    config_c = _read(ROOT / "module" / "core" / "config.c")
    keys = set(re.findall(r'strcasecmp\((?:key|sub|n), "([A-Z_]+)"\)', config_c))
    kinds_c = _read(ROOT / "module" / "core" / "backend_kind.c")  # the kind names' table
    kinds = set(re.findall(r'\[RAI_BACKEND_[A-Z]+\] = "([A-Z]+)"', kinds_c))
    assert {"BACKENDSPATH", "LOADBACKEND", "LIST", "THREADS_PER_QUEUE"} <= keys
    assert {"TF", "TORCH", "ONNX"} <= kinds
    doc = _read(DOCS / "configuration.md")
    missing = sorted(k for k in keys | kinds if f"`{k}" not in doc)
    assert not missing, f"docs/configuration.md does not mention {missing}"


def test_named_files_exist() -> None:
    named: set[str] = set()
    for page in PAGES:
        named |= set(re.findall(r"`((?:module|backends|build_tools|tests|bench|ci)/[\w./-]+)`",
                                _read(page)))
    assert len(named) > 20
    # Paths inside an install tree (backends/redisai_torch/redisai_torch.so) are not sources.
    sources = {p for p in named
               if "<" not in p and not p.endswith(".so") and not p.startswith("backends/redisai_")}
    missing = sorted(p for p in sources if not (ROOT / p).exists())
    assert not missing, f"files named in docs/ that do not exist: {missing}"


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
