"""The conformance suite every `Workbench` implementation passes.

Subclass it (class name starting with `Test`) and provide a workbench that offers three tools:
an echo tool (returns the text it is given), a failing tool (reports an error), and a slow tool
(does not finish for at least 30 seconds unless cancelled)::

    class TestMyWorkbench(WorkbenchConformance):
        echo_tool = "echo"
        failing_tool = "fail"
        slow_tool = "sleep"

        def echo_arguments(self, text: str) -> dict[str, Any]:
            return {"text": text}

        async def make_workbench(self, tool_overrides=None) -> Workbench:
            return MyWorkbench(..., tool_overrides=tool_overrides)

The workbench is returned not started; the suite starts and stops it.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping
from typing import Any, ClassVar

import pytest
import pytest_asyncio

from ext.core import CancellationToken, ComponentError, ConfigurationError, ToolOverride, Workbench
from ext.testing.conformance._component import assert_dump_round_trip


class WorkbenchConformance:
    """Provider-neutral cases for a `Workbench`. See the module docstring."""

    echo_tool: ClassVar[str]
    failing_tool: ClassVar[str]
    slow_tool: ClassVar[str]
    failing_arguments: ClassVar[dict[str, Any]] = {}
    slow_arguments: ClassVar[dict[str, Any]] = {}
    concurrency: ClassVar[int] = 16

    def echo_arguments(self, text: str) -> dict[str, Any]:
        return {"text": text}

    async def make_workbench(self, tool_overrides: Mapping[str, ToolOverride] | None = None) -> Workbench:
        raise NotImplementedError

    @pytest_asyncio.fixture
    async def workbench(self) -> AsyncIterator[Workbench]:
        bench = await self.make_workbench()
        await bench.start()
        try:
            yield bench
        finally:
            await bench.stop()

    async def test_list_tools(self, workbench: Workbench) -> None:
        tools = {t["name"]: t for t in await workbench.list_tools()}
        for name in (self.echo_tool, self.failing_tool, self.slow_tool):
            assert name in tools, f"{name!r} missing from {sorted(tools)}"
        for schema in tools.values():
            assert isinstance(schema.get("description", ""), str)
            params = schema.get("parameters", {"type": "object"})
            assert params.get("type") == "object"

    async def test_dump_round_trip_loses_nothing(self, workbench: Workbench) -> None:
        """Dumped and loaded, the workbench keeps every setting (or refuses to be dumped, saying why) and its
        copy answers the same call."""
        try:
            workbench.dump_component()
        except ComponentError as exc:
            refusal = str(exc)
            assert "cannot be dumped" in refusal
            return
        loaded = assert_dump_round_trip(workbench)
        async with loaded:
            result = await loaded.call_tool(self.echo_tool, self.echo_arguments("after a round trip"))
        assert result.is_error is False and "after a round trip" in result.to_text()

    async def test_call_returns_text(self, workbench: Workbench) -> None:
        result = await workbench.call_tool(self.echo_tool, self.echo_arguments("hello conformance"))
        assert result.is_error is False
        assert result.name == self.echo_tool
        assert "hello conformance" in result.to_text()

    async def test_failing_tool_gives_an_error_result(self, workbench: Workbench) -> None:
        result = await workbench.call_tool(self.failing_tool, dict(self.failing_arguments))
        assert result.is_error is True
        assert result.to_text()

    async def test_unknown_tool_gives_an_error(self, workbench: Workbench) -> None:
        try:
            result = await workbench.call_tool("no_such_tool_xyz", {})
        except (LookupError, ValueError) as exc:  # raising is acceptable if it names the tool
            message = str(exc)
            assert "no_such_tool_xyz" in message
        else:
            assert result.is_error is True

    async def test_timeout_raises(self, workbench: Workbench) -> None:
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(workbench.call_tool(self.slow_tool, dict(self.slow_arguments), timeout=0.2), 20)

    async def test_timeout_as_error_result(self, workbench: Workbench) -> None:
        result = await asyncio.wait_for(
            workbench.call_tool(self.slow_tool, dict(self.slow_arguments), timeout=0.2, timeout_as_error=True), 20
        )
        assert result.is_error is True

    async def test_workbench_still_works_after_timeout(self, workbench: Workbench) -> None:
        with pytest.raises(TimeoutError):
            await workbench.call_tool(self.slow_tool, dict(self.slow_arguments), timeout=0.2)
        result = await asyncio.wait_for(workbench.call_tool(self.echo_tool, self.echo_arguments("again")), 20)
        assert "again" in result.to_text()

    async def test_cancel_aborts_the_call(self, workbench: Workbench) -> None:
        token = CancellationToken()
        task = asyncio.ensure_future(workbench.call_tool(self.slow_tool, dict(self.slow_arguments), token))
        await asyncio.sleep(0)  # let the call start; the outcome must not depend on the exact moment
        token.cancel()
        with pytest.raises(asyncio.CancelledError):
            await asyncio.wait_for(task, 20)
        result = await asyncio.wait_for(workbench.call_tool(self.echo_tool, self.echo_arguments("after")), 20)
        assert "after" in result.to_text()

    async def test_concurrent_calls(self, workbench: Workbench) -> None:
        texts = [f"message-{i}" for i in range(self.concurrency)]
        results = await asyncio.wait_for(
            asyncio.gather(*(workbench.call_tool(self.echo_tool, self.echo_arguments(t)) for t in texts)), 30
        )
        assert [t in r.to_text() for t, r in zip(texts, results, strict=True)] == [True] * len(texts)

    async def test_overrides_rename_and_route(self) -> None:
        override = ToolOverride(name="renamed_echo", description="An echo under another name")
        bench = await self.make_workbench({self.echo_tool: override})
        async with bench:
            tools = {t["name"]: t for t in await bench.list_tools()}
            assert "renamed_echo" in tools and self.echo_tool not in tools
            assert tools["renamed_echo"].get("description") == "An echo under another name"
            result = await bench.call_tool("renamed_echo", self.echo_arguments("via new name"))
            assert result.is_error is False and "via new name" in result.to_text()
            assert result.name == "renamed_echo"

    async def test_clashing_overrides_are_rejected(self) -> None:
        async def build_and_list() -> None:
            bench = await self.make_workbench(
                {self.echo_tool: ToolOverride(name="same"), self.failing_tool: ToolOverride(name="same")}
            )
            async with bench:
                await bench.list_tools()

        with pytest.raises(ConfigurationError, match=r"clash|both be presented"):
            await build_and_list()

    async def test_start_and_stop_are_idempotent(self) -> None:
        bench = await self.make_workbench()
        await bench.start()
        await bench.start()
        result = await bench.call_tool(self.echo_tool, self.echo_arguments("twice started"))
        assert "twice started" in result.to_text()
        await bench.stop()
        await bench.stop()
