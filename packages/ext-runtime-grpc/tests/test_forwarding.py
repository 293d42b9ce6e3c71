"""Messages crossing gateway replicas: batched per target gateway (one Redis PUBLISH for what queued meanwhile),
in order, each forward of a failed batch handled as a single one would be, and malformed batches on the bus
reported and dropped without stopping the gateway's listener. Real gateways, real Redis, real workers."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from typing import Any

import pytest
import redis.asyncio as aioredis
from ext_runtime_grpc_support import eventually, worker

from ext.core import AgentId
from ext.runtime.grpc import GrpcAgentRuntime, LocalCluster
from ext.runtime.grpc.protos import agent_worker_pb2 as pb
from ext.runtime.grpc.testing import start_gateway_process
from ext.testing.redis import RedisServer
from ext.testing.runtime_agents import EchoAgent, GetNotes, Journal, Note, Notes, Ping, Pong


async def publish_calls(client: Any) -> int:
    """How many PUBLISH commands the Redis server has run so far."""
    stats = await client.info("commandstats")
    return int(stats.get("cmdstat_publish", {}).get("calls", 0))


@contextlib.asynccontextmanager
async def across_replicas(redis_url: str, key: str) -> AsyncIterator[tuple[GrpcAgentRuntime, AgentId, Any]]:
    """Two replicas: "echo" hosted on the first, a caller on the second that has already reached `echo/<key>`
    (placed, and cached by the caller's gateway); and a Redis client for the server's stats."""
    client = aioredis.from_url(redis_url)
    try:
        async with LocalCluster(2, redis_url=redis_url) as cluster:
            a, b = cluster.addresses
            async with worker(a) as host, worker(b) as caller:
                await host.register_agent_factory("echo", lambda aid, rt: EchoAgent(aid, rt, Journal()))
                target = AgentId("echo", key)
                reply = await caller.send_and_await_response(Ping(text="warm"), target, timeout=10)
                assert isinstance(reply, Pong) and reply.agent == str(target)
                yield caller, target, client
    finally:
        await client.aclose()


async def test_one_way_messages_across_replicas_go_in_order_and_in_batches(redis_server: RedisServer) -> None:
    count = 600
    async with across_replicas(redis_server.url, "ordered") as (caller, target, client):
        before = await publish_calls(client)
        for i in range(count):
            await caller.send_message(Note(text=str(i)), target)
            if i % 40 == 39:
                await asyncio.sleep(0)  # let the worker write what it has: several batches, not one
        notes = await caller.send_and_await_response(GetNotes(), target, timeout=10)
        published = await publish_calls(client) - before
    assert isinstance(notes, Notes)
    assert notes.notes == [str(i) for i in range(count)]
    # One PUBLISH per message without batching (count + the RPC's request and answer); far fewer with it.
    assert 2 <= published < count // 4, published


async def test_a_sequential_rpc_across_replicas_is_one_publish_each_way(redis_server: RedisServer) -> None:
    """Nothing queued: each forward goes out at once, alone (no timer holds it back for a batch)."""
    async with across_replicas(redis_server.url, "seq") as (caller, target, client):
        before = await publish_calls(client)
        for i in range(20):
            reply = await caller.send_and_await_response(Ping(text=str(i)), target, timeout=10)
            assert isinstance(reply, Pong) and reply.text == str(i) and reply.count == i + 2
        assert await publish_calls(client) - before == 40


async def test_each_forward_of_a_batch_to_a_dead_replica_is_reported(redis_server: RedisServer) -> None:
    """A replica killed (no clean-up; its lease still alive): PUBLISH reaches nobody. Every one-way message of
    the batches sent to it is placed again and, with no live worker for it, reported to its sender."""
    client = aioredis.from_url(redis_server.url)
    async with LocalCluster(1, redis_url=redis_server.url) as cluster:
        doomed = start_gateway_process(
            "--redis-url", redis_server.url, "--redis-prefix", cluster.redis_prefix, "--lease-seconds", "30"
        )
        undelivered: list[tuple[AgentId, str]] = []
        keys = [AgentId("echo", f"k{i}") for i in range(4)]
        per_key = 50
        total = per_key * len(keys)
        all_reported = asyncio.Event()

        def report(recipient: AgentId, why: str) -> None:
            undelivered.append((recipient, why))
            if len(undelivered) >= total:
                all_reported.set()

        try:
            b = cluster.addresses[0]
            async with (
                worker(doomed.address, reconnect_backoff=0.05) as host,
                worker(b, on_undelivered=report) as caller,
            ):
                await host.register_agent_factory("echo", lambda aid, rt: EchoAgent(aid, rt, Journal()))
                for key in keys:  # placed on the doomed replica's worker; the survivor caches that
                    reply = await caller.send_and_await_response(Ping(text="warm"), key, timeout=10)
                    assert isinstance(reply, Pong) and reply.agent == str(key)
                inbox = f"{cluster.redis_prefix}:inbox:{host.worker_id.split('.')[0]}"
                doomed.kill()

                async def unsubscribed() -> bool:  # what was published before that reached the dead process
                    return int((await client.pubsub_numsub(inbox))[0][1]) == 0

                await eventually(unsubscribed, what="Redis dropping the killed replica's subscription")
                before = await publish_calls(client)
                for i in range(per_key):
                    for key in keys:
                        await caller.send_message(Note(text=str(i)), key)
                with contextlib.suppress(TimeoutError):  # the count is checked below
                    await asyncio.wait_for(all_reported.wait(), 15)
                published = await publish_calls(client) - before
        finally:
            doomed.kill()
            await client.aclose()
    assert len(undelivered) == total, (len(undelivered), undelivered[:3])
    assert sorted(str(r) for r, _ in undelivered) == sorted(str(k) for k in keys for _ in range(per_key))
    reasons = {why for _, why in undelivered}
    assert all("is not listening" in why or "no live worker" in why for why in reasons), reasons
    # Each message was tried twice (first placement, then placed again); batched, far fewer PUBLISHes.
    assert published < total, published


async def test_malformed_batches_on_the_bus_are_reported_and_dropped(
    redis_server: RedisServer, caplog: pytest.LogCaptureFixture
) -> None:
    client = aioredis.from_url(redis_server.url)
    try:
        async with LocalCluster(2, redis_url=redis_server.url) as cluster:
            a, b = cluster.addresses
            receiver = cluster.gateways[0]
            inbox = f"{cluster.redis_prefix}:inbox:{receiver.gateway_id}"
            async with worker(a) as host, worker(b) as caller:
                await host.register_agent_factory("echo", lambda aid, rt: EchoAgent(aid, rt, Journal()))
                target = AgentId("echo", "bus")
                good = pb.Forward(target_worker="no-such-worker", origin_gateway="x").SerializeToString()
                with caplog.at_level(logging.WARNING, logger="ext.runtime.grpc._routing"):
                    for payload in (
                        b"\xff\xff\xff\xff not protobuf",
                        pb.ForwardBatch(forwards=[b"\xff\xff", good]).SerializeToString(),
                        b"",
                    ):
                        assert await client.publish(inbox, payload) == 1
                    # The listener goes on: messages across the replicas still arrive, answered.
                    reply = await caller.send_and_await_response(Ping(text="after"), target, timeout=10)
                    assert isinstance(reply, Pong) and reply.text == "after" and reply.agent == "echo/bus"
        dropped = [r.getMessage() for r in caplog.records if "could not be decoded" in r.getMessage()]
        assert any("the batch: DecodeError" in text for text in dropped), dropped
        assert any("forward 0: DecodeError" in text for text in dropped), dropped
        assert len(dropped) == 2, dropped
    finally:
        await client.aclose()
