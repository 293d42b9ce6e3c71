"""What the rate-limit and budget tests share: a redis-server for the session, the OpenAI loopback server and the
real OpenAI client on it (the fixtures are re-exported by conftest.py)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest

from ext.models.openai import OpenAIChatCompletionClient
from ext.testing.redis import RedisServer, start_redis_server
from ext.testing.servers import OpenAIServer

KEY = "sk-limits-test-0000"


@pytest.fixture(scope="session")
def limits_redis() -> Iterator[RedisServer]:
    """One redis-server for the session; fails (never skips) naming the package to install when it is missing."""
    server = start_redis_server()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
async def limits_server() -> AsyncIterator[OpenAIServer]:
    async with OpenAIServer(api_key=KEY) as srv:
        yield srv


def openai_client(server: OpenAIServer, model: str = "gpt-4o-mini", **kwargs: Any) -> OpenAIChatCompletionClient:
    """The real OpenAI client on the loopback server, without its own retries."""
    return OpenAIChatCompletionClient(
        model, base_url=server.base_url + "/v1", api_key=KEY, bundled_encodings=False, max_retries=0, **kwargs
    )
