"""The Ollama embedding client: ext-testing's EmbeddingClientConformance over loopback, plus what is particular to
`/api/embed` (dimensions, truncate, keep_alive, a model that is not pulled, an unreachable server)."""

from __future__ import annotations

import asyncio
import socket
from pathlib import Path
from typing import Any

import httpx
import ollama
import pytest

from ext.core import EmbeddingClient
from ext.models.ollama import OllamaEmbeddingClient, OllamaModelNotFoundError
from ext.testing.conformance import EmbeddingClientConformance
from ext.testing.readme import python_example
from ext.testing.sample_inputs import TEXTS
from ext.testing.servers import LoopbackServer, OllamaServer, embedding_tokens, embedding_vector

README = Path(__file__).resolve().parents[1] / "README.md"


class TestOllamaEmbeddingConformance(EmbeddingClientConformance):
    rate_limit_error = ollama.ResponseError
    batch_limit = 256

    def make_server(self) -> LoopbackServer:
        return OllamaServer(require_headers={"authorization": f"Bearer {self.secret}"})

    def make_client(self, server: LoopbackServer, **kwargs: Any) -> EmbeddingClient:
        return OllamaEmbeddingClient(
            "all-minilm", host=server.base_url, headers_env={"Authorization": "EXT_TEST_OLLAMA_AUTH"}, **kwargs
        )

    def dump_environment(self, client: EmbeddingClient) -> dict[str, str]:
        return {"EXT_TEST_OLLAMA_AUTH": f"Bearer {self.secret}"}

    @pytest.fixture(autouse=True)
    def _auth_header(self, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setenv("EXT_TEST_OLLAMA_AUTH", f"Bearer {self.secret}")


async def test_wire_request_and_usage() -> None:
    async with OllamaServer() as server:
        async with OllamaEmbeddingClient(
            "nomic-embed-text", host=server.base_url, dimensions=64, truncate=False, keep_alive="5m"
        ) as client:
            result = await client.embed(TEXTS[:3])
        (request,) = server.embeddings.requests
        assert request.json == {
            "model": "nomic-embed-text",
            "input": TEXTS[:3],
            "truncate": False,
            "keep_alive": "5m",
            "dimensions": 64,
        }
        assert result.vectors == [embedding_vector(text, 64) for text in TEXTS[:3]]
        assert result.usage.prompt_tokens == sum(embedding_tokens(t) for t in TEXTS[:3])


async def test_model_not_pulled_names_the_model_and_is_not_retried() -> None:
    async with OllamaServer(models=["llama3.2"]) as server:
        async with OllamaEmbeddingClient("nomic-embed-text", host=server.base_url, max_retries=3) as client:
            with pytest.raises(OllamaModelNotFoundError, match="ollama pull nomic-embed-text"):
                await client.embed(["x"])
        assert len(server.embeddings.requests) == 1


async def test_unreachable_server_raises_connection_error_promptly() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # bound, not listening: connections are refused
        async with OllamaEmbeddingClient("all-minilm", host=f"http://127.0.0.1:{port}", max_retries=0) as client:
            with pytest.raises(ConnectionError):
                await client.embed(["x"])


@pytest.mark.parametrize(
    ("body", "status", "text"),
    [
        ({"input": "a"}, 400, "model is required"),
        ({"model": "all-minilm", "input": [1, 2]}, 400, "invalid input type"),
        ({"model": "all-minilm", "input": "a", "dimensions": -1}, 400, "positive integer"),
        ({"model": "all-minilm", "input": "a", "dimensions": 385}, 400, "must not exceed 384"),
        ({"model": "all-minilm", "input": "word " * 300, "truncate": False}, 400, "exceeds the context length"),
    ],
)
async def test_server_rejects_what_ollama_rejects(body: dict[str, Any], status: int, text: str) -> None:
    async with OllamaServer(context_length=128) as server:
        async with httpx.AsyncClient(base_url=server.base_url) as http:
            response = await http.post("/api/embed", json=body)
        assert response.status_code == status and text in response.json()["error"]


async def test_server_answers_an_empty_input_with_no_embeddings() -> None:
    async with OllamaServer() as server:
        async with ollama.AsyncClient(host=server.base_url) as sdk:
            response = await sdk.embed(model="all-minilm", input="")
        assert response.embeddings == [] and server.embeddings.inputs == []


async def test_readme_example_runs(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    code = python_example(README, "OllamaEmbeddingClient")
    async with OllamaServer(models=["nomic-embed-text"]) as server:
        monkeypatch.setenv("OLLAMA_HOST", server.base_url)
        await asyncio.to_thread(exec, compile(code, "README.md", "exec"), {"__name__": "__main__"})
        assert capsys.readouterr().out.split() == ["2", "768", "13"]
