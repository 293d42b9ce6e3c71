"""Requests over real loopback sockets: what the server receives, and what the tool returns or raises."""

from __future__ import annotations

import asyncio
import http.server
import json
import socket
import threading
import time
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from ext.core import CancellationToken, ClientClosedError, ToolArgumentsError
from ext.testing.servers import Fault, LoopbackServer, Reply
from ext.tools.http import (
    HttpConnectionError,
    HttpResponseFormatError,
    HttpStatusError,
    HttpTimeoutError,
    HttpTool,
    HttpToolError,
)

ITEM_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "id": {"type": "string"},
        "q": {"type": "string"},
        "n": {"type": "integer"},
        "flag": {"type": "boolean"},
        "tags": {"type": "array", "items": {"type": "string"}},
        "opt": {"type": ["string", "null"]},
        "data": {"type": "object"},
    },
    "required": ["id"],
    "additionalProperties": False,
}


def tool_for(server: LoopbackServer, **fields: Any) -> HttpTool:
    base: dict[str, Any] = {
        "name": "items",
        "host": "127.0.0.1",
        "port": server.port,
        "json_schema": ITEM_SCHEMA,
        "path": "/items/{id}",
        "return_type": "json",
    }
    base.update(fields)
    return HttpTool(**base)


async def wait_until(predicate: Callable[[], bool], timeout: float = 5.0) -> None:
    """Poll a server-side condition with a deadline (the server offers no event for it)."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        await asyncio.sleep(0.005)


# -- methods, query string and body ---------------------------------------------------------------------------


async def test_get_sends_other_arguments_as_query_string(server: LoopbackServer) -> None:
    async with tool_for(server, method="GET") as tool:
        result = await tool.run_json(
            {"id": "7", "q": "a b&c=d#e", "n": 3, "flag": True, "tags": ["x", "y z"], "opt": None}
        )
    (request,) = server.requests
    assert request.method == "GET"
    assert request.path == "/items/7"
    assert request.query == {"q": ["a b&c=d#e"], "n": ["3"], "flag": ["true"], "tags": ["x", "y z"]}
    assert request.body == b""
    assert result["query"] == request.query


async def test_delete_sends_query_string(server: LoopbackServer) -> None:
    async with tool_for(server, method="DELETE") as tool:
        result = await tool.run_json({"id": "7", "q": "gone"})
    assert result["method"] == "DELETE"
    assert server.requests[0].query == {"q": ["gone"]}
    assert server.requests[0].body == b""


@pytest.mark.parametrize("method", ["POST", "PUT", "PATCH"])
async def test_body_methods_send_other_arguments_as_json(server: LoopbackServer, method: str) -> None:
    args = {"id": "7", "q": "ünï ✓", "n": 3, "flag": False, "opt": None, "data": {"k": [1, 2]}}
    async with tool_for(server, method=method) as tool:
        result = await tool.run_json(args)
    (request,) = server.requests
    assert request.method == method
    assert request.path == "/items/7"
    assert request.query == {}
    assert request.headers["content-type"] == "application/json"
    assert request.json == {"q": "ünï ✓", "n": 3, "flag": False, "opt": None, "data": {"k": [1, 2]}}
    assert result["json"] == request.json


async def test_post_without_other_arguments_sends_empty_object(server: LoopbackServer) -> None:
    async with tool_for(server) as tool:
        await tool.run_json({"id": "1"})
    assert server.requests[0].json == {}


async def test_get_without_arguments_has_no_query(server: LoopbackServer) -> None:
    schema = {"type": "object", "properties": {}}
    async with tool_for(server, method="GET", path="/echo", json_schema=schema) as tool:
        result = await tool.run_json({})
    assert result["path"] == "/echo"
    assert server.requests[0].query == {}


async def test_several_placeholders_and_literal_suffix(server: LoopbackServer) -> None:
    schema = {"type": "object", "properties": {"user": {"type": "string"}, "post": {"type": "integer"}}}
    async with tool_for(server, method="GET", path="/users/{user}/posts/{post}", json_schema=schema) as tool:
        result = await tool.run_json({"user": "ann", "post": 12})
    assert result["path"] == "/users/ann/posts/12"
    assert result["params"] == {"user": "ann", "post": "12"}
    schema = {"type": "object", "properties": {"name": {"type": "string"}}}
    async with tool_for(server, method="GET", path="/files/{name}.json", json_schema=schema) as tool:
        result = await tool.run_json({"name": ".."})
    assert server.requests[-1].path == "/files/%2E%2E.json"
    assert result["params"] == {"name": ".."}


# -- path placeholders cannot change the path or the query ----------------------------------------------------


@pytest.mark.parametrize(
    ("value", "wire"),
    [
        ("plain", "plain"),
        ("../", "..%2F"),
        ("..", "%2E%2E"),
        (".", "%2E"),
        ("...", "%2E%2E%2E"),
        ("../../admin", "..%2F..%2Fadmin"),
        ("a/b", "a%2Fb"),
        ("?admin=1", "%3Fadmin%3D1"),
        ("#frag", "%23frag"),
        ("%2F", "%252F"),
        ("%2e%2e", "%252e%252e"),
        ("a b", "a%20b"),
        ("ünï", "%C3%BCn%C3%AF"),
        ("a;b,c", "a%3Bb%2Cc"),
        ("\\..\\", "%5C..%5C"),
        ("x\r\nHost: evil", "x%0D%0AHost%3A%20evil"),
    ],
)
@pytest.mark.parametrize("method", ["GET", "POST"])
async def test_placeholder_values_are_percent_encoded(
    server: LoopbackServer, method: str, value: str, wire: str
) -> None:
    async with tool_for(server, method=method, path="/items/{id}/detail") as tool:
        result = await tool.run_json({"id": value})
    (request,) = server.requests
    assert request.path == f"/items/{wire}/detail"  # the raw path on the wire
    assert request.query == {}
    assert request.route == "/items/{id}/detail"
    assert result["params"] == {"id": value}  # the server decodes the segment back to the value


async def test_non_string_placeholder_values(server: LoopbackServer) -> None:
    schema = {"type": "object", "properties": {"id": {"type": ["integer", "boolean", "number"]}}}
    async with tool_for(server, method="GET", json_schema=schema) as tool:
        await tool.run_json({"id": 42})
        await tool.run_json({"id": True})
        await tool.run_json({"id": 1.5})
    assert [r.path for r in server.requests] == ["/items/42", "/items/true", "/items/1.5"]


async def test_missing_or_empty_placeholder_is_an_argument_error(server: LoopbackServer) -> None:
    schema = {"type": "object", "properties": {"id": {"type": ["string", "null"]}}}
    async with tool_for(server, json_schema=schema) as tool:
        with pytest.raises(ToolArgumentsError, match=r"argument 'id' is required \(it fills \{id\} in the path\)"):
            await tool.run_json({})
        with pytest.raises(ToolArgumentsError, match="argument 'id' is required"):
            await tool.run_json({"id": None})
        with pytest.raises(ToolArgumentsError, match="argument 'id' must not be empty"):
            await tool.run_json({"id": ""})
    assert server.requests == []


# -- argument validation --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({}, "missing required argument 'id'"),
        ({"id": 5}, "argument 'id' must be string"),
        ({"id": "1", "n": "three"}, "argument 'n' must be integer"),
        ({"id": "1", "n": True}, "argument 'n' must be integer"),
        ({"id": "1", "tags": ["ok", 2]}, "argument 'tags[1]' must be string"),
        ({"id": "1", "extra": 1}, "unexpected argument 'extra'"),
        ({"id": "1", "data": []}, "argument 'data' must be object"),
    ],
)
async def test_arguments_are_validated_before_any_request(
    server: LoopbackServer, args: dict[str, Any], message: str
) -> None:
    async with tool_for(server) as tool:
        with pytest.raises(ToolArgumentsError) as info:
            await tool.run_json(args)
    assert str(info.value).startswith("invalid arguments for tool 'items': ")
    assert message in str(info.value)
    assert server.requests == []


async def test_several_bad_arguments_are_all_named(server: LoopbackServer) -> None:
    async with tool_for(server) as tool:
        with pytest.raises(ToolArgumentsError) as info:
            await tool.run_json({"id": 1, "n": "x"})
    assert "argument 'id'" in str(info.value)
    assert "argument 'n'" in str(info.value)


async def test_schema_details(server: LoopbackServer) -> None:
    schema = {
        "type": "object",
        "properties": {
            "when": {"type": "string", "format": "date-time"},
            "size": {"type": "integer", "default": 3, "minimum": 1},
            "kind": {"enum": ["a", "b"]},
            "inner": {"type": "object", "properties": {"k": {"type": "string"}}, "additionalProperties": False},
        },
    }
    async with tool_for(server, path="/echo", json_schema=schema) as tool:
        # `format` is an annotation and defaults are not filled in: the body is what the caller sent.
        assert (await tool.run_json({"when": "not a date"}))["json"] == {"when": "not a date"}
        with pytest.raises(ToolArgumentsError, match=r"argument 'size' must be bigger than or equal to 1"):
            await tool.run_json({"size": 0})
        with pytest.raises(ToolArgumentsError, match=r"argument 'kind' must be one of \['a', 'b'\]"):
            await tool.run_json({"kind": "c"})
        with pytest.raises(ToolArgumentsError, match=r"argument 'inner' has unexpected 'x'"):
            await tool.run_json({"inner": {"x": 1}})
    assert len(server.requests) == 1


async def test_huge_bad_value_is_not_echoed_whole(server: LoopbackServer) -> None:
    async with tool_for(server) as tool:
        with pytest.raises(ToolArgumentsError) as info:
            await tool.run_json({"id": "1", "n": "x" * 100_000})
    assert len(str(info.value)) < 400


async def test_arguments_must_be_a_mapping(server: LoopbackServer) -> None:
    async with tool_for(server) as tool:
        with pytest.raises(ToolArgumentsError, match="must be an object, got list"):
            await tool.run_json(["id"])  # type: ignore[arg-type]


async def test_schema_refs_are_resolved(server: LoopbackServer) -> None:
    schema = {
        "type": "object",
        "$defs": {"Point": {"type": "object", "properties": {"x": {"type": "number"}}, "required": ["x"]}},
        "properties": {"p": {"$ref": "#/$defs/Point"}},
    }
    async with tool_for(server, path="/echo", json_schema=schema) as tool:
        assert (await tool.run_json({"p": {"x": 1}}))["json"] == {"p": {"x": 1}}
        with pytest.raises(ToolArgumentsError, match=r"argument 'p' lacks 'x'"):
            await tool.run_json({"p": {}})


# -- return values and errors ---------------------------------------------------------------------------------


async def test_text_return(server: LoopbackServer) -> None:
    async with tool_for(server, method="GET", path="/unicode", json_schema={"type": "object"}, return_type="text") as t:
        assert await t.run_json({}) == "héllo wörld ✓"
        assert t.return_value_as_string("x") == "x"


async def test_json_return_sends_accept_header(server: LoopbackServer) -> None:
    async with tool_for(server) as tool:
        result = await tool.run_json({"id": "1"})
        assert isinstance(result, dict)
        assert json.loads(tool.return_value_as_string(result)) == result
    assert server.requests[0].headers["accept"] == "application/json"


async def test_non_json_body_with_json_return_type(server: LoopbackServer) -> None:
    async with tool_for(server, method="GET", path="/html", json_schema={"type": "object"}) as tool:
        with pytest.raises(HttpResponseFormatError) as info:
            await tool.run_json({})
    assert "not JSON (content-type text/html)" in str(info.value)
    assert info.value.body_excerpt == "<html><body>not json</body></html>"
    assert isinstance(info.value, HttpToolError)


async def test_empty_body_with_json_return_type_is_none(server: LoopbackServer) -> None:
    async with tool_for(server, method="DELETE", path="/empty", json_schema={"type": "object"}) as tool:
        assert await tool.run_json({}) is None


@pytest.mark.parametrize("code", [301, 400, 404, 500, 503])
async def test_non_2xx_status_is_an_error_with_status_and_excerpt(server: LoopbackServer, code: int) -> None:
    schema = {"type": "object", "properties": {"code": {"type": "integer"}, "body": {"type": "string"}}}
    async with tool_for(server, method="GET", path="/status/{code}", json_schema=schema) as tool:
        with pytest.raises(HttpStatusError) as info:
            await tool.run_json({"code": code, "body": "nope: details here"})
    error = info.value
    assert error.status_code == code
    assert error.body_excerpt == "nope: details here"
    assert f"returned HTTP {code}" in str(error)
    assert "nope: details here" in str(error)
    assert isinstance(error, httpx.HTTPStatusError)
    assert error.response.status_code == code


async def test_status_error_body_excerpt_is_short(server: LoopbackServer) -> None:
    schema = {"type": "object", "properties": {"code": {"type": "integer"}, "body": {"type": "string"}}}
    async with tool_for(server, method="GET", path="/status/{code}", json_schema=schema) as tool:
        with pytest.raises(HttpStatusError) as info:
            await tool.run_json({"code": 500, "body": "x" * 5000})
    assert len(info.value.body_excerpt) == 200
    assert info.value.body_excerpt.endswith("…")
    assert len(str(info.value)) < 400


async def test_connection_refused_is_a_connection_error() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # closed again before the call: nothing listens there
    tool = HttpTool("down", "127.0.0.1", port, {"type": "object"}, timeout=2.0)
    async with tool:
        with pytest.raises(HttpConnectionError, match=rf"POST http://127.0.0.1:{port}/ failed: ConnectError") as info:
            await tool.run_json({})
    assert isinstance(info.value, ConnectionError)


async def test_dropped_connection_is_a_connection_error(server: LoopbackServer) -> None:
    server.enqueue(Fault("drop"))
    async with tool_for(server, path="/slow", json_schema={"type": "object"}) as tool:
        with pytest.raises(HttpConnectionError, match="RemoteProtocolError"):
            await tool.run_json({})


# -- timeouts and cancellation --------------------------------------------------------------------------------


async def test_timeout_raises_and_the_server_sees_the_disconnect(server: LoopbackServer) -> None:
    server.enqueue(Fault("hang"))
    async with tool_for(server, path="/slow", json_schema={"type": "object"}, timeout=0.3) as tool:
        started = time.monotonic()
        with pytest.raises(HttpTimeoutError, match=r"did not complete within 0.3 s") as info:
            await tool.run_json({})
        assert time.monotonic() - started < 2.0
    assert isinstance(info.value, TimeoutError)
    await asyncio.wait_for(server.requests[0].disconnected.wait(), 5)


async def test_timeout_bounds_the_whole_call_not_each_read(server: LoopbackServer) -> None:
    # Each chunk comes well within the timeout, the whole body does not.
    server.enqueue(Reply(chunks=["a"] * 20, chunk_delay=0.1))
    async with tool_for(server, path="/slow", json_schema={"type": "object"}, timeout=0.4, return_type="text") as t:
        started = time.monotonic()
        with pytest.raises(HttpTimeoutError):
            await t.run_json({})
        assert time.monotonic() - started < 1.5
    await asyncio.wait_for(server.requests[0].disconnected.wait(), 5)


async def test_a_slow_answer_within_the_timeout_succeeds(server: LoopbackServer) -> None:
    server.enqueue(Reply(text="late", delay=0.05))
    async with tool_for(server, path="/slow", json_schema={"type": "object"}, timeout=2.0) as tool:
        assert await tool.run_json({}) == {"text": "late"}


async def test_cancellation_token_aborts_the_request(server: LoopbackServer) -> None:
    server.enqueue(Fault("hang"))
    token = CancellationToken()
    async with tool_for(server, path="/slow", json_schema={"type": "object"}, timeout=30) as tool:
        call = asyncio.ensure_future(tool.run_json({}, token))
        (request,) = await server.wait_for_requests(1)
        token.cancel()
        with pytest.raises(asyncio.CancelledError):
            await call
        await asyncio.wait_for(request.disconnected.wait(), 5)
        # The tool is still usable afterwards.
        server.enqueue(Reply(text="again"))
        assert await tool.run_json({}) == {"text": "again"}


async def test_cancelled_token_before_the_call_sends_nothing(server: LoopbackServer) -> None:
    token = CancellationToken()
    token.cancel()
    async with tool_for(server) as tool:
        with pytest.raises(asyncio.CancelledError):
            await tool.run_json({"id": "1"}, token)
    assert server.requests == []


async def test_task_cancellation_aborts_the_request(server: LoopbackServer) -> None:
    server.enqueue(Fault("hang"))
    async with tool_for(server, path="/slow", json_schema={"type": "object"}, timeout=30) as tool:
        call = asyncio.ensure_future(tool.run_json({}))
        (request,) = await server.wait_for_requests(1)
        call.cancel()
        with pytest.raises(asyncio.CancelledError):
            await call
        await asyncio.wait_for(request.disconnected.wait(), 5)


async def test_outer_wait_for_shorter_than_the_tool_timeout(server: LoopbackServer) -> None:
    server.enqueue(Fault("hang"))
    async with tool_for(server, path="/slow", json_schema={"type": "object"}, timeout=30) as tool:
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(tool.run_json({}), 0.2)
    await asyncio.wait_for(server.requests[0].disconnected.wait(), 5)


# -- connection pool ------------------------------------------------------------------------------------------


async def test_one_pooled_connection_for_sequential_calls(server: LoopbackServer) -> None:
    async with tool_for(server, method="GET") as tool:
        for i in range(5):
            await tool.run_json({"id": str(i)})
    assert len(server.requests) == 5
    assert server.connections_opened == 1


async def test_concurrent_calls_share_the_pool(server: LoopbackServer) -> None:
    async with tool_for(server, method="GET") as tool:
        await asyncio.gather(*(tool.run_json({"id": str(i)}) for i in range(4)))
        opened = server.connections_opened
        await asyncio.gather(*(tool.run_json({"id": str(i)}) for i in range(4)))
    assert 1 <= opened <= 4
    assert server.connections_opened == opened  # the second round reused them
    assert sorted(r.path for r in server.requests) == sorted([f"/items/{i}" for i in range(4)] * 2)


async def test_close_releases_connections_and_ends_the_tool(server: LoopbackServer) -> None:
    tool = tool_for(server, method="GET")
    await tool.run_json({"id": "1"})
    assert server.open_connections == 1
    await tool.close()
    await wait_until(lambda: server.open_connections == 0)
    with pytest.raises(ClientClosedError, match="HttpTool 'items' is closed"):
        await tool.run_json({"id": "1"})
    await tool.close()  # idempotent


async def test_context_manager_closes(server: LoopbackServer) -> None:
    async with tool_for(server, method="GET") as tool:
        await tool.run_json({"id": "1"})
    with pytest.raises(ClientClosedError):
        await tool.run_json({"id": "1"})


class _EchoHandler(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = json.dumps({"path": self.path}).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


def test_the_tool_works_on_a_new_event_loop() -> None:
    # A server on its own thread outlives the two event loops the tool is used on.
    with http.server.ThreadingHTTPServer(("127.0.0.1", 0), _EchoHandler) as httpd:
        thread = threading.Thread(target=httpd.serve_forever, daemon=True)
        thread.start()
        try:
            port = httpd.server_address[1]
            tool = HttpTool(
                "echo", "127.0.0.1", port, {"type": "object"}, path="/echo", method="GET", return_type="json"
            )
            assert asyncio.run(tool.run_json({})) == {"path": "/echo"}
            assert asyncio.run(tool.run_json({})) == {"path": "/echo"}
            asyncio.run(tool.close())
        finally:
            httpd.shutdown()
            thread.join(5)
