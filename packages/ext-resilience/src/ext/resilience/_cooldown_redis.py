"""Cooldowns in Redis, shared by every process using the same server (`pip install 'ext-resilience[redis]'`).

Per client two keys: `<prefix>:<client>:n`, a hash of `calls` and `failures` that expires `window` after the first
call counted, and `<prefix>:<client>:cool`, present while the client cools down (its TTL is what is left, on the
server's clock, so processes need not agree on time). Counting a call and deciding whether it starts a cooldown is
one Lua script: two processes recording at once cannot both miss the threshold.
"""

from __future__ import annotations

import time
from typing import Any

from ext.core import ConfigurationError
from ext.redis import RedisConnection

from ._cooldown import CooldownPolicy

# KEYS: counts, cool. ARGV: failed (0/1), immediate (0/1), min_calls, failure_rate, window_ms, cooldown_ms.
# Returns the cooldown started in ms, else 0.
_RECORD = """
local failed = tonumber(ARGV[1])
if tonumber(ARGV[2]) == 1 then
  redis.call('SET', KEYS[2], '1', 'PX', ARGV[6])
  redis.call('DEL', KEYS[1])
  return tonumber(ARGV[6])
end
local calls = redis.call('HINCRBY', KEYS[1], 'calls', 1)
local failures = redis.call('HINCRBY', KEYS[1], 'failures', failed)
if calls == 1 then
  redis.call('PEXPIRE', KEYS[1], ARGV[5])
end
if failed == 1 and calls >= tonumber(ARGV[3]) and failures >= tonumber(ARGV[4]) * calls then
  redis.call('SET', KEYS[2], '1', 'PX', ARGV[6])
  redis.call('DEL', KEYS[1])
  return tonumber(ARGV[6])
end
return 0
"""


class RedisCooldowns:
    """A `CooldownBackend` in Redis. `connection` is an `ext.redis.RedisConnection` (or a URL); `prefix` keeps
    apart the cooldowns of unrelated deployments sharing one server.

    `refresh` (seconds, default 0: ask every time) lets this process reuse a "not cooling" answer for that long
    instead of asking Redis before every call: a cooldown another process sets is then seen at most `refresh`
    late, and the happy path makes no round trip of its own (successes are counted in the background)."""

    def __init__(
        self, connection: RedisConnection | str, *, prefix: str = "ext:cooldown", refresh: float = 0.0
    ) -> None:
        if isinstance(connection, str):
            connection = RedisConnection(connection)
        if not isinstance(connection, RedisConnection):
            raise ConfigurationError(
                f"connection must be an ext.redis.RedisConnection or a URL, got {type(connection).__name__}"
            )
        if not isinstance(prefix, str) or not prefix:
            raise ConfigurationError("prefix must be a non-empty string")
        if isinstance(refresh, bool) or not isinstance(refresh, (int, float)) or refresh < 0:
            raise ConfigurationError(f"refresh must be seconds >= 0, got {refresh!r}")
        self._connection = connection
        self._prefix = prefix
        self._refresh = float(refresh)
        self._clear_until: dict[str, float] = {}  # key -> monotonic time until which "not cooling" is reused
        self._redis: Any = connection.client()
        self._record: Any = self._redis.register_script(_RECORD)

    async def remaining(self, key: str) -> float:
        if self._refresh:
            until = self._clear_until.get(key)
            if until is not None and time.monotonic() < until:
                return 0.0
        ms = int(await self._redis.pttl(f"{self._prefix}:{key}:cool"))
        if ms > 0:
            return ms / 1000.0
        if self._refresh:
            self._clear_until[key] = time.monotonic() + self._refresh
        return 0.0

    async def record(self, key: str, *, failed: bool, immediate: bool, policy: CooldownPolicy) -> float:
        started = await self._record(
            keys=[f"{self._prefix}:{key}:n", f"{self._prefix}:{key}:cool"],
            args=[
                int(failed),
                int(immediate),
                policy.min_calls,
                policy.failure_rate,
                max(1, round(policy.window * 1000)),
                max(1, round(policy.cooldown * 1000)),
            ],
        )
        if started:
            self._clear_until.pop(key, None)  # this process saw it start: no stale "not cooling"
        return int(started) / 1000.0

    async def close(self) -> None:
        await self._redis.aclose()

    def __repr__(self) -> str:
        return f"RedisCooldowns({self._connection.where!r}, prefix={self._prefix!r}, refresh={self._refresh})"
