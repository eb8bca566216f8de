"""The fault soak for 60 s (bench/soak_isolation.py runs it for N minutes; docs/isolation.md,
"The fault soak"): in-process and isolated models from 16 clients while hosts are killed,
fail to spawn, hold their re-creation, and models are stored and deleted.

The assertion is the soak's own verdict (tests/support/soak_checks.py), not a copy of it:
every answer right or the failure table's error of the request's own faulted host, no
unaffected request over 10x its template's warm-up p99, every host back within its back-off,
no key lost. Marked `long`: CI runs it in a pass of its own (ci/setup-and-test.sh), since it
needs ONNX in-process beside the isolated hosts, which `--isolate all` would take away.
"""
from __future__ import annotations

import pathlib

import pytest

from soak_checks import describe
from soak_run import Config, run


@pytest.mark.long("60 s of faults after a 15 s warm-up")
def test_soak_60_s(install_dir: pathlib.Path, fault_so: pathlib.Path,
                   torch_backend_path: pathlib.Path, onnx_backend_path: pathlib.Path) -> None:
    verdict = run(install_dir, fault_so, Config(seconds=60.0))
    if verdict.failures:   # the figures and every failed check, without a traceback
        pytest.fail("\n".join(describe(verdict)), pytrace=False)
