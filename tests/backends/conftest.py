"""Fixtures of the backend tests."""
from __future__ import annotations

import pathlib
from typing import Iterator

import pytest

from redis_server import RedisServer


@pytest.fixture
def fresh(module_path: pathlib.Path) -> Iterator[RedisServer]:
    """A server of this test's own with the module and no backend loaded: slots and
    BACKENDSPATH as a new server has them. It must still be running after the test."""
    s = RedisServer(module_path)
    try:
        yield s
        assert s.alive(), s.log()[-3000:]
    finally:
        s.stop()
