from __future__ import annotations

from collections.abc import Iterator

import pytest

from ext.testing.redis import REDIS_BINARY, RedisServer, start_redis_server


@pytest.fixture(scope="session")
def redis_server() -> Iterator[RedisServer]:
    if REDIS_BINARY is None:
        pytest.fail(
            "redis-server is not installed: apt-get install -y redis-server (.ci/run installs it); "
            "these tests need a real Redis"
        )
    server = start_redis_server()
    try:
        yield server
    finally:
        server.stop()
