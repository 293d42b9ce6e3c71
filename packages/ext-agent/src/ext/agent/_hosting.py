"""A `ChatAgent` hosted on an agent runtime (ext-runtime-local, ext-runtime-grpc, or any `AgentRuntime`).

Each `AgentId(agent_type, key)` is one session (`key` is the session id), so a conversation continues on
whichever worker activates the id: the session lives in the agent's store, not in the hosting object (use a
shared store, such as `ext.redis.RedisStateStore`, for a cluster). Messages:

- `AgentRequest` -> `AgentReply` (an RPC; over gRPC both types are registered with the worker's serializer by
  `ChatAgent.register`; a caller in another process registers them too);
- `str` -> `str` (the answer text, or the JSON of a typed answer), needing no registration anywhere;
- either, published on a topic the agent subscribes to: the turn runs; the reply goes nowhere.

Approval over a runtime: a reply with `status="awaiting_approval"` lists the held calls; an `AgentRequest`
with `approve` / `deny` decisions (and no input) records them and resumes the turn.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from pydantic import BaseModel, ConfigDict, Field

from ext.core import AgentId, AgentRuntime, AgentType, MessageContext, RoutedAgent, TypeSubscription, message_handler

from ._events import RunResult
from ._session import AgentSession

__all__ = ["AgentReply", "AgentRequest", "ChatAgentHost", "HostableAgent", "PendingCall", "register_agent"]


class HostableAgent(Protocol):
    """What hosting needs of an agent (`ChatAgent` is one)."""

    @property
    def name(self) -> str: ...

    def session(self, session_id: str) -> AgentSession[Any]: ...


class AgentRequest(BaseModel):
    """A request to a hosted agent: `input` (the user's text) starts a turn; without input, `approve` and `deny`
    (call id -> reason) decide held calls and the turn resumes."""

    model_config = ConfigDict(extra="forbid")

    input: str | None = None
    variables: dict[str, str] = Field(default_factory=dict)
    approve: list[str] = Field(default_factory=list)
    deny: dict[str, str] = Field(default_factory=dict)


class PendingCall(BaseModel):
    """A held call in an `AgentReply`."""

    call_id: str
    name: str
    arguments: str


class AgentReply(BaseModel):
    """A hosted agent's answer: `status`, `text`, `output` (the JSON of a typed answer, else the text), the held
    calls, the session (the `AgentId` key) with its record version, and the run's tokens (and cost, when the
    pipeline prices calls)."""

    status: str
    text: str
    output: Any = None
    pending: list[PendingCall] = Field(default_factory=list)
    session_id: str
    version: int
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost: float | None = None


def reply_of(result: RunResult[Any]) -> AgentReply:
    output: Any = None
    if result.status == "completed":
        value = result.output
        output = value.model_dump(mode="json") if isinstance(value, BaseModel) else value
    return AgentReply(
        status=result.status,
        text=result.text,
        output=output,
        pending=[PendingCall(call_id=p.call_id, name=p.name, arguments=p.arguments) for p in result.pending],
        session_id=result.session_id,
        version=result.version,
        prompt_tokens=result.usage.prompt_tokens,
        completion_tokens=result.usage.completion_tokens,
        cost=result.cost,
    )


class ChatAgentHost(RoutedAgent):
    """The runtime-side object of a hosted `ChatAgent`: built per `AgentId` by the runtime, holding nothing but
    the id (the conversation is the session in the agent's store). `ChatAgent.register` makes a subclass bound
    to its agent."""

    chat_agent: HostableAgent

    def __init__(self, id: AgentId, runtime: AgentRuntime) -> None:
        super().__init__(id, runtime)
        self._session = self.chat_agent.session(id.key)

    @message_handler
    async def on_request(self, message: AgentRequest, ctx: MessageContext) -> AgentReply:
        session = self._session
        token = ctx.cancellation_token
        if message.input is not None:
            result = await session.run(message.input, variables=message.variables, cancellation_token=token)
        else:
            for call_id in message.approve:
                await session.approve(call_id)
            for call_id, reason in message.deny.items():
                await session.deny(call_id, reason)
            result = await session.resume(cancellation_token=token)
        return reply_of(result)

    @message_handler
    async def on_text(self, message: str, ctx: MessageContext) -> str:
        result = await self._session.run(message, cancellation_token=ctx.cancellation_token)
        if result.status != "completed":
            held = ", ".join(f"{p.name} ({p.call_id})" for p in result.pending)
            return f"[waiting for approval of {held}]"
        value = result.output
        if isinstance(value, BaseModel):
            return value.model_dump_json()
        return str(value)


async def register_agent(
    agent: HostableAgent, runtime: AgentRuntime, agent_type: str | AgentType | None, topics: Sequence[str]
) -> AgentType:
    if isinstance(topics, str) or not all(isinstance(t, str) and t for t in topics):
        raise TypeError(f"topics must be a list of topic types (non-empty str), got {topics!r}")
    name = agent.name if agent_type is None else agent_type
    host = type(f"{agent.name}_host", (ChatAgentHost,), {"chat_agent": agent, "__module__": __name__})
    register_type = getattr(runtime, "register_message_type", None)
    if register_type is not None:  # a serializing runtime (gRPC) also needs the reply type for the wire
        for message_type in (AgentRequest, AgentReply):
            is_registered = getattr(getattr(runtime, "serializer", None), "is_registered", None)
            if is_registered is None or not is_registered(message_type):
                register_type(message_type)
    registered = await runtime.register_agent_factory(name, host)
    for topic in topics:
        await runtime.add_subscription(TypeSubscription(topic, registered.name))
    return registered
