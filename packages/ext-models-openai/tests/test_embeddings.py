"""The OpenAI and Azure OpenAI embedding clients: ext-testing's EmbeddingClientConformance over loopback, plus
what is particular to the embeddings API (dimensions, the 2048-input limit, the base64 wire format)."""

from __future__ import annotations

import asyncio
import base64
import struct
from pathlib import Path
from typing import Any

import openai
import pytest

from ext.core import ConfigurationError, EmbeddingClient, load_component
from ext.models.openai import AzureOpenAIEmbeddingClient, OpenAIEmbeddingClient
from ext.testing.conformance import EmbeddingClientConformance
from ext.testing.readme import python_example
from ext.testing.sample_inputs import TEXTS
from ext.testing.servers import LoopbackServer, OpenAIServer, embedding_vector

SECRET = "sk-embeddings-secret-0000"

README = Path(__file__).resolve().parents[1] / "README.md"


class TestOpenAIEmbeddingConformance(EmbeddingClientConformance):
    rate_limit_error = openai.RateLimitError
    secret = SECRET
    batch_limit = 2048

    def make_server(self) -> LoopbackServer:
        return OpenAIServer(api_key=SECRET)

    def make_client(self, server: LoopbackServer, **kwargs: Any) -> EmbeddingClient:
        return OpenAIEmbeddingClient(
            "text-embedding-3-small", base_url=server.base_url + "/v1", api_key=SECRET, dimensions=16, **kwargs
        )


class TestAzureOpenAIEmbeddingConformance(EmbeddingClientConformance):
    rate_limit_error = openai.RateLimitError
    secret = SECRET
    batch_limit = 2048

    def make_server(self) -> LoopbackServer:
        return OpenAIServer(api_key=SECRET)

    def make_client(self, server: LoopbackServer, **kwargs: Any) -> EmbeddingClient:
        return AzureOpenAIEmbeddingClient(
            azure_endpoint=server.base_url,
            azure_deployment="text-embedding-3-small",
            api_version="2024-10-21",
            api_key=SECRET,
            dimensions=8,
            **kwargs,
        )

    def dump_environment(self, client: EmbeddingClient) -> dict[str, str]:
        return {"AZURE_OPENAI_API_KEY": SECRET}


class TestAzureTokenProviderEmbeddingConformance(EmbeddingClientConformance):
    rate_limit_error = openai.RateLimitError
    secret = SECRET
    batch_limit = 2048

    def make_server(self) -> LoopbackServer:
        return OpenAIServer(azure_ad_token=SECRET)

    def make_client(self, server: LoopbackServer, **kwargs: Any) -> EmbeddingClient:
        async def token() -> str:
            return SECRET

        return AzureOpenAIEmbeddingClient(
            azure_endpoint=server.base_url,
            azure_deployment="text-embedding-3-large",
            api_version="2024-10-21",
            azure_ad_token_provider=token,
            **kwargs,
        )


async def test_more_than_2048_texts_go_in_two_requests_in_order() -> None:
    texts = [f"text number {i}" for i in range(2049)]
    async with OpenAIServer(api_key=SECRET) as server:
        async with OpenAIEmbeddingClient(
            "text-embedding-3-small", base_url=server.base_url + "/v1", api_key=SECRET, dimensions=4
        ) as client:
            result = await client.embed(texts)
        assert [len(batch) for batch in server.embeddings.inputs] == [2048, 1]
        assert result.vectors[2048] == embedding_vector("text number 2048", 4)
        assert result.vectors[7] == embedding_vector("text number 7", 4)


async def test_wire_request_is_what_the_sdk_sends() -> None:
    async with OpenAIServer(api_key=SECRET) as server:
        async with OpenAIEmbeddingClient(
            "text-embedding-3-large", base_url=server.base_url + "/v1", api_key=SECRET, dimensions=256, user="u-1"
        ) as client:
            result = await client.embed(["hello"])
        (request,) = server.embeddings.requests
        assert request.json == {
            "model": "text-embedding-3-large",
            "input": ["hello"],
            "user": "u-1",
            "dimensions": 256,
            "encoding_format": "base64",
        }
        assert result.vectors == [embedding_vector("hello", 256)]
        assert client.vector_size == 256


async def test_native_size_without_dimensions() -> None:
    async with OpenAIServer(api_key=SECRET) as server:
        async with OpenAIEmbeddingClient("text-embedding-ada-002", base_url=server.base_url, api_key=SECRET) as client:
            assert client.vector_size == 1536
            result = await client.embed(["one"])
        body = server.embeddings.requests[0].json
        assert len(result.vectors[0]) == 1536 and isinstance(body, dict) and "dimensions" not in body


def test_dimensions_refused_for_ada_before_any_request() -> None:
    with pytest.raises(ConfigurationError, match="dimensions: text-embedding-ada-002 does not take a vector size"):
        OpenAIEmbeddingClient("text-embedding-ada-002", api_key=SECRET, dimensions=8)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"batch_size": 2049}, "batch_size"),
        ({"batch_size": 0}, "batch_size"),
        ({"dimensions": 0}, "dimensions"),
        ({"base_url": "ftp://x"}, "base_url"),
        ({"base_url": "http://"}, "base_url must be an http:// or https:// URL"),  # no host: the chat client's rule
    ],
)
def test_bad_settings_name_the_field(kwargs: dict[str, Any], match: str) -> None:
    with pytest.raises(ConfigurationError, match=match):
        OpenAIEmbeddingClient("text-embedding-3-small", api_key=SECRET, **kwargs)


def test_missing_key_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(ConfigurationError, match=r"no API key.*OPENAI_API_KEY"):
        OpenAIEmbeddingClient("text-embedding-3-small")


async def test_loaded_by_its_registered_name(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    config = {"provider": "OpenAIEmbeddingClient", "config": {"model": "text-embedding-3-small", "dimensions": 32}}
    client = load_component(config, OpenAIEmbeddingClient)
    try:
        assert client.vector_size == 32 and client.dump_component().config["dimensions"] == 32
    finally:
        await client.close()


@pytest.mark.parametrize(
    ("body", "status", "text"),
    [
        ({"model": "text-embedding-3-small", "input": ""}, 400, "'$.input' is invalid"),
        ({"model": "text-embedding-3-small", "input": ["a", ""]}, 400, "'$.input' is invalid"),
        ({"model": "text-embedding-3-small", "input": ["a"] * 2049}, 400, "at most 2048"),
        ({"model": "text-embedding-ada-002", "input": "a", "dimensions": 8}, 400, "does not support specifying"),
        ({"model": "text-embedding-3-small", "input": "a", "dimensions": 1537}, 400, "'$.dimensions' is invalid"),
        ({"model": "text-embedding-3-small", "input": "a", "encoding_format": "int8"}, 400, "encoding_format"),
        ({"model": "no-such-model", "input": "a"}, 404, "does not exist"),
        ({"model": "text-embedding-3-small", "input": "a", "colour": "red"}, 400, "Unrecognized request argument"),
        ({"model": "text-embedding-3-small", "input": "word " * 40000}, 400, "maximum context length is 8192"),
    ],
)
async def test_server_rejects_what_openai_rejects(body: dict[str, Any], status: int, text: str) -> None:
    async with OpenAIServer(api_key=SECRET) as server:
        sdk = openai.AsyncOpenAI(api_key=SECRET, base_url=server.base_url + "/v1", max_retries=0)
        try:
            with pytest.raises(openai.APIStatusError) as info:
                await sdk.post("/embeddings", body=body, cast_to=object)
        finally:
            await sdk.close()
        assert info.value.status_code == status and text in str(info.value.message)


async def test_server_float_and_base64_formats_carry_the_same_values() -> None:
    async with OpenAIServer() as server:
        sdk = openai.AsyncOpenAI(api_key="x", base_url=server.base_url + "/v1", max_retries=0)
        try:
            plain = await sdk.embeddings.create(
                model="text-embedding-3-small", input=TEXTS[:2], dimensions=6, encoding_format="float"
            )
            packed = await sdk.embeddings.create(
                model="text-embedding-3-small", input=TEXTS[:2], dimensions=6, encoding_format="base64"
            )
        finally:
            await sdk.close()
        raw: object = packed.data[1].embedding  # typed list[float]; a str when base64 was asked for explicitly
        assert isinstance(raw, str)
        assert list(struct.unpack("<6f", base64.b64decode(raw))) == plain.data[1].embedding
        assert plain.data[1].embedding == embedding_vector(TEXTS[1], 6)


async def test_readme_example_runs(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    code = python_example(README, "OpenAIEmbeddingClient")
    async with OpenAIServer(api_key=SECRET) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url + "/v1")
        monkeypatch.setenv("OPENAI_API_KEY", SECRET)
        # The example calls asyncio.run itself: it runs in a thread (own loop) while the server serves here.
        await asyncio.to_thread(exec, compile(code, "README.md", "exec"), {"__name__": "__main__"})
        assert capsys.readouterr().out.split() == ["2", "256", "13"]
