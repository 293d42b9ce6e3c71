from __future__ import annotations

import asyncio
import base64

import pytest

from ext.core import (
    AudioResultContent,
    CancellationToken,
    ConfigurationError,
    FunctionTool,
    Image,
    ImageResultContent,
    ResourceResultContent,
    StaticWorkbench,
    TextResultContent,
    ToolArgumentsError,
    ToolOverride,
    ToolOverrides,
    ToolResult,
    result_from_value,
)

PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
)


def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


def fail() -> None:
    """Always fails."""
    raise RuntimeError("broken on purpose")


async def forever() -> None:
    """Never returns."""
    await asyncio.Event().wait()


def picture() -> Image:
    """An image."""
    return Image.from_bytes(PNG)


def _bench(**overrides: ToolOverride) -> StaticWorkbench:
    tools = [FunctionTool(f) for f in (add, fail, forever, picture)]
    return StaticWorkbench(tools, tool_overrides=overrides or None)


async def test_list_and_call() -> None:
    async with _bench() as bench:
        names = [t["name"] for t in await bench.list_tools()]
        assert names == ["add", "fail", "forever", "picture"]
        result = await bench.call_tool("add", {"a": 2, "b": 3})
        assert result == ToolResult(name="add", result=[TextResultContent(content="5")])
        assert result.to_text() == "5"


async def test_errors_become_error_results() -> None:
    bench = _bench()
    failed = await bench.call_tool("fail")
    assert failed.is_error and failed.to_text() == "RuntimeError: broken on purpose"
    bad_args = await bench.call_tool("add", {"a": "x", "b": 1})
    assert bad_args.is_error and "'add'" in bad_args.to_text() and "a:" in bad_args.to_text()
    unknown = await bench.call_tool("nope")
    assert unknown.is_error and unknown.to_text() == "unknown tool 'nope'"
    with pytest.raises(ToolArgumentsError, match="mapping"):
        await bench.call_tool("add", [1, 2])  # type: ignore[arg-type]


async def test_timeout_raises_or_returns_error() -> None:
    bench = _bench()
    with pytest.raises(TimeoutError, match="'forever'"):
        await bench.call_tool("forever", timeout=0.01)
    result = await bench.call_tool("forever", timeout=0.01, timeout_as_error=True)
    assert result.is_error and "did not finish" in result.to_text()
    with pytest.raises(ConfigurationError, match="timeout"):
        await bench.call_tool("add", {"a": 1, "b": 1}, timeout=0)


async def test_cancel_aborts_the_call() -> None:
    bench = _bench()
    token = CancellationToken()
    task = asyncio.ensure_future(bench.call_tool("forever", cancellation_token=token))
    await asyncio.sleep(0)
    token.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


async def test_overrides_rename_and_route() -> None:
    bench = _bench(add=ToolOverride(name="sum", description="Sum two ints"))
    tools = {t["name"]: t for t in await bench.list_tools()}
    assert "add" not in tools
    assert tools["sum"]["description"] == "Sum two ints"
    result = await bench.call_tool("sum", {"a": 1, "b": 1})
    assert result.name == "sum" and result.to_text() == "2"
    hidden = await bench.call_tool("add", {"a": 1, "b": 1})
    assert hidden.is_error


def test_override_clashes_are_errors() -> None:
    with pytest.raises(ConfigurationError, match="both be presented as 'x'"):
        ToolOverrides({"a": ToolOverride(name="x"), "b": {"name": "x"}})
    with pytest.raises(ConfigurationError, match="clashes"):
        _bench(add=ToolOverride(name="fail"))
    with pytest.raises(ValueError, match="tool name"):
        ToolOverride(name="bad name")


def test_static_workbench_rejects_bad_tools() -> None:
    with pytest.raises(ConfigurationError, match="not a Tool"):
        StaticWorkbench([object()])  # type: ignore[list-item]
    with pytest.raises(ConfigurationError, match="two tools"):
        StaticWorkbench([FunctionTool(add), FunctionTool(add)])


async def test_image_results_stay_images() -> None:
    result = await _bench().call_tool("picture")
    assert isinstance(result.result[0], ImageResultContent)
    assert result.to_text() == "[image]"
    mixed = result_from_value("m", ["a", Image.from_bytes(PNG)])
    assert [type(p).__name__ for p in mixed.result] == ["TextResultContent", "ImageResultContent"]


def test_result_text_of_every_part() -> None:
    result = ToolResult(
        name="t",
        result=[
            TextResultContent(content="a"),
            AudioResultContent(data=b"x", mime_type="audio/wav"),
            ResourceResultContent(uri="file:///x", text="inline"),
            ResourceResultContent(uri="file:///y"),
        ],
    )
    assert result.to_text() == "a\n[audio audio/wav]\ninline\n[resource file:///y]"
    assert ToolResult.model_validate_json(result.model_dump_json()) == result


def test_function_tools_cannot_be_dumped() -> None:
    with pytest.raises(Exception, match="cannot be dumped"):
        _bench().dump_component()


async def test_close_tools_closes_owned_tools() -> None:
    closed: list[str] = []

    class Closable(FunctionTool):
        async def close(self) -> None:
            closed.append(self.name)

    owned = StaticWorkbench([Closable(add)], close_tools=True)
    async with owned:
        assert (await owned.call_tool("add", {"a": 1, "b": 2})).to_text() == "3"
    assert closed == ["add"]
    shared = StaticWorkbench([Closable(add)])
    async with shared:
        pass
    assert closed == ["add"]


def test_static_workbench_is_a_registered_component() -> None:
    from ext.core import registered_components

    assert registered_components().get("ext.core.StaticWorkbench") == "ext.core:StaticWorkbench"


async def test_a_tools_own_timeout_is_not_rewritten() -> None:
    async def times_out() -> str:
        """Raises its own TimeoutError."""
        raise TimeoutError("upstream took too long")

    bench = StaticWorkbench([FunctionTool(times_out)])

    class Raising(StaticWorkbench):
        async def _call_tool(self, name, arguments, cancellation_token, call_id):  # type: ignore[no-untyped-def]
            raise TimeoutError("transport timeout")

    raising = Raising([FunctionTool(times_out)])
    with pytest.raises(TimeoutError, match="transport timeout"):
        await raising.call_tool("times_out")
    with pytest.raises(TimeoutError, match="transport timeout"):
        await raising.call_tool("times_out", timeout=5)
    result = await bench.call_tool("times_out", timeout=5)
    assert result.is_error and "upstream took too long" in result.to_text()
