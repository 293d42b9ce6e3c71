"""The pieces of `LocalAgentRuntime`'s per-agent mailboxes: a `Delivery` (one message on its way), an `AgentCall`
(a state save or load run in turn with the messages) and the `Slot` of one agent id."""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from ext.core import Agent, AgentId, MessageContext, TraceContext

__all__ = [
    "CANCELLING",
    "DONE",
    "QUEUED",
    "RUNNING",
    "AgentCall",
    "Delivery",
    "Reply",
    "Slot",
    "close_agent",
    "save_agent_state",
    "uncancel",
]

logger = logging.getLogger(__name__)

Reply = Callable[[Any, "BaseException | None"], Awaitable[None]]

QUEUED, RUNNING, CANCELLING, DONE = range(4)


class Delivery:
    """One message on its way to one agent: queued in the agent's mailbox, then handled. Returned by
    `LocalAgentRuntime.deliver` so a hosting runtime can cancel it. `answer_trace` is the trace context of its
    handling (set by the runtime's observer), which an RPC's answer carries back."""

    __slots__ = ("_slot", "answer_trace", "ctx", "future", "message", "reply", "state")

    def __init__(
        self,
        slot: Slot,
        message: Any,
        ctx: MessageContext,
        future: asyncio.Future[Any] | None,
        reply: Reply | None,
    ) -> None:
        self._slot = slot
        self.message = message
        self.ctx = ctx
        self.future = future
        self.reply = reply
        self.state = QUEUED
        self.answer_trace: TraceContext | None = None

    @property
    def done(self) -> bool:
        return self.state == DONE


class AgentCall:
    """A mailbox item that calls `fn(agent)` instead of `on_message`: state saves and loads asked of the
    runtime run in turn with the agent's messages, never in the middle of a handler."""

    __slots__ = ("fn",)

    def __init__(self, fn: Callable[[Agent], Awaitable[Any]]) -> None:
        self.fn = fn


class Slot:
    """One agent id: its instance once created, and its mailbox. A consumer task runs while the mailbox
    has messages, so handlers of one agent run one at a time, in arrival order, with no task per message.
    With a state store: the version last read or written, and how many messages were handled since."""

    __slots__ = (
        "agent",
        "agent_id",
        "consumer",
        "create_lock",
        "current",
        "idle_timer",
        "mailbox",
        "unsaved",
        "version",
    )

    def __init__(self, agent_id: AgentId) -> None:
        self.agent_id = agent_id
        self.agent: Agent | None = None
        self.mailbox: deque[Delivery] = deque()
        self.consumer: asyncio.Task[None] | None = None
        self.current: Delivery | None = None
        self.create_lock: asyncio.Lock | None = None
        self.version: int | None = None
        self.unsaved = 0
        self.idle_timer: asyncio.TimerHandle | None = None

    def cancel_idle_timer(self) -> None:
        """Called when a message arrives (or the agent is released): the agent is no longer idle."""
        if self.idle_timer is not None:
            self.idle_timer.cancel()
            self.idle_timer = None


async def save_agent_state(agent: Agent) -> Mapping[str, Any]:
    state: Mapping[str, Any] = await agent.save_state()  # type: ignore[attr-defined]
    return state


async def close_agent(agent: Agent) -> None:
    try:
        await agent.close()
    except Exception:
        logger.exception("closing agent %s failed", agent.id)


def uncancel() -> None:
    """Forget a handled cancellation (3.11+), so later handlers on this consumer see a clean task."""
    task = asyncio.current_task()
    uncancel = getattr(task, "uncancel", None)
    if uncancel is not None:
        uncancel()
