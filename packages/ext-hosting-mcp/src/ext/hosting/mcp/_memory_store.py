"""`MemorySessionStore`: sessions and their events in this process's memory (one server process; the default)."""

from __future__ import annotations

import contextlib
import time
from collections.abc import AsyncIterator

import mcp_types as types
from mcp.server.streamable_http import EventCallback, EventMessage, EventStore

from ._sessions import SessionRecord

__all__ = ["MemorySessionStore"]


class _Events(EventStore):
    """One session's events; ids are `<n>` in one sequence, so a replay names its stream by the event it starts at.
    Keeps at most `limit` events (the oldest go first)."""

    def __init__(self, limit: int) -> None:
        self._events: dict[int, tuple[str, types.JSONRPCMessage | None]] = {}
        self._next = 0
        self._limit = limit

    async def store_event(self, stream_id: str, message: types.JSONRPCMessage | None) -> str:
        self._next += 1
        self._events[self._next] = (stream_id, message)
        if len(self._events) > self._limit:
            del self._events[next(iter(self._events))]
        return str(self._next)

    async def replay_events_after(self, last_event_id: str, send_callback: EventCallback) -> str | None:
        if not last_event_id.isdigit() or int(last_event_id) not in self._events:
            return None
        after = int(last_event_id)
        stream = self._events[after][0]
        for number, (stream_id, message) in list(self._events.items()):
            if number > after and stream_id == stream and message is not None:
                await send_callback(EventMessage(message, str(number)))
        return stream


class MemorySessionStore:
    """Sessions in memory: a restart forgets them. `max_events` bounds each session's replay buffer; expired sessions
    are dropped at most `sweep_every` seconds after they expire."""

    def __init__(self, *, max_events: int = 1000, sweep_every: float = 60.0) -> None:
        self._records: dict[str, tuple[SessionRecord, float]] = {}
        self._events: dict[str, _Events] = {}
        self._max_events = max_events
        self._next_sweep = 0.0
        self._sweep_every = sweep_every

    def __len__(self) -> int:
        """Sessions held (expired ones go at the next sweep)."""
        return len(self._records)

    def _sweep(self) -> None:
        # Expired sessions nobody asks for again would otherwise stay forever.
        now = time.monotonic()
        if now < self._next_sweep:
            return
        self._next_sweep = now + self._sweep_every
        for session_id in [s for s, (_, until) in self._records.items() if until < now]:
            self._records.pop(session_id, None)
            self._events.pop(session_id, None)

    def _alive(self, session_id: str) -> SessionRecord | None:
        found = self._records.get(session_id)
        if found is None:
            return None
        if found[1] < time.monotonic():
            self._records.pop(session_id, None)
            self._events.pop(session_id, None)
            return None
        return found[0]

    async def save(self, session_id: str, record: SessionRecord, ttl: float) -> None:
        self._sweep()
        self._records[session_id] = (record, time.monotonic() + ttl)

    async def load(self, session_id: str, ttl: float) -> SessionRecord | None:
        record = self._alive(session_id)
        if record is not None:
            self._records[session_id] = (record, time.monotonic() + ttl)
        return record

    async def touch(self, session_id: str, ttl: float) -> bool:
        return await self.load(session_id, ttl) is not None

    async def delete(self, session_id: str) -> None:
        self._records.pop(session_id, None)
        self._events.pop(session_id, None)

    def event_store(self, session_id: str, ttl: float) -> EventStore:
        return self._events.setdefault(session_id, _Events(self._max_events))

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        yield
