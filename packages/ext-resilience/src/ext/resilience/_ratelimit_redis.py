"""`RedisRateLimitBackend`: rate limits shared by every process using one Redis (`pip install 'ext-resilience[redis]'`).

Each decision is one Lua script, run atomically by Redis on Redis's own clock (`TIME`): a call takes its slot and its
room in the window in one script (or nothing), and gives both back in one, so a call costs two round trips, and
processes on machines whose clocks disagree still share one window. Keys (under `prefix`, `ext:rl:` by default;
`{key}` is the limit's key):

- `{key}:log` a sorted set of admitted entries scored by their time in microseconds, `{key}:tok` a hash of each
  entry's tokens and `{key}:sum` their total: the sliding window (entries older than the window are dropped by the
  next decision). All three expire two windows after the last decision.
- `{key}:slots` a sorted set of concurrency holders scored by the time their lease runs out: an expired holder
  (a process that died, or stopped renewing) is dropped by the next decision, which gives its slot back.

A call waiting for room in the window sleeps until the script says the window opens (nothing frees it sooner but a
correction of tokens); a call waiting for a concurrency slot polls every `poll` seconds, since a release may come
before the earliest lease runs out. No connection is held while a call waits.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from ext.core import ConfigurationError

from ._ratelimit_backend import RateDecision

if TYPE_CHECKING:
    from ext.redis import RedisConnection

__all__ = ["RedisRateLimitBackend"]

_ADMIT = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local window = tonumber(ARGV[1])
local max_requests = tonumber(ARGV[2])
local max_tokens = tonumber(ARGV[3])
local cost = tonumber(ARGV[4])
local holder = ARGV[5]
local concurrency = tonumber(ARGV[6])
local lease = tonumber(ARGV[7])
if holder ~= '' then
  redis.call('ZREMRANGEBYSCORE', KEYS[5], '-inf', now)
  if not redis.call('ZSCORE', KEYS[5], holder) and redis.call('ZCARD', KEYS[5]) >= concurrency then
    local first = redis.call('ZRANGE', KEYS[5], 0, 0, 'WITHSCORES')
    return {0, math.max(tonumber(first[2]) - now, 1000), 1}
  end
end
local id = ''
if max_requests >= 0 or max_tokens >= 0 then
  local expired = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now - window)
  if #expired > 0 then
    local freed = 0
    for i = 1, #expired do
      freed = freed + tonumber(redis.call('HGET', KEYS[2], expired[i]) or '0')
      redis.call('HDEL', KEYS[2], expired[i])
    end
    redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - window)
    redis.call('DECRBY', KEYS[3], freed)
  end
  local count = redis.call('ZCARD', KEYS[1])
  local wait = 0
  if max_requests >= 0 and count + 1 > max_requests then
    local e = redis.call('ZRANGE', KEYS[1], count - max_requests, count - max_requests, 'WITHSCORES')
    wait = tonumber(e[2]) + window - now
  end
  local total = tonumber(redis.call('GET', KEYS[3]) or '0')
  if max_tokens >= 0 and total + cost > max_tokens then
    local excess = total + cost - max_tokens
    local entries = redis.call('ZRANGE', KEYS[1], 0, -1, 'WITHSCORES')
    for i = 1, #entries, 2 do
      excess = excess - tonumber(redis.call('HGET', KEYS[2], entries[i]) or '0')
      if excess <= 0 then
        wait = math.max(wait, tonumber(entries[i + 1]) + window - now)
        break
      end
    end
  end
  if wait > 0 then
    return {0, wait, 0}
  end
  id = tostring(redis.call('INCR', KEYS[4]))
  redis.call('ZADD', KEYS[1], now, id)
  redis.call('HSET', KEYS[2], id, cost)
  redis.call('INCRBY', KEYS[3], cost)
  local ttl = math.ceil(2 * window / 1000)
  for i = 1, 4 do
    redis.call('PEXPIRE', KEYS[i], ttl)
  end
end
if holder ~= '' then
  redis.call('ZADD', KEYS[5], now + lease, holder)
  redis.call('PEXPIRE', KEYS[5], math.ceil(2 * lease / 1000))
end
return {1, id, 0}
"""

_FINISH = """
if ARGV[1] ~= '' and tonumber(ARGV[2]) >= 0 then
  local old = redis.call('HGET', KEYS[1], ARGV[1])
  if old then
    redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
    redis.call('INCRBY', KEYS[2], tonumber(ARGV[2]) - tonumber(old))
  end
end
if ARGV[3] ~= '' then
  redis.call('ZREM', KEYS[3], ARGV[3])
end
return 1
"""

_RENEW = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local until_ = redis.call('ZSCORE', KEYS[1], ARGV[1])
if not until_ or tonumber(until_) <= now then
  redis.call('ZREM', KEYS[1], ARGV[1])
  return 0
end
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[2]), ARGV[1])
redis.call('PEXPIRE', KEYS[1], math.ceil(2 * tonumber(ARGV[2]) / 1000))
return 1
"""


def _micros(seconds: float) -> int:
    return max(1, round(seconds * 1_000_000))


class RedisRateLimitBackend:
    """Rate limits in Redis, shared by every process that uses the same server and `prefix`.

    Arguments:
        connection: an `ext.redis.RedisConnection` (the password comes from it, never from a URL).
        prefix: the start of every key this backend writes.
        poll: the longest a waiting call sleeps between two tries, in seconds (0.05).
    """

    shared = True

    def __init__(self, connection: RedisConnection, *, prefix: str = "ext:rl:", poll: float = 0.05) -> None:
        try:
            from ext.redis import RedisConnection
        except ImportError:  # pragma: no cover - depends on the install
            raise ConfigurationError(
                "the Redis rate-limit backend needs ext-redis: pip install 'ext-resilience[redis]'"
            ) from None
        if not isinstance(connection, RedisConnection):
            raise ConfigurationError(
                f"connection must be an ext.redis.RedisConnection, got {type(connection).__name__}"
            )
        if not isinstance(prefix, str):
            raise ConfigurationError(f"prefix must be a str, got {type(prefix).__name__}")
        if isinstance(poll, bool) or not isinstance(poll, (int, float)) or not 0 < poll <= 10:
            raise ConfigurationError(f"poll must be a number of seconds in (0, 10], got {poll!r}")
        self._connection = connection
        self._prefix = prefix
        self._poll = float(poll)
        self._redis: Any = connection.client()
        self._admit = self._redis.register_script(_ADMIT)
        self._finish = self._redis.register_script(_FINISH)
        self._renew = self._redis.register_script(_RENEW)

    def __repr__(self) -> str:
        return f"RedisRateLimitBackend({self._connection.where}, prefix={self._prefix!r})"

    async def admit(
        self,
        key: str,
        *,
        window: float,
        requests: int | None,
        tokens: int | None,
        cost: int,
        holder: str | None = None,
        concurrency: int | None = None,
        lease: float = 30.0,
    ) -> RateDecision:
        base = self._prefix + key
        keys = [base + ":log", base + ":tok", base + ":sum", base + ":seq", base + ":slots"]
        slot = holder is not None and concurrency is not None
        args: list[str | int] = [
            _micros(window),
            -1 if requests is None else requests,
            -1 if tokens is None else tokens,
            cost,
            holder if holder is not None and slot else "",
            concurrency if concurrency is not None and slot else 0,
            _micros(lease),
        ]
        admitted, value, waits_for_slot = await self._admit(keys=keys, args=args)
        if int(admitted):
            entry = value.decode() if isinstance(value, bytes) else str(value)
            return RateDecision(True, entry or None)
        return RateDecision(False, retry_after=int(value) / 1_000_000, slot=bool(int(waits_for_slot)))

    async def finish(
        self, key: str, *, window: float, entry: str | None = None, tokens: int | None = None, holder: str | None = None
    ) -> None:
        base = self._prefix + key
        args: list[str | int] = [entry or "", -1 if tokens is None else tokens, holder or ""]
        await self._finish(keys=[base + ":tok", base + ":sum", base + ":slots"], args=args)

    async def renew(self, key: str, holder: str, *, lease: float) -> bool:
        return bool(await self._renew(keys=[self._prefix + key + ":slots"], args=[holder, _micros(lease)]))

    async def wait(self, key: str, timeout: float, *, slot: bool = False) -> None:
        await asyncio.sleep(min(timeout, self._poll) if slot else timeout)

    async def close(self) -> None:
        await self._redis.aclose()
