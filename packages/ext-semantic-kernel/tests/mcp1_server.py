"""A tiny MCP server over stdio on the mcp 1.x SDK (the one semantic-kernel pins): one tool, `shout`."""

from __future__ import annotations

from mcp.server.fastmcp import FastMCP

server = FastMCP("notes", log_level="WARNING")


@server.tool()
def shout(text: str) -> str:
    """Upper-case a text."""
    return text.upper()


if __name__ == "__main__":
    server.run()
