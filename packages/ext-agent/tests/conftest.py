from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(
    0, str(Path(__file__).resolve().parent)
)  # ext_agent_support, shared by the tests and the child processes

from ext.testing.redis import REDIS_BINARY, RedisServer, start_redis_server


@pytest.fixture(scope="session")
def redis_server() -> Iterator[RedisServer]:
    if REDIS_BINARY is None:
        pytest.fail(
            "redis-server is not installed: apt-get install -y redis-server (tools/test.sh installs it); "
            "these tests need a real Redis"
        )
    server = start_redis_server()
    try:
        yield server
    finally:
        server.stop()
