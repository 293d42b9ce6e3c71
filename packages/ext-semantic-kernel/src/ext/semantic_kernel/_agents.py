"""Kernel agents hosted on an ext runtime (local or gRPC): addressed by `AgentId`, sent messages, answering RPCs.

`await host_kernel_agent(runtime, "assistant", make_agent)` registers the type; each `AgentId("assistant", key)` gets
its own kernel agent (`make_agent(agent_id)`) and its own conversation, which is the agent's saved state, so a
runtime with a state store brings it back after a restart or on another worker. A `KernelTask` (or a plain string,
on a runtime that carries one) is the question; the answer is a `KernelAnswer`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from pydantic import BaseModel, Field

from ext.core import AgentId, AgentRuntime, AgentType, BaseAgent, CantHandleError, ConfigurationError, MessageContext
from semantic_kernel.agents import ChatCompletionAgent, ChatHistoryAgentThread
from semantic_kernel.contents import ChatHistory, ChatMessageContent

from ._messages import usage_of

__all__ = ["KernelAgentHost", "KernelAnswer", "KernelTask", "host_kernel_agent"]


class KernelTask(BaseModel):
    """A message for a hosted kernel agent."""

    content: str = Field(description="What the user says to the agent.")


class KernelAnswer(BaseModel):
    """A hosted kernel agent's answer."""

    content: str = Field(description="The agent's reply text.")
    agent: str = Field(description="The kernel agent's name.")
    prompt_tokens: int = 0
    completion_tokens: int = 0


AgentMaker = Callable[[AgentId], ChatCompletionAgent]


class KernelAgentHost(BaseAgent):
    """An ext agent that answers with a kernel `ChatCompletionAgent`, one conversation per `AgentId`."""

    def __init__(self, id: AgentId, runtime: AgentRuntime, agent: ChatCompletionAgent) -> None:
        super().__init__(id, runtime)
        if not isinstance(agent, ChatCompletionAgent):
            raise ConfigurationError(f"the factory must return a ChatCompletionAgent, got {type(agent).__name__}")
        self._agent = agent
        self._history = ChatHistory()

    @property
    def kernel_agent(self) -> ChatCompletionAgent:
        return self._agent

    async def on_message(self, message: Any, ctx: MessageContext) -> Any:
        if isinstance(message, KernelTask):
            text = message.content
        elif isinstance(message, str):
            text = message
        else:
            raise CantHandleError(
                f"{self.id}: a kernel agent takes a KernelTask or a string, got {type(message).__name__}"
            )
        thread = ChatHistoryAgentThread(chat_history=self._history)
        response = await self._agent.get_response(messages=text, thread=thread)
        reply: ChatMessageContent = response.message
        usage = usage_of(reply)
        return KernelAnswer(
            content=reply.content,
            agent=self._agent.name,
            prompt_tokens=usage.prompt_tokens if usage else 0,
            completion_tokens=usage.completion_tokens if usage else 0,
        )

    async def save_state(self) -> Mapping[str, Any]:
        return {"history": self._history.serialize()}

    async def load_state(self, state: Mapping[str, Any]) -> None:
        history = state.get("history")
        if isinstance(history, str):
            self._history = ChatHistory.restore_chat_history(history)


async def host_kernel_agent(runtime: AgentRuntime, agent_type: str | AgentType, make_agent: AgentMaker) -> AgentType:
    """Register `agent_type` on `runtime`: each of its ids is a `KernelAgentHost` around `make_agent(agent_id)`.
    On a runtime with a message serializer (the gRPC worker), `KernelTask` and `KernelAnswer` are registered with
    it; callers in other processes register them too (`register_message_type`)."""
    if not callable(make_agent):
        raise ConfigurationError(f"make_agent must be a function of the AgentId, got {type(make_agent).__name__}")
    register = getattr(runtime, "register_message_type", None)
    if callable(register):
        for message_type in (KernelTask, KernelAnswer):
            register(message_type)
    return await runtime.register_agent_factory(
        agent_type, lambda agent_id, rt: KernelAgentHost(agent_id, rt, make_agent(agent_id))
    )
