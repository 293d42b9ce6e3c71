from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest_asyncio

sys.path.insert(0, str(Path(__file__).resolve().parent))  # traced_agents, shared by the tests and their workers

from traced_agents import API_KEY

from ext.testing.servers import OpenAIServer


@pytest_asyncio.fixture
async def model_server() -> AsyncIterator[OpenAIServer]:
    """The OpenAI-protocol loopback server the traced agents' model calls go to."""
    async with OpenAIServer(api_key=API_KEY) as srv:
        yield srv
