"""The fenced examples of the docs: which are marked runnable, their steps, and how a step's
output is compared with the page.

A page marks each example on the line just before its fence:

    <!-- example -->                           a shell session: run, output compared
    <!-- example: python PATH -->              a Python script run by PATH (from the clone's root)
    <!-- example: not run: REASON -->          shown only; REASON says why

An example is a fenced block in `sh`, `bash`, `console` or `python`, or one with a line that
starts with `redis-cli ` or `$ `. A shell session's commands are its `$ ` lines, or, in a
block without prompts, its `redis-cli` lines (`#` lines there are comments); a command whose
line ends in a backslash, or that bash does not read as whole yet (a `for` loop before its
`done`), goes on on the next line. What follows a command up to the next one is
its output. In an expected output a line `...` stands for any lines, `...` within a line for any
text, and `<clone>` for the path of the clone. A Python script's output is written as a comment
on each `print(` line.
"""
from __future__ import annotations

import dataclasses
import re
import subprocess
from pathlib import Path

MARK = re.compile(r"^<!--\s*example(?::\s*(.*?))?\s*-->\s*$")
FENCE = re.compile(r"^```(\w*)\s*$")
SHELL_LANGS = {"sh", "bash", "console"}


@dataclasses.dataclass(frozen=True)
class Block:
    page: Path
    line: int          # the fence's line, 1-based
    lang: str
    text: str
    mark: str | None   # None: unmarked; "": run; "python PATH"; "not run: REASON"

    @property
    def where(self) -> str:
        return f"{self.page.name}:{self.line}"

    @property
    def runs(self) -> bool:
        return self.mark is not None and not self.mark.startswith("not run")


@dataclasses.dataclass(frozen=True)
class Step:
    command: str
    expected: tuple[str, ...]


def blocks(page: Path) -> list[Block]:
    lines = page.read_text(encoding="utf-8").splitlines()
    found: list[Block] = []
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        start = i
        i += 1
        body = []
        while i < len(lines) and not lines[i].startswith("```"):
            body.append(lines[i])
            i += 1
        i += 1
        mark = MARK.match(lines[start - 1]) if start > 0 else None
        found.append(Block(page, start + 1, m.group(1), "\n".join(body) + "\n",
                           (mark.group(1) or "") if mark else None))
    return found


def is_example(block: Block) -> bool:
    if block.lang in SHELL_LANGS or block.lang == "python":
        return True
    return any(line.startswith(("redis-cli ", "$ ")) for line in block.text.splitlines())


def _complete(command: str) -> bool:
    """Whether bash reads `command` as whole (a `for ... do` goes on until its `done`)."""
    return subprocess.run(["bash", "-n", "-c", command], capture_output=True).returncode == 0


def steps(block: Block) -> list[Step]:
    lines = block.text.splitlines()
    prompts = any(line.startswith("$ ") for line in lines)

    def is_command(line: str) -> bool:
        return line.startswith("$ ") if prompts else line.startswith("redis-cli ")

    found: list[Step] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        if not prompts and line.startswith("#"):
            i += 1
            continue
        if not is_command(line):
            raise ValueError(f"{block.where}: output before any command: {line!r}")
        command = [line[2:] if prompts else line]
        while (command[-1].endswith("\\") or not _complete("\n".join(command))) \
                and i + 1 < len(lines):
            i += 1
            command.append(lines[i])
        i += 1
        output = []
        while i < len(lines) and not is_command(lines[i]) and \
                not (not prompts and lines[i].startswith("#")):
            output.append(lines[i])
            i += 1
        found.append(Step("\n".join(command), tuple(output)))
    return found


def python_expected(code: str) -> list[str]:
    return [line.split("#", 1)[1].strip() for line in code.splitlines()
            if line.lstrip().startswith("print(") and "#" in line]


def output_pattern(expected: tuple[str, ...] | list[str], clone: str) -> re.Pattern[str]:
    parts = []
    for line in expected:
        if line.strip() == "...":
            parts.append(r"(?:[^\n]*\n)*?")
            continue
        text = re.escape(line.rstrip())
        text = text.replace(re.escape("<clone>"), re.escape(clone))
        text = text.replace(re.escape("..."), r"[^\n]*?")
        parts.append(text + r"[ \t]*\n")
    return re.compile("".join(parts) + r"\Z")


ANSI = re.compile(r"\x1b\[[0-9;]*m")


def output_matches(expected: tuple[str, ...] | list[str], actual: str, clone: str) -> bool:
    """Whether `actual` reads as `expected`; colours are what a terminal shows, not text."""
    lines = ANSI.sub("", actual).splitlines()
    text = "".join(line + "\n" for line in lines)
    return output_pattern(expected, clone).match(text) is not None


def _writes_to_terminal(command: str, start: int) -> bool:
    """Whether the command that starts at `start` writes to the terminal: not inside `$(`,
    and no `|` or `>` (outside quotes) before the end of its command."""
    if command[:start].endswith("$("):
        return False
    quote = ""
    for ch in command[start:]:
        if quote:
            quote = "" if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch in "\n;&)":
            return True
        elif ch in "|>":
            return False
    return True


def as_on_a_terminal(command: str) -> str:
    """redis-cli prints replies as on a terminal, which is what the pages show (--no-raw);
    into a pipe, a file or a command substitution it writes raw, for the reader too."""
    starts = [m.start() for m in re.finditer(r"\bredis-cli\b", command)]
    for start in reversed(starts):
        if _writes_to_terminal(command, start):
            end = start + len("redis-cli")
            command = command[:end] + " --no-raw" + command[end:]
    return command
