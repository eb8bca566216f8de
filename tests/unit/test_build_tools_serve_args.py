"""The serving commands' argument rule (python/redisai_module/command_line.py, which
build_tools/serve.py loads): where each word goes, and when the loopback bind is added.
The servers themselves: tests/install/test_serve.py."""
from __future__ import annotations

from pathlib import Path

import pytest

from build_tools import __main__ as cli
from build_tools import serve
from build_tools.errors import BuildError

rule = serve.command_line
BACKENDS = [("TF", "/t/tf.so"), ("ONNX", "/t/onnx.so")]


def test_words_after_the_double_dash_follow_the_backends() -> None:
    server, module = rule.split_arguments(["--port", "7000", "--", "ISOLATE", "TORCH", "--",
                                           "x"])
    assert (server, module) == (["--port", "7000"], ["ISOLATE", "TORCH", "--", "x"])
    assert rule.split_arguments(["--port", "7000"]) == (["--port", "7000"], [])
    argv = rule.redis_server_argv("rs", server, "/t/redisai.so", BACKENDS, module)
    assert argv == ["rs", "--port", "7000", "--bind", "127.0.0.1", "--loadmodule",
                    "/t/redisai.so", "TF", "/t/tf.so", "ONNX", "/t/onnx.so",
                    "ISOLATE", "TORCH", "--", "x"]


@pytest.mark.parametrize("server_args", [
    ["--port", "7000", "--bind", "0.0.0.0"],
    ["--BIND", "10.0.0.1", "::1"],                    # redis-server's names ignore case
    ["/etc/redis/redis.conf", "--port", "7000"],      # a config file's bind line decides
    ["--port", "7000", "-"],                          # a config from stdin
])
def test_no_loopback_bind_where_the_arguments_say_where(server_args: list[str]) -> None:
    argv = rule.redis_server_argv("rs", server_args, "/t/redisai.so", [], [])
    assert argv == ["rs", *server_args, "--loadmodule", "/t/redisai.so"]


def test_bind_addresses_are_the_last_binds() -> None:
    assert rule.bind_addresses(["rs", "--bind", "a", "--bind", "b", "c", "--loadmodule",
                                "m"]) == ["b", "c"]
    assert rule.bind_addresses(["rs", "--bind", "127.0.0.1 ::1"]) == ["127.0.0.1", "::1"]
    assert rule.bind_addresses(["rs", "--port", "1"]) == []


def test_build_tools_serve_command(tmp_path: Path) -> None:
    """serve's own --port comes first; the backends of the tree in FRAMEWORKS' order."""
    with pytest.raises(BuildError, match="run `python -m build_tools build` first"):
        serve.server_command(tmp_path, 7000)
    (tmp_path / "redisai.so").touch()
    so = tmp_path / "backends" / "redisai_torch" / "redisai_torch.so"
    so.parent.mkdir(parents=True)
    so.touch()
    argv = serve.server_command(tmp_path, 7000, ["--dir", "/d"], ["THREADS_PER_QUEUE", "4"])
    assert argv == ["redis-server", "--port", "7000", "--dir", "/d", "--bind", "127.0.0.1",
                    "--loadmodule", str(tmp_path.resolve() / "redisai.so"), "TORCH",
                    str(tmp_path.resolve() / so.relative_to(tmp_path)), "THREADS_PER_QUEUE", "4"]


def test_only_serve_takes_a_double_dash(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        cli.main(["layers", "--", "THREADS_PER_QUEUE", "4"])
    assert exc.value.code == 2
    assert "unrecognized arguments: THREADS_PER_QUEUE 4" in capsys.readouterr().err
