"""`RedisBudgetStore`: spend shared by every process using one Redis (`pip install 'ext-resilience[redis]'`).

A charge is one Lua script (check every counter, then add to all or none), so processes never overspend between
a check and an add. Counters are plain integer keys under `prefix` (`ext:budget:` by default); a windowed counter
expires after its window.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ext.core import ConfigurationError

from ._budget_store import Charge

if TYPE_CHECKING:
    from ext.redis import RedisConnection

__all__ = ["RedisBudgetStore"]

_CHARGE = """
local n = #KEYS
for i = 1, n do
  local limit = tonumber(ARGV[n + i])
  if limit >= 0 then
    local spent = tonumber(redis.call('GET', KEYS[i]) or '0')
    if spent + math.max(tonumber(ARGV[i]), 1) > limit then
      return {i - 1, spent}
    end
  end
end
for i = 1, n do
  redis.call('INCRBY', KEYS[i], ARGV[i])
  local ttl = tonumber(ARGV[2 * n + i])
  if ttl > 0 then
    redis.call('PEXPIRE', KEYS[i], ttl)
  end
end
return {-1, 0}
"""


def _args(charges: Sequence[Charge]) -> list[int]:
    amounts = [c.amount for c in charges]
    limits = [-1 if c.limit is None else c.limit for c in charges]
    ttls = [0 if not c.ttl else max(1, round(c.ttl * 1000)) for c in charges]
    return amounts + limits + ttls


class RedisBudgetStore:
    """Budget counters in Redis, shared by every process using the same server and `prefix`."""

    def __init__(self, connection: RedisConnection, *, prefix: str = "ext:budget:") -> None:
        try:
            from ext.redis import RedisConnection
        except ImportError:  # pragma: no cover - depends on the install
            raise ConfigurationError(
                "the Redis budget store needs ext-redis: pip install 'ext-resilience[redis]'"
            ) from None
        if not isinstance(connection, RedisConnection):
            raise ConfigurationError(
                f"connection must be an ext.redis.RedisConnection, got {type(connection).__name__}"
            )
        if not isinstance(prefix, str):
            raise ConfigurationError(f"prefix must be a str, got {type(prefix).__name__}")
        self._connection = connection
        self._prefix = prefix
        self._redis: Any = connection.client()
        self._charge = self._redis.register_script(_CHARGE)

    def __repr__(self) -> str:
        return f"RedisBudgetStore({self._connection.where}, prefix={self._prefix!r})"

    async def charge(self, charges: Sequence[Charge]) -> tuple[int, int]:
        keys = [self._prefix + c.counter for c in charges]
        index, spent = await self._charge(keys=keys, args=_args(charges))
        return int(index), int(spent)

    async def add(self, changes: Sequence[Charge]) -> None:
        changes = [c for c in changes if c.amount]
        if not changes:
            return
        plain = [Charge(c.counter, c.amount, None, c.ttl) for c in changes]
        await self._charge(keys=[self._prefix + c.counter for c in plain], args=_args(plain))

    async def spent(self, counter: str) -> int:
        return int(await self._redis.get(self._prefix + counter) or 0)

    async def close(self) -> None:
        await self._redis.aclose()
