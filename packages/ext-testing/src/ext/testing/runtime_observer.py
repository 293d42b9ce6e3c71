"""`RecordingObserver`: a `RuntimeObserver` with no tracing library behind it, for a runtime's tests. It records a
`RecordedSpan` per send and per handling: a send starts a trace of its own, a handling continues the message's.
`ext.testing.conformance.RuntimeConformance` checks a runtime's trace-context propagation with it."""

from __future__ import annotations

import asyncio
import itertools
from dataclasses import dataclass, field

from ext.core import MessageContext, SendInfo, TraceContext

__all__ = ["RecordedSpan", "RecordingObserver"]


@dataclass
class RecordedSpan:
    """One send or handling a `RecordingObserver` saw, and how it ended."""

    operation: str  # "send", "rpc", "broadcast", "publish" or "process"
    agent_id: str  # the recipient (the agent type for a broadcast, the topic type for a publish)
    parent: TraceContext | None
    trace: TraceContext
    ended: bool = False
    error: BaseException | None = None
    response: TraceContext | None = None
    on_end: asyncio.Event = field(default_factory=asyncio.Event, repr=False)

    def end(self, error: BaseException | None = None, response: TraceContext | None = None) -> None:
        assert not self.ended, f"{self.operation} {self.agent_id} ended twice"
        self.ended, self.error, self.response = True, error, response
        self.on_end.set()


class RecordingObserver:
    """A `RuntimeObserver` that records spans: a send starts a trace of its own (`trace_id`), a handling continues
    the message's (a new span id under the same trace id)."""

    def __init__(self, trace_id: str = "4bf92f3577b34da6a3ce929d0e0e4736") -> None:
        self.trace_id = trace_id
        self.spans: list[RecordedSpan] = []
        self._ids = itertools.count(1)
        self._ended = asyncio.Event()

    async def handled(self, count: int) -> list[RecordedSpan]:
        """The handlings, once `count` of them have ended (an event per end: no polling)."""
        while sum(1 for s in self.of("process") if s.ended) < count:
            await self._ended.wait()
            self._ended.clear()
        return self.of("process")

    def _context(self, trace_id: str) -> TraceContext:
        return TraceContext(f"00-{trace_id}-{next(self._ids):016x}-01", "ext=conformance")

    def on_send(self, info: SendInfo) -> RecordedSpan:
        target = str(info.recipient) if info.recipient is not None else info.agent_type
        span = RecordedSpan(info.kind, target, None, self._context(self.trace_id), on_end=self._ended)
        self.spans.append(span)
        return span

    def on_process(self, ctx: MessageContext) -> RecordedSpan:
        trace_id = ctx.trace.traceparent.split("-")[1] if ctx.trace is not None else "0" * 31 + "1"
        span = RecordedSpan("process", str(ctx.recipient), ctx.trace, self._context(trace_id), on_end=self._ended)
        self.spans.append(span)
        return span

    def of(self, operation: str) -> list[RecordedSpan]:
        return [s for s in self.spans if s.operation == operation]
