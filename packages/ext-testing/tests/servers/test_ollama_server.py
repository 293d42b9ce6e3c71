"""OllamaServer driven by the real ollama SDK over real sockets."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

ollama = pytest.importorskip("ollama", reason="install ollama (hatch env ext-testing has it)")

from ext.testing.script import Fault, Reply, ToolCallSpec  # noqa: E402
from ext.testing.servers import Response, StreamResponse, ndjson_frame  # noqa: E402
from ext.testing.servers.ollama import OllamaServer, model_not_found_message  # noqa: E402

MODEL = "llama3.2"
MESSAGES: list[Any] = [{"role": "user", "content": "Hi"}]


@pytest.fixture
async def server() -> AsyncIterator[OllamaServer]:
    async with OllamaServer(models=[MODEL, "qwen3:8b"]) as srv:
        yield srv


@pytest.fixture
async def client(server: OllamaServer) -> AsyncIterator[Any]:
    async with ollama.AsyncClient(host=server.base_url) as c:
        yield c


async def test_chat_json_reply(server: OllamaServer, client: Any) -> None:
    server.enqueue(Reply(text="Hello!", thought="greet back", prompt_tokens=12, completion_tokens=3))
    response = await client.chat(model=MODEL, messages=MESSAGES, think=True)
    assert response.message.role == "assistant"
    assert response.message.content == "Hello!"
    assert response.message.thinking == "greet back"
    assert (response.done, response.done_reason) == (True, "stop")
    assert (response.prompt_eval_count, response.eval_count) == (12, 3)
    (request,) = server.requests
    assert request.path == "/api/chat"
    assert isinstance(request.json, dict)
    assert request.json["stream"] is False and request.json["think"] is True
    assert server.decode(request).last_user_text == "Hi"


async def test_stream_parts_carry_counts_only_at_the_end(server: OllamaServer, client: Any) -> None:
    server.enqueue(Reply(text="one two three", thought="hmm ok", prompt_tokens=9, completion_tokens=4))
    parts = [part async for part in await client.chat(model=MODEL, messages=MESSAGES, stream=True)]
    assert server.requests[0].headers.get("content-type") == "application/json"
    assert [p.message.thinking for p in parts if p.message.thinking] == ["hmm ", "ok"]
    assert "".join(p.message.content or "" for p in parts) == "one two three"
    assert all(p.eval_count is None and not p.done for p in parts[:-1])
    assert parts[-1].done and parts[-1].done_reason == "stop"
    assert (parts[-1].prompt_eval_count, parts[-1].eval_count) == (9, 4)


async def test_tool_calls_have_dict_arguments_and_no_ids(server: OllamaServer, client: Any) -> None:
    calls = [ToolCallSpec("add", {"a": 1, "b": 2}), ToolCallSpec("mul", {"a": 3, "b": 4})]
    server.enqueue(Reply(tool_calls=calls), Reply(tool_calls=calls))
    response = await client.chat(model=MODEL, messages=MESSAGES)
    assert response.done_reason == "stop"  # Ollama's quirk: no tool-call stop reason
    assert [(c.function.name, dict(c.function.arguments)) for c in response.message.tool_calls] == [
        ("add", {"a": 1, "b": 2}),
        ("mul", {"a": 3, "b": 4}),
    ]
    body = server.requests[0]
    assert body.headers["accept"] == "application/json"
    raw = await client.chat(model=MODEL, messages=MESSAGES, stream=True)
    parts = [p async for p in raw]
    streamed = [c for p in parts for c in p.message.tool_calls or []]
    assert [c.function.name for c in streamed] == ["add", "mul"]
    assert parts[-1].eval_count == 5 and not parts[-1].message.tool_calls


async def test_decode_pairs_tool_results_with_calls_by_position(server: OllamaServer, client: Any) -> None:
    server.enqueue(Reply(text="3 and 12"))
    messages = [
        *MESSAGES,
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {"function": {"name": "add", "arguments": {"a": 1, "b": 2}}},
                {"function": {"name": "mul", "arguments": {"a": 3, "b": 4}}},
            ],
        },
        {"role": "tool", "content": "3", "tool_name": "add"},
        {"role": "tool", "content": "12", "tool_name": "mul"},
    ]
    await client.chat(model=MODEL, messages=messages)
    wire = server.decode(server.requests[0])
    (assistant,) = [m for m in wire.messages if m.tool_calls]
    results = [r for m in wire.messages for r in m.tool_results]
    assert [r.call_id for r in results] == [c.call_id for c in assistant.tool_calls]
    assert [r.content for r in results] == ["3", "12"]
    sent = server.requests[0].json
    assert isinstance(sent, dict)
    assert [m["tool_name"] for m in sent["messages"][2:]] == ["add", "mul"]


async def test_format_options_and_images_decode(server: OllamaServer, client: Any) -> None:
    server.enqueue(Reply(text="{}"), Reply(text="{}"))
    schema = {"type": "object", "properties": {"x": {"type": "integer"}}}
    options = {"temperature": 0.2, "num_predict": 50, "stop": ["END"], "seed": 3}
    image = {"role": "user", "content": "see", "images": ["aGVsbG8="]}
    await client.chat(model=MODEL, messages=[image], format=schema, options=options)
    await client.chat(model=MODEL, messages=MESSAGES, format="json")
    first, second = (server.decode(r) for r in server.requests)
    assert first.json_schema == schema and not first.json_mode
    assert first.options == {"temperature": 0.2, "seed": 3, "max_tokens": 50, "stop": ["END"]}
    assert first.messages[0].images == 1
    assert second.json_mode and second.json_schema is None


async def test_model_not_pulled_is_404_before_the_script(server: OllamaServer, client: Any) -> None:
    server.enqueue(Reply(text="unused"))
    with pytest.raises(ollama.ResponseError) as info:
        await client.chat(model="mistral", messages=MESSAGES)
    assert info.value.status_code == 404
    assert info.value.error == model_not_found_message("mistral")
    assert server.pending == 1
    # A tag-less name means :latest, as in Ollama.
    assert (await client.chat(model="llama3.2:latest", messages=MESSAGES)).message.content == "unused"


@pytest.mark.parametrize(
    ("fault", "status", "text"),
    [
        (Fault("rate_limit", retry_after=2), 429, "too many requests"),
        (Fault("overloaded"), 503, "server busy"),
        (Fault("server_error"), 500, "llama runner"),
        (Fault("not_found"), 404, 'model "llama3.2" not found, try pulling it first'),
    ],
)
async def test_faults_are_ollama_errors(
    server: OllamaServer, client: Any, fault: Fault, status: int, text: str
) -> None:
    server.enqueue(fault)
    with pytest.raises(ollama.ResponseError) as info:
        await client.chat(model=MODEL, messages=MESSAGES)
    assert info.value.status_code == status and text in info.value.error


async def test_rate_limit_sends_retry_after(server: OllamaServer) -> None:
    import httpx

    server.enqueue(Fault("rate_limit", retry_after=2))
    async with httpx.AsyncClient(base_url=server.base_url) as raw:
        reply = await raw.post("/api/chat", json={"model": MODEL, "messages": MESSAGES})
    assert reply.status_code == 429 and reply.headers["retry-after"] == "2"
    assert reply.json() == {"error": "too many requests"}


async def test_dropped_connection_is_the_sdk_transport_error(server: OllamaServer, client: Any) -> None:
    import httpx

    server.enqueue(Fault("drop"))
    with pytest.raises(httpx.RemoteProtocolError):
        await client.chat(model=MODEL, messages=MESSAGES)


async def test_malformed_body_and_stream_error_line(server: OllamaServer, client: Any) -> None:
    server.enqueue(Response(body=b"{not json"))
    with pytest.raises(ValueError):
        await client.chat(model=MODEL, messages=MESSAGES)
    # Ollama reports an error met mid-stream as a JSON line with an "error" key (status 200).
    server.enqueue(StreamResponse([ndjson_frame({"error": "an error was encountered while running the model"})]))
    with pytest.raises(ollama.ResponseError, match="while running the model"):
        async for _ in await client.chat(model=MODEL, messages=MESSAGES, stream=True):
            pass


async def test_tags_show_and_root(server: OllamaServer, client: Any) -> None:
    listed = await client.list()
    assert [m.model for m in listed.models] == ["llama3.2:latest", "qwen3:8b"]
    shown = await client.show(MODEL)
    assert "tools" in (shown.capabilities or [])
    with pytest.raises(ollama.ResponseError) as info:
        await client.show("nope")
    assert info.value.status_code == 404
    assert [r.route for r in server.requests] == ["tags", "show", "show"]


async def test_stall_then_disconnect_is_seen(server: OllamaServer, client: Any) -> None:
    server.enqueue(Reply(text="a b c d e f", stall_after_chunks=2))
    stream = await client.chat(model=MODEL, messages=MESSAGES, stream=True)
    first = await stream.__anext__()
    assert first.message.content == "a "
    await stream.aclose()
    await asyncio.wait_for(server.requests[0].disconnected.wait(), 10)


async def test_format_takes_json_or_a_schema_and_refuses_anything_else(server: OllamaServer, client: Any) -> None:
    schema = {"type": "object", "properties": {"answer": {"type": "string"}}, "required": ["answer"]}
    server.enqueue(Reply(text='{"answer": "hi"}'), Reply(text="{}"))
    assert (await client.chat(model=MODEL, messages=MESSAGES, format=schema)).message.content == '{"answer": "hi"}'
    assert server.decode(server.requests[0]).json_schema == schema
    await client.chat(model=MODEL, messages=MESSAGES, format="json")
    # The SDK's typed `format` allows only "", "json" or a schema: a bad one goes as plain HTTP.
    async with httpx.AsyncClient(base_url=server.base_url) as http:
        response = await http.post("/api/chat", json={"model": MODEL, "messages": MESSAGES, "format": "yaml"})
    assert response.status_code == 500
    assert response.json() == {"error": 'invalid format: "\\"yaml\\""; expected "json" or a valid JSON Schema object'}
    assert server.pending == 0


async def test_tools_for_a_model_without_the_tools_capability_are_refused() -> None:
    tool = {"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {}}}}
    async with (
        OllamaServer(models=["smollm2:135m"], capabilities={"smollm2:135m": ["completion"]}) as srv,
        ollama.AsyncClient(host=srv.base_url) as sdk,
    ):
        with pytest.raises(ollama.ResponseError) as info:
            await sdk.chat(model="smollm2:135m", messages=MESSAGES, tools=[tool])
        assert info.value.status_code == 400
        assert info.value.error == "registry.ollama.ai/library/smollm2:135m does not support tools"
        srv.enqueue(Reply(text="hi"))
        assert (await sdk.chat(model="smollm2:135m", messages=MESSAGES)).message.content == "hi"
