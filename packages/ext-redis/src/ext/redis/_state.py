"""`RedisStateStore`: agents' states in Redis, shared by every process that reaches it (the workers of a cluster),
so an agent activated on another worker (after a failover) starts from the state it last saved.

Keys (under `prefix`): `state:<type>/<key>` a hash holding the version `v` and the JSON state `s`; `states` the set
of ids with a record; `state-deleted` the highest version a deleted record had. Writes and deletes are server-side
scripts (a script runs alone), so two writers cannot both win, and a record created after a delete starts above
every version the key had: a writer holding a version read before the delete gets `StateConflictError`.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Mapping
from typing import Any

from redis.exceptions import RedisError, ResponseError

from ext.core import (
    AgentId,
    AgentType,
    ConfigurationError,
    StateConflictError,
    StateCorruptError,
    StoredState,
    decode_state,
    encode_state,
    expected_version_of,
    sorted_agent_ids,
)

from ._connection import RedisConnection

__all__ = ["RedisStateStore"]

logger = logging.getLogger(__name__)

# Compare-and-set. KEYS: the record's hash, the set of ids with a record, the highest deleted version.
# ARGV: the expected version ("" for no record), the encoded state, the agent id.
# Returns {1, new version}, {0, version found ("" for none)}, or {-1, why the record cannot be read}.
_PUT_SCRIPT = """
local kind = redis.call('TYPE', KEYS[1]).ok
if kind ~= 'none' and kind ~= 'hash' then
  return {-1, 'a Redis ' .. kind .. ', not a hash'}
end
local cur = redis.call('HGET', KEYS[1], 'v')
if kind == 'hash' and not (cur and string.match(cur, '^[1-9][0-9]*$')) then
  return {-1, 'its version is not a positive integer'}
end
if (cur or '') ~= ARGV[1] then
  return {0, cur or ''}
end
local v
if cur then
  v = tonumber(cur) + 1
else
  v = (tonumber(redis.call('GET', KEYS[3])) or 0) + 1
end
redis.call('HSET', KEYS[1], 'v', v, 's', ARGV[2])
redis.call('SADD', KEYS[2], ARGV[3])
return {1, v}
"""

# Delete, raising the highest deleted version first. KEYS and ARGV[1] as for a put. A record that cannot be read
# is removed too (its version, unknown, cannot raise the mark).
_DELETE_SCRIPT = """
if redis.call('TYPE', KEYS[1]).ok == 'hash' then
  local v = redis.call('HGET', KEYS[1], 'v')
  if v and string.match(v, '^[1-9][0-9]*$') and tonumber(v) > (tonumber(redis.call('GET', KEYS[3])) or 0) then
    redis.call('SET', KEYS[3], v)
  end
end
redis.call('DEL', KEYS[1])
redis.call('SREM', KEYS[2], ARGV[1])
return 1
"""

# The shape of each record, checked where the records are, so that listing moves no state: KEYS are records.
# Returns {index, why, ...} for each record that is gone ("" why) or cannot be read. A state is checked to be a
# JSON object's text ({...}, as this store writes it, compact); `get` decodes it.
_CHECK_SCRIPT = """
local found = {}
for i = 1, #KEYS do
  local kind = redis.call('TYPE', KEYS[i]).ok
  local why = false
  if kind == 'none' then
    why = ''
  elseif kind ~= 'hash' then
    why = 'not a Redis hash'
  else
    local r = redis.call('HMGET', KEYS[i], 'v', 's')
    if not (r[1] and string.match(r[1], '^[1-9][0-9]*$')) then
      why = 'its version is not a positive integer'
    elseif not r[2] then
      why = 'it holds no state'
    elseif string.sub(r[2], 1, 1) ~= '{' or string.sub(r[2], -1) ~= '}' then
      why = 'its state is not a JSON object'
    end
  end
  if why then
    found[#found + 1] = i
    found[#found + 1] = why
  end
end
return found
"""

_BATCH = 500  # records checked per round trip by keys()


class _Unreadable(ValueError):
    """A record that is not what this store writes; the message says why (never what it holds)."""


def _record_of(version: object, data: object) -> StoredState:
    """The record read from a hash's `v` and `s`; `_Unreadable` when they are not one."""
    if not isinstance(version, bytes) or not version.isdigit() or version.startswith(b"0"):
        raise _Unreadable("its version is not a positive integer")
    if not isinstance(data, bytes):
        raise _Unreadable("it holds no state")
    try:
        state = decode_state(data)
    except ValueError as exc:
        raise _Unreadable(f"its state is not a JSON object ({exc})") from None
    return StoredState(state, int(version))


class RedisStateStore:
    """A `StateStore` in Redis: for the workers of a cluster, or any processes sharing agents' states.

    `redis` is a URL (`redis://host:port/db`, no password in it: the password comes from `REDIS_PASSWORD`;
    commands time out after 10 s, connecting after 5 s) or a `RedisConnection` for other settings. Redis that
    cannot be reached raises `ConnectionError` naming host and port: nothing waits forever. A record that is not
    what this store writes raises `StateCorruptError` naming the agent and the key; `keys()` leaves it out with a
    warning. Keys are under `prefix` (see the module docstring); stores with different prefixes never meet.
    """

    def __init__(self, redis: str | RedisConnection, *, prefix: str = "ext") -> None:
        if isinstance(redis, str):
            redis = RedisConnection(redis)
        elif not isinstance(redis, RedisConnection):
            raise ConfigurationError(f"redis must be a redis:// URL or a RedisConnection, got {type(redis).__name__}")
        if not isinstance(prefix, str) or not prefix:
            raise ConfigurationError(f"prefix must be a non-empty string, got {prefix!r}")
        self._connection = redis
        self._prefix = prefix.rstrip(":") + ":"
        self._redis: Any = redis.client()
        # A registered script loads itself again when the server lost it (a restarted Redis).
        self._put_script: Any = self._redis.register_script(_PUT_SCRIPT)
        self._delete_script: Any = self._redis.register_script(_DELETE_SCRIPT)
        self._check_script: Any = self._redis.register_script(_CHECK_SCRIPT)

    @property
    def connection(self) -> RedisConnection:
        return self._connection

    def __repr__(self) -> str:
        return f"RedisStateStore(redis={self._connection.where!r}, prefix={self._prefix[:-1]!r})"

    def _record(self, agent_id: AgentId) -> str:
        return f"{self._prefix}state:{agent_id}"

    def _keys(self, agent_id: AgentId) -> list[str]:
        return [self._record(agent_id), f"{self._prefix}states", f"{self._prefix}state-deleted"]

    def _where(self, key: str) -> str:
        return f"Redis key {key!r} at {self._connection.where}"

    def _unreachable(self, exc: BaseException) -> ConnectionError:
        return ConnectionError(
            f"the state store (Redis at {self._connection.where}) failed: {type(exc).__name__}: {exc}"
        )

    async def get(self, agent_id: AgentId) -> StoredState | None:
        key = self._record(agent_id)
        try:
            version, data = await self._redis.hmget(key, "v", "s")
        except ResponseError as exc:
            if str(exc).startswith("WRONGTYPE"):
                raise StateCorruptError(agent_id, self._where(key), "not a Redis hash") from None
            raise self._unreachable(exc) from exc
        except (RedisError, OSError) as exc:
            raise self._unreachable(exc) from exc
        if version is None and data is None:
            return None
        try:
            return _record_of(version, data)
        except _Unreadable as exc:
            raise StateCorruptError(agent_id, self._where(key), str(exc)) from None

    async def put(self, agent_id: AgentId, state: Mapping[str, Any], expected_version: int | None) -> int:
        expected = expected_version_of(expected_version)
        data = encode_state(state)
        keys = self._keys(agent_id)
        try:
            done, found = await self._put_script(
                keys=keys, args=["" if expected is None else expected, data, str(agent_id)]
            )
        except (RedisError, OSError) as exc:
            raise self._unreachable(exc) from exc
        if done == -1:
            raise StateCorruptError(agent_id, self._where(keys[0]), found.decode())
        if not done:
            raise StateConflictError(agent_id, expected, int(found) if found else None)
        return int(found)

    async def delete(self, agent_id: AgentId) -> None:
        try:
            await self._delete_script(keys=self._keys(agent_id), args=[str(agent_id)])
        except (RedisError, OSError) as exc:
            raise self._unreachable(exc) from exc

    async def keys(self, agent_type: str | AgentType | None = None) -> list[AgentId]:
        """The ids with a readable record, each checked on the server (500 per round trip, no state moved): a record
        of the wrong shape is left out with a warning naming its key. (A state that looks like a JSON object,
        `{...}`, but does not parse passes here and raises `StateCorruptError` from `get`.)"""
        members = f"{self._prefix}states"
        try:
            raw = await self._redis.smembers(members)
        except (RedisError, OSError) as exc:
            raise self._unreachable(exc) from exc
        ids: list[AgentId] = []
        for member in sorted(raw):
            try:
                ids.append(AgentId.from_str(member.decode()))
            except (TypeError, ValueError, UnicodeDecodeError):
                logger.warning("skipping a member of %s that is not an agent id 'type/key'", self._where(members))
        ids = sorted_agent_ids(ids, agent_type)
        readable: list[AgentId] = []
        for start in range(0, len(ids), _BATCH):
            batch = ids[start : start + _BATCH]
            try:
                found = await self._check_script(keys=[self._record(a) for a in batch])
            except (RedisError, OSError) as exc:
                raise self._unreachable(exc) from exc
            skipped = {int(index) - 1: why.decode() for index, why in zip(found[::2], found[1::2], strict=True)}
            for index, agent_id in enumerate(batch):
                why = skipped.get(index)
                if why is None:
                    readable.append(agent_id)
                elif why:  # "" is a record deleted since the listing
                    where = self._where(self._record(agent_id))
                    logger.warning("skipping the state of %s (%s): it cannot be read: %s", agent_id, where, why)
        return readable

    async def close(self) -> None:
        with contextlib.suppress(Exception):
            await self._redis.aclose()
