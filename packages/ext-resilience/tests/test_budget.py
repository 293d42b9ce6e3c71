"""Budgets over the real OpenAI client on the loopback server: the tool loop stopped at the call that would cross a
cost limit, spend equal to the price table's price of the usage, streams, embeddings, runs, windows, unpriced models,
and the Redis store with two writers in two processes."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import warnings
from decimal import Decimal

import genai_prices
import pytest
from ext_resilience_limits_support import KEY, openai_client

from ext.core import ConfigurationError, CreateResult, FunctionTool, RequestUsage, UserMessage
from ext.models.openai import OpenAIEmbeddingClient
from ext.pipeline import ChatClientBuilder
from ext.redis import RedisConnection
from ext.resilience import (
    Budget,
    BudgetedEmbeddingClient,
    BudgetExceededError,
    BudgetLimit,
    BudgetMiddleware,
    PriceTable,
    RedisBudgetStore,
    UnpricedModelError,
    limit_key,
    price_usage,
)
from ext.testing.redis import RedisServer
from ext.testing.servers import OpenAIServer, Reply, ToolCallSpec

HELLO = [UserMessage(content="Hi")]
NANO = Decimal("0.000000001")


def table_price(model: str, prompt: int, completion: int) -> Decimal:
    """The price straight from genai-prices (not through ext), to the billionth."""
    usage = genai_prices.Usage(input_tokens=prompt, output_tokens=completion)
    return genai_prices.calc_price(usage, model, provider_id="openai").total_price.quantize(NANO)


def embedding_client(server: OpenAIServer) -> OpenAIEmbeddingClient:
    return OpenAIEmbeddingClient("text-embedding-3-small", base_url=server.base_url + "/v1", api_key=KEY, max_retries=0)


def add(a: int, b: int) -> int:
    """Adds two numbers."""
    return a + b


async def test_a_tool_loop_stops_at_the_call_that_would_cross_the_cost_limit(limits_server: OpenAIServer) -> None:
    per_call = table_price("gpt-4o-mini", 1000, 500)
    limits_server.default = Reply(
        tool_calls=[ToolCallSpec("add", {"a": 1, "b": 2})], prompt_tokens=1000, completion_tokens=500
    )
    budget = Budget([BudgetLimit(cost=per_call * Decimal("2.5"))])
    pipeline = (
        ChatClientBuilder(openai_client(limits_server))
        .use_tool_loop([FunctionTool(add)], max_iterations=10)
        .use(BudgetMiddleware(budget, close_budget=False))
        .build()
    )
    async with pipeline:
        with pytest.raises(BudgetExceededError) as caught:
            await pipeline.create(HELLO, options={"max_tokens": 500})
    # two turns went out; the third, whose 500 output tokens alone would cross, was refused before the network
    assert len(limits_server.requests) == 2
    error = caught.value
    assert (error.limit, error.key, error.currency) == ("cost in total", "global", "USD")
    assert error.spent == 2 * per_call and error.maximum == per_call * Decimal("2.5")
    assert "would be crossed" in str(error) and "cost in total" in str(error)
    assert await budget.spent("global") == 2 * per_call


async def test_the_limit_is_checked_before_and_usage_recorded_after(limits_server: OpenAIServer) -> None:
    limits_server.enqueue(
        Reply(text="a", prompt_tokens=120, completion_tokens=30, cached_tokens=100),
        Reply(text="b", prompt_tokens=7, completion_tokens=3),
    )
    budget = Budget([BudgetLimit(tokens=150), BudgetLimit(requests=5, window=3600)])
    async with (
        ChatClientBuilder(openai_client(limits_server))
        .use(BudgetMiddleware(budget, close_budget=False))
        .build() as client
    ):
        await client.create(HELLO)
        assert await budget.spent("global", 0, "tokens") == 150  # the estimate replaced by the usage
        with pytest.raises(BudgetExceededError, match="'tokens in total'") as caught:
            await client.create(HELLO)
    assert caught.value.spent == 150 and caught.value.maximum == 150
    assert await budget.spent("global", 1, "requests") == 1
    assert len(limits_server.requests) == 1


async def test_cache_and_reasoning_tokens_are_priced_apart() -> None:
    usage = RequestUsage(prompt_tokens=1000, completion_tokens=500, cached_tokens=800, reasoning_tokens=300)
    got = price_usage("gpt-4o-mini", usage, provider="openai")
    expected = genai_prices.calc_price(
        genai_prices.Usage(input_tokens=1000, output_tokens=500, cache_read_tokens=800),
        "gpt-4o-mini",
        provider_id="openai",
    ).total_price
    assert got == expected
    uncached = price_usage("gpt-4o-mini", RequestUsage(prompt_tokens=1000, completion_tokens=500))
    assert got is not None and uncached is not None and got < uncached
    table = PriceTable(
        {"my-model": {"input_mtok": 1, "output_mtok": 4, "cache_read_mtok": "0.5", "output_reasoning_mtok": 8}}
    )
    # 200 fresh input at 1, 800 cached at 0.5, 200 plain output at 4, 300 reasoning at 8 (per million)
    assert table.price("my-model", usage) == Decimal("0.0002") + Decimal("0.0004") + Decimal("0.0008") + Decimal(
        "0.0024"
    )
    assert table.price("unknown-model-xyz", usage) is None


def test_pricing_never_touches_the_network() -> None:
    script = """
import sys
def refuse(event, args):
    if event in ("socket.connect", "socket.getaddrinfo", "socket.gethostbyname"):
        raise RuntimeError("network: " + event)
sys.addaudithook(refuse)
from ext.core import RequestUsage
from ext.resilience import Budget, PriceTable, price_usage
print(price_usage("gpt-4o-mini", RequestUsage(prompt_tokens=1000000, completion_tokens=0)))
print(PriceTable().knows("claude-sonnet-4-5"), PriceTable().knows("no-such-model"))
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    price, known, unknown = done.stdout.split()
    assert (Decimal(price), known, unknown) == (Decimal("0.15"), "True", "False")


async def test_an_unpriced_model_is_refused_under_a_cost_limit_unless_allowed(limits_server: OpenAIServer) -> None:
    limits_server.default = Reply(text="ok")
    strict = Budget([BudgetLimit(cost=Decimal(1))])
    async with (
        ChatClientBuilder(openai_client(limits_server, "my-local-model"))
        .use(BudgetMiddleware(strict))
        .build() as client
    ):
        with pytest.raises(UnpricedModelError, match=r"'my-local-model'.*has no price"):
            await client.create(HELLO)
    assert limits_server.requests == []
    lenient = Budget([BudgetLimit(cost=Decimal(1))], allow_unpriced=True)
    async with (
        ChatClientBuilder(openai_client(limits_server, "my-local-model"))
        .use(BudgetMiddleware(lenient, close_budget=False))
        .build() as client
    ):
        assert (await client.create(HELLO)).content == "ok"
    assert await lenient.spent("global") == 0


async def test_streams_are_recorded(limits_server: OpenAIServer) -> None:
    limits_server.default = Reply(text="one two", prompt_tokens=1000, completion_tokens=2000)
    budget = Budget([BudgetLimit(cost=Decimal(1))])
    async with (
        ChatClientBuilder(openai_client(limits_server))
        .use(BudgetMiddleware(budget, close_budget=False))
        .build() as client
    ):
        items = [item async for item in client.create_stream(HELLO)]
    assert isinstance(items[-1], CreateResult)
    assert await budget.spent("global") == table_price("gpt-4o-mini", 1000, 2000)


async def test_per_run_limits_count_one_user_call(limits_server: OpenAIServer) -> None:
    limits_server.default = Reply(tool_calls=[ToolCallSpec("add", {"a": 1, "b": 2})])
    budget = Budget([BudgetLimit(requests=3, per_run=True)])
    pipeline = (
        ChatClientBuilder(openai_client(limits_server))
        .use_tool_loop([FunctionTool(add)])
        .use(BudgetMiddleware(budget))
        .build()
    )
    async with pipeline:
        for expected in (3, 6):
            with pytest.raises(BudgetExceededError, match="'requests per run'"):
                await pipeline.create(HELLO)
            assert len(limits_server.requests) == expected  # each user call gets its own three


async def test_windows_and_caller_keys() -> None:
    now = [7200.0]
    budget = Budget([BudgetLimit(requests=1, window=3600)], clock=lambda: now[0])
    await budget.hold(key="a", model="m", provider="p", prompt_tokens=1)
    await budget.hold(key="b", model="m", provider="p", prompt_tokens=1)
    with pytest.raises(BudgetExceededError, match="'requests per 3600 s' for key 'a'"):
        await budget.hold(key="a", model="m", provider="p", prompt_tokens=1)
    now[0] += 3600  # the next window
    await budget.hold(key="a", model="m", provider="p", prompt_tokens=1)


async def test_caller_key_in_a_pipeline(limits_server: OpenAIServer) -> None:
    limits_server.default = Reply(text="ok")
    budget = Budget([BudgetLimit(requests=1)])
    async with (
        ChatClientBuilder(openai_client(limits_server)).use(BudgetMiddleware(budget, key="caller")).build() as client
    ):
        with limit_key("tenant-a"):
            await client.create(HELLO)
            with pytest.raises(BudgetExceededError, match="'tenant-a'"):
                await client.create(HELLO)
        with limit_key("tenant-b"):
            await client.create(HELLO)


async def test_embeddings_go_through_the_same_budget(limits_server: OpenAIServer) -> None:
    budget = Budget([BudgetLimit(tokens=40)])
    embedder = OpenAIEmbeddingClient(
        "text-embedding-3-small", base_url=limits_server.base_url + "/v1", api_key=KEY, max_retries=0
    )
    async with BudgetedEmbeddingClient(embedder, budget) as client:
        result = await client.embed(["hello world", "a second text"])
        assert await budget.spent("global", 0, "tokens") == result.usage.prompt_tokens > 0
        with pytest.raises(BudgetExceededError, match="'tokens in total'"):
            await client.embed(["a much longer text " * 10])
    embed_requests = [r for r in limits_server.requests if r.path.endswith("/embeddings")]
    assert len(embed_requests) == 1
    priced = Budget([BudgetLimit(cost=Decimal(1))])
    embedder = OpenAIEmbeddingClient(
        "text-embedding-3-small", base_url=limits_server.base_url + "/v1", api_key=KEY, max_retries=0
    )
    async with BudgetedEmbeddingClient(embedder, priced) as client:
        result = await client.embed(["hello world"])
    price = price_usage("text-embedding-3-small", result.usage, provider="openai")
    assert price is not None and price > 0
    assert await priced.spent("global") == price


_CHARGER = """
import asyncio, json, sys
from ext.redis import RedisConnection
from ext.resilience import Charge, RedisBudgetStore

async def main():
    store = RedisBudgetStore(RedisConnection(sys.argv[1]), prefix=sys.argv[2])
    taken = 0
    for _ in range(50):
        index, _ = await store.charge([Charge("c", 1, 60)])
        taken += index < 0
    await store.close()
    print(taken)

asyncio.run(main())
"""


async def test_two_processes_never_overspend_a_redis_budget(limits_redis: RedisServer) -> None:
    prefix = "test-two-writers:"
    runs = [
        await asyncio.create_subprocess_exec(
            sys.executable, "-c", _CHARGER, limits_redis.url, prefix, stdout=asyncio.subprocess.PIPE
        )
        for _ in range(2)
    ]
    taken = [int((await asyncio.wait_for(run.communicate(), 120))[0]) for run in runs]
    assert sum(taken) == 60 and all(t > 0 for t in taken)
    store = RedisBudgetStore(RedisConnection(limits_redis.url), prefix=prefix)
    try:
        assert await store.spent("c") == 60
    finally:
        await store.close()


async def test_a_redis_budget_is_shared_by_two_pipelines(
    limits_server: OpenAIServer, limits_redis: RedisServer
) -> None:
    limits_server.default = Reply(text="ok", prompt_tokens=1000, completion_tokens=500)
    per_call = table_price("gpt-4o-mini", 1000, 500)

    def pipeline() -> object:
        store = RedisBudgetStore(RedisConnection(limits_redis.url), prefix="test-shared:")
        budget = Budget([BudgetLimit(cost=per_call * 3)], store=store, close_store=True)
        return ChatClientBuilder(openai_client(limits_server)).use(BudgetMiddleware(budget)).build()

    async with pipeline() as first, pipeline() as second:  # type: ignore[attr-defined]
        for client in (first, second, first):
            await client.create(HELLO)
        with pytest.raises(BudgetExceededError):
            await second.create(HELLO)
    assert len(limits_server.requests) == 3


@pytest.mark.parametrize(
    ("limits", "message"),
    [
        ([], "limits must be a non-empty list"),
        ([{"cost": -1}], r"limits\[0\]: cost: Input should be greater than 0"),
        ([{}], r"limits\[0\]: .*at least one of requests, tokens or cost"),
        ([{"requests": 1, "windw": 5}], r"limits\[0\]: windw: Extra inputs are not permitted"),
        ([{"requests": 1, "per_run": True, "window": 5}], r"limits\[0\]: .*a per_run limit has no window"),
    ],
)
def test_bad_limits_name_the_field(limits: list[dict[str, object]], message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        Budget(limits)


def test_bad_overrides_name_the_model_and_key() -> None:
    with pytest.raises(ConfigurationError, match=r"overrides\['m'\]: unknown price keys \['input'\]"):
        PriceTable({"m": {"input": 1}})
    with pytest.raises(ConfigurationError, match=r"overrides\['m'\].output_mtok must be a price"):
        PriceTable({"m": {"output_mtok": -2}})


def test_prices_equal_genai_prices_for_every_model_of_its_table() -> None:
    """`PriceTable` prices most models without calling genai-prices (the linear fast path): the result must be the
    same Decimal as genai-prices' own `calc_price`, for every model its table holds."""
    from genai_prices.data import providers

    table = PriceTable()
    usages = [
        RequestUsage(prompt_tokens=1234, completion_tokens=567, cached_tokens=200, reasoning_tokens=100),
        RequestUsage(prompt_tokens=10, completion_tokens=0),
    ]
    compared = 0
    for provider in providers:
        for model in provider.models:
            for usage in usages:
                values = {"input_tokens": usage.prompt_tokens, "output_tokens": usage.completion_tokens}
                if usage.cached_tokens:
                    values["cache_read_tokens"] = usage.cached_tokens
                if usage.reasoning_tokens:
                    values["output_reasoning_tokens"] = usage.reasoning_tokens
                try:
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore", UserWarning)
                        expected = genai_prices.calc_price(
                            genai_prices.Usage(**values), model.id, provider_id=provider.id
                        ).total_price
                except LookupError:
                    continue  # listed under a provider whose lookup finds another model: not a price to compare
                assert table.price(model.id, usage, provider=provider.id) == expected, (provider.id, model.id)
                compared += 1
    assert compared > 2000
