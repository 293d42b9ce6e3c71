"""Serving an ext agent on a loopback socket, in the test's loop or in a child process (`python this_file PORT
REDIS_URL`), and the answer functions the tests serve."""

from __future__ import annotations

import asyncio
import socket
import subprocess
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path

import uvicorn
from starlette.types import ASGIApp


def bound_socket(port: int = 0) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    sock.listen(128)
    return sock


@asynccontextmanager
async def serving(make_app: Callable[[str], ASGIApp]) -> AsyncIterator[str]:
    """Serve `make_app(base_url)` on a fresh loopback port (bound before the server starts); yields the URL."""
    sock = bound_socket()
    base = f"http://127.0.0.1:{sock.getsockname()[1]}"
    server = uvicorn.Server(uvicorn.Config(make_app(base), log_level="warning", lifespan="off"))
    task = asyncio.create_task(server.serve(sockets=[sock]))
    try:
        yield base
    finally:
        server.should_exit = True
        server.force_exit = True
        await asyncio.wait_for(task, 10)
        sock.close()


async def echo(text: str) -> AsyncIterator[str]:
    """`echo: <text>` in three pieces."""
    answer = f"echo: {text}"
    third = max(1, len(answer) // 3)
    for piece in (answer[:third], answer[third : 2 * third], answer[2 * third :]):
        yield piece


async def slow(text: str) -> AsyncIterator[str]:
    """One piece, then nothing until cancelled (a long task)."""
    yield f"started {text}"
    await asyncio.Event().wait()


def start_server_process(port: int, redis_url: str) -> subprocess.Popen[bytes]:
    """A server process serving `slow` and `echo` (by message prefix) with tasks in Redis. Readiness: the socket
    is bound by the child before it prints 'ready'."""
    process = subprocess.Popen(
        [sys.executable, str(Path(__file__)), str(port), redis_url],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert process.stdout is not None
    line = process.stdout.readline()
    if line.strip() != b"ready":
        process.kill()
        raise RuntimeError(
            f"server process did not start: {line!r} {process.stderr.read() if process.stderr else b''!r}"
        )
    return process


async def _serve_forever(port: int, redis_url: str) -> None:
    from ext.hosting.a2a import FunctionResponder, a2a_app
    from ext.redis import RedisStateStore

    async def answer(text: str) -> AsyncIterator[str]:
        source = slow(text) if text.startswith("slow") else echo(text)
        async for piece in source:
            yield piece

    store = RedisStateStore(redis_url)
    sock = bound_socket(port)
    app = a2a_app(
        FunctionResponder(answer),
        name="Worker",
        description="Echo or wait.",
        url=f"http://127.0.0.1:{port}",
        store=store,
    )
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="off"))
    print("ready", flush=True)
    await server.serve(sockets=[sock])


if __name__ == "__main__":
    asyncio.run(_serve_forever(int(sys.argv[1]), sys.argv[2]))
