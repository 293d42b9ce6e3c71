"""Errors that name the MCP server they came from.

Each is also an `mcp.MCPError` (with the JSON-RPC `code`), so code written against the mcp SDK
still catches them, and an `ext.core.ExtError`.
"""

from __future__ import annotations

from typing import Any

from mcp.shared.exceptions import MCPError
from mcp.types import CONNECTION_CLOSED, REQUEST_TIMEOUT

from ext.core import ExtError


class McpError(ExtError, MCPError):
    """An MCP request failed. `server` names the server, `code` is the JSON-RPC error code."""

    def __init__(self, server: str, message: str, *, code: int, data: Any = None) -> None:
        MCPError.__init__(self, code, message, data)
        self.server = server

    def __str__(self) -> str:
        return self.message

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild, (type(self), self.server, self.message, self.code, self.data))


def _rebuild(cls: type[McpError], server: str, message: str, code: int, data: Any) -> McpError:
    err = cls.__new__(cls)
    McpError.__init__(err, server, message, code=code, data=data)
    return err


class McpConnectionError(McpError, ConnectionError):
    """The server could not be started or reached, or the connection to it was lost."""

    def __init__(self, server: str, message: str, *, code: int = CONNECTION_CLOSED) -> None:
        super().__init__(server, message, code=code)


class McpTimeoutError(McpError, TimeoutError):
    """The server did not answer in time (start-up or a request other than a tool call)."""

    def __init__(self, server: str, message: str) -> None:
        super().__init__(server, message, code=REQUEST_TIMEOUT)


class McpAuthError(McpConnectionError):
    """Authorization with the server's OAuth authorization server failed (refused, revoked, misconfigured).

    The message names the server and the cause, never a token, code, verifier or client secret."""


class McpNeedsLoginError(McpAuthError):
    """The server needs an interactive OAuth login that this process cannot do (no browser, no terminal, or not
    asked to): run `command` (e.g. `ext mcp login URL`) where a person can complete it, then retry."""

    def __init__(self, server: str, message: str, *, command: str) -> None:
        super().__init__(server, message)
        self.command = command

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild_login, (self.server, self.message, self.command))


def _rebuild_login(server: str, message: str, command: str) -> McpNeedsLoginError:
    return McpNeedsLoginError(server, message, command=command)
