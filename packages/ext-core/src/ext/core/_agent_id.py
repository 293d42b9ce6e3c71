"""Agent identity: `AgentId(type, key)` with string form `type/key`, and `AgentType(name)`."""

from __future__ import annotations

import re
from dataclasses import dataclass

_TYPE_RE = re.compile(r"^[\w\-.:]+$")


@dataclass(frozen=True, slots=True)
class AgentType:
    """The kind of an agent; factories are registered per type."""

    name: str

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not _TYPE_RE.match(self.name):
            raise ValueError(f"AgentType.name must be letters, digits, '_', '-', '.' or ':', got {self.name!r}")

    def __str__(self) -> str:
        return self.name


@dataclass(frozen=True, slots=True)
class AgentId:
    """The address of one agent: its type and a key within that type. String form `type/key`."""

    type: str
    key: str

    def __init__(self, type: str | AgentType, key: str) -> None:
        name = type.name if isinstance(type, AgentType) else type
        if not isinstance(name, str) or not _TYPE_RE.match(name):
            raise ValueError(f"AgentId.type must be letters, digits, '_', '-', '.' or ':', got {name!r}")
        if not isinstance(key, str) or not key or not key.isprintable():
            raise ValueError(f"AgentId.key must be a non-empty printable string, got {key!r}")
        object.__setattr__(self, "type", name)
        object.__setattr__(self, "key", key)

    @classmethod
    def from_str(cls, value: str) -> AgentId:
        """Parse `type/key` (the key may itself contain '/')."""
        agent_type, sep, key = value.partition("/")
        if not sep:
            raise ValueError(f"AgentId string must look like 'type/key', got {value!r}")
        return cls(agent_type, key)

    def __str__(self) -> str:
        return f"{self.type}/{self.key}"
