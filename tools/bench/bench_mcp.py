"""McpWorkbench vs the raw mcp `ClientSession`, on the same server program in the same run.

Run: ``python tools/bench/bench_mcp.py [--blocks N] [--block B] [--startups N]`` in an environment with
ext-tools-mcp installed (``hatch run ext-tools-mcp:python tools/bench/bench_mcp.py``; about 2 minutes).

The server is this script itself (``--serve stdio|http``): an mcp-SDK server with one `echo` tool, over
stdio (each client spawns its own copy) and over streamable HTTP on 127.0.0.1 (one process both clients
talk to). Both clients list the tools once before timing (the SDK validates results against the listed
output schemas), then call `echo`, sequentially and with 32 calls in flight on the one session.

Like for like: McpWorkbench bounds every request by its params' request timeout (30 s by default), which
the SDK applies per request with a timer. The raw session gets the same `read_timeout_seconds`, so both
sides do the same work; ``raw (no t/o)`` (the SDK's default, no bound) is also measured at c=1 to show
what that timer itself costs.

Each case interleaves the sides in short blocks (``--block`` calls a side, 25 by default; with 32 in flight,
128), the order rotating from block to block, ``--blocks`` times (``measure_interleaved``): on this kind of
machine the whole process's speed drifts 10-20 % over seconds, and only sides measured moments apart see the
same conditions. CPU is the client process's CPU time per call (servers run in other processes), reported as
the median of the per-block ext/raw ratios; p50 and calls/s ratios come from all of each side's calls.
Start-up is spawn (stdio) or connect (HTTP) plus the initialize handshake, paired the same way.
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
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import Any

# Script-dir import: `python tools/bench/bench_mcp.py` puts tools/bench on sys.path.
from _harness import Result, Row, callgrind_per_op, callgrind_phase_totals, compare, measure_interleaved, print_table

CONCURRENCY = 32
READ_TIMEOUT = 30.0  # McpWorkbench's default request timeout (StdioServerParams / StreamableHttpServerParams)
UNTIMED = "raw (no t/o)"  # the raw session with the SDK's default: no read timeout


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
async def raw_session(kind: str, url: str, read_timeout: float | None = READ_TIMEOUT) -> AsyncIterator[Any]:
    from mcp import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client
    from mcp.client.streamable_http import streamable_http_client

    transport: Any
    if kind == "stdio":
        transport = stdio_client(StdioServerParameters(command=sys.executable, args=[__file__, "--serve", "stdio"]))
    else:
        transport = streamable_http_client(url)
    async with transport as (read, write), ClientSession(read, write, read_timeout_seconds=read_timeout) as session:
        await session.initialize()
        yield session


def workbench(kind: str, url: str) -> Any:
    from ext.tools.mcp import McpWorkbench, StdioServerParams, StreamableHttpServerParams

    if kind == "stdio":
        params: Any = StdioServerParams(
            command=sys.executable, args=[__file__, "--serve", "stdio"], read_timeout_seconds=READ_TIMEOUT
        )
    else:
        params = StreamableHttpServerParams(url=url, timeout=READ_TIMEOUT)
    return McpWorkbench(params)


def summary(label: str, base: Result, ours: Result, cpu_ratios: Sequence[float]) -> str:
    ratios = compare(base, ours)
    cpu = statistics.median(cpu_ratios)
    return (
        f"{label:<28} p50 {100 * (ratios.p50 - 1):+5.1f} %   CPU/call {100 * (cpu - 1):+5.1f} %   "
        f"calls/s {100 * ratios.ops_per_s:5.1f} % of raw"
    )


async def calls(kind: str, url: str, blocks: int, block: int) -> tuple[list[Row], list[str]]:
    args = {"text": "hello"}
    rows: list[Row] = []
    notes: list[str] = []
    async with raw_session(kind, url) as session, raw_session(kind, url, read_timeout=None) as untimed:
        await session.list_tools()
        await untimed.list_tools()
        bench = workbench(kind, url)
        async with bench:
            await bench.list_tools()

            async def raw_call() -> None:
                await session.call_tool("echo", args)

            async def untimed_call() -> None:
                await untimed.call_tool("echo", args)

            async def ext_call() -> None:
                await bench.call_tool("echo", args)

            for fn in (raw_call, untimed_call, ext_call):
                for _ in range(100):
                    await fn()
            for concurrency in (1, CONCURRENCY):
                case = f"{kind} c={concurrency}"
                sides: list[tuple[str, Callable[[], Awaitable[Any]]]] = [("raw", raw_call), ("ext", ext_call)]
                if concurrency == 1:
                    sides.append((UNTIMED, untimed_call))
                    n, size = blocks, block
                else:
                    # Blocks of 4 calls per worker: every block ramps up to 32 in flight and drains, on
                    # both sides alike; about twice the calls of c=1 in all.
                    size = 4 * concurrency
                    n = max(1, 2 * blocks * block // size)
                results, cpu = await measure_interleaved(
                    sides, blocks=n, block=size, warmup=2 * size, concurrency=concurrency
                )
                raw, ours = results[0], results[1]
                rows += [Row(case, raw), Row(case, ours, baseline=raw)]
                notes.append(summary(f"{case} ext/raw", raw, ours, cpu[1]))
                if concurrency == 1:
                    rows.append(Row(case, results[2], baseline=raw))
                    per_block = [e / u for e, u in zip(cpu[1], cpu[2], strict=True)]
                    notes.append(summary(f"{case} ext/{UNTIMED}", results[2], ours, per_block))
    return rows, notes


async def startup(kind: str, url: str, runs: int) -> str:
    """Paired start-ups in alternating order: wall time, and this process's CPU time (stdio: not the child's)."""
    raw_times: list[tuple[float, float]] = []
    ext_times: list[tuple[float, float]] = []

    async def raw_start() -> None:
        wall, cpu = time.perf_counter(), time.process_time()
        async with raw_session(kind, url):
            raw_times.append((time.perf_counter() - wall, time.process_time() - cpu))

    async def ext_start() -> None:
        bench = workbench(kind, url)
        wall, cpu = time.perf_counter(), time.process_time()
        await bench.start()
        ext_times.append((time.perf_counter() - wall, time.process_time() - cpu))
        await bench.stop()

    await raw_start()  # untimed: first connection, imports
    await ext_start()
    raw_times.clear()
    ext_times.clear()
    for i in range(runs):
        for fn in (raw_start, ext_start) if i % 2 == 0 else (ext_start, raw_start):
            await fn()
    pairs = list(zip(raw_times, ext_times, strict=True))
    wall_ratio = statistics.median(b[0] / a[0] for a, b in pairs)
    cpu_delta = statistics.median(b[1] - a[1] for a, b in pairs)
    raw_wall, raw_cpu = (statistics.median(t[i] for t in raw_times) * 1e3 for i in (0, 1))
    ext_wall, ext_cpu = (statistics.median(t[i] for t in ext_times) * 1e3 for i in (0, 1))
    # Client CPU as a difference: for stdio it is a few ms next to the server process's own start.
    return (
        f"start-up {kind:<6} wall raw {raw_wall:6.1f} ms  ext {ext_wall:6.1f} ms  ({100 * (wall_ratio - 1):+5.1f} %)   "
        f"client CPU raw {raw_cpu:5.1f} ms  ext {ext_cpu:5.1f} ms  ({cpu_delta * 1e3:+.2f} ms)   "
        f"median of {runs} paired runs"
    )


async def run(blocks: int, block: int, startups: int) -> None:
    with http_server() as url:
        rows: list[Row] = []
        notes: list[str] = []
        for kind in ("stdio", "http"):
            more_rows, more_notes = await calls(kind, url, blocks, block)
            rows += more_rows
            notes += more_notes
        print_table(rows)
        print()
        print("\n".join(notes))
        print()
        for kind in ("stdio", "http"):
            print(await startup(kind, url, startups if kind == "stdio" else 3 * startups))


# --- instruction counts (load-independent) ---------------------------------------------------------

PHASE_REPEATS = 2


async def _calls(fn: Callable[[], Awaitable[Any]], count: int, concurrency: int) -> None:
    """`count` awaits of `fn()`, `concurrency` of them in flight."""
    left = count

    async def worker() -> None:
        nonlocal left
        while left > 0:
            left -= 1
            await fn()

    await asyncio.gather(*(worker() for _ in range(concurrency)))


async def marked_phases(kind: str, count: int, concurrency: int = 1) -> None:
    """Each side's `count` calls as a phase of its own: `os.getppid()` marks the boundaries, which
    `valgrind --tool=callgrind --dump-before=getppid` turns into one profile dump per phase."""
    import os

    args = {"text": "hello"}
    with http_server() as url:
        async with raw_session(kind, url, read_timeout=None) as untimed, raw_session(kind, url) as session:
            bench = workbench(kind, url)
            async with bench:
                await untimed.list_tools()
                await session.list_tools()
                await bench.list_tools()
                sides: dict[str, Callable[[], Awaitable[Any]]] = {
                    UNTIMED: lambda: untimed.call_tool("echo", args),
                    "raw": lambda: session.call_tool("echo", args),
                    "ext": lambda: bench.call_tool("echo", args),
                }
                if concurrency > 1:
                    del sides[UNTIMED]
                for fn in sides.values():
                    await _calls(fn, max(20, 2 * concurrency), concurrency)
                order = []
                for _ in range(PHASE_REPEATS):
                    for name, fn in sides.items():
                        os.getppid()
                        order.append(name)
                        await _calls(fn, count, concurrency)
                os.getppid()
    print("PHASES", "|".join(order), flush=True)


async def marked_startups(kind: str, count: int) -> None:
    """`count` start-ups of each side in alternating order, each start-up (spawn or connect and the handshake,
    not the stop that follows) between two `os.getppid()` marks: one profile dump per start-up."""
    import os

    order: list[str] = []

    def mark(name: str) -> None:
        os.getppid()
        order.append(name)

    async def raw_start() -> None:
        mark("raw")
        async with raw_session(kind, url):
            mark("-")

    async def ext_start() -> None:
        bench = workbench(kind, url)
        mark("ext")
        await bench.start()
        mark("-")
        await bench.stop()

    with http_server() as url:
        for i in range(count + 1):  # the first pair warms up (imports, first connection)
            for fn in (raw_start, ext_start) if i % 2 == 0 else (ext_start, raw_start):
                await fn()
        os.getppid()
    order = order[4:]
    print("PHASES", "|".join(["-"] * 4 + order), flush=True)


def instructions(kind: str, count: int, concurrency: int = 1) -> str:
    """Client instructions per call of each side, from a callgrind run of `marked_phases` (servers untraced)."""
    argv = ["--phases", kind, "--iterations", str(count), "--concurrency", str(concurrency)]
    per_call = callgrind_per_op(__file__, argv, count)
    raw = per_call["raw"]
    label = f"{kind} c={concurrency}"
    return f"{label:<10} instructions per call (client, min of {PHASE_REPEATS} phases of {count}): " + ", ".join(
        f"{name} {value / 1e3:,.0f}k ({100 * (value / raw - 1):+.1f} %)" for name, value in per_call.items()
    )


def startup_instructions(kind: str, count: int) -> str:
    """Client instructions per start-up of each side (median of `count`), from `marked_startups`."""
    order, totals = callgrind_phase_totals(__file__, ["--phases-startup", kind, "--iterations", str(count)])
    runs: dict[str, list[int]] = {"raw": [], "ext": []}
    for name, total in zip(order, totals, strict=True):
        if name in runs:
            runs[name].append(total)
    raw, ext = (statistics.median(runs[name]) for name in ("raw", "ext"))
    return (
        f"{kind:<6} instructions per start-up (client, median of {count}): raw {raw / 1e6:,.2f}M, "
        f"ext {ext / 1e6:,.2f}M ({100 * (ext / raw - 1):+.1f} %)"
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--blocks", type=int, default=80, help="interleaved blocks per case at c=1")
    parser.add_argument("--block", type=int, default=25, help="calls per side per block at c=1 (c=32: 128)")
    parser.add_argument("--iterations", type=int, default=100, help=argparse.SUPPRESS)  # --phases: calls per phase
    parser.add_argument("--startups", type=int, default=9, help="paired stdio start-ups (HTTP: three times as many)")
    parser.add_argument(
        "--callgrind",
        action="store_true",
        help="instead: client instructions per call at c=1 and per start-up under valgrind (needs valgrind; minutes)",
    )
    parser.add_argument("--serve", choices=["stdio", "http"], help=argparse.SUPPRESS)
    parser.add_argument("--phases", choices=["stdio", "http"], help=argparse.SUPPRESS)
    parser.add_argument("--phases-startup", choices=["stdio", "http"], help=argparse.SUPPRESS)
    parser.add_argument("--concurrency", type=int, default=1, help=argparse.SUPPRESS)  # --phases
    args = parser.parse_args(argv)
    if args.serve:
        serve(args.serve)
    elif args.phases:
        asyncio.run(marked_phases(args.phases, args.iterations, args.concurrency))
    elif args.phases_startup:
        asyncio.run(marked_startups(args.phases_startup, args.iterations))
    elif args.callgrind:
        print(instructions("stdio", 100))
        print(instructions("http", 30))
        print(instructions("stdio", 320, CONCURRENCY))
        print(startup_instructions("stdio", 6))
        print(startup_instructions("http", 6))
    else:
        asyncio.run(run(args.blocks, args.block, args.startups))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
