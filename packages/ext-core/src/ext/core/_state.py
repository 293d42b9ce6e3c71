"""Durable agent state: the `StateStore` protocol (records keyed by `AgentId`, each with a version so that two
writers cannot silently overwrite each other), the in-memory store, the save policy and the JSON checks.

A record's version grows by one with each write. `put(agent_id, state, expected_version)` writes only when the
stored version is `expected_version` (None: no record yet) and raises `StateConflictError` otherwise. A version
never repeats for a key: a new record starts one above the highest version the store ever deleted (at 1 in a
store that never deleted one), so a writer holding a version read before a delete cannot overwrite the record
created after it (the ABA case). A record the store cannot read raises `StateCorruptError` naming the agent and
where the record is; listings (`keys()`) leave it out and log it. The file-backed store is
`ext.runtime.local.FileStateStore`, the Redis one `ext.redis.RedisStateStore`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, NamedTuple, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field

from ._agent_id import AgentId, AgentType
from ._errors import ExtError
from ._json import json_dumps_compact, json_loads

__all__ = [
    "InMemoryStateStore",
    "SavePolicy",
    "StateConflictError",
    "StateCorruptError",
    "StateStore",
    "StoredState",
    "decode_state",
    "encode_state",
    "expected_version_of",
    "sorted_agent_ids",
]


class StateConflictError(ExtError, RuntimeError):
    """A state write found another version stored than the writer read: someone else wrote in between.

    Attributes: `agent_id`, `expected` (the version the writer read; None for "no record"), `found` (the
    version stored now; None when there is no record)."""

    def __init__(self, agent_id: AgentId, expected: int | None, found: int | None) -> None:
        def show(version: int | None) -> str:
            return "no record" if version is None else f"version {version}"

        super().__init__(
            f"the state of {agent_id} was written by someone else: expected {show(expected)}, found {show(found)} "
            "(read it again before writing)"
        )
        self.agent_id = agent_id
        self.expected = expected
        self.found = found


class StateCorruptError(ExtError, ValueError):
    """A stored state record cannot be read: it is not what the store writes (edited by hand, cut short by a full
    disk, written by another program or version). Delete the record (`StateStore.delete`) to start the agent
    over, or repair it from `where`.

    Attributes: `agent_id`, `where` (the file, or the Redis key and server) and `reason`."""

    def __init__(self, agent_id: AgentId, where: str, reason: str) -> None:
        super().__init__(f"the stored state of {agent_id} ({where}) cannot be read: {reason}")
        self.agent_id = agent_id
        self.where = where
        self.reason = reason


class StoredState(NamedTuple):
    """One record: the agent's state (a JSON object) and its version."""

    state: dict[str, Any]
    version: int


@runtime_checkable
class StateStore(Protocol):
    """Where agents' states are kept, keyed by `AgentId`. Implementations: `InMemoryStateStore`,
    `ext.runtime.local.FileStateStore`, `ext.redis.RedisStateStore`."""

    async def get(self, agent_id: AgentId) -> StoredState | None:
        """The stored record, or None; `StateCorruptError` naming the agent when the record cannot be read."""
        ...

    async def put(self, agent_id: AgentId, state: Mapping[str, Any], expected_version: int | None) -> int:
        """Write `state` if the stored version is `expected_version` (None: no record yet) and return the new
        version; raise `StateConflictError` otherwise, and `TypeError`/`ValueError` for a non-JSON state. A new
        record's version is above every version the key had before a `delete`."""
        ...

    async def delete(self, agent_id: AgentId) -> None:
        """Remove the record (no error when there is none; an unreadable record is removed too)."""
        ...

    async def keys(self, agent_type: str | AgentType | None = None) -> list[AgentId]:
        """The ids with a readable record (of one type, or all), sorted by type then key. A record that cannot
        be read is left out and logged at WARNING, so one bad record does not hide the others."""
        ...

    async def close(self) -> None:
        """Release connections and files. Idempotent."""
        ...


# --- JSON checks -----------------------------------------------------------------------------------------


def _is_json(value: Any) -> bool:
    """Whether `value` is made of JSON values only: the check of every save, without the paths `_check_json`
    builds for its error (walked only when this says no). Iterative, exact types first (subclasses after)."""
    stack = [value]
    pop, extend = stack.pop, stack.extend
    while stack:
        item = pop()
        kind = type(item)
        if kind is str or kind is int or kind is bool or item is None:
            continue
        if kind is dict or (kind is not list and isinstance(item, dict)):
            for key in item:
                if not isinstance(key, str):
                    return False
            extend(item.values())
        elif kind is list or isinstance(item, list):
            extend(item)
        elif isinstance(item, float):
            if not math.isfinite(item):
                return False
        elif not isinstance(item, (str, int)):
            return False
    return True


def _check_json(value: Any, path: str) -> None:
    if value is None or isinstance(value, (str, bool, int)):
        return
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"{path}: JSON has no {value!r}; expected a finite number")
        return
    if isinstance(value, list):
        for index, item in enumerate(value):
            _check_json(item, f"{path}[{index}]")
        return
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                raise TypeError(f"{path}: JSON object keys must be str, got {type(key).__name__} {key!r}")
            _check_json(item, f"{path}[{key!r}]")
        return
    raise TypeError(
        f"{path}: expected a JSON value (None, bool, int, float, str, list or dict with str keys), "
        f"got {type(value).__name__}"
    )


def encode_state(state: object) -> bytes:
    """`state` as compact JSON, after checking it is a mapping of JSON values (a `TypeError` or `ValueError`
    naming the offending path otherwise: tuples, sets, NaN and objects are refused rather than changed)."""
    if not isinstance(state, Mapping):
        raise TypeError(f"state must be a mapping (a JSON object), got {type(state).__name__}")
    plain = dict(state)
    if not _is_json(plain):
        _check_json(plain, "state")  # raises, naming the first value that is not JSON
    return json_dumps_compact(plain)


def decode_state(data: bytes | str) -> dict[str, Any]:
    """The state `encode_state` wrote."""
    value = json_loads(data)
    if not isinstance(value, dict):
        raise ValueError(f"a stored state must be a JSON object, found {type(value).__name__}")
    return value


def expected_version_of(value: object) -> int | None:
    """`expected_version` checked: a positive int or None (a `TypeError` naming it otherwise)."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise TypeError(f"expected_version must be a positive int or None (no record yet), got {value!r}")
    return value


def _type_filter(agent_type: str | AgentType | None) -> str | None:
    if agent_type is None:
        return None
    return agent_type.name if isinstance(agent_type, AgentType) else AgentType(agent_type).name


def sorted_agent_ids(ids: list[AgentId], agent_type: str | AgentType | None) -> list[AgentId]:
    """`ids` of `agent_type` (all when None), sorted by type then key: what `StateStore.keys` returns."""
    name = _type_filter(agent_type)
    return sorted((a for a in ids if name is None or a.type == name), key=lambda a: (a.type, a.key))


# --- the in-memory store ---------------------------------------------------------------------------------


class InMemoryStateStore:
    """Records in a dict of this process (the default store): state survives an agent's deactivation, not
    the process. Records are kept encoded, so later changes to a saved object never leak into the store."""

    def __init__(self) -> None:
        self._records: dict[AgentId, tuple[bytes, int]] = {}
        # The highest version a deleted record had: a new record starts above it, so no key sees a version twice.
        self._deleted_max = 0

    def __len__(self) -> int:
        return len(self._records)

    async def get(self, agent_id: AgentId) -> StoredState | None:
        record = self._records.get(agent_id)
        return None if record is None else StoredState(decode_state(record[0]), record[1])

    async def put(self, agent_id: AgentId, state: Mapping[str, Any], expected_version: int | None) -> int:
        expected = expected_version_of(expected_version)
        data = encode_state(state)
        record = self._records.get(agent_id)
        found = None if record is None else record[1]
        if found != expected:
            raise StateConflictError(agent_id, expected, found)
        version = self._deleted_max + 1 if found is None else found + 1
        self._records[agent_id] = (data, version)
        return version

    async def delete(self, agent_id: AgentId) -> None:
        record = self._records.pop(agent_id, None)
        if record is not None:
            self._deleted_max = max(self._deleted_max, record[1])

    async def keys(self, agent_type: str | AgentType | None = None) -> list[AgentId]:
        return sorted_agent_ids(list(self._records), agent_type)

    async def close(self) -> None:
        """Nothing to release (records stay readable)."""

    def __repr__(self) -> str:
        return f"InMemoryStateStore(records={len(self._records)})"


# --- the save policy -------------------------------------------------------------------------------------


class SavePolicy(BaseModel):
    """When a runtime with a state store saves an agent's state. Whatever the policy, the state is also saved
    when the agent is deactivated (idle) and when the runtime stops, and never after a handler that raised.

    `SavePolicy()` saves after each message; `SavePolicy.every(n)` after every n-th; `SavePolicy.on_deactivation()`
    only on deactivation and stop."""

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    every_n_messages: int | None = Field(
        default=1,
        ge=1,
        description="Save after every n-th message an agent handled successfully; None: only on deactivation and stop.",
    )

    @classmethod
    def after_each_message(cls) -> SavePolicy:
        return cls(every_n_messages=1)

    @classmethod
    def every(cls, n: int) -> SavePolicy:
        return cls(every_n_messages=n)

    @classmethod
    def on_deactivation(cls) -> SavePolicy:
        return cls(every_n_messages=None)
