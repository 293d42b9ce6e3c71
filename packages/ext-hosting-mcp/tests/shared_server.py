"""A server process for the load-balancer tests: sessions in Redis, two tools (`add`, and `hang`: one progress step
then waits until the process dies). Prints `PORT <n>` once listening.

    python shared_server.py --redis-url URL [--heartbeat 0.2]
"""

from __future__ import annotations

import argparse
import asyncio
import socket

import uvicorn

from ext.core import FunctionTool
from ext.hosting.mcp import McpServer, current_context, streamable_http_app
from ext.hosting.mcp.redis import RedisSessionStore
from ext.redis import RedisConnection


async def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


async def hang() -> str:
    """Reports one step, then never answers (the test kills this process)."""
    context = current_context()
    assert context is not None
    await context.step("started")
    await asyncio.Event().wait()
    return "unreachable"


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--redis-url", required=True)
    parser.add_argument("--heartbeat", type=float, default=0.2)
    args = parser.parse_args()
    store = RedisSessionStore(RedisConnection(args.redis_url), prefix="lb", heartbeat=args.heartbeat)
    # Behind the proxy the Host header is the proxy's address: still loopback, so the default protection applies.
    app = streamable_http_app(McpServer([FunctionTool(add), FunctionTool(hang)]), sessions=store)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen(128)
    print(f"PORT {sock.getsockname()[1]}", flush=True)
    await uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on")).serve(sockets=[sock])


if __name__ == "__main__":
    asyncio.run(main())
