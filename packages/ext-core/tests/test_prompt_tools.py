"""Tool calling at the prompt level: the system text, the reply schema, the history as text, the plan a client
follows, the mode resolution and what `capabilities` reports."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import BaseModel

from ext.core import (
    TOOL_PREAMBLE,
    AssistantMessage,
    BaseChatCompletionClient,
    ChatRequest,
    CreateResult,
    FunctionCall,
    FunctionExecutionResult,
    FunctionExecutionResultMessage,
    ModelInfo,
    RequestUsage,
    StreamChunk,
    SystemMessage,
    ToolCalling,
    ToolSchema,
    UnsupportedOptionError,
    UserMessage,
    plan_prompt_tools,
    prompt_messages,
    prompt_tool_stream,
    reply_schema,
    resolve_tool_calling,
    tool_system_text,
)

WEATHER: ToolSchema = {
    "name": "get_weather",
    "description": "The weather.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
}
TIME: ToolSchema = {
    "name": "local_time",
    "description": "The time.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
}


def _request(tool_choice: str = "auto", json_output: Any = False, messages: Any = None) -> ChatRequest:
    return ChatRequest(
        messages=messages or [UserMessage(content="Weather in Paris?", source="user")],
        model="m",
        tools=[WEATHER, TIME],
        tool_choice=tool_choice,
        json_output=json_output,
    )


def test_system_text_names_the_tools_and_the_choice() -> None:
    text = tool_system_text([WEATHER, TIME], "auto")
    assert text.startswith(TOOL_PREAMBLE)
    assert json.loads(text.splitlines()[1])[0]["name"] == "get_weather"
    assert "You must call the tool local_time." in tool_system_text([WEATHER, TIME], "local_time")
    assert "You must call at least one tool." in tool_system_text([WEATHER], "required")
    assert '{"answer"' in tool_system_text([WEATHER], "auto", answer_object=True)
    assert '{"answer"' not in text


def test_reply_schema_auto_allows_an_answer_named_allows_one_tool() -> None:
    auto = reply_schema([WEATHER, TIME], "auto")
    calls, answer = auto["anyOf"]
    assert answer["required"] == ["answer"]
    assert len(calls["properties"]["tool_calls"]["items"]["anyOf"]) == 2
    named = reply_schema([WEATHER, TIME], "local_time")
    assert named["properties"]["tool_calls"]["items"]["properties"]["name"] == {"const": "local_time"}
    required = reply_schema([WEATHER, TIME], "required")
    assert "anyOf" not in required and required["properties"]["tool_calls"]["minItems"] == 1


def test_history_calls_and_results_become_text_turns() -> None:
    call = FunctionCall(id="c1", name="get_weather", arguments='{"city": "Paris"}')
    result = FunctionExecutionResult(call_id="c1", name="get_weather", content="sunny", is_error=False)
    out = prompt_messages(
        [AssistantMessage(content=[call], source="a"), FunctionExecutionResultMessage(content=[result])]
    )
    assert isinstance(out[0], AssistantMessage) and json.loads(str(out[0].content))["tool_calls"][0]["arguments"] == {
        "city": "Paris"
    }
    assert isinstance(out[1], UserMessage) and json.loads(str(out[1].content))["tool_results"][0]["content"] == "sunny"


def test_plan_constrained_auto_unwraps_and_prompt_mode_has_no_schema() -> None:
    plan = plan_prompt_tools(_request(), "constrained")
    assert isinstance(plan.messages[0], SystemMessage) and plan.schema is not None and plan.unwrap_answer
    prompt = plan_prompt_tools(_request(), "prompt")
    assert prompt.schema is None and not prompt.unwrap_answer and isinstance(prompt.messages[0], SystemMessage)
    none = plan_prompt_tools(_request("none"), "constrained")
    assert none.tools == [] and none.schema is None and len(none.messages) == 1


def test_plan_with_structured_output_next_to_tools_keeps_the_json() -> None:
    class City(BaseModel):
        name: str

    plan = plan_prompt_tools(_request(json_output=City), "constrained")
    assert plan.schema is not None and plan.schema["anyOf"][1]["properties"]["name"]["type"] == "string"
    assert not plan.unwrap_answer


def test_plan_reads_calls_and_answers() -> None:
    plan = plan_prompt_tools(_request(), "constrained")
    usage = RequestUsage()
    calls = plan.read(CreateResult.of("stop", '{"tool_calls": [{"name": "get_weather", "arguments": {}}]}', usage))
    assert calls.finish_reason == "function_calls" and isinstance(calls.content, list)
    answer = plan.read(CreateResult.of("stop", '{"answer": "It is sunny."}', usage))
    assert answer.content == "It is sunny." and answer.finish_reason == "stop"


def test_resolution_default_is_constrained_only_locally_for_models_without_native_tools() -> None:
    assert resolve_tool_calling(None, native_tools=False) == "constrained"
    assert resolve_tool_calling(None, native_tools=True) == "native"
    assert resolve_tool_calling(None, native_tools=False, local=False) == "native"
    assert resolve_tool_calling("prompt", native_tools=True, local=False) == "prompt"


class _Client(BaseChatCompletionClient):
    def __init__(self, mode: ToolCalling) -> None:
        super().__init__(model="gemma-2-2b")
        self.mode = mode
        self.seen: list[ChatRequest] = []

    def _tool_calling_for(self, model: str, info: ModelInfo) -> ToolCalling:
        return self.mode

    async def _create(self, request: ChatRequest) -> CreateResult:
        self.seen.append(request)
        return CreateResult.of("stop", "hi", RequestUsage())


async def test_a_model_without_native_tools_takes_tools_when_the_client_calls_them_at_prompt_level() -> None:
    native = _Client("native")
    assert native.capabilities.function_calling is False  # gemma: no native tool calling in the table
    with pytest.raises(UnsupportedOptionError, match="does not support function calling"):
        await native.create([UserMessage(content="x", source="u")], tools=[WEATHER])
    constrained = _Client("constrained")
    assert constrained.capabilities.function_calling is True
    await constrained.create([UserMessage(content="x", source="u")], tools=[WEATHER])
    assert constrained.seen[0].tools == [WEATHER]


async def test_prompt_tool_stream_gives_text_as_one_chunk_then_the_result() -> None:
    async def create() -> CreateResult:
        return CreateResult.of("stop", "sunny", RequestUsage())

    items: list[StreamChunk | CreateResult] = [item async for item in prompt_tool_stream(create)]
    assert isinstance(items[0], StreamChunk) and items[0].content == "sunny"
    assert isinstance(items[1], CreateResult) and len(items) == 2
