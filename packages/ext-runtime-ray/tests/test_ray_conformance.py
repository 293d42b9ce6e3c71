from __future__ import annotations

from typing import Any

from ext.core import AgentRuntime
from ext.runtime.ray import RayAgentRuntime
from ext.testing.conformance import RuntimeConformance
from ext.testing.runtime_agents import Journal


class TestRayRuntime(RuntimeConformance):
    """The shared suite, unchanged, in one Ray namespace: each test's runtimes stop (their agents with them) before
    the next test's start, and the namespace's subscriptions go when its last runtime stops. The suite's `Journal`
    stays in the test process (`driver_objects`): the agents, in their actors, record into it."""

    namespace = "conformance"

    async def make_runtime(self, **options: Any) -> AgentRuntime:
        return RayAgentRuntime(namespace=self.namespace, stop_timeout=2.0, driver_objects=(Journal,), **options)

    async def make_peer_runtime(self, **options: Any) -> AgentRuntime | None:
        return RayAgentRuntime(namespace=self.namespace, stop_timeout=2.0, driver_objects=(Journal,), **options)
