"""The messages, the agent and its journal that `ext.testing.conformance.RuntimeConformance` runs on a runtime, for
a runtime's own tests too: `EchoAgent` answers `Ping` with `Pong`, keeps `Note`s, fails on `Fail`, sleeps on `Slow`,
forwards a `Relay` and spoils its state on `Spoil`; a `Journal` records what the agents did. A runtime that
serializes messages registers `MESSAGE_TYPES`."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel

from ext.core import AgentId, AgentRuntime, MessageContext, RoutedAgent, TopicId, message_handler

__all__ = [
    # The agent and what it records
    "EchoAgent",
    "Journal",
    # The messages it handles
    "MESSAGE_TYPES",
    "Fail",
    "GetNotes",
    "Note",
    "Notes",
    "Ping",
    "Pong",
    "Relay",
    "Slow",
    "Spoil",
    "Unhandled",
]


class Ping(BaseModel):
    text: str


class Pong(BaseModel):
    text: str
    agent: str
    count: int
    sender: str | None = None


class Note(BaseModel):
    text: str


class GetNotes(BaseModel):
    pass


class Notes(BaseModel):
    agent: str
    notes: list[str]


class Fail(BaseModel):
    text: str


class Slow(BaseModel):
    seconds: float


class Relay(BaseModel):
    target_type: str
    target_key: str
    text: str


class Unhandled(BaseModel):
    pass


class Spoil(BaseModel):
    """Keeps the note, then fails: the half-changed state must not be saved."""

    text: str


MESSAGE_TYPES: tuple[type[BaseModel], ...] = (
    Ping,
    Pong,
    Note,
    GetNotes,
    Notes,
    Fail,
    Slow,
    Relay,
    Unhandled,
    Spoil,
)


class Journal:
    """What the suite's agents did, observed by the tests: created and closed agents, cancelled handlers, and the
    context of each `Note` handled (recipient, topic, message id, broadcast flag)."""

    def __init__(self) -> None:
        self.created: list[AgentId] = []
        self.noted: list[tuple[AgentId, TopicId | None, str, bool]] = []
        self.closed: list[AgentId] = []
        self.cancelled: list[AgentId] = []
        self.slow_started = asyncio.Event()
        self._closing = asyncio.Event()

    @property
    def live(self) -> int:
        """How many agent objects exist now (created and not yet closed)."""
        return len(self.created) - len(self.closed)

    def note_closed(self, agent_id: AgentId) -> None:
        self.closed.append(agent_id)
        closing, self._closing = self._closing, asyncio.Event()
        closing.set()

    async def wait_closed(self, count: int) -> None:
        """Until `count` agents have been closed in all (an event per close: no polling)."""
        while len(self.closed) < count:
            await self._closing.wait()


class EchoAgent(RoutedAgent):
    """Answers `Ping` with `Pong`, keeps `Note`s, fails on `Fail`, sleeps on `Slow`, forwards a `Relay`.
    Its state is its ping count and its notes."""

    def __init__(self, id: AgentId, runtime: AgentRuntime, journal: Journal) -> None:
        super().__init__(id, runtime)
        self.journal = journal
        self.count = 0
        self.notes: list[str] = []
        journal.created.append(id)

    @message_handler
    async def on_ping(self, message: Ping, ctx: MessageContext) -> Pong:
        self.count += 1
        sender = str(ctx.sender) if ctx.sender is not None else None
        return Pong(text=message.text, agent=str(self.id), count=self.count, sender=sender)

    @message_handler
    async def on_note(self, message: Note, ctx: MessageContext) -> None:
        self.journal.noted.append((self.id, ctx.topic_id, ctx.message_id, ctx.is_broadcast))
        self.notes.append(message.text + ("!" if ctx.is_broadcast else ""))

    @message_handler
    async def on_get_notes(self, message: GetNotes, ctx: MessageContext) -> Notes:
        return Notes(agent=str(self.id), notes=list(self.notes))

    @message_handler
    async def on_fail(self, message: Fail, ctx: MessageContext) -> None:
        raise ValueError(f"boom: {message.text}")

    @message_handler
    async def on_slow(self, message: Slow, ctx: MessageContext) -> Pong:
        self.journal.slow_started.set()
        try:
            await asyncio.sleep(message.seconds)
        except asyncio.CancelledError:
            self.journal.cancelled.append(self.id)
            raise
        return Pong(text="slow", agent=str(self.id), count=self.count)

    @message_handler
    async def on_relay(self, message: Relay, ctx: MessageContext) -> Pong:
        target = AgentId(message.target_type, message.target_key)
        reply = await self.send_and_await_response(Ping(text=message.text), target, 10.0)
        assert isinstance(reply, Pong)
        return reply

    @message_handler
    async def on_spoil(self, message: Spoil, ctx: MessageContext) -> None:
        self.notes.append(message.text)
        raise ValueError(f"spoilt: {message.text}")

    async def save_state(self) -> Mapping[str, Any]:
        return {"count": self.count, "notes": list(self.notes)}

    async def load_state(self, state: Mapping[str, Any]) -> None:
        self.count = int(state["count"])
        self.notes = [str(n) for n in state["notes"]]

    async def close(self) -> None:
        self.journal.note_closed(self.id)
