"""Trace context across agent runtimes without a tracing library: a message carries W3C Trace Context strings
(`traceparent`, `tracestate`) from its sender to its handler and, for an RPC, back with the answer; a
`RuntimeObserver` registered on a runtime (ext-telemetry-opentelemetry's `OpenTelemetryRuntimeObserver`) turns
sends and handling into spans and chooses the strings.

Runtimes carry the strings unchanged; they never parse the trace ids themselves."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, Protocol, runtime_checkable

from ._trace_context import TraceContext

if TYPE_CHECKING:
    from ._agent_id import AgentId
    from ._runtime import MessageContext

__all__ = ["MessageSpan", "RuntimeObserver", "SendInfo"]


@dataclass(frozen=True)
class SendInfo:
    """What a runtime tells its observer about a message it is sending.

    Attributes:
        kind: "send" (one way), "rpc" (`send_and_await_response`), "broadcast" or "publish" (to a topic).
        agent_type: the recipient's agent type (the broadcast's type; for a publish, the topic's type).
        recipient: the recipient, None for a broadcast or a publish.
        sender: the sending agent, None when sent from outside any agent.
        message_id: the message's id as this runtime knows it (empty when it has none yet).
    """

    kind: Literal["send", "rpc", "broadcast", "publish"]
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
