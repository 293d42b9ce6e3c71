"""`tool_calling` on the loopback Ollama server: for a model without native tool calling (SmolLM2, gemma3) the
tools go in a system message, `format` carries the reply's JSON schema (as `ollama serve` takes one), and the reply
becomes tool calls or plain text; `prompt` mode reads what the model wrote tolerantly."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import ollama
import pytest

from ext.core import TOOL_PREAMBLE, CreateResult, StreamChunk, UserMessage, reply_schema
from ext.models.ollama import OllamaChatCompletionClient
from ext.testing.sample_inputs import GET_WEATHER, LOCAL_TIME
from ext.testing.script import Reply
from ext.testing.servers import OllamaServer

SMOLLM2 = "smollm2:135m"
WEATHER = GET_WEATHER
TIME = LOCAL_TIME
ASK = [UserMessage(content="Weather in Paris?", source="user")]
CALL = '{"tool_calls": [{"name": "get_weather", "arguments": {"city": "Paris"}}]}'


@pytest.fixture
async def server() -> AsyncIterator[OllamaServer]:
    # As `ollama show` reports them: SmolLM2's and gemma3's templates take no tools.
    no_tools = ["completion"]
    async with OllamaServer(
        models=[SMOLLM2, "gemma3:4b", "llama3.2"], capabilities={SMOLLM2: no_tools, "gemma3:4b": no_tools}
    ) as srv:
        yield srv


def _client(server: OllamaServer, model: str = SMOLLM2, **kwargs: Any) -> OllamaChatCompletionClient:
    return OllamaChatCompletionClient(model, host=server.base_url, max_retries=0, **kwargs)


def _body(server: OllamaServer, index: int = -1) -> dict[str, Any]:
    body = json.loads(server.requests[index].body)
    assert isinstance(body, dict)
    return body


async def test_format_carries_the_schema_and_the_reply_becomes_calls(server: OllamaServer) -> None:
    server.enqueue(Reply(text=CALL))
    async with _client(server) as client:
        assert client.capabilities.function_calling is True
        result = await client.create(ASK, tools=[WEATHER, TIME])
    body = _body(server)
    assert "tools" not in body
    assert body["format"] == reply_schema([WEATHER, TIME], "auto")
    assert body["messages"][0]["role"] == "system" and body["messages"][0]["content"].startswith(TOOL_PREAMBLE)
    assert result.finish_reason == "function_calls" and isinstance(result.content, list)
    assert (result.content[0].name, result.content[0].arguments) == ("get_weather", '{"city":"Paris"}')


async def test_auto_answers_are_unwrapped_into_text(server: OllamaServer) -> None:
    server.enqueue(Reply(text='{"answer": "Sunny."}'))
    async with _client(server) as client:
        result = await client.create(ASK, tools=[WEATHER])
    assert result.content == "Sunny." and result.finish_reason == "stop"


@pytest.mark.parametrize("choice", ["required", "local_time"])
async def test_a_forced_choice_is_possible_at_the_prompt_level(server: OllamaServer, choice: str) -> None:
    server.enqueue(Reply(text='{"tool_calls": [{"name": "local_time", "arguments": {"city": "Paris"}}]}'))
    async with _client(server) as client:
        result = await client.create(ASK, tools=[WEATHER, TIME], tool_choice=choice)
    assert _body(server)["format"] == reply_schema([WEATHER, TIME], choice)
    assert isinstance(result.content, list) and result.content[0].name == "local_time"


async def test_none_sends_neither_tools_nor_format(server: OllamaServer) -> None:
    server.enqueue(Reply(text="Sunny."))
    async with _client(server) as client:
        result = await client.create(ASK, tools=[WEATHER], tool_choice="none")
    body = _body(server)
    assert "tools" not in body and "format" not in body and body["messages"][0]["role"] == "user"
    assert result.content == "Sunny."


async def test_prompt_mode_reads_a_python_like_call(server: OllamaServer) -> None:
    server.enqueue(Reply(text='local_time(city="Oslo")\n'))
    async with _client(server, tool_calling="prompt") as client:
        result = await client.create(ASK, tools=[WEATHER, TIME])
    assert "format" not in _body(server)
    assert isinstance(result.content, list) and json.loads(result.content[0].arguments) == {"city": "Oslo"}


async def test_prompt_mode_leaves_a_call_mentioned_in_prose_as_text(server: OllamaServer) -> None:
    # The whole answer must be the call: this one only mentions it (the earlier reader made it a call).
    server.enqueue(Reply(text='I will call local_time(city="Oslo").'))
    async with _client(server, tool_calling="prompt") as client:
        result = await client.create(ASK, tools=[WEATHER, TIME])
    assert result.content == 'I will call local_time(city="Oslo").'


async def test_a_stream_gives_the_calls_at_the_end(server: OllamaServer) -> None:
    server.enqueue(Reply(text=CALL), Reply(text='{"answer": "Sunny."}'))
    async with _client(server) as client:
        calls = [item async for item in client.create_stream(ASK, tools=[WEATHER])]
        text = [item async for item in client.create_stream(ASK, tools=[WEATHER])]
    assert len(calls) == 1 and isinstance(calls[0], CreateResult) and isinstance(calls[0].content, list)
    assert isinstance(text[0], StreamChunk) and text[0].content == "Sunny."
    assert isinstance(text[-1], CreateResult) and text[-1].content == "Sunny."
    assert _body(server)["stream"] is False  # the whole reply is read before it is known to be text


async def test_native_on_a_model_whose_template_takes_no_tools_is_refused_by_the_server(
    server: OllamaServer,
) -> None:
    async with _client(server, tool_calling="native") as client:
        with pytest.raises(ollama.ResponseError, match="does not support tools"):
            await client.create(ASK, tools=[WEATHER])


async def test_models_with_native_tool_calling_keep_it(server: OllamaServer) -> None:
    server.enqueue(Reply(text="ok"))
    async with _client(server, model="llama3.2") as client:
        await client.create(ASK, tools=[WEATHER])
    body = _body(server)
    assert body["tools"][0]["function"]["name"] == "get_weather" and "format" not in body
