"""Fixtures shared by the unit tests of build_tools."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from build_tools import servers, variants


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """build_tools' cache in tmp_path; running pip or apt-get (variants', servers') fails
    the test."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))

    def no_network(*args: Any, **kwargs: Any) -> str:
        raise AssertionError(f"nothing may be downloaded here: {args}")

    monkeypatch.setattr(variants, "run_quiet", no_network)
    monkeypatch.setattr(servers, "run_quiet", no_network)
    monkeypatch.setattr(servers, "openssl11_dir", no_network)
    return tmp_path / "redisai-build"
