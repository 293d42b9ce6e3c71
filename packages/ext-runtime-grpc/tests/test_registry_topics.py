"""The registry's topic subscription table: in memory, and in Redis (one hash keyed by subscription id, shared by
every replica and outliving them)."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable

import pytest
import pytest_asyncio
import redis.asyncio as aioredis

from ext.core import AgentId, Subscription, TopicId, TypePrefixSubscription, TypeSubscription
from ext.runtime.grpc import InMemoryRegistry, RedisRegistry, Registry
from ext.testing.redis import RedisServer

MakeRegistry = Callable[[], Awaitable[Registry]]


async def _inbox(payload: bytes) -> None:
    pass


@pytest_asyncio.fixture(params=["memory", "redis"])
async def make_registry(request: pytest.FixtureRequest, redis_server: RedisServer) -> AsyncIterator[MakeRegistry]:
    """Registries of one cluster (Redis: the same prefix; memory: the same registry, as one gateway has)."""
    started: list[Registry] = []
    prefix = f"t{uuid.uuid4().hex[:8]}"
    shared = InMemoryRegistry()

    async def make() -> Registry:
        if request.param == "memory":
            return shared
        registry = RedisRegistry(redis_server.url, prefix=prefix)
        await registry.start(uuid.uuid4().hex[:12], _inbox)
        started.append(registry)
        return registry

    yield make
    for registry in started:
        await registry.close()


async def test_add_is_idempotent_for_equal_subscriptions(make_registry: MakeRegistry) -> None:
    registry = await make_registry()
    first = TypeSubscription("news", "reader", id="first")
    assert await registry.add_subscription(first) == first
    held = await registry.add_subscription(TypeSubscription("news", "reader", id="second"))
    assert held.id == "first"
    assert [s.id for s in await registry.subscriptions()] == ["first"]


async def test_recipients_exact_and_prefix_deduplicated_and_sorted(make_registry: MakeRegistry) -> None:
    registry = await make_registry()
    for sub in (
        TypeSubscription("news.sport", "zeta"),
        TypePrefixSubscription("news.", "zeta"),
        TypePrefixSubscription("news", "alpha"),
        TypeSubscription("weather", "beta"),
    ):
        await registry.add_subscription(sub)
    assert await registry.recipients(TopicId("news.sport", "k")) == [AgentId("alpha", "k"), AgentId("zeta", "k")]
    assert await registry.recipients(TopicId("weather", "w")) == [AgentId("beta", "w")]
    assert await registry.recipients(TopicId("none", "k")) == []


async def test_remove_and_unknown_id(make_registry: MakeRegistry) -> None:
    registry = await make_registry()
    sub = TypeSubscription("t", "a")
    await registry.add_subscription(sub)
    await registry.remove_subscription(sub.id)
    assert await registry.subscriptions() == []
    assert await registry.recipients(TopicId("t", "k")) == []
    with pytest.raises(LookupError, match=sub.id):
        await registry.remove_subscription(sub.id)


async def test_a_reused_id_for_another_mapping_is_refused(make_registry: MakeRegistry) -> None:
    registry = await make_registry()
    await registry.add_subscription(TypeSubscription("t", "a", id="same"))
    with pytest.raises(ValueError, match="'same' is already used"):
        await registry.add_subscription(TypeSubscription("u", "a", id="same"))


class _Custom(Subscription):
    @property
    def id(self) -> str:
        return "custom"

    @property
    def agent_type(self) -> str:
        return "a"

    def is_match(self, topic_id: TopicId) -> bool:
        return True

    def map_to_agent(self, topic_id: TopicId) -> AgentId:
        return AgentId("a", topic_id.source)


async def test_only_the_built_in_kinds_can_be_shared(make_registry: MakeRegistry) -> None:
    registry = await make_registry()
    with pytest.raises(TypeError, match=r"TypeSubscription or TypePrefixSubscription.*got _Custom"):
        await registry.add_subscription(_Custom())
    assert await registry.subscriptions() == []


async def test_redis_table_is_shared_by_replicas_and_outlives_them(redis_server: RedisServer) -> None:
    prefix = f"t{uuid.uuid4().hex[:8]}"
    one, two = RedisRegistry(redis_server.url, prefix=prefix), RedisRegistry(redis_server.url, prefix=prefix)
    await one.start("gw-one", _inbox)
    await two.start("gw-two", _inbox)
    try:
        sub = TypePrefixSubscription("orders.", "billing", id="s1")
        await one.add_subscription(sub)
        assert await two.recipients(TopicId("orders.new", "o7")) == [AgentId("billing", "o7")]
        # An equal one added through the other replica: still one entry (listed under the smallest id), held by
        # both ids.
        assert (await two.add_subscription(TypePrefixSubscription("orders.", "billing", id="s2"))).id == "s1"
        assert [s.id for s in await one.subscriptions()] == ["s1"]
    finally:
        await one.close()
        await two.close()
    # The stored record: JSON of kind, prefix and agent type, under the subscription's id.
    client = aioredis.from_url(redis_server.url, decode_responses=True)
    try:
        raw = await client.hgetall(f"{prefix}:subscriptions")
    finally:
        await client.aclose()
    record = {"kind": "prefix", "topic_type_prefix": "orders.", "agent_type": "billing"}
    assert {str(k): json.loads(v) for k, v in raw.items()} == {"s1": record, "s2": record}
    # Both replicas stopped: a new one (a restart) finds the table as it was.
    again = RedisRegistry(redis_server.url, prefix=prefix)
    await again.start("gw-three", _inbox)
    try:
        assert await again.subscriptions() == [sub]
        assert [s.id for s in await again.subscriptions()] == ["s1"]
    finally:
        await again.close()


async def test_more_concurrent_redis_commands_than_pool_connections_all_succeed(redis_server: RedisServer) -> None:
    """A burst of first messages to new agents places each through Redis at once. redis-py's default pool refuses
    the 101st concurrent command (MaxConnectionsError), which failed those messages; the registry's pool makes the
    extra commands wait for a free connection instead."""
    registry = RedisRegistry(redis_server.url, prefix=f"t{uuid.uuid4().hex[:8]}")
    await registry.start("gw-pool", _inbox)
    try:
        await registry.add("w1", "burst")
        placed = await asyncio.gather(*(registry.place(AgentId("burst", f"k{i}")) for i in range(300)))
    finally:
        await registry.close()
    assert placed == [("w1", "gw-pool")] * 300
