"""ext-models-openai against the raw openai SDK on the same loopback OpenAIServer, in one run.

Run: ``hatch run ext-models-openai:python tools/bench/bench_openai.py [--iterations N] [--rounds R]``
(``--profile`` prints a cProfile of ext's create path instead).

Cases: ``create`` sequential and with 64 concurrent callers (p50/p99 latency, calls/s, CPU per call),
a streamed reply of ``--chunks`` text chunks (chunks/s after the first chunk, time to first chunk), and
cold import time (``import ext.models.openai`` vs ``import openai``). The server runs in the same event
loop, so CPU per call includes its share, identical for both sides. Raw and ext run in alternating batches
(``--rounds``) that are merged per side, so load from other processes weighs on both alike.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import pstats
import statistics
import subprocess
import sys
import time
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


def _merge(name: str, parts: Sequence[Result]) -> Result:
    latencies = tuple(ns for part in parts for ns in part.latencies_ns)
    return Result(
        name,
        latencies,
        sum(part.wall_ns for part in parts),
        sum(part.cpu_ns for part in parts),
        parts[0].concurrency,
    )


async def _pair(
    raw: Callable[[], Awaitable[Any]],
    ours: Callable[[], Awaitable[Any]],
    *,
    iterations: int,
    concurrency: int,
    rounds: int,
) -> tuple[Result, Result]:
    """Both sides in alternating batches, so a machine whose load changes during the run (other processes
    on a shared box) weighs on both equally; the batches of each side are merged."""
    batch = max(concurrency, iterations // rounds)
    await measure("warmup", raw, iterations=batch, concurrency=concurrency)
    await measure("warmup", ours, iterations=batch, concurrency=concurrency)
    raws: list[Result] = []
    exts: list[Result] = []
    for i in range(rounds):
        order = ((raws, "raw openai", raw), (exts, "ext", ours))
        for bucket, name, fn in order if i % 2 == 0 else order[::-1]:
            bucket.append(await measure(name, fn, iterations=batch, concurrency=concurrency))
    return _merge("raw openai", raws), _merge("ext", exts)


async def _stream_pair(
    raw: Callable[[], AsyncIterator[Any]], ours: Callable[[], AsyncIterator[Any]], *, runs: int
) -> tuple[StreamResult, StreamResult]:
    await measure_stream("warmup", raw, runs=2)
    await measure_stream("warmup", ours, runs=2)
    raws: list[StreamResult] = []
    exts: list[StreamResult] = []
    for i in range(runs):
        order = ((raws, "raw openai", raw), (exts, "ext", ours))
        for bucket, name, fn in order if i % 2 == 0 else order[::-1]:
            bucket.append(await measure_stream(name, fn, runs=1))

    def merged(name: str, parts: list[StreamResult]) -> StreamResult:
        return StreamResult(
            name,
            tuple(t for p in parts for t in p.ttfi_ns),
            tuple(r for p in parts for r in p.items_per_s),
            parts[-1].items,
        )

    return merged("raw openai", raws), merged("ext", exts)


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

        s_raw, s_ext = await _stream_pair(raw_stream, ext_stream, runs=stream_runs)

        await ours.close()
        await raw.close()

    layer_call, layer_chunk = await layer_costs(chunks)
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
    raw_chunk_us = 1e6 / s_raw.median_items_per_s
    print("ext's own layers, SDK stubbed out (CPU, deterministic):")
    print(
        f"  per create call {layer_call:.1f} µs = {layer_call / seq_raw.cpu_us_per_op * 100:.2f} % of the raw SDK's "
        f"{seq_raw.cpu_us_per_op:.0f} µs CPU per call"
    )
    print(
        f"  per stream chunk {layer_chunk:.2f} µs = {layer_chunk / raw_chunk_us * 100:.2f} % of the raw SDK's "
        f"{raw_chunk_us:.0f} µs per chunk"
    )
    print()
    times: dict[str, list[float]] = {"sdk": [], "ext": [], "sdk_client": [], "ext_client": []}
    for _ in range(import_runs):  # alternating fresh interpreters
        times["sdk"].append(import_time("openai", runs=1))
        times["ext"].append(import_time("ext.models.openai", runs=1))
        times["sdk_client"].append(_fresh_time(_SDK_CLIENT))
        times["ext_client"].append(_fresh_time(_EXT_CLIENT))
    t = {key: statistics.median(values) * 1e3 for key, values in times.items()}
    print(
        f"cold import: openai {t['sdk']:.1f} ms, ext.models.openai {t['ext']:.1f} ms, "
        f"difference {t['ext'] - t['sdk']:+.1f} ms (target <= +50 ms); median of {import_runs}"
    )
    print(
        f"import + first client: openai.AsyncOpenAI {t['sdk_client']:.1f} ms, OpenAIChatCompletionClient "
        f"{t['ext_client']:.1f} ms, difference {t['ext_client'] - t['sdk_client']:+.1f} ms"
    )


# `.chat.completions` is imported lazily by the SDK; ext's constructor touches it, a first raw call would too.
_SDK_CLIENT = "import openai\nopenai.AsyncOpenAI(api_key='sk-bench', max_retries=0).chat.completions\n"
_EXT_CLIENT = (
    "from ext.models.openai import OpenAIChatCompletionClient\n"
    "OpenAIChatCompletionClient('gpt-4o', api_key='sk-bench')\n"
)


def _fresh_time(body: str) -> float:
    """Seconds to run `body` in a fresh interpreter (imports included)."""
    code = f"import time\nt = time.perf_counter_ns()\n{body}print(time.perf_counter_ns() - t)\n"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return int(proc.stdout.strip().splitlines()[-1]) / 1e9


class _CannedCompletions:
    """Stands in for the SDK's `chat.completions` resource: returns pre-parsed SDK objects, so the CPU that
    ext's own layers add per call and per chunk can be measured without the SDK, socket and server noise."""

    def __init__(self, completion: Any, chunks: list[Any]) -> None:
        self.completion = completion
        self.chunks = chunks

    async def create(self, **kwargs: Any) -> Any:
        return _CannedStream(self.chunks) if kwargs.get("stream") else self.completion


class _CannedStream:
    def __init__(self, chunks: list[Any]) -> None:
        self._it = iter(chunks)

    async def __anext__(self) -> Any:
        try:
            return next(self._it)
        except StopIteration:
            raise StopAsyncIteration from None

    async def close(self) -> None:
        return None


async def layer_costs(chunks: int) -> tuple[float, float]:
    """CPU µs per create call and per streamed chunk spent in ext itself (the SDK stubbed out)."""
    from openai.types.chat import ChatCompletion, ChatCompletionChunk

    usage = {"prompt_tokens": 9, "completion_tokens": 9, "total_tokens": 18}
    completion = ChatCompletion.model_validate(
        {
            "id": "c",
            "object": "chat.completion",
            "created": 1,
            "model": MODEL,
            "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "Hello!"}}],
            "usage": usage,
        }
    )

    def chunk(delta: dict[str, Any], finish: str | None = None) -> Any:
        choice = {"index": 0, "delta": delta, "finish_reason": finish}
        return ChatCompletionChunk.model_validate(
            {"id": "c", "object": "chat.completion.chunk", "created": 1, "model": MODEL, "choices": [choice]}
        )

    canned = [chunk({"content": f"w{i} "}) for i in range(chunks)] + [chunk({}, "stop")]
    client = OpenAIChatCompletionClient(MODEL, api_key=KEY, max_retries=0)
    client._completions = _CannedCompletions(completion, canned)  # type: ignore[assignment]
    for _ in range(500):
        await client.create(EXT_MESSAGES)
    n = 20_000
    cpu0 = time.process_time_ns()
    for _ in range(n):
        await client.create(EXT_MESSAGES)
    per_call = (time.process_time_ns() - cpu0) / n / 1e3
    runs = 40
    cpu0 = time.process_time_ns()
    for _ in range(runs):
        async for _item in client.create_stream(EXT_MESSAGES):
            pass
    per_chunk = (time.process_time_ns() - cpu0) / runs / chunks / 1e3
    await client.close()
    return per_call, per_chunk


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
    parser.add_argument("--iterations", type=int, default=3000, help="create calls per case and side")
    parser.add_argument("--rounds", type=int, default=10, help="alternating batches per case, merged per side")
    parser.add_argument("--chunks", type=int, default=500, help="text chunks in the streamed reply")
    parser.add_argument("--stream-runs", type=int, default=30, help="streams per side (alternating)")
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
