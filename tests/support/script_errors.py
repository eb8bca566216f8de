"""TorchScript error texts as RedisAI 1.2 replies them (issue 11, item 4).

libtorch's message with each CR/LF turned into one space and nothing else changed, and
never a C++ backtrace. An error raised while a script runs (by TorchScript itself, or by
a built-in: `redis.execute`, `redisAI.model_execute`) is the TorchScript interpreter's
message around the inner error:

    The following operation failed in the TorchScript interpreter. Traceback of
    TorchScript (most recent call last):   File "<string>", line 3, in f ... <--- HERE
    RuntimeError: <inner error> ␣

(the final newline of libtorch's text is the trailing space).
"""
from __future__ import annotations

from typing import Any, Callable

from model_io import assert_clean_error

INTERPRETER = ("The following operation failed in the TorchScript interpreter. "
               "Traceback of TorchScript (most recent call last): ")


def one_line(text: str) -> str:
    """RedisAI 1.2's transform of a libtorch message: each CR and LF becomes one space."""
    return text.replace("\r", " ").replace("\n", " ")


def assert_script_error(reply: Any, inner: str) -> str:
    """A script run's error: the interpreter's message, one line, no C++ backtrace, whose
    raised error is exactly `inner` (with its own prefix, e.g. `ERR model key is empty`,
    `Redis command returned an error: ...`). Returns the text."""
    text = assert_clean_error(reply)
    assert text.startswith(INTERPRETER), text
    assert text.endswith(f" RuntimeError: {inner} "), f"\ninner: {inner!r}\n text: {text!r}"
    assert "<--- HERE" in text, text
    return text


def libtorch_message(fn: Callable[[], Any]) -> str:
    """The message libtorch raises for `fn()` (Python shows c10 errors without their C++
    backtrace, as the server must), transformed as RedisAI 1.2 does."""
    try:
        fn()
    except Exception as e:  # noqa: BLE001 - libtorch's RuntimeError / torch.jit.Error
        return one_line(str(e))
    raise AssertionError("libtorch accepted what the server must refuse")
