"""The mapping functions on their own: no network, SDK response objects built from plain JSON."""

from __future__ import annotations

from typing import Any, Optional

import pytest
from openai.types.chat import ChatCompletion, ChatCompletionChunk
from pydantic import BaseModel

from ext.core import (
    AssistantMessage,
    ChatOptions,
    ChatRequest,
    ConfigurationError,
    ExtError,
    FunctionCall,
    FunctionExecutionResult,
    FunctionExecutionResultMessage,
    Image,
    ModelInfo,
    RequestUsage,
    StreamChunk,
    SystemMessage,
    ToolSchema,
    UserMessage,
)
from ext.models.openai import OPENAI_MODELS, TOOL_ERROR_PREFIX, WireSettings
from ext.models.openai._mapping import (
    StreamState,
    map_messages,
    map_options,
    map_request,
    map_response,
    map_response_format,
    map_stream_chunk,
    map_tool_choice,
    map_tools,
    map_usage,
    split_extra_args,
    strict_schema,
)
from ext.models.openai._models import system_role_for

PNG_1PX = bytes.fromhex(
    "89504e470d0a1a0a0000000d49484452000000010000000108060000001f15c4890000000d49444154789c63f8cfc0f01f0005000201"
    "8f2b3f5a0000000049454e44ae426082"
)
GPT4O = OPENAI_MODELS.lookup("gpt-4o")
O3 = OPENAI_MODELS.lookup("o3")


class Address(BaseModel):
    street: str
    city: str


class Person(BaseModel):
    """A person."""

    name: str
    age: Optional[int] = None
    address: Address
    tags: list[str] = []


class WithMap(BaseModel):
    scores: dict[str, int]


# --- messages --------------------------------------------------------------------------------------


def test_messages_keep_order_and_system_messages_in_place() -> None:
    wire = map_messages(
        [
            SystemMessage(content="rule one"),
            UserMessage(content="hi"),
            AssistantMessage(content="hello"),
            SystemMessage(content="rule two"),
            UserMessage(content="again"),
        ]
    )
    assert wire == [
        {"role": "system", "content": "rule one"},
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "hello"},
        {"role": "system", "content": "rule two"},
        {"role": "user", "content": "again"},
    ]


def test_system_role_is_configurable() -> None:
    wire = map_messages([SystemMessage(content="be brief")], system_role="developer")
    assert wire == [{"role": "developer", "content": "be brief"}]


def test_images_become_data_uris() -> None:
    image = Image.from_bytes(PNG_1PX)
    wire = map_messages([UserMessage(content=["what is this?", image, "and this"])])
    assert wire == [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "what is this?"},
                {"type": "image_url", "image_url": {"url": image.data_uri}},
                {"type": "text", "text": "and this"},
            ],
        }
    ]
    assert wire[0]["content"][1]["image_url"]["url"].startswith("data:image/png;base64,iVBORw0KGgo")


def test_tool_calls_and_results() -> None:
    calls = [
        FunctionCall(id="call_1", name="add", arguments='{"a": 1}'),
        FunctionCall(id="call_2", name="mul", arguments='{"b": 2}'),
    ]
    results = FunctionExecutionResultMessage(
        content=[
            FunctionExecutionResult(call_id="call_1", name="add", content="3"),
            FunctionExecutionResult(call_id="call_2", name="mul", content="bad input", is_error=True),
        ]
    )
    wire = map_messages([AssistantMessage(content=calls, thought="thinking"), results])
    assert wire == [
        {
            "role": "assistant",
            "content": "",  # llama-cpp-python's server answers 500 to a missing content key and to null
            "tool_calls": [
                {"id": "call_1", "type": "function", "function": {"name": "add", "arguments": '{"a": 1}'}},
                {"id": "call_2", "type": "function", "function": {"name": "mul", "arguments": '{"b": 2}'}},
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "3"},
        {"role": "tool", "tool_call_id": "call_2", "content": TOOL_ERROR_PREFIX + "bad input"},
    ]
    assert TOOL_ERROR_PREFIX == "Error: "


def test_thought_is_not_sent_back() -> None:
    wire = map_messages([AssistantMessage(content="4", thought="2+2")])
    assert wire == [{"role": "assistant", "content": "4"}]


@pytest.mark.parametrize(
    ("model", "setting", "role"),
    [
        ("gpt-4o", "auto", "system"),
        ("o3", "auto", "developer"),
        ("gpt-5-mini", "auto", "developer"),
        ("o1-mini", "auto", "user"),
        ("deepseek-r1", "auto", "system"),
        ("gpt-4o", "developer", "developer"),
        ("o3", "system", "system"),
    ],
)
def test_system_role_per_model(model: str, setting: Any, role: str) -> None:
    assert system_role_for(OPENAI_MODELS.lookup(model), setting) == role


# --- tools ---------------------------------------------------------------------------------------------


def test_tools() -> None:
    tools: list[ToolSchema] = [
        {
            "name": "add",
            "description": "Add.",
            "parameters": {"type": "object", "properties": {"a": {"type": "integer"}}},
        },
        {"name": "now", "description": "", "parameters": {"type": "object", "properties": {}}},
    ]
    assert map_tools(tools) == [
        {
            "type": "function",
            "function": {
                "name": "add",
                "description": "Add.",
                "parameters": {"type": "object", "properties": {"a": {"type": "integer"}}},
            },
        },
        {"type": "function", "function": {"name": "now", "parameters": {"type": "object", "properties": {}}}},
    ]


def test_strict_tool_gets_a_strict_schema() -> None:
    params = {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "string"}}, "required": ["a"]}
    (tool,) = map_tools([{"name": "f", "description": "d", "parameters": params, "strict": True}])
    assert tool["function"]["strict"] is True
    assert tool["function"]["parameters"] == {
        "type": "object",
        "properties": {"a": {"type": "integer"}, "b": {"type": "string"}},
        "required": ["a", "b"],
        "additionalProperties": False,
    }
    assert params["required"] == ["a"]  # the caller's schema is not modified


@pytest.mark.parametrize(
    ("choice", "wire"),
    [
        ("auto", "auto"),  # sent although it is the API default: some compatible servers need it
        ("none", "none"),
        ("required", "required"),
        ("add", {"type": "function", "function": {"name": "add"}}),
    ],
)
def test_tool_choice(choice: str, wire: Any) -> None:
    assert map_tool_choice(choice) == wire


# --- structured output ---------------------------------------------------------------------------------


def test_strict_schema_of_a_nested_model() -> None:
    rf = map_response_format(Person, GPT4O)
    assert rf is not None
    assert rf["type"] == "json_schema"
    spec = rf["json_schema"]
    assert spec["name"] == "Person" and spec["strict"] is True
    schema = spec["schema"]
    assert schema["additionalProperties"] is False
    assert schema["required"] == ["name", "age", "address", "tags"]
    assert schema["properties"]["address"]["additionalProperties"] is False
    assert schema["properties"]["address"]["required"] == ["street", "city"]
    assert "$ref" not in str(schema)
    assert {"type": "null"} in schema["properties"]["age"]["anyOf"]
    assert "default" not in schema["properties"]["age"]


def test_free_form_map_is_not_strict() -> None:
    _, strict = strict_schema(WithMap.model_json_schema())
    assert strict is False
    rf = map_response_format(WithMap, GPT4O)
    assert rf is not None and rf["json_schema"]["strict"] is False


def test_json_mode_and_fallback_without_structured_output() -> None:
    assert map_response_format(True, GPT4O) == {"type": "json_object"}
    assert map_response_format(False, GPT4O) is None
    no_structured = ModelInfo(structured_output=False)
    assert map_response_format(Person, no_structured) == {"type": "json_object"}


def test_schema_name_is_sanitised() -> None:
    model = type("Bad Name!", (BaseModel,), {"__annotations__": {"x": int}})
    rf = map_response_format(model, GPT4O)
    assert rf is not None and rf["json_schema"]["name"] == "Bad_Name_"


# --- options and requests -----------------------------------------------------------------------------


def test_options() -> None:
    options = ChatOptions(
        temperature=0.2,
        max_tokens=50,
        top_p=0.8,
        frequency_penalty=0.5,
        presence_penalty=-0.5,
        stop_sequences=["END"],
        seed=42,
    )
    assert map_options(options) == {
        "temperature": 0.2,
        "max_tokens": 50,
        "top_p": 0.8,
        "frequency_penalty": 0.5,
        "presence_penalty": -0.5,
        "stop": ["END"],
        "seed": 42,
    }
    assert map_options(options, reasoning=True) == {"max_completion_tokens": 50, "stop": ["END"], "seed": 42}
    assert map_options(ChatOptions()) == {}


def test_extra_args_split_into_kwargs_and_body() -> None:
    kwargs, body = split_extra_args({"logprobs": True, "top_k": 20, "extra_body": {"min_p": 0.1}})
    assert kwargs == {"logprobs": True}
    assert body == {"top_k": 20, "min_p": 0.1}
    for key in ("messages", "model", "stream"):
        with pytest.raises(ConfigurationError, match=key):
            split_extra_args({key: 1})
    with pytest.raises(ConfigurationError, match="extra_body"):
        split_extra_args({"extra_body": [1]})


def _request(**kwargs: Any) -> ChatRequest:
    kwargs.setdefault("messages", [UserMessage(content="hi")])
    kwargs.setdefault("model", "gpt-4o")
    return ChatRequest(**kwargs)


def test_request_plain() -> None:
    assert map_request(_request(), GPT4O) == {"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]}


def test_request_full() -> None:
    tool: ToolSchema = {"name": "add", "description": "", "parameters": {"type": "object", "properties": {}}}
    request = _request(
        messages=[SystemMessage(content="s"), UserMessage(content="hi")],
        tools=[tool],
        tool_choice="add",
        json_output=True,
        options=ChatOptions(temperature=0.1, max_tokens=9),
        extra={"top_k": 3, "logprobs": True},
    )
    settings = WireSettings(
        user="u-1", reasoning_effort="low", parallel_tool_calls=False, extra_body={"repetition_penalty": 1.1}
    )
    assert map_request(request, GPT4O, settings, stream=True) == {
        "model": "gpt-4o",
        "messages": [{"role": "system", "content": "s"}, {"role": "user", "content": "hi"}],
        "temperature": 0.1,
        "max_tokens": 9,
        "tools": [
            {"type": "function", "function": {"name": "add", "parameters": {"type": "object", "properties": {}}}}
        ],
        "tool_choice": {"type": "function", "function": {"name": "add"}},
        "parallel_tool_calls": False,
        "response_format": {"type": "json_object"},
        "user": "u-1",
        "reasoning_effort": "low",
        "stream": True,
        "stream_options": {"include_usage": True},
        "logprobs": True,
        "extra_body": {"repetition_penalty": 1.1, "top_k": 3},
    }


def test_request_for_a_reasoning_model() -> None:
    request = _request(
        model="o3",
        messages=[SystemMessage(content="s"), UserMessage(content="hi")],
        options=ChatOptions(temperature=1.0, max_tokens=100),
    )
    assert map_request(request, O3) == {
        "model": "o3",
        "messages": [{"role": "developer", "content": "s"}, {"role": "user", "content": "hi"}],
        "max_completion_tokens": 100,
    }


def test_stream_without_usage_and_no_tool_settings_without_tools() -> None:
    settings = WireSettings(include_usage=False, parallel_tool_calls=True)
    kwargs = map_request(_request(), GPT4O, settings, stream=True)
    assert kwargs["stream"] is True
    assert "stream_options" not in kwargs
    assert "parallel_tool_calls" not in kwargs


# --- responses ---------------------------------------------------------------------------------------------


def _completion(message: dict[str, Any], finish: str = "stop", usage: dict[str, Any] | None = None) -> ChatCompletion:
    body: dict[str, Any] = {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 1,
        "model": "gpt-4o",
        "choices": [{"index": 0, "message": {"role": "assistant", **message}, "finish_reason": finish}],
    }
    if usage is not None:
        body["usage"] = usage
    return ChatCompletion.model_validate(body)


USAGE = {
    "prompt_tokens": 20,
    "completion_tokens": 8,
    "total_tokens": 28,
    "prompt_tokens_details": {"cached_tokens": 12},
    "completion_tokens_details": {"reasoning_tokens": 5},
}


def test_response_text_and_usage() -> None:
    result = map_response(_completion({"content": "hello"}, usage=USAGE))
    assert result.content == "hello"
    assert result.finish_reason == "stop"
    assert result.usage == RequestUsage(prompt_tokens=20, completion_tokens=8, cached_tokens=12, reasoning_tokens=5)
    assert result.thought is None


def test_response_without_usage_details() -> None:
    usage = {"prompt_tokens": 1, "completion_tokens": 2, "total_tokens": 3}
    assert map_response(_completion({"content": "x"}, usage=usage)).usage == RequestUsage(
        prompt_tokens=1, completion_tokens=2
    )
    assert map_usage(None) == RequestUsage()


def test_response_tool_calls_function_and_custom() -> None:
    message = {
        "content": "let me compute",
        "reasoning_content": "I should add",
        "tool_calls": [
            {"id": "call_a", "type": "function", "function": {"name": "add", "arguments": '{"a":1}'}},
            {"id": "call_b", "type": "custom", "custom": {"name": "grep", "input": "foo.*bar"}},
        ],
    }
    result = map_response(_completion(message, finish="tool_calls"))
    assert result.finish_reason == "function_calls"
    assert result.content == [
        FunctionCall(id="call_a", name="add", arguments='{"a":1}'),
        FunctionCall(id="call_b", name="grep", arguments='{"input": "foo.*bar"}'),
    ]
    assert result.thought == "I should add\nlet me compute"


def test_response_tool_calls_with_stop_finish_reason() -> None:
    message = {"tool_calls": [{"id": "c", "type": "function", "function": {"name": "f", "arguments": "{}"}}]}
    assert map_response(_completion(message, finish="stop")).finish_reason == "function_calls"


@pytest.mark.parametrize(
    ("wire", "neutral"), [("stop", "stop"), ("length", "length"), ("content_filter", "content_filter")]
)
def test_response_finish_reasons(wire: str, neutral: str) -> None:
    assert map_response(_completion({"content": "x"}, finish=wire)).finish_reason == neutral


@pytest.mark.parametrize("field", ["reasoning_content", "reasoning"])
def test_response_reasoning_fields(field: str) -> None:
    result = map_response(_completion({"content": "4", field: "2+2=4"}))
    assert result.thought == "2+2=4"


def test_response_refusal() -> None:
    result = map_response(_completion({"content": None, "refusal": "I can't help with that."}))
    assert result.content == "I can't help with that."
    assert result.finish_reason == "content_filter"


def test_response_without_choices() -> None:
    completion = ChatCompletion.model_validate(
        {"id": "x", "object": "chat.completion", "created": 1, "model": "m", "choices": []}
    )
    with pytest.raises(ExtError, match="no choices"):
        map_response(completion)


# --- streamed chunks ---------------------------------------------------------------------------------------


def _chunk(delta: dict[str, Any] | None, finish: str | None = None, usage: dict[str, Any] | None = None) -> Any:
    body: dict[str, Any] = {
        "id": "c",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "m",
        "choices": [] if delta is None else [{"index": 0, "delta": delta, "finish_reason": finish}],
    }
    if usage is not None:
        body["usage"] = usage
    return ChatCompletionChunk.model_validate(body)


def test_stream_text_reasoning_and_usage() -> None:
    state = StreamState()
    out = [
        map_stream_chunk(c, state)
        for c in [
            _chunk({"role": "assistant", "content": ""}),
            _chunk({"reasoning_content": "think "}),
            _chunk({"reasoning_content": "hard"}),
            _chunk({"content": "Hel"}),
            _chunk({"content": "lo"}),
            _chunk({}, finish="stop"),
            _chunk(None, usage=USAGE),
        ]
    ]
    assert out == [
        None,
        StreamChunk(thought="think "),
        StreamChunk(thought="hard"),
        StreamChunk(content="Hel"),
        StreamChunk(content="lo"),
        None,
        None,
    ]
    result = state.result()
    assert result.content == "Hello"
    assert result.thought == "think hard"
    assert result.finish_reason == "stop"
    assert result.usage.cached_tokens == 12 and result.usage.reasoning_tokens == 5


def test_stream_parallel_tool_call_fragments() -> None:
    state = StreamState()
    chunks = [
        _chunk({"tool_calls": [{"index": 0, "id": "call_a", "type": "function", "function": {"name": "add"}}]}),
        _chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"a":'}}]}),
        _chunk({"tool_calls": [{"index": 1, "id": "call_b", "type": "function", "function": {"name": "mul"}}]}),
        _chunk({"tool_calls": [{"index": 0, "function": {"arguments": "1}"}}]}),
        _chunk({"tool_calls": [{"index": 1, "function": {"arguments": '{"b":2}'}}]}),
        _chunk({}, finish="tool_calls"),
    ]
    assert [map_stream_chunk(c, state) for c in chunks] == [None] * 6
    result = state.result()
    assert result.finish_reason == "function_calls"
    assert result.content == [
        FunctionCall(id="call_a", name="add", arguments='{"a":1}'),
        FunctionCall(id="call_b", name="mul", arguments='{"b":2}'),
    ]
    assert result.usage == RequestUsage()


def test_stream_refusal() -> None:
    state = StreamState()
    for c in [_chunk({"refusal": "No."}), _chunk({}, finish="stop")]:
        map_stream_chunk(c, state)
    result = state.result()
    assert (result.content, result.finish_reason) == ("No.", "content_filter")


def test_every_rule_of_the_openai_table_is_a_valid_model_info() -> None:
    # The rules are written in code (ModelRule.of, unvalidated at import); they are validated here.
    OPENAI_MODELS.validate()
    assert OPENAI_MODELS.lookup("o1-mini-2024").json_output is False
    assert OPENAI_MODELS.lookup("my-vllm-model").structured_output is True
