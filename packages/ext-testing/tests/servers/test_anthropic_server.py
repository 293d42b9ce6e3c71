"""AnthropicServer driven by the real anthropic SDK over real sockets."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

anthropic = pytest.importorskip("anthropic")
httpx2 = pytest.importorskip("httpx2")

from ext.testing.script import Fault, Reply, ToolCallSpec  # noqa: E402
from ext.testing.servers.anthropic import AnthropicServer  # noqa: E402

KEY = "sk-ant-test-key"
MODEL = "claude-sonnet-5-5"
MESSAGES: list[Any] = [{"role": "user", "content": "Hi"}]


@pytest.fixture
async def server() -> AsyncIterator[AnthropicServer]:
    async with AnthropicServer(api_key=KEY) as srv:
        yield srv


@pytest.fixture
async def client(server: AnthropicServer) -> AsyncIterator[Any]:
    async with anthropic.AsyncAnthropic(base_url=server.base_url, api_key=KEY, max_retries=0) as c:
        yield c


async def test_text_usage_and_headers(server: AnthropicServer, client: Any) -> None:
    server.enqueue(Reply(text="Hello there!", prompt_tokens=12, completion_tokens=3, cached_tokens=4))
    message = await client.messages.create(model=MODEL, max_tokens=64, messages=MESSAGES)
    assert message.type == "message" and message.role == "assistant"
    assert message.model == MODEL
    assert message.id.startswith("msg_")
    assert [b.type for b in message.content] == ["text"]
    assert message.content[0].text == "Hello there!"
    assert message.stop_reason == "end_turn"
    assert message.usage.input_tokens == 8
    assert message.usage.cache_read_input_tokens == 4
    assert message.usage.output_tokens == 3
    (request,) = server.requests
    assert request.path == "/v1/messages"
    assert request.headers["anthropic-version"]
    assert request.headers["authorization"] == f"Bearer {KEY}"
    assert request.json == {"model": MODEL, "max_tokens": 64, "messages": MESSAGES}


async def test_x_api_key_header_is_accepted(server: AnthropicServer) -> None:
    server.enqueue(Reply(text="ok"))
    async with anthropic.AsyncAnthropic(
        base_url=server.base_url,
        auth_token="unused",
        max_retries=0,
        default_headers={"x-api-key": KEY, "Authorization": anthropic.Omit()},
    ) as c:
        message = await c.messages.create(model=MODEL, max_tokens=8, messages=MESSAGES)
    assert message.content[0].text == "ok"
    assert "authorization" not in server.requests[0].headers
    assert server.requests[0].headers["x-api-key"] == KEY


@pytest.mark.parametrize(
    ("neutral", "wire"),
    [("stop", "end_turn"), ("length", "max_tokens"), ("tool_calls", "tool_use"), ("content_filter", "refusal")],
)
async def test_stop_reasons(server: AnthropicServer, client: Any, neutral: str, wire: str) -> None:
    server.enqueue(Reply(text="x", finish_reason=neutral))
    message = await client.messages.create(model=MODEL, max_tokens=8, messages=MESSAGES)
    assert message.stop_reason == wire


async def test_tool_use_and_thinking_blocks(server: AnthropicServer, client: Any) -> None:
    server.enqueue(
        Reply(
            text="Let me check.",
            thought="I should call the tool.",
            thought_signature="sig-123",
            tool_calls=[ToolCallSpec("get_weather", {"city": "Paris"}, id="toolu_1"), ToolCallSpec("now", {})],
            reasoning_tokens=7,
        )
    )
    message = await client.messages.create(model=MODEL, max_tokens=2048, messages=MESSAGES)
    kinds = [b.type for b in message.content]
    assert kinds == ["thinking", "text", "tool_use", "tool_use"]
    assert message.content[0].thinking == "I should call the tool."
    assert message.content[0].signature == "sig-123"
    assert message.content[2].id == "toolu_1"
    assert message.content[2].input == {"city": "Paris"}
    assert message.content[3].input == {}
    assert message.stop_reason == "tool_use"
    assert message.usage.output_tokens_details.thinking_tokens == 7


async def test_stream_event_sequence(server: AnthropicServer, client: Any) -> None:
    server.enqueue(
        Reply(
            text="one two",
            thought="hmm ok",
            thought_signature="sig-s",
            tool_calls=[ToolCallSpec("add", {"a": 1, "b": 22}, id="toolu_9")],
            prompt_tokens=9,
            completion_tokens=4,
        )
    )
    stream = await client.messages.create(model=MODEL, max_tokens=2048, messages=MESSAGES, stream=True)
    events = [event async for event in stream]
    types = [e.type for e in events]
    assert types[0] == "message_start" and types[-2:] == ["message_delta", "message_stop"]
    starts = [e.content_block.type for e in events if e.type == "content_block_start"]
    assert starts == ["thinking", "text", "tool_use"]
    deltas = [e.delta for e in events if e.type == "content_block_delta"]
    assert "".join(d.thinking for d in deltas if d.type == "thinking_delta") == "hmm ok"
    assert [d.signature for d in deltas if d.type == "signature_delta"] == ["sig-s"]
    assert "".join(d.text for d in deltas if d.type == "text_delta") == "one two"
    assert "".join(d.partial_json for d in deltas if d.type == "input_json_delta") == '{"a":1,"b":22}'
    assert types.count("content_block_stop") == 3
    assert events[0].message.usage.input_tokens == 9
    assert events[-2].delta.stop_reason == "tool_use" and events[-2].usage.output_tokens == 4
    raw = server.requests[0]
    assert raw.completed


async def test_stream_has_a_ping(server: AnthropicServer) -> None:
    server.enqueue(Reply(text="a b"))
    async with anthropic.AsyncAnthropic(base_url=server.base_url, api_key=KEY, max_retries=0) as c:
        response = await c.messages.with_raw_response.create(model=MODEL, max_tokens=8, messages=MESSAGES, stream=True)
        body = b"".join([chunk async for chunk in response.http_response.aiter_bytes()])
    assert b"event: ping\n" in body
    assert body.startswith(b"event: message_start\n")
    assert response.headers["content-type"] == "text/event-stream"


async def test_stream_helper_accumulates(server: AnthropicServer, client: Any) -> None:
    server.enqueue(Reply(text="Hello world", thought="think", thought_signature="sig"))
    async with client.messages.stream(model=MODEL, max_tokens=2048, messages=MESSAGES) as stream:
        message = await stream.get_final_message()
    assert [b.type for b in message.content] == ["thinking", "text"]
    assert message.content[0].signature == "sig"
    assert message.content[1].text == "Hello world"


async def test_errors_in_anthropic_shape(server: AnthropicServer, client: Any) -> None:
    server.enqueue(Fault("rate_limit", retry_after=3))
    with pytest.raises(anthropic.RateLimitError) as info:
        await client.messages.create(model=MODEL, max_tokens=8, messages=MESSAGES)
    assert info.value.status_code == 429
    assert info.value.type == "rate_limit_error"
    assert info.value.body["type"] == "error"
    assert info.value.response.headers["retry-after"] == "3"
    assert info.value.request_id is not None

    server.enqueue(Fault("overloaded"))
    with pytest.raises(anthropic.OverloadedError) as overloaded:
        await client.messages.create(model=MODEL, max_tokens=8, messages=MESSAGES)
    assert overloaded.value.status_code == 529 and overloaded.value.type == "overloaded_error"

    server.enqueue(Fault("server_error"))
    with pytest.raises(anthropic.InternalServerError) as internal:
        await client.messages.create(model=MODEL, max_tokens=8, messages=MESSAGES)
    assert internal.value.type == "api_error"

    server.enqueue(Fault("not_found"))
    with pytest.raises(anthropic.NotFoundError):
        await client.messages.create(model=MODEL, max_tokens=8, messages=MESSAGES)


async def test_wrong_key_is_401(server: AnthropicServer) -> None:
    async with anthropic.AsyncAnthropic(base_url=server.base_url, api_key="wrong", max_retries=0) as c:
        with pytest.raises(anthropic.AuthenticationError) as info:
            await c.messages.create(model=MODEL, max_tokens=8, messages=MESSAGES)
    assert info.value.type == "authentication_error"
    assert server.pending == 0


async def test_missing_version_header_is_rejected(server: AnthropicServer) -> None:
    async with anthropic.AsyncAnthropic(
        base_url=server.base_url, api_key=KEY, max_retries=0, default_headers={"anthropic-version": anthropic.Omit()}
    ) as c:
        with pytest.raises(anthropic.BadRequestError, match="anthropic-version"):
            await c.messages.create(model=MODEL, max_tokens=8, messages=MESSAGES)


async def test_error_event_mid_stream(server: AnthropicServer, client: Any) -> None:
    server.enqueue(server.stream_error("overloaded_error", "Overloaded", text="partial answer"))
    stream = await client.messages.create(model=MODEL, max_tokens=8, messages=MESSAGES, stream=True)
    seen: list[str] = []
    with pytest.raises(anthropic.APIStatusError) as info:
        async for event in stream:
            if event.type == "content_block_delta":
                seen.append(event.delta.text)
    assert "".join(seen) == "partial answer"
    assert info.value.type == "overloaded_error"


@pytest.mark.parametrize(
    ("messages", "extra", "match"),
    [
        ([{"role": "user", "content": ""}], {}, "non-empty content"),
        ([{"role": "user", "content": [{"type": "text", "text": "  "}]}], {}, "non-whitespace"),
        (
            [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Sure "}],
            {},
            "trailing whitespace",
        ),
        (
            [{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "nope", "content": "1"}]}],
            {},
            "unexpected `tool_use_id`",
        ),
        (
            [
                {"role": "user", "content": "Hi"},
                {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "f", "input": {}}]},
                {"role": "user", "content": "no results"},
            ],
            {},
            "without `tool_result`",
        ),
        (
            [
                {"role": "user", "content": "Hi"},
                {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "f", "input": {}}]},
                {
                    "role": "user",
                    "content": [
                        {"type": "text", "text": "first"},
                        {"type": "tool_result", "tool_use_id": "t1", "content": "1"},
                    ],
                },
            ],
            {},
            "must come first",
        ),
        (MESSAGES, {"temperature": 1.5}, "temperature"),
        (MESSAGES, {"thinking": {"type": "enabled", "budget_tokens": 512}}, "budget_tokens"),
        (MESSAGES, {"thinking": {"type": "enabled", "budget_tokens": 4096}}, "max_tokens"),
        (
            MESSAGES,
            {"thinking": {"type": "adaptive"}, "extra_body": {"temperature": 0.2}},
            "temperature",
        ),
        (
            MESSAGES,
            {
                "thinking": {"type": "adaptive"},
                "tools": [{"name": "f", "input_schema": {"type": "object"}}],
                "tool_choice": {"type": "any"},
            },
            "forces tool use",
        ),
    ],
)
async def test_strict_validation_like_the_api(
    server: AnthropicServer, client: Any, messages: list[Any], extra: dict[str, Any], match: str
) -> None:
    kwargs = dict(extra)
    if "temperature" in kwargs:
        kwargs = {"extra_body": {"temperature": kwargs.pop("temperature")}}
    with pytest.raises(anthropic.BadRequestError, match=match) as info:
        await client.messages.create(model=MODEL, max_tokens=2048, messages=messages, **kwargs)
    assert info.value.type == "invalid_request_error"
    assert server.pending == 0


async def test_valid_tool_loop_passes_strict_validation(server: AnthropicServer, client: Any) -> None:
    server.enqueue(Reply(text="3"))
    messages: list[Any] = [
        {"role": "user", "content": "add"},
        {
            "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": "t", "signature": "s"},
                {"type": "tool_use", "id": "t1", "name": "add", "input": {"a": 1}},
            ],
        },
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "3", "is_error": True}],
        },
    ]
    message = await client.messages.create(model=MODEL, max_tokens=2048, messages=messages)
    assert message.content[0].text == "3"
    wire = server.decode(server.requests[0])
    assert wire.messages[1].tool_calls[0].id == "t1"
    assert wire.messages[1].thought == "t" and wire.messages[1].thought_signature == "s"
    result = wire.messages[2].tool_results[0]
    assert (result.call_id, result.content, result.is_error) == ("t1", "3", True)


async def test_lenient_server_accepts_anything(client: Any) -> None:
    async with AnthropicServer(strict=False) as lenient:
        lenient.enqueue(Reply(text="fine"))
        async with anthropic.AsyncAnthropic(base_url=lenient.base_url, api_key="any", max_retries=0) as c:
            message = await c.messages.create(model=MODEL, max_tokens=8, messages=[{"role": "user", "content": ""}])
    assert message.content[0].text == "fine"


async def test_count_tokens(server: AnthropicServer, client: Any) -> None:
    counted = await client.messages.count_tokens(model=MODEL, messages=MESSAGES)
    body = server.requests[0].json
    assert isinstance(body, dict)
    assert counted.input_tokens == AnthropicServer.estimate_count(body) > 0
    server.enqueue_count(1234, Fault("rate_limit", retry_after=1))
    assert (await client.messages.count_tokens(model=MODEL, messages=MESSAGES)).input_tokens == 1234
    with pytest.raises(anthropic.RateLimitError):
        await client.messages.count_tokens(model=MODEL, messages=MESSAGES)
    assert server.pending == 0
    with pytest.raises(TypeError):
        server.enqueue_count(True)


async def test_decode(server: AnthropicServer, client: Any) -> None:
    server.enqueue(Reply(text="ok"))
    await client.messages.create(
        model=MODEL,
        max_tokens=100,
        system=[{"type": "text", "text": "Be brief."}, {"type": "text", "text": "Answer in JSON."}],
        messages=[
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "look"},
                    {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AAAA"}},
                ],
            }
        ],
        tools=[{"name": "f", "description": "d", "input_schema": {"type": "object", "properties": {"x": {}}}}],
        tool_choice={"type": "tool", "name": "f"},
        stop_sequences=["END"],
        output_config={"format": {"type": "json_schema", "schema": {"type": "object", "properties": {"y": {}}}}},
        extra_body={"temperature": 0.3, "top_p": 0.8, "top_k": 5},
    )
    wire = server.decode(server.requests[0])
    assert wire.model == MODEL and wire.stream is False
    assert wire.system == ["Be brief.", "Answer in JSON."]
    assert wire.messages[0].role == "user" and wire.messages[0].text == "look" and wire.messages[0].images == 1
    assert wire.tools == ["f"] and wire.tool_schemas["f"]["properties"] == {"x": {}}
    assert wire.tool_choice == "f"
    assert wire.json_schema == {"type": "object", "properties": {"y": {}}}
    assert wire.options == {"temperature": 0.3, "top_p": 0.8, "top_k": 5, "max_tokens": 100, "stop": ["END"]}


async def test_decode_json_mode_from_system_prompt(server: AnthropicServer, client: Any) -> None:
    server.enqueue(Reply(text="{}"), Reply(text="plain"))
    await client.messages.create(model=MODEL, max_tokens=8, system="Reply with JSON only.", messages=MESSAGES)
    await client.messages.create(model=MODEL, max_tokens=8, system="Be nice.", messages=MESSAGES, stream=True)
    first, second = (server.decode(r) for r in server.requests)
    assert first.json_mode is True and first.json_schema is None
    assert second.json_mode is False and second.stream is True
    assert first.tool_choice is None and first.tools == []


async def test_drop_mid_body_breaks_the_stream(server: AnthropicServer, client: Any) -> None:
    server.enqueue(Fault("drop_mid_body"))
    stream = await client.messages.create(model=MODEL, max_tokens=8, messages=MESSAGES, stream=True)
    with pytest.raises(httpx2.RemoteProtocolError):
        async for _ in stream:
            pass


async def test_context_window_fault_is_prompt_too_long(server: AnthropicServer, client: Any) -> None:
    import anthropic

    server.enqueue(Fault("context_window"))
    with pytest.raises(anthropic.BadRequestError) as info:
        await client.messages.create(model=MODEL, max_tokens=8, messages=MESSAGES)
    assert info.value.status_code == 400
    assert info.value.type == "invalid_request_error"
    assert str(info.value.api_message).startswith("prompt is too long: ")
