"""`A2ARemoteAgent`: a remote A2A agent as an agent on ext's runtime.

An RPC to it (`send_and_await_response`) forwards the message to the remote agent and answers with its reply:
a `str` gets the reply's text; an `A2ARequest` (to continue a conversation) gets the whole `A2AReply`. The
caller's cancellation (a timeout, a stopped runtime) cancels the remote task."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from pydantic import BaseModel, ConfigDict, Field

from ext.core import AgentId, AgentRuntime, BaseAgent, CantHandleError, MessageContext

from ._events import A2AReply
from ._tool import A2AAgentTool


class A2ARequest(BaseModel):
    """A message for an `A2ARemoteAgent` that continues a conversation (`context_id`) or a task (`task_id`)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    text: str = Field(description="The message text.")
    context_id: str | None = Field(default=None, description="The conversation to continue.")
    task_id: str | None = Field(default=None, description="The task to continue (one in input-required).")


class A2ARemoteAgent(BaseAgent):
    """Forwards each message it gets to the remote agent behind `tool`; the tool is shared, not closed here."""

    def __init__(self, id: AgentId, runtime: AgentRuntime, tool: A2AAgentTool) -> None:
        super().__init__(id, runtime)
        self._tool = tool

    @classmethod
    def factory(cls, tool: A2AAgentTool) -> Callable[[AgentId, AgentRuntime], Awaitable[A2ARemoteAgent]]:
        """A factory for `register_agent_factory`: every agent of the type talks to `tool`'s agent."""

        async def make(id: AgentId, runtime: AgentRuntime) -> A2ARemoteAgent:
            return cls(id, runtime, tool)

        return make

    async def on_message(self, message: object, ctx: MessageContext) -> str | A2AReply:
        token = ctx.cancellation_token
        if isinstance(message, str):
            return (await self._tool.send(message, cancellation_token=token)).text
        if isinstance(message, A2ARequest):
            return await self._tool.send(
                message.text, context_id=message.context_id, task_id=message.task_id, cancellation_token=token
            )
        raise CantHandleError(f"{self.id} takes a str or an A2ARequest, got {type(message).__name__}")
