"""Trace context across agent runtimes without a tracing library: a message carries W3C Trace Context strings
(`traceparent`, `tracestate`) from its sender to its handler and, for an RPC, back with the answer; a
`RuntimeObserver` registered on a runtime (ext-telemetry-opentelemetry's `OpenTelemetryRuntimeObserver`) turns
sends and handling into spans and chooses the strings.

Runtimes carry the strings unchanged; they never parse the trace ids themselves."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, Protocol, runtime_checkable

if TYPE_CHECKING:
    from ._agent_id import AgentId
    from ._runtime import MessageContext

__all__ = ["MessageSpan", "RuntimeObserver", "SendInfo", "TraceContext"]

# W3C Trace Context, section 3.2 (https://www.w3.org/TR/trace-context/#traceparent-header): version "00" is
# `00-<32 hex trace id>-<16 hex parent id>-<2 hex flags>`; a later version may append fields after the flags.
# Version ff is invalid, and so are all-zero ids.
_TRACEPARENT = re.compile(r"(?!ff)[0-9a-f]{2}-(?!0{32})[0-9a-f]{32}-(?!0{16})[0-9a-f]{16}-[0-9a-f]{2}(-.*)?")
# Section 3.3.1: at most 32 list members; propagators must pass on at least 512 characters, so no more is kept.
_MAX_TRACESTATE = 512


@dataclass(frozen=True)
class TraceContext:
    """A message's W3C trace context: the `traceparent` and (possibly empty) `tracestate` strings."""

    traceparent: str
    tracestate: str = ""

    @classmethod
    def parse(cls, traceparent: str, tracestate: str = "") -> TraceContext | None:
        """The context of strings read off the wire, or None when `traceparent` is missing or not W3C: as the
        specification says, a receiver ignores an invalid one (and a `tracestate` longer than 512 characters)."""
        if not traceparent or len(traceparent) > 256 or not _TRACEPARENT.fullmatch(traceparent):
            return None
        if traceparent.startswith("00-") and len(traceparent) != 55:
            return None  # version 00 has exactly four fields
        return cls(traceparent, tracestate if len(tracestate) <= _MAX_TRACESTATE else "")


@dataclass(frozen=True)
class SendInfo:
    """What a runtime tells its observer about a message it is sending.

    Attributes:
        kind: "send" (one way), "rpc" (`send_and_await_response`) or "broadcast".
        agent_type: the recipient's agent type (the broadcast's type).
        recipient: the recipient, None for a broadcast.
        sender: the sending agent, None when sent from outside any agent.
        message_id: the message's id as this runtime knows it (empty when it has none yet).
    """

    kind: Literal["send", "rpc", "broadcast"]
    agent_type: str
    recipient: AgentId | None
    sender: AgentId | None
    message_id: str = ""


class MessageSpan(Protocol):
    """One observed send or handling. The runtime reads `trace` and calls `end` exactly once."""

    @property
    def trace(self) -> TraceContext | None:
        """For a send, the context the message carries; for a handling, the context its RPC answer carries."""
        ...

    def end(self, error: BaseException | None = None, response: TraceContext | None = None) -> None:
        """The operation is over: `error` when it failed, `response` the trace context an RPC's answer came with."""
        ...


@runtime_checkable
class RuntimeObserver(Protocol):
    """Watches an agent runtime's messages (pass it as `observer=` to a runtime). Methods must not raise.

    The runtime calls `on_send` in the sending task when a message leaves (the span ends once the message is
    accepted, or, for an RPC, when its answer or error comes), and `on_process` in the task that runs the handler,
    just before it, ending the span just after it in the same task: an observer may make its span the current one
    there, so that what the handler does (model calls, tool calls, further sends) joins the message's trace.
    """

    def on_send(self, info: SendInfo) -> MessageSpan: ...

    def on_process(self, ctx: MessageContext) -> MessageSpan: ...
