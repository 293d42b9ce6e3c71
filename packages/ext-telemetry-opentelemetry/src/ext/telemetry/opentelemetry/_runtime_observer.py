"""`OpenTelemetryRuntimeObserver`: spans for an agent runtime's messages, after the OpenTelemetry messaging and
GenAI agent semantic conventions, joined into one trace by the W3C context each message carries."""

from __future__ import annotations

import asyncio

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.trace import Span, SpanKind, Status, StatusCode
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from ext.core import MessageContext, SendInfo, TraceContext

from . import _semconv as sc
from .__about__ import __version__
from ._middleware import CANCELLED, INSTRUMENTATION_NAME

__all__ = ["MESSAGING_SYSTEM", "OpenTelemetryRuntimeObserver"]

MESSAGING_SYSTEM = "ext"
"""`messaging.system` of the runtime spans."""

# The W3C Trace Context propagator itself, not the global one: the message's fields are W3C by contract, whatever
# propagators the application configured for HTTP.
_W3C = TraceContextTextMapPropagator()


class _RuntimeSpan:
    """A `MessageSpan`: the OpenTelemetry span, the context it hands the runtime, and (for a handling) the token
    that made it current."""

    __slots__ = ("_span", "_token", "trace")

    def __init__(self, span: Span, token: object | None) -> None:
        self._span = span
        self._token = token
        carrier: dict[str, str] = {}
        _W3C.inject(carrier, context=trace.set_span_in_context(span))
        self.trace = TraceContext.parse(carrier.get("traceparent", ""), carrier.get("tracestate", ""))

    def end(self, error: BaseException | None = None, response: TraceContext | None = None) -> None:
        span = self._span
        if response is not None:
            # The answer's context (the handler's span): linked, since it is a child of this span, not its parent.
            answered = trace.get_current_span(_extract(response)).get_span_context()
            if answered.is_valid:
                span.add_link(answered)
        if error is not None:
            error_type = CANCELLED if isinstance(error, asyncio.CancelledError) else type(error).__qualname__
            span.set_attribute(sc.ERROR_TYPE, error_type)
            span.set_status(Status(StatusCode.ERROR, str(error) or error_type))
            if error_type != CANCELLED:
                span.record_exception(error)
        if self._token is not None:
            otel_context.detach(self._token)  # type: ignore[arg-type]
            self._token = None
        span.end()


class OpenTelemetryRuntimeObserver:
    """A `RuntimeObserver` that records a span per message sent and per message handled, on `opentelemetry-api`.

    - `send {agent type}`: kind PRODUCER for a one-way send, broadcast or publish (for a publish, the name and
      `messaging.destination.name` carry the topic type; ends once the message is accepted),
      CLIENT for an RPC (ends with its answer, linked to the handler's span the answer's context names);
      `messaging.operation.type=send`, `messaging.operation.name` = `send` / `rpc` / `broadcast` / `publish`.
    - `process {agent type}`: kind CONSUMER for a one-way message, SERVER for an RPC; its parent is the sender's
      span (the context the message carried; a new trace when it carried none), and it is the current span while
      the handler runs, so the spans of what the handler does (an `OpenTelemetryMiddleware`'s `chat` and
      `execute_tool` spans, further sends) join the trace. `messaging.operation.type=process`.

    Both carry `messaging.system=ext`, `messaging.destination.name` (the agent type), `messaging.message.id` (when
    known), `gen_ai.agent.name` (the agent type) and `gen_ai.agent.id` (the agent id); a failure sets status ERROR
    and `error.type`. Pass it as `observer=` to `LocalAgentRuntime` or `GrpcAgentRuntime`; leave out
    `tracer_provider` to use the global provider.
    """

    def __init__(self, *, tracer_provider: trace.TracerProvider | None = None) -> None:
        self._tracer = trace.get_tracer(INSTRUMENTATION_NAME, __version__, tracer_provider=tracer_provider)

    def __repr__(self) -> str:
        return "OpenTelemetryRuntimeObserver()"

    def on_send(self, info: SendInfo) -> _RuntimeSpan:
        attributes: dict[str, str] = {
            sc.MESSAGING_SYSTEM: MESSAGING_SYSTEM,
            sc.MESSAGING_OPERATION_TYPE: sc.SEND,
            sc.MESSAGING_OPERATION_NAME: info.kind,
            sc.MESSAGING_DESTINATION_NAME: info.agent_type,
            sc.AGENT_NAME: info.agent_type,
        }
        if info.recipient is not None:
            attributes[sc.AGENT_ID] = str(info.recipient)
        if info.message_id:
            attributes[sc.MESSAGING_MESSAGE_ID] = info.message_id
        kind = SpanKind.CLIENT if info.kind == "rpc" else SpanKind.PRODUCER
        span = self._tracer.start_span(f"send {info.agent_type}", kind=kind, attributes=attributes)
        return _RuntimeSpan(span, None)

    def on_process(self, ctx: MessageContext) -> _RuntimeSpan:
        agent_type = ctx.recipient.type
        attributes: dict[str, str] = {
            sc.MESSAGING_SYSTEM: MESSAGING_SYSTEM,
            sc.MESSAGING_OPERATION_TYPE: sc.PROCESS,
            sc.MESSAGING_OPERATION_NAME: sc.PROCESS,
            sc.MESSAGING_DESTINATION_NAME: agent_type,
            sc.MESSAGING_MESSAGE_ID: ctx.message_id,
            sc.AGENT_NAME: agent_type,
            sc.AGENT_ID: str(ctx.recipient),
        }
        # The message's context, never the task's: a runtime's consumer task keeps whatever context it was
        # created in, which belongs to an earlier message.
        parent = _extract(ctx.trace) if ctx.trace is not None else Context()
        kind = SpanKind.SERVER if ctx.is_rpc else SpanKind.CONSUMER
        span = self._tracer.start_span(f"process {agent_type}", context=parent, kind=kind, attributes=attributes)
        token = otel_context.attach(trace.set_span_in_context(span, parent))
        return _RuntimeSpan(span, token)


def _extract(trace_context: TraceContext) -> Context:
    carrier = {"traceparent": trace_context.traceparent}
    if trace_context.tracestate:
        carrier["tracestate"] = trace_context.tracestate
    return _W3C.extract(carrier, context=Context())
