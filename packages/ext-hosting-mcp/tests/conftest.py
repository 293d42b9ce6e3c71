from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from ext.testing.redis import RedisServer, start_redis_server

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "conformance"))


@pytest.fixture(scope="session")
def redis_server() -> Iterator[RedisServer]:
    """One redis-server for the session; fails (never skips) naming the package to install when it is missing."""
    server = start_redis_server()
    try:
        yield server
    finally:
        server.stop()
