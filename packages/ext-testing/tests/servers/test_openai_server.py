"""OpenAIServer driven by the real openai SDK over real sockets."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import openai
import pytest

from ext.testing.script import Fault, NeutralMessage, NeutralToolResult, Reply, ToolCallSpec
from ext.testing.servers import OpenAIServer, RecordedRequest

MESSAGES: list[Any] = [{"role": "user", "content": "Hi"}]


async def test_plain_text_and_usage(server: OpenAIServer, client: openai.AsyncOpenAI) -> None:
    server.enqueue(
        Reply(text="Hello there!", prompt_tokens=12, completion_tokens=3, cached_tokens=4, reasoning_tokens=2)
    )
    result = await client.chat.completions.create(model="gpt-4o", messages=MESSAGES)
    assert result.object == "chat.completion"
    assert result.id.startswith("chatcmpl-")
    assert result.model == "gpt-4o"
    choice = result.choices[0]
    assert choice.message.role == "assistant"
    assert choice.message.content == "Hello there!"
    assert choice.message.tool_calls is None
    assert choice.finish_reason == "stop"
    assert result.usage is not None
    assert result.usage.prompt_tokens == 12
    assert result.usage.completion_tokens == 3
    assert result.usage.total_tokens == 15
    assert result.usage.prompt_tokens_details is not None
    assert result.usage.prompt_tokens_details.cached_tokens == 4
    assert result.usage.completion_tokens_details is not None
    assert result.usage.completion_tokens_details.reasoning_tokens == 2
    (request,) = server.requests
    assert request.method == "POST"
    assert request.path == "/v1/chat/completions"
    assert request.route == "chat"
    assert request.headers["authorization"] == "Bearer sk-test"
    assert request.headers["Content-Type"] == "application/json"
    assert request.json == {"model": "gpt-4o", "messages": MESSAGES}
    assert request.completed
    assert not request.disconnected.is_set()


async def test_raw_response_headers(server: OpenAIServer, client: openai.AsyncOpenAI) -> None:
    server.enqueue(Reply(text="x", headers={"x-custom": "yes"}))
    raw = await client.chat.completions.with_raw_response.create(model="m", messages=MESSAGES)
    assert raw.headers["x-custom"] == "yes"
    assert raw.headers["x-request-id"].startswith("req_")
    assert raw.headers["content-type"] == "application/json"
    assert raw.parse().choices[0].message.content == "x"


@pytest.mark.parametrize(("neutral", "wire"), [("length", "length"), ("content_filter", "content_filter")])
async def test_finish_reason_mapping(server: OpenAIServer, client: openai.AsyncOpenAI, neutral: str, wire: str) -> None:
    server.enqueue(Reply(text="cut", finish_reason=neutral))
    result = await client.chat.completions.create(model="m", messages=MESSAGES)
    assert result.choices[0].finish_reason == wire


async def test_parallel_tool_calls(server: OpenAIServer, client: openai.AsyncOpenAI) -> None:
    server.enqueue(
        Reply(
            tool_calls=[
                ToolCallSpec("get_weather", {"city": "Paris"}, id="call_a"),
                ToolCallSpec("get_time", '{"tz": "UTC"}'),
            ]
        )
    )
    result = await client.chat.completions.create(model="m", messages=MESSAGES)
    choice = result.choices[0]
    assert choice.finish_reason == "tool_calls"
    assert choice.message.content is None
    calls = choice.message.tool_calls
    assert calls is not None
    assert len(calls) == 2
    first, second = calls
    assert first.type == "function"
    assert second.type == "function"
    assert first.id == "call_a"
    assert first.function.name == "get_weather"
    assert json.loads(first.function.arguments) == {"city": "Paris"}
    assert second.id.startswith("call_")
    assert second.id != first.id
    assert second.function.name == "get_time"
    assert second.function.arguments == '{"tz": "UTC"}'


async def test_text_with_tool_call_and_explicit_finish(server: OpenAIServer, client: openai.AsyncOpenAI) -> None:
    server.enqueue(Reply(text="Let me check.", tool_calls=[ToolCallSpec("lookup", {})], finish_reason="stop"))
    result = await client.chat.completions.create(model="m", messages=MESSAGES)
    assert result.choices[0].message.content == "Let me check."
    assert result.choices[0].finish_reason == "stop"
    calls = result.choices[0].message.tool_calls
    assert calls is not None
    assert calls[0].type == "function"
    assert calls[0].function.arguments == "{}"


async def test_reasoning_content(server: OpenAIServer, client: openai.AsyncOpenAI) -> None:
    server.enqueue(Reply(text="42", thought="Let me think about it."))
    result = await client.chat.completions.create(model="m", messages=MESSAGES)
    message = result.choices[0].message
    assert message.content == "42"
    assert message.model_extra is not None
    assert message.model_extra["reasoning_content"] == "Let me think about it."


async def test_stream_text(server: OpenAIServer, client: openai.AsyncOpenAI) -> None:
    text = "The quick brown fox jumps over the lazy dog."
    server.enqueue(Reply(text=text))
    stream = await client.chat.completions.create(model="gpt-4o", messages=MESSAGES, stream=True)
    chunks = [chunk async for chunk in stream]
    assert all(chunk.object == "chat.completion.chunk" for chunk in chunks)
    assert len({chunk.id for chunk in chunks}) == 1
    assert chunks[0].choices[0].delta.role == "assistant"
    assert chunks[0].choices[0].delta.content == ""
    pieces = [c.choices[0].delta.content for c in chunks if c.choices and c.choices[0].delta.content]
    assert len(pieces) == 9
    assert "".join(pieces) == text
    assert chunks[-1].choices[0].finish_reason == "stop"
    assert all(chunk.choices for chunk in chunks)  # no usage chunk unless asked for
    assert all(chunk.usage is None for chunk in chunks)
    request = server.requests[0]
    assert request.json is not None
    assert request.json["stream"] is True
    assert request.completed


async def test_stream_custom_chunks(server: OpenAIServer, client: openai.AsyncOpenAI) -> None:
    server.enqueue(Reply(chunks=["", "Hel", "lo", " wor", "ld"]))
    stream = await client.chat.completions.create(model="m", messages=MESSAGES, stream=True)
    contents = [c.choices[0].delta.content async for c in stream if c.choices and c.choices[0].delta.content]
    assert contents == ["Hel", "lo", " wor", "ld"]


async def test_stream_include_usage(server: OpenAIServer, client: openai.AsyncOpenAI) -> None:
    server.enqueue(Reply(text="Hi there", prompt_tokens=7, completion_tokens=2, cached_tokens=1))
    stream = await client.chat.completions.create(
        model="m", messages=MESSAGES, stream=True, stream_options={"include_usage": True}
    )
    chunks = [chunk async for chunk in stream]
    last = chunks[-1]
    assert last.choices == []
    assert last.usage is not None
    assert last.usage.prompt_tokens == 7
    assert last.usage.completion_tokens == 2
    assert last.usage.total_tokens == 9
    assert last.usage.prompt_tokens_details is not None
    assert last.usage.prompt_tokens_details.cached_tokens == 1
    assert all(chunk.usage is None for chunk in chunks[:-1])
    assert chunks[-2].choices[0].finish_reason == "stop"


async def test_stream_tool_calls_reassemble(server: OpenAIServer, client: openai.AsyncOpenAI) -> None:
    args_a = {"city": "Paris", "units": "metric", "days": 3}
    args_b = {"query": "population of Lyon"}
    server.enqueue(Reply(tool_calls=[ToolCallSpec("weather", args_a), ToolCallSpec("search", args_b, id="call_s")]))
    stream = await client.chat.completions.create(model="m", messages=MESSAGES, stream=True)
    calls: dict[int, dict[str, Any]] = {}
    fragments: dict[int, int] = {}
    finish = None
    async for chunk in stream:
        if not chunk.choices:
            continue
        choice = chunk.choices[0]
        finish = choice.finish_reason or finish
        for delta in choice.delta.tool_calls or []:
            assert delta.function is not None
            if delta.index not in calls:
                assert delta.id is not None
                assert delta.type == "function"
                assert delta.function.name is not None
                assert delta.function.arguments == ""
                calls[delta.index] = {"id": delta.id, "name": delta.function.name, "arguments": ""}
                fragments[delta.index] = 0
            else:
                assert delta.id is None
                assert delta.function.name is None
                calls[delta.index]["arguments"] += delta.function.arguments or ""
                fragments[delta.index] += 1
    assert finish == "tool_calls"
    assert sorted(calls) == [0, 1]
    assert calls[0]["name"] == "weather"
    assert json.loads(calls[0]["arguments"]) == args_a
    assert calls[1] == {"id": "call_s", "name": "search", "arguments": json.dumps(args_b, separators=(",", ":"))}
    assert fragments[0] > 1
    assert fragments[1] > 1


async def test_stream_reasoning_content(server: OpenAIServer, client: openai.AsyncOpenAI) -> None:
    server.enqueue(Reply(text="Answer", thought="step one, step two"))
    stream = await client.chat.completions.create(model="m", messages=MESSAGES, stream=True)
    thought = ""
    text = ""
    async for chunk in stream:
        if chunk.choices:
            delta = chunk.choices[0].delta
            extra = delta.model_extra or {}
            thought += extra.get("reasoning_content") or ""
            text += delta.content or ""
    assert thought == "step one, step two"
    assert text == "Answer"


async def test_stream_chunk_delay(server: OpenAIServer, client: openai.AsyncOpenAI) -> None:
    server.enqueue(Reply(chunks=["a", "b", "c"], chunk_delay=0.02))
    started = time.monotonic()
    stream = await client.chat.completions.create(model="m", messages=MESSAGES, stream=True)
    text = "".join([c.choices[0].delta.content or "" async for c in stream if c.choices])
    assert text == "abc"
    # 3 content frames + role frame + final frame + [DONE]: 5 pauses between 6 frames
    assert time.monotonic() - started >= 0.1


async def test_reply_delay(server: OpenAIServer, client: openai.AsyncOpenAI) -> None:
    server.enqueue(Reply(text="late", delay=0.1))
    started = time.monotonic()
    result = await client.chat.completions.create(model="m", messages=MESSAGES)
    assert result.choices[0].message.content == "late"
    assert time.monotonic() - started >= 0.1


async def test_rate_limit_surfaces(server: OpenAIServer, client: openai.AsyncOpenAI) -> None:
    server.enqueue(Fault("rate_limit", retry_after=1.5))
    with pytest.raises(openai.RateLimitError) as info:
        await client.chat.completions.create(model="m", messages=MESSAGES)
    error = info.value
    assert error.status_code == 429
    assert error.response.headers["retry-after"] == "1.5"
    assert error.response.headers["retry-after-ms"] == "1500"
    assert error.request_id is not None
    assert error.request_id.startswith("req_")
    assert error.code == "rate_limit_exceeded"
    assert error.type == "requests"
    assert isinstance(error.body, dict)
    assert set(error.body) == {"message", "type", "param", "code"}
    assert len(server.requests) == 1


async def test_rate_limit_retried_by_sdk(server: OpenAIServer) -> None:
    server.enqueue(Fault("rate_limit", retry_after=0.01), Reply(text="after retry"))
    async with openai.AsyncOpenAI(base_url=server.base_url + "/v1", api_key="k", max_retries=1) as client:
        result = await client.chat.completions.create(model="m", messages=MESSAGES)
    assert result.choices[0].message.content == "after retry"
    assert len(server.requests) == 2
    assert server.pending == 0
    assert server.requests[1].headers["x-stainless-retry-count"] == "1"


@pytest.mark.parametrize(
    ("kind", "status", "error_type"),
    [
        ("server_error", 500, openai.InternalServerError),
        ("overloaded", 503, openai.InternalServerError),
        ("bad_request", 400, openai.BadRequestError),
        ("auth", 401, openai.AuthenticationError),
        ("not_found", 404, openai.NotFoundError),
    ],
)
async def test_http_faults(
    server: OpenAIServer, client: openai.AsyncOpenAI, kind: Any, status: int, error_type: type[openai.APIStatusError]
) -> None:
    server.enqueue(Fault(kind))
    with pytest.raises(error_type) as info:
        await client.chat.completions.create(model="m", messages=MESSAGES)
    assert info.value.status_code == status
    assert isinstance(info.value.body, dict)
    assert info.value.body["message"]
    assert "retry-after" not in info.value.response.headers


async def test_fault_custom_message_and_status(server: OpenAIServer, client: openai.AsyncOpenAI) -> None:
    server.enqueue(Fault("bad_request", message="context too long", status=413))
    with pytest.raises(openai.APIStatusError) as info:
        await client.chat.completions.create(model="m", messages=MESSAGES)
    assert info.value.status_code == 413
    assert info.value.message == "Error code: 413 - context too long"
    assert info.value.body == {
        "message": "context too long",
        "type": "invalid_request_error",
        "param": None,
        "code": None,
    }


async def test_drop_is_connection_error(server: OpenAIServer, client: openai.AsyncOpenAI) -> None:
    server.enqueue(Fault("drop"))
    with pytest.raises(openai.APIConnectionError) as info:
        await client.chat.completions.create(model="m", messages=MESSAGES)
    assert not isinstance(info.value, openai.APITimeoutError)
    assert len(server.requests) == 1
    assert not server.requests[0].completed


async def test_drop_mid_body_is_connection_error(server: OpenAIServer, client: openai.AsyncOpenAI) -> None:
    server.enqueue(Fault("drop_mid_body"))
    with pytest.raises(openai.APIConnectionError):
        await client.chat.completions.create(model="m", messages=MESSAGES)
    assert not server.requests[0].completed


async def test_drop_mid_stream(server: OpenAIServer, client: openai.AsyncOpenAI) -> None:
    server.enqueue(Fault("drop_mid_body"))
    stream = await client.chat.completions.create(model="m", messages=MESSAGES, stream=True)
    received = []
    with pytest.raises(openai.APIConnectionError):
        async for chunk in stream:
            received.append(chunk)
    assert received
    assert received[-1].choices[0].finish_reason is None


async def test_hang_client_timeout_sets_disconnected(server: OpenAIServer) -> None:
    server.enqueue(Fault("hang"))
    async with openai.AsyncOpenAI(base_url=server.base_url + "/v1", api_key="k", max_retries=0, timeout=0.2) as c:
        with pytest.raises(openai.APITimeoutError):
            await c.chat.completions.create(model="m", messages=MESSAGES)
    (request,) = await server.wait_for_requests(1)
    await asyncio.wait_for(request.disconnected.wait(), 5)
    assert not request.completed


async def test_delay_then_client_timeout_sets_disconnected(server: OpenAIServer) -> None:
    server.enqueue(Reply(text="too late", delay=30))
    async with openai.AsyncOpenAI(base_url=server.base_url + "/v1", api_key="k", max_retries=0, timeout=0.2) as c:
        with pytest.raises(openai.APITimeoutError):
            await c.chat.completions.create(model="m", messages=MESSAGES)
    await asyncio.wait_for(server.requests[0].disconnected.wait(), 5)


async def test_stall_mid_stream_then_cancel_sets_disconnected(server: OpenAIServer, client: openai.AsyncOpenAI) -> None:
    server.enqueue(Reply(text="one two three four five six", stall_after_chunks=3))
    received: list[str] = []
    got_three = asyncio.Event()

    async def consume() -> None:
        stream = await client.chat.completions.create(model="m", messages=MESSAGES, stream=True)
        async for chunk in stream:
            received.append(chunk.choices[0].delta.content or "")
            if len(received) == 3:
                got_three.set()

    task = asyncio.create_task(consume())
    await asyncio.wait_for(got_three.wait(), 5)
    request = server.requests[0]
    assert not request.disconnected.is_set()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await asyncio.wait_for(request.disconnected.wait(), 5)
    assert received == ["", "one ", "two "]
    assert not request.completed


async def test_auth_rejects_wrong_and_missing_key() -> None:
    async with OpenAIServer(api_key="sk-right", default=Reply(text="ok")) as server:
        server.enqueue(Reply(text="scripted"))
        async with openai.AsyncOpenAI(base_url=server.base_url + "/v1", api_key="sk-wrong-key", max_retries=0) as c:
            with pytest.raises(openai.AuthenticationError) as info:
                await c.chat.completions.create(model="m", messages=MESSAGES)
        assert info.value.code == "invalid_api_key"
        assert "Incorrect API key provided" in info.value.message
        assert server.pending == 1  # a rejected request does not consume the script
        async with openai.AsyncOpenAI(
            base_url=server.base_url + "/v1", api_key="x", max_retries=0, default_headers={"Authorization": ""}
        ) as c:
            with pytest.raises(openai.AuthenticationError) as info:
                await c.chat.completions.create(model="m", messages=MESSAGES)
        assert "didn't provide an API key" in info.value.message
        async with openai.AsyncOpenAI(base_url=server.base_url + "/v1", api_key="sk-right", max_retries=0) as c:
            result = await c.chat.completions.create(model="m", messages=MESSAGES)
            assert result.choices[0].message.content == "scripted"
            assert [m.id async for m in c.models.list()] == ["gpt-4o-mini"]


async def test_models_endpoint(client: openai.AsyncOpenAI) -> None:
    models = [m async for m in client.models.list()]
    assert [m.id for m in models] == ["gpt-4o-mini"]
    assert (await client.models.retrieve("gpt-4o-mini")).owned_by == "system"
    with pytest.raises(openai.NotFoundError):
        await client.models.retrieve("nope")


async def test_azure_route_with_api_key() -> None:
    async with OpenAIServer(api_key="azure-key") as server:
        server.enqueue(Reply(text="from azure"), Reply(text="streamed azure"))
        async with openai.AsyncAzureOpenAI(
            azure_endpoint=server.base_url, api_key="azure-key", api_version="2024-10-21", max_retries=0
        ) as client:
            result = await client.chat.completions.create(model="my-deployment", messages=MESSAGES)
            stream = await client.chat.completions.create(model="my-deployment", messages=MESSAGES, stream=True)
            streamed = "".join([c.choices[0].delta.content or "" async for c in stream if c.choices])
        assert result.choices[0].message.content == "from azure"
        assert result.model == "my-deployment"
        assert streamed == "streamed azure"
        request = server.requests[0]
        assert request.path == "/openai/deployments/my-deployment/chat/completions"
        assert request.route == "azure_chat"
        assert request.params == {"deployment": "my-deployment"}
        assert request.query == {"api-version": ["2024-10-21"]}
        assert request.headers["api-key"] == "azure-key"
        assert server.decode(request).model == "my-deployment"


async def test_azure_route_rejects_wrong_key_and_accepts_entra_token() -> None:
    async with OpenAIServer(api_key="azure-key", azure_ad_token="entra-token", default=Reply(text="ok")) as server:
        async with openai.AsyncAzureOpenAI(
            azure_endpoint=server.base_url, api_key="bad", api_version="2024-10-21", max_retries=0
        ) as client:
            with pytest.raises(openai.AuthenticationError) as info:
                await client.chat.completions.create(model="d", messages=MESSAGES)
        assert info.value.code == "401"
        async with openai.AsyncAzureOpenAI(
            azure_endpoint=server.base_url, azure_ad_token="entra-token", api_version="2024-10-21", max_retries=0
        ) as client:
            result = await client.chat.completions.create(model="d", messages=MESSAGES)
        assert result.choices[0].message.content == "ok"
        assert server.requests[-1].headers["authorization"] == "Bearer entra-token"


async def test_azure_route_without_api_version_is_404(server: OpenAIServer) -> None:
    server.enqueue(Reply(text="unused"))
    async with openai.AsyncOpenAI(base_url=server.base_url + "/openai/deployments/d", api_key="k", max_retries=0) as c:
        with pytest.raises(openai.NotFoundError) as info:
            await c.chat.completions.create(model="d", messages=MESSAGES)
    assert info.value.body == {"code": "404", "message": "Resource not found"}
    assert server.pending == 1


async def test_keep_alive_reuses_one_connection(server: OpenAIServer, client: openai.AsyncOpenAI) -> None:
    server.default = Reply(text="again")
    for _ in range(3):
        result = await client.chat.completions.create(model="m", messages=MESSAGES)
        assert result.choices[0].message.content == "again"
    stream = await client.chat.completions.create(model="m", messages=MESSAGES, stream=True)
    assert "".join([c.choices[0].delta.content or "" async for c in stream if c.choices]) == "again"
    await client.chat.completions.create(model="m", messages=MESSAGES)
    assert server.connections_opened == 1
    assert {request.connection_id for request in server.requests} == {server.requests[0].connection_id}
    assert len(server.requests) == 5


async def test_concurrent_requests(server: OpenAIServer, client: openai.AsyncOpenAI) -> None:
    server.default = lambda request: Reply(text=str(request.json["messages"][0]["content"]))  # type: ignore[index]
    results = await asyncio.gather(
        *(client.chat.completions.create(model="m", messages=[{"role": "user", "content": f"n{i}"}]) for i in range(50))
    )
    assert [r.choices[0].message.content for r in results] == [f"n{i}" for i in range(50)]
    assert len(server.requests) == 50
    assert server.connections_opened <= 50


async def test_script_exhaustion_is_obvious(server: OpenAIServer) -> None:
    async with openai.AsyncOpenAI(base_url=server.base_url + "/v1", api_key="k", max_retries=2) as client:
        with pytest.raises(openai.InternalServerError) as info:
            await client.chat.completions.create(model="m", messages=MESSAGES)
    assert "script exhausted" in info.value.message
    assert len(server.requests) == 1  # x-should-retry: false stops the SDK retrying


async def test_fifo_then_default(server: OpenAIServer, client: openai.AsyncOpenAI) -> None:
    server.enqueue(Reply(text="first"), Reply(text="second"))
    server.default = Reply(text="default")
    texts = [(await client.chat.completions.create(model="m", messages=MESSAGES)).choices[0].message.content]
    texts.append((await client.chat.completions.create(model="m", messages=MESSAGES)).choices[0].message.content)
    texts.append((await client.chat.completions.create(model="m", messages=MESSAGES)).choices[0].message.content)
    assert texts == ["first", "second", "default"]


async def test_callable_items_echo(server: OpenAIServer, client: openai.AsyncOpenAI) -> None:
    def echo(request: RecordedRequest) -> Reply:
        return Reply(text="echo: " + server.decode(request).last_user_text)

    async def async_fault(request: RecordedRequest) -> Fault:
        return Fault("bad_request", message=f"rejected {server.decode(request).model}")

    server.enqueue(echo, async_fault)
    result = await client.chat.completions.create(model="m", messages=[{"role": "user", "content": "ping"}])
    assert result.choices[0].message.content == "echo: ping"
    with pytest.raises(openai.BadRequestError, match="rejected gpt-x"):
        await client.chat.completions.create(model="gpt-x", messages=MESSAGES)


async def test_invalid_json_body_is_400(server: OpenAIServer, client: openai.AsyncOpenAI) -> None:
    server.enqueue(Reply(text="unused"))
    with pytest.raises(openai.BadRequestError) as info:
        await client.post("/chat/completions", cast_to=object, content=b"{not json")
    assert "could not parse the JSON body" in info.value.message
    assert server.pending == 1


async def test_decode_every_message_kind(server: OpenAIServer, client: openai.AsyncOpenAI) -> None:
    server.enqueue(Reply(text="ok"))
    schema: dict[str, Any] = {"type": "object", "properties": {"answer": {"type": "string"}}, "required": ["answer"]}
    tool_params: dict[str, Any] = {"type": "object", "properties": {"city": {"type": "string"}}}
    messages: list[Any] = [
        {"role": "system", "content": "You are terse."},
        {"role": "developer", "content": [{"type": "text", "text": "Use tools."}]},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "What is in these?"},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
                {"type": "image_url", "image_url": {"url": "https://example.invalid/cat.png", "detail": "low"}},
            ],
        },
        {
            "role": "assistant",
            "content": None,
            "reasoning_content": "I should call the tools.",
            "tool_calls": [
                {"id": "call_1", "type": "function", "function": {"name": "weather", "arguments": '{"city":"Paris"}'}},
                {"id": "call_2", "type": "function", "function": {"name": "clock", "arguments": "not json"}},
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "sunny"},
        {"role": "tool", "tool_call_id": "call_2", "content": [{"type": "text", "text": "12:00"}]},
        {"role": "assistant", "content": "It is sunny."},
        {"role": "user", "content": "Thanks"},
    ]
    await client.chat.completions.create(
        model="gpt-4o",
        messages=messages,
        tools=[
            {"type": "function", "function": {"name": "weather", "parameters": tool_params}},
            {"type": "function", "function": {"name": "clock"}},
        ],
        tool_choice={"type": "function", "function": {"name": "weather"}},
        response_format={"type": "json_schema", "json_schema": {"name": "answer", "schema": schema}},
        temperature=0.2,
        top_p=0.9,
        max_completion_tokens=100,
        stop="END",
        seed=7,
        frequency_penalty=0.1,
        presence_penalty=0.3,
    )
    decoded = server.decode(server.requests[0])
    assert decoded.model == "gpt-4o"
    assert decoded.system == ["You are terse.", "Use tools."]
    assert decoded.messages == [
        NeutralMessage("user", "What is in these?", images=2, position=2),
        NeutralMessage(
            "assistant",
            "",
            tool_calls=[
                ToolCallSpec("weather", {"city": "Paris"}, id="call_1"),
                ToolCallSpec("clock", "not json", id="call_2"),
            ],
            thought="I should call the tools.",
            position=3,
        ),
        NeutralMessage("tool", tool_results=[NeutralToolResult("call_1", "sunny", None)], position=4),
        NeutralMessage("tool", tool_results=[NeutralToolResult("call_2", "12:00", None)], position=5),
        NeutralMessage("assistant", "It is sunny.", position=6),
        NeutralMessage("user", "Thanks", position=7),
    ]
    assert decoded.tools == ["weather", "clock"]
    assert decoded.tool_schemas == {"weather": tool_params, "clock": {}}
    assert decoded.tool_choice == "weather"
    assert decoded.json_mode is False
    assert decoded.json_schema == schema
    assert decoded.stream is False
    assert decoded.options == {
        "temperature": 0.2,
        "top_p": 0.9,
        "max_tokens": 100,
        "stop": ["END"],
        "seed": 7,
        "frequency_penalty": 0.1,
        "presence_penalty": 0.3,
    }
    assert decoded.raw == server.requests[0].json
    assert decoded.last_user_text == "Thanks"


async def test_decode_json_mode_and_simple_options(server: OpenAIServer, client: openai.AsyncOpenAI) -> None:
    server.enqueue(Reply(text="{}"), Reply(text="x"))
    await client.chat.completions.create(
        model="m",
        messages=MESSAGES,
        response_format={"type": "json_object"},
        tool_choice="required",
        tools=[{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}],
        max_tokens=12,
        stop=["a", "b"],
    )
    stream = await client.chat.completions.create(model="m", messages=MESSAGES, stream=True)
    _ = [c async for c in stream]
    first = server.decode(server.requests[0])
    assert first.json_mode is True
    assert first.json_schema is None
    assert first.tool_choice == "required"
    assert first.options == {"max_tokens": 12, "stop": ["a", "b"]}
    second = server.decode(server.requests[1])
    assert second.stream is True
    assert second.tool_choice is None
    assert second.tools == []
    assert second.options == {}
    assert second.system == []
    assert second.messages == [NeutralMessage("user", "Hi", position=0)]


@pytest.mark.parametrize("stream", [False, True])
async def test_tools_need_tool_choice_like_llama_cpp(stream: bool) -> None:
    """llama-cpp-python's chatml-function-calling server ignores tools unless the request carries tool_choice."""
    tools: Any = [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}]
    call = Reply(text="It is sunny.", tool_calls=[ToolCallSpec("get_weather", {"city": "Paris"}, id="call_w")])
    async with (
        OpenAIServer(tools_need_tool_choice=True, default=call) as server,
        openai.AsyncOpenAI(base_url=server.base_url + "/v1", api_key="sk-test", max_retries=0) as client,
    ):

        async def ask(**extra: Any) -> tuple[str | None, list[str], str | None]:
            if not stream:
                result = await client.chat.completions.create(model="m", messages=MESSAGES, tools=tools, **extra)
                choice = result.choices[0]
                names = [c.function.name for c in choice.message.tool_calls or [] if c.type == "function"]
                return choice.message.content, names, choice.finish_reason
            text, names, finish = "", [], None
            async for chunk in await client.chat.completions.create(
                model="m", messages=MESSAGES, tools=tools, stream=True, **extra
            ):
                for choice in chunk.choices:
                    text += choice.delta.content or ""
                    names += [c.function.name for c in choice.delta.tool_calls or [] if c.function and c.function.name]
                    finish = choice.finish_reason or finish
            return text, names, finish

        assert await ask() == ("It is sunny.", [], "stop")
        assert await ask(tool_choice="none") == ("It is sunny.", [], "stop")
        assert server.tools_ignored == 2
        assert await ask(tool_choice="auto") == ("It is sunny.", ["get_weather"], "tool_calls")
        assert await ask(tool_choice="required") == ("It is sunny.", ["get_weather"], "tool_calls")
        assert server.tools_ignored == 2


async def test_tools_need_tool_choice_is_off_by_default(server: OpenAIServer, client: openai.AsyncOpenAI) -> None:
    tools: Any = [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}]
    server.enqueue(Reply(tool_calls=[ToolCallSpec("get_weather", {"city": "Paris"})]))
    result = await client.chat.completions.create(model="m", messages=MESSAGES, tools=tools)
    assert result.choices[0].finish_reason == "tool_calls"
    assert server.tools_ignored == 0


async def test_context_window_fault_is_openais_context_length_error(
    server: OpenAIServer, client: openai.AsyncOpenAI
) -> None:
    server.enqueue(Fault("context_window"))
    with pytest.raises(openai.BadRequestError) as info:
        await client.chat.completions.create(model="m", messages=MESSAGES)
    assert info.value.status_code == 400
    assert info.value.code == "context_length_exceeded"
    assert "maximum context length" in info.value.message


async def test_cut_after_chunks_closes_the_stream_after_n_frames(
    server: OpenAIServer, client: openai.AsyncOpenAI
) -> None:
    server.enqueue(Reply(chunks=["a ", "b ", "c ", "d ", "e "], cut_after_chunks=3))  # the role frame + 2 texts
    stream = await client.chat.completions.create(model="m", messages=MESSAGES, stream=True)
    texts = []
    with pytest.raises(openai.APIConnectionError):
        async for chunk in stream:
            texts.append(chunk.choices[0].delta.content)
    assert texts == ["", "a ", "b "]
    assert not server.requests[0].completed
