from __future__ import annotations

from collections.abc import AsyncIterator

import openai
import pytest

from ext.testing.servers import OpenAIServer


@pytest.fixture
async def server() -> AsyncIterator[OpenAIServer]:
    async with OpenAIServer() as srv:
        yield srv


@pytest.fixture
async def client(server: OpenAIServer) -> AsyncIterator[openai.AsyncOpenAI]:
    async with openai.AsyncOpenAI(base_url=server.base_url + "/v1", api_key="sk-test", max_retries=0) as c:
        yield c
