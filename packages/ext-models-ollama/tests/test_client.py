"""OllamaChatCompletionClient against the Ollama-protocol loopback server: what reaches the wire and what comes back."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator
from typing import Any, Literal

import httpx
import ollama
import pytest
from pydantic import BaseModel

from ext.core import (
    AssistantMessage,
    BaseChatCompletionClient,
    ComponentError,
    ConfigurationError,
    CreateResult,
    FunctionCall,
    FunctionExecutionResult,
    FunctionExecutionResultMessage,
    Image,
    LLMMessage,
    RetryPolicy,
    StreamChunk,
    SystemMessage,
    ToolSchema,
    UnsupportedOptionError,
    UserMessage,
    load_component,
    parse_tool_arguments,
    registered_components,
)
from ext.models.ollama import (
    DEFAULT_HOST,
    OllamaChatCompletionClient,
    OllamaConnectionError,
    OllamaModelNotFoundError,
    OllamaResponseError,
    parse_host,
)
from ext.testing.sample_inputs import ADD, MULTIPLY, PNG_1PX
from ext.testing.script import Fault, Reply, ToolCallSpec
from ext.testing.servers import Response, StreamResponse, ndjson_frame
from ext.testing.servers.ollama import OllamaServer

MODEL = "llama3.2"
HELLO: list[LLMMessage] = [UserMessage(content="Hi")]
# A schema the ollama SDK's Tool model would flatten: nested objects, arrays of objects, enums, required.
BOOKING_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "guest": {
            "type": "object",
            "properties": {
                "name": {"type": "string"},
                "address": {
                    "type": "object",
                    "properties": {"city": {"type": "string"}, "zip": {"type": "string"}},
                    "required": ["city"],
                },
            },
            "required": ["name"],
        },
        "rooms": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {"kind": {"type": "string", "enum": ["single", "double"]}, "nights": {"type": "integer"}},
                "required": ["kind", "nights"],
            },
        },
        "payment": {"type": "string", "enum": ["card", "cash"]},
    },
    "required": ["guest", "rooms"],
    "additionalProperties": False,
}
BOOKING_TOOL: ToolSchema = {"name": "book", "description": "Book rooms.", "parameters": BOOKING_SCHEMA}


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("OLLAMA_HOST", "OLLAMA_API_KEY"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
async def server() -> AsyncIterator[OllamaServer]:
    async with OllamaServer(models=[MODEL, "qwen3:8b", "llava"]) as srv:
        yield srv


def make(server: OllamaServer, **kwargs: Any) -> OllamaChatCompletionClient:
    kwargs.setdefault("max_retries", 0)
    return OllamaChatCompletionClient(kwargs.pop("model", MODEL), host=server.base_url, **kwargs)


@pytest.fixture
async def client(server: OllamaServer) -> AsyncIterator[OllamaChatCompletionClient]:
    c = make(server)
    try:
        yield c
    finally:
        await c.close()


def body(server: OllamaServer, index: int = -1) -> dict[str, Any]:
    raw = server.requests[index].json
    assert isinstance(raw, dict)
    return raw


async def collect(client: BaseChatCompletionClient, *args: Any, **kwargs: Any) -> list[StreamChunk | CreateResult]:
    return [item async for item in client.create_stream(*args, **kwargs)]


# --- host ---------------------------------------------------------------------------------------------------


def test_default_host_is_localhost_11434() -> None:
    client = OllamaChatCompletionClient(MODEL)
    assert client.host == DEFAULT_HOST == "http://localhost:11434"
    assert str(client.http_client.base_url) == "http://localhost:11434"


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ("1.2.3.4", "http://1.2.3.4:11434"),
        ("1.2.3.4:56789", "http://1.2.3.4:56789"),
        ("http://1.2.3.4", "http://1.2.3.4:80"),
        ("https://example.com", "https://example.com:443"),
        ("https://example.com:56789/path/", "https://example.com:56789/path"),
        ("example.com/path", "http://example.com:11434/path"),
        ("[0001:002:003:0004::1]:56789", "http://[0001:002:003:0004::1]:56789"),
        (":56789", "http://localhost:56789"),
        ("", DEFAULT_HOST),
    ],
)
def test_host_forms_are_read_like_the_sdk(given: str, expected: str) -> None:
    assert parse_host(given) == expected


async def test_ollama_host_is_honoured_like_the_sdk(server: OllamaServer, monkeypatch: pytest.MonkeyPatch) -> None:
    # The same OLLAMA_HOST value (no scheme, as people set it) takes the raw SDK and ext to the same server.
    monkeypatch.setenv("OLLAMA_HOST", f"127.0.0.1:{server.port}")
    server.enqueue(Reply(text="raw"), Reply(text="ext"))
    async with ollama.AsyncClient() as raw:
        assert (await raw.chat(model=MODEL, messages=[{"role": "user", "content": "Hi"}])).message.content == "raw"
    async with OllamaChatCompletionClient(MODEL, max_retries=0) as client:
        assert client.host == f"http://127.0.0.1:{server.port}"
        assert (await client.create(HELLO)).content == "ext"
    assert [r.path for r in server.requests] == ["/api/chat", "/api/chat"]
    # The host argument wins over the variable.
    monkeypatch.setenv("OLLAMA_HOST", "192.0.2.1:1")
    assert OllamaChatCompletionClient(MODEL, host=server.base_url).host == server.base_url


# --- the SPEC fields and Ollama's own -----------------------------------------------------------------------


async def test_every_field_reaches_the_wire(server: OllamaServer) -> None:
    client = make(
        server,
        temperature=0.3,
        top_p=0.8,
        top_k=20,
        num_ctx=8192,
        num_predict=256,
        repeat_penalty=1.1,
        seed=42,
        options={"mirostat": 2, "num_gpu": 1},
        think=True,
        keep_alive="10m",
    )
    async with client:
        server.enqueue(Reply(text="ok"))
        await client.create(HELLO)
    sent = body(server)
    assert sent["model"] == MODEL and sent["stream"] is False
    assert sent["think"] is True and sent["keep_alive"] == "10m"
    assert sent["options"] == {
        "mirostat": 2,
        "num_gpu": 1,
        "num_ctx": 8192,
        "num_predict": 256,
        "repeat_penalty": 1.1,
        "temperature": 0.3,
        "top_p": 0.8,
        "top_k": 20,
        "seed": 42,
    }
    assert client.capabilities.context_window == 8192  # num_ctx is what Ollama keeps


async def test_defaults_send_nothing_optional(server: OllamaServer, client: OllamaChatCompletionClient) -> None:
    server.enqueue(Reply(text="ok"))
    await client.create(HELLO)
    assert body(server) == {"model": MODEL, "messages": [{"role": "user", "content": "Hi"}], "stream": False}


async def test_chat_options_map_onto_ollama_options(server: OllamaServer) -> None:
    async with make(server, num_predict=10, temperature=0.1) as client:
        server.enqueue(Reply(text="ok"))
        await client.create(
            HELLO,
            options={
                "temperature": 1.7,
                "max_tokens": 99,
                "top_p": 0.5,
                "top_k": 7,
                "stop_sequences": ["END", "STOP"],
                "seed": 5,
                "frequency_penalty": 0.4,
                "presence_penalty": -0.2,
            },
        )
    assert body(server)["options"] == {
        "num_predict": 99,  # max_tokens wins over the client's num_predict
        "temperature": 1.7,
        "top_p": 0.5,
        "top_k": 7,
        "stop": ["END", "STOP"],
        "seed": 5,
        "frequency_penalty": 0.4,
        "presence_penalty": -0.2,
    }


async def test_extra_create_args(server: OllamaServer, client: OllamaChatCompletionClient) -> None:
    server.enqueue(Reply(text="ok"))
    await client.create(HELLO, extra_create_args={"options": {"num_ctx": 2048}, "keep_alive": 0, "logprobs": True})
    sent = body(server)
    assert sent["options"] == {"num_ctx": 2048} and sent["keep_alive"] == 0 and sent["logprobs"] is True
    with pytest.raises(ConfigurationError, match=r"unknown Ollama option\(s\) \['num_cxt'\]"):
        await client.create(HELLO, extra_create_args={"options": {"num_cxt": 1}})
    with pytest.raises(ConfigurationError, match=r"\['messages'\] are set by the client"):
        await client.create(HELLO, extra_create_args={"messages": []})
    assert len(server.requests) == 1


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"options": {"num_cxt": 1}}, r"options: unknown Ollama option\(s\) \['num_cxt'\]"),
        ({"options": {"temperature": 1}}, r"options: set \['temperature'\] with the client's own fields"),
        ({"think": "extreme"}, "think"),
        ({"temperature": 3.0}, "temperature"),
        ({"num_ctx": 0}, "num_ctx"),
        ({"timeout": 0}, "timeout"),
        ({"host": "local host"}, "host"),
        ({"headers": {"Bad Name": "x"}}, "valid HTTP header name"),
        ({"headers": {"X-Token": "a\r\nInjected: 1"}}, "line break"),
        ({"headers_env": {"X-Token": "not a variable"}}, "environment variable name"),
    ],
)
def test_bad_configuration_names_the_field(kwargs: dict[str, Any], match: str) -> None:
    with pytest.raises(ConfigurationError, match=match):
        OllamaChatCompletionClient(MODEL, **kwargs)


async def test_forced_tool_choice_is_refused_before_any_request(
    server: OllamaServer, client: OllamaChatCompletionClient
) -> None:
    for choice in ("required", "add"):
        with pytest.raises(UnsupportedOptionError, match="Ollama has no way to force a tool call"):
            await client.create(HELLO, tools=[ADD], tool_choice=choice)
    assert server.requests == []


# --- headers ------------------------------------------------------------------------------------------------


async def test_headers_reach_the_wire(server: OllamaServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PROXY_TOKEN", "Bearer from-env-123")
    client = make(server, headers={"X-Team": "blue"}, headers_env={"Authorization": "PROXY_TOKEN"})
    async with client:
        server.enqueue(Reply(text="ok"))
        items = [i async for i in client.create_stream(HELLO)]
        server.enqueue(Reply(text="ok"))
        await client.create(HELLO)
    assert isinstance(items[-1], CreateResult)
    for request in server.requests:
        assert request.headers["x-team"] == "blue"
        assert request.headers["authorization"] == "Bearer from-env-123"
        assert request.headers["content-type"] == "application/json"
        assert request.headers["user-agent"].startswith("ext-models-ollama/")


async def test_ollama_api_key_is_sent_like_the_sdk(server: OllamaServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OLLAMA_API_KEY", "key-abc")
    async with make(server) as client:
        server.enqueue(Reply(text="ok"))
        await client.create(HELLO)
    assert server.requests[-1].headers["authorization"] == "Bearer key-abc"
    # An explicit Authorization header wins, as in the SDK.
    async with make(server, headers={"Authorization": "Basic xyz"}) as client:
        server.enqueue(Reply(text="ok"))
        await client.create(HELLO)
    assert server.requests[-1].headers["authorization"] == "Basic xyz"


def test_headers_env_must_be_set() -> None:
    with pytest.raises(ConfigurationError, match="header 'Authorization' is read from the environment variable NOPE_"):
        OllamaChatCompletionClient(MODEL, headers_env={"Authorization": "NOPE_NOT_SET_123"})


def test_header_values_never_dumped_silently(monkeypatch: pytest.MonkeyPatch) -> None:
    client = OllamaChatCompletionClient(MODEL, headers={"Authorization": "Bearer s3cret-value"})
    assert "s3cret-value" not in repr(client)
    with pytest.raises(ComponentError, match=r"headers \['Authorization'\] were given as values") as info:
        client.dump_component()
    assert "s3cret-value" not in str(info.value)
    monkeypatch.setenv("MY_OLLAMA_TOKEN", "Bearer s3cret-value")
    by_env = OllamaChatCompletionClient(MODEL, headers_env={"Authorization": "MY_OLLAMA_TOKEN"})
    dumped = by_env.dump_component().model_dump_json()
    assert "s3cret-value" not in dumped
    assert '"headers_env":{"Authorization":"MY_OLLAMA_TOKEN"}' in dumped


# --- dump and load ------------------------------------------------------------------------------------------


async def test_dump_and_load_round_trip(server: OllamaServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MY_OLLAMA_TOKEN", "Bearer t0ken")
    client = make(
        server,
        model="qwen3:8b",
        temperature=0.2,
        num_ctx=4096,
        think="high",
        keep_alive=-1,
        options={"mirostat": 1},
        headers_env={"Authorization": "MY_OLLAMA_TOKEN"},
        model_info={"vision": True},
        default_options={"max_tokens": 50},
        timeout=12.5,
    )
    dump = client.dump_component()
    assert dump.provider == "ext.models.ollama.OllamaChatCompletionClient"
    loaded = load_component(dump.model_dump_json(), OllamaChatCompletionClient)
    assert loaded.dump_component() == dump
    assert loaded.capabilities.vision is True and loaded.host == server.base_url
    async with loaded:
        server.enqueue(Reply(text="ok"))
        await loaded.create(HELLO)
    sent = body(server)
    assert sent["think"] == "high" and sent["keep_alive"] == -1
    assert sent["options"] == {"mirostat": 1, "num_ctx": 4096, "temperature": 0.2, "num_predict": 50}
    assert server.requests[-1].headers["authorization"] == "Bearer t0ken"
    await client.close()


def test_registered_as_component_and_retry_classifier() -> None:
    assert registered_components()["OllamaChatCompletionClient"] == "ext.models.ollama:OllamaChatCompletionClient"
    from importlib.metadata import entry_points

    assert "ext.models.ollama._retry:classify_ollama_error" in [ep.value for ep in entry_points(group="ext.retry")]


# --- tools --------------------------------------------------------------------------------------------------


async def test_tool_schemas_go_whole(server: OllamaServer, client: OllamaChatCompletionClient) -> None:
    server.enqueue(Reply(text="ok"))
    await client.create(HELLO, tools=[BOOKING_TOOL, ADD])
    tools = body(server)["tools"]
    assert tools[0] == {
        "type": "function",
        "function": {"name": "book", "description": "Book rooms.", "parameters": BOOKING_SCHEMA},
    }
    assert tools[1]["function"]["parameters"]["required"] == ["a", "b"]
    # Why the client does not send through ollama.AsyncClient.chat: the SDK's Tool model flattens this schema.
    flattened = ollama.Tool.model_validate({"type": "function", "function": BOOKING_TOOL}).model_dump(exclude_none=True)
    assert "properties" not in flattened["function"]["parameters"]["properties"]["guest"]


async def test_every_tool_call_gets_its_own_id(server: OllamaServer, client: OllamaChatCompletionClient) -> None:
    same = [ToolCallSpec("add", {"a": 1, "b": 1}), ToolCallSpec("add", {"a": 1, "b": 1})]
    server.enqueue(Reply(tool_calls=same), Reply(tool_calls=same))
    first = await client.create(HELLO, tools=[ADD])
    streamed = (await collect(client, HELLO, tools=[ADD]))[-1]
    assert isinstance(first.content, list) and isinstance(streamed, CreateResult)
    assert isinstance(streamed.content, list)
    ids = [c.id for c in first.content] + [c.id for c in streamed.content]
    assert len(set(ids)) == 4 and all(i.startswith("call_") for i in ids)


async def test_several_results_go_back_to_the_right_calls(
    server: OllamaServer, client: OllamaChatCompletionClient
) -> None:
    server.enqueue(
        Reply(tool_calls=[ToolCallSpec("add", {"a": 1, "b": 2}), ToolCallSpec("multiply", {"a": 3, "b": 4})]),
        Reply(text="3 and 12"),
    )
    first = await client.create(HELLO, tools=[ADD, MULTIPLY])
    assert isinstance(first.content, list)
    add_call, mul_call = first.content
    # The results come back in another order than the calls (as parallel tools finish).
    results = FunctionExecutionResultMessage(
        content=[
            FunctionExecutionResult(call_id=mul_call.id, name="multiply", content="12"),
            FunctionExecutionResult(call_id=add_call.id, name="add", content="3"),
        ]
    )
    second = await client.create([*HELLO, first.to_assistant_message(), results], tools=[ADD, MULTIPLY])
    assert second.content == "3 and 12"
    sent = body(server)["messages"]
    assert sent[1]["role"] == "assistant"
    assert [c["function"] for c in sent[1]["tool_calls"]] == [
        {"name": "add", "arguments": {"a": 1, "b": 2}},
        {"name": "multiply", "arguments": {"a": 3, "b": 4}},
    ]
    # Ollama pairs results with calls by position: they go in the calls' order, each with its tool's name.
    assert [(m["role"], m["tool_name"], m["content"]) for m in sent[2:]] == [
        ("tool", "add", "3"),
        ("tool", "multiply", "12"),
    ]
    # Exactly the fields Ollama's API defines: no call ids anywhere.
    assert [set(c) for c in sent[1]["tool_calls"]] == [{"function"}, {"function"}]
    assert [set(m) for m in sent[2:]] == [{"role", "content", "tool_name"}] * 2
    wire = server.decode(server.requests[-1])
    names = {c.call_id: c.name for c in wire.messages[1].tool_calls}
    pairs = {names[r.call_id]: r.content for m in wire.messages for r in m.tool_results}
    assert pairs == {"add": "3", "multiply": "12"}


async def test_two_calls_of_one_tool_keep_their_results(
    server: OllamaServer, client: OllamaChatCompletionClient
) -> None:
    # Paired by name, then position: results of one tool go in the order of its calls.
    server.enqueue(
        Reply(tool_calls=[ToolCallSpec("add", {"a": 1, "b": 2}), ToolCallSpec("add", {"a": 5, "b": 5})]),
        Reply(text="3 and 10"),
    )
    first = await client.create(HELLO, tools=[ADD])
    assert isinstance(first.content, list)
    small, big = first.content
    results = FunctionExecutionResultMessage(
        content=[
            FunctionExecutionResult(call_id=big.id, name="add", content="10"),
            FunctionExecutionResult(call_id=small.id, name="add", content="3"),
        ]
    )
    await client.create([*HELLO, first.to_assistant_message(), results], tools=[ADD])
    wire = server.decode(server.requests[-1])
    arguments = {c.call_id: c.arguments_dict for c in wire.messages[1].tool_calls}
    pairs = [(arguments[r.call_id], r.content) for m in wire.messages for r in m.tool_results]
    assert pairs == [({"a": 1, "b": 2}, "3"), ({"a": 5, "b": 5}, "10")]


async def test_unanswered_calls_are_sent_as_ollama_accepts_them(
    server: OllamaServer, client: OllamaChatCompletionClient
) -> None:
    server.enqueue(Reply(text="fine"))
    history: list[LLMMessage] = [
        *HELLO,
        AssistantMessage(content=[FunctionCall(id="c1", name="add", arguments='{"a": 1, "b": 2}')]),
        UserMessage(content="never mind"),
    ]
    assert (await client.create(history, tools=[ADD])).content == "fine"
    orphan: list[LLMMessage] = [
        *HELLO,
        FunctionExecutionResultMessage(content=[FunctionExecutionResult(call_id="c1", name="add", content="3")]),
    ]
    with pytest.raises(ConfigurationError, match=r"messages\[1\]: the result for call_id 'c1'"):
        await client.create(orphan, tools=[ADD])
    assert len(server.requests) == 1


async def test_tool_call_arguments_in_history_must_be_json(
    server: OllamaServer, client: OllamaChatCompletionClient
) -> None:
    history: list[LLMMessage] = [
        *HELLO,
        AssistantMessage(content=[FunctionCall(id="c1", name="add", arguments="{not json")]),
        FunctionExecutionResultMessage(content=[FunctionExecutionResult(call_id="c1", name="add", content="?")]),
    ]
    with pytest.raises(ConfigurationError, match=r"messages\[1\]\.content\[0\]\.arguments"):
        await client.create(history, tools=[ADD])
    assert server.requests == []


async def test_tool_choice_none_leaves_the_tools_out(server: OllamaServer, client: OllamaChatCompletionClient) -> None:
    server.enqueue(Reply(text="ok"))
    await client.create(HELLO, tools=[ADD], tool_choice="none")
    assert "tools" not in body(server)


async def test_stream_ending_in_tool_calls_has_usage(server: OllamaServer, client: OllamaChatCompletionClient) -> None:
    server.enqueue(
        Reply(
            text="Let me add.",
            tool_calls=[ToolCallSpec("add", {"a": 2, "b": 2}), ToolCallSpec("multiply", {"a": 2, "b": 3})],
            prompt_tokens=31,
            completion_tokens=17,
        )
    )
    items = await collect(client, HELLO, tools=[ADD, MULTIPLY])
    result = items[-1]
    assert isinstance(result, CreateResult)
    assert result.finish_reason == "function_calls"  # Ollama said "stop"
    assert (result.usage.prompt_tokens, result.usage.completion_tokens) == (31, 17)
    assert isinstance(result.content, list)
    assert [(c.name, parse_tool_arguments(c.arguments)) for c in result.content] == [
        ("add", {"a": 2, "b": 2}),
        ("multiply", {"a": 2, "b": 3}),
    ]
    assert result.thought == "Let me add."
    assert client.total_usage().prompt_tokens == 31


# --- thinking, output formats, images -----------------------------------------------------------------------


async def test_thinking_is_the_thought_and_apart_in_a_stream(server: OllamaServer) -> None:
    async with make(server, model="qwen3:8b", think=True) as client:
        server.enqueue(Reply(text="It is 4.", thought="2 plus 2 makes 4"))
        result = await client.create(HELLO)
        assert (result.content, result.thought) == ("It is 4.", "2 plus 2 makes 4")
        server.enqueue(Reply(text="It is 4.", thought="2 plus 2 makes 4"))
        items = await collect(client, HELLO)
    assert body(server)["think"] is True
    chunks = [i for i in items if isinstance(i, StreamChunk)]
    thinking = [c for c in chunks if c.thought]
    answer = [c for c in chunks if c.content]
    assert all(not c.content for c in thinking) and all(not c.thought for c in answer)
    assert "".join(c.thought for c in thinking) == "2 plus 2 makes 4"
    assert "".join(c.content for c in answer) == "It is 4."
    assert chunks.index(thinking[-1]) < chunks.index(answer[0])
    final = items[-1]
    assert isinstance(final, CreateResult) and final.thought == "2 plus 2 makes 4" and final.content == "It is 4."
    # The thought goes back with the assistant turn.
    async with make(server, model="qwen3:8b", think=True) as client:
        server.enqueue(Reply(text="ok"))
        await client.create([*HELLO, final.to_assistant_message(), UserMessage(content="and 3+3?")])
    assert body(server)["messages"][1] == {"role": "assistant", "content": "It is 4.", "thinking": "2 plus 2 makes 4"}


class Weather(BaseModel):
    city: str
    kind: Literal["sun", "rain"]
    hours: list[int]


async def test_structured_output_sends_the_schema_as_format(
    server: OllamaServer, client: OllamaChatCompletionClient
) -> None:
    server.enqueue(Reply(text='{"city": "Oslo", "kind": "rain", "hours": [9, 10]}'))
    result = await client.create(HELLO, json_output=Weather)
    assert result.parsed == Weather(city="Oslo", kind="rain", hours=[9, 10])
    fmt = body(server)["format"]
    assert fmt["type"] == "object" and fmt["required"] == ["city", "kind", "hours"]
    assert fmt["properties"]["kind"]["enum"] == ["sun", "rain"]
    assert fmt["properties"]["hours"] == {"type": "array", "items": {"type": "integer"}}


async def test_json_mode_sends_format_json(server: OllamaServer, client: OllamaChatCompletionClient) -> None:
    server.enqueue(Reply(text='{"ok": true}'))
    assert (await client.create(HELLO, json_output=True)).parsed == {"ok": True}
    assert body(server)["format"] == "json"


async def test_images_go_as_base64(server: OllamaServer) -> None:
    async with make(server, model="llava") as client:
        assert client.capabilities.vision is True
        image = Image.from_bytes(PNG_1PX)
        server.enqueue(Reply(text="a dot"))
        await client.create([SystemMessage(content="Be brief."), UserMessage(content=["What is it?", image, "Say."])])
    assert body(server)["messages"] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "What is it?\nSay.", "images": [image.to_base64()]},
    ]


# --- capabilities -------------------------------------------------------------------------------------------


def test_unknown_models_get_the_documented_defaults() -> None:
    info = OllamaChatCompletionClient("my-finetune:latest").capabilities
    assert (info.vision, info.function_calling, info.json_output, info.structured_output) == (False, True, True, True)
    assert (info.family, info.context_window) == ("unknown", 4096)
    qwen = OllamaChatCompletionClient("qwen3:8b").capabilities
    assert qwen.reasoning and qwen.family == "qwen3"
    gemma = OllamaChatCompletionClient("gemma3:4b")
    # The table says no native tool calling; the client calls tools for it at the prompt level (tool_calling).
    assert gemma.info_for("gemma3:4b").function_calling is False and gemma.capabilities.function_calling is True


async def test_capabilities_are_overridable_per_client(server: OllamaServer) -> None:
    async with make(server, model="gemma3:4b", model_info={"function_calling": True}, token_limit=2048) as client:
        assert client.capabilities.function_calling is True and client.capabilities.context_window == 2048
    # A model without native tool calling gets tools at the prompt level (test_tool_calling.py).


def test_every_rule_of_the_ollama_table_is_a_valid_model_info() -> None:
    from ext.models.ollama import OLLAMA_MODELS

    OLLAMA_MODELS.validate()


# --- errors -------------------------------------------------------------------------------------------------


async def test_model_not_pulled_names_it_and_how_to_pull(server: OllamaServer) -> None:
    async with make(server, model="mistral-nemo") as client:
        for call in (client.create(HELLO), collect(client, HELLO)):
            with pytest.raises(OllamaModelNotFoundError) as info:
                await call
            error = info.value
            assert isinstance(error, ollama.ResponseError) and error.status_code == 404
            assert "ollama pull mistral-nemo" in str(error) and "'mistral-nemo'" in str(error)
            assert server.base_url in str(error)
            assert error.model == "mistral-nemo"
    assert len(server.requests) == 2  # not retried


async def test_unreachable_host_raises_promptly_naming_it() -> None:
    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    async with OllamaChatCompletionClient(MODEL, host=f"127.0.0.1:{port}", max_retries=0) as client:
        with pytest.raises(OllamaConnectionError, match=rf"cannot connect to Ollama at http://127\.0\.0\.1:{port}"):
            await asyncio.wait_for(client.create(HELLO), 10)
        with pytest.raises(ConnectionError, match="OLLAMA_HOST"):
            await asyncio.wait_for(collect(client, HELLO), 10)


@pytest.mark.parametrize("fault", [Fault("overloaded"), Fault("server_error"), Fault("rate_limit", retry_after=0)])
async def test_transient_errors_go_through_the_retry_policy(server: OllamaServer, fault: Fault) -> None:
    policy = RetryPolicy(max_retries=2, multiplier=0.0)
    async with make(server, retry_policy=policy) as client:
        server.enqueue(fault, Reply(text="recovered"))
        assert (await client.create(HELLO)).content == "recovered"
        server.enqueue(fault, Reply(text="streamed"))
        result = (await collect(client, HELLO))[-1]
        assert isinstance(result, CreateResult) and result.content == "streamed"
    assert len(server.requests) == 4


async def test_retry_after_is_read_from_ollama_errors(server: OllamaServer, client: OllamaChatCompletionClient) -> None:
    server.enqueue(Fault("rate_limit", retry_after=7))
    with pytest.raises(OllamaResponseError) as info:
        await client.create(HELLO)
    assert info.value.status_code == 429 and info.value.error == "too many requests"
    # ext-core's default policy finds the Ollama classifier through the ext.retry entry point.
    decision = RetryPolicy().classify(info.value)
    assert decision.retryable and decision.retry_after == 7.0
    assert RetryPolicy().delay(0, decision) == 7.0
    not_found = OllamaResponseError("model x not found", 404)
    assert RetryPolicy().classify(not_found).retryable is False


async def test_malformed_replies_are_clear_errors(server: OllamaServer, client: OllamaChatCompletionClient) -> None:
    server.enqueue(Response(body=b"{not json"))
    with pytest.raises(OllamaResponseError, match="not Ollama's JSON"):
        await client.create(HELLO)
    server.enqueue(StreamResponse([ndjson_frame({"model": MODEL, "message": {"content": "hi"}}), b"{oops\n"]))
    with pytest.raises(OllamaResponseError, match="not Ollama's JSON"):
        await collect(client, HELLO)
    server.enqueue(StreamResponse([b"[1, 2]\n"]))
    with pytest.raises(OllamaResponseError, match="a JSON list, not an object"):
        await collect(client, HELLO)
    server.enqueue(StreamResponse([ndjson_frame({"error": "an error was encountered while running the model"})]))
    with pytest.raises(OllamaResponseError, match="while running the model"):
        await collect(client, HELLO)


async def test_a_stream_cut_short_is_a_connection_error(
    server: OllamaServer, client: OllamaChatCompletionClient
) -> None:
    server.enqueue(Fault("drop_mid_body"))
    with pytest.raises(OllamaConnectionError, match=r"broke off|ended before its last part"):
        await collect(client, HELLO)
    # A body that ends cleanly without the done part is cut short too.
    server.enqueue(StreamResponse([ndjson_frame({"model": MODEL, "message": {"content": "hi"}, "done": False})]))
    with pytest.raises(ConnectionError, match="ended before its last part"):
        await collect(client, HELLO)


async def test_slow_reply_times_out(server: OllamaServer) -> None:
    async with make(server, timeout=0.2) as client:
        server.enqueue(Reply(text="late", delay=5))
        with pytest.raises(TimeoutError, match=rf"Ollama at {server.base_url} did not answer"):
            await asyncio.wait_for(client.create(HELLO), 10)
    await asyncio.wait_for(server.requests[0].disconnected.wait(), 10)


# --- lifecycle ----------------------------------------------------------------------------------------------


async def test_close_releases_the_http_client(server: OllamaServer) -> None:
    client = make(server)
    server.enqueue(Reply(text="ok"))
    await client.create(HELLO)
    http = client.http_client
    assert isinstance(http, httpx.AsyncClient)
    open_before = not http.is_closed
    await client.close()
    assert open_before and http.is_closed
    await client.close()  # idempotent
