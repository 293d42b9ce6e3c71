"""What `tool_calling` sends to an OpenAI-compatible server and how the reply is read, on the loopback server in
llama-cpp-python mode (`tools_need_tool_choice=True`, as `python -m llama_cpp.server` behaves)."""

from __future__ import annotations

import asyncio
import itertools
import json
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest

from ext.core import TOOL_PREAMBLE, UserMessage, reply_schema
from ext.models.openai import OpenAIChatCompletionClient
from ext.testing.sample_inputs import GET_WEATHER, LOCAL_TIME
from ext.testing.script import Reply
from ext.testing.servers import OpenAIServer

SMOLLM2 = "SmolLM2-135M-Instruct.Q4_1"
WEATHER = GET_WEATHER
TIME = LOCAL_TIME
ASK = [UserMessage(content="Weather in Paris?", source="user")]


@pytest.fixture
async def llama_like() -> AsyncIterator[OpenAIServer]:
    async with OpenAIServer(tools_need_tool_choice=True) as srv:
        yield srv


def _client(server: OpenAIServer, model: str = SMOLLM2, **kwargs: Any) -> OpenAIChatCompletionClient:
    return OpenAIChatCompletionClient(model, base_url=f"{server.base_url}/v1", api_key="sk-none", **kwargs)


def _body(server: OpenAIServer, index: int = 0) -> dict[str, Any]:
    body = json.loads(server.requests[index].body)
    assert isinstance(body, dict)
    return body


async def test_constrained_sends_the_tools_in_a_system_message_and_the_reply_schema(llama_like: OpenAIServer) -> None:
    llama_like.enqueue(Reply(text='{"tool_calls": [{"name": "get_weather", "arguments": {"city": "Paris"}}]}'))
    async with _client(llama_like) as client:
        result = await client.create(ASK, tools=[WEATHER, TIME])
    body = _body(llama_like)
    assert "tools" not in body and "tool_choice" not in body
    assert body["messages"][0]["role"] == "system" and body["messages"][0]["content"].startswith(TOOL_PREAMBLE)
    assert body["response_format"] == {"type": "json_object", "schema": reply_schema([WEATHER, TIME], "auto")}
    assert result.finish_reason == "function_calls" and isinstance(result.content, list)
    assert (result.content[0].name, result.content[0].arguments) == ("get_weather", '{"city":"Paris"}')


async def test_constrained_auto_answer_is_unwrapped(llama_like: OpenAIServer) -> None:
    llama_like.enqueue(Reply(text='{"answer": "It is sunny."}'))
    async with _client(llama_like) as client:
        result = await client.create(ASK, tools=[WEATHER])
    assert result.content == "It is sunny." and result.finish_reason == "stop"


async def test_a_named_tool_is_the_only_one_the_schema_allows(llama_like: OpenAIServer) -> None:
    llama_like.enqueue(Reply(text='{"tool_calls": [{"name": "local_time", "arguments": {"city": "Paris"}}]}'))
    async with _client(llama_like) as client:
        await client.create(ASK, tools=[WEATHER, TIME], tool_choice="local_time")
    schema = _body(llama_like)["response_format"]["schema"]
    assert schema["properties"]["tool_calls"]["items"]["properties"]["name"] == {"const": "local_time"}


async def test_prompt_mode_sends_no_constraint_and_reads_tags(llama_like: OpenAIServer) -> None:
    llama_like.enqueue(Reply(text='<tool_call>{"name": "local_time", "arguments": {"city": "Oslo"}}</tool_call>'))
    async with _client(llama_like, tool_calling="prompt") as client:
        result = await client.create(ASK, tools=[WEATHER, TIME])
    body = _body(llama_like)
    assert "response_format" not in body and "tools" not in body
    assert isinstance(result.content, list) and result.content[0].name == "local_time"


async def test_none_offers_no_tools_and_no_constraint(llama_like: OpenAIServer) -> None:
    llama_like.enqueue(Reply(text='{"tool_calls": []}'))
    async with _client(llama_like) as client:
        result = await client.create(ASK, tools=[WEATHER], tool_choice="none")
    body = _body(llama_like)
    assert "response_format" not in body and "tools" not in body
    assert body["messages"] == [{"role": "user", "content": "Weather in Paris?"}]
    assert result.content == '{"tool_calls": []}'


async def test_native_when_asked_or_when_the_model_has_tools(llama_like: OpenAIServer) -> None:
    llama_like.default = Reply(text="ok")
    async with _client(llama_like, tool_calling="native") as client:
        await client.create(ASK, tools=[WEATHER], tool_choice="auto")
    async with _client(llama_like, model="qwen2.5:0.5b") as client:
        await client.create(ASK, tools=[WEATHER], tool_choice="auto")
    for index in (0, 1):
        body = _body(llama_like, index)
        assert body["tools"][0]["function"]["name"] == "get_weather" and "response_format" not in body


async def test_prompt_mode_leaves_a_call_mentioned_in_prose_as_text(llama_like: OpenAIServer) -> None:
    text = 'You would call get_weather(city="Paris") for that, but I know it is sunny.'
    llama_like.enqueue(Reply(text=text))
    async with _client(llama_like, tool_calling="prompt") as client:
        result = await client.create(ASK, tools=[WEATHER, TIME])
    assert (result.content, result.finish_reason) == (text, "stop")


@pytest.mark.parametrize("mode", ["prompt", "constrained"])
async def test_reading_a_runaway_answer_keeps_the_event_loop_running(llama_like: OpenAIServer, mode: str) -> None:
    # An answer that starts a call of an offered tool and never closes it. The earlier reader blocked the loop for
    # about 8 s at 8 KB (a 50 ms ticker ran 0 times); it is now read in linear time, so a ticker in the same loop
    # keeps ticking: its longest gap covers the server, the SDK and the reader (a few milliseconds each).
    stamps: list[float] = []

    async def ticker() -> None:
        while True:
            stamps.append(time.perf_counter())
            await asyncio.sleep(0.01)

    for size in (8 * 1024, 256 * 1024):
        answer = "get_weather(" + "(1)," * (size // 4)
        llama_like.enqueue(Reply(text=answer))
        async with _client(llama_like, tool_calling=mode) as client:
            stamps.clear()
            ticking = asyncio.create_task(ticker())
            await asyncio.sleep(0)
            result = await client.create(ASK, tools=[WEATHER, TIME])
            stamps.append(time.perf_counter())
            ticking.cancel()
        assert result.content == answer and result.finish_reason == "stop"
        longest = max(later - earlier for earlier, later in itertools.pairwise(stamps))
        assert len(stamps) >= 2 and longest < 0.5, f"{size // 1024} KB: the loop was blocked for {longest:.2f} s"
