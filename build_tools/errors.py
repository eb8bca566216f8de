"""The one error type of build_tools.

A BuildError that comes from a subprocess carries the command, its exit code
and its output, and prints all three, so a failed step explains itself.
"""
from __future__ import annotations

import shlex
from typing import Sequence


class BuildError(Exception):
    """A step of setup, build, check or serve failed.

    `command`, `returncode` and `output` are set when the failure is a
    subprocess; `output` is None when the output went straight to the
    terminal (it is then already above the error).
    """

    def __init__(self, message: str, *, command: Sequence[str] | None = None,
                 returncode: int | None = None, output: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.command = list(command) if command is not None else None
        self.returncode = returncode
        self.output = output

    def __str__(self) -> str:
        lines = [self.message]
        if self.command is not None:
            lines.append(f"  command: {shlex.join(self.command)}")
        if self.returncode is not None:
            lines.append(f"  exit code: {self.returncode}")
        if self.command is not None:
            if self.output is None:
                lines.append("  output: (shown above)")
            elif not self.output.strip():
                lines.append("  output: (none)")
            else:
                lines.append("  output:")
                lines.extend("    " + line for line in self.output.rstrip().splitlines())
        return "\n".join(lines)
