"""What a served tool can ask of the MCP client while it runs: progress, log messages, sampling (the client's
model answers a prompt), elicitation (the client's user fills a form), and closing its SSE stream so the client
polls for the rest (SEP-1699).

ext tools take no MCP-specific argument (`run_json(args, cancellation_token, call_id)`), so the server puts the
call's context in a context variable for the duration of the call: a tool (or a `ToolLoop.on_event` callback the
tool triggers) reaches it with `current_context()`. Outside a served call it is None, so the same tool still runs
under a plain ext tool loop.

Sampling and elicitation are server-to-client requests: they need a back-channel, which the handshake protocol
revisions (2025-06-18, 2025-11-25 over stdio or a stateful streamable-HTTP session) have and the stateless 2026
revision has not. Without one, or when the client did not declare the capability, `sample` and `elicit` raise
`ClientCapabilityError` before anything is sent.
"""

from __future__ import annotations

import contextvars
import warnings
from collections.abc import Mapping
from typing import Any, Literal

import mcp_types as types
from mcp.server.context import ServerRequestContext
from mcp.shared.exceptions import MCPDeprecationWarning

from ext.core import ExtError

__all__ = ["ClientCapabilityError", "ToolContext", "current_context"]

LogLevel = Literal["debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"]


class ClientCapabilityError(ExtError):
    """The client cannot do what a served tool asked (sampling or elicitation not declared, no back-channel)."""


class ToolContext:
    """The MCP side of one served tool call. Get it with `current_context()` inside the call."""

    __slots__ = ("_ctx", "_steps", "_tool")

    def __init__(self, ctx: ServerRequestContext[Any, Any], tool: str) -> None:
        self._ctx = ctx
        self._tool = tool
        self._steps = 0

    @property
    def tool(self) -> str:
        """The tool's name as the client called it."""
        return self._tool

    @property
    def protocol_version(self) -> str:
        return self._ctx.protocol_version

    @property
    def progress_token(self) -> str | int | None:
        """The token the client asked progress for (None: it asked for none; `progress` is then a no-op)."""
        meta = self._ctx.meta
        token = None if meta is None else meta.get("progress_token", meta.get("progressToken"))
        return token if isinstance(token, (str, int)) else None

    async def progress(self, progress: float, total: float | None = None, message: str | None = None) -> None:
        """Send `notifications/progress` for this call (nothing when the client gave no progress token)."""
        await self._ctx.session.report_progress(progress, total, message)

    async def step(self, message: str) -> None:
        """Progress without a known total: each call counts one step further (progress must only grow)."""
        self._steps += 1
        await self.progress(self._steps, None, message)

    async def log(self, level: LogLevel, data: Any, logger: str | None = None) -> None:
        """Send a `notifications/message` log entry on this call's stream."""
        await self._ctx.session.send_log_message(level, data, logger, related_request_id=self._ctx.request_id)

    def _require(self, capability: types.ClientCapabilities, what: str) -> None:
        session = self._ctx.session
        if not session.can_send_request:
            raise ClientCapabilityError(
                f"{what} needs a back-channel to the client; this connection (protocol "
                f"{self._ctx.protocol_version}) has none: use stdio or a stateful streamable-HTTP session"
            )
        if not session.check_client_capability(capability):
            raise ClientCapabilityError(f"the client did not declare the {what} capability")

    async def sample(
        self,
        prompt: str | list[types.SamplingMessage],
        *,
        max_tokens: int = 256,
        system_prompt: str | None = None,
        temperature: float | None = None,
    ) -> types.CreateMessageResult:
        """Ask the client's model (`sampling/createMessage`); a plain string is one user message."""
        self._require(types.ClientCapabilities(sampling=types.SamplingCapability()), "sampling")
        messages = (
            [types.SamplingMessage(role="user", content=types.TextContent(type="text", text=prompt))]
            if isinstance(prompt, str)
            else prompt
        )
        with warnings.catch_warnings():
            warnings.simplefilter(
                "ignore", MCPDeprecationWarning
            )  # deprecated only from 2026-07-28, which has no back-channel
            return await self._ctx.session.create_message(
                messages,
                max_tokens=max_tokens,
                system_prompt=system_prompt,
                temperature=temperature,
                related_request_id=self._ctx.request_id,
            )

    async def elicit(self, message: str, requested_schema: Mapping[str, Any]) -> types.ElicitResult:
        """Ask the client's user to fill a form (`elicitation/create`, form mode) described by a flat JSON Schema."""
        self._require(types.ClientCapabilities(elicitation=types.ElicitationCapability()), "elicitation")
        return await self._ctx.session.elicit_form(
            message, dict(requested_schema), related_request_id=self._ctx.request_id
        )

    async def close_stream(self) -> bool:
        """Close this call's SSE stream; the client reconnects with `Last-Event-ID` and gets the rest from the event
        store (SEP-1699, 2025-11-25 with an event store). False when that is not available on this connection."""
        close = self._ctx.close_sse_stream
        if close is None:
            return False
        await close()
        return True

    def __repr__(self) -> str:
        return f"ToolContext(tool={self._tool!r}, protocol_version={self._ctx.protocol_version!r})"


_CURRENT: contextvars.ContextVar[ToolContext | None] = contextvars.ContextVar("ext_hosting_mcp_context", default=None)


def current_context() -> ToolContext | None:
    """The MCP context of the served tool call running in this task (None outside one)."""
    return _CURRENT.get()


def _enter(context: ToolContext) -> contextvars.Token[ToolContext | None]:
    return _CURRENT.set(context)


def _leave(token: contextvars.Token[ToolContext | None]) -> None:
    _CURRENT.reset(token)
