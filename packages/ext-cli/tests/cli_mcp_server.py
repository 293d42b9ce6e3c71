"""A small MCP server (the mcp SDK's own MCPServer) for the `ext mcp` and `ext chat --mcp` tests, over stdio."""

from __future__ import annotations

from mcp.server.mcpserver import MCPServer

server = MCPServer("cli-test", log_level="WARNING")


@server.tool()
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@server.tool()
def shout(text: str) -> str:
    """Upper-case a text."""
    return text.upper()


@server.resource("note://greeting", name="greeting", description="A greeting note.")
def greeting() -> str:
    return "hello from the resource"


@server.prompt()
def review(topic: str) -> str:
    """Ask for a review of a topic."""
    return f"Please review {topic}."


if __name__ == "__main__":
    server.run("stdio")
