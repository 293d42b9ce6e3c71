"""`RedisStateStore` against a real redis-server: the `StateStoreConformance` suite, an unreachable server, and a
worker whose agents' states outlive it (a second worker picks them up)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator

import pytest
import pytest_asyncio

from ext.core import AgentId, StateStore
from ext.runtime.grpc import Gateway, GrpcAgentRuntime, RedisStateStore
from ext.testing.conformance import StateStoreConformance
from ext.testing.redis import RedisServer, free_port
from ext.testing.runtime_agents import MESSAGE_TYPES, EchoAgent, Journal, Ping


class TestRedisStateStore(StateStoreConformance):
    @pytest.fixture(autouse=True)
    def _server(self, redis_server: RedisServer) -> None:
        self.url = redis_server.url
        self.prefix = f"t{uuid.uuid4().hex[:8]}"

    async def make_store(self) -> StateStore:
        return RedisStateStore(self.url, prefix=self.prefix)

    async def reopen(self, store: StateStore) -> StateStore | None:
        return RedisStateStore(self.url, prefix=self.prefix)


async def test_unreachable_redis_fails_promptly_naming_it() -> None:
    store = RedisStateStore(f"redis://:hunter2@127.0.0.1:{free_port()}/0", connect_timeout=2)
    try:
        with pytest.raises(ConnectionError, match=r"state store \(Redis at 127.0.0.1:\d+\)") as info:
            await store.get(AgentId("t", "k"))
        assert "hunter2" not in str(info.value) and "hunter2" not in repr(store)
    finally:
        await store.close()


def test_bad_arguments() -> None:
    with pytest.raises(ValueError, match="url must be"):
        RedisStateStore("http://127.0.0.1:6379")
    with pytest.raises(ValueError, match="timeout"):
        RedisStateStore("redis://127.0.0.1:6379", timeout=0)


async def test_more_concurrent_calls_than_connections_wait_their_turn(redis_server: RedisServer) -> None:
    # redis-py's default pool holds 100 connections and refused the 101st concurrent command at once
    # (MaxConnectionsError): a worker activating or saving more than 100 agents at a time failed their messages.
    store = RedisStateStore(redis_server.url, prefix=f"t{uuid.uuid4().hex[:8]}")
    ids = [AgentId("t", str(i)) for i in range(250)]
    try:
        assert await asyncio.gather(*(store.put(a, {"n": i}, None) for i, a in enumerate(ids))) == [1] * 250
        loaded = await asyncio.gather(*(store.get(a) for a in ids))
        assert [(s.state, s.version) if s else None for s in loaded] == [({"n": i}, 1) for i in range(250)]
    finally:
        await store.close()


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
