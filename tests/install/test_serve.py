"""The two serving commands' arguments: `python -m build_tools serve` (what
`ci/setup-and-serve.sh` runs) and `redisai-server` (the console command of `pip
install .`) follow one rule (python/redisai_module/command_line.py): words before
`--` go to redis-server, words after it are module arguments placed after the
backends, and the server binds 127.0.0.1 unless given `--bind`.

Each test starts the real command on a free loopback port with the built tree and
asks the running server what it took. `redisai-server` runs from a package folder
made of python/redisai_module/ and a link to the install tree (what the wheel holds,
without building one: tests/install/test_pip_install.py does that), through the
same main() its console script calls.
"""
from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Iterator, Sequence

import pytest

from helpers import terminate
from paths import ROOT
from redis_server import free_port
from resp import RawClient

from build_tools import pins
from build_tools.frameworks import FRAMEWORKS

TF_ENV = {"TF_CPP_MIN_LOG_LEVEL": "3", "TF_ENABLE_ONEDNN_OPTS": "0"}


class Served:
    """One serving command, run until stop(); its stdout and stderr in files."""

    def __init__(self, argv: Sequence[str], port: int, work: Path, host: str = "127.0.0.1",
                 env: dict[str, str] | None = None) -> None:
        self.port, self.host, self.work = port, host, work
        self.log = work / "redis.log"
        self.out, self.err = work / "stdout", work / "stderr"
        with open(self.out, "wb") as out, open(self.err, "wb") as err:
            self.proc = subprocess.Popen(list(argv), cwd=work, stdout=out, stderr=err,
                                         env={**os.environ, **TF_ENV, **(env or {})})
        self._wait()

    def _wait(self, timeout: float = 120.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(f"exited {self.proc.returncode}:\n{self.text()}")
            try:
                with RawClient(self.port, host=self.host, timeout=2.0) as c:
                    if c.execute("PING") == "PONG":
                        return
            except OSError:
                pass
            time.sleep(0.05)
        raise AssertionError(f"no answer in {timeout}s:\n{self.text()}")

    def text(self) -> str:
        return "\n".join(p.read_text(errors="replace") for p in (self.out, self.err, self.log)
                         if p.exists())

    def client(self) -> RawClient:
        return RawClient(self.port, host=self.host)

    def stop(self) -> None:
        terminate(self.proc)


def _printed_command(text: str, prefix: str) -> list[str]:
    """The argv a serving command printed before exec'ing redis-server."""
    line = next((ln for ln in text.splitlines() if ln.startswith(prefix)), None)
    assert line is not None, text
    return shlex.split(line[len(prefix):])


@pytest.fixture
def work() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="redisai-serve-"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture(scope="module")
def console_package(install_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder holding `redisai_module` as the wheel lays it out: the package's sources,
    its _build_info.py, and redisai-<version>/ (a link to the built tree)."""
    top = tmp_path_factory.mktemp("console")
    package = top / "redisai_module"
    shutil.copytree(ROOT / "python" / "redisai_module", package,
                    ignore=shutil.ignore_patterns("__pycache__"))
    keywords = {spec.backend: spec.serve_keyword for spec in FRAMEWORKS}
    (package / "_build_info.py").write_text(
        f"VERSION = {pins.VERSION!r}\nSERVE_KEYWORDS = {keywords!r}\n")
    (package / f"redisai-{pins.VERSION}").symlink_to(install_dir.resolve())
    return top


def _serve(install_dir: Path, port: int, work: Path, args: Sequence[str],
           host: str = "127.0.0.1") -> Served:
    return Served([sys.executable, "-m", "build_tools", "serve", "--port", str(port),
                   "--install", str(install_dir), "--dir", str(work), "--save", "",
                   "--logfile", str(work / "redis.log"), *args], port, work, host=host,
                  env={"PYTHONPATH": str(ROOT)})


def _console(package: Path, port: int, work: Path, args: Sequence[str],
             host: str = "127.0.0.1") -> Served:
    return Served([sys.executable, "-m", "redisai_module.server", "--port", str(port),
                   "--dir", str(work), "--save", "", "--logfile", str(work / "redis.log"),
                   *args], port, work, host=host, env={"PYTHONPATH": str(package)})


def _info_fields(text: str) -> dict[str, str]:
    """INFO's fields (the load-time settings are there: AI.CONFIG GET answers null)."""
    return dict(ln.split(":", 1) for ln in text.splitlines() if ":" in ln and ln[0] != "#")


def test_serve_passes_module_arguments_after_the_double_dash(install_dir: Path,
                                                             work: Path) -> None:
    """`build_tools serve --port P -- THREADS_PER_QUEUE 3 ISOLATE TORCH`: both settings
    reach the module, after its backends, and the printed command line shows them there."""
    port = free_port()
    srv = _serve(install_dir, port, work, ["--", "THREADS_PER_QUEUE", "3", "ISOLATE", "TORCH"])
    try:
        with srv.client() as c:
            info = _info_fields(c.execute("INFO", "MODULES").decode())
            assert info.get("ai_threads_per_queue") == "3", info
            assert info.get("ai_isolated_backends") == "1", info
            hosts = {k: v for k, v in info.items() if k.startswith("ai_host_")}
            assert len(hosts) == 1 and "kind=TORCH" in next(iter(hosts.values())), hosts
            assert c.execute("CONFIG", "GET", "bind") == [b"bind", b"127.0.0.1"]
        assert srv.proc.poll() is None, srv.text()
    finally:
        srv.stop()
    cmd = _printed_command(srv.text(), "[serve] ")
    load = cmd.index("--loadmodule")
    assert cmd[load + 1] == str(install_dir.resolve() / "redisai.so"), cmd
    assert cmd[-6:-4] == ["TFLITE", str(install_dir.resolve() / "backends" / "redisai_tflite"
                                        / "redisai_tflite.so")], cmd
    assert cmd[-4:] == ["THREADS_PER_QUEUE", "3", "ISOLATE", "TORCH"], cmd
    assert "--" not in cmd and cmd[load - 2:load] == ["--bind", "127.0.0.1"], cmd
    assert f"[serve] listening on 127.0.0.1:{port}" in srv.text().splitlines(), srv.text()


def test_console_command_binds_loopback_by_default(console_package: Path, work: Path) -> None:
    """`redisai-server --port P -- THREADS_PER_QUEUE 2`: bound to 127.0.0.1 only (redis-server
    alone would bind every interface), the module argument after the backends."""
    port = free_port()
    srv = _console(console_package, port, work, ["--", "THREADS_PER_QUEUE", "2"])
    try:
        with srv.client() as c:
            assert c.execute("CONFIG", "GET", "bind") == [b"bind", b"127.0.0.1"]
            info = _info_fields(c.execute("INFO", "MODULES").decode())
            assert info.get("ai_threads_per_queue") == "2", info
    finally:
        srv.stop()
    cmd = _printed_command(srv.text(), "[redisai-server] ")
    load = cmd.index("--loadmodule")
    assert cmd[load - 2:load] == ["--bind", "127.0.0.1"], cmd
    assert cmd[-2:] == ["THREADS_PER_QUEUE", "2"] and "--" not in cmd, cmd


@pytest.mark.parametrize("command", ["serve", "redisai-server"])
def test_a_bind_of_the_user_wins(command: str, install_dir: Path, work: Path,
                                 request: pytest.FixtureRequest) -> None:
    """`--bind 127.0.0.2` before `--`: the server listens there and nowhere else."""
    port = free_port()
    args = ["--bind", "127.0.0.2", "--", "MODEL_CHUNK_SIZE", "1000"]
    if command == "serve":
        srv = _serve(install_dir, port, work, args, host="127.0.0.2")
    else:
        srv = _console(request.getfixturevalue("console_package"), port, work, args,
                       host="127.0.0.2")
    try:
        with srv.client() as c:
            assert c.execute("CONFIG", "GET", "bind") == [b"bind", b"127.0.0.2"]
            assert c.execute("AI.CONFIG", "GET", "MODEL_CHUNK_SIZE") == 1000
        with pytest.raises(ConnectionRefusedError):
            RawClient(port, host="127.0.0.1", timeout=2.0)
    finally:
        srv.stop()
    cmd = _printed_command(srv.text(), "[serve] " if command == "serve" else "[redisai-server] ")
    assert "127.0.0.1" not in cmd, cmd
    if command == "serve":
        assert f"[serve] listening on 127.0.0.2:{port}" in srv.text().splitlines(), srv.text()
