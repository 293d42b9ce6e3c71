"""The loopback servers' embeddings routes, through the real openai SDK: the deterministic vectors, the script
(faults, chosen vectors), and the Azure OpenAI deployment route's own rules."""

from __future__ import annotations

import array
import math

import openai
import pytest

from ext.testing.script import Fault
from ext.testing.servers import EmbeddingScript, OpenAIServer, embedding_tokens, embedding_vector


def test_vectors_are_deterministic_unit_float32() -> None:
    vector = embedding_vector("hello", 64)
    assert vector == embedding_vector("hello", 64) != embedding_vector("hello!", 64)
    assert math.isclose(math.fsum(x * x for x in vector), 1.0, rel_tol=1e-6)
    assert array.array("f", vector).tolist() == vector  # float32 values exactly
    assert embedding_tokens("abcd") == 1 and embedding_tokens("abcde") == 2 and embedding_tokens("é") == 1


def test_script_refuses_what_it_cannot_play() -> None:
    with pytest.raises(TypeError, match="expected a Fault or a callable"):
        EmbeddingScript({}).enqueue("vectors")  # type: ignore[arg-type]


async def test_script_items_then_default_vectors() -> None:
    async with OpenAIServer() as server:
        server.embeddings.enqueue(Fault("server_error"), lambda texts: [[0.25, 0.5] for _ in texts])
        sdk = openai.AsyncOpenAI(api_key="x", base_url=server.base_url + "/v1", max_retries=0)
        try:
            with pytest.raises(openai.InternalServerError):
                await sdk.embeddings.create(model="text-embedding-3-small", input=["a"])
            chosen = await sdk.embeddings.create(model="text-embedding-3-small", input=["a", "b"])
            default = await sdk.embeddings.create(model="text-embedding-3-small", input="c", dimensions=3)
        finally:
            await sdk.close()
        assert [d.embedding for d in chosen.data] == [[0.25, 0.5], [0.25, 0.5]]
        assert default.data[0].embedding == embedding_vector("c", 3)
        assert default.usage.prompt_tokens == embedding_tokens("c")
        assert server.embeddings.inputs == [["a"], ["a", "b"], ["c"]]


async def test_azure_deployment_route_needs_api_version_and_its_key() -> None:
    async with OpenAIServer(api_key="k") as server:
        sdk = openai.AsyncAzureOpenAI(
            azure_endpoint=server.base_url, api_key="wrong", api_version="2024-10-21", max_retries=0
        )
        try:
            with pytest.raises(openai.AuthenticationError):
                await sdk.embeddings.create(model="text-embedding-3-small", input="a")
        finally:
            await sdk.close()
        assert server.embeddings.requests[0].path == "/openai/deployments/text-embedding-3-small/embeddings"
        unknown = openai.AsyncAzureOpenAI(azure_endpoint=server.base_url, api_key="k", api_version="2024-10-21")
        try:
            with pytest.raises(openai.NotFoundError, match="deployment for this resource does not exist"):
                await unknown.embeddings.create(model="no-such-deployment", input="a")
        finally:
            await unknown.close()
