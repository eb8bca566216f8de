"""Fixtures shared by the unit tests of build_tools."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from build_tools import variants


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """build_tools' cache in tmp_path; running pip (variants.run_quiet) fails the test."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))

    def no_pip(*args: Any, **kwargs: Any) -> str:
        raise AssertionError(f"pip must not run here: {args}")

    monkeypatch.setattr(variants, "run_quiet", no_pip)
    return tmp_path / "redisai-build"
