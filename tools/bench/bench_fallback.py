"""ext-resilience's fallback and cooldowns against the bare client, beside LiteLLM's Router doing the same fallback on
the same loopback servers, in one run.

Run: ``hatch run ext-resilience:python tools/bench/bench_fallback.py [--blocks B] [--block N]
[--litellm-python PATH]``. LiteLLM runs in its own environment (``hatch env create bench-litellm``; its openai pin
need not sit beside ext's openai 3.x): this script starts the servers, runs ext's sides, then runs itself with
``--litellm-worker`` under that environment's Python against the same servers, and prints one table.

Servers: two ext-testing ``OpenAIServer``s in a child process (``_loopback_process``: sharing the client's event
loop, the server's own work would be charged to whatever round trip the client awaits next, Redis's included),
``ok`` (always a short reply) and ``failing`` (always a 500); redis-server is its own process too. Every side sends a
new message per call.

ext sides (``OpenAIChatCompletionClient``, SDK retries off, interleaved blocks so machine drift weighs alike):
``bare`` and ``bare (A/A)`` (the noise yardstick), ``fallback`` (a ``FallbackMiddleware`` pipeline, no failure),
``fallback + cooldown (memory)``, ``fallback + cooldown (Redis)`` (a real redis-server, ``RedisCooldowns``: one
round trip before each call, which also carries the earlier calls' successes), ``... (Redis, refresh 0.1 s)`` (the
"not cooling" answer reused for 0.1 s: no round trip in the caller's path), and ``failover`` (the main client on
``failing``, the backup on ``ok``: every call fails once and switches), and ``bare + one Redis PING`` (a bare create
after one PING to the same redis-server: the floor of any middleware that makes one round trip per call; its ``own``
is the PING's time). ``own`` is each call's wall time less the
time spent inside the bare clients' ``create`` (they are wrapped in timers): what the middlewares cost, free of the
server's share.

LiteLLM sides (``litellm.acompletion`` and ``Router.acompletion``, ``num_retries=0``, cooldowns off so the Router
fails over on every call): ``acompletion`` and ``acompletion (A/A)``, ``Router`` (one deployment, no failure) and
``Router failover`` (``fallbacks=[{"main": ["backup"]}]``). The Router's overhead is its p50 less ``acompletion``'s.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _harness import measure_interleaved, percentile

KEY = "sk-bench"
MODEL = "gpt-4o-mini"


def _stats(name: str, latencies_ns: Any, own_ns: list[int] | None, base_p50: float | None) -> dict[str, Any]:
    p50 = percentile(latencies_ns, 50) / 1e6
    row: dict[str, Any] = {
        "side": name,
        "p50_ms": p50,
        "p99_ms": percentile(latencies_ns, 99) / 1e6,
        "over_p50_us": None if base_p50 is None else (p50 - base_p50) * 1000,
        "own_p50_us": None if not own_ns else percentile(own_ns, 50) / 1e3,
        "own_p99_us": None if not own_ns else percentile(own_ns, 99) / 1e3,
    }
    return row


# --- ext ---------------------------------------------------------------------------------------------


def timed(cls: type[Any]) -> type[Any]:
    """A subclass of the client class that adds the wall time of each `create` to `inner_ns` (failed ones too)."""

    class InnerTimer(cls):  # type: ignore[misc]
        inner_ns = 0

        async def create(self, *args: Any, **kwargs: Any) -> Any:
            start = time.perf_counter_ns()
            try:
                return await super().create(*args, **kwargs)
            finally:
                type(self).inner_ns += time.perf_counter_ns() - start

    return InnerTimer


async def run_ext(ok_url: str, failing_url: str, redis_url: str, blocks: int, block: int) -> list[dict[str, Any]]:
    from ext.core import UserMessage
    from ext.models.openai import OpenAIChatCompletionClient
    from ext.pipeline import ChatClientBuilder
    from ext.redis import RedisConnection
    from ext.resilience import CooldownPolicy, Cooldowns, FallbackMiddleware, RedisCooldowns

    timer_cls = timed(OpenAIChatCompletionClient)

    def client(url: str, cls: type[Any] = OpenAIChatCompletionClient) -> Any:
        return cls(MODEL, base_url=url + "/v1", api_key=KEY, bundled_encodings=False, max_retries=0)

    policy = CooldownPolicy(min_calls=1000, window=60)  # never cools here: the cost of counting, not of skipping
    pipelines = {
        "fallback": None,
        "fallback + cooldown (memory)": Cooldowns(policy),
        "fallback + cooldown (Redis)": Cooldowns(policy, RedisCooldowns(redis_url, prefix=f"bench:{os.getpid()}")),
        "fallback + cooldown (Redis, refresh 0.1 s)": Cooldowns(
            policy, RedisCooldowns(redis_url, prefix=f"bench:{os.getpid()}:r", refresh=0.1)
        ),
    }
    bare_a, bare_b = client(ok_url), client(ok_url)
    built: dict[str, Any] = {}
    for name, cooldown in pipelines.items():
        main = client(ok_url, timer_cls)
        backup = client(ok_url, timer_cls)
        built[name] = ChatClientBuilder(main).use(FallbackMiddleware([backup], cooldown=cooldown)).build()
    failover = (
        ChatClientBuilder(client(failing_url, timer_cls))
        .use(FallbackMiddleware([client(ok_url, timer_cls)], names=["main", "backup"]))
        .build()
    )
    counters = [itertools.count() for _ in range(8)]
    own: dict[str, list[int]] = {name: [] for name in [*built, "failover", "bare + one Redis PING"]}
    ping_redis: Any = RedisConnection(redis_url).client()
    bare_ping = client(ok_url)

    def fresh(side: int) -> list[Any]:
        return [UserMessage(content=f"Say hi #{next(counters[side])}")]

    def side(index: int, name: str, target: Any, measured: bool) -> Any:
        async def call() -> None:
            before = timer_cls.inner_ns
            start = time.perf_counter_ns()
            await target.create(fresh(index))
            if measured:
                own[name].append(time.perf_counter_ns() - start - (timer_cls.inner_ns - before))

        return (name, call)

    async def ping_then_create() -> None:
        start = time.perf_counter_ns()
        await ping_redis.ping()
        own["bare + one Redis PING"].append(time.perf_counter_ns() - start)
        await bare_ping.create(fresh(7))

    sides = [
        side(0, "bare", bare_a, False),
        side(1, "bare (A/A)", bare_b, False),
        ("bare + one Redis PING", ping_then_create),
        *[side(2 + i, name, target, True) for i, (name, target) in enumerate(built.items())],
        side(6, "failover", failover, True),
    ]
    results, _ = await measure_interleaved(sides, blocks=blocks, block=block, warmup=block)
    base = percentile(results[0].latencies_ns, 50) / 1e6
    rows = [
        _stats(r.name, r.latencies_ns, own.get(r.name, [])[block:] or None, None if i == 0 else base)
        for i, r in enumerate(results)
    ]
    for target in [bare_a, bare_b, bare_ping, *built.values(), failover]:
        await target.close()
    await ping_redis.aclose()
    return rows


# --- LiteLLM (its own environment) -------------------------------------------------------------------


async def run_litellm(ok_url: str, failing_url: str, blocks: int, block: int) -> list[dict[str, Any]]:
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # no download of the cost map at import
    import litellm  # type: ignore[import-not-found,unused-ignore]

    Router: Any = getattr(litellm, "Router")  # noqa: B009 - not re-exported in litellm's stubs

    litellm.suppress_debug_info = True
    params_ok = {"model": f"openai/{MODEL}", "api_base": ok_url + "/v1", "api_key": KEY}
    params_failing = {"model": f"openai/{MODEL}", "api_base": failing_url + "/v1", "api_key": KEY}
    single = Router(model_list=[{"model_name": "main", "litellm_params": params_ok}], num_retries=0)
    fallback = Router(
        model_list=[
            {"model_name": "main", "litellm_params": params_failing},
            {"model_name": "backup", "litellm_params": params_ok},
        ],
        fallbacks=[{"main": ["backup"]}],
        num_retries=0,
        disable_cooldowns=True,  # fail over on every call, as ext's failover side does
    )
    counters = [itertools.count() for _ in range(4)]

    def fresh(side: int) -> list[Any]:
        return [{"role": "user", "content": f"Say hi #{next(counters[side])}"}]

    async def direct_a() -> None:
        await litellm.acompletion(messages=fresh(0), num_retries=0, **params_ok)

    async def direct_b() -> None:
        await litellm.acompletion(messages=fresh(1), num_retries=0, **params_ok)

    async def router() -> None:
        await single.acompletion(model="main", messages=fresh(2))

    async def router_failover() -> None:
        await fallback.acompletion(model="main", messages=fresh(3))

    sides = [
        ("litellm acompletion", direct_a),
        ("litellm acompletion (A/A)", direct_b),
        ("litellm Router", router),
        ("litellm Router failover", router_failover),
    ]
    results, _ = await measure_interleaved(sides, blocks=blocks, block=block, warmup=block)
    base = percentile(results[0].latencies_ns, 50) / 1e6
    return [_stats(r.name, r.latencies_ns, None, None if i == 0 else base) for i, r in enumerate(results)]


# --- the run -----------------------------------------------------------------------------------------


def print_rows(rows: list[dict[str, Any]]) -> None:
    def cell(value: float | None, digits: int = 1) -> str:
        return "-" if value is None else f"{value:.{digits}f}"

    header = f"{'side':42} {'p50 ms':>8} {'p99 ms':>8} {'p50 - base µs':>14} {'own p50 µs':>11} {'own p99 µs':>11}"
    print(header)
    print("-" * len(header))
    for row in rows:
        print(
            f"{row['side']:42} {cell(row['p50_ms'], 3):>8} {cell(row['p99_ms'], 3):>8} "
            f"{cell(row['over_p50_us']):>14} {cell(row['own_p50_us']):>11} {cell(row['own_p99_us']):>11}"
        )


async def main(args: argparse.Namespace) -> None:
    from _loopback_process import loopback_servers

    from ext.testing.redis import start_redis_server

    redis_server = start_redis_server()
    try:
        async with loopback_servers({"ok": "reply", "failing": "server_error"}) as urls:
            rows = await run_ext(urls["ok"], urls["failing"], redis_server.url, args.blocks, args.block)
            litellm_rows: list[dict[str, Any]] = []
            if args.litellm_python:
                command = [
                    args.litellm_python,
                    __file__,
                    "--litellm-worker",
                    urls["ok"],
                    urls["failing"],
                    "--blocks",
                    str(args.blocks),
                    "--block",
                    str(args.block),
                ]
                process = await asyncio.create_subprocess_exec(
                    *command, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
                )
                out, err = await process.communicate()
                if process.returncode != 0:
                    raise SystemExit(f"the LiteLLM side failed:\n{err.decode()[-3000:]}")
                litellm_rows = json.loads(out.decode().strip().splitlines()[-1])
    finally:
        redis_server.stop()
    print(f"blocks={args.blocks} x block={args.block} calls per side; python {sys.version.split()[0]}")
    print_rows(rows + litellm_rows)
    if litellm_rows:
        router = next(r for r in litellm_rows if r["side"] == "litellm Router")
        aa = next(r for r in litellm_rows if r["side"] == "litellm acompletion (A/A)")
        overhead, noise = router["over_p50_us"], aa["over_p50_us"]
        print(f"\nRouter overhead (p50 - acompletion p50): {overhead:.1f} µs (A/A: {noise:.1f} µs)")
    own_mem = next(r for r in rows if r["side"] == "fallback + cooldown (memory)")
    own_redis = next(r for r in rows if r["side"] == "fallback + cooldown (Redis)")
    print(
        f"ext fallback + cooldown own time p50: memory {own_mem['own_p50_us']:.1f} µs, "
        f"Redis {own_redis['own_p50_us']:.1f} µs"
    )


def parse() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--blocks", type=int, default=20)
    parser.add_argument("--block", type=int, default=50)
    parser.add_argument("--litellm-python", default=None, help="the Python of the bench-litellm environment")
    parser.add_argument("--litellm-worker", nargs=2, metavar=("OK_URL", "FAILING_URL"), help=argparse.SUPPRESS)
    return parser.parse_args()


if __name__ == "__main__":
    arguments = parse()
    if arguments.litellm_worker:
        ok_url, failing_url = arguments.litellm_worker
        found = asyncio.run(run_litellm(ok_url, failing_url, arguments.blocks, arguments.block))
        print(json.dumps(found))
    else:
        asyncio.run(main(arguments))
