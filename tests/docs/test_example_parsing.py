"""How support/doc_examples.py reads a page: marks, steps, and the comparison of outputs.
Pure logic on small pages written here; no server."""
from __future__ import annotations

from pathlib import Path

import doc_examples

PAGE = """# A page

```
AI.TENSORSET key type [dim ...]
```

<!-- example -->
```
# a comment
redis-cli -p 6380 AI.TENSORSET a FLOAT 2 VALUES 1 2
OK
redis-cli -p 6380 AI.TENSORGET a VALUES
1) "1"
2) "2"
```

<!-- example -->
```console
$ for t in b c; do
    redis-cli -p 6380 AI.TENSORSET "x{$t}" FLOAT 1 VALUES 1
  done
OK
OK
$ echo one \\
    two
one two
```

<!-- example: not run: needs a GPU -->
```sh
redis-cli -p 6380 AI.MODELSTORE m TORCH GPU BLOB x
```

```python
print(1)  # 1
```
"""


def _blocks(tmp_path: Path) -> list[doc_examples.Block]:
    page = tmp_path / "page.md"
    page.write_text(PAGE, encoding="utf-8")
    return doc_examples.blocks(page)


def test_marks_and_examples(tmp_path: Path) -> None:
    blocks = _blocks(tmp_path)
    assert [doc_examples.is_example(b) for b in blocks] == [False, True, True, True, True]
    assert [b.mark for b in blocks] == [None, "", "", "not run: needs a GPU", None]
    assert [b.runs for b in blocks[1:]] == [True, True, False, False]
    assert blocks[1].line == 8


def test_steps_of_a_block_without_prompts(tmp_path: Path) -> None:
    steps = doc_examples.steps(_blocks(tmp_path)[1])
    assert steps == [
        doc_examples.Step("redis-cli -p 6380 AI.TENSORSET a FLOAT 2 VALUES 1 2", ("OK",)),
        doc_examples.Step("redis-cli -p 6380 AI.TENSORGET a VALUES", ('1) "1"', '2) "2"'))]


def test_a_loop_and_a_backslash_continue_the_command(tmp_path: Path) -> None:
    steps = doc_examples.steps(_blocks(tmp_path)[2])
    assert [s.command.splitlines()[0] for s in steps] == ["for t in b c; do", "echo one \\"]
    assert steps[0].expected == ("OK", "OK")
    assert steps[0].command.splitlines()[-1] == "  done"
    assert steps[1].expected == ("one two",)


def test_output_comparison() -> None:
    match = doc_examples.output_matches
    assert match(["OK"], "OK\n", "/c")
    assert not match(["OK"], "OK\nOK\n", "/c")
    assert not match(['1) "8"'], '1) "9"\n', "/c")
    assert match(["...", "[OK] done."], "a\nb\n[OK] done.\n", "/c")
    assert match(["...", "[OK] done."], "[OK] done.\n", "/c")
    assert not match(["...", "[OK] done."], "[OK] done.\nmore\n", "/c")
    assert match(['"<clone>/install"'], '"/home/me/x/install"\n', "/home/me/x")
    assert not match(['"<clone>/install"'], '"/elsewhere/install"\n', "/home/me/x")
    assert match(["pid=...,restarts=0"], "pid=123,restarts=0\n", "/c")
    assert not match(["pid=...,restarts=0"], "pid=123,restarts=1\n", "/c")
    assert match(["[OK] All"], "\x1b[32;1m[OK] All\x1b[0m\n", "/c")
    assert match([], "", "/c")
    assert not match([], "unexpected\n", "/c")


def test_python_expected_output() -> None:
    code = 'x = 1\nprint(x)  # 1\nprint("a")  # a\n'
    assert doc_examples.python_expected(code) == ["1", "a"]


def test_redis_cli_formats_for_a_terminal_only_where_the_reader_sees_it() -> None:
    tty = doc_examples.as_on_a_terminal
    assert tty("redis-cli -p 1 PING") == "redis-cli --no-raw -p 1 PING"
    assert tty("echo x | redis-cli -x SET k") == "echo x | redis-cli --no-raw -x SET k"
    assert tty("redis-cli -p 1 GET k > f") == "redis-cli -p 1 GET k > f"
    assert tty("redis-cli -p 1 INFO | grep x") == "redis-cli -p 1 INFO | grep x"
    assert tty("a $(redis-cli -p 1 MYID) b") == "a $(redis-cli -p 1 MYID) b"
    assert tty("redis-cli -p 1 DAG '|>' GET") == "redis-cli --no-raw -p 1 DAG '|>' GET"
    assert tty("redis-cli -p 1 A; redis-cli -p 1 B >/dev/null") == \
        "redis-cli --no-raw -p 1 A; redis-cli -p 1 B >/dev/null"
