"""ext-hosting-mcp's server vs the mcp SDK's own high-level server (`MCPServer`), serving the same `echo` tool over
streamable HTTP, driven by the same client (the SDK's `ClientSession`) in the same run.

Run: ``hatch run ext-hosting-mcp:python tools/bench/bench_mcp_serve.py [--blocks N] [--block B]`` (about a minute;
needs redis-server for the Redis side: ``apt-get install -y redis-server``).

Sides, each a separate server process on 127.0.0.1 (this script with ``--serve KIND``), each with one session:
- ``sdk``: `MCPServer` with the tool as a decorated function (its default session manager, no event store);
- ``sdk (A/A)``: a second, identical `MCPServer` process: the spread between the two is the noise floor;
- ``ext``: `McpServer` with the tool as an ext `FunctionTool` (`MemorySessionStore`, which also keeps events);
- ``ext+redis``: the same with `RedisSessionStore` (on every call, the session's expiry refreshed and the response
  event stored in Redis: two round trips).
With ``--baseline-store FILE`` (an earlier ``redis.py`` of ext-hosting-mcp, e.g. from ``git show
REV:packages/ext-hosting-mcp/src/ext/hosting/mcp/redis.py``), a fifth side ``ext+redis (baseline)`` serves with that
file's `RedisSessionStore`, so an old and a new store are compared in one run.
Calls are sequential (one in flight), interleaved in short blocks with the order rotating (``measure_interleaved``),
since this machine's speed drifts over seconds. The ratio column is p50(side) / p50(sdk).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import socket
import subprocess
import sys
from collections.abc import AsyncIterator, Awaitable, Callable

from _harness import Row, cpu_seconds, measure_interleaved, print_table

KINDS = ("sdk", "sdk", "ext", "ext-redis")


def _baseline_store_class(path: str) -> type:
    import importlib.util

    # Loaded as a module of ext.hosting.mcp so that its relative imports resolve to the installed package.
    name = "ext.hosting.mcp._bench_baseline_redis"
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    store: type = module.RedisSessionStore
    return store


def _serve(kind: str, redis_url: str | None, baseline: str | None = None) -> None:
    import uvicorn

    if kind == "sdk":
        from mcp.server.mcpserver import MCPServer

        sdk = MCPServer("bench", log_level="WARNING")

        @sdk.tool()
        async def echo(text: str) -> str:
            """Echo the text."""
            return text

        app = sdk.streamable_http_app()
    else:
        from ext.core import FunctionTool
        from ext.hosting.mcp import McpServer, SessionStore, streamable_http_app

        async def echo_ext(text: str) -> str:
            """Echo the text."""
            return text

        sessions: SessionStore | None = None
        if kind in ("ext-redis", "ext-redis-baseline"):
            from ext.hosting.mcp.redis import RedisSessionStore
            from ext.redis import RedisConnection

            assert redis_url is not None
            store_class = RedisSessionStore if baseline is None else _baseline_store_class(baseline)
            sessions = store_class(RedisConnection(redis_url), prefix=kind)
        app = streamable_http_app(McpServer([FunctionTool(echo_ext, name="echo")], name="bench"), sessions=sessions)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen(128)
    print(f"PORT {sock.getsockname()[1]}", flush=True)
    asyncio.run(uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on")).serve(sockets=[sock]))


def _start(kind: str, redis_url: str | None, baseline: str | None) -> tuple[subprocess.Popen[str], str]:
    args = [sys.executable, __file__, "--serve", kind, *(["--redis-url", redis_url] if redis_url else [])]
    if kind == "ext-redis-baseline" and baseline is not None:
        args += ["--baseline-store", baseline]
    process = subprocess.Popen(args, stdout=subprocess.PIPE, text=True)
    assert process.stdout is not None
    line = process.stdout.readline()
    if not line.startswith("PORT "):
        raise SystemExit(f"the {kind} server did not start")
    return process, f"http://127.0.0.1:{line.split()[1]}/mcp"


@contextlib.asynccontextmanager
async def _session(url: str) -> AsyncIterator[Callable[[], Awaitable[object]]]:
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    async with streamable_http_client(url) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        await session.list_tools()

        async def call() -> object:
            result = await session.call_tool("echo", {"text": "hello"})
            assert not result.is_error
            return result

        yield call


async def _drive_n(call: Callable[[], Awaitable[object]], n: int) -> int:
    for _ in range(n):
        await call()
    return n


async def _bench(blocks: int, block: int, baseline: str | None) -> None:
    from ext.testing.redis import start_redis_server

    redis = start_redis_server()
    processes: list[subprocess.Popen[str]] = []
    try:
        urls = []
        kinds = KINDS + (("ext-redis-baseline",) if baseline else ())
        for kind in kinds:
            process, url = _start(kind, redis.url, baseline)
            processes.append(process)
            urls.append(url)
        names = ("sdk", "sdk (A/A)", "ext", "ext+redis", "ext+redis (baseline)")[: len(kinds)]
        async with contextlib.AsyncExitStack() as stack:
            calls = [await stack.enter_async_context(_session(u)) for u in urls]
            warm = [await _drive_n(call, 100) for call in calls]
            before = [cpu_seconds(p.pid) for p in processes]
            results, _ = await measure_interleaved(list(zip(names, calls, strict=True)), blocks=blocks, block=block)
            after = [cpu_seconds(p.pid) for p in processes]
            del warm
        base = results[0]
        print_table([Row("echo, c=1", r, None if i == 0 else base) for i, r in enumerate(results)])
        # The server processes' own CPU per call: what each server costs, steadier than latency on a loaded machine.
        per_call = [(a - b) / (blocks * block) * 1e6 for a, b in zip(after, before, strict=True)]
        print("\nserver CPU per call (µs): " + ", ".join(f"{n} {c:.0f}" for n, c in zip(names, per_call, strict=True)))
        print(
            f"ext / sdk server CPU: {per_call[2] / per_call[0]:.2f}x (A/A {per_call[1] / per_call[0]:.2f}x); "
            f"ext+redis / ext: {per_call[3] / per_call[2]:.2f}x"
        )
        if baseline:
            print(f"ext+redis (baseline) / ext: {per_call[4] / per_call[2]:.2f}x")
        ext, ext_redis = results[2], results[3]
        from _harness import measure

        from ext.redis import RedisConnection

        client = RedisConnection(redis.url).client()
        ping = await measure("redis PING", client.ping, iterations=2000, warmup=100)
        await client.aclose()
        print(
            f"\nRedis PING round trip from this process: p50 {ping.p50_ms:.3f} ms, p99 {ping.p99_ms:.3f} ms "
            "(the Redis side does two per call: the session's expiry with the event position, the response event)"
        )
        print(
            f"\nRedis session store adds {ext_redis.p50_ms - ext.p50_ms:+.3f} ms at p50 "
            f"({ext_redis.p99_ms - ext.p99_ms:+.3f} ms at p99) over the memory store"
        )
        if baseline:
            old = results[4]
            print(
                f"baseline Redis session store adds {old.p50_ms - ext.p50_ms:+.3f} ms at p50 "
                f"({old.p99_ms - ext.p99_ms:+.3f} ms at p99) over the memory store"
            )
    finally:
        for process in processes:
            process.terminate()
            process.wait(timeout=10)
        redis.stop()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--serve", choices=("sdk", "ext", "ext-redis", "ext-redis-baseline"))
    parser.add_argument("--redis-url")
    parser.add_argument("--baseline-store", help="an earlier redis.py of ext-hosting-mcp, served as a fifth side")
    parser.add_argument("--blocks", type=int, default=40)
    parser.add_argument("--block", type=int, default=25)
    args = parser.parse_args()
    if args.serve:
        _serve(args.serve, args.redis_url, args.baseline_store)
    else:
        asyncio.run(_bench(args.blocks, args.block, args.baseline_store))


if __name__ == "__main__":
    main()
