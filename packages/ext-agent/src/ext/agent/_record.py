"""A session as it is stored: one `StateStore` record per session, keyed `AgentId("<agent name>.sessions", id)`.

```
{"format": 2,
 "messages": ["{...}", ...], # the conversation, one JSON text per message (core's message JSON), the
                             # unfinished turn included
 "turn": null | {            # the unfinished turn, while a run is under way, crashed, or waits for approval
     "start": 3,             # index of its first message
     "instructions": "...",  # the system text rendered when it began (a resume uses the same)
     "held": ["call_1"],     # calls held for approval
     "approved": ["call_1"], # held calls approved (denied ones have their result already)
     "output_retries": 0},   # corrective retries made for a typed answer
 "state": {...}}             # the application's own JSON state for the session
```

Every write passes the version read (the store's compare-and-set), so two processes running one session
cannot overwrite each other's steps: the second gets `StateConflictError`.

Why one JSON text per message (format 2): a run writes the whole record at each step (3 to 4 times in a turn
with one tool call), and a message never changes once it is in the conversation (the agent replaces a message,
it never edits one). So each message is serialized once, when it first reaches the record, and a write hands the
store a list of strings, which the store checks and encodes in a few microseconds instead of re-serializing and
re-walking every message of the history. A record read keeps the texts it read, so a continued session does not
serialize its old messages again. Format 1 (written before format 2: `messages` as a list of message objects) is
still read; the next write of that session stores format 2.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from ext.core import LLMMessage, dump_messages, load_messages

__all__ = ["FORMAT", "SessionRecord", "TurnRecord", "message_json"]

FORMAT = 2
"""The format this version writes; it reads 1 and 2."""


class TurnRecord(BaseModel):
    model_config = ConfigDict(extra="forbid")

    start: int = Field(ge=0)
    instructions: str | None = None
    held: list[str] = Field(default_factory=list)
    approved: list[str] = Field(default_factory=list)
    output_retries: int = Field(default=0, ge=0)


def message_json(message: LLMMessage) -> str:
    """One message as the JSON text `dump_messages` writes for it inside a list."""
    return dump_messages([message])[1:-1]


@dataclass(eq=False, slots=True)
class SessionRecord:
    """A session record in memory. `messages` is edited in place by the run (append, replace the last, drop the
    oldest); `to_state` serializes only the message objects it has not serialized before."""

    messages: list[LLMMessage] = field(default_factory=list)
    turn: TurnRecord | None = None
    state: dict[str, Any] = field(default_factory=dict)
    # id(message) -> (message, its JSON text). The message is held so that its id is not reused while cached.
    _texts: dict[int, tuple[LLMMessage, str]] = field(default_factory=dict, repr=False)

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> SessionRecord:
        version = state.get("format", 1)
        if version not in (1, 2):
            raise ValueError(f"session record format {version!r} is not one this ext-agent reads (1 or 2)")
        stored = state.get("messages") or []
        if not isinstance(stored, list):
            raise ValueError(f"session record 'messages' must be a list, got {type(stored).__name__}")
        turn = state.get("turn")
        record = cls(
            turn=None if turn is None else TurnRecord.model_validate(turn),
            state=state.get("state") or {},
        )
        if version == 1:
            record.messages = load_messages(stored)
            return record
        if not all(isinstance(text, str) for text in stored):
            raise ValueError("session record 'messages' (format 2) must be a list of JSON texts")
        messages = load_messages("[" + ",".join(stored) + "]")
        if len(messages) != len(stored):  # a text holding more or fewer than one message
            raise ValueError("session record 'messages' (format 2) must hold one message per JSON text")
        record.messages = messages
        record._texts = {id(m): (m, text) for m, text in zip(messages, stored, strict=True)}
        return record

    def to_state(self) -> dict[str, Any]:
        cached = self._texts
        texts: dict[int, tuple[LLMMessage, str]] = {}
        out: list[str] = []
        for message in self.messages:
            entry = cached.get(id(message))
            if entry is None or entry[0] is not message:
                entry = (message, message_json(message))
            texts[id(message)] = entry
            out.append(entry[1])
        self._texts = texts  # drops the messages no longer in the record
        return {
            "format": FORMAT,
            "messages": out,
            "turn": None if self.turn is None else self.turn.model_dump(),
            "state": self.state,
        }
