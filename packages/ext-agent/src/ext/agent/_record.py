"""A session as it is stored: one `StateStore` record per session, keyed `AgentId("<agent name>.sessions", id)`.

```
{"format": 1,
 "messages": [...],          # the conversation (core's message JSON), the unfinished turn included
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
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from ext.core import LLMMessage, dump_messages, json_loads, load_messages

__all__ = ["SessionRecord", "TurnRecord"]

FORMAT = 1


class TurnRecord(BaseModel):
    model_config = ConfigDict(extra="forbid")

    start: int = Field(ge=0)
    instructions: str | None = None
    held: list[str] = Field(default_factory=list)
    approved: list[str] = Field(default_factory=list)
    output_retries: int = Field(default=0, ge=0)


class SessionRecord(BaseModel):
    model_config = ConfigDict(extra="forbid", arbitrary_types_allowed=True)

    format: int = FORMAT
    messages: list[LLMMessage] = Field(default_factory=list)
    turn: TurnRecord | None = None
    state: dict[str, Any] = Field(default_factory=dict)

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> SessionRecord:
        turn = state.get("turn")
        return cls(
            format=state.get("format", FORMAT),
            messages=load_messages(state.get("messages") or []),
            turn=None if turn is None else TurnRecord.model_validate(turn),
            state=state.get("state") or {},
        )

    def to_state(self) -> dict[str, Any]:
        return {
            "format": self.format,
            "messages": json_loads(dump_messages(list(self.messages))),
            "turn": None if self.turn is None else self.turn.model_dump(),
            "state": self.state,
        }
