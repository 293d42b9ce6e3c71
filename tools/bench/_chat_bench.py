"""The shared shape of a chat-client benchmark: ext against the raw SDK on one loopback server, in one run.

A provider's bench script builds the four callables (`ChatSides`) and calls `compare_chat` and
`compare_imports`; this module runs the cases the issues name and prints the table and the paired ratios:

- create, sequential and 64 in flight: p50/p99, ops/s and CPU per call, measured in short interleaved
  blocks (25 calls a side at a time; 256 with 64 in flight) in alternating order, and the median of the
  per-block CPU ratios (`_harness.measure_interleaved`: on a VM the process's speed drifts 10-20 % over
  seconds, and only sides measured moments apart see the same conditions);
- a long stream, one raw and one ext stream in turn: chunks/s after the first chunk, time to first chunk,
  and CPU per chunk, each as the median over the interleaved pairs;
- cold import time of the SDK and of ext's client, and what the client adds on top of the SDK.

The server runs in a child process (`loopback_servers`), so CPU columns measure the client alone.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

from _harness import (
    Row,
    StreamResult,
    callgrind_per_op,
    compare,
    import_time,
    measure_interleaved,
    measure_stream,
    median_ci,
    print_table,
)

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
    raw_control: Callable[[], Awaitable[Any]] | None = None
    """An A/A control: the raw create on a second, independent SDK client. When given, it runs in the same
    interleaved blocks as the two sides, and its ratio to raw (the noise floor) is printed next to ext's."""


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


_TEXT_AND_STREAM = """
import asyncio, sys
from ext.testing.script import Reply
from {module} import {server}

async def main():
    text = {server}(api_key=sys.argv[1], default=Reply(text="Hello! How can I help you today?"), record=False)
    stream = {server}(
        api_key=sys.argv[1], default=Reply(chunks=[f"w{{i}} " for i in range(int(sys.argv[2]))]), record=False
    )
    async with text, stream:
        print(text.port, stream.port, flush=True)
        await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)

asyncio.run(main())
"""


def text_and_stream_servers(module: str, server: str, api_key: str) -> Any:
    """Two loopback servers of class `module.server` (taking `api_key=`) in a child process: one answering every
    request with a short text, one with a `STREAM_CHUNKS`-chunk reply. An async context manager yielding
    `(text_port, stream_port)`."""
    return loopback_servers(_TEXT_AND_STREAM.format(module=module, server=server), api_key, str(STREAM_CHUNKS))


_BLOCK = {1: 25, 64: 256}
"""Ops per side per interleaved block, by concurrency."""

_MIN_BLOCKS = {1: 2, 64: 64}
"""Blocks at least, by concurrency. With 64 in flight one block's CPU ratio scatters by +-20 % (how the
client's and the server's turns on the cores fall), so it takes some 60 blocks to pin the median to about
+-2 % (an A/A run of raw against itself with 20 blocks gave 0.98-1.02)."""


async def compare_creates(sides: ChatSides, *, iterations: int, rounds: int) -> None:
    rows: list[Row] = []
    notes: list[str] = []
    for concurrency in (1, 64):
        case = "create" if concurrency == 1 else "create x64"
        block = _BLOCK[concurrency]
        blocks = max(_MIN_BLOCKS[concurrency], rounds * iterations // block)
        blocks += blocks % 2  # even: each side goes first equally often
        named = [("raw", sides.raw_call), ("ext", sides.ext_call)]
        if sides.raw_control is not None:
            named.append(("raw A/A", sides.raw_control))
        results, block_ratios = await measure_interleaved(
            named,
            blocks=blocks,
            block=block,
            warmup=max(20, iterations // 10),
            concurrency=concurrency,
        )
        raw, ext = results[0], results[1]
        rows += [Row(case, raw), Row(case, ext, baseline=raw)]
        rows += [Row(case, other, baseline=raw) for other in results[2:]]
        labels = ("ext/raw", "A/A raw/raw")[: len(results) - 1]
        for label, result, cpu_ratios in zip(labels, results[1:], block_ratios[1:], strict=True):
            ratios = compare(raw, result)
            lo, hi = median_ci(cpu_ratios)
            notes.append(
                f"{case}: {blocks} interleaved blocks of {block} calls a side, {label}: p50 {ratios.p50:.3f}, "
                f"CPU/op {statistics.median(cpu_ratios):.3f} (median of the blocks, 95 % CI {lo:.3f}-{hi:.3f}), "
                f"ops/s {ratios.ops_per_s:.3f}"
            )
    print_table(rows)
    print("\n".join(notes))


async def compare_streams(sides: ChatSides, *, rounds: int, runs: int = 5) -> None:
    """`rounds * runs` streams a side, one raw and one ext in turn (order alternating)."""
    results: dict[str, list[StreamResult]] = {"raw": [], "ext": []}
    cpu: dict[str, list[float]] = {"raw": [], "ext": []}
    sources = {"raw": sides.raw_stream, "ext": sides.ext_stream}
    for name in sources:
        await measure_stream(name, sources[name], runs=1, warmup=1)
    for i in range(rounds * runs):
        for name in ("raw", "ext") if i % 2 == 0 else ("ext", "raw"):
            cpu0 = time.process_time_ns()
            result = await measure_stream(name, sources[name], runs=1)
            cpu[name].append((time.process_time_ns() - cpu0) / 1e3 / result.items)
            results[name].append(result)
    print()
    for name in ("raw", "ext"):
        runs_of = results[name]
        ttfc = statistics.median(r.ttfi_ms for r in runs_of)
        rate = statistics.median(r.median_items_per_s for r in runs_of)
        print(
            f"stream {name:<4} ttfc {ttfc:.3f} ms  {rate:,.0f} chunks/s  ({runs_of[-1].items} items, median of "
            f"{len(runs_of)} streams)"
        )
    pairs = list(zip(results["raw"], results["ext"], strict=True))
    ratio = statistics.median(b.median_items_per_s / a.median_items_per_s for a, b in pairs)
    print(f"stream throughput ext/raw: median over {len(pairs)} interleaved pairs {ratio:.3f}")
    cpu_ratio = statistics.median(b / a for a, b in zip(cpu["raw"], cpu["ext"], strict=True))
    print(
        f"stream CPU per chunk: raw {statistics.median(cpu['raw']):.1f} µs, ext {statistics.median(cpu['ext']):.1f} µs "
        f"(paired ext/raw {cpu_ratio:.3f})"
    )


_PHASES: int | None = None
"""Set by `--phases N` (the child of `--callgrind`): `compare_chat` marks phases of N creates instead."""

_PHASE_REPEATS = 3


async def marked_phases(sides: ChatSides, count: int) -> None:
    """`count` sequential creates a side as one phase, three times each side in turn, each phase between two
    `os.getppid()` marks (see `_harness.callgrind_phase_totals`)."""
    import os

    calls = {"raw": sides.raw_call, "ext": sides.ext_call}
    for fn in calls.values():
        for _ in range(40):
            await fn()
    order: list[str] = []
    for _ in range(_PHASE_REPEATS):
        for name, fn in calls.items():
            os.getppid()
            order.append(name)
            for _ in range(count):
                await fn()
    os.getppid()
    print("PHASES " + "|".join(order), flush=True)


def instructions(script: str, count: int) -> str:
    """Client instructions per sequential create of each side, from a callgrind run of `marked_phases`."""
    per_call = callgrind_per_op(script, ["--phases", str(count)], count)
    raw, ext = per_call["raw"], per_call["ext"]
    return (
        f"create instructions per call (client, min of {_PHASE_REPEATS} phases of {count}): raw {raw / 1e3:,.0f}k, "
        f"ext {ext / 1e3:,.0f}k ({ext / 1e3 - raw / 1e3:+,.0f}k, {100 * (ext / raw - 1):+.1f} %)"
    )


async def compare_chat(sides: ChatSides, *, iterations: int, rounds: int) -> None:
    """The create and stream cases, printed (or, under `--phases`, the marked phases only)."""
    if _PHASES is not None:
        await marked_phases(sides, _PHASES)
        return
    await compare_creates(sides, iterations=iterations, rounds=rounds)
    await compare_streams(sides, rounds=rounds)


def compare_imports(sdk: str, client: str, *, also: Sequence[tuple[str, str]] = (), runs: int = 9) -> None:
    """Cold import of the SDK and of ext's client module (bytecode caches warm, as after pip install), and
    what the client adds on top of the SDK; `also` adds (label, module) lines."""
    if _PHASES is not None:
        return
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
    parser.add_argument(
        "--callgrind",
        action="store_true",
        help="instead: client instructions per sequential create, raw and ext, under valgrind (about a minute)",
    )
    parser.add_argument("--phases", type=int, help=argparse.SUPPRESS)  # the child of --callgrind
    args = parser.parse_args(argv)
    if args.callgrind:
        print(instructions(os.path.abspath(sys.argv[0]), 60))
        return 0
    global _PHASES
    _PHASES = args.phases
    asyncio.run(run(args.iterations, args.rounds))
    return 0
