"""The examples of README.md's "Try it" run as written: the redis-cli session and the Python
client script are taken from the README itself, run against a server of the built tree (the
module and every backend, as `ci/setup-and-serve.sh` starts it), and their output is compared
with what the README shows. Only the port changes: 6380 becomes the test server's.
"""
from __future__ import annotations

import pathlib
import re
import subprocess
from typing import Iterator

import pytest

from paths import ROOT
from redis_server import RedisServer

README = ROOT / "README.md"
CLIENT_PYTHON = ROOT / ".venv-client" / "bin" / "python"
PORT_IN_README = "6380"


def _try_it_blocks(lang: str) -> list[str]:
    text = README.read_text(encoding="utf-8")
    section = text.split("\n## Try it\n", 1)[1].split("\n## ", 1)[0]
    return re.findall(rf"```{lang}\n(.*?)```", section, re.S)


def _console_steps(block: str) -> list[tuple[str, list[str]]]:
    """(command, expected output lines) for each `$ ` prompt; a line ending in a backslash
    continues the command on the next line."""
    steps: list[tuple[str, list[str]]] = []
    lines = block.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        assert line.startswith("$ "), f"README console block: expected a prompt, got {line!r}"
        command = line[2:]
        while command.endswith("\\"):
            i += 1
            command = command[:-1] + " " + lines[i].strip()
        i += 1
        output = []
        while i < len(lines) and not lines[i].startswith("$ "):
            output.append(lines[i])
            i += 1
        steps.append((command, output))
    return steps


@pytest.fixture(scope="module")
def served(module_path: pathlib.Path, install_dir: pathlib.Path) -> Iterator[RedisServer]:
    backends = install_dir / "backends"
    args = ["TF", str(backends / "redisai_tensorflow" / "redisai_tensorflow.so"),
            "TORCH", str(backends / "redisai_torch" / "redisai_torch.so"),
            "ONNX", str(backends / "redisai_onnxruntime" / "redisai_onnxruntime.so")]
    srv = RedisServer(module_path, args)
    yield srv
    srv.stop()


@pytest.fixture
def fresh(served: RedisServer) -> RedisServer:
    served.client().flushall()
    return served


def test_readme_has_both_examples() -> None:
    assert len(_try_it_blocks("console")) == 1
    assert len(_try_it_blocks("python")) == 1


def test_redis_cli_example(fresh: RedisServer) -> None:
    steps = _console_steps(_try_it_blocks("console")[0])
    assert len(steps) >= 4
    for command, expected in steps:
        assert f"redis-cli -p {PORT_IN_README} " in command, command
        # --no-raw: redis-cli prints replies as on a terminal, which is what the README shows.
        run = command.replace(f"redis-cli -p {PORT_IN_README} ",
                              f"redis-cli --no-raw -p {fresh.port} ")
        proc = subprocess.run(["bash", "-c", run], capture_output=True, text=True, timeout=60)
        assert proc.returncode == 0, (command, proc.stderr)
        assert proc.stdout.splitlines() == expected, (command, proc.stdout)
    assert fresh.alive(), fresh.log()[-3000:]


def test_python_client_example(fresh: RedisServer) -> None:
    if not CLIENT_PYTHON.exists():
        pytest.skip(f"{CLIENT_PYTHON} is missing: run `python3 -m build_tools setup` to create "
                    ".venv-client with the PyPI redisai client")
    code = _try_it_blocks("python")[0]
    assert f"port={PORT_IN_README}" in code
    # What the script prints is written in the README as a comment on each print() line.
    expected = [line.split("#", 1)[1].strip() for line in code.splitlines()
                if line.startswith("print(") and "#" in line]
    assert expected, "README python example: no print() line with its output in a comment"
    proc = subprocess.run([str(CLIENT_PYTHON), "-W", "ignore", "-c",
                           code.replace(f"port={PORT_IN_README}", f"port={fresh.port}")],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert [line.strip() for line in proc.stdout.splitlines()] == expected, proc.stdout
    assert fresh.alive(), fresh.log()[-3000:]
