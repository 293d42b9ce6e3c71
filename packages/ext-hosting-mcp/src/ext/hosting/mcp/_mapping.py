"""ext's tool shapes as MCP's, in plain functions (the reverse of ext-tools-mcp's mapping): a `ToolSchema` as an MCP
`Tool`, a `ToolResult` (or a plain tool's return value) as a `CallToolResult`, and the argument check that turns
schema-breaking arguments into a tool error naming the field (SEP-1303: input validation errors are tool execution
errors, so the calling model can correct itself)."""

from __future__ import annotations

import base64
from typing import Any

import jsonschema
import mcp_types as types

from ext.core import (
    AudioResultContent,
    ImageResultContent,
    ResourceResultContent,
    ResultContent,
    TextResultContent,
    ToolResult,
    ToolSchema,
)

__all__ = ["argument_errors", "argument_validator", "call_result", "error_result", "mcp_tool"]

_EMPTY_OBJECT: dict[str, Any] = {"type": "object", "properties": {}}


def mcp_tool(schema: ToolSchema) -> types.Tool:
    """The tool as an MCP client lists it: same name, description and argument schema."""
    parameters = schema.get("parameters") or _EMPTY_OBJECT
    if parameters.get("type") != "object":  # MCP requires an object at the root through 2025-11-25
        parameters = {**_EMPTY_OBJECT, **parameters, "type": "object"}
    return types.Tool(
        name=schema["name"],
        description=schema.get("description"),
        input_schema=parameters,
        output_schema=schema.get("output_schema"),
    )


def _content(item: ResultContent) -> types.ContentBlock:
    if isinstance(item, TextResultContent):
        return types.TextContent(type="text", text=item.content)
    if isinstance(item, ImageResultContent):
        return types.ImageContent(type="image", data=item.content.to_base64(), mime_type=item.content.mime_type)
    if isinstance(item, AudioResultContent):
        return types.AudioContent(
            type="audio", data=base64.b64encode(item.data).decode("ascii"), mime_type=item.mime_type
        )
    return _resource(item)


def _resource(item: ResourceResultContent) -> types.ContentBlock:
    if item.text is not None:
        contents: types.TextResourceContents | types.BlobResourceContents = types.TextResourceContents(
            uri=item.uri, mime_type=item.mime_type, text=item.text
        )
    elif item.data is not None:
        contents = types.BlobResourceContents(
            uri=item.uri, mime_type=item.mime_type, blob=base64.b64encode(item.data).decode("ascii")
        )
    else:
        return types.ResourceLink(
            type="resource_link", uri=item.uri, name=item.name or item.uri, mime_type=item.mime_type
        )
    return types.EmbeddedResource(type="resource", resource=contents)


def call_result(result: ToolResult) -> types.CallToolResult:
    """A workbench's `ToolResult` as the MCP result (content in order, `is_error`, structured content)."""
    structured = result.structured_content
    return types.CallToolResult(
        content=[_content(item) for item in result.result],
        is_error=result.is_error,
        structured_content=structured if isinstance(structured, dict) else None,
    )


def error_result(message: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=message)], is_error=True)


def _where(error: jsonschema.ValidationError) -> str:
    return ".".join(str(p) for p in error.absolute_path) or "<arguments>"


def argument_validator(schema: dict[str, Any]) -> Any:
    """A validator for a tool's argument schema, in the schema's own draft (2020-12 when it names none); None when
    the validator cannot read the schema (the tool then checks its arguments itself). Built once per tool."""
    try:
        cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
        cls.check_schema(schema)
        return cls(schema)
    except jsonschema.SchemaError:
        return None


def argument_errors(tool: str, validator: Any, arguments: dict[str, Any], limit: int = 5) -> str | None:
    """None when `arguments` satisfy the tool's schema, else one message naming each failing field (at most
    `limit`)."""
    if validator is None:
        return None
    errors = []
    for error in validator.iter_errors(arguments):
        errors.append(f"{_where(error)}: {error.message}")
        if len(errors) >= limit:
            break
    if not errors:
        return None
    return f"invalid arguments for tool {tool!r}: " + "; ".join(errors)
