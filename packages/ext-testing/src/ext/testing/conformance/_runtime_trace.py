"""The trace-context scenarios of `RuntimeConformance`: a runtime's `observer` sees each send and each handling, the
context it gives a message (sent, broadcast or published) reaches the handler (`ctx.trace`) unchanged, on the peer
too, and an RPC's answer brings the handling's context back (observed with `ext.testing.runtime_observer`)."""

from __future__ import annotations

from typing import Any

import pytest

from ext.core import AgentId, AgentRuntime, TopicId, TypeSubscription
from ext.testing.conformance._waits import within
from ext.testing.runtime_agents import EchoAgent, Journal, Note, Ping, Pong
from ext.testing.runtime_observer import RecordingObserver

__all__ = ["RuntimeTraceScenarios"]


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
        await within(runtime.start())
        await within(peer.start())
        try:
            await within(peer.register_agent_factory("echo", lambda aid, rt: EchoAgent(aid, rt, journal)))
            reply = await within(runtime.send_and_await_response(Ping(text="t"), AgentId("echo", "a"), timeout=10))
            assert isinstance(reply, Pong)
            (rpc,) = sending.of("rpc")
            (process,) = await within(hosting.handled(1))
            # The context reached the handler as sent, and the answer brought the handling's back.
            assert process.parent == rpc.trace
            assert rpc.ended and rpc.error is None and rpc.response == process.trace
            assert process.ended and process.error is None

            await within(runtime.send_message(Note(text="n"), AgentId("echo", "a")))
            (send,) = sending.of("send")
            one_way = (await within(hosting.handled(2)))[1]  # a one-way message: handled after send_message returns
            assert send.ended and one_way.parent == send.trace

            await within(runtime.broadcast(Note(text="b"), "echo"))
            (broadcast,) = sending.of("broadcast")
            reached = (await within(hosting.handled(3)))[2]
            assert broadcast.ended and broadcast.agent_id == "echo" and reached.parent == broadcast.trace

            await within(runtime.add_subscription(TypeSubscription("traced", "echo")))
            await within(runtime.publish(Note(text="p"), TopicId("traced", "fresh")))
            (published,) = sending.of("publish")
            handled = (await within(hosting.handled(4)))[3]
            assert published.ended and published.agent_id == "traced"  # a publish's span names the topic type
            assert (handled.agent_id, handled.parent) == ("echo/fresh", published.trace)
        finally:
            if peer is not runtime:
                await within(peer.stop(), 30)
            await within(runtime.stop(), 30)

    async def test_no_observer_sends_no_trace_context(self, journal: Journal) -> None:
        hosting = RecordingObserver()
        runtime = await self.make_runtime()
        peer = await self.make_peer_runtime(observer=hosting)
        if peer is None:
            pytest.skip("one runtime: with no observer on it, there is nothing to observe")
        await within(runtime.start())
        await within(peer.start())
        try:
            await within(peer.register_agent_factory("echo", lambda aid, rt: EchoAgent(aid, rt, journal)))
            await within(runtime.send_and_await_response(Ping(text="t"), AgentId("echo", "a"), timeout=10))
            (process,) = hosting.of("process")
            assert process.parent is None  # the handler's ctx.trace
        finally:
            await within(peer.stop(), 30)
            await within(runtime.stop(), 30)
