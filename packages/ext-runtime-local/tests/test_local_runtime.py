from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest

from ext.core import (
    AgentId,
    AgentNotFoundError,
    AgentRuntime,
    BaseAgent,
    CancellationToken,
    InMemoryStateStore,
    MessageContext,
    RuntimeClosedError,
    TopicId,
    TypeSubscription,
    UndeliverableError,
)
from ext.runtime.local import LocalAgentRuntime
from ext.testing.runtime_agents import EchoAgent, Journal, Ping


class Sleeper(BaseAgent):
    """Sleeps for the number of seconds it is sent; records its lifecycle."""

    def __init__(self, id: AgentId, runtime: AgentRuntime, log: list[str]) -> None:
        super().__init__(id, runtime)
        self.log = log
        self.started = asyncio.Event()

    async def on_message(self, message: Any, ctx: MessageContext) -> Any:
        self.started.set()
        try:
            await asyncio.sleep(float(message))
        except asyncio.CancelledError:
            self.log.append(f"cancelled token={ctx.cancellation_token.is_cancelled()}")
            raise
        self.log.append(f"slept {message}")
        return message

    async def close(self) -> None:
        self.log.append("closed")
        if self.id.key == "bad-close":
            raise OSError("close failed")


async def test_stop_waits_for_in_flight_handlers() -> None:
    log: list[str] = []
    rt = LocalAgentRuntime(stop_timeout=5)
    await rt.register_agent_factory("s", lambda i, r: Sleeper(i, r, log))
    agent = await rt.get_agent(AgentId("s", "a"))
    assert isinstance(agent, Sleeper)
    call = asyncio.ensure_future(rt.send_and_await_response("0.05", AgentId("s", "a")))
    await asyncio.wait_for(agent.started.wait(), 5)
    await asyncio.wait_for(rt.stop(), 10)
    assert await asyncio.wait_for(call, 5) == "0.05"
    assert log == ["slept 0.05", "closed"]


async def test_stop_cancels_handlers_past_the_grace_period() -> None:
    log: list[str] = []
    rt = LocalAgentRuntime(stop_timeout=0.1)
    await rt.register_agent_factory("s", lambda i, r: Sleeper(i, r, log))
    agent = await rt.get_agent(AgentId("s", "a"))
    assert isinstance(agent, Sleeper)
    call = asyncio.ensure_future(rt.send_and_await_response("30", AgentId("s", "a")))
    await asyncio.wait_for(agent.started.wait(), 5)
    await asyncio.wait_for(rt.stop(), 10)
    with pytest.raises(RuntimeClosedError, match="stopped before s/a"):
        await asyncio.wait_for(call, 5)
    assert log == ["cancelled token=True", "closed"]


async def test_close_errors_are_logged_and_do_not_stop_the_others(caplog: pytest.LogCaptureFixture) -> None:
    log: list[str] = []
    rt = LocalAgentRuntime()
    await rt.register_agent_factory("s", lambda i, r: Sleeper(i, r, log))
    await rt.get_agent(AgentId("s", "bad-close"))
    await rt.get_agent(AgentId("s", "ok"))
    with caplog.at_level(logging.ERROR):
        await rt.stop()
    assert log == ["closed", "closed"]
    assert any("closing agent s/bad-close failed" in r.getMessage() for r in caplog.records)


async def test_one_way_to_unknown_type_fails_at_once() -> None:
    async with LocalAgentRuntime() as rt:
        with pytest.raises(AgentNotFoundError, match="'ghost'"):
            await rt.send_message("x", AgentId("ghost", "k"))
        with pytest.raises(AgentNotFoundError, match="'ghost'"):
            await rt.broadcast("x", "ghost")
        with pytest.raises(AgentNotFoundError):
            await rt.get_agent(AgentId("ghost", "k"))
        assert await rt.list_agents() == []


async def test_factory_must_return_the_agent_it_was_asked_for() -> None:
    log: list[str] = []
    async with LocalAgentRuntime() as rt:
        await rt.register_agent_factory("wrong", lambda i, r: Sleeper(AgentId("wrong", "other"), r, log))
        await rt.register_agent_factory("notagent", lambda i, r: object())  # type: ignore[arg-type,return-value]
        with pytest.raises(UndeliverableError, match="agent with id wrong/other"):
            await rt.send_and_await_response("0", AgentId("wrong", "k"))
        with pytest.raises(UndeliverableError, match="returned object, not an Agent"):
            await rt.send_and_await_response("0", AgentId("notagent", "k"))
        assert await rt.list_agents() == []


async def test_rpc_without_deadline_and_cancelled_one_way() -> None:
    log: list[str] = []
    async with LocalAgentRuntime() as rt:
        await rt.register_agent_factory("s", lambda i, r: Sleeper(i, r, log))
        assert await asyncio.wait_for(rt.send_and_await_response("0", AgentId("s", "a"), None), 5) == "0"
        token = CancellationToken()
        agent = await rt.get_agent(AgentId("s", "b"))
        assert isinstance(agent, Sleeper)
        await rt.send_message("30", AgentId("s", "b"), cancellation_token=token)
        await asyncio.wait_for(agent.started.wait(), 5)
        token.cancel()
        # The agent is free again once the cancelled one-way handler is gone.
        assert await asyncio.wait_for(rt.send_and_await_response("0", AgentId("s", "b")), 5) == "0"
        assert log == ["slept 0", "cancelled token=True", "slept 0"]


async def test_argument_validation() -> None:
    with pytest.raises(ValueError, match="stop_timeout"):
        LocalAgentRuntime(stop_timeout=0)
    with pytest.raises(ValueError, match="stop_timeout"):
        LocalAgentRuntime(stop_timeout=None)  # type: ignore[arg-type]
    async with LocalAgentRuntime() as rt:
        with pytest.raises(TypeError, match="factory must be callable"):
            await rt.register_agent_factory("x", "nope")  # type: ignore[arg-type]
        await rt.register_agent_factory("x", lambda i, r: Sleeper(i, r, []))
        with pytest.raises(TypeError, match="sender must be an AgentId"):
            await rt.send_message("0", AgentId("x", "k"), sender="x/k")  # type: ignore[arg-type]
        with pytest.raises(TypeError, match="agent_id must be an AgentId"):
            await rt.get_agent("x/k")  # type: ignore[arg-type]
    with pytest.raises(RuntimeClosedError):
        await rt.start()
    with pytest.raises(RuntimeClosedError):
        await rt.register_agent_factory("y", lambda i, r: Sleeper(i, r, []))


class Replies:
    """Collects `reply(result, error)` calls; `wait(n)` returns once n have arrived."""

    def __init__(self) -> None:
        self.items: list[tuple[object, str | None]] = []
        self.changed = asyncio.Event()

    async def __call__(self, result: object, error: BaseException | None) -> None:
        self.items.append((result, None if error is None else type(error).__name__))
        self.changed.set()

    async def wait(self, count: int) -> list[tuple[object, str | None]]:
        while len(self.items) < count:
            self.changed.clear()
            await asyncio.wait_for(self.changed.wait(), 5)
        return self.items


async def test_hosting_hooks_deliver_in_order_and_reply() -> None:
    log: list[str] = []
    replies = Replies()
    async with LocalAgentRuntime() as rt:
        await rt.register_agent_factory("s", lambda i, r: Sleeper(i, r, log))
        target = AgentId("s", "h")
        first = rt.deliver("0", target, rpc=True, reply=replies)
        second = rt.deliver("0.01", target, rpc=True, reply=replies)
        assert not first.done and not second.done
        # deliver_here while the agent is busy: queued behind, nothing to run in this task.
        third, run_here = rt.deliver_here("0", target, rpc=True, reply=replies)
        assert run_here is None
        assert await replies.wait(3) == [("0", None), ("0.01", None), ("0", None)]
        assert third.done
        assert log == ["slept 0", "slept 0.01", "slept 0"]


async def test_deliver_here_runs_in_the_calling_task_and_cancel_delivery() -> None:
    log: list[str] = []
    replies = Replies()
    async with LocalAgentRuntime() as rt:
        await rt.register_agent_factory("s", lambda i, r: Sleeper(i, r, log))
        target = AgentId("s", "here")
        delivery, run_here = rt.deliver_here("0", target, rpc=True, reply=replies)
        assert run_here is not None
        await run_here
        assert delivery.done and replies.items == [("0", None)]
        agent = await rt.get_agent(target)
        assert isinstance(agent, Sleeper)
        agent.started.clear()
        running = rt.deliver("30", target, rpc=True, reply=replies)
        queued = rt.deliver("0", target, rpc=True, reply=replies)
        await asyncio.wait_for(agent.started.wait(), 5)
        rt.cancel_delivery(queued)  # cancelled before it started: skipped, the reply says so
        rt.cancel_delivery(running)  # cancelled while running: the handler sees its token cancelled
        assert await replies.wait(3) == [("0", None), (None, "CancelledError"), (None, "CancelledError")]
        assert running.done and queued.done
        assert log == ["slept 0", "cancelled token=True"]
        assert rt.broadcast_now("0", "s", sender=target) == 0
        assert rt.broadcast_now("0", "nobody") == 0


async def test_idle_deactivation_keeps_memory_flat_over_many_agents() -> None:
    journal, store = Journal(), InMemoryStateStore()
    async with LocalAgentRuntime(state_store=store, idle_timeout=0.01) as runtime:
        await runtime.register_agent_factory("echo", lambda aid, rt: EchoAgent(aid, rt, journal))
        for round_ in range(1, 3):
            for i in range(200):
                reply = await runtime.send_and_await_response(Ping(text="x"), AgentId("echo", f"k{i}"))
                assert reply.count == round_
            await asyncio.wait_for(journal.wait_closed(200 * round_), 15)
            # Every object released, none listed: nothing of 200 agents stays but their stored records.
            assert (journal.live, await runtime.list_agents(), len(store)) == (0, [], 200)


async def test_publish_to_a_subscribed_type_without_factory_fails_before_queueing_anything() -> None:
    log: list[str] = []
    async with LocalAgentRuntime() as rt:
        await rt.register_agent_factory("s", lambda i, r: Sleeper(i, r, log))
        await rt.add_subscription(TypeSubscription("t", "s"))
        await rt.add_subscription(TypeSubscription("t", "ghost"))
        # As send_message to a type with no factory: AgentNotFoundError at once, and s/k gets nothing either.
        with pytest.raises(AgentNotFoundError, match=r"'ghost' \(subscribed to t/k\)"):
            await rt.publish("0", TopicId("t", "k"))
        assert await rt.list_agents() == []
        with pytest.raises(ValueError, match="message_id must be a non-empty string"):
            await rt.publish("0", TopicId("t", "k"), message_id="")
        # A source that cannot be an agent key is refused where the topic is made, naming the topic's field.
        with pytest.raises(ValueError, match=r"TopicId\.source must be a non-empty printable string"):
            await rt.publish("0", TopicId("t", "line\nbreak"))
        assert await rt.list_agents() == []


async def test_cancelling_a_publish_cancels_every_delivery() -> None:
    log: list[str] = []
    async with LocalAgentRuntime() as rt:
        await rt.register_agent_factory("s", lambda i, r: Sleeper(i, r, log))
        await rt.register_agent_factory("z", lambda i, r: Sleeper(i, r, log))
        await rt.add_subscription(TypeSubscription("t", "s"))
        await rt.add_subscription(TypeSubscription("t", "z"))
        first = await rt.get_agent(AgentId("s", "k"))
        second = await rt.get_agent(AgentId("z", "k"))
        assert isinstance(first, Sleeper) and isinstance(second, Sleeper)
        token = CancellationToken()
        await rt.publish("30", TopicId("t", "k"), cancellation_token=token)
        await asyncio.wait_for(asyncio.gather(first.started.wait(), second.started.wait()), 5)
        token.cancel()
        assert await asyncio.wait_for(rt.send_and_await_response("0", AgentId("s", "k")), 5) == "0"
        assert await asyncio.wait_for(rt.send_and_await_response("0", AgentId("z", "k")), 5) == "0"
        assert sorted(log) == ["cancelled token=True", "cancelled token=True", "slept 0", "slept 0"]


async def test_stopped_runtime_refuses_publish_and_subscriptions() -> None:
    rt = LocalAgentRuntime()
    await rt.stop()
    with pytest.raises(RuntimeClosedError):
        await rt.publish("x", TopicId("t", "k"))
    with pytest.raises(RuntimeClosedError):
        await rt.add_subscription(TypeSubscription("t", "s"))
    with pytest.raises(RuntimeClosedError):
        await rt.remove_subscription("any")


class Announcer(BaseAgent):
    """Publishes what it is sent to its own topic (through `publish_message`) and records what it receives."""

    def __init__(self, id: AgentId, runtime: AgentRuntime, log: list[str]) -> None:
        super().__init__(id, runtime)
        self.log = log

    async def on_message(self, message: Any, ctx: MessageContext) -> Any:
        if message == "sync":
            return None
        if ctx.topic_id is None:
            await self.publish_message(message, TopicId("room", self.id.key))
            return None
        self.log.append(f"{self.id} got {message} on {ctx.topic_id} from {ctx.sender}")
        return None


async def test_an_agent_publishing_does_not_receive_its_own_message() -> None:
    log: list[str] = []
    async with LocalAgentRuntime() as rt:
        await rt.register_agent_factory("speaker", lambda i, r: Announcer(i, r, log))
        await rt.register_agent_factory("listener", lambda i, r: Announcer(i, r, log))
        await rt.add_subscription(TypeSubscription("room", "speaker"))
        await rt.add_subscription(TypeSubscription("room", "listener"))
        await rt.send_and_await_response("hi", AgentId("speaker", "r1"))
        await rt.send_and_await_response("sync", AgentId("listener", "r1"))  # handled after the published one
        assert log == ["listener/r1 got hi on room/r1 from speaker/r1"]
