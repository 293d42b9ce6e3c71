"""The loopback HTTP/1.1 layer, driven over raw sockets."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

import pytest

from ext.testing.script import Fault, NeutralRequest, Reply
from ext.testing.servers import (
    Headers,
    LoopbackServer,
    OpenAIServer,
    RecordedRequest,
    Response,
    Route,
    StreamResponse,
    json_response,
    ndjson_frame,
    sse_frame,
)


@dataclass
class RawResponse:
    status: int
    headers: dict[str, str]
    body: bytes


class RawConnection:
    """A hand-driven HTTP/1.1 client connection for tests that need exact bytes on the wire."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer

    async def send(self, data: bytes) -> None:
        self.writer.write(data)
        await self.writer.drain()

    async def read_response(self) -> RawResponse:
        head = await asyncio.wait_for(self.reader.readuntil(b"\r\n\r\n"), 5)
        lines = head.decode("latin-1").split("\r\n")
        status = int(lines[0].split(" ")[1])
        headers: dict[str, str] = {}
        for line in lines[1:]:
            if line:
                name, _, value = line.partition(":")
                headers[name.strip().lower()] = value.strip()
        if status == 100:
            return RawResponse(status, headers, b"")
        if headers.get("transfer-encoding") == "chunked":
            body = b""
            while True:
                size = int((await self.reader.readuntil(b"\r\n"))[:-2], 16)
                if size == 0:
                    await self.reader.readuntil(b"\r\n")
                    break
                body += await self.reader.readexactly(size)
                assert await self.reader.readexactly(2) == b"\r\n"
        elif "content-length" in headers:
            body = await self.reader.readexactly(int(headers["content-length"]))
        else:
            body = await self.reader.read()
        return RawResponse(status, headers, body)

    async def at_eof(self) -> bool:
        """Wait for the server to close the connection (True) or send more data (False)."""
        data = await asyncio.wait_for(self.reader.read(1), 5)
        return data == b""

    async def close(self) -> None:
        self.writer.close()
        try:
            await self.writer.wait_closed()
        except ConnectionError:
            pass


RawConnect = Callable[[int], Awaitable[RawConnection]]


@pytest.fixture
async def raw_connect() -> AsyncIterator[RawConnect]:
    connections: list[RawConnection] = []

    async def connect(port: int) -> RawConnection:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        conn = RawConnection(reader, writer)
        connections.append(conn)
        return conn

    yield connect
    for conn in connections:
        await conn.close()


BODY = b'{"model":"m","messages":[{"role":"user","content":"Hi"}]}'


def post(path: str = "/v1/chat/completions", body: bytes = BODY, extra: str = "") -> bytes:
    head = f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n"
    return head.encode() + extra.encode() + b"\r\n" + body


async def test_chunked_request_body(server: OpenAIServer, raw_connect: RawConnect) -> None:
    server.enqueue(Reply(text="chunked ok"))
    conn = await raw_connect(server.port)
    pieces = [BODY[:10], BODY[10:11], BODY[11:]]
    chunked = b"".join(b"%x;ext=1\r\n%s\r\n" % (len(p), p) for p in pieces) + b"0\r\nX-Trailer: t\r\n\r\n"
    await conn.send(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n")
    await conn.send(chunked)
    response = await conn.read_response()
    assert response.status == 200
    assert json.loads(response.body)["choices"][0]["message"]["content"] == "chunked ok"
    request = server.requests[0]
    assert request.body == BODY
    assert request.json == json.loads(BODY)
    assert request.headers["transfer-encoding"] == "chunked"


@pytest.mark.parametrize(
    "raw",
    [
        b"NOT A VALID REQUEST LINE\r\n\r\n",
        b"get /v1/models HTTP/1.1\r\n\r\n",
        b"GET /v1/models HTTP/1.1\r\nBad Header Line\r\n\r\n",
        b"GET /v1/models HTTP/1.1\r\nName : value\r\n\r\n",
        b"POST /v1/chat/completions HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nabc\r\n0\r\n\r\n",
        b"POST /v1/chat/completions HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n0x3\r\nabc\r\n0\r\n\r\n",
        b"POST /v1/chat/completions HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabcXY0\r\n\r\n",
        b"POST /v1/chat/completions HTTP/1.1\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\nabc",
        b"POST /v1/chat/completions HTTP/1.1\r\nContent-Length: -1\r\n\r\n",
        b"POST /v1/chat/completions HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n",
    ],
)
async def test_malformed_request_is_400_and_server_keeps_running(
    server: OpenAIServer, raw_connect: RawConnect, raw: bytes
) -> None:
    conn = await raw_connect(server.port)
    await conn.send(raw)
    response = await conn.read_response()
    assert response.status == 400
    assert response.headers["connection"] == "close"
    assert json.loads(response.body)["error"]["message"]
    assert await conn.at_eof()
    server.enqueue(Reply(text="still alive"))
    again = await raw_connect(server.port)
    await again.send(post())
    response = await again.read_response()
    assert response.status == 200
    assert json.loads(response.body)["choices"][0]["message"]["content"] == "still alive"


async def test_unsupported_version_and_incomplete_body(server: OpenAIServer, raw_connect: RawConnect) -> None:
    conn = await raw_connect(server.port)
    await conn.send(b"GET /v1/models HTTP/2.0\r\n\r\n")
    assert (await conn.read_response()).status == 505
    conn = await raw_connect(server.port)
    await conn.send(b"POST /v1/chat/completions HTTP/1.1\r\nContent-Length: 10\r\n\r\nabc")
    conn.writer.write_eof()
    assert (await conn.read_response()).status == 400
    assert server.requests == []


async def test_unknown_route_is_404_and_connection_stays_open(server: OpenAIServer, raw_connect: RawConnect) -> None:
    server.enqueue(Reply(text="after 404"))
    conn = await raw_connect(server.port)
    await conn.send(post("/v1/nope"))
    response = await conn.read_response()
    assert response.status == 404
    assert json.loads(response.body) == {
        "error": {
            "message": "Invalid URL (POST /v1/nope)",
            "type": "invalid_request_error",
            "param": None,
            "code": None,
        }
    }
    await conn.send(post("/chat/completions"))  # the un-prefixed path is accepted too
    response = await conn.read_response()
    assert response.status == 200
    assert server.connections_opened == 1
    assert [r.route for r in server.requests] == [None, "chat"]


async def test_pipelined_requests_and_query(server: OpenAIServer, raw_connect: RawConnect) -> None:
    server.enqueue(Reply(text="one"), Reply(text="two"))
    conn = await raw_connect(server.port)
    await conn.send(post("/v1/chat/completions?a=1&a=2&b=") + post())
    first = await conn.read_response()
    second = await conn.read_response()
    assert json.loads(first.body)["choices"][0]["message"]["content"] == "one"
    assert json.loads(second.body)["choices"][0]["message"]["content"] == "two"
    assert server.requests[0].query == {"a": ["1", "2"], "b": [""]}
    assert server.requests[0].path == "/v1/chat/completions"
    assert server.requests[0].query_value("a") == "1"


async def test_pipelined_request_during_delay(server: OpenAIServer, raw_connect: RawConnect) -> None:
    server.enqueue(Reply(text="slow", delay=0.05), Reply(text="fast"))
    conn = await raw_connect(server.port)
    await conn.send(post())
    await server.wait_for_requests(1)
    await conn.send(post())  # arrives while the first response is delayed: must not be lost
    first = await conn.read_response()
    second = await conn.read_response()
    assert json.loads(first.body)["choices"][0]["message"]["content"] == "slow"
    assert json.loads(second.body)["choices"][0]["message"]["content"] == "fast"
    assert not server.requests[0].disconnected.is_set()


async def test_connection_close_header(server: OpenAIServer, raw_connect: RawConnect) -> None:
    server.enqueue(Reply(text="bye"))
    conn = await raw_connect(server.port)
    await conn.send(post(extra="Connection: close\r\n"))
    response = await conn.read_response()
    assert response.status == 200
    assert response.headers["connection"] == "close"
    assert await conn.at_eof()


async def test_http10_stream_is_close_delimited(server: OpenAIServer, raw_connect: RawConnect) -> None:
    server.enqueue(Reply(text="old client"))
    body = b'{"model":"m","messages":[{"role":"user","content":"Hi"}],"stream":true}'
    conn = await raw_connect(server.port)
    await conn.send(b"POST /v1/chat/completions HTTP/1.0\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))
    response = await conn.read_response()
    assert response.status == 200
    assert "transfer-encoding" not in response.headers
    assert response.headers["connection"] == "close"
    assert response.headers["content-type"] == "text/event-stream"
    assert response.body.endswith(b"data: [DONE]\n\n")


async def test_expect_100_continue(server: OpenAIServer, raw_connect: RawConnect) -> None:
    server.enqueue(Reply(text="continued"))
    conn = await raw_connect(server.port)
    head = f"POST /v1/chat/completions HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: {len(BODY)}\r\n\r\n"
    await conn.send(head.encode())
    interim = await conn.read_response()
    assert interim.status == 100
    await conn.send(BODY)
    response = await conn.read_response()
    assert json.loads(response.body)["choices"][0]["message"]["content"] == "continued"


async def test_hang_and_client_close_sets_disconnected(server: OpenAIServer, raw_connect: RawConnect) -> None:
    server.enqueue(Fault("hang"))
    conn = await raw_connect(server.port)
    await conn.send(post())
    (request,) = await server.wait_for_requests(1)
    assert not request.disconnected.is_set()
    await conn.close()
    await asyncio.wait_for(request.disconnected.wait(), 5)
    assert not request.completed


async def test_stop_closes_idle_and_hanging_connections(raw_connect: RawConnect) -> None:
    server = OpenAIServer(default=Reply(text="x"))
    with pytest.raises(RuntimeError, match="not started"):
        _ = server.base_url
    await server.start()
    assert server.base_url == f"http://127.0.0.1:{server.port}"
    idle = await raw_connect(server.port)
    await idle.send(post())
    assert (await idle.read_response()).status == 200
    server.enqueue(Fault("hang"))
    hanging = await raw_connect(server.port)
    await hanging.send(post())
    await server.wait_for_requests(2)
    assert server.open_connections == 2
    await server.stop()
    assert await idle.at_eof()
    assert await hanging.at_eof()
    assert not server.requests[1].disconnected.is_set()  # the server closed it, not the client
    assert server.open_connections == 0
    await server.stop()  # idempotent
    with pytest.raises(OSError):
        await asyncio.open_connection("127.0.0.1", server.port)


async def test_listens_on_loopback_only(server: OpenAIServer) -> None:
    assert server._server is not None
    addresses = {sock.getsockname()[0] for sock in server._server.sockets}
    assert addresses == {"127.0.0.1"}


async def test_wait_for_requests(server: OpenAIServer, raw_connect: RawConnect) -> None:
    with pytest.raises(TimeoutError, match="expected 1 request"):
        await server.wait_for_requests(1, timeout=0.05)
    server.enqueue(Reply(text="a"))
    waiter = asyncio.create_task(server.wait_for_requests(1))
    conn = await raw_connect(server.port)
    await conn.send(post())
    requests = await asyncio.wait_for(waiter, 5)
    assert len(requests) == 1
    assert requests[0].path == "/v1/chat/completions"
    await conn.read_response()


async def test_reset_and_pending(server: OpenAIServer, raw_connect: RawConnect) -> None:
    server.default = Reply(text="d")
    server.enqueue(Reply(text="a"), Reply(text="b"))
    assert server.pending == 2
    conn = await raw_connect(server.port)
    await conn.send(post())
    await conn.read_response()
    assert server.pending == 1
    server.reset()
    assert server.pending == 0
    assert server.requests == []
    assert server.request_count == 0
    assert server.connections_opened == 0
    assert server.default == Reply(text="d")
    with pytest.raises(TypeError, match="cannot enqueue"):
        server.enqueue("not a reply")  # type: ignore[arg-type]


def test_headers_case_insensitive() -> None:
    headers = Headers([("Content-Type", "a/b"), ("X-Multi", "1"), ("x-multi", "2")])
    assert headers["content-type"] == "a/b"
    assert headers["CONTENT-TYPE"] == "a/b"
    assert "X-MULTI" in headers
    assert headers["x-multi"] == "1, 2"
    assert headers.get_all("X-Multi") == ["1", "2"]
    assert headers.get("missing") is None
    assert len(headers) == 2
    assert headers.raw_items()[0] == ("Content-Type", "a/b")


def test_frame_helpers() -> None:
    assert sse_frame({"a": 1}) == b'data: {"a":1}\n\n'
    assert sse_frame("x\ny", event="message_start") == b"event: message_start\ndata: x\ndata: y\n\n"
    assert ndjson_frame({"done": True}) == b'{"done":true}\n'
    assert json_response({"k": "v"}, 201).body == b'{"k":"v"}'


class NDJSONServer(LoopbackServer):
    """A minimal protocol: NDJSON streams, a raw-bytes stream route, an unscripted route, 529 overloads."""

    overloaded_status = 529

    def routes(self) -> Sequence[Route]:
        return (
            Route("POST", "/api/chat", "chat"),
            Route("POST", "/bin/{name}/invoke", "binary"),
            Route("GET", "/health", "health", self._health),
            Route("GET", "/slow-health", "slow-health", self._slow_health),
        )

    def _health(self, request: RecordedRequest) -> Response:
        return json_response({"ok": True})

    async def _slow_health(self, request: RecordedRequest) -> Response:
        await asyncio.sleep(0)
        return json_response({"ok": "slow"})

    def render(self, reply: Reply, request: RecordedRequest) -> Response | StreamResponse:
        if request.route == "binary":
            frames = [b"\x00\x01" + piece.encode() for piece in reply.text_chunks]
            return StreamResponse(frames, content_type="application/vnd.amazon.eventstream")
        lines = [ndjson_frame({"message": {"content": piece}, "done": False}) for piece in reply.text_chunks]
        lines.append(ndjson_frame({"done": True, "done_reason": reply.resolved_finish_reason}))
        return StreamResponse(lines, content_type="application/x-ndjson")

    def render_fault(self, fault: Fault, request: RecordedRequest) -> Response:
        return json_response(
            {"error": fault.message or fault.kind}, self.fault_status(fault), self.fault_headers(fault)
        )

    def decode(self, request: RecordedRequest) -> NeutralRequest:
        body: dict[str, Any] = request.json if isinstance(request.json, dict) else {}
        return NeutralRequest(model=body.get("model"), raw=body)


async def test_custom_protocol_ndjson_binary_and_handlers(raw_connect: RawConnect) -> None:
    async with NDJSONServer() as server:
        server.enqueue(
            Reply(text="hello big world"),
            Reply(chunks=["ab", "cd"]),
            Fault("overloaded", retry_after=2),
            Reply(text="x", delay=0.01, stall_after_chunks=1),
        )
        conn = await raw_connect(server.port)
        await conn.send(post("/api/chat", b'{"model":"llama"}'))
        response = await conn.read_response()
        assert response.headers["content-type"] == "application/x-ndjson"
        lines = [json.loads(line) for line in response.body.splitlines()]
        assert "".join(line["message"]["content"] for line in lines[:-1]) == "hello big world"
        assert lines[-1] == {"done": True, "done_reason": "stop"}
        assert server.decode(server.requests[0]).model == "llama"

        await conn.send(post("/bin/my%20model/invoke", b""))
        response = await conn.read_response()
        assert response.body == b"\x00\x01ab\x00\x01cd"
        assert server.requests[1].params == {"name": "my model"}

        await conn.send(b"GET /health HTTP/1.1\r\n\r\nGET /slow-health HTTP/1.1\r\n\r\n")
        assert json.loads((await conn.read_response()).body) == {"ok": True}
        assert json.loads((await conn.read_response()).body) == {"ok": "slow"}
        assert server.pending == 2  # unscripted routes do not consume the script

        await conn.send(post("/api/chat", b"{}"))
        response = await conn.read_response()
        assert response.status == 529
        assert response.headers["retry-after"] == "2"
        assert json.loads(response.body) == {"error": "overloaded"}

        await conn.send(post("/api/chat", b"{}"))
        head = await asyncio.wait_for(conn.reader.readuntil(b"\r\n\r\n"), 5)
        assert b"transfer-encoding: chunked" in head
        first_chunk = await asyncio.wait_for(conn.reader.readuntil(b"}\n\r\n"), 5)
        assert b'"content":"x"' in first_chunk
        stalled = server.requests[-1]
        assert not stalled.disconnected.is_set()
        await conn.close()
        await asyncio.wait_for(stalled.disconnected.wait(), 5)

        other = await raw_connect(server.port)
        await other.send(post("/api/chat", b"{}"))
        response = await other.read_response()
        assert response.status == 500
        assert "script exhausted" in json.loads(response.body)["error"]
        assert response.headers["x-should-retry"] == "false"


async def test_verbatim_response_items(server: OpenAIServer, raw_connect: RawConnect) -> None:
    broken_sse = StreamResponse([b"data: {not json}\n\n", b"data: [DONE]\n\n"], headers={"x-edge": "1"})
    server.enqueue(
        Response(status=418, body=b"teapot", content_type="text/plain"),
        broken_sse,
        lambda request: Response(status=202, body=request.body),
    )
    conn = await raw_connect(server.port)
    await conn.send(post())
    first = await conn.read_response()
    assert (first.status, first.body, first.headers["content-type"]) == (418, b"teapot", "text/plain")
    await conn.send(post())
    second = await conn.read_response()
    assert second.body == b"data: {not json}\n\ndata: [DONE]\n\n"
    assert second.headers["x-edge"] == "1"
    await conn.send(post())
    third = await conn.read_response()
    assert (third.status, third.body) == (202, BODY)


async def test_record_false_only_counts(raw_connect: RawConnect) -> None:
    async with OpenAIServer(default=Reply(text="x"), record=False) as server:
        conn = await raw_connect(server.port)
        for _ in range(3):
            await conn.send(post())
            assert (await conn.read_response()).status == 200
        assert await server.wait_for_requests(3) == []
        assert server.request_count == 3
        assert server.requests == []


async def test_callable_error_is_a_clear_500(server: OpenAIServer, raw_connect: RawConnect) -> None:
    def broken(request: RecordedRequest) -> Reply:
        raise KeyError("no such field")

    server.enqueue(broken, Reply(text="next"))
    conn = await raw_connect(server.port)
    await conn.send(post())
    response = await conn.read_response()
    assert response.status == 500
    assert "KeyError('no such field')" in json.loads(response.body)["error"]["message"]
    assert response.headers["x-should-retry"] == "false"
    assert [type(e) for e in server.errors] == [KeyError]
    again = await raw_connect(server.port)
    await again.send(post("http://127.0.0.1/v1/chat/completions?x=1"))  # absolute-form target
    response = await again.read_response()
    assert json.loads(response.body)["choices"][0]["message"]["content"] == "next"
    assert server.requests[-1].path == "/v1/chat/completions"
    assert server.requests[-1].query == {"x": ["1"]}
