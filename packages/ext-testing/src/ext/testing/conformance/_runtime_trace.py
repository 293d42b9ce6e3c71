"""The trace-context scenarios of `RuntimeConformance`: a runtime's `observer` sees each send and each handling, the
context it gives a message (sent, broadcast or published) reaches the handler (`ctx.trace`) unchanged, on the peer
too, and an RPC's answer brings the handling's context back. `RecordingObserver` is a `RuntimeObserver` with no
tracing library behind it."""

from __future__ import annotations

import asyncio
import itertools
from dataclasses import dataclass, field
from typing import Any

import pytest

from ext.core import AgentId, AgentRuntime, MessageContext, SendInfo, TopicId, TraceContext, TypeSubscription
from ext.testing.conformance._runtime_agents import EchoAgent, Journal, Note, Ping, Pong, _within

__all__ = ["RecordedSpan", "RecordingObserver", "RuntimeTraceScenarios"]


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


class RuntimeTraceScenarios:
    """Trace-context scenarios; `RuntimeConformance` provides `make_runtime` and `make_peer_runtime`."""

    async def make_runtime(self, **options: Any) -> AgentRuntime:
        raise NotImplementedError

    async def make_peer_runtime(self, **options: Any) -> AgentRuntime | None:
        raise NotImplementedError

    async def test_trace_context_reaches_the_handler_and_comes_back(self, journal: Journal) -> None:
        sending, hosting = RecordingObserver(), RecordingObserver()
        runtime = await self.make_runtime(observer=sending)
        peer = await self.make_peer_runtime(observer=hosting)
        if peer is None:
            peer, hosting = runtime, sending
        await _within(runtime.start())
        await _within(peer.start())
        try:
            await _within(peer.register_agent_factory("echo", lambda aid, rt: EchoAgent(aid, rt, journal)))
            reply = await _within(runtime.send_and_await_response(Ping(text="t"), AgentId("echo", "a"), timeout=10))
            assert isinstance(reply, Pong)
            (rpc,) = sending.of("rpc")
            (process,) = await _within(hosting.handled(1))
            # The context reached the handler as sent, and the answer brought the handling's back.
            assert process.parent == rpc.trace
            assert rpc.ended and rpc.error is None and rpc.response == process.trace
            assert process.ended and process.error is None

            await _within(runtime.send_message(Note(text="n"), AgentId("echo", "a")))
            (send,) = sending.of("send")
            one_way = (await _within(hosting.handled(2)))[1]  # a one-way message: handled after send_message returns
            assert send.ended and one_way.parent == send.trace

            await _within(runtime.broadcast(Note(text="b"), "echo"))
            (broadcast,) = sending.of("broadcast")
            reached = (await _within(hosting.handled(3)))[2]
            assert broadcast.ended and broadcast.agent_id == "echo" and reached.parent == broadcast.trace

            await _within(runtime.add_subscription(TypeSubscription("traced", "echo")))
            await _within(runtime.publish(Note(text="p"), TopicId("traced", "fresh")))
            (published,) = sending.of("publish")
            handled = (await _within(hosting.handled(4)))[3]
            assert published.ended and published.agent_id == "traced"  # a publish's span names the topic type
            assert (handled.agent_id, handled.parent) == ("echo/fresh", published.trace)
        finally:
            if peer is not runtime:
                await _within(peer.stop(), 30)
            await _within(runtime.stop(), 30)

    async def test_no_observer_sends_no_trace_context(self, journal: Journal) -> None:
        hosting = RecordingObserver()
        runtime = await self.make_runtime()
        peer = await self.make_peer_runtime(observer=hosting)
        if peer is None:
            pytest.skip("one runtime: with no observer on it, there is nothing to observe")
        await _within(runtime.start())
        await _within(peer.start())
        try:
            await _within(peer.register_agent_factory("echo", lambda aid, rt: EchoAgent(aid, rt, journal)))
            await _within(runtime.send_and_await_response(Ping(text="t"), AgentId("echo", "a"), timeout=10))
            (process,) = hosting.of("process")
            assert process.parent is None  # the handler's ctx.trace
        finally:
            await _within(peer.stop(), 30)
            await _within(runtime.stop(), 30)
