"""`OllamaChatCompletionClient` against an Ollama-protocol server that runs a REAL model: ext-testing's stand-in for
`ollama serve` (`ext.testing.ollama_model.OllamaModelServer`), with the embedded SmolLM2-135M-Instruct, at
temperature 0 and seed 0. SmolLM2's template has no tools, so the client sends them at the prompt level; constrained,
`format` carries the reply's JSON schema and the server holds the model to it with a grammar, as Ollama does.

What the model answers is asserted as it answers it here (greedy decoding is deterministic for one build of
llama.cpp); the shape checks (a call validates against its tool's schema) hold whatever it answers."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import ollama
import pytest

from ext.core import TOOL_PREAMBLE, CreateResult, FunctionCall, StreamChunk, UserMessage, reply_schema
from ext.models.llama_cpp import default_model_path
from ext.models.ollama import OllamaChatCompletionClient
from ext.testing.ollama_model import OllamaModelServer
from ext.testing.sample_inputs import GET_WEATHER

WEATHER = [UserMessage(content="What is the weather in Paris?", source="user")]
CAPITAL = [UserMessage(content="What is the capital of France?", source="user")]


@pytest.fixture
async def server() -> AsyncIterator[OllamaModelServer]:
    async with OllamaModelServer(default_model_path()) as srv:
        yield srv


def _client(server: OllamaModelServer, **kwargs: Any) -> OllamaChatCompletionClient:
    return OllamaChatCompletionClient(
        "smollm2", host=server.base_url, temperature=0.0, seed=0, num_predict=64, max_retries=0, **kwargs
    )


def _body(server: OllamaModelServer) -> dict[str, Any]:
    body = json.loads(server.requests[-1].body)
    assert isinstance(body, dict)
    return body


def _valid_weather_call(call: FunctionCall) -> bool:
    """`GET_WEATHER`'s schema: an object whose required `city` is a string."""
    arguments = json.loads(call.arguments)
    return call.name == "get_weather" and isinstance(arguments, dict) and isinstance(arguments.get("city"), str)


async def test_required_gives_calls_that_validate_against_the_tool_schema(server: OllamaModelServer) -> None:
    async with _client(server) as client:
        result = await client.create(WEATHER, tools=[GET_WEATHER], tool_choice="required")
    body = _body(server)
    assert "tools" not in body
    assert body["format"] == reply_schema([GET_WEATHER], "required")
    assert body["messages"][0]["role"] == "system" and body["messages"][0]["content"].startswith(TOOL_PREAMBLE)
    assert body["options"]["temperature"] == 0.0 and body["options"]["seed"] == 0
    assert result.finish_reason == "function_calls" and isinstance(result.content, list)
    assert all(_valid_weather_call(call) for call in result.content)
    assert json.loads(result.content[0].arguments) == {"city": "Paris"}
    assert result.usage.prompt_tokens > 0 and 0 < result.usage.completion_tokens <= 64


async def test_auto_answers_without_a_tool(server: OllamaModelServer) -> None:
    async with _client(server) as client:
        result = await client.create(CAPITAL, tools=[GET_WEATHER])
    assert _body(server)["format"] == reply_schema([GET_WEATHER], "auto")
    # Held to the schema, the model chose the `{"answer": ...}` branch; the client unwraps it into text.
    assert (result.finish_reason, result.content) == ("stop", "Paris")


async def test_prompt_mode_sends_no_format_and_reads_the_reply_tolerantly(server: OllamaModelServer) -> None:
    async with _client(server, tool_calling="prompt") as client:
        result = await client.create(WEATHER, tools=[GET_WEATHER])
    body = _body(server)
    assert "format" not in body and "tools" not in body
    assert body["messages"][0]["content"].startswith(TOOL_PREAMBLE)
    # With a prompt alone SmolLM2-135M writes prose about the weather, which holds no call: it stays text.
    assert isinstance(result.content, str) and result.content.startswith("The weather in Paris")
    assert result.finish_reason == "length"  # num_predict 64 reached, reported as Ollama's done_reason "length"


async def test_a_streamed_answer_carries_the_model_token_counts(server: OllamaModelServer) -> None:
    async with _client(server) as client:
        items = [item async for item in client.create_stream(CAPITAL)]
    *chunks, final = items
    assert isinstance(final, CreateResult) and isinstance(final.content, str)
    assert all(isinstance(chunk, StreamChunk) for chunk in chunks) and len(chunks) > 1
    assert "".join(chunk.content for chunk in chunks if isinstance(chunk, StreamChunk)) == final.content
    assert "capital of France" in final.content
    assert final.usage.prompt_tokens > 0 and 0 < final.usage.completion_tokens <= 64


async def test_the_ollama_sdk_reads_the_stream_and_the_model_listing(server: OllamaModelServer) -> None:
    sdk = ollama.AsyncClient(host=server.base_url)
    parts = [
        part
        async for part in await sdk.chat(
            model="smollm2",
            messages=[{"role": "user", "content": "What is the capital of France? Answer in JSON."}],
            format={"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
            options={"temperature": 0, "seed": 0, "num_predict": 64},
            stream=True,
        )
    ]
    assert [part.done for part in parts] == [False] * (len(parts) - 1) + [True]
    last = parts[-1]
    assert last.done_reason == "stop" and (last.prompt_eval_count or 0) > 0 and (last.eval_count or 0) > 0
    text = "".join(part.message.content or "" for part in parts)
    assert json.loads(text) == {"city": "Paris"}  # the grammar held the reply to the schema
    shown = await sdk.show("smollm2")
    assert shown.capabilities == ["completion"]
    assert shown.details is not None and shown.details.quantization_level == "Q4_1"
    listed = await sdk.list()
    assert [model.model for model in listed.models] == ["smollm2:latest"]


async def test_refusals_are_ollamas(server: OllamaModelServer) -> None:
    async with _client(server, tool_calling="native") as client:
        with pytest.raises(ollama.ResponseError, match="smollm2:latest does not support tools"):
            await client.create(WEATHER, tools=[GET_WEATHER])
    async with httpx.AsyncClient(base_url=server.base_url) as http:
        response = await http.post("/api/chat", json={"model": "llama3.2", "messages": [{"role": "user"}]})
        bad_format = await http.post(
            "/api/chat", json={"model": "smollm2", "messages": [{"role": "user", "content": "x"}], "format": "yaml"}
        )
    assert response.status_code == 404
    assert response.json() == {"error": 'model "llama3.2" not found, try pulling it first'}
    assert bad_format.status_code == 500 and bad_format.json()["error"].startswith("invalid format")


def test_a_missing_model_file_is_named_before_anything_starts(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="expected a GGUF file"):
        OllamaModelServer(tmp_path / "missing.gguf")
