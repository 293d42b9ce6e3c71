"""The client's own decoding of the event-stream body (`_eventstream`), on the wire against BedrockServer:
messages split across HTTP chunks anywhere, every header value type, other event types, CRC checks,
exception and error messages."""

from __future__ import annotations

import base64
import json
import struct
import uuid
import zlib
from collections.abc import AsyncIterator
from typing import Any

import aioboto3
import botocore.eventstream
import botocore.exceptions
import pytest

from ext.core import CreateResult, StreamChunk, UserMessage
from ext.models.bedrock import AnthropicBedrockChatCompletionClient
from ext.models.bedrock._eventstream import EventStreamFramingError, anthropic_events
from ext.testing.script import Reply, ToolCallSpec
from ext.testing.servers import StreamResponse
from ext.testing.servers.anthropic import anthropic_stream_events
from ext.testing.servers.bedrock import EVENT_STREAM, BedrockServer

ACCESS = "AKIDEVENTSTREAM00001"
SECRET = "eventstream-secret"
REGION = "us-east-1"
MODEL = "us.anthropic.claude-sonnet-5-5-v1:0"
HELLO = [UserMessage(content="Hi")]
REPLY = Reply(chunks=["Hel", "lo ", "wör", "ld"], completion_tokens=4)


@pytest.fixture
async def server() -> AsyncIterator[BedrockServer]:
    async with BedrockServer(access_key=ACCESS, secret_key=SECRET, region=REGION) as srv:
        yield srv


@pytest.fixture
async def client(server: BedrockServer) -> AsyncIterator[AnthropicBedrockChatCompletionClient]:
    c = AnthropicBedrockChatCompletionClient(
        MODEL,
        max_tokens=1024,
        aws_region=REGION,
        aws_access_key=ACCESS,
        aws_secret_key=SECRET,
        endpoint_url=server.base_url,
        max_retries=0,
    )
    try:
        yield c
    finally:
        await c.close()


class OtherBackendResponse:
    """Stands for the HTTP response of a backend other than aiohttp (aiobotocore also has an httpx one): the same
    body, but not an `aiohttp.ClientResponse`."""

    def __init__(self, raw: Any) -> None:
        self._raw = raw

    def __getattr__(self, name: str) -> Any:
        return getattr(self._raw, name)


@pytest.fixture
async def other_backend_client(server: BedrockServer) -> AsyncIterator[AnthropicBedrockChatCompletionClient]:
    """A client whose stream responses do not come from aiohttp, set up through the SDK's own event system (a
    session handler on botocore's `after-call` event, which runs before the client's)."""
    session = aioboto3.Session(aws_access_key_id=ACCESS, aws_secret_access_key=SECRET, region_name=REGION)

    def other_backend(http_response: Any, **_: Any) -> None:
        http_response.raw = OtherBackendResponse(http_response.raw)

    session.events.register("after-call.bedrock-runtime.InvokeModelWithResponseStream", other_backend)
    c = AnthropicBedrockChatCompletionClient(
        MODEL, max_tokens=1024, session=session, endpoint_url=server.base_url, max_retries=0
    )
    try:
        yield c
    finally:
        await c.close()


def header(name: str, kind: int, value: bytes) -> bytes:
    return struct.pack(">B", len(name)) + name.encode() + bytes([kind]) + value


def text_header(name: str, value: str) -> bytes:
    raw = value.encode()
    return header(name, 7, struct.pack(">H", len(raw)) + raw)


def message(headers: bytes, payload: bytes) -> bytes:
    prelude = struct.pack(">II", 16 + len(headers) + len(payload), len(headers))
    head = prelude + struct.pack(">I", zlib.crc32(prelude))
    body = head + headers + payload
    return body + struct.pack(">I", zlib.crc32(body))


def chunk(event: dict[str, Any], extra_headers: bytes = b"") -> bytes:
    data = base64.b64encode(json.dumps(event).encode()).decode()
    headers = (
        text_header(":event-type", "chunk")
        + text_header(":content-type", "application/json")
        + text_header(":message-type", "event")
        + extra_headers
    )
    return message(headers, json.dumps({"bytes": data}).encode())


def body(reply: Reply = REPLY) -> bytes:
    return b"".join(chunk(e) for frame in anthropic_stream_events(reply, "claude", "msg_1") for e in frame)


def respond(frames: list[bytes]) -> StreamResponse:
    return StreamResponse(frames, content_type=EVENT_STREAM, headers={"x-amzn-RequestId": str(uuid.uuid4())})


async def stream(client: AnthropicBedrockChatCompletionClient) -> tuple[list[str], CreateResult]:
    items = [item async for item in client.create_stream(HELLO)]
    last = items[-1]
    assert isinstance(last, CreateResult)
    return [i.content for i in items[:-1] if isinstance(i, StreamChunk)], last


@pytest.mark.parametrize("size", [1, 5, 13, 200])
async def test_messages_split_anywhere(
    server: BedrockServer, client: AnthropicBedrockChatCompletionClient, size: int
) -> None:
    data = body()
    server.enqueue(respond([data[i : i + size] for i in range(0, len(data), size)]))
    chunks, result = await stream(client)
    assert chunks == ["Hel", "lo ", "wör", "ld"]
    assert result.content == "Hello wörld" and result.usage.completion_tokens == 4


async def test_every_header_type_and_other_events(
    server: BedrockServer, client: AnthropicBedrockChatCompletionClient
) -> None:
    every = (
        header("t", 0, b"")
        + header("f", 1, b"")
        + header("b", 2, b"\xff")
        + header("s", 3, struct.pack(">h", -2))
        + header("i", 4, struct.pack(">i", 7))
        + header("l", 5, struct.pack(">q", -9))
        + header("raw", 6, struct.pack(">H", 3) + b"\x00\x01\x02")
        + header("ts", 8, struct.pack(">q", 1_700_000_000_000))
        + header("id", 9, uuid.uuid4().bytes)
    )
    events = [e for frame in anthropic_stream_events(REPLY, "claude", "msg_1") for e in frame]
    frames = [chunk(events[0], every)]
    other = text_header(":event-type", "metadata") + text_header(":message-type", "event")
    frames.append(message(other, b'{"ignored": true}'))
    frames += [chunk(e) for e in events[1:]]
    server.enqueue(respond(frames))
    chunks, result = await stream(client)
    assert chunks == ["Hel", "lo ", "wör", "ld"] and result.content == "Hello wörld"


async def test_tool_use_stream(server: BedrockServer, client: AnthropicBedrockChatCompletionClient) -> None:
    data = body(Reply(tool_calls=[ToolCallSpec(name="add", arguments={"a": 1, "b": 2})]))
    server.enqueue(respond([data[i : i + 7] for i in range(0, len(data), 7)]))
    _, result = await stream(client)
    assert isinstance(result.content, list)
    assert [(c.name, json.loads(c.arguments)) for c in result.content] == [("add", {"a": 1, "b": 2})]


@pytest.mark.parametrize("where", ["prelude", "message"])
async def test_corrupt_message_is_a_connection_error(
    server: BedrockServer, client: AnthropicBedrockChatCompletionClient, where: str
) -> None:
    data = bytearray(body())
    data[5 if where == "prelude" else 40] ^= 0xFF
    server.enqueue(respond([bytes(data)]))
    with pytest.raises(EventStreamFramingError, match="corrupt") as info:
        await stream(client)
    assert isinstance(info.value, botocore.exceptions.ConnectionClosedError)


async def test_error_message_raises_event_stream_error(
    server: BedrockServer, client: AnthropicBedrockChatCompletionClient
) -> None:
    events = [e for frame in anthropic_stream_events(REPLY, "claude", "msg_1") for e in frame]
    error = (
        text_header(":message-type", "error")
        + text_header(":error-code", "InternalFailure")
        + text_header(":error-message", "it broke")
    )
    first_delta = next(i for i, e in enumerate(events) if e["type"] == "content_block_delta")
    server.enqueue(respond([*(chunk(e) for e in events[: first_delta + 1]), message(error, b"")]))
    seen: list[str] = []
    with pytest.raises(botocore.exceptions.EventStreamError) as info:
        async for item in client.create_stream(HELLO):
            if isinstance(item, StreamChunk):
                seen.append(item.content)
    assert info.value.response["Error"] == {"Code": "InternalFailure", "Message": "it broke"}
    assert seen == ["Hel"]


async def test_exception_message_matches_botocore(
    server: BedrockServer, client: AnthropicBedrockChatCompletionClient
) -> None:
    server.enqueue(server.stream_exception("throttlingException", "Too many tokens", text="partial"))
    with pytest.raises(botocore.exceptions.EventStreamError) as info:
        await stream(client)
    assert info.value.response["Error"] == {"Code": "throttlingException", "Message": "Too many tokens"}
    assert "InvokeModelWithResponseStream" in str(info.value)


# --- against botocore's own parser, on the same bytes ------------------------------------------------------


class _Pieces:
    """The body in fixed-size pieces, as aiohttp's `StreamReader.iter_chunks()` hands it to the decoder."""

    def __init__(self, data: bytes, size: int) -> None:
        self._pieces = [data[i : i + size] for i in range(0, len(data), size)]

    async def iter_chunks(self) -> AsyncIterator[tuple[bytes, bool]]:
        for piece in self._pieces:
            yield piece, True


def _botocore_events(data: bytes, size: int) -> list[Any]:
    buffer = botocore.eventstream.EventStreamBuffer()
    found = []
    for i in range(0, len(data), size):
        buffer.add_data(data[i : i + size])
        for event in buffer:
            if event.headers.get(":event-type") == "chunk":
                found.append(json.loads(base64.b64decode(json.loads(event.payload)["bytes"])))
    return found


@pytest.mark.parametrize("size", [1, 7, 64, 100_000])
@pytest.mark.parametrize(
    "reply",
    [REPLY, Reply(thought="hm", text="ok"), Reply(tool_calls=[ToolCallSpec(name="add", arguments={"a": 1, "b": 2})])],
    ids=["text", "thinking", "tool_use"],
)
async def test_decoder_matches_botocore_on_the_same_bytes(size: int, reply: Reply) -> None:
    every = header("b", 2, b"\xff") + header("l", 5, struct.pack(">q", -9)) + header("id", 9, uuid.uuid4().bytes)
    events = [e for frame in anthropic_stream_events(reply, "claude", "msg_1") for e in frame]
    other = message(text_header(":event-type", "metadata") + text_header(":message-type", "event"), b"{}")
    data = chunk(events[0], every) + other + b"".join(chunk(e) for e in events[1:])
    ours = [event async for event in anthropic_events(_Pieces(data, size), "http://127.0.0.1")]
    assert ours == _botocore_events(data, size) == events


async def test_botocore_event_stream_when_the_response_is_not_aiohttp(
    server: BedrockServer,
    client: AnthropicBedrockChatCompletionClient,
    other_backend_client: AnthropicBedrockChatCompletionClient,
) -> None:
    """The public fallback: botocore's own event stream gives the same chunks and result as the client's
    decoder; a corrupt message shows which decoder ran (botocore's checksum error there, ours here)."""
    data = body()
    for _ in range(2):
        server.enqueue(respond([data[i : i + 7] for i in range(0, len(data), 7)]))

    ours = await stream(client)
    botocores = await stream(other_backend_client)

    assert botocores[0] == ours[0] == ["Hel", "lo ", "wör", "ld"]
    assert botocores[1].content == ours[1].content == "Hello wörld"
    assert botocores[1].usage == ours[1].usage
    assert botocores[1].finish_reason == ours[1].finish_reason

    corrupt = bytearray(data)
    corrupt[40] ^= 0xFF
    server.enqueue(respond([bytes(corrupt)]), respond([bytes(corrupt)]))
    with pytest.raises(botocore.eventstream.ChecksumMismatch):
        await stream(other_backend_client)
    with pytest.raises(EventStreamFramingError):
        await stream(client)
