"""ext-core's chat pipeline against the bare client it wraps, on the same loopback OpenAIServer, in one run.

Run: ``hatch run ext-models-openai:python tools/bench/bench_pipeline.py [--blocks B] [--block N]``

Cases, all through ``OpenAIChatCompletionClient`` over a real socket to ext-testing's OpenAI server (in the
same event loop, so every side pays the same server share):

- ``bare`` and ``bare (A/A)``: two identical bare clients. Their difference is the noise of this machine and
  this run: the yardstick for the pipeline's overhead.
- ``pipeline miss``: the same client in a logging + retry + cache pipeline where every call misses the cache
  (each call sends a new message; so do the bare sides, the k-th create of every side the same one). The
  logger is enabled at INFO with a NullHandler, so every record is built and handed to the handlers, as in an
  app that logs.
- ``cache hit``: the same request again and again through a cache pipeline: the cost of a hit, no network.
- the pipeline's own time: per miss, the create's wall time less the time spent inside the bare client's
  create (the client is wrapped in a timer that delegates to it). The pipeline never yields to the event loop
  outside that inner call, so this is the CPU its middlewares cost, free of the server's share and of the
  drift that moves the A/A sides apart.

The create sides run in short interleaved blocks (``measure_interleaved``), so drift of the machine's speed
weighs on all of them alike. The per-block CPU ratios (side / bare) are summarised by their median with a 95 %
confidence interval, and by the spread of the blocks themselves (p5-p95): the A/A side's spread is how much one
block of creates varies on this machine, the median's interval how precisely the run pins the difference down.

With ``--against model`` (``hatch run ext-models-llama-cpp:python tools/bench/bench_pipeline.py --against model``)
the same three create sides run on a real model instead: ``LlamaCppChatCompletionClient`` on the embedded
SmolLM2-135M-Instruct, in process, greedy, at most 8 completion tokens per create. Each side has its own model
instance (so llama.cpp's prompt reuse is the same for all), and every create sends a new message, as above.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import logging
import statistics
import time
from typing import Any

from _harness import Row, format_table, measure, measure_interleaved, median_ci

from ext.core import ChatCompletionClient, RetryPolicy, UserMessage
from ext.pipeline import ChatClientBuilder, InMemoryCacheStore

KEY = "sk-bench"
MODEL = "gpt-4o-mini"


def timed(cls: type[Any]) -> type[Any]:
    """A subclass of the bare client class `cls` that keeps the wall time of its last `create` (a subclass, so
    the middlewares read its `provider_name`, `model` and component dump as they would on the client itself)."""

    class InnerTimer(cls):  # type: ignore[misc]
        last_ns = 0

        async def create(self, *args: Any, **kwargs: Any) -> Any:
            start = time.perf_counter_ns()
            try:
                return await super().create(*args, **kwargs)
            finally:
                self.last_ns = time.perf_counter_ns() - start

    return InnerTimer


def pipeline_logger() -> logging.Logger:
    """A logger on at INFO with a NullHandler: every record is built and handed to the handlers."""
    logger = logging.getLogger("bench.pipeline")
    logger.setLevel(logging.INFO)
    if not logger.handlers:
        logger.addHandler(logging.NullHandler())
    logger.propagate = False
    return logger


async def compare_creates(
    make: Any, blocks: int, block: int, warmup: int
) -> tuple[list[Any], list[list[float]], list[int], list[ChatCompletionClient]]:
    """Bare, bare (A/A) and a logging + retry + cache pipeline that always misses, each a fresh client from
    `make(cls)`, in interleaved blocks. Returns the three Results, the per-block CPU ratios, the pipeline's own
    time per create (warmup left out) and the clients (for the caller to close)."""
    bare_a = make(None)
    bare_b = make(None)
    timer = make(timed)
    pipeline = (
        ChatClientBuilder(timer)
        .use_logging(logger=pipeline_logger())
        .use_retry(RetryPolicy(max_retries=3))
        .use_cache(InMemoryCacheStore(max_entries=1024))
        .build()
    )
    # Each side its own counter: side by side, the k-th create of every side sends the same new message.
    counters = [itertools.count() for _ in range(3)]

    def fresh(side: int) -> list[Any]:
        return [UserMessage(content=f"Say hi #{next(counters[side])}")]

    async def call_a() -> None:
        await bare_a.create(fresh(0))

    async def call_b() -> None:
        await bare_b.create(fresh(1))

    own_ns: list[int] = []

    async def call_pipeline() -> None:
        start = time.perf_counter_ns()
        await pipeline.create(fresh(2))
        own_ns.append(time.perf_counter_ns() - start - timer.last_ns)

    sides = [("bare", call_a), ("bare (A/A)", call_b), ("pipeline miss", call_pipeline)]
    results, cpu_ratios = await measure_interleaved(sides, blocks=blocks, block=block, warmup=warmup)
    return results, cpu_ratios, own_ns[warmup:], [bare_a, bare_b, pipeline]


async def run(blocks: int, block: int, hits: int) -> None:
    from ext.models.openai import OpenAIChatCompletionClient
    from ext.testing.script import Reply
    from ext.testing.servers import OpenAIServer

    reply = Reply(text="Hello! How can I help you today?", prompt_tokens=9, completion_tokens=9)
    async with OpenAIServer(api_key=KEY, default=reply, record=False) as server:

        def make(wrap: Any) -> Any:
            cls = wrap(OpenAIChatCompletionClient) if wrap else OpenAIChatCompletionClient
            return cls(MODEL, base_url=server.base_url + "/v1", api_key=KEY, bundled_encodings=False, max_retries=0)

        results, cpu_ratios, own_ns, clients = await compare_creates(make, blocks, block, warmup=block)

        hit_pipeline = ChatClientBuilder(make(None)).use_cache(InMemoryCacheStore()).build()
        same = [UserMessage(content="Say hi")]
        await hit_pipeline.create(same)

        async def call_hit() -> None:
            result = await hit_pipeline.create(same)
            assert result.cached

        hit = await measure("cache hit", call_hit, iterations=hits, warmup=min(hits, 1000))
        for client in [*clients, hit_pipeline]:
            await client.close()

    base, aa, miss = results
    print(f"{blocks} blocks of {block} creates per side, interleaved; {hits} cache hits\n")
    print(format_table([Row("create", base), Row("create", aa, baseline=base), Row("create", miss, baseline=base)]))
    print(format_table([Row("create (hit)", hit, baseline=base)]).split("\n", 2)[2])
    print()
    report(results, cpu_ratios, own_ns)
    print(
        f"cache hit p50: {hit.p50_ms * 1000:.1f} µs (p99 {hit.p99_ms * 1000:.1f} µs); bare create p50 "
        f"{base.p50_ms * 1000:.1f} µs"
    )


async def run_model(blocks: int, block: int, max_tokens: int) -> None:
    from ext.models.llama_cpp import LlamaCppChatCompletionClient, default_model_path

    path = default_model_path()

    def make(wrap: Any) -> Any:
        cls = wrap(LlamaCppChatCompletionClient) if wrap else LlamaCppChatCompletionClient
        return cls(path, temperature=0.0, seed=0, max_tokens=max_tokens)

    results, cpu_ratios, own_ns, clients = await compare_creates(make, blocks, block, warmup=2)
    for client in clients:
        await client.close()
    base, aa, miss = results
    print(f"SmolLM2-135M-Instruct (llama.cpp, in process), at most {max_tokens} completion tokens per create")
    print(f"{blocks} blocks of {block} creates per side, interleaved\n")
    print(format_table([Row("create", base), Row("create", aa, baseline=base), Row("create", miss, baseline=base)]))
    print()
    report(results, cpu_ratios, own_ns)


def report(results: list[Any], cpu_ratios: list[list[float]], own_ns: list[int]) -> None:
    base, aa, miss = results
    for name, ratios in zip(("bare (A/A)", "pipeline miss"), cpu_ratios[1:], strict=True):
        lo, hi = median_ci(ratios)
        spread = sorted(ratios)
        p5, p95 = spread[len(spread) // 20], spread[len(spread) * 19 // 20]
        print(
            f"CPU per block vs bare, {name:<14}: median {statistics.median(ratios):.3f} (95 % CI {lo:.3f}-{hi:.3f}); "
            f"blocks p5-p95 {p5:.3f}-{p95:.3f}"
        )
    aa_noise = abs(aa.p50_ms - base.p50_ms) * 1000
    overhead = (miss.p50_ms - base.p50_ms) * 1000
    print(f"p50 overhead of logging + retry + cache miss: {overhead:+.1f} µs per create; A/A noise {aa_noise:.1f} µs")
    own = sorted(own_ns)
    print(
        f"pipeline's own time per miss (the create less the bare client's create inside it): "
        f"p50 {own[len(own) // 2] / 1000:.1f} µs, p90 {own[len(own) * 9 // 10] / 1000:.1f} µs"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--against", choices=("loopback", "model"), default="loopback", help="what the client calls")
    parser.add_argument("--blocks", type=int, help="interleaved blocks per side (default: 60 loopback, 20 model)")
    parser.add_argument("--block", type=int, help="creates per block (default: 50 loopback, 5 model)")
    parser.add_argument("--hits", type=int, default=20000, help="cache hits to time (loopback)")
    parser.add_argument("--max-tokens", type=int, default=8, help="completion tokens per create (model)")
    args = parser.parse_args()
    if args.against == "model":
        asyncio.run(run_model(args.blocks or 20, args.block or 5, args.max_tokens))
    else:
        asyncio.run(run(args.blocks or 60, args.block or 50, args.hits))


if __name__ == "__main__":
    main()
