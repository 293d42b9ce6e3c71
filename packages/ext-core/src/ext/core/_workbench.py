"""Workbenches: a set of tools behind one start/stop/list/call interface."""

from __future__ import annotations

import asyncio
import logging
from abc import abstractmethod
from collections.abc import Awaitable, Mapping, Sequence
from typing import Any, Literal, Union

from pydantic import BaseModel, ConfigDict, Field, field_validator

from ._cancellation import CancellationToken, run_cancellable
from ._component import Component, ComponentModel, load_component
from ._errors import ConfigurationError, ToolArgumentsError
from ._image import Image
from ._lifecycle import AsyncStartStop
from ._mapping import check_tool_name
from ._tools import Tool, ToolSchema

logger = logging.getLogger(__name__)


class TextResultContent(BaseModel):
    """Text a tool returned."""

    model_config = ConfigDict(defer_build=True)

    type: Literal["TextResultContent"] = "TextResultContent"
    content: str


class ImageResultContent(BaseModel):
    """An image a tool returned."""

    model_config = ConfigDict(defer_build=True)

    type: Literal["ImageResultContent"] = "ImageResultContent"
    content: Image


class AudioResultContent(BaseModel):
    """Audio a tool returned (base64 in JSON)."""

    model_config = ConfigDict(ser_json_bytes="base64", val_json_bytes="base64", defer_build=True)

    type: Literal["AudioResultContent"] = "AudioResultContent"
    data: bytes
    mime_type: str


class ResourceResultContent(BaseModel):
    """A resource a tool returned: embedded (with `text` or `data`) or a link (`uri` only)."""

    model_config = ConfigDict(ser_json_bytes="base64", val_json_bytes="base64", defer_build=True)

    type: Literal["ResourceResultContent"] = "ResourceResultContent"
    uri: str
    name: str | None = None
    mime_type: str | None = None
    text: str | None = None
    data: bytes | None = None


ResultContent = Union[TextResultContent, ImageResultContent, AudioResultContent, ResourceResultContent]


class ToolResult(BaseModel):
    """What a workbench tool call gave back. `is_error` marks a failed call the model should see."""

    model_config = ConfigDict(defer_build=True)

    type: Literal["ToolResult"] = "ToolResult"
    name: str
    result: list[ResultContent] = Field(default_factory=list)
    is_error: bool = False
    structured_content: Any = None

    def to_text(self, image_placeholder: str = "[image]") -> str:
        """The result as text for a model: text parts joined, other parts named."""
        parts: list[str] = []
        for item in self.result:
            if isinstance(item, TextResultContent):
                parts.append(item.content)
            elif isinstance(item, ImageResultContent):
                parts.append(image_placeholder)
            elif isinstance(item, AudioResultContent):
                parts.append(f"[audio {item.mime_type}]")
            elif item.text is not None:
                parts.append(item.text)
            else:
                parts.append(f"[resource {item.uri}]")
        return "\n".join(parts)


class ToolOverride(BaseModel):
    """Present a tool under another name and/or description."""

    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)

    name: str | None = None
    description: str | None = None

    @field_validator("name")
    @classmethod
    def _valid_name(cls, value: str | None) -> str | None:
        return None if value is None else check_tool_name(value)


class ToolOverrides:
    """A validated mapping of original tool name -> `ToolOverride`.

    Two overrides presenting the same name are an error at construction; an override whose new name
    equals another tool's original name is an error when the tool list is known (`check_names`).
    """

    __slots__ = ("_by_new", "_overrides")

    def __init__(self, overrides: Mapping[str, ToolOverride | Mapping[str, Any]] | None = None) -> None:
        parsed: dict[str, ToolOverride] = {}
        for original, value in (overrides or {}).items():
            parsed[original] = value if isinstance(value, ToolOverride) else ToolOverride.model_validate(value)
        by_new: dict[str, str] = {}
        for original, override in parsed.items():
            new = override.name or original
            if new in by_new:
                raise ConfigurationError(
                    f"tool_overrides: {original!r} and {by_new[new]!r} would both be presented as {new!r}"
                )
            by_new[new] = original
        self._overrides = parsed
        self._by_new = by_new

    def __bool__(self) -> bool:
        return bool(self._overrides)

    def items(self) -> list[tuple[str, ToolOverride]]:
        return list(self._overrides.items())

    def apply(self, schema: ToolSchema) -> ToolSchema:
        """The schema as presented: the override's name and description where set."""
        override = self._overrides.get(schema["name"])
        if override is None:
            return schema
        out: ToolSchema = {**schema}
        if override.name:
            out["name"] = override.name
        if override.description is not None:
            out["description"] = override.description
        return out

    def original_name(self, presented: str) -> str:
        """The tool a presented name reaches (overridden originals are hidden)."""
        original = self._by_new.get(presented)
        if original is not None:
            return original
        if presented in self._overrides and self._overrides[presented].name not in (None, presented):
            raise KeyError(presented)
        return presented

    def check_names(self, originals: Sequence[str]) -> None:
        """Raise if an override's new name collides with another tool that is not renamed."""
        renamed = set(self._overrides)
        for new, original in self._by_new.items():
            if new != original and new in originals and new not in renamed:
                raise ConfigurationError(
                    f"tool_overrides: {original!r} renamed to {new!r} clashes with an existing tool of that name"
                )


class Workbench(AsyncStartStop, Component[BaseModel]):
    """A set of tools behind one interface, with a lifetime (`start`/`stop` or `async with`).

    `call_tool` handles name overrides, per-call timeouts and cancellation once for every workbench;
    subclasses implement `_list_tools` and `_call_tool`. A tool that fails gives a `ToolResult` with
    `is_error=True`; a timeout raises `TimeoutError` unless `timeout_as_error=True`; a cancelled token
    raises `asyncio.CancelledError`.
    """

    component_type = "workbench"

    def __init__(self, tool_overrides: Mapping[str, ToolOverride | Mapping[str, Any]] | None = None) -> None:
        self._overrides = ToolOverrides(tool_overrides)

    @property
    def tool_overrides(self) -> ToolOverrides:
        return self._overrides

    async def start(self) -> None:
        """Start (connect, spawn). Idempotent."""

    async def stop(self) -> None:
        """Stop and release resources. Idempotent."""

    async def reset(self) -> None:
        """Return to the freshly started state."""
        await self.stop()
        await self.start()

    async def list_tools(self) -> list[ToolSchema]:
        """The tools as a model should see them (overrides applied)."""
        schemas = await self._list_tools()
        if not self._overrides:
            return schemas
        self._overrides.check_names([s["name"] for s in schemas])
        return [self._overrides.apply(s) for s in schemas]

    async def call_tool(
        self,
        name: str,
        arguments: Mapping[str, Any] | None = None,
        cancellation_token: CancellationToken | None = None,
        *,
        call_id: str | None = None,
        timeout: float | None = None,
        timeout_as_error: bool = False,
    ) -> ToolResult:
        """Call a tool by its presented name."""
        if arguments is not None and type(arguments) is not dict and not isinstance(arguments, Mapping):
            raise ToolArgumentsError(f"arguments for tool {name!r} must be a mapping, got {type(arguments).__name__}")
        if timeout is not None and timeout <= 0:
            raise ConfigurationError(f"timeout must be > 0 seconds, got {timeout}")
        try:
            original = self._overrides.original_name(name)
        except KeyError:
            return ToolResult(name=name, result=[TextResultContent(content=f"unknown tool {name!r}")], is_error=True)
        work = self._call_tool(original, dict(arguments or {}), cancellation_token, call_id)
        if timeout is None:
            # Without a token or timeout the work is awaited here, with no wrapper in between.
            result = await work if cancellation_token is None else await run_cancellable(work, cancellation_token)
        else:
            try:
                result = await run_cancellable(asyncio.wait_for(_own_timeouts(work), timeout), cancellation_token)
            except asyncio.TimeoutError:  # builtin TimeoutError on 3.11+, distinct on 3.10
                message = f"tool {name!r} did not finish within {timeout} s"
                if timeout_as_error:
                    return ToolResult(name=name, result=[TextResultContent(content=message)], is_error=True)
                raise TimeoutError(message) from None
            except _InnerTimeout as inner:
                raise inner.error from None
        if result.name != name:
            result = result.model_copy(update={"name": name})
        return result

    @abstractmethod
    async def _list_tools(self) -> list[ToolSchema]:
        """The tools under their original names."""

    @abstractmethod
    async def _call_tool(
        self, name: str, arguments: dict[str, Any], cancellation_token: CancellationToken | None, call_id: str | None
    ) -> ToolResult:
        """Call the tool with its original name."""


class _InnerTimeout(Exception):
    """Carries a TimeoutError raised by the tool itself past the workbench's own deadline handling."""

    def __init__(self, error: BaseException) -> None:
        super().__init__(str(error))
        self.error = error


async def _own_timeouts(work: Awaitable[ToolResult]) -> ToolResult:
    try:
        return await work
    except asyncio.TimeoutError as exc:
        raise _InnerTimeout(exc) from exc


def result_from_value(name: str, value: Any, tool: Tool | None = None) -> ToolResult:
    """A `ToolResult` from a plain tool's return value (images stay images)."""
    if isinstance(value, ToolResult):
        return value
    if isinstance(value, Image):
        return ToolResult(name=name, result=[ImageResultContent(content=value)])
    if isinstance(value, list) and value and all(isinstance(v, (str, Image)) for v in value):
        return ToolResult(
            name=name,
            result=[
                ImageResultContent(content=v) if isinstance(v, Image) else TextResultContent(content=v) for v in value
            ],
        )
    text = tool.return_value_as_string(value) if tool is not None else str(value)
    return ToolResult(name=name, result=[TextResultContent(content=text)])


class StaticWorkbenchConfig(BaseModel):
    """Config of a `StaticWorkbench`: the tools as component dumps, and overrides."""

    model_config = ConfigDict(defer_build=True)

    tools: list[ComponentModel]
    tool_overrides: dict[str, ToolOverride] = Field(default_factory=dict)
    close_tools: bool = False


class StaticWorkbench(Workbench):
    """A workbench over plain `Tool`s. A failing tool gives an error result naming the exception.

    With `close_tools=True` the workbench owns its tools: `stop()` awaits each tool's `close()`
    (for tools holding connections, such as `HttpTool`).
    """

    component_config_schema = StaticWorkbenchConfig
    component_provider_override = "ext.core.StaticWorkbench"

    def __init__(
        self,
        tools: Sequence[Tool],
        tool_overrides: Mapping[str, ToolOverride | Mapping[str, Any]] | None = None,
        *,
        close_tools: bool = False,
    ) -> None:
        super().__init__(tool_overrides)
        self._close_tools = close_tools
        by_name: dict[str, Tool] = {}
        for tool in tools:
            if not isinstance(tool, Tool):
                raise ConfigurationError(f"StaticWorkbench.tools: {tool!r} is not a Tool")
            if tool.name in by_name:
                raise ConfigurationError(f"StaticWorkbench.tools: two tools are named {tool.name!r}")
            by_name[tool.name] = tool
        self._tools = by_name
        self._overrides.check_names(list(by_name))

    async def stop(self) -> None:
        if not self._close_tools:
            return
        for tool in self._tools.values():
            close = getattr(tool, "close", None)
            if close is not None:
                await close()

    async def _list_tools(self) -> list[ToolSchema]:
        return [tool.schema for tool in self._tools.values()]

    async def _call_tool(
        self, name: str, arguments: dict[str, Any], cancellation_token: CancellationToken | None, call_id: str | None
    ) -> ToolResult:
        tool = self._tools.get(name)
        if tool is None:
            return ToolResult(name=name, result=[TextResultContent(content=f"unknown tool {name!r}")], is_error=True)
        try:
            value = await tool.run_json(arguments, cancellation_token, call_id)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # the model sees the failure and can recover
            logger.debug("tool %s failed", name, exc_info=True)
            return ToolResult(
                name=name, result=[TextResultContent(content=f"{type(exc).__name__}: {exc}")], is_error=True
            )
        return result_from_value(name, value, tool)

    def _to_config(self) -> StaticWorkbenchConfig:
        dumps = []
        for tool in self._tools.values():
            dump = getattr(tool, "dump_component", None)
            if dump is None:
                raise ConfigurationError(f"tool {tool.name!r} is not a component and cannot be dumped")
            dumps.append(dump())
        return StaticWorkbenchConfig(
            tools=dumps, tool_overrides=dict(self._overrides.items()), close_tools=self._close_tools
        )

    @classmethod
    def _from_config(cls, config: StaticWorkbenchConfig) -> StaticWorkbench:
        tools: list[Tool] = [load_component(t) for t in config.tools]
        return cls(tools, config.tool_overrides, close_tools=config.close_tools)
