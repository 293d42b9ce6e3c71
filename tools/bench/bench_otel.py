"""OpenTelemetryMiddleware's overhead per call: a chat pipeline with and without it, on one loopback server.

Run: ``hatch run ext-telemetry-opentelemetry:python tools/bench/bench_otel.py [--blocks N] [--block N]``.

Four sides against the same in-process OpenAI-protocol server (ext-testing's ``OpenAIServer``), each its own
``OpenAIChatCompletionClient`` in a ``ChatPipeline``, timed in short interleaved blocks:

- ``bare``: the pipeline without middleware; ``bare (A/A)``: a second one, the noise control;
- ``otel, no SDK``: with ``OpenTelemetryMiddleware()`` and no SDK configured (the API's no-op tracer and meter);
- ``otel, SDK``: with the middleware on an SDK ``TracerProvider`` (a simple processor and an exporter that drops
  spans) and an SDK ``MeterProvider`` (an in-memory reader): every span and histogram is really recorded.

The server runs in this process, so each op's CPU includes the server's work; the overhead is the difference
in CPU µs per op with ``bare``, and the ratio column is the median of the per-block CPU ratios with a 95 %
confidence interval (the A/A row shows how far apart two identical sides land).

``--callgrind N`` counts instructions per create instead (valgrind's callgrind; counts do not drift with the
machine's load).

A second table times the middleware alone, without a client or a network: its ``create`` hook around a ``next``
that returns a ready result, against that ``next`` called directly (and again, as the A/A control).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

# Script-dir import: `python tools/bench/bench_otel.py` puts tools/bench on sys.path.
from _harness import Result, Row, callgrind_per_op, measure_interleaved, median_ci, print_table
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult

from ext.core import ChatOptions, CreateResult, RequestUsage, UserMessage
from ext.models.openai import OpenAIChatCompletionClient
from ext.pipeline import ChatCall, ChatClientBuilder
from ext.telemetry.opentelemetry import OpenTelemetryMiddleware
from ext.testing.servers import OpenAIServer, Reply

KEY = "sk-bench"
MESSAGES = [UserMessage(content="Hello")]
OPTIONS = ChatOptions(temperature=0.2, max_tokens=64)


class DropSpans(SpanExporter):
    """An exporter that takes every span and keeps none (the SDK's recording cost, no export cost)."""

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        return SpanExportResult.SUCCESS


async def run(blocks: int, block: int, phases: int | None = None) -> None:
    """The wire case: measured in interleaved blocks, or (``phases``, under callgrind) marked phases."""
    async with OpenAIServer(api_key=KEY, default=Reply(text="Hello! How can I help?"), record=False) as server:

        def client() -> OpenAIChatCompletionClient:
            return OpenAIChatCompletionClient(
                "gpt-4o-mini", base_url=server.base_url + "/v1", api_key=KEY, max_retries=0, bundled_encodings=False
            )

        tracer_provider = TracerProvider()
        tracer_provider.add_span_processor(SimpleSpanProcessor(DropSpans()))
        meter_provider = MeterProvider(metric_readers=[InMemoryMetricReader()])
        pipelines = {
            "bare": ChatClientBuilder(client()).build(),
            "bare (A/A)": ChatClientBuilder(client()).build(),
            "otel, no SDK": ChatClientBuilder(client()).use(OpenTelemetryMiddleware()).build(),
            "otel, SDK": ChatClientBuilder(client())
            .use(OpenTelemetryMiddleware(tracer_provider=tracer_provider, meter_provider=meter_provider))
            .build(),
        }

        def side(name: str) -> tuple[str, Callable[[], Awaitable[Any]]]:
            pipeline = pipelines[name]

            async def create() -> Any:
                return await pipeline.create(MESSAGES, options=OPTIONS)

            return name, create

        sides = [side(name) for name in pipelines]
        try:
            if phases is not None:
                await marked_phases(sides, phases)
                return
            results, ratios = await measure_interleaved(sides, blocks=blocks, block=block, warmup=200)
        finally:
            for pipeline in pipelines.values():
                await pipeline.close()
            tracer_provider.shutdown()
            meter_provider.shutdown()
    report("create", results, ratios)


async def marked_phases(sides: Sequence[tuple[str, Callable[[], Awaitable[Any]]]], count: int) -> None:
    """`count` creates a side as one phase, three times each side in turn, between `os.getppid()` marks (see
    `_harness.callgrind_phase_totals`)."""
    for _, fn in sides:
        for _ in range(40):
            await fn()
    order: list[str] = []
    for _ in range(3):
        for name, fn in sides:
            os.getppid()
            order.append(name)
            for _ in range(count):
                await fn()
    os.getppid()
    print("PHASES " + "|".join(order), flush=True)


def instructions(count: int) -> None:
    """Instructions per create of each side (server and client: the server's share is the same on every side),
    the least over three phases, from a callgrind run of `marked_phases`."""
    per_op = callgrind_per_op(__file__, ["--phases", str(count)], count)
    base = per_op["bare"]
    print(f"instructions per create (min of 3 phases of {count}; client and in-process server):")
    for name, value in per_op.items():
        extra = value / 1e3 - base / 1e3
        print(f"  {name:<14} {value / 1e3:>9,.0f}k  {extra:>+8,.0f}k  {100 * (value / base - 1):+6.1f} %")


async def alone(blocks: int, block: int) -> None:
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(DropSpans()))
    meter_provider = MeterProvider(metric_readers=[InMemoryMetricReader()])
    client = OpenAIChatCompletionClient(
        "gpt-4o-mini", base_url="http://127.0.0.1:9/v1", api_key=KEY, max_retries=0, bundled_encodings=False
    )
    call = ChatCall(MESSAGES, options=OPTIONS, client=client)
    result = CreateResult.of("stop", "Hello! How can I help?", RequestUsage.of(9, 9))

    async def ready(call: ChatCall) -> CreateResult:
        return result

    def side(name: str, middleware: OpenTelemetryMiddleware | None) -> tuple[str, Any]:
        if middleware is None:

            async def direct() -> Any:
                return await ready(call)

            return name, direct

        async def hooked() -> Any:
            return await middleware.create(call, ready)

        return name, hooked

    sides = [
        side("next", None),
        side("next (A/A)", None),
        side("otel, no SDK", OpenTelemetryMiddleware()),
        side("otel, SDK", OpenTelemetryMiddleware(tracer_provider=tracer_provider, meter_provider=meter_provider)),
    ]
    try:
        results, ratios = await measure_interleaved(sides, blocks=blocks, block=block, warmup=1000)
    finally:
        await client.close()
        tracer_provider.shutdown()
        meter_provider.shutdown()
    report("hook alone", results, ratios)


def report(case: str, results: list[Result], ratios: list[list[float]]) -> None:
    base = results[0]
    print_table([Row(case, r, baseline=None if i == 0 else base) for i, r in enumerate(results)])
    print()
    print(f"{'side':<14} {'CPU µs/op over ' + base.name:>24} {'CPU ratio (median)':>19} {'95 % CI':>16}")
    for result, per_block in zip(results[1:], ratios[1:], strict=True):
        lo, hi = median_ci(per_block)
        extra = result.cpu_us_per_op - base.cpu_us_per_op
        print(f"{result.name:<14} {extra:>+24.1f} {statistics.median(per_block):>18.3f}x {lo:>7.3f}-{hi:<7.3f}")
    print()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--blocks", type=int, default=100)
    parser.add_argument("--block", type=int, default=50)
    parser.add_argument("--callgrind", type=int, metavar="N", help="instructions per create (N creates a phase)")
    parser.add_argument("--phases", type=int, help=argparse.SUPPRESS)  # the child of --callgrind
    args = parser.parse_args(argv)
    if args.phases:
        asyncio.run(run(0, 0, phases=args.phases))
        return 0
    if args.callgrind:
        instructions(args.callgrind)
        return 0
    asyncio.run(run(args.blocks, args.block))
    asyncio.run(alone(args.blocks, args.block * 20))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
