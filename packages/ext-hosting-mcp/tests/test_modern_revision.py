"""The stateless 2026-07-28 revision (the SDK's `Client` default): served without a session by the SDK's own
stateless manager; a tool that asks for sampling gets a clear tool error (that revision has no back-channel)."""

from __future__ import annotations

import mcp_types as types
from hosting_mcp_support import serving
from mcp import Client

from ext.core import FunctionTool
from ext.hosting.mcp import McpServer, current_context, streamable_http_app


async def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


async def ask_model(question: str) -> str:
    """Ask the client's model."""
    context = current_context()
    assert context is not None
    result = await context.sample(question)
    return str(result.content)


async def test_the_stateless_revision_calls_tools_and_refuses_sampling_clearly() -> None:
    server = McpServer([FunctionTool(add), FunctionTool(ask_model)])
    async with serving(streamable_http_app(server)) as url, Client(url) as client:
        assert client.protocol_version not in ("2025-06-18", "2025-11-25")
        result = await client.call_tool("add", {"a": 2, "b": 3})
        assert isinstance(result, types.CallToolResult)
        assert result.content[0].text == "5"  # type: ignore[union-attr]
        refused = await client.call_tool("ask_model", {"question": "hi"})
        assert isinstance(refused, types.CallToolResult) and refused.is_error
        assert "ClientCapabilityError: sampling needs a back-channel" in refused.content[0].text  # type: ignore[union-attr]
