"""AnthropicChatCompletionClient against the Anthropic-protocol loopback server: what reaches the wire."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import anthropic
import httpx2
import pytest
from pydantic import BaseModel

from ext.core import (
    AssistantMessage,
    ComponentError,
    ConfigurationError,
    CreateResult,
    FunctionCall,
    FunctionExecutionResult,
    FunctionExecutionResultMessage,
    FunctionTool,
    Image,
    LLMMessage,
    ReasoningBlock,
    RetryPolicy,
    StreamChunk,
    SystemMessage,
    ToolSchema,
    UserMessage,
    estimate_tokens,
    load_component,
    tool_schema_of,
)
from ext.models.anthropic import JSON_MODE_INSTRUCTION, AnthropicChatCompletionClient
from ext.testing.conformance import assert_dump_round_trip
from ext.testing.script import Fault, Reply, ToolCallSpec
from ext.testing.servers import Response, json_response
from ext.testing.servers.anthropic import AnthropicServer

KEY = "sk-ant-test-key-0001"
MODEL = "claude-sonnet-5-5"
HELLO: list[LLMMessage] = [UserMessage(content="Hi")]
PNG_1PX = bytes.fromhex(
    "89504e470d0a1a0a0000000d49484452000000010000000108060000001f15c4890000000d49444154789c63f8cfc0f01f0005000201"
    "8f2b3f5a0000000049454e44ae426082"
)


def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


ADD = FunctionTool(add)


@pytest.fixture
async def server() -> AsyncIterator[AnthropicServer]:
    async with AnthropicServer(api_key=KEY) as srv:
        yield srv


def make(server: AnthropicServer, **kwargs: Any) -> AnthropicChatCompletionClient:
    kwargs.setdefault("max_tokens", 4096)
    kwargs.setdefault("max_retries", 0)
    return AnthropicChatCompletionClient(MODEL, base_url=server.base_url, api_key=KEY, **kwargs)


@pytest.fixture
async def client(server: AnthropicServer) -> AsyncIterator[AnthropicChatCompletionClient]:
    c = make(server)
    try:
        yield c
    finally:
        await c.close()


def body(server: AnthropicServer, index: int = -1) -> dict[str, Any]:
    raw = server.requests[index].json
    assert isinstance(raw, dict)
    return raw


# --- construction ---------------------------------------------------------------------------------


def test_missing_key_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    with pytest.raises(ConfigurationError, match=r"api_key.*ANTHROPIC_API_KEY"):
        AnthropicChatCompletionClient(MODEL, max_tokens=100)


def test_key_from_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    client = AnthropicChatCompletionClient(MODEL, max_tokens=100)
    assert KEY not in repr(client)
    assert client.max_tokens == 100


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"max_tokens": 0}, "max_tokens"),
        ({"temperature": 1.5}, "temperature"),
        ({"temperature": -0.1}, "temperature"),
        ({"top_p": 1.1}, "top_p"),
        ({"top_k": 0}, "top_k"),
        ({"timeout": 0}, "timeout"),
        ({"max_retries": -1}, "max_retries"),
        ({"base_url": "ftp://x"}, "base_url"),
        ({"system_policy": "keep"}, "system_policy"),
        ({"stop_sequences": [""]}, "stop_sequences"),
        ({"thinking": {"type": "sometimes"}}, "thinking.type"),
        ({"thinking": {"type": "enabled"}}, "budget_tokens is required"),
        ({"thinking": {"type": "enabled", "budget_tokens": 100}}, "budget_tokens must be >= 1024"),
        ({"max_tokens": 2000, "thinking": {"type": "enabled", "budget_tokens": 2000}}, "less than max_tokens"),
        ({"thinking": {"type": "adaptive", "budget_tokens": 2000}}, "unexpected keys"),
        ({"thinking": {"type": "adaptive", "display": "full"}}, "display"),
        ({"thinking": {"type": "adaptive"}, "temperature": 0.5}, "temperature must be 1"),
        ({"thinking": {"type": "adaptive"}, "top_k": 5}, "top_k"),
        ({"thinking": {"type": "adaptive"}, "top_p": 0.5}, "top_p"),
        ({"extra_body": {"messages": []}}, "must not set"),
        ({"default_options": {"temperature": 9}}, "default_options.temperature"),
        ({"model_info": "vision"}, "model_info"),
    ],
)
def test_bad_configuration_fails_at_construction(kwargs: dict[str, Any], match: str) -> None:
    kwargs.setdefault("max_tokens", 4096)
    with pytest.raises(ConfigurationError, match=match):
        AnthropicChatCompletionClient(MODEL, api_key=KEY, **kwargs)


def test_valid_thinking_configs() -> None:
    for thinking in (
        {"type": "enabled", "budget_tokens": 1024},
        {"type": "adaptive", "display": "omitted"},
        {"type": "between_tools"},
        {"type": "disabled"},
    ):
        client = AnthropicChatCompletionClient(MODEL, max_tokens=2048, api_key=KEY, thinking=thinking, temperature=1)
        assert client.dump_component().config["thinking"] == thinking


async def test_dump_and_load_without_the_key(server: AnthropicServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MY_ANTHROPIC_KEY", KEY)
    monkeypatch.setenv("SECRET_HEADER", "hidden-value")
    client = AnthropicChatCompletionClient(
        MODEL,
        max_tokens=321,
        api_key_env="MY_ANTHROPIC_KEY",
        base_url=server.base_url,
        temperature=0.2,
        default_headers_env={"x-secret-header": "SECRET_HEADER"},
        thinking={"type": "disabled"},
        max_retries=0,
    )
    assert_dump_round_trip(client)
    dump = client.dump_component()
    text = dump.model_dump_json()
    assert KEY not in text and "hidden-value" not in text
    assert dump.provider == "ext.models.anthropic.AnthropicChatCompletionClient"
    assert dump.config["api_key_env"] == "MY_ANTHROPIC_KEY"
    assert dump.config["max_tokens"] == 321
    loaded = load_component(json.loads(text), AnthropicChatCompletionClient)
    assert isinstance(loaded, AnthropicChatCompletionClient)
    server.enqueue(Reply(text="from a loaded client"))
    result = await loaded.create(HELLO)
    assert result.content == "from a loaded client"
    assert body(server)["max_tokens"] == 321 and body(server)["temperature"] == 0.2
    assert server.requests[-1].headers["x-secret-header"] == "hidden-value"
    await loaded.close()
    await client.close()


async def test_settings_a_dump_cannot_hold_refuse_to_dump(server: AnthropicServer) -> None:
    """Header values given in code, an HTTP client, a retry policy: refused with the reason, never dropped."""
    client = make(server, default_headers={"x-secret-header": "hidden-value"})
    with pytest.raises(ComponentError, match=r"default_headers\['x-secret-header'\].*default_headers_env") as info:
        client.dump_component()
    assert "hidden-value" not in str(info.value)
    async with httpx2.AsyncClient() as http:
        with pytest.raises(ComponentError, match="http_client"):
            make(server, http_client=http).dump_component()
    with pytest.raises(ComponentError, match="retry_policy"):
        make(server, retry_policy=RetryPolicy(max_retries=1)).dump_component()
    await client.close()


def test_explicit_key_is_dropped_from_dump() -> None:
    client = AnthropicChatCompletionClient(MODEL, max_tokens=10, api_key=KEY)
    dump = client.dump_component()
    assert "api_key" not in dump.config
    assert KEY not in dump.model_dump_json()


# --- sampling and options on the wire -------------------------------------------------------------


async def test_sampling_goes_in_the_body(server: AnthropicServer) -> None:
    client = make(server, temperature=0.3, top_p=0.9, top_k=40, stop_sequences=["STOP"])
    server.enqueue(Reply(text="a"), Reply(text="b"))
    await client.create(HELLO)
    sent = body(server)
    assert (sent["temperature"], sent["top_p"], sent["top_k"], sent["stop_sequences"]) == (0.3, 0.9, 40, ["STOP"])
    assert sent["model"] == MODEL and sent["max_tokens"] == 4096
    await client.create(HELLO, options={"temperature": 1.0, "top_k": 3, "max_tokens": 50})
    sent = body(server)
    assert (sent["temperature"], sent["top_p"], sent["top_k"], sent["max_tokens"]) == (1.0, 0.9, 3, 50)
    await client.close()


async def test_unset_sampling_is_not_sent(server: AnthropicServer, client: AnthropicChatCompletionClient) -> None:
    server.enqueue(Reply(text="a"))
    await client.create(HELLO)
    assert not {"temperature", "top_p", "top_k", "stop_sequences", "thinking"} & set(body(server))
    assert server.requests[0].headers["anthropic-version"]


async def test_extra_create_args_reach_the_body(server: AnthropicServer, client: AnthropicChatCompletionClient) -> None:
    server.enqueue(Reply(text="a"))
    await client.create(HELLO, extra_create_args={"metadata": {"user_id": "u-1"}})
    assert body(server)["metadata"] == {"user_id": "u-1"}
    with pytest.raises(ConfigurationError, match="must not set"):
        await client.create(HELLO, extra_create_args={"model": "other"})
    assert len(server.requests) == 1


# --- messages ---------------------------------------------------------------------------------------


async def test_system_messages_policy(server: AnthropicServer) -> None:
    messages: list[LLMMessage] = [
        SystemMessage(content="RULE-ONE"),
        SystemMessage(content="RULE-ONE-B"),
        UserMessage(content="first"),
        AssistantMessage(content="reply"),
        SystemMessage(content="RULE-TWO"),
        UserMessage(content="second"),
    ]
    client = make(server)
    server.enqueue(Reply(text="ok"), Reply(text="ok"))
    await client.create(messages)
    sent = body(server)
    assert sent["system"] == [{"type": "text", "text": "RULE-ONE\n\nRULE-ONE-B"}]
    assert sent["messages"][-1] == {
        "role": "user",
        "content": [{"type": "text", "text": "RULE-TWO"}, {"type": "text", "text": "second"}],
    }
    hoisting = make(server, system_policy="hoist")
    await hoisting.create(messages)
    sent = body(server)
    assert sent["system"] == [{"type": "text", "text": "RULE-ONE\n\nRULE-ONE-B\n\nRULE-TWO"}]
    assert sent["messages"][-1] == {"role": "user", "content": [{"type": "text", "text": "second"}]}
    await client.close()
    await hoisting.close()


async def test_only_a_system_message_is_an_error(
    server: AnthropicServer, client: AnthropicChatCompletionClient
) -> None:
    with pytest.raises(ConfigurationError, match="nothing to send"):
        await client.create([SystemMessage(content="x"), UserMessage(content="  ")])
    assert server.requests == []


async def test_merging_whitespace_and_empty_content(
    server: AnthropicServer, client: AnthropicChatCompletionClient
) -> None:
    server.enqueue(Reply(text="ok"))
    messages: list[LLMMessage] = [
        UserMessage(content="one"),
        UserMessage(content=["two", "", "   "]),
        AssistantMessage(content=""),
        AssistantMessage(content="middle turn  "),
        UserMessage(content=""),
        UserMessage(content="three"),
        AssistantMessage(content="Prefill ends with spaces   \n"),
    ]
    await client.create(messages)
    assert body(server)["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "one"}, {"type": "text", "text": "two"}]},
        {"role": "assistant", "content": [{"type": "text", "text": "middle turn  "}]},
        {"role": "user", "content": [{"type": "text", "text": "three"}]},
        {"role": "assistant", "content": [{"type": "text", "text": "Prefill ends with spaces"}]},
    ]


async def test_whitespace_only_final_assistant_is_dropped(
    server: AnthropicServer, client: AnthropicChatCompletionClient
) -> None:
    server.enqueue(Reply(text="ok"))
    await client.create([UserMessage(content="q"), AssistantMessage(content=" \n ")])
    assert body(server)["messages"] == [{"role": "user", "content": [{"type": "text", "text": "q"}]}]


async def test_tool_results_open_the_user_turn(server: AnthropicServer, client: AnthropicChatCompletionClient) -> None:
    server.enqueue(Reply(text="done"))
    messages: list[LLMMessage] = [
        UserMessage(content="add things"),
        AssistantMessage(
            content=[
                FunctionCall(id="toolu_a", name="add", arguments='{"a": 1, "b": 2}'),
                FunctionCall(id="toolu_b", name="add", arguments=""),
            ]
        ),
        SystemMessage(content="Mind the errors."),
        FunctionExecutionResultMessage(
            content=[
                FunctionExecutionResult(call_id="toolu_a", name="add", content="3"),
                FunctionExecutionResult(call_id="toolu_b", name="add", content="", is_error=True),
            ]
        ),
        UserMessage(content="and now?"),
    ]
    result = await client.create(messages, tools=[ADD])
    assert result.content == "done"
    sent = body(server)["messages"]
    assert sent[1] == {
        "role": "assistant",
        "content": [
            {"type": "tool_use", "id": "toolu_a", "name": "add", "input": {"a": 1, "b": 2}},
            {"type": "tool_use", "id": "toolu_b", "name": "add", "input": {}},
        ],
    }
    assert sent[2] == {
        "role": "user",
        "content": [
            {"type": "tool_result", "tool_use_id": "toolu_a", "content": "3"},
            {"type": "tool_result", "tool_use_id": "toolu_b", "is_error": True},
            {"type": "text", "text": "Mind the errors."},
            {"type": "text", "text": "and now?"},
        ],
    }


async def test_malformed_arguments_in_history_name_the_field(
    server: AnthropicServer, client: AnthropicChatCompletionClient
) -> None:
    messages: list[LLMMessage] = [
        UserMessage(content="x"),
        AssistantMessage(content=[FunctionCall(id="t", name="add", arguments="{not json")]),
        FunctionExecutionResultMessage(content=[FunctionExecutionResult(call_id="t", name="add", content="?")]),
    ]
    with pytest.raises(ConfigurationError, match=r"messages\[1\]\.content\[0\]\.arguments"):
        await client.create(messages, tools=[ADD])
    assert server.requests == []


async def test_images(server: AnthropicServer, client: AnthropicChatCompletionClient) -> None:
    server.enqueue(Reply(text="a dot"))
    await client.create([UserMessage(content=["what?", Image.from_bytes(PNG_1PX)])])
    image = body(server)["messages"][0]["content"][1]
    assert image["type"] == "image" and image["source"]["media_type"] == "image/png"
    bmp = Image(data=b"BM....", mime_type="image/bmp")
    with pytest.raises(ConfigurationError, match=r"messages\[0\]\.content\[1\].*image/bmp"):
        await client.create([UserMessage(content=["what?", bmp])])
    assert len(server.requests) == 1


# --- tools --------------------------------------------------------------------------------------------


async def test_tools_and_choices_on_the_wire(server: AnthropicServer, client: AnthropicChatCompletionClient) -> None:
    server.enqueue(Reply(text="a"), Reply(text="b"), Reply(text="c"))
    strict: ToolSchema = {**tool_schema_of(ADD), "strict": True}
    await client.create(HELLO, tools=[strict], tool_choice="required")
    sent = body(server)
    assert sent["tools"] == [
        {
            "name": "add",
            "input_schema": strict["parameters"],
            "description": "Add two integers.",
            "strict": True,
        }
    ]
    assert sent["tool_choice"] == {"type": "any"}
    await client.create(HELLO, tools=[ADD], tool_choice="add")
    assert body(server)["tool_choice"] == {"type": "tool", "name": "add"}
    await client.create(HELLO, tools=[ADD], tool_choice="none")
    assert body(server)["tool_choice"] == {"type": "none"}


async def test_text_before_tool_calls_goes_to_thought(
    server: AnthropicServer, client: AnthropicChatCompletionClient
) -> None:
    server.enqueue(Reply(text="Let me add.", tool_calls=[ToolCallSpec("add", {"a": 1, "b": 2})]))
    result = await client.create(HELLO, tools=[ADD])
    assert isinstance(result.content, list) and result.content[0].name == "add"
    assert result.thought == "Let me add."


# --- thinking -------------------------------------------------------------------------------------


async def _tool_loop(client: AnthropicChatCompletionClient, server: AnthropicServer, stream: bool) -> CreateResult:
    server.enqueue(
        Reply(
            thought="I need the add tool.",
            thought_signature="sig-turn-1==",
            tool_calls=[ToolCallSpec("add", {"a": 2, "b": 3}, id="toolu_1")],
        ),
        Reply(text="5", thought="Now answer.", thought_signature="sig-turn-2=="),
    )
    if stream:
        items = [item async for item in client.create_stream(HELLO, tools=[ADD])]
        thoughts = "".join(i.thought for i in items if isinstance(i, StreamChunk))
        assert thoughts == "I need the add tool."
        first = items[-1]
        assert isinstance(first, CreateResult)
    else:
        first = await client.create(HELLO, tools=[ADD])
    assert first.reasoning == [
        ReasoningBlock(text="I need the add tool.", signature="sig-turn-1==", provider="anthropic")
    ]
    assert first.thought == "I need the add tool."
    assert isinstance(first.content, list)
    history: list[LLMMessage] = [
        *HELLO,
        first.to_assistant_message(),
        FunctionExecutionResultMessage(
            content=[FunctionExecutionResult(call_id=first.content[0].id, name="add", content="5")]
        ),
    ]
    second = await client.create(history, tools=[ADD])
    assert second.content == "5"
    assert second.reasoning[0].signature == "sig-turn-2=="
    return second


@pytest.mark.parametrize("stream", [False, True])
async def test_thinking_round_trips_unchanged(server: AnthropicServer, stream: bool) -> None:
    client = make(server, thinking={"type": "enabled", "budget_tokens": 2048})
    await _tool_loop(client, server, stream)
    first, second = body(server, 0), body(server, 1)
    assert first["thinking"] == {"type": "enabled", "budget_tokens": 2048}
    assert second["messages"][1] == {
        "role": "assistant",
        "content": [
            {"type": "thinking", "thinking": "I need the add tool.", "signature": "sig-turn-1=="},
            {"type": "tool_use", "id": "toolu_1", "name": "add", "input": {"a": 2, "b": 3}},
        ],
    }
    assert second["messages"][2]["content"] == [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "5"}]
    await client.close()


async def test_thinking_off_leaves_reasoning_out(
    server: AnthropicServer, client: AnthropicChatCompletionClient
) -> None:
    await _tool_loop(client, server, stream=False)
    assert [b["type"] for b in body(server)["messages"][1]["content"]] == ["tool_use"]


async def test_redacted_and_foreign_reasoning(server: AnthropicServer) -> None:
    client = make(server, thinking={"type": "adaptive"})
    server.enqueue(Reply(text="ok"))
    history: list[LLMMessage] = [
        UserMessage(content="q"),
        AssistantMessage(
            content="a",
            reasoning=[
                ReasoningBlock(redacted_data="ENCRYPTED", provider="anthropic"),
                ReasoningBlock(text="unsigned", provider="anthropic"),
                ReasoningBlock(text="other", signature="x", provider="openai"),
                ReasoningBlock(text="legacy", signature="sig-legacy"),
            ],
        ),
        UserMessage(content="q2"),
    ]
    await client.create(history)
    assert body(server)["messages"][1]["content"] == [
        {"type": "redacted_thinking", "data": "ENCRYPTED"},
        {"type": "thinking", "thinking": "legacy", "signature": "sig-legacy"},
        {"type": "text", "text": "a"},
    ]
    await client.close()


async def test_redacted_thinking_in_a_response(server: AnthropicServer, client: AnthropicChatCompletionClient) -> None:
    message = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": MODEL,
        "content": [{"type": "redacted_thinking", "data": "SECRET-BLOB"}, {"type": "text", "text": "hi"}],
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": 3, "output_tokens": 2},
    }
    server.enqueue(json_response(message))
    result = await client.create(HELLO)
    assert result.content == "hi" and result.thought is None
    assert result.reasoning == [ReasoningBlock(redacted_data="SECRET-BLOB", provider="anthropic")]


async def test_thinking_rules_per_call(server: AnthropicServer) -> None:
    client = make(server, max_tokens=3000, thinking={"type": "enabled", "budget_tokens": 2048})
    for kwargs, match in (
        ({"options": {"temperature": 0.5}}, "temperature must be 1"),
        ({"options": {"top_k": 4}}, "top_k"),
        ({"options": {"max_tokens": 2000}}, "greater than thinking.budget_tokens"),
        ({"tools": [ADD], "tool_choice": "required"}, "forces a tool call"),
        ({"extra_create_args": {"thinking": {"type": "enabled", "budget_tokens": 5000}}}, "less than max_tokens"),
    ):
        with pytest.raises(ConfigurationError, match=match):
            await client.create(HELLO, **kwargs)
    assert server.requests == []
    server.enqueue(Reply(text="fine"))
    await client.create(
        HELLO, tools=[ADD], tool_choice="required", extra_create_args={"thinking": {"type": "disabled"}}
    )
    assert body(server)["thinking"] == {"type": "disabled"}
    await client.close()


# --- JSON and structured output -------------------------------------------------------------------------


class City(BaseModel):
    name: str
    population: int


async def test_structured_output_uses_output_config(
    server: AnthropicServer, client: AnthropicChatCompletionClient
) -> None:
    server.enqueue(Reply(text='{"name": "Oslo", "population": 709000}'))
    result = await client.create(HELLO, json_output=City)
    assert result.parsed == City(name="Oslo", population=709000)
    fmt = body(server)["output_config"]["format"]
    assert fmt["type"] == "json_schema"
    assert fmt["schema"]["additionalProperties"] is False
    assert set(fmt["schema"]["properties"]) == {"name", "population"}
    assert "system" not in body(server)


async def test_structured_output_without_model_support_asks_in_the_prompt(server: AnthropicServer) -> None:
    client = make(server, model_info={"structured_output": False})
    server.enqueue(Reply(text='{"name": "Oslo", "population": 1}'))
    result = await client.create([SystemMessage(content="Be exact."), *HELLO], json_output=City)
    assert result.parsed == City(name="Oslo", population=1)
    sent = body(server)
    assert "output_config" not in sent
    assert sent["system"][0] == {"type": "text", "text": "Be exact."}
    assert '"population"' in sent["system"][1]["text"] and "JSON Schema" in sent["system"][1]["text"]
    await client.close()


async def test_json_mode_asks_in_the_system_prompt(
    server: AnthropicServer, client: AnthropicChatCompletionClient
) -> None:
    server.enqueue(Reply(text='```json\n{"a": 1}\n```'))
    result = await client.create([SystemMessage(content="Be exact."), *HELLO], json_output=True)
    assert result.parsed == {"a": 1}
    assert body(server)["system"] == [
        {"type": "text", "text": "Be exact."},
        {"type": "text", "text": JSON_MODE_INSTRUCTION},
    ]
    assert server.decode(server.requests[0]).json_mode is True


# --- usage, streaming, errors -------------------------------------------------------------------------


async def test_cached_and_thinking_tokens(server: AnthropicServer, client: AnthropicChatCompletionClient) -> None:
    reply = Reply(text="x y", prompt_tokens=100, cached_tokens=60, completion_tokens=9, reasoning_tokens=4)
    server.enqueue(reply, reply)
    result = await client.create(HELLO)
    assert (result.usage.prompt_tokens, result.usage.cached_tokens) == (100, 60)
    assert (result.usage.completion_tokens, result.usage.reasoning_tokens) == (9, 4)
    items = [item async for item in client.create_stream(HELLO)]
    last = items[-1]
    assert isinstance(last, CreateResult)
    assert last.usage == result.usage


async def test_error_event_mid_stream_raises_the_sdk_error(
    server: AnthropicServer, client: AnthropicChatCompletionClient
) -> None:
    server.enqueue(server.stream_error("overloaded_error", "Overloaded", text="partial answer"))
    seen: list[str] = []
    with pytest.raises(anthropic.APIStatusError) as info:
        async for item in client.create_stream(HELLO):
            if isinstance(item, StreamChunk):
                seen.append(item.content)
    assert info.value.type == "overloaded_error"
    assert "".join(seen) == "partial answer"


async def test_error_event_before_any_text_is_retried(server: AnthropicServer) -> None:
    client = make(server, retry_policy=RetryPolicy(max_retries=1, multiplier=0.0))
    server.enqueue(server.stream_error("overloaded_error", "Overloaded"), Reply(text="second try"))
    items = [item async for item in client.create_stream(HELLO)]
    assert isinstance(items[-1], CreateResult) and items[-1].content == "second try"
    assert len(server.requests) == 2
    await client.close()


async def test_stream_that_breaks_off_is_a_connection_error(
    server: AnthropicServer, client: AnthropicChatCompletionClient
) -> None:
    server.enqueue(Fault("drop_mid_body"))
    with pytest.raises(anthropic.APIConnectionError, match="broke off"):
        async for _ in client.create_stream(HELLO):
            pass


async def test_overloaded_is_retried(server: AnthropicServer) -> None:
    client = make(server, max_retries=1)
    server.enqueue(Fault("overloaded", retry_after=0.01), Reply(text="ok"))
    assert (await client.create(HELLO)).content == "ok"
    assert len(server.requests) == 2
    await client.close()


async def test_should_retry_false_is_honoured(server: AnthropicServer) -> None:
    client = make(server, max_retries=2)
    error = {"type": "error", "error": {"type": "api_error", "message": "do not retry"}}
    server.enqueue(Response(status=500, body=json.dumps(error).encode(), headers={"x-should-retry": "false"}))
    with pytest.raises(anthropic.InternalServerError):
        await client.create(HELLO)
    assert len(server.requests) == 1
    await client.close()


# --- tokens ---------------------------------------------------------------------------------------------


async def test_count_tokens_async_uses_the_endpoint(
    server: AnthropicServer, client: AnthropicChatCompletionClient
) -> None:
    messages: list[LLMMessage] = [SystemMessage(content="sys"), UserMessage(content="count me")]
    counted = await client.count_tokens_async(messages, tools=[ADD])
    request = server.requests[0]
    assert request.path == "/v1/messages/count_tokens"
    sent = body(server)
    assert counted == AnthropicServer.estimate_count(sent)
    assert sent["system"] == [{"type": "text", "text": "sys"}]
    assert [t["name"] for t in sent["tools"]] == ["add"]
    assert "max_tokens" not in sent
    server.enqueue_count(4321)
    assert await client.count_tokens_async(messages) == 4321


async def test_count_tokens_async_falls_back_to_the_estimate(
    server: AnthropicServer, client: AnthropicChatCompletionClient, caplog: pytest.LogCaptureFixture
) -> None:
    server.enqueue_count(Fault("not_found"))
    messages: list[LLMMessage] = [UserMessage(content="count me " * 20)]
    counted = await client.count_tokens_async(messages, tools=[ADD])
    assert counted == estimate_tokens(messages, [tool_schema_of(ADD)]) == client.count_tokens(messages, tools=[ADD])
    assert "count_tokens endpoint failed" in caplog.text
    with pytest.raises(ConfigurationError):
        await client.count_tokens_async([])
