"""The README's example, run as written, then served and called by ext's MCP client."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hosting_mcp_support import serving

from ext.testing.readme import python_example
from ext.tools.mcp import McpWorkbench, StreamableHttpServerParams

README = Path(__file__).resolve().parents[1] / "README.md"


async def test_the_readme_example_serves_its_tool_under_the_override() -> None:
    namespace: dict[str, Any] = {}
    exec(compile(python_example(README, "streamable_http_app(server)"), str(README), "exec"), namespace)
    async with serving(namespace["app"]) as url, McpWorkbench(StreamableHttpServerParams(url=url)) as workbench:
        [tool] = await workbench.list_tools()
        assert (tool["name"], tool["description"]) == ("sum", "Sum of two integers.")
        result = await workbench.call_tool("sum", {"a": 40, "b": 2})
        assert result.to_text() == "42"
        [resource] = await workbench.list_resources()
        assert str(resource.uri) == "notes://readme"
