from __future__ import annotations

import re
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path

import pytest

from ext.core import BaseChatCompletionClient, ChatRequest, CreateResult, RequestUsage, StreamChunk
from ext.testing.redis import RedisServer, start_redis_server


@pytest.fixture(scope="session")
def redis_server() -> Iterator[RedisServer]:
    """One redis-server for the session; fails (never skips) naming the package to install when it is missing."""
    server = start_redis_server()
    try:
        yield server
    finally:
        server.stop()


class Fixed(BaseChatCompletionClient):
    """A client answering "hi" in process, for the cases about the store rather than the provider."""

    provider_name = "fixed"

    async def _create(self, request: ChatRequest) -> CreateResult:
        return CreateResult(
            finish_reason="stop", content="hi", usage=RequestUsage(prompt_tokens=1, completion_tokens=1)
        )

    async def _stream(self, request: ChatRequest) -> AsyncIterator[StreamChunk | CreateResult]:
        yield await self._create(request)


@pytest.fixture
def fixed_client() -> Callable[[], BaseChatCompletionClient]:
    """Makes a `Fixed` client (no retries)."""
    return lambda: Fixed(model="m", max_retries=0)


@pytest.fixture
def readme_example() -> Callable[[str], str]:
    """Gives the README's Python block that contains a text (exactly one must)."""
    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```python\n(.*?)```", readme, re.DOTALL)

    def find(containing: str) -> str:
        (block,) = [b for b in blocks if containing in b]
        return str(block)

    return find
