"""Agents and messages the Ray tests' actors import by name (the tests' conftest puts this folder on the workers'
PYTHONPATH)."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel

from ext.core import AgentId, AgentRuntime, MessageContext, RoutedAgent, message_handler


class Bump(BaseModel):
    pass


class Where(BaseModel):
    agent: str
    count: int
    pid: int
    node: str


class Hang(BaseModel):
    seconds: float


class Forward(BaseModel):
    target_type: str
    target_key: str


class Route(BaseModel):
    here: Where
    there: Where


def _where(agent: CounterAgent) -> Where:
    import ray

    return Where(agent=str(agent.id), count=agent.count, pid=os.getpid(), node=ray.get_runtime_context().get_node_id())


class CounterAgent(RoutedAgent):
    """Counts `Bump`s (its state), says where it runs, hangs on `Hang`, forwards a `Bump` on `Forward`."""

    def __init__(self, id: AgentId, runtime: AgentRuntime) -> None:
        super().__init__(id, runtime)
        self.count = 0

    @message_handler
    async def on_bump(self, message: Bump, ctx: MessageContext) -> Where:
        self.count += 1
        return _where(self)

    @message_handler
    async def on_hang(self, message: Hang, ctx: MessageContext) -> Where:
        await asyncio.sleep(message.seconds)
        return _where(self)

    @message_handler
    async def on_forward(self, message: Forward, ctx: MessageContext) -> Route:
        there = await self.send_and_await_response(Bump(), AgentId(message.target_type, message.target_key), 30.0)
        assert isinstance(there, Where)
        return Route(here=_where(self), there=there)

    async def save_state(self) -> Mapping[str, Any]:
        return {"count": self.count}

    async def load_state(self, state: Mapping[str, Any]) -> None:
        self.count = int(state["count"])
