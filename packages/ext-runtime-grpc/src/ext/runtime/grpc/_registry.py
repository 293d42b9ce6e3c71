"""The gateway's registry: which worker hosts which agent types, where each active agent is placed, the topic
subscription table, and (for replicas) how gateways reach each other. `InMemoryRegistry` serves one gateway;
`RedisRegistry` (`_redis_registry.py`) lets several gateway processes share one registry."""

from __future__ import annotations

import hashlib
import json
import logging
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable

from ext.core import (
    AgentId,
    Subscription,
    SubscriptionTable,
    TopicId,
    TypePrefixSubscription,
    TypeSubscription,
    UndeliverableError,
    check_subscription,
)

logger = logging.getLogger(__name__)

Inbox = Callable[[bytes], Awaitable[None]]
"""Receives payloads other gateways publish to this one."""

GatewayGone = Callable[[str], Awaitable[None]]
"""Told the id of a gateway whose lease ran out."""

LinkLost = Callable[[str], Awaitable[None]]
"""Told (with the reason) that messages other gateways sent to this one may have been lost: the link to the
shared registry broke, or came back after a break."""


class RegistryUnavailableError(UndeliverableError):
    """The shared registry (Redis) cannot be reached: what needs it fails with this at once, naming the
    registry (host and port only, never credentials), instead of waiting for a deadline."""


def shared_kind(subscription: object) -> tuple[str, str, str]:
    """`(kind, topic type or prefix, agent type)` of a subscription the cluster can share: kind "type" or "prefix".
    Only the built-in kinds can be shared (another process must rebuild them); anything else is a `TypeError`
    naming the argument."""
    subscription = check_subscription(subscription)
    if type(subscription) is TypeSubscription:
        return "type", subscription.topic_type, subscription.agent_type
    if type(subscription) is TypePrefixSubscription:
        return "prefix", subscription.topic_type_prefix, subscription.agent_type
    raise TypeError(
        "subscription must be a TypeSubscription or TypePrefixSubscription to be shared across the cluster, "
        f"got {type(subscription).__name__}"
    )


def subscription_record(subscription: object) -> str:
    """A subscription as the registry stores it (the Redis hash's value): compact JSON of its kind, topic type or
    prefix and agent type, with sorted keys, so equal subscriptions have equal records."""
    kind, topic, agent_type = shared_kind(subscription)
    field = "topic_type" if kind == "type" else "topic_type_prefix"
    return json.dumps({"kind": kind, field: topic, "agent_type": agent_type}, sort_keys=True, separators=(",", ":"))


def subscription_of_record(id: str, record: str | bytes) -> Subscription:
    """The subscription `id` from its stored record (`ValueError` for a record this version cannot read)."""
    try:
        fields = json.loads(record)
        kind, agent_type = fields["kind"], fields["agent_type"]
        if kind == "type":
            return TypeSubscription(fields["topic_type"], agent_type, id=id)
        if kind == "prefix":
            return TypePrefixSubscription(fields["topic_type_prefix"], agent_type, id=id)
    except (ValueError, KeyError, TypeError) as exc:
        raise ValueError(f"subscription {id!r} has an unreadable record {record!r}: {exc}") from None
    raise ValueError(f"subscription {id!r} has an unknown kind {kind!r}")


def rendezvous(agent_id: AgentId, workers: list[str]) -> str:
    """Highest-random-weight choice: stable for a key, and only the keys of a departed worker move."""
    key = str(agent_id).encode()
    return max(workers, key=lambda w: hashlib.blake2b(key + b"|" + w.encode(), digest_size=8).digest())


class Registry(ABC):
    """What a gateway needs from the shared state. Worker ids are cluster-unique; every worker belongs to one
    gateway."""

    gateway_id: str = ""

    async def start(
        self,
        gateway_id: str,
        inbox: Inbox,
        gateway_gone: GatewayGone | None = None,
        *,
        link_lost: LinkLost | None = None,
    ) -> None:
        self.gateway_id = gateway_id

    async def close(self) -> None:  # noqa: B027 - nothing to release by default
        """Release connections; the gateway's own registrations are removed by `remove_worker` before this."""

    @abstractmethod
    async def add(self, worker_id: str, agent_type: str, *, instance: str = "") -> None:
        """Record that `worker_id` (on this gateway) hosts `agent_type`; `instance` is the worker process's secret
        instance id (for `adopt`)."""

    @abstractmethod
    async def remove_worker(self, worker_id: str) -> None:
        """Forget a worker: its agent types and the agents placed on it."""

    async def adopt(self, previous: str, worker_id: str, agent_type: str, instance: str) -> None:  # noqa: B027
        """A worker that was `previous` (behind another gateway, maybe a dead one) registered `agent_type` again as
        `worker_id` here: if `instance` matches the one `previous` registered with, move `previous`'s placements of
        that type to `worker_id` and forget `previous` for it. Nothing by default (one gateway: the old connection
        was removed when it broke)."""

    @abstractmethod
    async def workers_for(self, agent_type: str) -> list[tuple[str, str]]:
        """Live `(worker_id, gateway_id)` pairs hosting `agent_type`."""

    def lookup(self, agent_id: AgentId) -> tuple[str, str] | None:
        """A placement known without I/O (the hot path), or None to ask `place`."""
        return None

    @abstractmethod
    async def place(self, agent_id: AgentId) -> tuple[str, str] | None:
        """The `(worker_id, gateway_id)` that hosts `agent_id`, placing it now if it has no live placement;
        None when no live worker hosts its type."""

    @abstractmethod
    async def agents(self, agent_type: str | None = None) -> list[AgentId]:
        """Placed (active) agents, sorted by type then key."""

    @abstractmethod
    async def add_subscription(self, subscription: Subscription) -> Subscription:
        """Add `subscription` to the cluster's table; an equal one already there (same kind, topic type or prefix,
        and agent type) is kept instead, and returned. `ValueError` when its id names another subscription."""

    @abstractmethod
    async def remove_subscription(self, id: str) -> None:
        """Remove the subscription `id`; `LookupError` naming it when there is none."""

    @abstractmethod
    async def subscriptions(self) -> list[Subscription]:
        """Every subscription of the cluster."""

    @abstractmethod
    async def recipients(self, topic_id: TopicId) -> list[AgentId]:
        """The agents a message published to `topic_id` goes to: one per agent type with a matching
        subscription, sorted by type."""

    def forget_gateway(self, gateway_id: str) -> None:  # noqa: B027 - only caching registries need it
        """Drop anything cached about a gateway found unreachable."""

    def health_problem(self) -> str | None:
        """None while the registry's store answers; otherwise what is wrong (the gateway's readiness reports it).
        Called by health probes, so it must not do I/O."""
        return None

    async def publish(self, gateway_id: str, payload: bytes) -> None:
        """Send `payload` to another gateway's inbox."""
        raise LookupError(f"gateway {gateway_id!r} is not reachable: this registry serves a single gateway")


class InMemoryRegistry(Registry):
    """The registry of a single gateway process."""

    def __init__(self) -> None:
        self._types: dict[str, dict[str, str]] = {}
        self._placements: dict[AgentId, str] = {}
        self._placed_on: dict[str, set[AgentId]] = {}
        self._subscriptions = SubscriptionTable()

    async def add(self, worker_id: str, agent_type: str, *, instance: str = "") -> None:
        self._types.setdefault(agent_type, {})[worker_id] = self.gateway_id

    async def remove_worker(self, worker_id: str) -> None:
        for workers in self._types.values():
            workers.pop(worker_id, None)
        for agent_id in self._placed_on.pop(worker_id, set()):
            if self._placements.get(agent_id) == worker_id:
                del self._placements[agent_id]

    async def workers_for(self, agent_type: str) -> list[tuple[str, str]]:
        return list(self._types.get(agent_type, {}).items())

    def lookup(self, agent_id: AgentId) -> tuple[str, str] | None:
        worker = self._placements.get(agent_id)
        if worker is None:
            return None
        gateway = self._types.get(agent_id.type, {}).get(worker)
        return None if gateway is None else (worker, gateway)

    async def place(self, agent_id: AgentId) -> tuple[str, str] | None:
        workers = self._types.get(agent_id.type)
        if not workers:
            return None
        worker = self._placements.get(agent_id)
        if worker is None or worker not in workers:
            worker = rendezvous(agent_id, list(workers))
            self._placements[agent_id] = worker
            self._placed_on.setdefault(worker, set()).add(agent_id)
        return worker, workers[worker]

    async def agents(self, agent_type: str | None = None) -> list[AgentId]:
        found = [a for a in self._placements if agent_type is None or a.type == agent_type]
        return sorted(found, key=lambda a: (a.type, a.key))

    async def add_subscription(self, subscription: Subscription) -> Subscription:
        subscription_record(subscription)  # what Redis could not store is refused here too
        return self._subscriptions.add(subscription)

    async def remove_subscription(self, id: str) -> None:
        self._subscriptions.remove(id)

    async def subscriptions(self) -> list[Subscription]:
        return self._subscriptions.subscriptions()

    async def recipients(self, topic_id: TopicId) -> list[AgentId]:
        return self._subscriptions.recipients(topic_id)
