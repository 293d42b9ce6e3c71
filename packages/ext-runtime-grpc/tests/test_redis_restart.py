"""The runtime after Redis restarts empty: two gateway replicas sharing a real redis-server that is killed and
started again on the same port (no persistence: every lease, registration and placement is gone).

- A registration through a gateway before that gateway's next lease renewal must not get the gateway declared
  dead by the other replica's sweep (nor may a gateway act on a death notice naming itself): traffic between its
  own workers goes on.
- A registration refused while Redis is down leaves nothing behind: the same type registers once Redis is back.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import pytest
import redis.asyncio as aioredis
from ext_runtime_grpc_support import eventually, worker
from pydantic import BaseModel

from ext.core import AgentId, MessageContext, RoutedAgent, UndeliverableError, message_handler
from ext.runtime.grpc import Gateway, GrpcAgentRuntime, RedisRegistry
from ext.testing.redis import REDIS_BINARY, RedisServer, start_redis_server

UNREACHABLE = r"the registry \(Redis at 127\.0\.0\.1:\d+\) is unreachable"


class Tick(BaseModel):
    n: int


class Count(BaseModel):
    pass


class Counter(RoutedAgent):
    """Counts the `Tick`s it receives; answers `Count` with that number."""

    ticks = 0

    @message_handler
    async def on_tick(self, message: Tick, ctx: MessageContext) -> None:
        self.ticks += 1

    @message_handler
    async def on_count(self, message: Count, ctx: MessageContext) -> int:
        return self.ticks


@pytest.fixture
def redis_server() -> Iterator[RedisServer]:
    """A redis-server of this test's own: the test kills and restarts it."""
    if REDIS_BINARY is None:
        pytest.fail("redis-server is not installed: apt-get install -y redis-server; these tests need a real Redis")
    server = start_redis_server()
    try:
        yield server
    finally:
        server.stop()


PREFIX = "restart"


@pytest.fixture
async def gateways(redis_server: RedisServer) -> AsyncIterator[tuple[Gateway, Gateway]]:
    """Replica `a` renews its lease every 30 s (the test runs between two renewals, as a gateway does for up to a
    third of its lease after a restart); replica `b` renews and sweeps every 0.1 s."""
    prefix = PREFIX
    a = Gateway(registry=RedisRegistry(redis_server.url, prefix=prefix, lease_seconds=90), shutdown_grace=0)
    b = Gateway(registry=RedisRegistry(redis_server.url, prefix=prefix, lease_seconds=0.3), shutdown_grace=0)
    await a.start()
    await b.start()
    try:
        yield a, b
    finally:
        await a.stop()
        await b.stop()


def _workers(
    gateway: Gateway, on_undelivered: Callable[[AgentId, str], None] | None = None
) -> tuple[GrpcAgentRuntime, GrpcAgentRuntime]:
    """Two workers on `gateway` that speak `Tick` and `Count`: a host, and a sender (told of undelivered messages)."""
    pair = (worker(gateway.address), worker(gateway.address, on_undelivered=on_undelivered))
    for runtime in pair:
        runtime.register_message_type(Tick)
        runtime.register_message_type(Count)
    return pair


async def _writes(pubsub: Any, key: str, count: int) -> None:
    """Wait until `key` has been written `count` times (keyspace notifications `pubsub` subscribed to)."""
    seen = 0
    deadline = time.monotonic() + 10.0
    while seen < count:
        # None also stands for an ignored subscribe confirmation: only the deadline ends the wait.
        assert time.monotonic() < deadline, f"{key} written {seen} times, not {count}, within 10 s"
        item = await pubsub.get_message(ignore_subscribe_messages=True, timeout=1.0)
        if item is not None and item["data"] == b"set":
            seen += 1


async def test_a_registration_after_an_empty_restart_does_not_get_its_gateway_declared_dead(
    redis_server: RedisServer, gateways: tuple[Gateway, Gateway]
) -> None:
    a, b = gateways
    undelivered: list[tuple[AgentId, str]] = []
    host, sender = _workers(a, on_undelivered=lambda r, why: undelivered.append((r, why)))
    placed = [AgentId("counter", f"k{i}") for i in range(4)]
    async with host, sender:
        await host.register_agent_factory("counter", Counter)
        for agent in placed:  # placed behind gateway a before the restart
            assert await sender.send_and_await_response(Count(), agent, timeout=10) == 0

        redis_server.restart()
        client = aioredis.from_url(redis_server.url)
        pubsub: Any = client.pubsub()
        try:
            # b renews its lease (key "<prefix>:gw:<id>") and then sweeps, every 0.1 s: two writes of its lease
            # after the registration below mean at least one whole sweep saw that registration.
            await client.config_set("notify-keyspace-events", "K$")
            lease_of_b = f"{PREFIX}:gw:{b.gateway_id}"
            await pubsub.subscribe(f"__keyspace@0__:{lease_of_b}")
            await _writes(pubsub, lease_of_b, 1)  # b has found Redis again
            # a's first commands after the restart meet its dropped connections (reported, not retried): let a
            # reading request take those, so the registration below reaches Redis.
            await eventually(lambda: _lists_agents(sender), 10, "gateway a reading the registry again")
            # Registered through a after the restart, before a's next lease renewal.
            await host.register_agent_factory("late", Counter)
            await _writes(pubsub, lease_of_b, 2)
        finally:
            await pubsub.aclose()
            await client.aclose()

        # Same-gateway traffic goes on: one-way messages to the agents placed before, RPCs to every agent.
        for n in range(10):
            for agent in placed:
                await sender.send_message(Tick(n=n), agent)
        counts = [await sender.send_and_await_response(Count(), agent, timeout=10) for agent in placed]
        late = await sender.send_and_await_response(Count(), AgentId("late", "x"), timeout=10)
    assert undelivered == []
    assert counts == [10, 10, 10, 10]
    assert late == 0


async def test_a_gateway_does_not_act_on_a_death_notice_naming_itself(
    redis_server: RedisServer, gateways: tuple[Gateway, Gateway]
) -> None:
    a, _ = gateways
    undelivered: list[tuple[AgentId, str]] = []
    host, sender = _workers(a, on_undelivered=lambda r, why: undelivered.append((r, why)))
    placed = [AgentId("counter", f"k{i}") for i in range(4)]
    async with host, sender:
        await host.register_agent_factory("counter", Counter)
        for agent in placed:
            assert await sender.send_and_await_response(Count(), agent, timeout=10) == 0
        # What another replica's sweep does when it finds a's lease gone: drop a's registrations and announce a
        # dead on the events channel (both replicas listen).
        client = aioredis.from_url(redis_server.url)
        try:
            lease_of_a = f"{PREFIX}:gw:{a.gateway_id}"
            await client.delete(lease_of_a)
            assert await client.hdel(f"{PREFIX}:type:counter", host.worker_id) == 1
            assert await client.publish(f"{PREFIX}:events", f"gateway {a.gateway_id}") == 2

            async def reasserted() -> bool:
                registered = await client.hget(f"{PREFIX}:type:counter", host.worker_id)
                return bool(await client.exists(lease_of_a)) and registered == a.gateway_id.encode()

            # a is alive: it writes its lease and registrations back now, not at its next renewal (30 s away).
            await eventually(reasserted, 10, "gateway a's lease and registration written back")
        finally:
            await client.aclose()
        for n in range(10):
            for agent in placed:
                await sender.send_message(Tick(n=n), agent)
        counts = [await sender.send_and_await_response(Count(), agent, timeout=10) for agent in placed]
    assert undelivered == []
    assert counts == [10, 10, 10, 10]


async def _lists_agents(runtime: GrpcAgentRuntime) -> bool:
    try:
        await runtime.list_agents()
    except UndeliverableError:
        return False
    return True


async def test_a_registration_refused_while_redis_is_down_can_be_retried(
    redis_server: RedisServer, gateways: tuple[Gateway, Gateway]
) -> None:
    a, _ = gateways
    host, caller = _workers(a)
    async with host, caller:
        redis_server.kill()
        with pytest.raises(ValueError, match=f"refused agent_type 'counter': {UNREACHABLE}"):
            await host.register_agent_factory("counter", Counter)
        redis_server.restart()

        async def registered() -> bool:
            # The gateway's first commands after the restart may still meet a dropped connection: retried while
            # the error names the unreachable registry; any other error (such as "already registered") fails.
            try:
                await host.register_agent_factory("counter", Counter)
            except ValueError as exc:
                if "is unreachable" in str(exc):
                    return False
                raise
            return True

        await eventually(registered, 15, "the registration after the restart")
        # Announced: placed by the gateway, it gets one-way messages and answers RPCs.
        agent = AgentId("counter", "k")
        await caller.send_message(Tick(n=1), agent)
        assert await caller.send_and_await_response(Count(), agent, timeout=10) == 1
        assert await caller.list_agents("counter") == [agent]
