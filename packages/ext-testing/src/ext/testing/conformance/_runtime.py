"""The scenario suite every `AgentRuntime` implementation passes (`ext.runtime.local`, `ext.runtime.grpc`).

Subclass it (class name starting with `Test`) and provide the runtime::

    class TestMyRuntime(RuntimeConformance):
        async def make_runtime(self, **options: Any) -> AgentRuntime:
            return MyRuntime(..., **options)  # returned not started; the suite starts and stops it;
                                              # options: state_store, save_policy, idle_timeout, observer

        async def make_peer_runtime(self, **options: Any) -> AgentRuntime | None:
            return MyRuntime(..., **options)  # a second member of the same cluster, or None (single process)

Messages are the pydantic models in `ext.testing.runtime_agents.MESSAGE_TYPES`; a runtime that serializes messages
registers them in `make_runtime`. Agents (`ext.testing.runtime_agents.EchoAgent`) live in the test process, so the
suite observes them directly (a journal). The durable state scenarios are `RuntimeStateScenarios`
(`_runtime_state.py`), the trace-context ones `RuntimeTraceScenarios` (`_runtime_trace.py`) and the topic ones
`RuntimeTopicScenarios` (`_runtime_topics.py`), all part of this suite.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio

from ext.core import (
    AgentId,
    AgentNotFoundError,
    AgentRuntime,
    CancellationToken,
    CantHandleError,
    MessageHandlerError,
    RuntimeClosedError,
    UndeliverableError,
)
from ext.testing.conformance._runtime_state import RuntimeStateScenarios
from ext.testing.conformance._runtime_topics import RuntimeTopicScenarios
from ext.testing.conformance._runtime_trace import RuntimeTraceScenarios
from ext.testing.conformance._waits import within
from ext.testing.runtime_agents import (
    EchoAgent,
    Fail,
    GetNotes,
    Journal,
    Note,
    Notes,
    Ping,
    Pong,
    Relay,
    Slow,
    Unhandled,
)

__all__ = ["RuntimeConformance"]


class RuntimeConformance(RuntimeStateScenarios, RuntimeTraceScenarios, RuntimeTopicScenarios):
    """Runtime-neutral scenarios for an `AgentRuntime`. See the module docstring."""

    async def make_runtime(self, **options: Any) -> AgentRuntime:
        """A new runtime, not started. `options` (`state_store`, `save_policy`, `idle_timeout`, `observer`) go to
        its constructor."""
        raise NotImplementedError

    async def make_peer_runtime(self, **options: Any) -> AgentRuntime | None:
        """A second runtime in the same cluster as `make_runtime`'s, or None when there is only one. `options`
        (`observer`) go to its constructor."""
        return None

    def is_handler_error(self, exc: BaseException, text: str) -> bool:
        """Whether `exc` is how this runtime reports a handler's `ValueError(text)` to an RPC caller."""
        if isinstance(exc, ValueError):
            return text in str(exc)
        return isinstance(exc, MessageHandlerError) and exc.error_type == "ValueError" and text in str(exc)

    # --- fixtures --------------------------------------------------------------------------------------

    @pytest.fixture
    def journal(self) -> Journal:
        return Journal()

    @pytest_asyncio.fixture
    async def runtime(self) -> AsyncIterator[AgentRuntime]:
        rt = await self.make_runtime()
        await within(rt.start())
        try:
            yield rt
        finally:
            await within(rt.stop(), 30)

    @pytest_asyncio.fixture
    async def peer(self, runtime: AgentRuntime) -> AsyncIterator[AgentRuntime]:
        other = await self.make_peer_runtime()
        if other is None:
            yield runtime
            return
        await within(other.start())
        try:
            yield other
        finally:
            await within(other.stop(), 30)

    async def register_echo(self, runtime: AgentRuntime, journal: Journal, agent_type: str = "echo") -> None:
        await within(runtime.register_agent_factory(agent_type, lambda aid, rt: EchoAgent(aid, rt, journal)))

    # --- scenarios -------------------------------------------------------------------------------------

    async def test_rpc_creates_agent_on_first_message_and_reuses_it(
        self, runtime: AgentRuntime, journal: Journal
    ) -> None:
        await self.register_echo(runtime, journal)
        assert journal.created == []
        a = AgentId("echo", "a")
        first = await within(runtime.send_and_await_response(Ping(text="hi"), a))
        second = await within(runtime.send_and_await_response(Ping(text="again"), a))
        assert isinstance(first, Pong) and isinstance(second, Pong)
        assert (first.text, first.agent, first.count, first.sender) == ("hi", "echo/a", 1, None)
        assert (second.text, second.count) == ("again", 2)
        assert journal.created == [a]

    async def test_each_key_is_its_own_agent(self, runtime: AgentRuntime, journal: Journal) -> None:
        await self.register_echo(runtime, journal)
        replies = [
            await within(runtime.send_and_await_response(Ping(text=k), AgentId("echo", k))) for k in ("x", "y", "x")
        ]
        assert [(r.agent, r.count) for r in replies] == [("echo/x", 1), ("echo/y", 1), ("echo/x", 2)]
        assert sorted(str(a) for a in journal.created) == ["echo/x", "echo/y"]

    async def test_one_way_messages_arrive_in_order(self, runtime: AgentRuntime, journal: Journal) -> None:
        await self.register_echo(runtime, journal)
        target = AgentId("echo", "ordered")
        for i in range(50):
            await within(runtime.send_message(Note(text=str(i)), target))
        notes = await within(runtime.send_and_await_response(GetNotes(), target))
        assert isinstance(notes, Notes)
        assert notes.notes == [str(i) for i in range(50)]

    async def test_async_factory(self, runtime: AgentRuntime, journal: Journal) -> None:
        async def factory(agent_id: AgentId, rt: AgentRuntime) -> EchoAgent:
            await asyncio.sleep(0)
            return EchoAgent(agent_id, rt, journal)

        await within(runtime.register_agent_factory("echo", factory))
        reply = await within(runtime.send_and_await_response(Ping(text="async"), AgentId("echo", "f")))
        assert reply.agent == "echo/f"

    async def test_handler_error_reaches_the_rpc_caller(self, runtime: AgentRuntime, journal: Journal) -> None:
        await self.register_echo(runtime, journal)
        target = AgentId("echo", "err")
        with pytest.raises(Exception) as info:
            await within(runtime.send_and_await_response(Fail(text="kaput"), target))
        assert self.is_handler_error(info.value, "boom: kaput"), repr(info.value)
        reply = await within(runtime.send_and_await_response(Ping(text="still here"), target))
        assert reply.count == 1

    async def test_one_way_handler_error_is_logged(
        self, runtime: AgentRuntime, journal: Journal, caplog: pytest.LogCaptureFixture
    ) -> None:
        await self.register_echo(runtime, journal)
        target = AgentId("echo", "err1")
        with caplog.at_level(logging.ERROR):
            await within(runtime.send_message(Fail(text="one-way"), target))
            # Handlers of one agent run in order, so once this answers the failed one has been logged.
            await within(runtime.send_and_await_response(Ping(text="after"), target))
        errors = [r for r in caplog.records if r.levelno >= logging.ERROR and "boom: one-way" in r.getMessage()]
        assert errors, [r.getMessage() for r in caplog.records]

    async def test_unhandled_message_type(self, runtime: AgentRuntime, journal: Journal) -> None:
        await self.register_echo(runtime, journal)
        with pytest.raises((CantHandleError, MessageHandlerError)) as info:
            await within(runtime.send_and_await_response(Unhandled(), AgentId("echo", "u")))
        assert "Unhandled" in str(info.value)

    async def test_unknown_agent_type_fails_at_once(self, runtime: AgentRuntime) -> None:
        with pytest.raises(AgentNotFoundError, match="nobody"):
            await within(runtime.send_and_await_response(Ping(text="?"), AgentId("nobody", "k")), 5)

    async def test_failing_factory(self, runtime: AgentRuntime) -> None:
        def factory(agent_id: AgentId, rt: AgentRuntime) -> EchoAgent:
            raise RuntimeError("no agents today")

        await within(runtime.register_agent_factory("broken", factory))
        with pytest.raises(UndeliverableError, match="no agents today"):
            await within(runtime.send_and_await_response(Ping(text="?"), AgentId("broken", "k")))

    async def test_rpc_timeout_cancels_the_handler(self, runtime: AgentRuntime, journal: Journal) -> None:
        await self.register_echo(runtime, journal)
        target = AgentId("echo", "slow")
        with pytest.raises(TimeoutError, match="echo/slow"):
            await within(runtime.send_and_await_response(Slow(seconds=30), target, 0.3))
        # The handler was cancelled, so the agent answers the next message at once.
        reply = await within(runtime.send_and_await_response(Ping(text="next"), target), 5)
        assert reply.text == "next"
        assert journal.cancelled == [target]

    async def test_cancellation_token_aborts_rpc(self, runtime: AgentRuntime, journal: Journal) -> None:
        await self.register_echo(runtime, journal)
        token = CancellationToken()
        target = AgentId("echo", "cancel")
        call = asyncio.ensure_future(
            runtime.send_and_await_response(Slow(seconds=30), target, cancellation_token=token)
        )
        await within(journal.slow_started.wait())
        token.cancel()
        with pytest.raises(asyncio.CancelledError):
            await within(call)
        reply = await within(runtime.send_and_await_response(Ping(text="next"), target), 5)
        assert reply.text == "next"

    async def test_broadcast_reaches_active_agents_of_the_type_only(
        self, runtime: AgentRuntime, journal: Journal
    ) -> None:
        await self.register_echo(runtime, journal)
        await self.register_echo(runtime, journal, "other")
        keys = ["b1", "b2", "b3"]
        for k in keys:
            await within(runtime.send_and_await_response(Ping(text="wake"), AgentId("echo", k)))
        await within(runtime.send_and_await_response(Ping(text="wake"), AgentId("other", "o")))
        await within(runtime.broadcast(Note(text="all"), "echo"))
        for k in keys:
            notes = await within(runtime.send_and_await_response(GetNotes(), AgentId("echo", k)))
            assert notes.notes == ["all!"]
        other = await within(runtime.send_and_await_response(GetNotes(), AgentId("other", "o")))
        assert other.notes == []
        assert sorted(str(a) for a in journal.created) == ["echo/b1", "echo/b2", "echo/b3", "other/o"]

    async def test_broadcast_skips_the_sender(self, runtime: AgentRuntime, journal: Journal) -> None:
        await self.register_echo(runtime, journal)
        me, you = AgentId("echo", "me"), AgentId("echo", "you")
        for agent in (me, you):
            await within(runtime.send_and_await_response(Ping(text="wake"), agent))
        await within(runtime.broadcast(Note(text="hey"), "echo", sender=me))
        mine = await within(runtime.send_and_await_response(GetNotes(), me))
        yours = await within(runtime.send_and_await_response(GetNotes(), you))
        assert (mine.notes, yours.notes) == ([], ["hey!"])

    async def test_registry_lists_active_agents(self, runtime: AgentRuntime, journal: Journal) -> None:
        await self.register_echo(runtime, journal)
        await self.register_echo(runtime, journal, "other")
        assert await within(runtime.list_agents()) == []
        for agent in (AgentId("echo", "k2"), AgentId("other", "z"), AgentId("echo", "k1")):
            await within(runtime.send_and_await_response(Ping(text="wake"), agent))
        assert await within(runtime.list_agents("echo")) == [AgentId("echo", "k1"), AgentId("echo", "k2")]
        assert await within(runtime.list_agents()) == [
            AgentId("echo", "k1"),
            AgentId("echo", "k2"),
            AgentId("other", "z"),
        ]

    async def test_agent_to_agent_rpc_carries_the_sender(self, runtime: AgentRuntime, journal: Journal) -> None:
        await self.register_echo(runtime, journal)
        relay = AgentId("echo", "relay")
        reply = await within(
            runtime.send_and_await_response(Relay(target_type="echo", target_key="end", text="via"), relay)
        )
        assert (reply.text, reply.agent, reply.sender) == ("via", "echo/end", "echo/relay")

    async def test_agents_on_a_peer_runtime(self, runtime: AgentRuntime, peer: AgentRuntime, journal: Journal) -> None:
        await self.register_echo(peer, journal, "remote")
        await self.register_echo(runtime, journal, "home")
        reply = await within(runtime.send_and_await_response(Ping(text="x"), AgentId("remote", "r")))
        assert reply.agent == "remote/r"
        # And back: an agent hosted by the peer calls an agent hosted here.
        relayed = await within(
            peer.send_and_await_response(Relay(target_type="home", target_key="h", text="back"), AgentId("remote", "r"))
        )
        assert (relayed.agent, relayed.sender) == ("home/h", "remote/r")

    async def test_concurrent_rpcs(self, runtime: AgentRuntime, journal: Journal) -> None:
        await self.register_echo(runtime, journal)
        calls = [runtime.send_and_await_response(Ping(text=f"m{i}"), AgentId("echo", f"c{i % 8}")) for i in range(32)]
        replies = await within(asyncio.gather(*calls))
        assert [r.text for r in replies] == [f"m{i}" for i in range(32)]
        assert sorted(r.count for r in replies if r.agent == "echo/c0") == [1, 2, 3, 4]

    async def test_duplicate_registration_is_an_error(self, runtime: AgentRuntime, journal: Journal) -> None:
        await self.register_echo(runtime, journal)
        with pytest.raises(ValueError, match="echo"):
            await self.register_echo(runtime, journal)

    async def test_bad_arguments_fail_before_sending(self, runtime: AgentRuntime, journal: Journal) -> None:
        await self.register_echo(runtime, journal)
        with pytest.raises(TypeError, match="recipient"):
            await runtime.send_message(Ping(text="x"), "echo/a")  # type: ignore[arg-type]
        with pytest.raises(TypeError, match="recipient"):
            await runtime.send_and_await_response(Ping(text="x"), ("echo", "a"))  # type: ignore[arg-type]
        with pytest.raises(ValueError, match="timeout"):
            await runtime.send_and_await_response(Ping(text="x"), AgentId("echo", "a"), -1)
        with pytest.raises(ValueError, match="agent_type"):
            await runtime.broadcast(Note(text="x"), "not a type")
        assert journal.created == []

    async def test_stop_closes_agents_and_refuses_messages(self, journal: Journal) -> None:
        rt = await self.make_runtime()
        await within(rt.start())
        try:
            await self.register_echo(rt, journal)
            for k in ("s1", "s2"):
                await within(rt.send_and_await_response(Ping(text="wake"), AgentId("echo", k)))
        finally:
            await within(rt.stop(), 30)
        assert sorted(str(a) for a in journal.closed) == ["echo/s1", "echo/s2"]
        with pytest.raises(RuntimeClosedError):
            await within(rt.send_and_await_response(Ping(text="late"), AgentId("echo", "s1")), 5)
        with pytest.raises(RuntimeClosedError):
            await within(rt.send_message(Note(text="late"), AgentId("echo", "s1")), 5)
        await within(rt.stop())  # idempotent
