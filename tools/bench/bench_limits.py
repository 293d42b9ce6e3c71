"""ext-resilience's rate limit and budget middlewares against the bare client, and LiteLLM's Router with rpm/tpm
limits against bare LiteLLM, all on the same loopback OpenAI server in one run.

Run: ``hatch run bench-limits:python tools/bench/bench_limits.py [--blocks B] [--block N]``

Sides, each a create over a real socket to ext-testing's OpenAIServer (in a child process, ``_loopback_process``:
in the client's event loop the server's own work would be charged to the next round trip the client awaits, Redis's
included; redis-server is its own process too), timed in short interleaved blocks (``measure_interleaved``):

- ``bare`` and ``bare (A/A)``: two identical bare ``OpenAIChatCompletionClient``s; their difference is this run's noise.
- ``pipeline (none)``: the same client in a pipeline without middleware: what the pipeline itself costs (message
  validation, the chain), which every middleware side pays too.
- ``rate limit (memory)`` / ``(redis)``: a pipeline holding one ``RateLimitMiddleware`` (requests, tokens and
  concurrency per model, limits high enough never to wait) on the in-memory backend or on a real redis-server.
- ``budget (memory)`` / ``(redis)``: a pipeline holding one ``BudgetMiddleware`` (requests, tokens and cost, all
  checked before and recorded after each call, the cost priced from the genai-prices table).
- ``litellm`` and ``litellm Router``: ``litellm.acompletion`` to the same server, and a ``Router`` whose one
  deployment has ``rpm`` and ``tpm`` limits (``usage-based-routing-v2``, its in-memory usage counters), the Router's
  way of doing the same job.

For the ext sides the middleware's own time is also measured: the create's wall time less the time spent inside the
bare client's create (the client is wrapped in a timer). The p50 overhead of a side is its p50 less its baseline's
(``bare`` for ext, ``litellm`` for the Router); the A/A difference says how much of that is noise.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import itertools
import os
import statistics
import time
from decimal import Decimal
from typing import Any

from _harness import Result, measure_interleaved
from _loopback_process import loopback_servers

from ext.core import UserMessage

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # litellm fetches a cost map at import otherwise

KEY = "sk-bench"
MODEL = "gpt-4o-mini"
HIGH = 10**9


def timed(cls: type[Any]) -> type[Any]:
    """A subclass of the bare client class that keeps the wall time of its last `create`."""

    class InnerTimer(cls):  # type: ignore[misc]
        last_ns = 0

        async def create(self, *args: Any, **kwargs: Any) -> Any:
            start = time.perf_counter_ns()
            try:
                return await super().create(*args, **kwargs)
            finally:
                self.last_ns = time.perf_counter_ns() - start

    return InnerTimer


async def run(blocks: int, block: int, with_litellm: bool) -> None:
    from ext.models.openai import OpenAIChatCompletionClient
    from ext.pipeline import ChatClientBuilder, ChatMiddleware
    from ext.redis import RedisConnection
    from ext.resilience import (
        Budget,
        BudgetLimit,
        BudgetMiddleware,
        RateLimitMiddleware,
        RedisBudgetStore,
        RedisRateLimitBackend,
    )
    from ext.testing.redis import start_redis_server

    redis_server = start_redis_server()
    closers: list[Any] = []
    try:
        async with loopback_servers({"ok": "reply"}) as urls:
            base_url = urls["ok"] + "/v1"

            def client(wrap: bool = False) -> Any:
                cls = timed(OpenAIChatCompletionClient) if wrap else OpenAIChatCompletionClient
                made = cls(MODEL, base_url=base_url, api_key=KEY, bundled_encodings=False, max_retries=0)
                closers.append(made)
                return made

            def rate_limit(backend: Any = None) -> ChatMiddleware:
                return RateLimitMiddleware(
                    requests=HIGH, tokens=HIGH, concurrency=HIGH, backend=backend, close_backend=True
                )

            def budget(store: Any = None) -> ChatMiddleware:
                limit = BudgetLimit(requests=HIGH, tokens=HIGH, cost=Decimal(HIGH))
                return BudgetMiddleware(Budget([limit], store=store, close_store=True))

            connection = RedisConnection(redis_server.url)
            middlewares: dict[str, ChatMiddleware | None] = {
                "pipeline (none)": None,
                "rate limit (memory)": rate_limit(),
                "budget (memory)": budget(),
                "rate limit (redis)": rate_limit(RedisRateLimitBackend(connection, prefix="bench:rl:")),
                "budget (redis)": budget(RedisBudgetStore(connection, prefix="bench:budget:")),
            }
            counters: dict[str, itertools.count[int]] = {}

            def fresh(side: str) -> list[Any]:
                counter = counters.setdefault(side, itertools.count())
                return [UserMessage(content=f"Say hi #{next(counter)}")]

            own: dict[str, list[int]] = {}
            sides: list[tuple[str, Any]] = []
            for name in ("bare", "bare (A/A)"):
                bare = client()

                async def call_bare(bare: Any = bare, name: str = name) -> None:
                    await bare.create(fresh(name))

                sides.append((name, call_bare))
            for name, middleware in middlewares.items():
                timer = client(wrap=True)
                builder = ChatClientBuilder(timer)
                pipeline = (builder if middleware is None else builder.use(middleware)).build()
                closers.append(pipeline)
                own[name] = []

                async def call_pipeline(pipeline: Any = pipeline, timer: Any = timer, name: str = name) -> None:
                    start = time.perf_counter_ns()
                    await pipeline.create(fresh(name))
                    own[name].append(time.perf_counter_ns() - start - timer.last_ns)

                sides.append((name, call_pipeline))
            if with_litellm:
                sides += litellm_sides(base_url, fresh)

            results, _ = await measure_interleaved(sides, blocks=blocks, block=block, warmup=block)
            report(results, own, blocks, block, warmup=block)
            print()
            await alone(client(), rate_limit(), budget())
            await alone(
                client(),
                rate_limit(RedisRateLimitBackend(connection, prefix="bench:alone:rl:")),
                budget(RedisBudgetStore(connection, prefix="bench:alone:budget:")),
                label="redis",
                calls=2000,
            )
            await redis_round_trip(connection, client())
    finally:
        for item in reversed(closers):
            await item.close()
        redis_server.stop()


async def alone(client: Any, *limits: Any, label: str = "memory", calls: int = 20000) -> None:
    """Each middleware with nothing behind it (its `next` returns a ready result): the p50 and p90 of its time per
    call over `calls` calls (after a tenth as many to warm up)."""
    from ext.core import CreateResult, RequestUsage
    from ext.pipeline import ChatCall

    result = CreateResult(finish_reason="stop", content="hi", usage=RequestUsage(prompt_tokens=9, completion_tokens=9))

    async def answer(call: Any) -> CreateResult:
        return result

    for middleware in limits:
        times: list[float] = []
        for index in range(calls + calls // 10):
            call = ChatCall([UserMessage(content=f"Say hi #{index}")], client=client)
            start = time.perf_counter_ns()
            await middleware.create(call, answer)
            if index >= calls // 10:
                times.append((time.perf_counter_ns() - start) / 1000)
        times.sort()
        name = f"{type(middleware).__name__} ({label}) alone"
        print(f"{name:<38} p50 {times[len(times) // 2]:8.1f} µs, p90 {times[len(times) * 9 // 10]:8.1f} µs per call")


async def redis_round_trip(connection: Any, client: Any) -> None:
    """One Redis round trip (PING) on this machine now, in a tight loop and between two bare creates (where the
    middlewares make theirs): what a Redis decision cannot go below."""
    redis = connection.client()
    try:
        for _ in range(200):
            await redis.ping()
        tight, between = [], []
        for index in range(400):
            start = time.perf_counter_ns()
            await redis.ping()
            tight.append((time.perf_counter_ns() - start) / 1000)
            if index < 200:
                await client.create([UserMessage(content=f"Say hi #{index}")])
                start = time.perf_counter_ns()
                await redis.ping()
                between.append((time.perf_counter_ns() - start) / 1000)
        print(
            f"Redis round trip (PING) p50: {statistics.median(tight):.1f} µs in a tight loop, "
            f"{statistics.median(between):.1f} µs right after a bare create"
        )
    finally:
        await redis.aclose()


def litellm_sides(base_url: str, fresh: Any) -> list[tuple[str, Any]]:
    # Imported by name: litellm lives only in the bench-limits env, and the workspace-wide mypy run (tools/checks/
    # typecheck.py, the dev env) checks this file too.
    litellm: Any = importlib.import_module("litellm")
    Router: Any = importlib.import_module("litellm.router").Router

    litellm.suppress_debug_info = True
    params = {"model": f"openai/{MODEL}", "api_base": base_url, "api_key": KEY, "max_retries": 0}
    router = Router(
        model_list=[{"model_name": MODEL, "litellm_params": {**params, "rpm": HIGH, "tpm": HIGH}}],
        routing_strategy="usage-based-routing-v2",
        num_retries=0,
    )

    def messages(side: str) -> list[dict[str, str]]:
        return [{"role": "user", "content": fresh(side)[0].content}]

    async def call_litellm() -> None:
        await litellm.acompletion(messages=messages("litellm"), **params)

    async def call_router() -> None:
        await router.acompletion(model=MODEL, messages=messages("litellm Router"))

    return [("litellm", call_litellm), ("litellm Router", call_router)]


def report(results: list[Result], own: dict[str, list[int]], blocks: int, block: int, warmup: int) -> None:
    by_name = {r.name: r for r in results}
    print(f"{blocks} blocks of {block} creates per side, interleaved, on the loopback OpenAI server\n")
    print(f"{'side':<22} {'p50 µs':>9} {'p99 µs':>9} {'overhead p50 µs':>16} {'own time p50 µs':>16}")
    for result in results:
        baseline = "litellm" if result.name == "litellm Router" else "bare"
        overhead = ""
        if result.name not in ("bare", "litellm") and baseline in by_name:
            overhead = f"{(result.p50_ms - by_name[baseline].p50_ms) * 1000:+.1f}"
        times = sorted(own.get(result.name, [])[warmup:])
        mine = f"{times[len(times) // 2] / 1000:.1f}" if times else ""
        print(f"{result.name:<22} {result.p50_ms * 1000:>9.1f} {result.p99_ms * 1000:>9.1f} {overhead:>16} {mine:>16}")
    print(
        "\noverhead p50: the side's p50 less its baseline's (bare for ext, litellm for the Router); "
        "own time: the create less the bare client's create inside it (ext sides)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--blocks", type=int, default=40, help="interleaved blocks per side")
    parser.add_argument("--block", type=int, default=25, help="creates per block")
    parser.add_argument("--no-litellm", action="store_true", help="leave LiteLLM's sides out")
    args = parser.parse_args()
    asyncio.run(run(args.blocks, args.block, not args.no_litellm))


if __name__ == "__main__":
    main()
