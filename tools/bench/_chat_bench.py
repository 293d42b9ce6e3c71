"""The shared shape of a chat-client benchmark: ext against the raw SDK on one loopback server, in one run.

A provider's bench script builds the four callables (`ChatSides`) and calls `compare_chat` and
`compare_imports`; this module runs the cases the issues name and prints the table and the paired ratios:

- create, sequential and 64 in flight: p50/p99, ops/s and CPU per call, over several rounds of one raw and
  one ext run (in alternating order), with each round's ext/raw ratio and their median (pairs measured
  moments apart see the same load, so a burst on a shared machine does not land on one side only);
- a long stream: chunks/s after the first chunk, time to first chunk, and CPU per chunk;
- cold import time of the SDK and of ext's client, and what the client adds on top of the SDK.

The server runs in a child process (`loopback_servers`), so CPU columns measure the client alone.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

from _harness import Result, Row, StreamResult, compare, import_time, measure, measure_stream, print_table

STREAM_CHUNKS = 500
"""Chunks in the streamed reply of every chat bench."""


@dataclass(frozen=True)
class ChatSides:
    """One create and one stream per side. The stream callables yield the content chunks (the raw side
    filters the SDK's events to the text deltas, as code on the raw SDK would)."""

    raw_call: Callable[[], Awaitable[Any]]
    ext_call: Callable[[], Awaitable[Any]]
    raw_stream: Callable[[], AsyncIterator[Any]]
    ext_stream: Callable[[], AsyncIterator[Any]]


@asynccontextmanager
async def loopback_servers(code: str, *args: str) -> AsyncIterator[list[int]]:
    """Run `code` (a script printing its servers' ports on one line, then serving until stdin closes) in a
    child process; yield the ports."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-c", code, *args, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE
    )
    try:
        assert proc.stdout is not None
        line = await asyncio.wait_for(proc.stdout.readline(), 60)
        if not line.strip():
            raise RuntimeError("the bench server exited before printing its ports")
        yield [int(p) for p in line.split()]
    finally:
        if proc.stdin is not None:
            proc.stdin.close()
        try:
            await asyncio.wait_for(proc.wait(), 30)
        except asyncio.TimeoutError:
            proc.kill()
            await proc.wait()


def _median_round(results: list[Result]) -> Result:
    return sorted(results, key=lambda r: r.p50_ms)[len(results) // 2]


async def compare_creates(sides: ChatSides, *, iterations: int, rounds: int) -> None:
    rows: list[Row] = []
    notes: list[str] = []
    warmup = max(20, iterations // 10)
    for concurrency in (1, 64):
        case = "create" if concurrency == 1 else "create x64"
        raws: list[Result] = []
        exts: list[Result] = []
        for i in range(rounds):
            # Raw first in even rounds, ext first in odd ones: whatever the second run of a pair inherits
            # from the first (garbage, warm caches) falls on both sides.
            order = ((raws, "raw", sides.raw_call), (exts, "ext", sides.ext_call))
            for results, name, fn in order if i % 2 == 0 else order[::-1]:
                results.append(await measure(name, fn, iterations=iterations, warmup=warmup, concurrency=concurrency))
        r, o = _median_round(raws), _median_round(exts)
        rows += [Row(case, r), Row(case, o, baseline=r)]
        paired = [compare(a, b) for a, b in zip(raws, exts, strict=True)]
        p50 = statistics.median(x.p50 for x in paired)
        cpu = statistics.median(x.cpu for x in paired)
        ops = statistics.median(x.ops_per_s for x in paired)
        notes.append(
            f"{case}: median of {rounds} paired rounds, ext/raw: p50 {p50:.3f}, CPU/op {cpu:.3f}, ops/s {ops:.3f}"
        )
    print_table(rows)
    print("\n".join(notes))


async def compare_streams(sides: ChatSides, *, rounds: int, runs: int = 5) -> None:
    raw_runs: list[StreamResult] = []
    ext_runs: list[StreamResult] = []
    raw_cpu: list[float] = []
    ext_cpu: list[float] = []
    for i in range(rounds):
        # CPU per chunk (the client process only) is steadier than wall-clock rates on a busy machine.
        order = ((raw_runs, raw_cpu, "raw", sides.raw_stream), (ext_runs, ext_cpu, "ext", sides.ext_stream))
        for runs_list, cpu_list, name, source in order if i % 2 == 0 else order[::-1]:
            cpu0 = time.process_time_ns()
            result = await measure_stream(name, source, runs=runs, warmup=1)
            cpu_list.append((time.process_time_ns() - cpu0) / 1e3 / ((runs + 1) * result.items))
            runs_list.append(result)
    raw_s = sorted(raw_runs, key=lambda r: r.median_items_per_s)[rounds // 2]
    ext_s = sorted(ext_runs, key=lambda r: r.median_items_per_s)[rounds // 2]
    ratio = statistics.median(
        b.median_items_per_s / a.median_items_per_s for a, b in zip(raw_runs, ext_runs, strict=True)
    )
    print()
    for res in (raw_s, ext_s):
        print(
            f"stream {res.name:<4} ttfc {res.ttfi_ms:.3f} ms  {res.median_items_per_s:,.0f} chunks/s  "
            f"({res.items} items, median round of {rounds} x {runs} runs)"
        )
    print(f"stream throughput ext/raw: median over {rounds} paired rounds {ratio:.3f}")
    cpu_ratio = statistics.median(b / a for a, b in zip(raw_cpu, ext_cpu, strict=True))
    print(
        f"stream CPU per chunk: raw {statistics.median(raw_cpu):.1f} µs, ext {statistics.median(ext_cpu):.1f} µs "
        f"(paired ext/raw {cpu_ratio:.3f})"
    )


async def compare_chat(sides: ChatSides, *, iterations: int, rounds: int) -> None:
    """The create and stream cases, printed."""
    await compare_creates(sides, iterations=iterations, rounds=rounds)
    await compare_streams(sides, rounds=rounds)


def compare_imports(sdk: str, client: str, *, also: Sequence[tuple[str, str]] = (), runs: int = 9) -> None:
    """Cold import of the SDK and of ext's client module (bytecode caches warm, as after pip install), and
    what the client adds on top of the SDK; `also` adds (label, module) lines."""
    sdk_s = import_time(sdk, runs=runs)
    client_s = import_time(client, runs=runs)
    on_top = import_time(client, runs=runs, after=[sdk])
    print(f"\ncold import (median of {runs}): {sdk} {sdk_s * 1e3:.0f} ms; ext client {client_s * 1e3:.0f} ms")
    print(f"ext client after {sdk} is loaded: +{on_top * 1e3:.0f} ms")
    for label, module in also:
        print(f"{label}: {import_time(module, runs=runs) * 1e3:.0f} ms")


def chat_main(run: Callable[[int, int], Coroutine[Any, Any, None]], doc: str | None, argv: Sequence[str] | None) -> int:
    parser = argparse.ArgumentParser(description=doc.splitlines()[0] if doc else None)
    parser.add_argument("--iterations", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args(argv)
    asyncio.run(run(args.iterations, args.rounds))
    return 0
