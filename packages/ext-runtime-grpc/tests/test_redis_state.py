"""ext-redis's `RedisStateStore` behind gRPC workers: a worker's agents' states outlive it (a second worker picks
them up). The store's own cases (the `StateStoreConformance` suite) run in ext-redis."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import pytest_asyncio

from ext.core import AgentId
from ext.redis import RedisStateStore
from ext.runtime.grpc import Gateway, GrpcAgentRuntime
from ext.testing.redis import RedisServer
from ext.testing.runtime_agents import MESSAGE_TYPES, EchoAgent, Journal, Ping


@pytest_asyncio.fixture
async def gateway() -> AsyncIterator[Gateway]:
    gw = Gateway(port=0, shutdown_grace=0)
    await gw.start()
    try:
        yield gw
    finally:
        await gw.stop()


async def _worker(gateway: Gateway, store: RedisStateStore, journal: Journal) -> GrpcAgentRuntime:
    runtime = GrpcAgentRuntime(
        f"127.0.0.1:{gateway.port}", token_env=None, connect_timeout=5, stop_timeout=2, state_store=store
    )
    for message_type in MESSAGE_TYPES:
        runtime.register_message_type(message_type)
    await runtime.start()
    await runtime.register_agent_factory("echo", lambda aid, rt: EchoAgent(aid, rt, journal))
    return runtime


async def test_a_second_worker_continues_from_the_saved_state(gateway: Gateway, redis_server: RedisServer) -> None:
    prefix = f"t{uuid.uuid4().hex[:8]}"
    first_store, second_store = (
        RedisStateStore(redis_server.url, prefix=prefix),
        RedisStateStore(redis_server.url, prefix=prefix),
    )
    journal = Journal()
    target = AgentId("echo", "moving")
    first = await _worker(gateway, first_store, journal)
    try:
        for i in range(3):
            reply = await first.send_and_await_response(Ping(text=str(i)), target, 10)
        assert reply.count == 3
    finally:
        await first.stop()
        await first_store.close()
    second = await _worker(gateway, second_store, journal)
    try:
        reply = await second.send_and_await_response(Ping(text="after"), target, 10)
        assert reply.count == 4
        record = await second_store.get(target)
        assert record is not None and (record.state["count"], record.version) == (4, 4)
    finally:
        await second.stop()
        await second_store.close()
