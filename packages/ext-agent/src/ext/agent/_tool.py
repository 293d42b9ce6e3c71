"""`AgentTool`: an agent as another agent's tool (`ChatAgent.as_tool()`)."""

from __future__ import annotations

from typing import Any, Protocol

from pydantic import BaseModel, Field

from ext.core import BaseTool, CancellationToken, check_tool_name, json_dumps_compact

from ._events import RunResult

__all__ = ["AgentTool", "AgentToolArgs", "RunnableAgent"]


class RunnableAgent(Protocol):
    """What `AgentTool` needs of an agent (`ChatAgent` is one)."""

    @property
    def name(self) -> str: ...

    @property
    def description(self) -> str: ...

    async def run(self, input: str, *, cancellation_token: CancellationToken | None = None) -> RunResult[Any]: ...


class AgentToolArgs(BaseModel):
    """The argument of an agent used as a tool."""

    request: str = Field(description="What to ask the agent, in full: it does not see the caller's conversation.")


class AgentTool(BaseTool):
    """Runs `agent` on the `request` argument (a new session per call) and returns its answer: the text, or the
    JSON of a typed answer. A run that stops for approval returns an error naming the held calls (the inner
    agent's approvals are decided on its own sessions). Cancelling the call cancels the inner run."""

    def __init__(self, agent: RunnableAgent, *, name: str | None = None, description: str | None = None) -> None:
        tool_name = check_tool_name(name if name is not None else agent.name)
        text = description if description is not None else (agent.description or f"Ask the {agent.name} agent.")
        super().__init__(name=tool_name, description=text, args_type=AgentToolArgs)
        self._agent = agent

    @property
    def agent(self) -> RunnableAgent:
        return self._agent

    async def run(self, args: Any, cancellation_token: CancellationToken | None) -> str:
        assert isinstance(args, AgentToolArgs)
        result = await self._agent.run(args.request, cancellation_token=cancellation_token)
        if result.status != "completed":
            held = ", ".join(f"{p.name} ({p.call_id})" for p in result.pending)
            raise RuntimeError(
                f"the {self._agent.name} agent waits for approval of {held} in session {result.session_id}"
            )
        value = result.output
        if isinstance(value, BaseModel):
            return json_dumps_compact(value.model_dump(mode="json")).decode("utf-8")
        return str(value)
