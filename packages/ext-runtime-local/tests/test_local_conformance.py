from __future__ import annotations

from ext.core import AgentRuntime
from ext.runtime.local import LocalAgentRuntime
from ext.testing.conformance import RuntimeConformance


class TestLocalRuntime(RuntimeConformance):
    async def make_runtime(self) -> AgentRuntime:
        return LocalAgentRuntime(stop_timeout=2.0)
