"""Failover with state (issue 27): workers as separate processes keep their `SequenceAgent`s' state in a real
Redis (`RedisStateStore`, saved after each message); one hosting worker is killed with SIGKILL mid-load, and the
next messages to its agents activate them on the other workers with the state they last saved.

Asserted per agent, on its final record in Redis:
- nothing saved was lost or overwritten: with the after-each-message policy every handled message is one write,
  so the record's `handled` count equals its version;
- its state never went backwards: no `Seq` number of a stream was seen twice or after a higher one;
- no gaps beyond what the policy allows: every message a surviving worker handled is in the state, every message
  the killed worker had handled when last asked is too (but for at most one per agent: handled, not yet saved),
  and everything sent after recovery is in it.
Bounded by message counts; every wait has a generous cap and fails saying what it waited for.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest

from ext.core import AgentId, UndeliverableError
from ext.redis import RedisStateStore
from ext.runtime.grpc import GrpcAgentRuntime
from ext.runtime.grpc.testing import (
    MESSAGE_TYPES,
    GatewayProcess,
    LoadWorkerProcess,
    SeqCall,
    StreamTally,
    expected_answer,
    start_gateway_process,
)
from ext.testing.redis import REDIS_BINARY, RedisServer, start_redis_server

WAIT = 60.0
TARGETS = [AgentId("st", f"k{i}") for i in range(8)]
BEFORE = 300
"""Messages per stream (2 senders x 8 agents) in the phase during which a host is killed."""
AFTER = 100
"""Messages per stream sent once every agent answers again: all of them must reach the saved states."""


@pytest.fixture
async def cluster() -> AsyncIterator[tuple[RedisServer, list[GatewayProcess], str]]:
    if REDIS_BINARY is None:
        pytest.fail("redis-server is not installed: apt-get install -y redis-server (tools/test.sh installs it)")
    redis = start_redis_server()
    prefix = f"st-{uuid.uuid4().hex[:8]}"
    gateways: list[GatewayProcess] = []
    try:
        for _ in range(2):
            gateways.append(
                start_gateway_process("--redis-url", redis.url, "--redis-prefix", prefix, "--lease-seconds", "1")
            )
        yield redis, gateways, prefix
    finally:
        for gateway in gateways:
            gateway.kill()
        redis.stop()


async def _answers(probe: GrpcAgentRuntime, target: AgentId) -> bool:
    try:
        # Generous: the RPC waits behind the agent's queued one-way messages, each saved to Redis in turn.
        reply = await probe.send_and_await_response(SeqCall(sender="probe", seq=1), target, timeout=WAIT / 2)
    except UndeliverableError:
        return False
    return bool(reply == expected_answer(target, 1))


async def _until(check: Any, what: str) -> None:
    deadline = time.monotonic() + WAIT
    while not await check():
        if time.monotonic() > deadline:
            raise TimeoutError(f"waited {WAIT:g} s for {what}")
        await asyncio.sleep(0.05)


def _ranges(data: dict[str, Any]) -> StreamTally:
    return StreamTally(ranges=[(low, high) for low, high in data["ranges"]])


def _not_in(state_ranges: StreamTally, ranges: list[list[int]]) -> list[int]:
    """The numbers of `ranges` that `state_ranges` lacks."""
    missing: list[int] = []
    for low, high in ranges:
        missing += state_ranges.missing(high, low)
    return missing


async def test_worker_killed_under_load_loses_no_saved_state(
    cluster: tuple[RedisServer, list[GatewayProcess], str],
) -> None:
    redis, gateways, prefix = cluster
    a, b = (g.address for g in gateways)
    state_prefix = f"{prefix}-state"
    workers: list[LoadWorkerProcess] = []

    async def start(name: str, addresses: list[str], host: bool) -> LoadWorkerProcess:
        process = await LoadWorkerProcess.start(
            name, addresses, host_types=["st"] if host else [], state_redis_url=redis.url, state_prefix=state_prefix
        )
        workers.append(process)
        return process

    store = RedisStateStore(redis.url, prefix=state_prefix)
    probe = GrpcAgentRuntime([b, a], token_env=None, connect_timeout=5, reconnect_backoff=0.05)
    for message_type in MESSAGE_TYPES:
        probe.register_message_type(message_type)
    try:
        hosts = [await start(f"h{i}", [a, b] if i % 2 == 0 else [b, a], True) for i in range(3)]
        senders = [await start(f"s{i}", [b, a], False) for i in range(2)]
        await probe.start()
        for target in TARGETS:
            assert await _answers(probe, target)
        sending = [asyncio.ensure_future(s.send(TARGETS, BEFORE, timeout=WAIT)) for s in senders]

        async def received(n: int) -> bool:
            reports = await asyncio.gather(*(h.report() for h in hosts))
            return sum(int(r["checker"]["received"]) for r in reports) >= n

        await _until(lambda: received(600), "600 messages before the kill")
        # The victim: the host with the most agents. Its checker is read just before the kill.
        reports = {h.name: await h.report() for h in hosts}

        def agents_of(report: dict[str, Any]) -> set[str]:
            return {key.split(" -> ", 1)[1] for key in report["checker"]["streams"]}

        victim = max(hosts, key=lambda h: len(agents_of(reports[h.name])))
        before = await victim.report()
        victim.kill()
        moved = agents_of(before)
        assert moved, "the victim hosted no agent"
        survivors = [h for h in hosts if h is not victim]

        # The next message to each moved agent activates it on a survivor, from its last saved state.
        for target in TARGETS:
            await _until(lambda t=target: _answers(probe, t), f"{target} answering after the kill")
        recovered: dict[str, int] = {}
        for report in await asyncio.wait_for(asyncio.gather(*sending), WAIT):
            recovered.update(report["sent"])
        assert len(recovered) == len(senders) * len(TARGETS) and set(recovered.values()) == {BEFORE}
        sent: dict[str, int] = {}
        for report in await asyncio.gather(*(s.send(TARGETS, AFTER, timeout=WAIT) for s in senders)):
            sent.update(report["sent"])
        assert set(sent.values()) == {BEFORE + AFTER}

        async def all_in_state() -> bool:
            for key, n in sent.items():
                sender, agent = key.split(" -> ", 1)
                record = await store.get(AgentId.from_str(agent))
                seen = record.state["seen"].get(sender) if record is not None else None
                if seen is None or _ranges(seen).missing(n, recovered[key]):
                    return False
            return True

        # Everything sent after recovery reaches the agents' saved states (each handler saves before the next).
        await _until(all_in_state, "every message sent after recovery in the saved states")
        final = {h.name: (await h.report())["checker"]["streams"] for h in survivors}

        for target in TARGETS:
            record = await store.get(target)
            assert record is not None, target
            state, version = record
            assert state["handled"] == version, (target, state["handled"], version)
            for sender, seen in state["seen"].items():
                assert (seen["duplicates"], seen["out_of_order"]) == (0, 0), (target, sender, seen)
            for name, streams in final.items():
                for key, data in streams.items():
                    sender, agent = key.split(" -> ", 1)
                    if agent == str(target):
                        lacking = _not_in(_ranges(state["seen"].get(sender, {"ranges": []})), data["ranges"])
                        assert lacking == [], (f"handled on {name}, not in the state", target, sender, lacking)
            lost_on_victim = 0
            for key, data in before["checker"]["streams"].items():
                sender, agent = key.split(" -> ", 1)
                if agent == str(target):
                    lost_on_victim += len(_not_in(_ranges(state["seen"].get(sender, {"ranges": []})), data["ranges"]))
            assert lost_on_victim <= 1, (target, lost_on_victim)
        moved_count = sum(1 for t in TARGETS if str(t) in moved)
        assert moved_count > 0
    finally:
        await probe.stop()
        await store.close()
        for process in workers:
            await process.stop()
