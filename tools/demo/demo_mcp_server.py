"""The demo's MCP server (the mcp SDK's MCPServer over stdio): a clock that knows a few cities.

Run by tools/demo/demo.py through ext's McpWorkbench; not meant to be started by hand.
"""

from __future__ import annotations

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

# Fixed times so the demo (and its test) give the same answer on every run.
CLOCKS = {"paris": "14:05", "tokyo": "21:05", "new york": "08:05", "oslo": "14:05"}

server = MCPServer("ext-demo-clock", log_level="WARNING")


@server.tool()
def local_time(city: str) -> str:
    """The current local time in a city."""
    time = CLOCKS.get(city.strip().lower())
    if time is None:
        raise ToolError(f"no clock for {city}; known cities: {', '.join(sorted(CLOCKS))}")
    return f"The local time in {city.strip().title()} is {time}."


if __name__ == "__main__":
    server.run("stdio")
