from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from ext.core import (
    Agent,
    AgentId,
    AgentNotFoundError,
    AgentRuntime,
    AgentType,
    CancellationToken,
    CantHandleError,
    MessageContext,
    MessageHandlerError,
    RoutedAgent,
    RuntimeClosedError,
    UndeliverableError,
    agent_type_name,
    check_agent_id,
    check_factory,
    check_seconds,
    check_sender,
    check_timeout,
    message_handler,
)


@dataclass
class Ping:
    text: str


@dataclass
class LoudPing(Ping):
    pass


@dataclass
class Count:
    n: int


class Other:
    pass


class _NoRuntime:
    """Stands in for a runtime: these tests call handlers directly and never send."""


RUNTIME: Any = _NoRuntime()


class Echo(RoutedAgent):
    @message_handler
    async def on_ping(self, message: Ping, ctx: MessageContext) -> str:
        return f"{self.id.key}:{message.text}"

    @message_handler
    async def on_count(self, message: Count | int, ctx: MessageContext) -> int:
        return message.n + 1 if isinstance(message, Count) else message * 2


class LoudEcho(Echo):
    @message_handler
    async def on_loud(self, message: LoudPing, ctx: MessageContext) -> str:
        return message.text.upper()


def _ctx(recipient: AgentId, *, rpc: bool = True) -> MessageContext:
    return MessageContext(recipient=recipient, sender=None, is_rpc=rpc, message_id="m1")


async def test_routes_by_type_and_union() -> None:
    agent = Echo(AgentId("echo", "a"), RUNTIME)
    ctx = _ctx(agent.id)
    assert await agent.on_message(Ping("hi"), ctx) == "a:hi"
    assert await agent.on_message(Count(1), ctx) == 2
    assert await agent.on_message(21, ctx) == 42
    assert set(Echo.handled_message_types()) == {Ping, Count, int}


async def test_most_specific_handler_wins_and_subclass_inherits() -> None:
    base = Echo(AgentId("echo", "a"), RUNTIME)
    loud = LoudEcho(AgentId("loud", "b"), RUNTIME)
    # A LoudPing is a Ping: the base class routes it by MRO, the subclass has its own handler.
    assert await base.on_message(LoudPing("x"), _ctx(base.id)) == "a:x"
    assert await loud.on_message(LoudPing("x"), _ctx(loud.id)) == "X"
    assert await loud.on_message(Ping("x"), _ctx(loud.id)) == "b:x"


async def test_unhandled_message_raises_cant_handle() -> None:
    agent = Echo(AgentId("echo", "a"), RUNTIME)
    with pytest.raises(CantHandleError, match="Other") as info:
        await agent.on_message(Other(), _ctx(agent.id))
    assert isinstance(info.value, TypeError)


def test_explicit_types_for_unresolvable_hints() -> None:
    class Local:
        pass

    class Agent1(RoutedAgent):
        @message_handler(types=Local)
        async def on_local(self, message: Local, ctx: MessageContext) -> None:
            return None

    assert Agent1.handled_message_types() == (Local,)

    with pytest.raises(TypeError, match="types="):

        class Agent2(RoutedAgent):
            @message_handler
            async def on_local(self, message: Local, ctx: MessageContext) -> None:
                return None


def test_handler_declaration_errors() -> None:
    with pytest.raises(TypeError, match="async def"):

        class Sync(RoutedAgent):
            @message_handler  # type: ignore[type-var]
            def on_ping(self, message: Ping, ctx: MessageContext) -> None:
                return None

    with pytest.raises(TypeError, match="handled by both"):

        class Twice(RoutedAgent):
            @message_handler
            async def one(self, message: Ping, ctx: MessageContext) -> None:
                return None

            @message_handler
            async def two(self, message: Ping, ctx: MessageContext) -> None:
                return None

    with pytest.raises(TypeError, match="class type hint"):

        class NoHint(RoutedAgent):
            @message_handler
            async def one(self, message, ctx):  # type: ignore[no-untyped-def]
                return None

    with pytest.raises(TypeError, match="types must be"):
        message_handler(types=("nope",))  # type: ignore[arg-type]


def test_agent_protocol_and_base_agent() -> None:
    agent = Echo(AgentId("echo", "k"), RUNTIME)
    assert isinstance(agent, Agent)
    assert agent.runtime is RUNTIME
    assert repr(agent) == "Echo(id=echo/k)"
    with pytest.raises(TypeError, match="id must be an AgentId"):
        Echo("echo/k", RUNTIME)  # type: ignore[arg-type]


async def test_base_agent_keeps_no_state_by_default() -> None:
    agent = Echo(AgentId("echo", "k"), RUNTIME)
    assert await agent.save_state() == {}
    await agent.load_state({"ignored": True})
    assert await agent.save_state() == {}


async def test_base_agent_helpers_fill_in_the_sender() -> None:
    calls: list[tuple[str, Any, Any, dict[str, Any]]] = []

    class Recorder:
        async def send_message(self, message: Any, recipient: AgentId, **kw: Any) -> None:
            calls.append(("send", message, recipient, kw))

        async def send_and_await_response(self, message: Any, recipient: AgentId, timeout: Any, **kw: Any) -> Any:
            calls.append(("rpc", message, recipient, {"timeout": timeout, **kw}))
            return "ok"

        async def broadcast(self, message: Any, agent_type: Any, **kw: Any) -> None:
            calls.append(("broadcast", message, agent_type, kw))

    me = AgentId("echo", "me")
    agent = Echo(me, Recorder())  # type: ignore[arg-type]
    other = AgentId("echo", "you")
    await agent.send_message("a", other)
    assert await agent.send_and_await_response("b", other, 2.0) == "ok"
    await agent.broadcast("c", "echo")
    assert calls == [
        ("send", "a", other, {"sender": me, "cancellation_token": None}),
        ("rpc", "b", other, {"timeout": 2.0, "sender": me, "cancellation_token": None}),
        ("broadcast", "c", "echo", {"sender": me}),
    ]


def test_message_context_defaults() -> None:
    ctx = _ctx(AgentId("a", "b"))
    assert isinstance(ctx.cancellation_token, CancellationToken)
    assert ctx.is_broadcast is False
    assert ctx.cancellation_token is ctx.cancellation_token
    assert "recipient=a/b" in repr(ctx)
    given = CancellationToken()
    ctx2 = MessageContext(AgentId("a", "b"), None, False, "m2", given, is_broadcast=True)
    assert ctx2.cancellation_token is given and ctx2.is_broadcast


def test_error_hierarchy() -> None:
    assert issubclass(AgentNotFoundError, UndeliverableError)
    assert issubclass(AgentNotFoundError, LookupError)
    assert issubclass(RuntimeClosedError, RuntimeError)
    err = MessageHandlerError("ValueError: boom", error_type="ValueError")
    assert err.error_type == "ValueError"
    assert str(err) == "ValueError: boom"


def test_argument_checks() -> None:
    assert agent_type_name("writer") == "writer"
    assert agent_type_name(AgentType("writer")) == "writer"
    with pytest.raises(ValueError, match=r"agent_type: AgentType\.name"):
        agent_type_name("has space")
    with pytest.raises(TypeError, match="agent_type must be a str or AgentType, got int"):
        agent_type_name(3)
    assert check_agent_id(AgentId("a", "b")) == AgentId("a", "b")
    with pytest.raises(TypeError, match="recipient must be an AgentId, got str"):
        check_agent_id("a/b")
    assert check_timeout(None) is None
    assert check_timeout(2) == 2.0
    for bad in (0, -1, float("inf"), float("nan"), True, "1"):
        with pytest.raises(ValueError, match="timeout must be a positive number"):
            check_timeout(bad)
    assert check_seconds(3, "stop_timeout") == 3.0
    with pytest.raises(ValueError, match="stop_timeout must be a positive number of seconds, got None"):
        check_seconds(None, "stop_timeout")
    with pytest.raises(ValueError, match="stop_timeout must be a positive number of seconds or None, got 0"):
        check_seconds(0, "stop_timeout")
    assert check_sender(None) is None
    assert check_sender(AgentId("a", "b")) == AgentId("a", "b")
    with pytest.raises(TypeError, match="sender must be an AgentId, got str"):
        check_sender("a/b")
    factory: Any = AgentId
    assert check_factory(factory) is factory
    with pytest.raises(TypeError, match=r"factory must be callable as factory\(agent_id, runtime\), got str"):
        check_factory("writer")


def test_runtime_protocol_is_structural() -> None:
    class Minimal:
        async def start(self) -> None: ...
        async def stop(self) -> None: ...
        async def register_agent_factory(self, agent_type: Any, factory: Any) -> AgentType:
            return AgentType("x")

        async def send_message(self, message: Any, recipient: AgentId, **kw: Any) -> None: ...
        async def send_and_await_response(self, message: Any, recipient: AgentId, *a: Any, **kw: Any) -> Any: ...
        async def broadcast(self, message: Any, agent_type: Any, **kw: Any) -> None: ...
        async def publish(self, message: Any, topic_id: Any, **kw: Any) -> None: ...
        async def add_subscription(self, subscription: Any) -> None: ...
        async def remove_subscription(self, id: str) -> None: ...
        async def list_subscriptions(self) -> list[Any]:
            return []

        async def list_agents(self, agent_type: Any = None) -> list[AgentId]:
            return []

        async def save_state(self) -> dict[str, Any]:
            return {}

        async def load_state(self, state: Any) -> None: ...

    assert isinstance(Minimal(), AgentRuntime)
    assert not isinstance(object(), AgentRuntime)
