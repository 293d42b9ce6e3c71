"""`RedisStateStore`: agents' states in Redis, shared by every worker of a cluster, so an agent activated on
another worker (after a failover) starts from the state it last saved.

It lives here, under the `[redis]` extra, because Redis is the cluster's existing dependency (the gateway
replicas' registry); ext-cache-redis is the chat pipeline's cache, which workers need not install."""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

from ext.core import (
    AgentId,
    AgentType,
    StateConflictError,
    StoredState,
    decode_state,
    encode_state,
    expected_version_of,
    sorted_agent_ids,
)

__all__ = ["RedisStateStore"]

# The compare-and-set, atomic on the server (a script runs alone). KEYS: the record's hash, the set of ids with
# a record. ARGV: the expected version ("" for no record), the encoded state, the agent id.
# Returns {1, new version} or {0, version found ("" for none)}.
_PUT_SCRIPT = """
local cur = redis.call('HGET', KEYS[1], 'v')
if (cur or '') ~= ARGV[1] then
  return {0, cur or ''}
end
local v = (tonumber(cur) or 0) + 1
redis.call('HSET', KEYS[1], 'v', v, 's', ARGV[2])
redis.call('SADD', KEYS[2], ARGV[3])
return {1, v}
"""


class RedisStateStore:
    """A `StateStore` in Redis (needs `ext-runtime-grpc[redis]`): for the workers of a cluster.

    Keys (under `prefix`): `state:<type>/<key>` a hash holding the version `v` and the JSON state `s`, and
    `states`, the set of ids with a record. A write is one server-side script comparing the version and writing,
    so two writers cannot both win. Redis that cannot be reached raises `ConnectionError` (connecting gives up
    after `connect_timeout` seconds, a call after `timeout`): nothing waits forever.
    """

    def __init__(self, url: str, *, prefix: str = "ext", connect_timeout: float = 5.0, timeout: float = 10.0) -> None:
        if not isinstance(url, str) or not url.startswith(("redis://", "rediss://", "unix://")):
            raise ValueError("url must be a redis://, rediss:// or unix:// URL")
        if not isinstance(prefix, str) or not prefix:
            raise ValueError(f"prefix must be a non-empty string, got {prefix!r}")
        for name, value in (("connect_timeout", connect_timeout), ("timeout", timeout)):
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
                raise ValueError(f"{name} must be a positive number of seconds, got {value!r}")
        try:
            import redis.asyncio as aioredis
            from redis.exceptions import RedisError
        except ImportError as exc:  # pragma: no cover - depends on the install
            raise ImportError("RedisStateStore needs the redis package: pip install 'ext-runtime-grpc[redis]'") from exc
        self._prefix = prefix.rstrip(":") + ":"
        parts = urlsplit(url)
        # Host and port only: the URL may hold a password.
        self._where = f"{parts.hostname}:{parts.port}" if parts.hostname else "a unix socket"
        # redis-py's default pool refuses a command at once (MaxConnectionsError) when its 100 connections are
        # busy, so a worker activating or saving more agents at a time would fail their messages; a blocking pool
        # makes the extra commands wait (up to `timeout`) for a free connection instead.
        pool = aioredis.BlockingConnectionPool.from_url(
            url, max_connections=100, timeout=timeout, socket_connect_timeout=connect_timeout, socket_timeout=timeout
        )
        self._redis: Any = aioredis.Redis.from_pool(pool)
        self._put_script: Any = self._redis.register_script(_PUT_SCRIPT)
        self._errors: tuple[type[BaseException], ...] = (RedisError, OSError)

    def __repr__(self) -> str:
        return f"RedisStateStore(redis={self._where!r}, prefix={self._prefix[:-1]!r})"

    def _record(self, agent_id: AgentId) -> str:
        return f"{self._prefix}state:{agent_id}"

    def _unreachable(self, exc: BaseException) -> ConnectionError:
        return ConnectionError(f"the state store (Redis at {self._where}) failed: {type(exc).__name__}: {exc}")

    async def get(self, agent_id: AgentId) -> StoredState | None:
        try:
            version, data = await self._redis.hmget(self._record(agent_id), "v", "s")
        except self._errors as exc:
            raise self._unreachable(exc) from exc
        if version is None or data is None:
            return None
        return StoredState(decode_state(data), int(version))

    async def put(self, agent_id: AgentId, state: Mapping[str, Any], expected_version: int | None) -> int:
        expected = expected_version_of(expected_version)
        data = encode_state(state)
        keys = [self._record(agent_id), f"{self._prefix}states"]
        try:
            done, version = await self._put_script(
                keys=keys, args=["" if expected is None else expected, data, str(agent_id)]
            )
        except self._errors as exc:
            raise self._unreachable(exc) from exc
        if not done:
            raise StateConflictError(agent_id, expected, int(version) if version else None)
        return int(version)

    async def delete(self, agent_id: AgentId) -> None:
        try:
            async with self._redis.pipeline(transaction=True) as pipe:
                pipe.delete(self._record(agent_id))
                pipe.srem(f"{self._prefix}states", str(agent_id))
                await pipe.execute()
        except self._errors as exc:
            raise self._unreachable(exc) from exc

    async def keys(self, agent_type: str | AgentType | None = None) -> list[AgentId]:
        try:
            members = await self._redis.smembers(f"{self._prefix}states")
        except self._errors as exc:
            raise self._unreachable(exc) from exc
        return sorted_agent_ids([AgentId.from_str(m.decode()) for m in members], agent_type)

    async def close(self) -> None:
        with contextlib.suppress(Exception):
            await self._redis.aclose()
