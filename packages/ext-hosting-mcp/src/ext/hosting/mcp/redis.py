"""`RedisSessionStore`: sessions and their resumable event streams in Redis, so that every server process behind a
load balancer continues any session, and a stream cut by a restart resumes with nothing lost or repeated.
Install with `pip install "ext-hosting-mcp[redis]"` (Redis is reached through ext-redis's `RedisConnection`).

Keys (each with the session's idle expiry, refreshed by every request):
- `<prefix>:s:<session>`: the session record (JSON: protocol version, the client's initialize parameters, owner);
- `<prefix>:ev:<session>`: one Redis stream with every event of the session (fields `s`: the SSE stream it belongs
  to, `m`: the JSON-RPC message, empty for a priming event), capped at `max_events`; an event's id is its entry id;
- `<prefix>:own:<session>`: SSE stream -> the process that runs its request;
- `<prefix>:p:<process>`: present while that process lives (refreshed every `heartbeat` seconds).

One round trip per Redis write, each a Lua script: `touch` refreshes the record's expiry and, in the same call,
reads the position of the session's last event; the priming event of the request that follows is then minted in
memory from that position (`<position>~<process>~<stream, hex>`) rather than written, since it carries no message and
everything the request stores comes after that position. A call costs two round trips (the touch, its response).

Resuming (`GET` with `Last-Event-ID`): the events after that id on its stream are sent again from Redis. If the
request is still running in this process, the SDK's transport then carries it on. If it runs in another process, this
one follows the Redis stream (`XREAD BLOCK`) until the response arrives; if that process died first (its presence key
expired), the client gets a JSON-RPC error for the request instead of waiting forever.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import json
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, TypeVar
from uuid import uuid4

import mcp_types as types
from mcp.server.streamable_http import GET_STREAM_KEY, EventCallback, EventMessage, EventStore
from redis import exceptions as redis_errors

from ext.core import ConfigurationError

try:
    from ext.redis import RedisConnection
except ImportError as exc:  # pragma: no cover - the extra is missing
    raise ImportError('ext.hosting.mcp.redis needs ext-redis: pip install "ext-hosting-mcp[redis]"') from exc

from ._sessions import SessionRecord

__all__ = ["RedisSessionStore"]

_T = TypeVar("_T")

logger = logging.getLogger(__name__)


# Refreshes the record's expiry; answers the id of the session's last event ("0-0" if none), or false if it is gone.
_TOUCH = """
if redis.call('PEXPIRE', KEYS[1], ARGV[1]) == 0 then return false end
local last = redis.call('XREVRANGE', KEYS[2], '+', '-', 'COUNT', 1)
if last[1] then return last[1][1] end
return '0-0'
"""

# Appends an event and records which process runs its stream, refreshing both keys' expiry.
_APPEND = """
local id = redis.call('XADD', KEYS[1], 'MAXLEN', '~', ARGV[1], '*', 's', ARGV[2], 'm', ARGV[3])
redis.call('PEXPIRE', KEYS[1], ARGV[4])
redis.call('HSET', KEYS[2], ARGV[2], ARGV[5])
redis.call('PEXPIRE', KEYS[2], ARGV[4])
return id
"""

# (session id, position of its last event) read by this request's `touch`, for its priming event.
_position: contextvars.ContextVar[tuple[str, str] | None] = contextvars.ContextVar("_position", default=None)


def _priming_id(position: str, process: str, stream_id: str) -> str:
    # The stream id is the client's request id: hex keeps any character of it out of the SSE `id:` line.
    return f"{position}~{process}~{stream_id.encode().hex()}"


def _parse_priming_id(event_id: str) -> tuple[str, str, str] | None:
    """(position, process, stream) of a minted priming id, or None when it is not one."""
    parts = event_id.split("~")
    if len(parts) != 3:
        return None
    position, process, stream_hex = parts
    try:
        stream = bytes.fromhex(stream_hex).decode()
    except ValueError:
        return None
    return position, process, stream


def _ms(seconds: float) -> int:
    return max(1, int(seconds * 1000))


def _request_id(stream_id: str) -> str | int:
    # SSE streams are named by str(request id); JSON-RPC ids are mostly integers.
    return int(stream_id) if stream_id.isdigit() else stream_id


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


class _Events(EventStore):
    def __init__(self, store: RedisSessionStore, session_id: str, ttl: float) -> None:
        self._store = store
        self._session = session_id
        self._key = f"{store.prefix}:ev:{session_id}"
        self._owners = f"{store.prefix}:own:{session_id}"
        self._ttl = _ms(ttl)
        self._local: set[str] = set()  # streams whose requests run in this process

    async def store_event(self, stream_id: str, message: types.JSONRPCMessage | None) -> str:
        self._local.add(stream_id)
        if message is None:
            known = _position.get()
            if known is not None and known[0] == self._session and stream_id != GET_STREAM_KEY:
                _position.set(None)  # one priming event per touch
                return _priming_id(known[1], self._store.process, stream_id)
        data = "" if message is None else message.model_dump_json(by_alias=True, exclude_unset=True)
        store = self._store
        args = (store.max_events, stream_id, data, self._ttl, store.process)
        return _text(await store._eval(_APPEND, (self._key, self._owners), args))

    async def replay_events_after(self, last_event_id: str, send_callback: EventCallback) -> str | None:
        _position.set(None)  # a priming event for the resumed stream must follow what is replayed: written, not minted
        client = self._store.client
        minted = _parse_priming_id(last_event_id)
        owner: str | None = None
        if minted is not None:
            position, owner, stream = minted
            after = position
        else:
            try:
                first = await client.xrange(self._key, last_event_id, last_event_id)
            except Exception:  # not an entry id (Redis refuses it): nothing to replay
                logger.debug("unreadable Last-Event-ID %r", last_event_id[:64])
                return None
            if not first:
                return None
            stream, after = _text(first[0][1][b"s"]), last_event_id
        try:
            last, answered = await self._send_after(stream, after, send_callback)
        except redis_errors.ResponseError:  # a minted id whose position Redis refuses
            logger.debug("unreadable Last-Event-ID %r", last_event_id[:64])
            return None
        if answered:
            return None  # the client now has the whole exchange: the replay stream ends here
        if stream in self._local:
            return stream  # the request runs here: the SDK's transport carries the stream on
        await self._follow(stream, last, send_callback, owner)
        return None

    async def _send_after(self, stream: str, after: str, send: EventCallback) -> tuple[str, bool]:
        answered = False
        last = after
        for entry_id, fields in await self._store.client.xrange(self._key, f"({after}", "+"):
            last = _text(entry_id)
            answered = await self._deliver(stream, last, fields, send) or answered
        return last, answered

    async def _deliver(self, stream: str, entry_id: str, fields: dict[bytes, bytes], send: EventCallback) -> bool:
        """Send the entry if it belongs to `stream`; True when it is the request's answer."""
        if _text(fields[b"s"]) != stream or not fields[b"m"]:
            return False
        message = types.jsonrpc_message_adapter.validate_json(fields[b"m"])
        await send(EventMessage(message, entry_id))
        return isinstance(message, (types.JSONRPCResponse, types.JSONRPCError)) and str(message.id) == stream

    async def _follow(self, stream: str, last: str, send: EventCallback, owner_hint: str | None) -> None:
        """Relay `stream`'s new events from Redis until its answer, or an error once its process is gone."""
        client = self._store.client
        block = _ms(self._store.heartbeat)
        while True:
            found = await client.xread({self._key: last}, block=block, count=100)
            for _key, entries in found or []:
                for entry_id, fields in entries:
                    last = _text(entry_id)
                    if await self._deliver(stream, last, fields, send):
                        return
            if found:
                continue
            # A minted priming id names the process that ran the request; else the process that stored its events.
            owner = owner_hint if owner_hint is not None else await client.hget(self._owners, stream)
            if owner is None or not await client.exists(f"{self._store.prefix}:p:{_text(owner)}"):
                # Its process stopped before answering: say so rather than leave the client waiting.
                error = types.JSONRPCError(
                    jsonrpc="2.0",
                    id=_request_id(stream),
                    error=types.ErrorData(
                        code=types.INTERNAL_ERROR,
                        message="the server process running this request stopped before answering; send it again",
                    ),
                )
                await send(EventMessage(error, None))
                return


class RedisSessionStore:
    """Sessions and resumable streams in Redis (see the module docstring).

    Arguments:
        connection: where Redis is (ext-redis's `RedisConnection`).
        prefix: key prefix (`ext:mcp`); servers sharing sessions use the same one.
        max_events: events kept per session for resumption (approximate cap, oldest dropped first).
        heartbeat: seconds between this process's presence refreshes; a process is taken for dead after three.
    """

    def __init__(
        self, connection: RedisConnection, *, prefix: str = "ext:mcp", max_events: int = 1000, heartbeat: float = 1.0
    ) -> None:
        if not isinstance(connection, RedisConnection):
            raise ConfigurationError(
                f"connection must be an ext.redis.RedisConnection, got {type(connection).__name__}"
            )
        if not prefix or not isinstance(prefix, str):
            raise ConfigurationError(f"prefix must be a non-empty string, got {prefix!r}")
        if isinstance(max_events, bool) or not isinstance(max_events, int) or max_events < 1:
            raise ConfigurationError(f"max_events must be an int >= 1, got {max_events!r}")
        if not heartbeat > 0:
            raise ConfigurationError(f"heartbeat must be > 0 seconds, got {heartbeat!r}")
        self._connection = connection
        self.prefix = prefix
        self.max_events = max_events
        self.heartbeat = float(heartbeat)
        self.process = uuid4().hex
        self._client: Any = None
        self._scripts: dict[str, Any] = {}

    @property
    def client(self) -> Any:
        if self._client is None:
            self._client = self._connection.client()
            self._scripts = {}
        return self._client

    async def _eval(self, script: str, keys: tuple[str, ...], args: tuple[Any, ...]) -> Any:
        # redis-py's Script runs EVALSHA and loads the script again if Redis answers NOSCRIPT (after a restart).
        client = self.client
        if script not in self._scripts:
            self._scripts[script] = client.register_script(script)
        return await self._retrying(lambda: self._scripts[script](keys=keys, args=args))

    async def _retrying(self, command: Callable[[], Awaitable[_T]]) -> _T:
        # After Redis restarts, each pooled connection fails its first command ("Connection closed by server"):
        # one retry on a fresh connection tells that from a Redis that is down.
        try:
            return await command()
        except redis_errors.ConnectionError:
            return await command()

    def _key(self, session_id: str) -> str:
        return f"{self.prefix}:s:{session_id}"

    async def save(self, session_id: str, record: SessionRecord, ttl: float) -> None:
        data = {"v": record.protocol_version, "c": record.client_params, "o": record.owner}
        text = json.dumps(data, separators=(",", ":"))
        await self._retrying(lambda: self.client.set(self._key(session_id), text, px=_ms(ttl)))

    async def load(self, session_id: str, ttl: float) -> SessionRecord | None:
        raw = await self._retrying(lambda: self.client.getex(self._key(session_id), px=_ms(ttl)))
        if raw is None:
            return None
        data = json.loads(raw)
        return SessionRecord(protocol_version=data["v"], client_params=data["c"], owner=data["o"])

    async def touch(self, session_id: str, ttl: float) -> bool:
        keys = (self._key(session_id), f"{self.prefix}:ev:{session_id}")
        last = await self._eval(_TOUCH, keys, (_ms(ttl),))
        if last is None:
            return False
        _position.set((session_id, _text(last)))
        return True

    async def delete(self, session_id: str) -> None:
        await self.client.delete(
            self._key(session_id), f"{self.prefix}:ev:{session_id}", f"{self.prefix}:own:{session_id}"
        )

    def event_store(self, session_id: str, ttl: float) -> EventStore:
        return _Events(self, session_id, ttl)

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """Keeps this process's presence key alive while the server runs."""
        presence = f"{self.prefix}:p:{self.process}"
        await self.client.set(presence, "1", px=_ms(self.heartbeat * 3))

        async def beat() -> None:
            while True:
                await asyncio.sleep(self.heartbeat)
                try:
                    await self.client.set(presence, "1", px=_ms(self.heartbeat * 3))
                except Exception:
                    logger.warning("could not refresh this process's presence in Redis", exc_info=True)

        task = asyncio.create_task(beat())
        try:
            yield
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
            with contextlib.suppress(Exception):
                await self.client.delete(presence)
            client, self._client = self._client, None
            if client is not None:
                await client.aclose()

    def __repr__(self) -> str:
        return f"RedisSessionStore(connection={self._connection!r}, prefix={self.prefix!r})"
