"""Evidence under load and faults (issue 19): 2 gateway replicas as separate processes sharing a real Redis,
workers as separate processes (`ext.runtime.grpc.testing.LoadWorkerProcess`) hosting `SequenceAgent`s and
sending sequence-numbered messages and RPCs.

Bounded by message counts, with a generous wall-clock cap on every wait that fails saying what it waited for.
No speed is asserted (figures are in `tools/bench/soak_cluster.py`); "fails within its deadline" is asserted by
the error type (an RPC that ran into its deadline raises `TimeoutError`).
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

import pytest
from ext_runtime_grpc_support import eventually, worker

from ext.core import AgentId, AgentNotFoundError, UndeliverableError
from ext.runtime.grpc import GrpcAgentRuntime
from ext.runtime.grpc.testing import (
    MESSAGE_TYPES,
    GatewayProcess,
    Hold,
    LoadWorkerProcess,
    SeqCall,
    expected_answer,
    merge_sender_reports,
    rss_kb,
    start_gateway_process,
    wait_delivered,
)
from ext.testing.redis import REDIS_BINARY, RedisServer, start_redis_server

WAIT = 60.0
"""The cap on each wait for delivery: far above what a run takes (a few seconds), so only a fault hits it."""

LEASE = "1"
"""Gateway lease (seconds): how long a killed replica's registrations outlive it."""


@dataclass
class Cluster:
    redis: RedisServer
    gateways: list[GatewayProcess]
    workers: list[LoadWorkerProcess] = field(default_factory=list)

    @property
    def addresses(self) -> list[str]:
        return [g.address for g in self.gateways]

    async def add_worker(self, name: str, addresses: list[str], host_types: list[str]) -> LoadWorkerProcess:
        process = await LoadWorkerProcess.start(name, addresses, host_types=host_types)
        self.workers.append(process)
        return process


@pytest.fixture
async def cluster() -> AsyncIterator[Cluster]:
    """Its own Redis (a test may restart it) and 2 gateway processes; every process is killed in teardown."""
    if REDIS_BINARY is None:
        pytest.fail("redis-server is not installed: apt-get install -y redis-server (tools/test.sh installs it)")
    redis = start_redis_server()
    prefix = f"load-{uuid.uuid4().hex[:8]}"
    gateways: list[GatewayProcess] = []
    state = Cluster(redis, gateways)
    try:
        for _ in range(2):
            gateways.append(
                start_gateway_process("--redis-url", redis.url, "--redis-prefix", prefix, "--lease-seconds", LEASE)
            )
        yield state
    finally:
        for process in state.workers:
            await process.stop()
        for gateway in gateways:
            gateway.kill()
        redis.stop()


def caller(addresses: str | list[str]) -> GrpcAgentRuntime:
    """An in-process worker of the test, for RPCs whose exceptions the test asserts on."""
    runtime = worker(addresses, reconnect_backoff=0.05)
    for message_type in MESSAGE_TYPES:
        runtime.register_message_type(message_type)
    return runtime


async def answers(runtime: GrpcAgentRuntime, target: AgentId) -> bool:
    """Whether `target` answers an RPC correctly yet (not while its worker fails over and re-registers)."""
    try:
        reply = await runtime.send_and_await_response(SeqCall(sender="probe", seq=7), target, timeout=5)
    except (UndeliverableError, AgentNotFoundError):
        return False
    return bool(reply == expected_answer(target, 7))


# --- sustained load ----------------------------------------------------------------------------------------

PER_STREAM = 640
RPC_EVERY = 10
ONE_WAY = 4 * 8 * PER_STREAM
"""One-way messages per phase (warm-up, then the measured run): 4 senders x 8 agents x 640 = 20,480; every 10th
message of a stream is also an RPC: 2,048 RPCs per phase."""
RSS_TOLERANCE_KB = 2048
"""Allowed RSS growth of any process over the measured run (after a warm-up run of the same size). Measured on
this 2-core machine over 17 runs: -0.6 to +0.4 MiB per process, once +1.2 MiB (load average 7 from other jobs:
deeper queues, a higher peak). Each gateway relays about 11k deliveries per run and the workers' agents take
20k between them, so a leak of about 200 bytes per message exceeds it. Checked by forcing leaks in scratch runs:
a gateway keeping each relayed protobuf message grew 12 MiB, a worker keeping each decoded message 5.5-6.4 MiB;
both failed this test."""


async def test_sustained_load_exactly_once_in_order_and_memory_flat(cluster: Cluster) -> None:
    a, b = cluster.addresses
    # 4 workers, 2 on each replica (each knows both), all hosting "seq" and all sending: rendezvous placement
    # spreads the 8 agents over the 4 workers, so most streams cross replicas through Redis.
    workers = await asyncio.gather(
        *(cluster.add_worker(f"w{i}", [a, b] if i % 2 == 0 else [b, a], ["seq"]) for i in range(4))
    )
    assert [w.ready["address"] for w in workers] == [a, b, a, b]
    targets = [AgentId("seq", f"k{i}") for i in range(8)]

    async def phase() -> dict[str, Any]:
        reports = await asyncio.gather(
            *(w.send(targets, PER_STREAM, rpc_every=RPC_EVERY, timeout=WAIT) for w in workers)
        )
        merged = merge_sender_reports(reports)
        sent: dict[str, int] = merged["sent"]
        tally = await wait_delivered(workers, sent, timeout=WAIT)
        assert tally.problems(sent) == []  # every message exactly once, in order per stream
        assert merged["send_errors"] == {}
        assert merged["rpc_errors"] == {} and merged["rpc_wrong"] == []
        return merged

    warm = await phase()
    assert warm["rpc_ok"] == ONE_WAY // RPC_EVERY
    processes = {g.address: g.process.pid for g in cluster.gateways} | {w.name: w.pid for w in workers}
    after_warm_up = {name: rss_kb(pid) for name, pid in processes.items()}

    run = await phase()  # the workers' reports are cumulative
    assert run["rpc_ok"] == 2 * ONE_WAY // RPC_EVERY
    sent_total = run["sent"]
    assert isinstance(sent_total, dict) and sum(sent_total.values()) == 2 * ONE_WAY
    assert len(sent_total) == len(workers) * len(targets)

    at_end = {name: rss_kb(pid) for name, pid in processes.items()}
    growth = {name: at_end[name] - after_warm_up[name] for name in processes}
    assert all(g <= RSS_TOLERANCE_KB for g in growth.values()), (
        f"RSS grew by more than {RSS_TOLERANCE_KB} KiB over {ONE_WAY} messages (KiB per process): {growth}"
    )


# --- failover ----------------------------------------------------------------------------------------------


async def test_replica_killed_under_load(cluster: Cluster) -> None:
    """SIGKILL replica A mid-load. Senders are on B. `near` agents live on a worker of B, `far` agents on a
    worker of A (which fails over to B). Guarantees asserted (and documented in the README):

    - streams to `near`: nothing lost, nothing duplicated, in order;
    - streams to `far` (the dead side): at most once and in order -- messages in the dead replica's hands or
      sent before the far worker re-registered are lost (there is no retry), none arrives twice or late; every
      message sent after recovery arrives;
    - an RPC in flight to the dead side fails with `UndeliverableError` ("... is gone") well within its
      deadline; RPCs of the load loop to the dead side either answer correctly or fail with
      `UndeliverableError` / `AgentNotFoundError`, never a timeout;
    - the far worker reconnects to B with a new worker id and its agents answer again.
    """
    a, b = cluster.addresses
    doomed = cluster.gateways[0]
    far_host = await cluster.add_worker("far-host", [a, b], ["far"])
    near_host = await cluster.add_worker("near-host", [b, a], ["near"])
    senders = [await cluster.add_worker(f"s{i}", [b, a], []) for i in range(2)]
    assert far_host.ready["address"] == a and near_host.ready["address"] == b
    near = [AgentId("near", f"n{i}") for i in range(4)]
    far = [AgentId("far", f"f{i}") for i in range(4)]
    hosts = [far_host, near_host]

    async with caller(b) as probe:
        for target in near + far:
            assert await answers(probe, target)
        # An RPC held in the far agent when A dies: it must fail (not time out) once B sees A's lease run out.
        held = asyncio.ensure_future(
            probe.send_and_await_response(Hold(seconds=60), AgentId("far", "held"), timeout=30)
        )
        await far_host.wait_event(lambda e: e.get("event") == "hold", timeout=10, what="Hold handler start")

        # s0 also makes RPCs (a far stream then waits in an RPC to the dead side); s1 sends one way only, so
        # it keeps sending to the far agents while B still places them on the dead replica.
        sending = [
            asyncio.ensure_future(s.send(near + far, None, rpc_every=every, rpc_timeout=10, timeout=WAIT))
            for s, every in zip(senders, (RPC_EVERY, 0), strict=True)
        ]
        # Kill A once real traffic flows to both sides.
        await eventually_delivered(hosts, lambda n: n >= 2000, "2,000 messages before the kill")
        doomed.kill()

        with pytest.raises(UndeliverableError, match="far/held is gone"):  # not TimeoutError (30 s)
            await asyncio.wait_for(held, WAIT)

        # The far worker fails over to B, registers again, and every far agent answers again.
        async def far_host_on_b() -> bool:
            report = await far_host.report()
            return bool(report["connected"] and report["address"] == b)

        await eventually(far_host_on_b, timeout=WAIT, what="the far worker connected to B")
        for target in far:
            await eventually(lambda t=target: answers(probe, t), WAIT, f"{target} answering")  # type: ignore[misc]
        report = await far_host.report()
        assert report["worker_id"] != far_host.ready["worker_id"]

        # Recovered: what is sent from here on must all arrive. Then a last stretch and stop.
        recovered = await merged_sent(senders)
        await eventually(lambda: sent_beyond(senders, recovered, 200), WAIT, "200 more messages per stream")
        for s in senders:
            await s.stop_sending()
        reports = await asyncio.wait_for(asyncio.gather(*sending), WAIT)

    merged = merge_sender_reports(reports)
    sent: dict[str, int] = merged["sent"]
    tally = await wait_delivered(hosts, {k: n for k, n in sent.items() if "-> near/" in k}, timeout=WAIT)
    near_streams = {k: n for k, n in sent.items() if "-> near/" in k}
    far_streams = {k: n for k, n in sent.items() if "-> far/" in k}
    assert len(near_streams) == len(far_streams) == 8
    # The survivor side: exactly once, in order, nothing lost.
    assert tally.problems(near_streams, strict=False) == []
    # The dead side: after recovery everything arrives; before it, losses only, never a duplicate or a reorder.
    tally = await wait_delivered(hosts, far_streams, since=recovered, timeout=WAIT)
    assert tally.problems(far_streams, since=recovered, strict=False) == []
    lost = {k: len(tally.streams[k].missing(n)) for k, n in far_streams.items()}
    assert all(tally.streams[k].duplicates == 0 and tally.streams[k].out_of_order == 0 for k in far_streams)
    assert sum(lost.values()) > 0, "the kill should have cost the dead side some messages (else it was not mid-load)"
    # Reported losses: the survivor told the senders of each message it could not forward (`on_undelivered`);
    # what the dead replica held when it died is lost without a word. So: reported <= lost, per agent.
    reported: dict[str, int] = merged["undelivered"]
    # Whether any loss is reported at all depends on timing (the far worker can re-register on B before B forwards
    # anything to the dead replica; a loaded CI machine saw none), so only the bound is asserted here: the reporting
    # itself is asserted exactly in test_forwarding.py.
    assert set(reported) <= {str(t) for t in far}, reported
    assert all(n <= lost_per_agent(lost)[agent] for agent, n in reported.items()), (reported, lost)
    # Sends never failed (the senders' own gateway lived); RPCs failed only as documented, each quickly.
    assert merged["send_errors"] == {}
    assert merged["rpc_wrong"] == []
    assert set(merged["rpc_errors"]) <= {"UndeliverableError", "AgentNotFoundError"}, merged["rpc_error_examples"]
    assert merged["rpc_ok"] > 0


def lost_per_agent(lost: dict[str, int]) -> dict[str, int]:
    """Stream key -> lost count, added up per recipient agent."""
    totals: dict[str, int] = {}
    for key, n in lost.items():
        agent = key.split(" -> ", 1)[1]
        totals[agent] = totals.get(agent, 0) + n
    return totals


async def eventually_delivered(hosts: list[LoadWorkerProcess], enough: Callable[[int], bool], what: str) -> None:
    deadline = time.monotonic() + WAIT
    while True:
        received = sum(r["checker"]["received"] for r in await asyncio.gather(*(h.report() for h in hosts)))
        if enough(received):
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"waited {WAIT:g} s for {what}; {received} messages received")
        await asyncio.sleep(0.05)


async def merged_sent(senders: list[LoadWorkerProcess]) -> dict[str, int]:
    merged: dict[str, int] = {}
    for s in senders:
        merged.update(await s.sent())
    return merged


async def sent_beyond(senders: list[LoadWorkerProcess], mark: dict[str, int], extra: int) -> bool:
    now = await merged_sent(senders)
    return all(now[k] >= n + extra for k, n in mark.items())


# --- Redis restart -----------------------------------------------------------------------------------------


async def test_redis_restarted_under_load(cluster: Cluster) -> None:
    """Kill redis-server mid-load and start an empty one on the same port (no persistence: every registration,
    placement and lease is gone). Asserted:

    - while Redis is down, an RPC that needs it (to an agent not yet placed) fails at once with
      `UndeliverableError` naming the registry, not at its deadline;
    - after the restart the gateways write their registrations again, cross-replica routing works again (an
      RPC to every agent answers, from a caller on each replica), without any worker reconnecting;
    - one-way streams: at most once and in order throughout; everything sent after recovery arrives.
    """
    a, b = cluster.addresses
    hosts = [await cluster.add_worker(f"w{i}", [a, b] if i % 2 == 0 else [b, a], ["seq"]) for i in range(2)]
    targets = [AgentId("seq", f"k{i}") for i in range(8)]
    worker_ids = [h.ready["worker_id"] for h in hosts]

    async with caller(a) as on_a, caller(b) as on_b:
        for target in targets:
            assert await answers(on_a, target) and await answers(on_b, target)
        sending = [
            asyncio.ensure_future(h.send(targets, None, rpc_every=RPC_EVERY, rpc_timeout=10, timeout=WAIT))
            for h in hosts
        ]
        await eventually_delivered(hosts, lambda n: n >= 2000, "2,000 messages before the restart")

        cluster.redis.kill()
        # A new agent needs the registry to be placed: a clear error, not a TimeoutError at the 30 s deadline.
        unreachable = r"the registry \(Redis at 127\.0\.0\.1:\d+\) is unreachable"
        with pytest.raises(UndeliverableError, match=unreachable):
            await on_b.send_and_await_response(SeqCall(sender="probe", seq=1), AgentId("seq", "new"), timeout=30)
        with pytest.raises(UndeliverableError, match="could not list the agents: " + unreachable):
            await on_a.list_agents()

        cluster.redis.restart()
        # Recovered: every agent answers from both replicas (including ones never placed before).
        for target in [*targets, AgentId("seq", "new")]:
            for runtime in (on_a, on_b):
                await eventually(lambda r=runtime, t=target: answers(r, t), WAIT, f"{target} answering")  # type: ignore[misc]
        recovered = await merged_sent(hosts)
        await eventually(lambda: sent_beyond(hosts, recovered, 200), WAIT, "200 more messages per stream")
        for h in hosts:
            await h.stop_sending()
        reports = await asyncio.wait_for(asyncio.gather(*sending), WAIT)

    # The workers never reconnected: the gateways restored the registry themselves.
    assert [(await h.report())["worker_id"] for h in hosts] == worker_ids
    merged = merge_sender_reports(reports)
    sent: dict[str, int] = merged["sent"]
    tally = await wait_delivered(hosts, sent, since=recovered, timeout=WAIT)
    assert tally.problems(sent, since=recovered) == []
    assert all(t.duplicates == 0 and t.out_of_order == 0 for t in tally.streams.values())
    lost = {k: len(tally.streams[k].missing(n)) for k, n in sent.items()}
    reported: dict[str, int] = merged["undelivered"]
    assert all(n <= lost_per_agent(lost)[agent] for agent, n in reported.items()), (reported, lost)
    assert merged["send_errors"] == {} and merged["rpc_wrong"] == []
    # UndeliverableError while Redis is down (naming it); AgentNotFoundError in the moment after an empty Redis
    # is back and before the gateways have written their registrations again (their next lease renewal).
    assert set(merged["rpc_errors"]) <= {"UndeliverableError", "AgentNotFoundError"}, merged["rpc_error_examples"]
    undeliverable = merged["rpc_error_examples"].get("UndeliverableError")
    assert undeliverable is None or "the registry (Redis at 127.0.0.1:" in undeliverable, undeliverable
