"""The workbench suite passes against core's StaticWorkbench, and fails against broken workbenches."""

from __future__ import annotations

import asyncio
import textwrap
from collections.abc import Mapping

import pytest

from ext.core import FunctionTool, StaticWorkbench, ToolOverride, Workbench
from ext.testing.conformance import WorkbenchConformance


def echo(text: str) -> str:
    """Return the text."""
    return text


def fail() -> str:
    """Always fails."""
    raise RuntimeError("this tool always fails")


async def slow() -> str:
    """Takes a minute."""
    await asyncio.sleep(60)
    return "late"


def static_bench(tool_overrides: Mapping[str, ToolOverride] | None = None) -> StaticWorkbench:
    return StaticWorkbench([FunctionTool(echo), FunctionTool(fail), FunctionTool(slow)], tool_overrides)


class TestStaticWorkbench(WorkbenchConformance):
    echo_tool = "echo"
    failing_tool = "fail"
    slow_tool = "slow"

    async def make_workbench(self, tool_overrides: Mapping[str, ToolOverride] | None = None) -> Workbench:
        return static_bench(tool_overrides)


BROKEN = textwrap.dedent(
    """
    import asyncio
    from ext.core import FunctionTool, StaticWorkbench, TextResultContent, ToolResult
    from ext.testing.conformance import WorkbenchConformance

    def echo(text: str) -> str:
        return text

    def fail() -> str:
        raise RuntimeError("x")

    async def slow() -> str:
        await asyncio.sleep(60)
        return "late"

    class SwallowsErrorsAndIgnoresTimeouts(StaticWorkbench):
        async def call_tool(self, name, arguments=None, cancellation_token=None, *, call_id=None, timeout=None,
                            timeout_as_error=False):
            if name == "slow":
                return ToolResult(name=name, result=[TextResultContent(content="pretend")])
            result = await super().call_tool(name, arguments, cancellation_token)
            return result.model_copy(update={"is_error": False})

    class TestBroken(WorkbenchConformance):
        echo_tool = "echo"
        failing_tool = "fail"
        slow_tool = "slow"

        async def make_workbench(self, tool_overrides=None):
            return SwallowsErrorsAndIgnoresTimeouts(
                [FunctionTool(echo), FunctionTool(fail), FunctionTool(slow)], tool_overrides
            )
    """
)


def test_suite_fails_a_broken_workbench(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_broken=BROKEN)
    reprec = pytester.inline_run(
        "-p", "no:randomly", "-o", "asyncio_mode=auto", "-o", "asyncio_default_fixture_loop_scope=function"
    )
    failed = sorted(r.nodeid.rsplit("::", 1)[1] for r in reprec.getreports("pytest_runtest_logreport") if r.failed)
    assert failed == [
        "test_cancel_aborts_the_call",
        "test_failing_tool_gives_an_error_result",
        "test_timeout_as_error_result",
        "test_timeout_raises",
        "test_unknown_tool_gives_an_error",
        "test_workbench_still_works_after_timeout",
    ]
