"""Demo of the harness: a bare ``asyncio.sleep(0)`` ("raw") vs a wrapped one ("ext").

Run: ``python tools/bench/example_bench.py [--iterations N] [--concurrency C]``.
Real benchmarks follow the same shape: build both callables, measure both in the
same process, print one table.
"""

from __future__ import annotations

import argparse
import asyncio
from collections.abc import AsyncIterator, Sequence
from typing import Any

# Script-dir import: `python tools/bench/example_bench.py` puts tools/bench on sys.path.
from _harness import Row, import_time, measure, measure_stream, print_table


async def raw_call() -> None:
    await asyncio.sleep(0)


async def wrapped_call() -> dict[str, Any]:
    # Stands in for ext's per-call overhead: argument shaping plus a result object.
    request = {"op": "sleep", "args": (0,)}
    await asyncio.sleep(0)
    return {"request": request, "ok": True}


async def raw_stream(n: int) -> AsyncIterator[int]:
    for i in range(n):
        await asyncio.sleep(0)
        yield i


async def wrapped_stream(n: int) -> AsyncIterator[dict[str, int]]:
    async for item in raw_stream(n):
        yield {"index": item}


async def run(iterations: int, concurrency: int) -> None:
    warmup = max(1, iterations // 10)
    raw = await measure("raw", raw_call, iterations=iterations, warmup=warmup, concurrency=concurrency)
    ours = await measure("ext", wrapped_call, iterations=iterations, warmup=warmup, concurrency=concurrency)
    print_table([Row("sleep(0)", raw), Row("sleep(0)", ours, baseline=raw)])

    raw_s = await measure_stream("raw", lambda: raw_stream(1000), runs=5, warmup=1)
    ours_s = await measure_stream("ext", lambda: wrapped_stream(1000), runs=5, warmup=1)
    print()
    for res in (raw_s, ours_s):
        print(
            f"stream {res.name:<4} ttfi {res.ttfi_ms:.4f} ms  "
            f"{res.median_items_per_s:,.0f} items/s  ({res.items} items)"
        )
    print(f"\ncold import of asyncio: {import_time('asyncio', runs=3) * 1e3:.1f} ms (median of 3)")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--iterations", type=int, default=20_000)
    parser.add_argument("--concurrency", type=int, default=1)
    args = parser.parse_args(argv)
    asyncio.run(run(args.iterations, args.concurrency))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
