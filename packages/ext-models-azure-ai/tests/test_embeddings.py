"""AzureAIEmbeddingClient: ext-testing's EmbeddingClientConformance against AzureAIServer with a key and with a
token credential, plus the wire request and the server's strictness."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from azure.core.exceptions import HttpResponseError

from ext.core import ConfigurationError, EmbeddingClient
from ext.models.azure_ai import AzureAIEmbeddingClient
from ext.testing.conformance import EmbeddingClientConformance
from ext.testing.credentials import StaticTokenCredential
from ext.testing.readme import python_example
from ext.testing.sample_inputs import TEXTS
from ext.testing.servers import AzureAIServer, LoopbackServer, embedding_vector

SECRET = "azure-ai-embeddings-secret-0000"
API_VERSION = "2024-05-01-preview"

README = Path(__file__).resolve().parents[1] / "README.md"


class TestKeyEmbeddingConformance(EmbeddingClientConformance):
    rate_limit_error = HttpResponseError
    secret = SECRET
    batch_limit = 96

    def make_server(self) -> LoopbackServer:
        return AzureAIServer(api_key=SECRET, model_name="text-embedding-3-small")

    def make_client(self, server: LoopbackServer, **kwargs: Any) -> EmbeddingClient:
        return AzureAIEmbeddingClient(
            endpoint=server.base_url + "/models",
            model="text-embedding-3-small",
            credential=SECRET,
            dimensions=12,
            **kwargs,
        )

    def dump_environment(self, client: EmbeddingClient) -> dict[str, str]:
        return {"AZURE_AI_API_KEY": SECRET}


class TestTokenCredentialEmbeddingConformance(EmbeddingClientConformance):
    rate_limit_error = HttpResponseError
    secret = SECRET
    batch_limit = 96

    def make_server(self) -> LoopbackServer:
        return AzureAIServer(bearer_token=SECRET, model_name="embed-v-4-0")

    def make_client(self, server: LoopbackServer, **kwargs: Any) -> EmbeddingClient:
        return AzureAIEmbeddingClient(
            endpoint=server.base_url, model="embed-v-4-0", credential=StaticTokenCredential(SECRET), **kwargs
        )


async def test_wire_request() -> None:
    async with AzureAIServer(api_key=SECRET) as server:
        async with AzureAIEmbeddingClient(
            endpoint=server.base_url, model="Cohere-embed-v3-english", api_key=SECRET, dimensions=32, input_type="query"
        ) as client:
            result = await client.embed(TEXTS[:2])
        (request,) = server.embeddings.requests
        assert request.path == "/embeddings" and request.query_value("api-version") == API_VERSION
        assert request.json == {
            "input": TEXTS[:2],
            "dimensions": 32,
            "input_type": "query",
            "model": "Cohere-embed-v3-english",
        }
        assert result.vectors == [embedding_vector(t, 32) for t in TEXTS[:2]]


async def test_a_token_credential_cannot_be_dumped() -> None:
    client = AzureAIEmbeddingClient(
        endpoint="https://x.services.ai.azure.com/models", model="m", credential=StaticTokenCredential(SECRET)
    )
    try:
        with pytest.raises(Exception, match="credential: a token credential object") as info:
            client.dump_component()
        assert SECRET not in str(info.value)
    finally:
        await client.close()


class _SyncTokenCredential:
    def get_token(self, *scopes: str) -> object:
        raise AssertionError("never called: the client refuses a synchronous credential at construction")


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"endpoint": "x.azure.com"}, "endpoint"),
        ({"endpoint": "https:///models"}, "endpoint must be an http:// or https:// URL"),  # no host
        ({"api_version": "May 2024"}, "api_version must be a date like 2024-05-01-preview"),  # the SDK's default
        ({"input_type": "passage"}, "input_type"),
        ({"batch_size": 5000}, "batch_size"),
        ({"credential": 42}, "credential must be a key"),
        # The chat client's rule (one check for both): the async SDK awaits get_token, so a sync one is refused.
        ({"credential": _SyncTokenCredential()}, "an async get_token"),
        ({"credential": None, "api_key_env": None}, "no credential: pass credential="),
    ],
)
def test_bad_settings_name_the_field(kwargs: dict[str, Any], match: str) -> None:
    arguments: dict[str, Any] = {"endpoint": "https://x.services.ai.azure.com/models", "model": "m", "api_key": "k"}
    arguments.update(kwargs)
    if "credential" in kwargs:
        del arguments["api_key"]
    with pytest.raises(ConfigurationError, match=match):
        AzureAIEmbeddingClient(**arguments)


@pytest.mark.parametrize(
    ("query", "body", "status", "text"),
    [
        ("", {"input": ["a"]}, 400, "api-version"),
        (API_VERSION, {"input": "a"}, 422, "Input validation error"),
        (API_VERSION, {"input": ["a", ""]}, 400, "must not be empty"),
        (API_VERSION, {"input": ["a"], "colour": "red"}, 422, "Extra parameters ['colour']"),
        (API_VERSION, {"input": ["a"], "encoding_format": "int8"}, 400, "not supported"),
        (API_VERSION, {"input": ["a"] * 2049}, 400, "Too many inputs"),
    ],
)
async def test_server_rejects_what_the_service_rejects(
    query: str, body: dict[str, Any], status: int, text: str
) -> None:
    async with AzureAIServer() as server:
        params = {"api-version": query} if query else {}
        async with (
            aiohttp.ClientSession() as http,
            http.post(server.base_url + "/embeddings", params=params, json=body) as response,
        ):
            answer = await response.json()
        assert response.status == status and text in answer["error"]["message"]


async def test_readme_example_runs(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    code = python_example(README, "AzureAIEmbeddingClient")
    async with AzureAIServer(api_key=SECRET) as server:
        monkeypatch.setenv("AZURE_AI_ENDPOINT", server.base_url + "/models")
        monkeypatch.setenv("AZURE_AI_API_KEY", SECRET)
        await asyncio.to_thread(exec, compile(code, "README.md", "exec"), {"__name__": "__main__"})
        assert capsys.readouterr().out.split() == ["2", "1024", "13"]
