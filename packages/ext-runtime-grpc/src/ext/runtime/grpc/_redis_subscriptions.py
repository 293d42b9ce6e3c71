"""`RedisSubscriptions`: the cluster's topic subscription table in one Redis hash, for `RedisRegistry`.

The hash maps each subscription id to its record (`subscription_record`: JSON of kind, topic type or prefix, and
agent type). It belongs to the cluster, not to a gateway: no lease covers it, so it outlives every gateway restart,
and every replica reads the same table."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from ext.core import AgentId, Subscription, SubscriptionTable, TopicId

from ._registry import RegistryUnavailableError, subscription_of_record, subscription_record

__all__ = ["RedisSubscriptions"]

logger = logging.getLogger(__name__)

# Adds a subscription under its id, atomically. Equal subscriptions (the same record) under several ids are one
# entry, held by each id (see `SubscriptionTable`). KEYS: the subscriptions hash. ARGV: id, record. Returns the
# entry's listed id (the smallest id holding the record, as `all` lists it), or false (nil to the client) when the
# id holds another subscription.
_SUBSCRIBE_SCRIPT = """
local held = redis.call('HGET', KEYS[1], ARGV[1])
if held and held ~= ARGV[2] then
  return false
end
if not held then
  redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
end
local first = ARGV[1]
local all = redis.call('HGETALL', KEYS[1])
for i = 1, #all, 2 do
  if all[i + 1] == ARGV[2] and all[i] < first then
    first = all[i]
  end
end
return first
"""


class RedisSubscriptions:
    """The subscription table under `key` (a redis-py asyncio client's); Redis errors become what `unavailable`
    makes of them."""

    def __init__(self, redis: Any, key: str, unavailable: Callable[[BaseException], RegistryUnavailableError]) -> None:
        self._redis = redis
        self._key = key
        self._unavailable = unavailable
        # A registered script re-loads itself when the server lost it (a restarted Redis).
        self._subscribe = redis.register_script(_SUBSCRIBE_SCRIPT)

    async def add(self, subscription: Subscription) -> Subscription:
        record = subscription_record(subscription)
        try:
            held = await self._subscribe(keys=[self._key], args=[subscription.id, record])
        except Exception as exc:
            raise self._unavailable(exc) from exc
        if held is None:
            raise ValueError(f"subscription id {subscription.id!r} is already used by another subscription")
        held_id = held.decode()
        return subscription if held_id == subscription.id else subscription_of_record(held_id, record)

    async def remove(self, id: str) -> None:
        try:
            removed = await self._redis.hdel(self._key, id)
        except Exception as exc:
            raise self._unavailable(exc) from exc
        if not removed:
            raise LookupError(f"no subscription with id {id!r}")

    async def all(self) -> list[Subscription]:
        """Every entry, sorted by id (a Redis hash has no order of its own): equal subscriptions held by several ids
        once, under the smallest."""
        try:
            raw = await self._redis.hgetall(self._key)
        except Exception as exc:
            raise self._unavailable(exc) from exc
        found: list[Subscription] = []
        for raw_id, record in sorted(raw.items()):
            try:
                subscription = subscription_of_record(raw_id.decode(), record)
                if subscription not in found:
                    found.append(subscription)
            except ValueError as exc:
                # Written by another (newer) version, or by hand: the rest of the table still works.
                logger.warning("ignoring a subscription in the registry: %s", exc)
        return found

    async def recipients(self, topic_id: TopicId) -> list[AgentId]:
        # Read on every publish, so that a subscription added through any replica counts at once.
        return SubscriptionTable(await self.all()).recipients(topic_id)
