"""A small MCP server (the mcp SDK's own MCPServer) for the `ext mcp` and `ext chat --mcp` tests.

`python cli_mcp_server.py` speaks MCP over stdio; `python cli_mcp_server.py http` (streamable HTTP, at /mcp) or
`... sse` (at /sse) binds 127.0.0.1 on an ephemeral port and prints `PORT <n>` once listening.
"""

from __future__ import annotations

import asyncio
import socket
import sys
from typing import Any

from mcp.server.mcpserver import MCPServer

server = MCPServer("cli-test", log_level="WARNING")


@server.tool()
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@server.tool()
def shout(text: str) -> str:
    """Upper-case a text."""
    return text.upper()


@server.resource("note://greeting", name="greeting", description="A greeting note.")
def greeting() -> str:
    return "hello from the resource"


@server.prompt()
def review(topic: str) -> str:
    """Ask for a review of a topic."""
    return f"Please review {topic}."


async def _serve_http(kind: str) -> None:
    import uvicorn

    app: Any = server.sse_app() if kind == "sse" else server.streamable_http_app()
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen(128)  # listening before uvicorn starts: clients may connect as soon as the port is printed
    print(f"PORT {sock.getsockname()[1]}", flush=True)
    await uvicorn.Server(uvicorn.Config(app, log_level="warning")).serve(sockets=[sock])


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] in ("http", "sse"):
        asyncio.run(_serve_http(sys.argv[1]))
    else:
        server.run("stdio")
