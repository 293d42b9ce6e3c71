"""An MCP server written with the mcp SDK, for the workbench tests.

Run as a script: ``python sdk_server.py stdio`` speaks MCP on stdin/stdout; ``python sdk_server.py sse``
and ``python sdk_server.py http`` bind 127.0.0.1 on an ephemeral port and print ``PORT <n>`` on stdout
once listening. ``--token T`` makes the HTTP transports answer 401 unless ``Authorization: Bearer T``
is sent. ``--exit-at-once`` exits with status 3 before speaking MCP (a server that fails to start).

Lists are paginated (page size 3) so the client must follow cursors. Cancellations are observed by a
server middleware, so a test can check on the server side that `notifications/cancelled` arrived.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import os
import socket
import sys
import warnings
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

import anyio
from ext_mcp_support import PNG, WAV
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.mcpserver import Audio, Context, Image, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.shared.exceptions import MCPDeprecationWarning
from mcp.types import (
    BlobResourceContents,
    CallToolResult,
    EmbeddedResource,
    ListPromptsResult,
    ListResourcesResult,
    ListResourceTemplatesResult,
    ListToolsResult,
    PaginatedRequestParams,
    ResourceLink,
    SamplingMessage,
    TextContent,
    TextResourceContents,
)
from pydantic import BaseModel

warnings.simplefilter("ignore", MCPDeprecationWarning)

PAGE = 3

T = TypeVar("T")


class PagedServer(MCPServer):
    """MCPServer answers every list in one page; this one pages by 3 so clients must follow cursors."""

    @staticmethod
    def _page(items: Sequence[T], params: PaginatedRequestParams | None) -> tuple[list[T], str | None]:
        start = int(params.cursor) if params is not None and params.cursor else 0
        end = start + PAGE
        return list(items[start:end]), (str(end) if end < len(items) else None)

    async def _handle_list_tools(self, ctx: Any, params: PaginatedRequestParams | None) -> ListToolsResult:
        page, cursor = self._page(await self.list_tools(), params)
        return ListToolsResult(tools=page, next_cursor=cursor)

    async def _handle_list_resources(self, ctx: Any, params: PaginatedRequestParams | None) -> ListResourcesResult:
        page, cursor = self._page(await self.list_resources(), params)
        return ListResourcesResult(resources=page, next_cursor=cursor)

    async def _handle_list_resource_templates(
        self, ctx: Any, params: PaginatedRequestParams | None
    ) -> ListResourceTemplatesResult:
        page, cursor = self._page(await self.list_resource_templates(), params)
        return ListResourceTemplatesResult(resource_templates=page, next_cursor=cursor)

    async def _handle_list_prompts(self, ctx: Any, params: PaginatedRequestParams | None) -> ListPromptsResult:
        page, cursor = self._page(await self.list_prompts(), params)
        return ListPromptsResult(prompts=page, next_cursor=cursor)


# --- server-side records ------------------------------------------------------------------------

_request_of_tag: dict[str, str] = {}  # tag -> request id of the blocked call
_tag_started: dict[str, anyio.Event] = {}
_cancel_reasons: dict[str, str] = {}  # request id -> reason from notifications/cancelled
_cancel_seen: dict[str, anyio.Event] = {}
_barriers: dict[str, list[anyio.Event]] = {}


def _event(request_id: str) -> anyio.Event:
    return _cancel_seen.setdefault(request_id, anyio.Event())


async def record_cancellations(ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
    if ctx.request_id is None and ctx.method == "notifications/cancelled" and ctx.params:
        request_id = str(ctx.params.get("requestId"))
        _cancel_reasons[request_id] = str(ctx.params.get("reason", ""))
        _event(request_id).set()
    return await call_next(ctx)


mcp = PagedServer("sdk-test-server", log_level="WARNING", middleware=[record_cancellations])


class Sum(BaseModel):
    total: int
    terms: list[int]


@mcp.tool(description="Add two integers.")
def add(a: int, b: int) -> Sum:
    return Sum(total=a + b, terms=[a, b])


@mcp.tool(description="Echo the text back.")
def echo(text: str) -> str:
    return text


@mcp.tool(description="A 1x1 PNG image.")
def image() -> Image:
    return Image(data=PNG, format="png")


@mcp.tool(description="A short WAV clip.")
def audio() -> Audio:
    return Audio(data=WAV, format="wav")


@mcp.tool(description="Every kind of content block at once.")
def mixed() -> CallToolResult:
    return CallToolResult(
        content=[
            TextContent(text="hello"),
            EmbeddedResource(resource=TextResourceContents(uri="test://doc", text="doc text", mime_type="text/plain")),
            EmbeddedResource(
                resource=BlobResourceContents(uri="test://blob", blob=base64.b64encode(b"\x00\x01").decode())
            ),
            ResourceLink(uri="test://linked", name="linked", mime_type="text/markdown"),
        ],
        structured_content={"kind": "mixed"},
    )


@mcp.tool(description="Fails with a message the client sees.")
def fail() -> str:
    raise ToolError("broken on purpose")


@mcp.tool(description="Block until cancelled; the tag names the call for cancellations().")
async def block(tag: str, ctx: Context) -> str:
    _request_of_tag[tag] = ctx.request_id
    _tag_started.setdefault(tag, anyio.Event()).set()
    await anyio.sleep_forever()
    return "unreachable"


@mcp.tool(description="Wait until the blocked call with this tag is running on the server.")
async def started(tag: str, timeout: float = 10.0) -> str:
    with anyio.fail_after(timeout):
        await _tag_started.setdefault(tag, anyio.Event()).wait()
    return _request_of_tag[tag]


@mcp.tool(description="Wait until the blocked call with this tag is cancelled; its cancel reason.")
async def cancelled(tag: str, timeout: float = 10.0) -> str:
    with anyio.fail_after(timeout):
        # The block call may not have reached the server yet.
        await _tag_started.setdefault(tag, anyio.Event()).wait()
        await _event(_request_of_tag[tag]).wait()
    return _cancel_reasons[_request_of_tag[tag]]


@mcp.tool(description="Return once `n` calls with this key are in flight at the same time.")
async def barrier(key: str, n: int, timeout: float = 10.0) -> int:
    arrived = anyio.Event()
    group = _barriers.setdefault(key, [])
    group.append(arrived)
    if len(group) >= n:
        for event in group:
            event.set()
    with anyio.fail_after(timeout):
        await arrived.wait()
    return len(group)


@mcp.tool(description="Exit the server process at once.")
def crash() -> str:
    os._exit(7)


@mcp.tool(description="The server's process id.")
def pid() -> int:
    return os.getpid()


@mcp.tool(description="Ask the client's model to complete the prompt.")
async def sample(prompt: str, ctx: Context) -> str:
    result = await ctx.session.create_message(
        [SamplingMessage(role="user", content=TextContent(text=prompt))],
        max_tokens=50,
        system_prompt="Be brief.",
        temperature=0.5,
        related_request_id=ctx.request_id,
    )
    content = result.content
    text = content.text if isinstance(content, TextContent) else str(content)
    return f"{result.model}|{result.stop_reason}|{text}"


class Person(BaseModel):
    name: str
    age: int


@mcp.tool(description="Ask the user for a name and an age.")
async def ask_person(ctx: Context) -> str:
    answer = await ctx.elicit("Who are you?", Person)
    if answer.action == "accept":
        return f"{answer.data.name} is {answer.data.age}"
    return answer.action


@mcp.tool(description="The client's roots.")
async def roots(ctx: Context) -> list[str]:
    result = await ctx.session.list_roots()
    return [f"{root.name}={root.uri}" for root in result.roots]


@mcp.tool(description="The request headers the server saw (HTTP only).")
def seen_headers(ctx: Context) -> dict[str, str]:
    headers = ctx.headers or {}
    return {k.lower(): v for k, v in headers.items() if k.lower() in ("authorization", "x-trace", "x-api-key")}


@mcp.resource("test://static/hello", name="hello", description="A greeting.", mime_type="text/plain")
def hello() -> str:
    return "hello, world"


@mcp.resource("test://static/blob", name="blob", mime_type="application/octet-stream")
def blob() -> bytes:
    return b"\x00\x01\x02"


@mcp.resource("test://static/a", name="a")
def res_a() -> str:
    return "a"


@mcp.resource("test://static/b", name="b")
def res_b() -> str:
    return "b"


@mcp.resource("test://items/{item_id}", name="item", description="One item by id.")
def item(item_id: str) -> str:
    return f"item {item_id}"


@mcp.prompt(description="Greet someone.")
def greet(name: str) -> str:
    return f"Hello, {name}!"


@mcp.prompt(description="A two-turn conversation.")
def dialogue(topic: str) -> list[dict[str, Any]]:
    return [
        {"role": "user", "content": f"Tell me about {topic}."},
        {"role": "assistant", "content": "Gladly."},
    ]


@mcp.prompt()
def p3() -> str:
    return "three"


@mcp.prompt()
def p4() -> str:
    return "four"


# --- entry point ----------------------------------------------------------------------------------


def _auth_guard(app: Any, token: str) -> Callable[..., Awaitable[None]]:
    expected = f"Bearer {token}".encode()

    async def guarded(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http" and dict(scope["headers"]).get(b"authorization") != expected:
            await send({"type": "http.response.start", "status": 401, "headers": [(b"content-type", b"text/plain")]})
            await send({"type": "http.response.body", "body": b"unauthorized"})
            return
        await app(scope, receive, send)

    return guarded


async def _serve_http(kind: str, token: str | None, port: int) -> None:
    import uvicorn

    app: Any = mcp.sse_app() if kind == "sse" else mcp.streamable_http_app()
    if token:
        app = _auth_guard(app, token)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    config = uvicorn.Config(app, log_level="warning", lifespan="on")
    server = uvicorn.Server(config)
    # Listening before uvicorn starts lets clients connect (into the backlog) as soon as the port is out.
    sock.listen(128)
    print(f"PORT {sock.getsockname()[1]}", flush=True)
    await server.serve(sockets=[sock])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("transport", choices=["stdio", "sse", "http"])
    parser.add_argument("--token")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--exit-at-once", action="store_true")
    args = parser.parse_args()
    if args.exit_at_once:
        print("sdk_server: refusing to start (asked to exit at once)", file=sys.stderr, flush=True)
        sys.exit(3)
    if args.transport == "stdio":
        mcp.run("stdio")
    else:
        asyncio.run(_serve_http(args.transport, args.token, args.port))


if __name__ == "__main__":
    main()
