"""Fixtures of the persistence tests."""
from __future__ import annotations

import pathlib
from typing import Iterator

import pytest

import persistence_corpus as pc
from persist_servers import Servers


@pytest.fixture
def servers(module_path: pathlib.Path,
            all_backend_paths: dict[str, pathlib.Path]) -> Iterator[Servers]:
    """Servers with every backend and the corpus's MODEL_CHUNK_SIZE, started by the test on
    data dirs of its choice (persist_servers.Servers); all stopped after the test."""
    s = Servers(module_path, pc.module_args(all_backend_paths))
    yield s
    s.close()
