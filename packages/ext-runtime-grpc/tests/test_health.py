"""The gateway's health and readiness: the HTTP listener (/healthz, /readyz) and the standard gRPC health service,
over real sockets; readiness following the registry (a real Redis going away and coming back) and the drain on
SIGTERM of a real gateway process."""

from __future__ import annotations

import asyncio
import signal
from collections.abc import AsyncIterator

import grpc
import pytest
from ext_runtime_grpc_support import eventually, worker
from grpc_health.v1 import health_pb2, health_pb2_grpc

from ext.core import AgentId, MessageContext, RoutedAgent, message_handler
from ext.runtime.grpc import Gateway, GrpcAgentRuntime, LocalCluster, RedisRegistry
from ext.runtime.grpc import _health as health_module
from ext.runtime.grpc.testing import start_gateway_process
from ext.testing.redis import RedisServer, free_port, start_redis_server
from ext.testing.runtime_agents import Ping, Pong


async def http(port: int, request: bytes) -> tuple[int, str]:
    """Send raw `request` bytes to 127.0.0.1:`port`; the status code and body of the answer."""
    reader, writer = await asyncio.wait_for(asyncio.open_connection("127.0.0.1", port), 5)
    try:
        writer.write(request)
        await writer.drain()
        raw = await asyncio.wait_for(reader.read(), 10)
    finally:
        writer.close()
    head, _, body = raw.partition(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1])
    assert (b"Connection: close" in head and f"Content-Length: {len(body)}".encode() in head) or not body
    return status, body.decode()


async def get(port: int, path: str) -> tuple[int, str]:
    return await http(port, f"GET {path} HTTP/1.1\r\nHost: probe\r\nUser-Agent: kube-probe/1.33\r\n\r\n".encode())


async def grpc_health(address: str, service: str = "") -> int:
    """The status `grpc.health.v1.Health/Check` reports (what a Kubernetes `grpc:` probe calls)."""
    async with grpc.aio.insecure_channel(address) as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        response = await stub.Check(health_pb2.HealthCheckRequest(service=service), timeout=5)
        return int(response.status)


@pytest.fixture
async def gateway() -> AsyncIterator[Gateway]:
    gateway = Gateway(health_port=0)
    await gateway.start()
    try:
        yield gateway
    finally:
        await gateway.stop()


async def test_liveness_readiness_and_other_requests(gateway: Gateway) -> None:
    port = gateway.health_port
    assert port is not None and port != 0 and port != gateway.port
    assert await get(port, "/healthz") == (200, "ok\n")
    assert await get(port, "/readyz") == (200, "ready\n")
    assert await get(port, "/readyz?verbose=1") == (200, "ready\n")
    assert (await get(port, "/"))[0] == 404
    assert (await get(port, "/metrics"))[0] == 404
    assert (await http(port, b"POST /readyz HTTP/1.1\r\nContent-Length: 0\r\n\r\n"))[0] == 405
    assert (await http(port, b"nonsense\r\n\r\n"))[0] == 400
    # HEAD: the status and headers, no body.
    assert await http(port, b"HEAD /readyz HTTP/1.1\r\n\r\n") == (200, "")
    # A request head over the limit is refused, not buffered.
    big = b"GET /readyz HTTP/1.1\r\nX-Pad: " + b"a" * (health_module.MAX_REQUEST_BYTES + 10) + b"\r\n\r\n"
    assert (await http(port, big))[0] == 431


async def test_a_stalled_client_gets_408_and_blocks_nothing(gateway: Gateway, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(health_module, "REQUEST_TIMEOUT", 0.5)
    port = gateway.health_port
    assert port is not None
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(b"GET /readyz HTTP/1.1\r\n")  # and never the blank line
        await writer.drain()
        # Meanwhile the gateway serves probes and workers as usual.
        assert await get(port, "/readyz") == (200, "ready\n")
        async with worker(gateway.address) as runtime:
            assert runtime.connected
        answer = await asyncio.wait_for(reader.read(), 10)
        assert answer.startswith(b"HTTP/1.1 408 ")
    finally:
        writer.close()


async def test_grpc_health_service(gateway: Gateway) -> None:
    serving = health_pb2.HealthCheckResponse.SERVING
    assert await grpc_health(gateway.address) == serving
    assert await grpc_health(gateway.address, "ext.runtime.v1.AgentWorker") == serving
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await grpc_health(gateway.address, "no.such.Service")
    assert info.value.code() == grpc.StatusCode.NOT_FOUND
    # Watch streams the current status first.
    async with grpc.aio.insecure_channel(gateway.address) as channel:
        call = health_pb2_grpc.HealthStub(channel).Watch(health_pb2.HealthCheckRequest(service=""), timeout=5)
        first = await call.read()
        assert first.status == serving
        call.cancel()


async def test_not_ready_before_start_and_closed_after_stop() -> None:
    port = free_port()
    gateway = Gateway(health_port=port, health_host="127.0.0.1")
    assert gateway.not_ready_reason() == "the gRPC port is not serving yet"
    await gateway.start()
    assert gateway.health_port == port
    assert gateway.not_ready_reason() is None
    await gateway.stop()
    assert gateway.not_ready_reason() == "the gateway has stopped"
    with pytest.raises(OSError):
        await get(port, "/healthz")


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"health_port": 70000}, "health_port"),
        ({"health_port": "80"}, "health_port"),
        ({"health_host": ""}, "health_host"),
    ],
)
def test_health_arguments(kwargs: dict[str, object], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        Gateway(**kwargs)  # type: ignore[arg-type]


async def test_readiness_follows_redis_going_away_and_coming_back() -> None:
    redis = start_redis_server()
    registry = RedisRegistry(redis.url, prefix="health-test", lease_seconds=0.6)
    gateway = Gateway(health_port=0, registry=registry)
    revived: RedisServer | None = None
    try:
        await gateway.start()
        port = gateway.health_port
        assert port is not None
        assert await get(port, "/readyz") == (200, "ready\n")
        # A Watch (the streaming half of grpc.health.v1) sees the change without asking again.
        channel = grpc.aio.insecure_channel(gateway.address)
        watch = health_pb2_grpc.HealthStub(channel).Watch(health_pb2.HealthCheckRequest(service=""), timeout=30)
        assert (await watch.read()).status == health_pb2.HealthCheckResponse.SERVING
        redis.stop()
        assert (await asyncio.wait_for(watch.read(), 15)).status == health_pb2.HealthCheckResponse.NOT_SERVING
        watch.cancel()
        await channel.close(None)

        async def not_ready() -> bool:
            return (await get(port, "/readyz"))[0] == 503

        await eventually(not_ready, timeout=10)
        status, body = await get(port, "/readyz")
        assert status == 503
        assert body.startswith(f"not ready: the registry (Redis at 127.0.0.1:{redis.port})"), body
        assert await get(port, "/healthz") == (200, "ok\n")  # alive all along: no restart for a Redis outage
        assert await grpc_health(gateway.address) == health_pb2.HealthCheckResponse.NOT_SERVING

        revived = start_redis_server(port=redis.port)

        async def ready() -> bool:
            return await get(port, "/readyz") == (200, "ready\n")

        await eventually(ready, timeout=15)
        assert await grpc_health(gateway.address) == health_pb2.HealthCheckResponse.SERVING
    finally:
        await gateway.stop()
        redis.stop()
        if revived is not None:
            revived.stop()


class Held(RoutedAgent):
    """Answers `Ping` only once the test opens `gate`: an RPC in flight for exactly as long as the test needs."""

    started = asyncio.Event()
    gate = asyncio.Event()

    @message_handler
    async def on_ping(self, message: Ping, ctx: MessageContext) -> Pong:
        Held.started.set()
        await Held.gate.wait()
        return Pong(text=message.text, agent=str(self.id), count=1)


async def test_sigterm_turns_readiness_off_at_once_then_drains() -> None:
    Held.started, Held.gate = asyncio.Event(), asyncio.Event()
    health_port = free_port()
    process = start_gateway_process("--health-port", str(health_port), "--shutdown-grace", "30")
    runtime: GrpcAgentRuntime = worker(process.address, reconnect_backoff=30)
    try:
        assert await get(health_port, "/readyz") == (200, "ready\n")
        await runtime.start()
        await runtime.register_agent_factory("held", Held)
        call = asyncio.ensure_future(runtime.send_and_await_response(Ping(text="in flight"), AgentId("held", "1")))
        await asyncio.wait_for(Held.started.wait(), 10)

        process.process.send_signal(signal.SIGTERM)

        async def draining() -> bool:
            return (await get(health_port, "/readyz"))[0] == 503

        await eventually(draining, timeout=10)
        assert await get(health_port, "/readyz") == (503, "not ready: draining: the gateway is shutting down\n")
        assert await get(health_port, "/healthz") == (200, "ok\n")
        assert await grpc_health(process.address) == health_pb2.HealthCheckResponse.NOT_SERVING
        assert process.process.poll() is None and not call.done()

        Held.gate.set()  # the in-flight RPC completes during the drain
        reply = await asyncio.wait_for(call, 10)
        assert isinstance(reply, Pong) and reply.text == "in flight"
        assert await asyncio.to_thread(process.process.wait, 20) == 0
        with pytest.raises(OSError):
            await get(health_port, "/healthz")
    finally:
        Held.gate.set()
        await runtime.stop()
        process.kill()


async def test_a_health_port_in_use_fails_start_before_the_grpc_port_is_bound() -> None:
    blocker = Gateway(health_port=0)
    await blocker.start()
    try:
        port = free_port()
        gateway = Gateway(port=port, health_port=blocker.health_port)
        with pytest.raises(OSError):
            await gateway.start()
        # The gRPC port it had bound is free again: a gateway can take it.
        again = Gateway(port=port)
        assert await again.start() == port
        await again.stop()
    finally:
        await blocker.stop()


async def test_local_cluster_replicas_each_get_a_health_port(redis_server: RedisServer) -> None:
    async with LocalCluster(2, redis_url=redis_server.url, health_port=0) as cluster:
        ports = [gateway.health_port for gateway in cluster.gateways]
        assert len(set(ports)) == 2 and all(ports)
        for port in ports:
            assert port is not None
            assert await get(port, "/readyz") == (200, "ready\n")
        await cluster.stop_replica(0)
        assert await get(ports[1] or 0, "/readyz") == (200, "ready\n")
        with pytest.raises(OSError):
            await get(ports[0] or 0, "/readyz")
