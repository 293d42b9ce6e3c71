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
