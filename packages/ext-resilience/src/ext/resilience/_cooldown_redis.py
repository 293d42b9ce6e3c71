"""Cooldowns in Redis, shared by every process using the same server (`pip install 'ext-resilience[redis]'`).

Per client two keys: `<prefix>:<client>:n`, a hash of `calls` and `failures` that expires `window` after the first
call counted, and `<prefix>:<client>:cool`, present while the client cools down (its TTL is what is left, on the
server's clock, so processes need not agree on time). Counting a call and deciding whether it starts a cooldown is
one Lua script: two processes recording at once cannot both miss the threshold.

One round trip per call: a success cannot start a cooldown, so it is not sent on its own. It waits in this process
and rides with the next check of the same client (the script that reads the cooldown adds it to the counts) or the
next failure's script; successes with no call after them are sent together within `_FLUSH_AFTER` seconds, and on
`close()`. Other processes therefore see this process's successes up to that late (its failures at once).
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

from ext.core import ConfigurationError
from ext.redis import RedisConnection

from ._cooldown import CooldownPolicy

logger = logging.getLogger(__name__)

_FLUSH_AFTER = 1.0  # seconds a success with no later call of its client waits before it is sent alone

# KEYS: counts, cool. ARGV: failed (0/1), immediate (0/1), min_calls, failure_rate, window_ms, cooldown_ms,
# successes not sent yet (counted before this call). Returns the cooldown started in ms, else 0.
_RECORD = """
local failed = tonumber(ARGV[1])
if tonumber(ARGV[2]) == 1 then
  redis.call('SET', KEYS[2], '1', 'PX', ARGV[6])
  redis.call('DEL', KEYS[1])
  return tonumber(ARGV[6])
end
local added = 1 + tonumber(ARGV[7])
local calls = redis.call('HINCRBY', KEYS[1], 'calls', added)
local failures = redis.call('HINCRBY', KEYS[1], 'failures', failed)
if calls == added then
  redis.call('PEXPIRE', KEYS[1], ARGV[5])
end
if failed == 1 and calls >= tonumber(ARGV[3]) and failures >= tonumber(ARGV[4]) * calls then
  redis.call('SET', KEYS[2], '1', 'PX', ARGV[6])
  redis.call('DEL', KEYS[1])
  return tonumber(ARGV[6])
end
return 0
"""

# KEYS: counts, cool. ARGV: successes not sent yet, window_ms. Returns the cooldown's remaining ms (<= 0: none).
# Successes arriving while the client cools are dropped: the cooldown started the counts afresh.
_CHECK = """
local left = redis.call('PTTL', KEYS[2])
if left > 0 then
  return left
end
local added = tonumber(ARGV[1])
if added > 0 then
  local calls = redis.call('HINCRBY', KEYS[1], 'calls', added)
  if calls == added then
    redis.call('PEXPIRE', KEYS[1], ARGV[2])
  end
end
return left
"""


class RedisCooldowns:
    """A `CooldownBackend` in Redis. `connection` is an `ext.redis.RedisConnection` (or a URL); `prefix` keeps
    apart the cooldowns of unrelated deployments sharing one server.

    `refresh` (seconds, default 0: ask every time) lets this process reuse a "not cooling" answer for that long
    instead of asking Redis before every call: a cooldown another process sets is then seen at most `refresh`
    late, and the happy path makes no round trip of its own. Either way a success is sent with the next check
    (see the module's docstring): one round trip per call at most."""

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
        self._unsent: dict[str, tuple[int, int]] = {}  # key -> (successes not sent yet, window ms)
        self._flusher: asyncio.Task[None] | None = None
        self._redis: Any = connection.client()
        # redis-py's Script sends EVALSHA (the script's text only once, when Redis does not know it yet)
        self._record: Any = self._redis.register_script(_RECORD)
        self._check: Any = self._redis.register_script(_CHECK)

    def _keys(self, key: str) -> list[str]:
        return [f"{self._prefix}:{key}:n", f"{self._prefix}:{key}:cool"]

    async def remaining(self, key: str) -> float:
        if self._refresh:
            until = self._clear_until.get(key)
            if until is not None and time.monotonic() < until:
                return 0.0
        unsent, window_ms = self._unsent.pop(key, (0, 1))
        if unsent:
            ms = int(await self._check(keys=self._keys(key), args=[unsent, window_ms]))
        else:
            ms = int(await self._redis.pttl(self._keys(key)[1]))
        if ms > 0:
            return ms / 1000.0
        if self._refresh:
            self._clear_until[key] = time.monotonic() + self._refresh
        return 0.0

    async def record(self, key: str, *, failed: bool, immediate: bool, policy: CooldownPolicy) -> float:
        window_ms = max(1, round(policy.window * 1000))
        if not failed and not immediate:  # cannot start a cooldown: sent with the next check
            self._unsent[key] = (self._unsent.get(key, (0, 0))[0] + 1, window_ms)
            if self._flusher is None or self._flusher.done():
                self._flusher = asyncio.create_task(self._flush_later())
            return 0.0
        unsent, _ = self._unsent.pop(key, (0, 0))
        started = await self._record(
            keys=self._keys(key),
            args=[
                int(failed),
                int(immediate),
                policy.min_calls,
                policy.failure_rate,
                window_ms,
                max(1, round(policy.cooldown * 1000)),
                unsent,
            ],
        )
        if started:
            self._clear_until.pop(key, None)  # this process saw it start: no stale "not cooling"
        return int(started) / 1000.0

    async def _flush_later(self) -> None:
        await asyncio.sleep(_FLUSH_AFTER)
        await self._flush()

    async def _flush(self) -> None:
        while self._unsent:
            key, (unsent, window_ms) = self._unsent.popitem()
            try:
                await self._check(keys=self._keys(key), args=[unsent, window_ms])
            except asyncio.CancelledError:  # close() stopped the timer mid-way: keep them for its own flush
                self._unsent[key] = (self._unsent.get(key, (0, 0))[0] + unsent, window_ms)
                raise
            except Exception as exc:  # counting must never stop a call; Redis gone: these successes are lost
                logger.warning("%r failed (%s): %d successes of %s were not counted", self, exc, unsent, key)

    async def close(self) -> None:
        if self._flusher is not None and not self._flusher.done():
            self._flusher.cancel()
            await asyncio.gather(self._flusher, return_exceptions=True)
        await self._flush()
        await self._redis.aclose()

    def __repr__(self) -> str:
        return f"RedisCooldowns({self._connection.where!r}, prefix={self._prefix!r}, refresh={self._refresh})"
