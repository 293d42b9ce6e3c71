from __future__ import annotations

from typing import Any

from ext.core import AgentRuntime
from ext.runtime.local import LocalAgentRuntime
from ext.testing.conformance import RuntimeConformance


class TestLocalRuntime(RuntimeConformance):
    async def make_runtime(self, **options: Any) -> AgentRuntime:
        return LocalAgentRuntime(stop_timeout=2.0, **options)
