"""ext-models-openai against the raw openai SDK on the same loopback OpenAIServer, in one run.

Run: ``hatch run ext-models-openai:python tools/bench/bench_openai.py [--iterations N] [--rounds R]``
(``--profile`` prints a cProfile of ext's create path instead).

Cases: ``create`` sequential and with 64 concurrent callers (p50/p99 latency, calls/s, CPU per call),
a streamed reply of ``--chunks`` text chunks (chunks/s after the first chunk, time to first chunk), and
cold import time (``import ext.models.openai`` vs ``import openai``). The server runs in the same event
loop, so CPU per call includes its share, identical for both sides. Rounds alternate raw and ext; each
side's round with the median p50 is reported.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import pstats
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import Any

import openai

# Script-dir import: `python tools/bench/bench_openai.py` puts tools/bench on sys.path.
from _harness import Result, Row, StreamResult, compare, format_table, import_time, measure, measure_stream

from ext.core import CreateResult, StreamChunk, UserMessage
from ext.models.openai import OpenAIChatCompletionClient
from ext.testing.script import Reply
from ext.testing.servers import OpenAIServer

KEY = "sk-bench"
MODEL = "gpt-4o-mini"
RAW_MESSAGES: list[Any] = [{"role": "user", "content": "Say hi"}]
EXT_MESSAGES = [UserMessage(content="Say hi")]


def _median_round(results: Sequence[Result]) -> Result:
    ordered = sorted(results, key=lambda r: r.p50_ms)
    return ordered[len(ordered) // 2]


def _median_stream(results: Sequence[StreamResult]) -> StreamResult:
    ordered = sorted(results, key=lambda r: r.median_items_per_s)
    return ordered[len(ordered) // 2]


async def _pair(
    raw: Callable[[], Awaitable[Any]],
    ours: Callable[[], Awaitable[Any]],
    *,
    iterations: int,
    concurrency: int,
    rounds: int,
) -> tuple[Result, Result]:
    warmup = max(50, iterations // 10)
    raws: list[Result] = []
    exts: list[Result] = []
    for _ in range(rounds):
        raws.append(await measure("raw openai", raw, iterations=iterations, warmup=warmup, concurrency=concurrency))
        exts.append(await measure("ext", ours, iterations=iterations, warmup=warmup, concurrency=concurrency))
    return _median_round(raws), _median_round(exts)


async def run(iterations: int, rounds: int, chunks: int, stream_runs: int, import_runs: int) -> None:
    text_reply = Reply(text="Hello! How can I help you today?", prompt_tokens=9, completion_tokens=9)
    pieces = [f"w{i} " for i in range(chunks)]
    stream_reply = Reply(chunks=pieces, prompt_tokens=9, completion_tokens=chunks)

    async with OpenAIServer(api_key=KEY, default=text_reply) as server:
        base_url = server.base_url + "/v1"
        raw = openai.AsyncOpenAI(base_url=base_url, api_key=KEY, max_retries=0, timeout=60.0)
        ours = OpenAIChatCompletionClient(MODEL, base_url=base_url, api_key=KEY, max_retries=0)

        async def raw_create() -> Any:
            return await raw.chat.completions.create(model=MODEL, messages=RAW_MESSAGES)

        async def ext_create() -> CreateResult:
            return await ours.create(EXT_MESSAGES)

        rows: list[Row] = []
        seq_raw, seq_ext = await _pair(raw_create, ext_create, iterations=iterations, concurrency=1, rounds=rounds)
        rows += [Row("create seq", seq_raw), Row("create seq", seq_ext, baseline=seq_raw)]
        con_raw, con_ext = await _pair(raw_create, ext_create, iterations=iterations, concurrency=64, rounds=rounds)
        rows += [Row("create x64", con_raw), Row("create x64", con_ext, baseline=con_raw)]

        server.default = stream_reply

        async def raw_stream() -> AsyncIterator[Any]:
            stream = await raw.chat.completions.create(
                model=MODEL, messages=RAW_MESSAGES, stream=True, stream_options={"include_usage": True}
            )
            async for chunk in stream:
                yield chunk

        def ext_stream() -> AsyncIterator[StreamChunk | CreateResult]:
            return ours.create_stream(EXT_MESSAGES)

        raw_streams: list[StreamResult] = []
        ext_streams: list[StreamResult] = []
        for _ in range(rounds):
            raw_streams.append(await measure_stream("raw openai", raw_stream, runs=stream_runs, warmup=2))
            ext_streams.append(await measure_stream("ext", ext_stream, runs=stream_runs, warmup=2))
        s_raw, s_ext = _median_stream(raw_streams), _median_stream(ext_streams)

        await ours.close()
        await raw.close()

    print(format_table(rows))
    print()
    for case, r, o in (("create seq", seq_raw, seq_ext), ("create x64", con_raw, con_ext)):
        ratios = compare(r, o)
        print(
            f"{case}: p50 {ratios.p50:.3f}x, p99 {ratios.p99:.3f}x, calls/s {ratios.ops_per_s:.3f}x, "
            f"CPU/call {ratios.cpu:.3f}x  (target: p50 and CPU at most 1.05x)"
        )
    print()
    print(f"stream of {chunks} text chunks (raw counts {s_raw.items} SDK chunks, ext {s_ext.items} items):")
    for res in (s_raw, s_ext):
        print(f"  {res.name:<11} {res.median_items_per_s:>12,.0f} chunks/s   first chunk {res.ttfi_ms:.3f} ms")
    print(f"  ext / raw throughput: {s_ext.median_items_per_s / s_raw.median_items_per_s:.3f}x  (target >= 0.95x)")
    print()
    t_sdk = import_time("openai", runs=import_runs)
    t_ext = import_time("ext.models.openai", runs=import_runs)
    print(
        f"cold import: openai {t_sdk * 1e3:.1f} ms, ext.models.openai {t_ext * 1e3:.1f} ms, "
        f"difference {(t_ext - t_sdk) * 1e3:+.1f} ms (target <= +50 ms); median of {import_runs}"
    )


async def profile(iterations: int) -> None:
    async with OpenAIServer(api_key=KEY, default=Reply(text="Hello!")) as server:
        ours = OpenAIChatCompletionClient(MODEL, base_url=server.base_url + "/v1", api_key=KEY, max_retries=0)
        for _ in range(100):
            await ours.create(EXT_MESSAGES)
        profiler = cProfile.Profile()
        profiler.enable()
        for _ in range(iterations):
            await ours.create(EXT_MESSAGES)
        profiler.disable()
        await ours.close()
    stats = pstats.Stats(profiler)
    stats.sort_stats("tottime").print_stats(30)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--iterations", type=int, default=2000, help="create calls per round and side")
    parser.add_argument("--rounds", type=int, default=3, help="alternating rounds; the median round is reported")
    parser.add_argument("--chunks", type=int, default=500, help="text chunks in the streamed reply")
    parser.add_argument("--stream-runs", type=int, default=15, help="streams per round and side")
    parser.add_argument("--import-runs", type=int, default=7, help="fresh interpreters per import measurement")
    parser.add_argument("--profile", action="store_true", help="cProfile ext's create path and exit")
    args = parser.parse_args(argv)
    if args.profile:
        asyncio.run(profile(args.iterations))
        return 0
    asyncio.run(run(args.iterations, args.rounds, args.chunks, args.stream_runs, args.import_runs))
    print(f"(python {sys.version.split()[0]}, openai {openai.__version__})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
