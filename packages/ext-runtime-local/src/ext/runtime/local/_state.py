"""Agents' durable state for `LocalAgentRuntime` (and so for `ext.runtime.grpc` workers, which host their agents
in one): loading a record on activation, saving per the `SavePolicy`, and the version each agent last read.

The runtime decides when (its mailboxes order every call with the agent's messages); this module decides what:
an agent without `save_state`/`load_state` (an `Agent` that is not a `BaseAgent`) is stateless and never
written."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from ext.core import Agent, AgentId, SavePolicy, StateStore, UndeliverableError

__all__ = ["AgentStates", "StatefulSlot"]


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
