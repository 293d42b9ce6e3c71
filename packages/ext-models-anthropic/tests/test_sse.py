"""The client's own decoding of the streamed body (`_sse.sse_json_events`), on the wire: line endings, events
split across HTTP chunks anywhere (between CR and LF too), comments, pings, unnamed events, multi-line data."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import anthropic
import httpx2
import pytest

from ext.core import CreateResult, StreamChunk, UserMessage
from ext.models.anthropic import AnthropicChatCompletionClient
from ext.models.anthropic._sse import sse_json_events
from ext.testing.script import Reply, ToolCallSpec
from ext.testing.servers import StreamResponse
from ext.testing.servers.anthropic import AnthropicServer, anthropic_stream_events

MODEL = "claude-sonnet-5-5"
KEY = "sk-ant-test"
HELLO = [UserMessage(content="Hi")]
REPLY = Reply(chunks=["Hel", "lo ", "wör", "ld"], completion_tokens=4)


@pytest.fixture
async def server() -> AsyncIterator[AnthropicServer]:
    async with AnthropicServer(api_key=KEY) as srv:
        yield srv


@pytest.fixture
async def client(server: AnthropicServer) -> AsyncIterator[AnthropicChatCompletionClient]:
    c = AnthropicChatCompletionClient(MODEL, max_tokens=1024, base_url=server.base_url, api_key=KEY, max_retries=0)
    try:
        yield c
    finally:
        await c.close()


def events(reply: Reply = REPLY) -> list[dict[str, Any]]:
    return [event for frame in anthropic_stream_events(reply, MODEL, "msg_1") for event in frame]


def encode(event: dict[str, Any], newline: str = "\n") -> bytes:
    return f"event: {event['type']}{newline}data: {json.dumps(event)}{newline}{newline}".encode()


async def stream(client: AnthropicChatCompletionClient) -> tuple[list[str], CreateResult]:
    items = [item async for item in client.create_stream(HELLO)]
    last = items[-1]
    assert isinstance(last, CreateResult)
    return [i.content for i in items[:-1] if isinstance(i, StreamChunk)], last


@pytest.mark.parametrize("newline", ["\n", "\r\n", "\r"])
async def test_every_line_ending(server: AnthropicServer, client: AnthropicChatCompletionClient, newline: str) -> None:
    server.enqueue(StreamResponse([encode(e, newline) for e in events()]))
    chunks, result = await stream(client)
    assert chunks == ["Hel", "lo ", "wör", "ld"]
    assert result.content == "Hello wörld"
    assert result.usage.completion_tokens == 4


@pytest.mark.parametrize("size", [1, 2, 3, 7, 64])
@pytest.mark.parametrize("newline", ["\n", "\r\n"])
async def test_events_split_anywhere(
    server: AnthropicServer, client: AnthropicChatCompletionClient, size: int, newline: str
) -> None:
    # Byte-sized pieces split "\r\n" in two and "ö" (two UTF-8 bytes) too.
    body = b"".join(encode(e, newline) for e in events())
    server.enqueue(StreamResponse([body[i : i + size] for i in range(0, len(body), size)]))
    chunks, result = await stream(client)
    assert chunks == ["Hel", "lo ", "wör", "ld"]
    assert result.content == "Hello wörld"


async def test_comments_pings_unnamed_events_and_multiline_data(
    server: AnthropicServer, client: AnthropicChatCompletionClient
) -> None:
    frames: list[bytes] = [b": a comment line\n\n"]
    for i, event in enumerate(events()):
        if event["type"] == "content_block_delta" and i % 2:
            # The JSON spread over three data lines (joined with LF, which JSON reads as whitespace); no space
            # after one colon.
            text = json.dumps(event, indent=1).split("\n")
            head, middle, tail = text[0], "\n".join(text[1:-1]), text[-1]
            data = "".join(f"data: {line}\n" for line in middle.split("\n"))
            frames.append(f"event:{event['type']}\ndata: {head}\n{data}data: {tail}\n\n".encode())
        else:
            frames.append(encode(event))
        frames.append(b'event: ping\ndata: {"type": "ping"}\n\n')
        # An event without a name is skipped, as by the SDK's stream.
        frames.append(
            b'data: {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "X"}}\n\n'
        )
    server.enqueue(StreamResponse(frames))
    chunks, result = await stream(client)
    assert chunks == ["Hel", "lo ", "wör", "ld"]
    assert result.content == "Hello wörld"


async def test_tool_use_stream_decodes(server: AnthropicServer, client: AnthropicChatCompletionClient) -> None:
    reply = Reply(tool_calls=[ToolCallSpec(name="add", arguments={"a": 1, "b": 2})])
    body = b"".join(encode(e, "\r\n") for e in events(reply))
    server.enqueue(StreamResponse([body[i : i + 5] for i in range(0, len(body), 5)]))
    _, result = await stream(client)
    assert isinstance(result.content, list)
    assert [(c.name, json.loads(c.arguments)) for c in result.content] == [("add", {"a": 1, "b": 2})]
    assert result.finish_reason == "function_calls"


async def test_error_event_that_is_not_json(server: AnthropicServer, client: AnthropicChatCompletionClient) -> None:
    first = [e for e in events() if e["type"] in ("message_start", "content_block_start")]
    server.enqueue(StreamResponse([*(encode(e) for e in first), b"event: error\ndata: upstream broke\n\n"]))
    with pytest.raises(anthropic.APIStatusError, match="upstream broke") as info:
        await stream(client)
    assert info.value.body == "upstream broke"


async def test_stream_without_message_stop_is_an_incomplete_stream(
    server: AnthropicServer, client: AnthropicChatCompletionClient
) -> None:
    # The last event lacks its blank line, so it never completes: the stream ends before message_stop.
    body = b"".join(encode(e) for e in events())
    server.enqueue(StreamResponse([body[:-2]]))
    with pytest.raises(ConnectionError, match="message_stop"):
        await stream(client)


# --- against the SDK's own decoder, on the same bytes ---------------------------------------------------


def _tricky_bodies() -> list[tuple[str, list[bytes]]]:
    plain = [encode(e) for e in events(Reply(chunks=["Hel", "lo ", "wör", "ld"], thought="hm"))]
    crlf = b"".join(encode(e, "\r\n") for e in events())
    cr = b"".join(encode(e, "\r") for e in events(Reply(tool_calls=[ToolCallSpec("add", {"a": 1, "b": 2})])))
    noisy: list[bytes] = [b": comment\n\n"]
    for event in events():
        noisy += [encode(event), b'event: ping\ndata: {"type": "ping"}\n\n']
        noisy.append(b'data: {"type": "content_block_delta", "index": 0}\n\n')  # no event name
    multiline = [
        f"event:{e['type']}\n" + "".join(f"data: {line}\n" for line in json.dumps(e, indent=1).split("\n")) + "\n"
        for e in events()
    ]
    return [
        ("plain", plain),
        ("crlf split in 1-byte pieces", [crlf[i : i + 1] for i in range(len(crlf))]),
        ("cr split in 7-byte pieces", [cr[i : i + 7] for i in range(0, len(cr), 7)]),
        ("comments, pings, unnamed events", noisy),
        ("multi-line data", [m.encode() for m in multiline]),
    ]


@pytest.mark.parametrize(("name", "frames"), _tricky_bodies(), ids=[n for n, _ in _tricky_bodies()])
async def test_decoder_matches_the_sdk_on_the_same_bytes(name: str, frames: list[bytes]) -> None:
    """The hand-written decoder yields exactly the events the SDK's own stream yields (`event.to_dict()`)."""
    async with AnthropicServer(api_key=KEY, default=lambda request: StreamResponse(list(frames))) as server:
        async with anthropic.AsyncAnthropic(base_url=server.base_url, api_key=KEY, max_retries=0) as sdk:
            stream = await sdk.messages.create(
                model=MODEL, max_tokens=10, messages=[{"role": "user", "content": "Hi"}], stream=True
            )
            theirs = [event.to_dict() async for event in stream]
        async with httpx2.AsyncClient() as http:
            headers = {"x-api-key": KEY, "anthropic-version": "2023-06-01"}
            request = {
                "model": MODEL,
                "max_tokens": 10,
                "messages": [{"role": "user", "content": "Hi"}],
                "stream": True,
            }
            url = server.base_url + "/v1/messages"
            async with http.stream("POST", url, json=request, headers=headers) as response:
                assert response.status_code == 200
                ours = [event async for event in sse_json_events(response)]
    assert theirs, "the SDK decoded no events"
    assert ours == theirs
