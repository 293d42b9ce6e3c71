"""McpWorkbench vs the raw mcp `ClientSession`, on the same server in the same run.

Run: ``python tools/bench/bench_mcp.py [--iterations N] [--startups N]`` in an environment with
ext-tools-mcp installed (``hatch run ext-tools-mcp:python tools/bench/bench_mcp.py``).

The server is this script itself (``--serve stdio|http``): an mcp-SDK server with one `echo` tool,
over stdio and over streamable HTTP on 127.0.0.1. Both clients list the tools once before timing
(the SDK validates results against the listed output schemas), then call `echo`, sequentially and
with 32 calls in flight. Start-up is spawn (stdio) or connect (HTTP) plus the handshake.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Sequence
from typing import Any

CONCURRENCY = 32


def serve(transport: str) -> None:
    from mcp.server.mcpserver import MCPServer

    server = MCPServer("bench", log_level="WARNING")

    @server.tool(description="Echo the text back.")
    def echo(text: str) -> str:
        return text

    if transport == "stdio":
        server.run("stdio")
        return

    import uvicorn

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(512)
    print(f"PORT {sock.getsockname()[1]}", flush=True)
    config = uvicorn.Config(server.streamable_http_app(), log_level="warning")
    asyncio.run(uvicorn.Server(config).serve(sockets=[sock]))


@contextlib.contextmanager
def http_server() -> Any:
    proc = subprocess.Popen([sys.executable, __file__, "--serve", "http"], stdout=subprocess.PIPE)
    assert proc.stdout is not None
    line = proc.stdout.readline().decode()
    if not line.startswith("PORT "):
        proc.kill()
        raise RuntimeError(f"bench server did not start: {line!r}")
    try:
        yield f"http://127.0.0.1:{int(line.split()[1])}/mcp"
    finally:
        proc.terminate()
        proc.wait(10)


@contextlib.asynccontextmanager
async def raw_session(kind: str, url: str) -> AsyncIterator[Any]:
    from mcp import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client
    from mcp.client.streamable_http import streamable_http_client

    transport: Any
    if kind == "stdio":
        transport = stdio_client(StdioServerParameters(command=sys.executable, args=[__file__, "--serve", "stdio"]))
    else:
        transport = streamable_http_client(url)
    async with transport as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        yield session


def workbench(kind: str, url: str) -> Any:
    from ext.tools.mcp import McpWorkbench, StdioServerParams, StreamableHttpServerParams

    if kind == "stdio":
        return McpWorkbench(StdioServerParams(command=sys.executable, args=[__file__, "--serve", "stdio"]))
    return McpWorkbench(StreamableHttpServerParams(url=url))


async def calls(kind: str, url: str, iterations: int) -> list[Any]:
    from _harness import Row, measure

    args = {"text": "hello"}
    rows = []
    async with raw_session(kind, url) as session:
        await session.list_tools()
        bench = workbench(kind, url)
        async with bench:
            await bench.list_tools()

            async def raw_call() -> None:
                await session.call_tool("echo", args)

            async def ext_call() -> None:
                await bench.call_tool("echo", args)

            for concurrency in (1, CONCURRENCY):
                count = iterations if concurrency == 1 else iterations * 2
                warmup = max(10, count // 10)
                # Interleave the two so drift on a busy machine hits both alike.
                raw_runs, ext_runs = [], []
                for _ in range(3):
                    raw_runs.append(
                        await measure("raw", raw_call, iterations=count, warmup=warmup, concurrency=concurrency)
                    )
                    ext_runs.append(
                        await measure("ext", ext_call, iterations=count, warmup=warmup, concurrency=concurrency)
                    )
                raw = min(raw_runs, key=lambda r: r.p50_ms)
                ours = min(ext_runs, key=lambda r: r.p50_ms)
                case = f"{kind} c={concurrency}"
                rows += [Row(case, raw), Row(case, ours, baseline=raw)]
    return rows


async def startup(kind: str, url: str, runs: int) -> tuple[float, float]:
    raw_times, ext_times = [], []
    for _ in range(runs):
        start = time.perf_counter()
        async with raw_session(kind, url):
            raw_times.append(time.perf_counter() - start)
        bench = workbench(kind, url)
        start = time.perf_counter()
        await bench.start()
        ext_times.append(time.perf_counter() - start)
        await bench.stop()
    return statistics.median(raw_times), statistics.median(ext_times)


async def run(iterations: int, startups: int) -> None:
    from _harness import print_table

    with http_server() as url:
        rows = []
        for kind in ("stdio", "http"):
            rows += await calls(kind, url, iterations)
        print_table(rows)
        print()
        for i in range(0, len(rows), 2):
            raw, ours = rows[i].result, rows[i + 1].result
            print(
                f"{rows[i].case:<12} overhead p50 {100 * (ours.p50_ms / raw.p50_ms - 1):+.1f} %   "
                f"throughput {100 * ours.ops_per_s / raw.ops_per_s:.1f} % of raw"
            )
        print()
        for kind in ("stdio", "http"):
            raw_s, ext_s = await startup(kind, url, startups)
            print(
                f"start-up {kind:<6} raw {raw_s * 1e3:8.1f} ms   ext {ext_s * 1e3:8.1f} ms   ({startups} runs, median)"
            )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--iterations", type=int, default=2000)
    parser.add_argument("--startups", type=int, default=5)
    parser.add_argument("--serve", choices=["stdio", "http"])
    args = parser.parse_args(argv)
    if args.serve:
        serve(args.serve)
        return 0
    asyncio.run(run(args.iterations, args.startups))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
