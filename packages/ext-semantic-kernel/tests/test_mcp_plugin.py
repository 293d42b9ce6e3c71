"""MCP in a kernel environment: ext's McpWorkbench needs mcp 2, which cannot install here (semantic-kernel pins
mcp<2), so an MCP server reaches ext through the kernel's own MCP plugin (mcp 1.x) and `kernel_tools`."""

from __future__ import annotations

import sys
from pathlib import Path

from semantic_kernel import Kernel
from semantic_kernel.connectors.mcp import MCPStdioPlugin

from ext.semantic_kernel import kernel_tools

SERVER = Path(__file__).with_name("mcp1_server.py")


async def test_an_mcp_server_through_the_kernels_mcp_plugin_as_ext_tools() -> None:
    kernel = Kernel()
    async with MCPStdioPlugin(name="notes", command=sys.executable, args=[str(SERVER)]) as plugin:
        kernel.add_plugin(plugin)
        tools = kernel_tools(kernel)
        assert [t.name for t in tools] == ["notes-shout"]
        assert tools[0].schema["parameters"]["properties"]["text"]["type"] == "string"
        value = await tools[0].run_json({"text": "hello"})
        assert "HELLO" in tools[0].return_value_as_string(value)
