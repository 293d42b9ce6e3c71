from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import pytest_asyncio
from openai import AsyncOpenAI

from ext.models.openai import OpenAIChatCompletionClient
from ext.testing.servers import OpenAIServer

SECRET = "sk-semantic-kernel-test-0000"


@pytest_asyncio.fixture
async def server() -> AsyncIterator[OpenAIServer]:
    srv = OpenAIServer(api_key=SECRET)
    await srv.start()
    try:
        yield srv
    finally:
        await srv.stop()


@pytest_asyncio.fixture
async def ext_client(server: OpenAIServer) -> AsyncIterator[OpenAIChatCompletionClient]:
    """ext's own OpenAI client on the loopback server (no retries: each case scripts every reply)."""
    client = OpenAIChatCompletionClient(
        "gpt-4o-mini", base_url=server.base_url + "/v1", api_key=SECRET, bundled_encodings=False, max_retries=0
    )
    try:
        yield client
    finally:
        await client.close()


@pytest_asyncio.fixture
async def sdk(server: OpenAIServer) -> AsyncIterator[AsyncOpenAI]:
    """A real AsyncOpenAI on the loopback server, for the kernel's own OpenAI connector (its retries off: ext's
    retry policy owns retries)."""
    client = AsyncOpenAI(base_url=server.base_url + "/v1", api_key=SECRET, max_retries=0)
    try:
        yield client
    finally:
        await client.close()


@pytest.fixture
def openai_key(monkeypatch: pytest.MonkeyPatch) -> str:
    """OPENAI_API_KEY set to the loopback server's key (what a client built from configuration reads)."""
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    return SECRET
