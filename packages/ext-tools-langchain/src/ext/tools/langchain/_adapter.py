"""`LangChainToolAdapter`: a langchain-core tool as an ext tool."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterable, Mapping
from typing import Any

from langchain_core.messages import ToolMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool as LangChainBaseTool
from langchain_core.tools import BaseToolkit
from langchain_core.utils.function_calling import convert_to_openai_function
from pydantic import BaseModel, ValidationError

from ext.core import (
    CancellationToken,
    ComponentError,
    ConfigurationError,
    ExtError,
    Image,
    SchemaTool,
    ToolArgumentsError,
    ToolSchema,
    check_tool_name,
    normalize_parameters,
    run_cancellable,
    value_as_string,
)


class LangChainToolError(ExtError):
    """A LangChain tool reported a handled error (its `handle_tool_error` or `handle_validation_error`
    turned an exception into a message). The message is what the tool's handler produced, so a
    workbench shows the model exactly that text, marked as an error."""


class LangChainToolAdapter(SchemaTool[BaseModel]):
    """Any langchain-core tool (`@tool` functions and coroutines, `StructuredTool`, `Tool`, `BaseTool`
    subclasses) as an ext tool.

    The schema is the one LangChain itself sends to models (`convert_to_openai_function`: injected
    arguments left out, `$ref`s inlined). A call goes through the tool's `ainvoke` with a full tool call
    (`{"type": "tool_call", "id": call_id, ...}`), so callbacks, `handle_tool_error`,
    `handle_validation_error`, `InjectedToolCallId` and `response_format` behave as in LangChain. Sync
    tools run in LangChain's executor, off the event loop.

    `name` and `description` override the tool's own (a LangChain name that providers reject, such as
    one with spaces, needs `name=`). `config` is a `RunnableConfig` (callbacks, tags, metadata...)
    passed on every call.
    """

    def __init__(
        self,
        langchain_tool: LangChainBaseTool,
        *,
        name: str | None = None,
        description: str | None = None,
        config: RunnableConfig | None = None,
    ) -> None:
        if not isinstance(langchain_tool, LangChainBaseTool):
            raise ConfigurationError(
                f"langchain_tool must be a langchain_core.tools.BaseTool, got {type(langchain_tool).__name__}; "
                "wrap plain functions with langchain_core.tools.tool or use ext.core.FunctionTool"
            )
        tool_name = name if name is not None else langchain_tool.name
        try:
            self._name = check_tool_name(tool_name)
        except ConfigurationError as exc:
            hint = "" if name is not None else "; pass name= to present it under a valid name"
            raise ConfigurationError(f"LangChainToolAdapter: {exc}{hint}") from None
        if description is not None and not isinstance(description, str):
            raise ConfigurationError(f"description must be a string, got {type(description).__name__}")
        self._tool = langchain_tool
        self._config = config
        try:
            function = convert_to_openai_function(langchain_tool)
        except Exception as exc:  # a schema pydantic cannot render; LangChain raises several types
            raise ConfigurationError(
                f"LangChainToolAdapter: the argument schema of tool {langchain_tool.name!r} cannot be converted "
                f"to JSON Schema: {exc}"
            ) from exc
        self._description = description if description is not None else str(function.get("description") or "")
        parameters = normalize_parameters(function.get("parameters"))
        self._schema: ToolSchema = {"name": self._name, "description": self._description, "parameters": parameters}
        required = parameters.get("required")
        # LangChain validates pydantic argument schemas itself; a JSON-schema one it passes through unchecked.
        self._required: tuple[str, ...] = (
            tuple(required) if isinstance(langchain_tool.args_schema, dict) and isinstance(required, list) else ()
        )

    @property
    def langchain_tool(self) -> LangChainBaseTool:
        """The wrapped tool."""
        return self._tool

    async def run_json(
        self, args: Mapping[str, Any], cancellation_token: CancellationToken | None = None, call_id: str | None = None
    ) -> Any:
        """Run the tool through `ainvoke`. Returns the tool message's content: a string, or a list of
        strings and `Image`s for multi-part content."""
        self._check_args_object(args)
        missing = [key for key in self._required if key not in args]
        if missing:
            raise ToolArgumentsError(
                f"invalid arguments for tool {self._name!r}: missing required argument "
                + ", ".join(repr(m) for m in missing)
            )
        tool_call = {
            "type": "tool_call",
            "name": self._tool.name,
            "args": dict(args),
            "id": call_id or f"call_{uuid.uuid4().hex}",
        }
        try:
            output = await run_cancellable(self._tool.ainvoke(tool_call, self._config), cancellation_token)
        except ValidationError as exc:  # not handled by the tool: its pydantic args_schema rejected the call
            raise ToolArgumentsError(_validation_message(self._name, exc)) from None
        if isinstance(output, ToolMessage):
            content = _content(output.content)
            if output.status == "error":
                raise LangChainToolError(value_as_string(content))
            return content
        # Tools returning LangChain-specific outputs (a `Command`, several tool messages) pass through.
        return output

    def return_value_as_string(self, value: Any) -> str:
        if isinstance(value, list) and all(isinstance(v, (str, Image)) for v in value):
            return "\n".join(v if isinstance(v, str) else "[image]" for v in value)
        return value_as_string(value)

    def _to_config(self) -> BaseModel:
        raise ComponentError(
            "LangChainToolAdapter wraps a LangChain tool (arbitrary Python code) and cannot be dumped to a config; "
            "build it in code"
        )

    def __repr__(self) -> str:
        return f"LangChainToolAdapter(name={self._name!r}, tool={type(self._tool).__name__})"


def adapt_toolkit(toolkit_or_tools: BaseToolkit | Iterable[LangChainBaseTool]) -> list[LangChainToolAdapter]:
    """Wrap every tool of a LangChain toolkit (or of a list of tools), one adapter per tool."""
    tools = toolkit_or_tools.get_tools() if isinstance(toolkit_or_tools, BaseToolkit) else list(toolkit_or_tools)
    return [LangChainToolAdapter(tool) for tool in tools]


def _content(content: Any) -> Any:
    """A ToolMessage's content for ext: a string stays one; content blocks become strings and images."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return content
    parts: list[str | Image] = []
    for block in content:
        if isinstance(block, str):
            parts.append(block)
            continue
        image = _image(block) if isinstance(block, dict) else None
        if image is not None:
            parts.append(image)
        elif isinstance(block, dict) and block.get("type") == "text" and isinstance(block.get("text"), str):
            parts.append(block["text"])
        else:
            parts.append(json.dumps(block, ensure_ascii=False, default=str))
    return parts


def _image(block: dict[str, Any]) -> Image | None:
    kind = block.get("type")
    try:
        if kind == "image":
            data = block.get("base64") or (block.get("data") if block.get("source_type") == "base64" else None)
            if isinstance(data, str):
                return Image.from_base64(data, block.get("mime_type"))
            url = block.get("url")
            if isinstance(url, str) and url.startswith("data:"):
                return Image.from_data_uri(url)
        if kind == "image_url":
            url = block.get("image_url")
            url = url.get("url") if isinstance(url, dict) else url
            if isinstance(url, str) and url.startswith("data:"):
                return Image.from_data_uri(url)
    except (ValueError, TypeError):
        return None
    return None


def _validation_message(tool: str, exc: ValidationError) -> str:
    parts = [
        f"argument {'.'.join(str(p) for p in err['loc'])!r}: {err['msg']}" if err["loc"] else err["msg"]
        for err in exc.errors(include_input=False, include_url=False)
    ]
    return f"invalid arguments for tool {tool!r}: " + "; ".join(parts)
