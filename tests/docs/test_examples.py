"""The docs' examples run as written (support/doc_examples.py says how a page marks them).

Each page's runnable examples run in order in one bash session from the clone's root, against
the server `ci/setup-and-serve.sh` starts (the module and every backend of the built tree, the
module arguments of `build_tools serve`), after the documented `build_tools examples`; what each
command prints is compared with the page. The ports the pages use are the reader's: 6380 (the
served server) becomes the test server's port, and any other (6381-6389, 7000-7009, servers an
example starts itself) a free one, in commands, outputs and scripts alike. Every fenced example
of these pages must be marked: run, or not run with a reason.
"""
from __future__ import annotations

import os
import re
import socket
import subprocess
from pathlib import Path
from typing import Iterator

import pytest

import doc_examples
from build_tools import serve as build_serve
from doc_session import Session
from paths import ROOT
from redis_server import RedisServer, free_port

PAGES = [ROOT / "README.md"] + [ROOT / "docs" / f"{name}.md" for name in
                                ("install", "commands", "configuration", "backends",
                                 "isolation", "cluster")]
pytestmark = pytest.mark.inprocess_only("the pages show the server of ci/setup-and-serve.sh, "
                                        "whose backends run in-process")
SERVED_PORT = 6380
OTHER_PORTS = re.compile(r"\b(638[1-9]|700[0-9])\b")


def _served_args(install_dir: Path) -> list[str]:
    cmd = build_serve.server_command(install_dir, SERVED_PORT)
    at = cmd.index("--loadmodule")
    return cmd[at + 2:]


def _port_pair_free(port: int) -> bool:
    for p in (port, port + 10000):  # a cluster node's bus port is its port + 10000
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            try:
                s.bind(("127.0.0.1", p))
            except OSError:
                return False
    return True


def _free_node_port() -> int:
    while True:
        port = free_port()
        if port < 55535 and _port_pair_free(port):
            return port


def _reader_env() -> dict[str, str]:
    """A fresh shell's environment: no virtual environment of the clone on PATH."""
    env = dict(os.environ)
    env.pop("VIRTUAL_ENV", None)
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep)
                                  if p and not p.startswith(str(ROOT)))
    return env


@pytest.fixture(scope="module")
def example_files() -> None:
    """The documented command that makes the docs' model files."""
    proc = subprocess.run([str(ROOT / ".venv" / "bin" / "python"), "-m", "build_tools",
                           "examples"], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def _marked(page: Path) -> list[doc_examples.Block]:
    return [b for b in doc_examples.blocks(page) if doc_examples.is_example(b)]


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_example_is_marked(page: Path) -> None:
    unmarked = [b.where for b in _marked(page) if b.mark is None]
    assert not unmarked, ("examples without <!-- example --> or <!-- example: not run: "
                          f"why --> before the fence: {unmarked}")
    for b in _marked(page):
        if b.mark and b.mark.startswith("not run"):
            assert re.match(r"not run: \S", b.mark), f"{b.where}: say why it is not run"
        elif b.mark and not b.mark.startswith("python "):
            raise AssertionError(f"{b.where}: unknown mark {b.mark!r}")


class _Ports:
    def __init__(self, served: int, text: str) -> None:
        self.map = {str(SERVED_PORT): str(served)}
        for port in sorted(set(OTHER_PORTS.findall(text))):
            self.map[port] = str(_free_node_port())

    def apply(self, text: str) -> str:
        if len(self.map) == 1:
            return text.replace(str(SERVED_PORT), self.map[str(SERVED_PORT)])
        pattern = re.compile(r"\b(" + "|".join(self.map) + r")\b")
        return pattern.sub(lambda m: self.map[m.group(1)], text)

    def others(self) -> list[str]:
        return [v for k, v in self.map.items() if k != str(SERVED_PORT)]


def _check_ports(where: str, command: str) -> None:
    for use in re.findall(r"redis-cli[^|;&\n]*", command):
        if "--cluster" not in use and not re.search(r"-p \S", use):
            raise AssertionError(f"{where}: `{use.strip()}` names no port: the reader's "
                                 "redis-cli would reach another server (the default 6379)")


@pytest.fixture
def served(module_path: Path, install_dir: Path) -> Iterator[RedisServer]:
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", TF_ENABLE_ONEDNN_OPTS="0")
    srv = RedisServer(module_path, _served_args(install_dir), env=env)
    yield srv
    srv.stop()


def _run_python(block: doc_examples.Block, ports: _Ports, env: dict[str, str]) -> None:
    interpreter = ROOT / block.mark.split(None, 1)[1]
    if not interpreter.exists():
        pytest.fail(f"{block.where}: {interpreter} is missing: `python3 -m build_tools setup`")
    expected = doc_examples.python_expected(block.text)
    assert expected, f"{block.where}: no print() line with its output in a comment"
    proc = subprocess.run([str(interpreter), "-W", "ignore", "-c", ports.apply(block.text)],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, f"{block.where}: exit {proc.returncode}\n{proc.stderr}"
    actual = "\n".join(line.strip() for line in proc.stdout.splitlines())
    assert doc_examples.output_matches(expected, actual, str(ROOT)), \
        f"{block.where}: the page says {expected}, the script printed:\n{proc.stdout}"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_examples_run_as_written(page: Path, served: RedisServer, example_files: None) -> None:
    runnable = [b for b in _marked(page) if b.runs]
    if not runnable:
        pytest.skip(f"{page.name} has no runnable example")
    env = _reader_env()
    ports = _Ports(served.port, page.read_text(encoding="utf-8"))
    session = Session(ROOT, env)
    try:
        for block in runnable:
            if block.mark.startswith("python "):
                _run_python(block, ports, env)
                continue
            for step in doc_examples.steps(block):
                command = ports.apply(step.command)
                _check_ports(block.where, command)
                command = doc_examples.as_on_a_terminal(command)
                status, output = session.run(command)
                expected = [ports.apply(line) for line in step.expected]
                assert doc_examples.output_matches(expected, output, str(ROOT)), (
                    f"{block.where}: `{step.command}`\n--- the page:\n" + "\n".join(expected)
                    + f"\n--- the server (exit {status}):\n{output}")
        assert served.alive(), served.log()[-3000:]
    finally:
        session.close()
        for port in ports.others():
            subprocess.run(["redis-cli", "-p", port, "shutdown", "nosave"],
                           capture_output=True, timeout=30)
