from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the support module and the tool modules

from ext_cli_support import KEY, clean_env

from ext.testing.servers import OpenAIServer


@pytest.fixture
async def server() -> AsyncIterator[OpenAIServer]:
    async with OpenAIServer(api_key=KEY) as srv:
        yield srv


@pytest.fixture
def openai_env(server: OpenAIServer) -> dict[str, str]:
    return clean_env(OPENAI_API_KEY=KEY, OPENAI_BASE_URL=f"{server.base_url}/v1")
