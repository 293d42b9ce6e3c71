"""Helpers shared by the tests (imported by name: conftest puts this folder on sys.path)."""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import uvicorn

CONFORMANCE = Path(__file__).resolve().parents[1] / "conformance"


@contextlib.asynccontextmanager
async def serving(app: Any) -> AsyncIterator[str]:
    """Serve the ASGI app with uvicorn on 127.0.0.1 in this event loop; yields its MCP URL (`/mcp`).

    The socket listens before uvicorn starts, so clients may connect at once (they wait in the backlog)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen(128)
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on", timeout_graceful_shutdown=5))
    task = asyncio.create_task(server.serve(sockets=[sock]))
    try:
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        server.should_exit = True
        await asyncio.wait_for(task, 30)
        sock.close()


INIT = {
    "jsonrpc": "2.0",
    "id": 0,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "raw-test-client", "version": "0"},
    },
}
ACCEPT = {"accept": "application/json, text/event-stream", "content-type": "application/json"}


def messages(response: Any) -> list[dict[str, Any]]:
    """The JSON-RPC messages of a response: a JSON body, or the `data:` lines of an SSE body (priming events, with
    empty data, left out)."""
    import json

    if response.headers.get("content-type", "").startswith("text/event-stream"):
        return [
            json.loads(line[5:]) for line in response.text.splitlines() if line.startswith("data:") and line[5:].strip()
        ]
    return [response.json()] if response.content else []


async def open_session(client: Any, url: str, headers: dict[str, str] | None = None) -> str:
    """Initialize a session with raw requests; returns its id."""
    response = await client.post(url, json=INIT, headers={**ACCEPT, **(headers or {})})
    assert response.status_code == 200, response.text
    session = response.headers["mcp-session-id"]
    done = await client.post(
        url,
        json={"jsonrpc": "2.0", "method": "notifications/initialized"},
        headers={**ACCEPT, **(headers or {}), "mcp-session-id": session, "mcp-protocol-version": "2025-11-25"},
    )
    assert done.status_code == 202, done.text
    return str(session)


async def call(
    client: Any,
    url: str,
    session: str,
    name: str,
    arguments: dict[str, Any],
    id: int = 1,
    headers: dict[str, str] | None = None,
) -> Any:
    """A raw tools/call in `session` (with more `headers`); returns the response."""
    return await client.post(
        url,
        json={"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": name, "arguments": arguments}},
        headers={**ACCEPT, "mcp-session-id": session, "mcp-protocol-version": "2025-11-25", **(headers or {})},
    )
