"""The shared runtime scenarios on GrpcAgentRuntime workers: two workers on one gateway, and two workers on
two gateway replicas sharing a Redis registry."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest_asyncio

from ext.core import AgentRuntime
from ext.runtime.grpc import Gateway, GrpcAgentRuntime, RedisRegistry
from ext.testing.conformance import RuntimeConformance
from ext.testing.redis import RedisServer
from ext.testing.runtime_agents import MESSAGE_TYPES


def _worker(gateway: Gateway, **options: Any) -> GrpcAgentRuntime:
    runtime = GrpcAgentRuntime(
        f"127.0.0.1:{gateway.port}", token_env=None, connect_timeout=5, stop_timeout=2, **options
    )
    for message_type in MESSAGE_TYPES:
        runtime.register_message_type(message_type)
    return runtime


class TestGrpcRuntime(RuntimeConformance):
    gateway: Gateway

    @pytest_asyncio.fixture(autouse=True)
    async def _gateway(self) -> AsyncIterator[None]:
        self.gateway = Gateway(port=0, shutdown_grace=0)
        await self.gateway.start()
        try:
            yield
        finally:
            await self.gateway.stop()

    async def make_runtime(self, **options: Any) -> AgentRuntime:
        return _worker(self.gateway, **options)

    async def make_peer_runtime(self, **options: Any) -> AgentRuntime | None:
        return _worker(self.gateway, **options)


class TestGrpcReplicas(RuntimeConformance):
    """The runtime and its peer connect to different gateways; every cross-worker message crosses Redis."""

    first: Gateway
    second: Gateway

    @pytest_asyncio.fixture(autouse=True)
    async def _gateways(self, redis_server: RedisServer) -> AsyncIterator[None]:
        prefix = f"t{uuid.uuid4().hex[:8]}"
        self.first = Gateway(port=0, shutdown_grace=0, registry=RedisRegistry(redis_server.url, prefix=prefix))
        self.second = Gateway(port=0, shutdown_grace=0, registry=RedisRegistry(redis_server.url, prefix=prefix))
        await self.first.start()
        await self.second.start()
        try:
            yield
        finally:
            await self.first.stop()
            await self.second.stop()

    async def make_runtime(self, **options: Any) -> AgentRuntime:
        return _worker(self.first, **options)

    async def make_peer_runtime(self, **options: Any) -> AgentRuntime | None:
        return _worker(self.second, **options)
