from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import pytest

from ext.models.llama_cpp import default_model_path
from ext.testing.llama_server import LlamaServer, start_llama_server
from ext.testing.servers import OpenAIServer

KEY = "sk-test-key-0123456789"

_ENV = (
    "OPENAI_API_KEY",
    "OPENAI_ORG_ID",
    "OPENAI_PROJECT_ID",
    "OPENAI_BASE_URL",
    "OPENAI_API_VERSION",
    "OPENAI_ADMIN_KEY",
    "AZURE_OPENAI_API_KEY",
    "AZURE_OPENAI_AD_TOKEN",
    "AZURE_OPENAI_ENDPOINT",
)


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory) -> None:
    """No test sees the developer's keys or endpoints, or a tiktoken cache that happens to be on the machine."""
    for name in _ENV:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path_factory.mktemp("empty-tiktoken-cache")))


@pytest.fixture
async def server() -> AsyncIterator[OpenAIServer]:
    async with OpenAIServer(api_key=KEY) as srv:
        yield srv


@pytest.fixture(scope="session")
def real_server() -> Iterator[LlamaServer]:
    """llama-cpp-python's own OpenAI-compatible server on SmolLM2-135M-Instruct, once for the session."""
    with start_llama_server(default_model_path()) as server:
        yield server
