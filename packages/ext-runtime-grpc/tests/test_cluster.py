"""`LocalCluster` (gateway replicas sharing a Redis) and workers given several gateway addresses failing over
when their gateway goes away."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass

import pytest
from ext_runtime_grpc_support import eventually, worker

from ext.core import AgentId, AgentNotFoundError, UndeliverableError
from ext.runtime.grpc import GrpcAgentRuntime, LocalCluster
from ext.runtime.grpc.testing import GatewayProcess, start_gateway_process
from ext.testing.redis import RedisServer
from ext.testing.runtime_agents import EchoAgent, Journal, Ping, Pong, Slow


async def test_cluster_replicas_share_one_registry(redis_server: RedisServer) -> None:
    async with LocalCluster(3, redis_url=redis_server.url) as cluster:
        addresses = cluster.addresses
        assert len(set(addresses)) == 3 and all(a.startswith("127.0.0.1:") for a in addresses)
        assert len({g.gateway_id for g in cluster.gateways}) == 3
        async with worker(addresses[0]) as host, worker(addresses[2]) as caller:
            journal = Journal()
            await host.register_agent_factory("echo", lambda aid, rt: EchoAgent(aid, rt, journal))
            reply = await caller.send_and_await_response(Ping(text="hi"), AgentId("echo", "a"), timeout=10)
            assert isinstance(reply, Pong) and reply.agent == "echo/a"
            assert await caller.list_agents() == [AgentId("echo", "a")]
    # Stopped: nothing listens on the replicas' ports any more.
    with pytest.raises(UndeliverableError, match="none of the 3 gateways answered"):
        await worker(addresses, connect_timeout=2).start()


async def test_a_single_replica_without_redis_keeps_its_registry_in_memory() -> None:
    async with LocalCluster(1) as cluster:
        assert cluster.redis_url is None and len(cluster.addresses) == 1
        async with worker(cluster.addresses[0]) as host, worker(cluster.addresses[0]) as caller:
            await host.register_agent_factory("echo", lambda aid, rt: EchoAgent(aid, rt, Journal()))
            reply = await caller.send_and_await_response(Ping(text="x"), AgentId("echo", "k"), timeout=10)
            assert isinstance(reply, Pong) and reply.text == "x"


def test_cluster_and_address_list_arguments() -> None:
    with pytest.raises(ValueError, match="replicas"):
        LocalCluster(0)
    # Replicas share their registry in Redis: more than one without a redis_url is refused before anything starts.
    with pytest.raises(ValueError, match="redis_url is required for 2 replicas"):
        LocalCluster(2)
    with pytest.raises(ValueError, match="lease_seconds"):
        LocalCluster(2, redis_url="redis://127.0.0.1", lease_seconds=0)
    with pytest.raises(ValueError, match="host:port"):
        GrpcAgentRuntime(["127.0.0.1:1", "nohost"], token_env=None)
    with pytest.raises(TypeError, match="address"):
        GrpcAgentRuntime([], token_env=None)


async def test_worker_fails_over_to_another_replica(redis_server: RedisServer) -> None:
    async with LocalCluster(2, redis_url=redis_server.url) as cluster:
        a, b = cluster.addresses
        journal = Journal()
        # The host lists both replicas and connects to the first that answers (A); the sender is on B.
        async with worker([a, b], reconnect_backoff=0.05) as host, worker(b) as caller:
            await host.register_agent_factory("echo", lambda aid, rt: EchoAgent(aid, rt, journal))
            assert host.address == a
            reply = await caller.send_and_await_response(Ping(text="1"), AgentId("echo", "x"), timeout=10)
            assert isinstance(reply, Pong) and reply.count == 1

            # An RPC in flight to the host when A goes away fails at once, well before its deadline.
            slow = asyncio.ensure_future(
                caller.send_and_await_response(Slow(seconds=30), AgentId("echo", "slow"), timeout=20)
            )
            await asyncio.wait_for(journal.slow_started.wait(), 10)
            await cluster.stop_replica(0, grace=0)
            with pytest.raises(UndeliverableError, match="echo/slow disconnected"):
                await asyncio.wait_for(slow, 10)
            await eventually(lambda: _true(AgentId("echo", "slow") in journal.cancelled))  # the handler too

            # The host reconnects to B and registers "echo" again; the agent answers again (created afresh:
            # its state was in the old connection's placement).
            await eventually(lambda: _true(host.connected and host.address == b))

            await eventually(lambda: answers(caller, "echo/x"))
            assert host.worker_id.startswith(cluster.gateways[1].gateway_id)


async def answers(caller: GrpcAgentRuntime, agent: str) -> bool:
    """Whether `agent` answers a Ping yet (not while its worker is re-registering)."""
    try:
        reply = await caller.send_and_await_response(Ping(text="again"), AgentId(*agent.split("/")), timeout=5)
    except (UndeliverableError, AgentNotFoundError):
        return False
    return isinstance(reply, Pong) and reply.text == "again" and reply.agent == agent


@dataclass
class Failover:
    doomed: GatewayProcess
    survivor: str
    host: GrpcAgentRuntime
    caller: GrpcAgentRuntime
    journal: Journal


@contextlib.asynccontextmanager
async def _host_behind_a_doomed_gateway(redis_server: RedisServer, lease: int) -> AsyncIterator[Failover]:
    """A replica in a separate process (killed with SIGKILL by the test) and a survivor, sharing a Redis with
    gateway leases of `lease` seconds; a worker hosting "echo" connected to the doomed one (the survivor next in its
    list), and a caller on the survivor."""
    async with LocalCluster(1, redis_url=redis_server.url, lease_seconds=lease) as cluster:
        doomed = start_gateway_process(
            "--redis-url", redis_server.url, "--redis-prefix", cluster.redis_prefix, "--lease-seconds", str(lease)
        )
        try:
            b = cluster.addresses[0]
            journal = Journal()
            async with worker([doomed.address, b], reconnect_backoff=0.05) as host, worker(b) as caller:
                await host.register_agent_factory("echo", lambda aid, rt: EchoAgent(aid, rt, journal))
                assert host.address == doomed.address
                yield Failover(doomed, b, host, caller, journal)
        finally:
            doomed.kill()


async def test_worker_fails_over_when_its_gateway_is_killed(redis_server: RedisServer) -> None:
    """A replica that dies without cleaning up (SIGKILL, a separate process joining the cluster's Redis)."""
    async with _host_behind_a_doomed_gateway(redis_server, 1) as f:
        assert await answers(f.caller, "echo/x")
        slow = asyncio.ensure_future(
            f.caller.send_and_await_response(Slow(seconds=30), AgentId("echo", "slow"), timeout=20)
        )
        await asyncio.wait_for(f.journal.slow_started.wait(), 10)
        f.doomed.kill()
        # B learns of the death when the lease (1 s) runs out, and fails the RPC then, not at 20 s.
        with pytest.raises(UndeliverableError, match="is gone"):
            await asyncio.wait_for(slow, 10)
        await eventually(lambda: _true(f.host.connected and f.host.address == f.survivor))
        await eventually(lambda: answers(f.caller, "echo/x"))


async def _true(value: bool) -> bool:
    return value


async def test_a_worker_that_failed_over_is_reachable_before_the_dead_gateways_lease_ends(
    redis_server: RedisServer,
) -> None:
    """Its registration through a live gateway is the evidence: its agents' placements follow it at once. The
    lease here is 60 s, far beyond every wait below, so only that evidence can make the agent answer."""
    async with _host_behind_a_doomed_gateway(redis_server, 60) as f:
        first = await f.caller.send_and_await_response(Ping(text="one"), AgentId("echo", "x"), timeout=10)
        assert first.count == 1
        f.doomed.kill()
        await eventually(lambda: _true(f.host.connected and f.host.address == f.survivor), what="the failover to B")
        await eventually(lambda: answers(f.caller, "echo/x"), what="echo/x answering through B")
        # The same agent object, on the same worker: nothing was re-placed or created again.
        again = await f.caller.send_and_await_response(Ping(text="three"), AgentId("echo", "x"), timeout=10)
        assert again.count == 3
        assert f.journal.created == [AgentId("echo", "x")]


async def test_a_claim_to_a_previous_worker_id_needs_its_instance_id(redis_server: RedisServer) -> None:
    """A worker cannot take another worker's placements by naming its id: the secret instance id must match."""
    async with LocalCluster(2, redis_url=redis_server.url) as cluster:
        a, b = cluster.addresses
        journal, intruders = Journal(), Journal()
        async with worker(a) as host, worker(b) as caller:
            await host.register_agent_factory("echo", lambda aid, rt: EchoAgent(aid, rt, journal))
            assert (await caller.send_and_await_response(Ping(text="1"), AgentId("echo", "y"), timeout=10)).count == 1
            intruder = worker(b)
            intruder._connection.worker_id = (
                host.worker_id
            )  # what it sends as its "previous" id: forged, without the instance
            async with intruder:
                await intruder.register_agent_factory("echo", lambda aid, rt: EchoAgent(aid, rt, intruders))
                reply = await caller.send_and_await_response(Ping(text="2"), AgentId("echo", "y"), timeout=10)
            assert (reply.count, reply.agent) == (2, "echo/y")
            assert intruders.created == [] and journal.created == [AgentId("echo", "y")]


async def test_cli_replicas_print_their_addresses_and_stop_on_sigterm(redis_server: RedisServer) -> None:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "ext.runtime.grpc", "gateway", "--replicas", "2", "--port", "0",
        "--redis-url", redis_server.url, "--redis-prefix", "cli-replicas", "--log-level", "WARNING",
        env={k: v for k, v in os.environ.items() if not k.startswith("EXT_GRPC")},
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    assert proc.stdout is not None
    try:
        addresses = [(await asyncio.wait_for(proc.stdout.readline(), 30)).decode().strip() for _ in range(2)]
        assert len(set(addresses)) == 2 and all(a.startswith("127.0.0.1:") for a in addresses), addresses
        async with worker(addresses[0]) as host, worker(addresses[1]) as caller:
            await host.register_agent_factory("echo", lambda aid, rt: EchoAgent(aid, rt, Journal()))
            assert await answers(caller, "echo/cli")
        proc.send_signal(signal.SIGTERM)
        _, err = await asyncio.wait_for(proc.communicate(), 30)
        assert proc.returncode == 0, err.decode()[-2000:]
        assert b"Traceback" not in err
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()


@pytest.mark.parametrize(
    ("replicas", "error"),
    [
        ("0", "--replicas must be at least 1"),
        # Replicas without a Redis to share: refused up front, naming the missing option.
        ("2", "--replicas 2 needs --redis-url"),
    ],
)
async def test_cli_replicas_argument_errors(replicas: str, error: str) -> None:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "ext.runtime.grpc", "gateway", "--replicas", replicas,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await asyncio.wait_for(proc.communicate(), 30)
    assert proc.returncode == 2 and out == b""
    assert error in err.decode()
