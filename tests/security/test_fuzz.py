"""Short seeded passes of the two fuzzers (tests/support/fuzz_ai.py, tests/support/fuzz_restore.py) against
a real server with all backends. The long modes run by hand:

    python tests/support/fuzz_ai.py --seed 7 --long          # 100,000 AI.* commands
    python tests/support/fuzz_restore.py --seed 7 --long     # 30,000 corrupt RESTORE payloads
"""
from __future__ import annotations

import pathlib

import fuzz_ai
import fuzz_restore


def check(counts, wanted: int) -> None:
    print(counts.report("pass"))
    assert counts.tried == wanted
    assert counts.crashes == 0, counts.findings
    assert counts.hangs == 0, counts.findings
    assert counts.violations == 0, counts.findings
    # Both kinds of reply came back: the grammar makes valid commands, the mutations bad ones.
    assert counts.ok > wanted // 20 and counts.errors > wanted // 20


def test_fuzz_ai_commands_short_pass(install_dir: pathlib.Path, all_backend_paths) -> None:
    counts = fuzz_ai.run(install_dir, seed=1, commands=4000)
    check(counts, 4000)
    assert len(counts.by_command) == 22  # every AI.* command was tried


def test_fuzz_restore_payloads_short_pass(install_dir: pathlib.Path, all_backend_paths) -> None:
    counts = fuzz_restore.run(install_dir, seed=1, cases=2000)
    check(counts, 2000)
    assert len(counts.by_command) == 13  # every payload kind was mutated
