"""`ext mcp tools|call|resources|prompts SERVER`: inspect any MCP server (a command line or a URL)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from ._errors import CliError
from ._output import Output
from ._tools import mcp_workbench


def parse_arguments(pairs: Sequence[str], raw_json: str | None) -> dict[str, Any]:
    """Tool or prompt arguments: `--json '{...}'`, and/or `key=value` pairs (values read as JSON when they parse)."""
    arguments: dict[str, Any] = {}
    if raw_json is not None:
        try:
            loaded = json.loads(raw_json)
        except json.JSONDecodeError as exc:
            raise CliError(f"--json: not valid JSON: {exc.msg}") from None
        if not isinstance(loaded, dict):
            raise CliError(f"--json: expected a JSON object, got {type(loaded).__name__}")
        arguments.update(loaded)
    for pair in pairs:
        key, sep, raw = pair.partition("=")
        if not sep or not key:
            raise CliError(f"expected key=value, got {pair!r}")
        try:
            arguments[key] = json.loads(raw)
        except json.JSONDecodeError:
            arguments[key] = raw
    return arguments


async def list_tools(server: str, out: Output) -> None:
    async with mcp_workbench(server) as workbench:
        tools = await workbench.list_tools()
    for tool in tools:
        out.answer(f"{tool['name']}: {_first_line(tool.get('description', ''))}\n")
        params = tool.get("parameters") or {}
        required = set(params.get("required", []))
        for name, schema in (params.get("properties") or {}).items():
            kind = schema.get("type", "any") if isinstance(schema, Mapping) else "any"
            mark = "" if name in required else "?"
            out.answer(f"    {name}{mark}: {kind}\n")


async def call_tool(server: str, tool: str, arguments: dict[str, Any], out: Output) -> int:
    async with mcp_workbench(server) as workbench:
        result = await workbench.call_tool(tool, arguments)
    out.answer(result.to_text())
    out.end_answer()
    if result.is_error:
        out.info(f"the tool {tool!r} returned an error", style="red")
        return 1
    return 0


async def list_resources(server: str, read: str | None, out: Output) -> None:
    from ext.tools.mcp import McpWorkbench

    async with mcp_workbench(server) as workbench:
        assert isinstance(workbench, McpWorkbench)
        if read is not None:
            for part in await workbench.read_resource(read):
                out.answer(
                    part.text if part.text is not None else f"[{part.mime_type or 'binary'} resource {part.uri}]"
                )
                out.end_answer()
            return
        for resource in await workbench.list_resources():
            description = f": {_first_line(resource.description)}" if resource.description else ""
            out.answer(f"{resource.uri}  {resource.name}{description}\n")


async def list_prompts(server: str, get: str | None, arguments: dict[str, Any], out: Output) -> None:
    from ext.tools.mcp import McpWorkbench

    async with mcp_workbench(server) as workbench:
        assert isinstance(workbench, McpWorkbench)
        if get is not None:
            prompt = await workbench.get_prompt(get, {k: str(v) for k, v in arguments.items()})
            for message in prompt.messages:
                out.answer(f"[{message.type}] {getattr(message, 'content', '')}\n")
            return
        for item in await workbench.list_prompts():
            args = ", ".join(f"{a.name}{'' if a.required else '?'}" for a in item.arguments or [])
            description = f": {_first_line(item.description)}" if item.description else ""
            out.answer(f"{item.name}({args}){description}\n")


def _first_line(text: str | None) -> str:
    return (text or "").strip().split("\n")[0]
