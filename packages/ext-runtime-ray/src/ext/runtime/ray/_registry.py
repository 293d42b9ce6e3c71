"""`Registry`: the one actor per Ray namespace that every `RayAgentRuntime` of that namespace shares (named
`ext-registry`, detached). It knows the registered agent types (`TypeSpec`s), the subscriptions and the active
agents' actors, and it is the one place that creates an agent's actor, so two processes asking for the same agent
at once get the same actor.

It also carries the calls from actors to the objects that stay in a member's process (`_link.py`).

Lifetime: runtimes `join` on start and `leave` on stop. When the last one leaves, the subscriptions go, and once no
agent is active either the registry exits (after a few seconds, so a runtime starting just then reuses it): a
namespace leaves nothing running behind it. A driver that dies without `stop()` keeps it
(and the agents of the types it registered) alive until the actors go idle or are killed; `ray.kill` of the
registry is the reset.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections import OrderedDict
from typing import Any

import ray
from ext.core import AgentId, Subscription, SubscriptionTable, TopicId

from ._agent_actor import AgentActor
from ._link import CallQueues
from ._spec import TypeSpec
from ._wire import NOT_FOUND, actor_name

__all__ = ["Registry", "RemoteRegistry"]

logger = logging.getLogger(__name__)

_EXIT_DELAY = 5.0
_RETIRED_KEPT = 10_000

RemoteAgentActor = ray.remote(AgentActor)


class Registry:
    def __init__(self, namespace: str) -> None:
        self._namespace = namespace
        self._types: dict[str, TypeSpec] = {}
        self._agents: dict[AgentId, Any] = {}  # agent id -> its actor's handle
        self._incarnations: dict[AgentId, str] = {}
        self._ids = itertools.count(1)
        self._retired: OrderedDict[str, None] = OrderedDict()
        self._subscriptions = SubscriptionTable()
        self._members: set[str] = set()
        self._exit: asyncio.TimerHandle | None = None
        self._calls = CallQueues()

    # --- members ---

    async def join(self, member: str) -> None:
        self._members.add(member)
        self._calls.open(member)
        if self._exit is not None:
            self._exit.cancel()
            self._exit = None

    def _exit_if_unused(self) -> None:
        # The namespace's subscriptions last while a runtime of it runs. The exit is deferred, so that the call that
        # emptied the registry returns first and a runtime starting soon after reuses it (a `join` cancels it).
        if not self._members:
            self._subscriptions = SubscriptionTable()
        if not self._members and not self._agents and self._exit is None:
            me = ray.get_runtime_context().current_actor
            self._exit = asyncio.get_running_loop().call_later(_EXIT_DELAY, ray.kill, me)

    async def release_types(self, member: str) -> list[tuple[AgentId, Any]]:
        """Forget the types `member` registered; the active agents of those types, which the member deactivates
        (before it leaves: their last saves may reach objects in its process)."""
        owned = {name for name, spec in self._types.items() if spec.owner == member}
        for name in owned:
            del self._types[name]
        agents = [(a, h) for a, h in self._agents.items() if a.type in owned]
        for agent_id, _ in agents:
            self._forget(agent_id)
        return agents

    async def leave(self, member: str) -> None:
        """Forget `member` (its queue of calls closes). Exits when nobody is left."""
        self._members.discard(member)
        self._calls.close(member)
        self._exit_if_unused()

    async def dead(self, agent_id: AgentId, incarnation: str) -> None:
        """The agent's actor could not start (a dying one still held its name): the next activation makes another."""
        if self._incarnations.get(agent_id) == incarnation:
            self._forget(agent_id)

    # --- calls from actors to members (see _link.py) ---

    async def call(self, member: str, target: int, path: tuple[str, ...], args: tuple[Any, ...]) -> tuple[bool, Any]:
        return await self._calls.call(member, target, path, args)

    async def take(self, member: str) -> list[tuple[int, int, tuple[str, ...], tuple[Any, ...]]] | None:
        return await self._calls.take(member)

    async def answer(self, call_id: int, ok: bool, value: Any) -> None:
        self._calls.answer(call_id, ok, value)

    # --- types ---

    async def register(self, agent_type: str, spec: TypeSpec) -> bool:
        if agent_type in self._types:
            return False
        self._types[agent_type] = spec
        return True

    async def registered(self, agent_types: list[str]) -> list[str]:
        return [t for t in agent_types if t in self._types]

    # --- agents ---

    async def activate(self, agent_id: AgentId) -> tuple[Any, str] | str:
        """The agent's actor and its incarnation (an id of this activation), the actor created if there is none;
        `NOT_FOUND` when its type is not registered."""
        handle = self._agents.get(agent_id)
        if handle is not None:
            return handle, self._incarnations[agent_id]
        spec = self._types.get(agent_id.type)
        if spec is None:
            return NOT_FOUND
        options: dict[str, Any] = {
            "name": actor_name(agent_id),
            "namespace": self._namespace,
            "lifetime": "detached",
            "get_if_exists": True,
            "max_concurrency": 1000,
            "num_cpus": 0,
        }
        options.update(spec.actor_options)
        incarnation = f"{agent_id}#{next(self._ids)}"
        handle = RemoteAgentActor.options(**options).remote(agent_id, incarnation, spec, self._namespace)
        self._agents[agent_id] = handle
        self._incarnations[agent_id] = incarnation
        return handle, incarnation

    async def retired(self, agent_id: AgentId, incarnation: str) -> None:
        if self._incarnations.get(agent_id) == incarnation:
            self._forget(agent_id)
        self._retired[incarnation] = None
        while len(self._retired) > _RETIRED_KEPT:
            self._retired.popitem(last=False)
        self._exit_if_unused()

    async def was_retired(self, incarnation: str) -> bool:
        return incarnation in self._retired

    def _forget(self, agent_id: AgentId) -> None:
        self._agents.pop(agent_id, None)
        self._incarnations.pop(agent_id, None)

    async def active(self, agent_type: str | None) -> list[tuple[AgentId, Any]]:
        return [(a, h) for a, h in self._agents.items() if agent_type is None or a.type == agent_type]

    # --- topics ---

    async def add_subscription(self, subscription: Subscription) -> None:
        self._subscriptions.add(subscription)

    async def remove_subscription(self, id: str) -> str | None:
        """None when removed, else why not (the runtime raises `LookupError` with it)."""
        try:
            self._subscriptions.remove(id)
        except LookupError as exc:
            return str(exc.args[0]) if exc.args else str(exc)
        return None

    async def subscriptions(self) -> list[Subscription]:
        return self._subscriptions.subscriptions()

    async def recipients(self, topic_id: TopicId, sender: AgentId | None) -> tuple[list[AgentId], list[str]]:
        """The recipients of a publish (each once, the sender left out) and the types among them that have no
        factory."""
        recipients = [r for r in self._subscriptions.recipients(topic_id) if r != sender]
        missing = sorted({r.type for r in recipients if r.type not in self._types})
        return recipients, missing


RemoteRegistry = ray.remote(num_cpus=0)(Registry)
