"""ext-testing's workbench conformance suite, over each transport of the mcp-SDK test server."""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import Any, ClassVar

import pytest
from ext_mcp_support import SDK_SERVER

from ext.core import ToolOverride, Workbench
from ext.testing.conformance import WorkbenchConformance
from ext.tools.mcp import McpWorkbench, SseServerParams, StdioServerParams, StreamableHttpServerParams


class _SdkServerConformance(WorkbenchConformance):
    echo_tool = "echo"
    failing_tool = "fail"
    slow_tool = "block"
    slow_arguments: ClassVar[dict[str, Any]] = {"tag": "conformance"}
    concurrency = 32

    def params(self) -> Any:
        raise NotImplementedError

    async def make_workbench(self, tool_overrides: Mapping[str, ToolOverride] | None = None) -> Workbench:
        return McpWorkbench(self.params(), tool_overrides)


class TestStdioConformance(_SdkServerConformance):
    def params(self) -> Any:
        return StdioServerParams(command=sys.executable, args=[SDK_SERVER, "stdio"], startup_timeout_seconds=20)


class TestSseConformance(_SdkServerConformance):
    @pytest.fixture(autouse=True)
    def _url(self, sdk_sse: str) -> None:
        self.url = sdk_sse

    def params(self) -> Any:
        return SseServerParams(url=self.url)


class TestStreamableHttpConformance(_SdkServerConformance):
    @pytest.fixture(autouse=True)
    def _url(self, sdk_http: str) -> None:
        self.url = sdk_http

    def params(self) -> Any:
        return StreamableHttpServerParams(url=self.url)
