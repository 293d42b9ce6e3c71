"""Agents' activation and deactivation in `LocalAgentRuntime`: creating an agent on its first message (with its
stored state), dropping it unsaved after a handler error, and releasing it (state saved, agent closed) when it has
been idle `idle_timeout` seconds or the runtime stops. What a state record holds and when the policy saves is
`_state.py`'s."""

from __future__ import annotations

import asyncio
import logging
from abc import abstractmethod

from ext.core import Agent, AgentId

from ._dispatch import Dispatcher
from ._mailbox import Slot, close_agent

__all__ = ["Activation"]

logger = logging.getLogger(__name__)


class Activation(Dispatcher):
    """When each agent is created and released; `_create` (the runtime's) builds one with its factory."""

    @abstractmethod
    async def _create(self, agent_id: AgentId) -> Agent:
        """A new agent for `agent_id`, from its type's factory."""

    async def _ensure_agent(self, slot: Slot) -> Agent:
        if slot.agent is not None:
            return slot.agent
        if slot.create_lock is None:
            slot.create_lock = asyncio.Lock()
        async with slot.create_lock:
            if slot.agent is None:
                agent = await self._create(slot.agent_id)
                if self._states is not None:
                    try:
                        await self._states.load(slot, agent)
                    except BaseException:
                        await close_agent(agent)
                        raise
                slot.agent = agent
            return slot.agent

    async def _roll_back(self, slot: Slot) -> None:
        """After a handler raised: with a state store, drop the agent unsaved, so the next message recreates it
        from its last saved state instead of building on a half-changed one."""
        if self._states is not None and slot.agent is not None:
            await self._release(slot, save=False)

    async def _release(self, slot: Slot, *, save: bool) -> None:
        """Close and forget the slot's agent, saving its state first when `save` (a save error is logged)."""
        slot.cancel_idle_timer()
        agent, slot.agent = slot.agent, None
        if agent is None:
            return
        if save and self._states is not None:
            try:
                await self._states.flush(slot, agent)
            except Exception:
                logger.exception("saving the state of %s failed: the changes since its last save are lost", agent.id)
        slot.version, slot.unsaved = None, 0
        await close_agent(agent)

    def _on_idle(self, slot: Slot) -> None:
        slot.idle_timer = None
        if slot.consumer is not None or slot.mailbox or self._closed or self._slots.get(slot.agent_id) is not slot:
            return
        # The deactivation is the slot's consumer while it runs: a message arriving meanwhile waits for it.
        slot.consumer = asyncio.get_running_loop().create_task(self._deactivate(slot))

    async def _deactivate(self, slot: Slot) -> None:
        try:
            await self._release(slot, save=True)
        finally:
            slot.consumer = None
            if slot.mailbox and not self._closed:
                slot.consumer = asyncio.get_running_loop().create_task(self._consume(slot))
            elif self._slots.get(slot.agent_id) is slot:
                del self._slots[slot.agent_id]  # nothing of the agent stays in memory
