"""Constrained tool calls through a real OpenAI-compatible server: llama-cpp-python's own (`python -m
llama_cpp.server`) on SmolLM2-135M-Instruct, which has no native tool calling. With the client's default for such a
model on a compatible server (`tool_calling="constrained"`), the tools go in a system message and the reply is held
to the call JSON by `response_format: {"type": "json_object", "schema": ...}`, from which the server builds a
grammar. Every call must validate against its tool's schema; `auto` must still let the model answer in text.

The wire shape is checked on the loopback server in llama-cpp-python mode (test_tool_calling_wire.py)."""

from __future__ import annotations

import json
from typing import Any

from ext.core import (
    AssistantMessage,
    CreateResult,
    FunctionCall,
    FunctionExecutionResult,
    FunctionExecutionResultMessage,
    LLMMessage,
    StreamChunk,
    ToolSchema,
    UserMessage,
)
from ext.models.openai import OpenAIChatCompletionClient
from ext.testing.llama_server import LlamaServer

WEATHER: ToolSchema = {
    "name": "get_weather",
    "description": "The current weather in a city.",
    "parameters": {
        "type": "object",
        "properties": {"city": {"type": "string"}, "unit": {"type": "string", "enum": ["c", "f"]}},
        "required": ["city"],
    },
}
TIME: ToolSchema = {
    "name": "local_time",
    "description": "The local time in a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
}
TOOLS = [WEATHER, TIME]
_JSON_TYPES: dict[str, type | tuple[type, ...]] = {"string": str, "integer": int, "number": (int, float)}


def _client(server: LlamaServer, **kwargs: Any) -> OpenAIChatCompletionClient:
    return OpenAIChatCompletionClient(
        server.model_alias,
        base_url=server.base_url,
        api_key="sk-llama-server-needs-no-key",
        temperature=0.0,
        max_tokens=96,
        **kwargs,
    )


def _ask(text: str) -> list[UserMessage]:
    return [UserMessage(content=text, source="user")]


def assert_valid_calls(result: CreateResult, names: set[str]) -> list[FunctionCall]:
    """The result is tool calls, each of a tool in `names`, with arguments that validate against its schema."""
    assert result.finish_reason == "function_calls", result.content
    assert isinstance(result.content, list) and result.content
    schemas = {t["name"]: t["parameters"] for t in TOOLS}
    for call in result.content:
        assert call.name in names
        arguments = json.loads(call.arguments)
        schema = schemas[call.name]
        assert isinstance(arguments, dict)
        assert set(schema["required"]) <= arguments.keys()
        assert arguments.keys() <= schema["properties"].keys()
        for key, value in arguments.items():
            declared = schema["properties"][key]
            assert isinstance(value, _JSON_TYPES[declared["type"]])
            assert "enum" not in declared or value in declared["enum"]
    return result.content


async def test_the_default_for_smollm2_on_a_compatible_server_is_constrained(real_server: LlamaServer) -> None:
    async with _client(real_server) as client:
        assert client.capabilities.function_calling is True  # ext calls tools for it
        result = await client.create(_ask("Tell me a joke."), tools=TOOLS, tool_choice="required")
    assert_valid_calls(result, {"get_weather", "local_time"})


async def test_required_gives_valid_calls_even_for_a_question_no_tool_fits(real_server: LlamaServer) -> None:
    async with _client(real_server, tool_calling="constrained") as client:
        result = await client.create(_ask("Tell me a joke."), tools=TOOLS, tool_choice="required")
    assert_valid_calls(result, {"get_weather", "local_time"})


async def test_a_named_tool_gives_only_calls_of_that_tool(real_server: LlamaServer) -> None:
    async with _client(real_server) as client:
        result = await client.create(_ask("What is the weather in Paris?"), tools=TOOLS, tool_choice="local_time")
    calls = assert_valid_calls(result, {"local_time"})
    assert json.loads(calls[0].arguments) == {"city": "Paris"}


async def test_auto_still_lets_the_model_answer_in_text(real_server: LlamaServer) -> None:
    async with _client(real_server) as client:
        result = await client.create(_ask("What is the capital of France?"), tools=TOOLS)
    # The reply was {"answer": "..."} on the wire; the caller gets the text.
    assert result.finish_reason == "stop"
    assert isinstance(result.content, str) and "Paris" in result.content and not result.content.startswith("{")


async def test_auto_calls_are_valid_when_the_model_calls(real_server: LlamaServer) -> None:
    async with _client(real_server) as client:
        result = await client.create(_ask("Hi! How are you?"), tools=TOOLS)
    # SmolLM2-135M picks calls here at temperature 0 (not a sensible choice: it is a 135M model).
    assert_valid_calls(result, {"get_weather", "local_time"})


async def test_none_gives_text(real_server: LlamaServer) -> None:
    async with _client(real_server) as client:
        result = await client.create(_ask("What is the weather in Paris?"), tools=TOOLS, tool_choice="none")
    assert isinstance(result.content, str) and "Paris" in result.content
    assert result.finish_reason in ("stop", "length")


async def test_a_stream_with_tools_ends_in_the_calls(real_server: LlamaServer) -> None:
    async with _client(real_server) as client:
        items = [
            item
            async for item in client.create_stream(
                _ask("What is the weather in Paris?"), tools=TOOLS, tool_choice="local_time"
            )
        ]
    assert all(isinstance(item, StreamChunk) for item in items[:-1])
    last = items[-1]
    assert isinstance(last, CreateResult)
    assert_valid_calls(last, {"local_time"})


async def test_a_tool_loop_round_trips_through_the_prompt(real_server: LlamaServer) -> None:
    call = FunctionCall(id="call_1", name="get_weather", arguments='{"city": "Paris"}')
    history: list[LLMMessage] = [
        UserMessage(content="What is the weather in Paris?", source="user"),
        AssistantMessage(content=[call], source="assistant"),
        FunctionExecutionResultMessage(
            content=[FunctionExecutionResult(call_id="call_1", name="get_weather", content="Sunny, 21 C")]
        ),
    ]
    async with _client(real_server) as client:
        result = await client.create(history, tools=TOOLS)
    # The server accepted the history written as text; the model answers or calls again, validly either way.
    if isinstance(result.content, list):
        assert_valid_calls(result, {"get_weather", "local_time"})
    else:
        assert result.content and not result.content.startswith('{"answer"')
