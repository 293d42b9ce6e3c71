from __future__ import annotations

from collections.abc import Iterator

import pytest

from ext.testing.redis import RedisServer, start_redis_server


@pytest.fixture(scope="session")
def redis_server() -> Iterator[RedisServer]:
    """One redis-server for the session; fails (never skips) naming the package to install when it is missing."""
    server = start_redis_server()
    try:
        yield server
    finally:
        server.stop()
