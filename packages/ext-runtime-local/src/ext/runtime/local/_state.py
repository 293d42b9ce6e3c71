"""Agents' durable state for `LocalAgentRuntime` (and so for `ext.runtime.grpc` workers, which host their agents
in one): loading a record on activation, saving per the `SavePolicy`, and the version each agent last read.

The runtime decides when (its mailboxes order every call with the agent's messages); this module decides what:
an agent without `save_state`/`load_state` (an `Agent` that is not a `BaseAgent`) is stateless and never
written."""

from __future__ import annotations

import logging
from collections.abc import Container, Mapping
from typing import Any, Protocol

from ext.core import Agent, AgentId, AgentNotFoundError, SavePolicy, StateCorruptError, StateStore, UndeliverableError

__all__ = ["AgentStates", "StatefulSlot", "parse_runtime_state"]

logger = logging.getLogger(__name__)


def parse_runtime_state(state: object, agent_types: Container[str]) -> list[tuple[AgentId, Mapping[str, Any]]]:
    """The (agent id, state) pairs of what a runtime's `save_state` returned, checked before any agent changes:
    `type/key` keys of registered types, mapping values."""
    if not isinstance(state, Mapping):
        raise TypeError(f"state must be a mapping of 'type/key' to agent states, got {type(state).__name__}")
    targets: list[tuple[AgentId, Mapping[str, Any]]] = []
    for key, agent_state in state.items():
        try:
            agent_id = AgentId.from_str(key)
        except (TypeError, ValueError, AttributeError) as exc:
            raise ValueError(f"state: key {key!r} is not an agent id 'type/key': {exc}") from None
        if not isinstance(agent_state, Mapping):
            raise TypeError(f"state[{key!r}] must be a mapping, got {type(agent_state).__name__}")
        if agent_id.type not in agent_types:
            raise AgentNotFoundError(f"state[{key!r}]: no agent factory is registered for {agent_id.type!r}")
        targets.append((agent_id, agent_state))
    return targets


class StatefulSlot(Protocol):
    """What this module reads and writes on a runtime's per-agent slot."""

    agent_id: AgentId
    version: int | None
    unsaved: int


class AgentStates:
    """The store, the policy, and the load/save steps around an agent's life."""

    __slots__ = ("every", "policy", "store")

    def __init__(self, store: StateStore, policy: SavePolicy) -> None:
        self.store = store
        self.policy = policy
        self.every = policy.every_n_messages

    async def stored(self, agent_types: Container[str]) -> dict[str, Mapping[str, Any]]:
        """Every stored state of an agent of `agent_types`, keyed by `str(agent_id)`. A record that cannot be read
        is left out with a warning naming it: one bad record must not hide every other agent's state."""
        result: dict[str, Mapping[str, Any]] = {}
        for agent_id in await self.store.keys():
            if agent_id.type not in agent_types:
                continue
            try:
                record = await self.store.get(agent_id)
            except StateCorruptError as exc:
                logger.warning("leaving out a state that cannot be read: %s", exc)
                continue
            if record is not None:
                result[str(agent_id)] = record.state
        return result

    async def load(self, slot: StatefulSlot, agent: Agent) -> None:
        """Give a newly created agent its stored state (if any), remembering the version read."""
        try:
            record = await self.store.get(slot.agent_id)
            if record is not None:
                loader = getattr(agent, "load_state", None)
                if loader is not None:
                    await loader(record.state)
        except Exception as exc:
            raise UndeliverableError(f"loading the state of {slot.agent_id} failed: {exc}") from exc
        slot.version = None if record is None else record.version
        slot.unsaved = 0

    async def save(self, slot: StatefulSlot, agent: Agent) -> None:
        """Write the agent's state now (compare-and-set on the version read; `StateConflictError` when another
        writer got there first)."""
        saver = getattr(agent, "save_state", None)
        if saver is None:
            slot.unsaved = 0
            return
        state: Mapping[str, Any] = await saver()
        slot.version = await self.store.put(slot.agent_id, state, slot.version)
        slot.unsaved = 0

    async def handled(self, slot: StatefulSlot, agent: Agent) -> None:
        """After a message was handled without error: save when the policy says so."""
        slot.unsaved += 1
        every = self.every
        if every is not None and slot.unsaved >= every:
            await self.save(slot, agent)

    async def flush(self, slot: StatefulSlot, agent: Agent) -> None:
        """On deactivation and stop: save what the policy has not saved yet."""
        if slot.unsaved:
            await self.save(slot, agent)
