"""One bash session for a page's examples, as a reader's terminal: variables and the working
directory carry from one command to the next. Each command runs with stdin from /dev/null
(so that a `redis-cli -x` without a redirect cannot read the next command) and stderr joined to
stdout, as a terminal shows both."""
from __future__ import annotations

import os
import select
import subprocess
import time
import uuid
from pathlib import Path


class SessionError(RuntimeError):
    pass


class Session:
    def __init__(self, cwd: Path, env: dict[str, str]) -> None:
        self.marker = f"__doc_step_{uuid.uuid4().hex}__"
        self.proc = subprocess.Popen(["bash", "--noprofile", "--norc"], cwd=cwd, env=env,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT)

    def run(self, command: str, timeout: float = 120.0) -> tuple[int, str]:
        """(exit status, output) of one command."""
        assert self.proc.stdin is not None and self.proc.stdout is not None
        script = f"{{\n{command}\n}} </dev/null 2>&1\nprintf '\\n{self.marker} %d\\n' $?\n"
        self.proc.stdin.write(script.encode())
        self.proc.stdin.flush()
        data = b""
        end = f"\n{self.marker} ".encode()
        deadline = time.monotonic() + timeout
        fd = self.proc.stdout.fileno()
        while end not in data or not data.endswith(b"\n"):
            left = deadline - time.monotonic()
            if left <= 0:
                raise SessionError(f"no end after {timeout:.0f} s; output so far:\n"
                                   f"{data.decode(errors='replace')}")
            ready, _, _ = select.select([fd], [], [], left)
            if not ready:
                continue
            chunk = os.read(fd, 65536)
            if not chunk:
                raise SessionError(f"bash ended; output:\n{data.decode(errors='replace')}")
            data += chunk
        output, _, status = data.decode(errors="replace").rpartition(end.decode())
        return int(status.strip()), output

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
