"""HttpTool vs a raw pooled ``httpx.AsyncClient`` against the same loopback server.

Run: ``hatch run ext-tools-http:python tools/bench/bench_http.py [--iterations N] [--concurrency C]``.

The server runs in a child process (a minimal keep-alive HTTP/1.1 server on 127.0.0.1 answering every
request with a small JSON body), so the timings and CPU of this process are the client side only. Both
implementations make the same request: the raw client with a hand-built URL / ``json=`` body and
``response.json()``; HttpTool with argument validation, path filling and query/body building on top.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Sequence
from typing import Any

import httpx

# Script-dir import: `python tools/bench/bench_http.py` puts tools/bench on sys.path.
from _harness import Result, Row, compare, measure, print_table

from ext.tools.http import HttpTool

BODY = b'{"id":"42","name":"widget","tags":["a","b"],"price":9.5}'
RESPONSE = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n%s" % (len(BODY), BODY)

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "item_id": {"type": "string"},
        "q": {"type": "string"},
        "limit": {"type": "integer", "minimum": 1, "maximum": 100},
        "tags": {"type": "array", "items": {"type": "string"}},
    },
    "required": ["item_id"],
    "additionalProperties": False,
}


class _Server(asyncio.Protocol):
    """Answers each complete request (head + content-length body) with RESPONSE; keeps the connection."""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        self.buf = b""

    def data_received(self, data: bytes) -> None:
        self.buf += data
        while True:
            end = self.buf.find(b"\r\n\r\n")
            if end < 0:
                return
            head = self.buf[:end].lower()
            length = 0
            at = head.find(b"content-length:")
            if at >= 0:
                length = int(head[at + 15 :].split(b"\r\n", 1)[0])
            if len(self.buf) < end + 4 + length:
                return
            self.buf = self.buf[end + 4 + length :]
            self.transport.write(RESPONSE)


async def serve() -> None:
    loop = asyncio.get_running_loop()
    server = await loop.create_server(_Server, "127.0.0.1", 0, backlog=256)
    print(server.sockets[0].getsockname()[1], flush=True)
    # Stop when the parent closes our stdin (or dies), so no server outlives a run.
    await loop.run_in_executor(None, sys.stdin.read)
    server.close()


async def run(iterations: int, concurrency: int, rounds: int) -> list[tuple[Result, Result]]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, __file__, "--serve", stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE
    )
    assert proc.stdout is not None and proc.stdin is not None
    try:
        port = int(await asyncio.wait_for(proc.stdout.readline(), 10))
        base = f"http://127.0.0.1:{port}"
        warmup = max(50, iterations // 20)
        limits = httpx.Limits(max_connections=100, max_keepalive_connections=20)
        args = {"item_id": "42", "q": "blue widgets", "limit": 10, "tags": ["a", "b"]}
        pairs: list[tuple[Result, Result]] = []
        async with httpx.AsyncClient(timeout=httpx.Timeout(5.0), limits=limits) as raw_client:
            get_tool = HttpTool(
                "get_item", "127.0.0.1", port, SCHEMA, path="/items/{item_id}", method="GET", return_type="json"
            )
            post_tool = HttpTool(
                "post_item", "127.0.0.1", port, SCHEMA, path="/items/{item_id}", method="POST", return_type="json"
            )

            async def raw_get() -> Any:
                response = await raw_client.get(f"{base}/items/42?q=blue%20widgets&limit=10&tags=a&tags=b")
                response.raise_for_status()
                return response.json()

            async def raw_post() -> Any:
                body = {"q": "blue widgets", "limit": 10, "tags": ["a", "b"]}
                response = await raw_client.post(f"{base}/items/42", json=body)
                response.raise_for_status()
                return response.json()

            async def tool_get() -> Any:
                return await get_tool.run_json(args)

            async def tool_post() -> Any:
                return await post_tool.run_json(args)

            assert await raw_get() == await tool_get()
            assert await raw_post() == await tool_post()
            for raw_fn, tool_fn in ((raw_get, tool_get), (raw_post, tool_post)):
                await measure("warmup", raw_fn, iterations=warmup, concurrency=concurrency)
                await measure("warmup", tool_fn, iterations=warmup, concurrency=concurrency)
                # Short interleaved rounds, alternating which side goes first, so that load from other
                # processes on the machine falls on both sides alike.
                raw_runs: list[Result] = []
                tool_runs: list[Result] = []
                per_round = max(1, iterations // rounds)
                for i in range(rounds):
                    order = [(raw_runs, "raw httpx", raw_fn), (tool_runs, "HttpTool", tool_fn)]
                    for runs, name, fn in order if i % 2 == 0 else order[::-1]:
                        runs.append(await measure(name, fn, iterations=per_round, concurrency=concurrency))
                pairs.append((_merge(raw_runs), _merge(tool_runs)))
            await get_tool.close()
            await post_tool.close()
        return pairs
    finally:
        proc.stdin.close()
        try:
            await asyncio.wait_for(proc.wait(), 5)
        except asyncio.TimeoutError:
            proc.kill()
            await proc.wait()


def _merge(runs: list[Result]) -> Result:
    latencies = tuple(ns for r in runs for ns in r.latencies_ns)
    return Result(
        runs[0].name, latencies, sum(r.wall_ns for r in runs), sum(r.cpu_ns for r in runs), runs[0].concurrency
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--iterations", type=int, default=3000)
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 8])
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.serve:
        asyncio.run(serve())
        return 0
    rows: list[Row] = []
    worst = float("inf")
    for concurrency in args.concurrency:
        pairs = asyncio.run(run(args.iterations, concurrency, args.rounds))
        for case, (raw, ours) in zip(("GET query", "POST json"), pairs, strict=True):
            label = f"{case} c={concurrency}"
            rows += [Row(label, raw), Row(label, ours, baseline=raw)]
            worst = min(worst, compare(raw, ours).ops_per_s)
    print_table(rows)
    print(f"\nHttpTool calls/s as a share of raw httpx (worst case): {worst:.1%}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
