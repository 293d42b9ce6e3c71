"""Response caching: `CacheMiddleware` over any `CacheStore`; `InMemoryCacheStore` is the default store.

The key is a SHA-256 of the normalised request: the client's identity (its component dump, secrets left out,
or its provider and model when it has none), the model, the messages, the tools' schemas, `tool_choice`,
`json_output`, the options that were set and `extra_create_args`. A dict message and the equal message object
give the same key. Keys and entries are never written through a deferred model's placeholder serializer
(`ensure_serializers`, `model_dump_json`), so they are the same bytes on every supported pydantic and in a
fresh process. Only complete results are stored: an error, a cancelled call
or a stream the consumer left early store nothing.
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Mapping
from typing import Annotated, Any, Protocol, runtime_checkable

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field
from pydantic_core import from_json, to_json

from ext.core import (
    ChatOptions,
    Component,
    ComponentError,
    ComponentModel,
    ConfigurationError,
    CreateResult,
    StreamChunk,
    Tool,
    check_timeout,
    coerce_messages,
    ensure_serializers,
    load_component,
    parse_json_output,
    tool_schema_of,
)

from ._pipeline import ChatCall, ChatItem, ChatMiddleware, CreateNext, StreamNext

logger = logging.getLogger(__name__)

_ENTRY_VERSION = 1
_NOT_STORED = {"parsed", "cached"}

DEFAULT_MAX_ENTRIES = 1024
DEFAULT_CACHE_TTL = 3600.0
"""Seconds a cache entry lives when neither the `CacheMiddleware` nor `set` gives a TTL: the default of every
built-in store (`InMemoryCacheStore`, ext-redis's `RedisCacheStore`), so swapping stores keeps expiry."""
DEFAULT_TTL = DEFAULT_CACHE_TTL  # the name earlier releases used


def check_ttl(value: object, argument: str = "ttl") -> float | None:
    """A cache TTL: a finite number of seconds > 0, or None. A bool is refused: `ttl=True` would mean one second."""
    try:
        return check_timeout(value, argument)
    except ValueError:
        raise ConfigurationError(f"{argument} must be > 0 seconds or None, got {value!r}") from None


def _config_ttl(value: object) -> object:
    # Before pydantic's float coercion, which would turn true into 1.0; other input is left to the float rules.
    if isinstance(value, bool):
        raise ValueError(f"must be a number of seconds > 0 or null, got {value!r}")
    return value


CacheTTL = Annotated[Annotated[float, Field(gt=0, allow_inf_nan=False)] | None, BeforeValidator(_config_ttl)]
"""A TTL field of a cache config: seconds > 0 or None, a bool refused (as `check_ttl`)."""


@runtime_checkable
class CacheStore(Protocol):
    """Where a `CacheMiddleware` keeps entries: an async map from `str` keys to `bytes` with a per-entry TTL.

    `get` returns None for a missing or expired key. `set` stores `value` for `ttl` seconds (None: the store's
    own default, which may be no expiry). A store that fails raises; the middleware then serves the call
    uncached and logs the outage once. `close` releases connections (the pipeline's `close` calls it).
    """

    async def get(self, key: str) -> bytes | None: ...

    async def set(self, key: str, value: bytes, ttl: float | None = None) -> None: ...

    async def close(self) -> None: ...


class InMemoryCacheConfig(BaseModel):
    """Config of an `InMemoryCacheStore`."""

    model_config = ConfigDict(extra="forbid", defer_build=True)

    max_entries: int = Field(
        default=DEFAULT_MAX_ENTRIES, gt=0, description="Entries kept; the least recently used go first."
    )
    ttl: CacheTTL = Field(
        default=DEFAULT_CACHE_TTL, description="Seconds an entry lives when set() gives none (None: until evicted)."
    )


class InMemoryCacheStore(Component[InMemoryCacheConfig]):
    """A process-local LRU store: at most `max_entries` entries (default 1024), each living `ttl` seconds when
    `set` gives no TTL of its own (default `DEFAULT_CACHE_TTL`, one hour; None: until evicted)."""

    component_type = "cache_store"
    component_config_schema = InMemoryCacheConfig
    component_provider_override = "ext.pipeline.InMemoryCacheStore"

    def __init__(self, max_entries: int = DEFAULT_MAX_ENTRIES, ttl: float | None = DEFAULT_CACHE_TTL) -> None:
        if not isinstance(max_entries, int) or isinstance(max_entries, bool) or max_entries <= 0:
            raise ConfigurationError(f"max_entries must be an int > 0, got {max_entries!r}")
        self._max_entries = max_entries
        self._ttl = check_ttl(ttl)
        self._config = InMemoryCacheConfig(max_entries=max_entries, ttl=self._ttl)
        self._entries: OrderedDict[str, tuple[float | None, bytes]] = OrderedDict()

    def __len__(self) -> int:
        return len(self._entries)

    async def get(self, key: str) -> bytes | None:
        entry = self._entries.get(key)
        if entry is None:
            return None
        expires, value = entry
        if expires is not None and expires <= time.monotonic():
            del self._entries[key]
            return None
        self._entries.move_to_end(key)
        return value

    async def set(self, key: str, value: bytes, ttl: float | None = None) -> None:
        ttl = self._ttl if ttl is None else ttl
        entries = self._entries
        entries[key] = (None if ttl is None else time.monotonic() + ttl, value)
        entries.move_to_end(key)
        while len(entries) > self._max_entries:
            entries.popitem(last=False)

    async def clear(self) -> None:
        self._entries.clear()

    async def close(self) -> None:
        self._entries.clear()

    def __repr__(self) -> str:
        return f"InMemoryCacheStore(max_entries={self._max_entries}, ttl={self._ttl})"


class CacheConfig(BaseModel):
    """Config of a `CacheMiddleware`: its store as a component dump."""

    model_config = ConfigDict(extra="forbid", defer_build=True)

    store: ComponentModel | None = None
    ttl: CacheTTL = Field(default=None, description="Seconds an entry lives (None: the store's default).")
    cache_tool_turns: bool = True


def _options_key(options: ChatOptions | Mapping[str, Any] | None) -> Any:
    if options is None:
        return None
    if isinstance(options, ChatOptions):
        return options.set_fields() or None
    return ChatOptions.model_validate(options).set_fields() or None


def _json_output_key(json_output: Any) -> Any:
    if json_output is None or json_output is False:
        return None
    if isinstance(json_output, type):
        return f"{json_output.__module__}.{json_output.__qualname__}"
    return bool(json_output)


def _tool_choice_key(tool_choice: Any) -> str:
    if isinstance(tool_choice, str):
        return tool_choice
    if isinstance(tool_choice, Tool):
        return tool_choice.name
    return repr(tool_choice)


class CacheMiddleware(ChatMiddleware):
    """Serves a repeated request from a `CacheStore`, with `cached=True` (see the module docstring for the key).

    - `create`: a hit returns the stored result (its `usage` is what the answer cost when it was made;
      `cached=True` says nothing was spent now, and the pipeline's `total_usage()` adds nothing for it).
    - `create_stream`: a hit replays the stored chunks one by one, then the result; a result stored by
      `create` replays as one chunk.
    - `ttl`: seconds an entry lives (None: the store's default, `DEFAULT_CACHE_TTL` = one hour for both built-in
      stores). A bool is refused.
    - `cache_tool_turns=False`: placed after a tool loop, the turns that ask for tools are not stored (only
      final answers are).
    - `close_store`: whether the pipeline's `close()` closes the store. Default: only a store the middleware
      made itself (no `store` given, or loaded from a config); a store passed in is the caller's to close, so
      several pipelines can share it.
    - A store that fails (a Redis that went away) makes the call go on uncached; the outage is logged once as a
      warning, and its end once at INFO.
    `hits` and `misses` count lookups.
    """

    component_config_schema = CacheConfig
    component_provider_override = "ext.pipeline.CacheMiddleware"

    def __init__(
        self,
        store: CacheStore | None = None,
        *,
        ttl: float | None = None,
        cache_tool_turns: bool = True,
        close_store: bool | None = None,
    ) -> None:
        self._ttl = check_ttl(ttl)
        self._close_store = store is None if close_store is None else close_store
        if store is None:
            store = InMemoryCacheStore()
        elif not isinstance(store, CacheStore):
            raise ConfigurationError(f"store must be a CacheStore (async get/set/close), got {type(store).__name__}")
        self._store = store
        self._cache_tool_turns = cache_tool_turns
        self._store_down = False
        self._client_keys: dict[int, tuple[Any, bytes]] = {}
        self.hits = 0
        self.misses = 0

    @property
    def store(self) -> CacheStore:
        return self._store

    def __repr__(self) -> str:
        return f"CacheMiddleware(store={self._store!r}, ttl={self._ttl})"

    # --- the key ---------------------------------------------------------------------------------------

    def _client_identity(self, client: Any) -> bytes:
        known = self._client_keys.get(id(client))
        if known is not None and known[0] is client:
            return known[1]
        dump = getattr(client, "dump_component", None)
        identity: Any
        try:
            identity = dump().model_dump(mode="json") if dump is not None else None
        except ComponentError:
            identity = None
        if identity is None:
            identity = {"class": f"{type(client).__module__}.{type(client).__qualname__}"}
        digest = hashlib.sha256(to_json(identity)).digest()
        self._client_keys[id(client)] = (client, digest)
        return digest

    def key(self, call: ChatCall) -> str:
        """The cache key of `call`."""
        messages = coerce_messages(call.messages)
        ensure_serializers(messages)  # to_json below writes the message objects with their classes' serializers
        tools = [tool_schema_of(t) for t in call.tools] if call.tools else None
        request = (
            call.model,
            messages,
            tools,
            _tool_choice_key(call.tool_choice),
            _json_output_key(call.json_output),
            _options_key(call.options),
            dict(call.extra_create_args) if call.extra_create_args else None,
        )
        body = self._client_identity(call.client) + to_json(request, fallback=repr)
        return "ext-chat:" + hashlib.sha256(body).hexdigest()

    # --- the store, tolerating outages ------------------------------------------------------------------

    async def _get(self, key: str) -> bytes | None:
        try:
            value = await self._store.get(key)
        except Exception as exc:
            self._down(exc)
            return None
        self._up()
        return value

    async def _set(self, key: str, value: bytes) -> None:
        try:
            await self._store.set(key, value, self._ttl)
        except Exception as exc:
            self._down(exc)
            return
        self._up()

    def _down(self, exc: Exception) -> None:
        if not self._store_down:
            self._store_down = True
            logger.warning(
                "cache store %s failed (%s: %s); calls go on uncached until it answers again",
                type(self._store).__name__,
                type(exc).__name__,
                exc,
            )

    def _up(self) -> None:
        if self._store_down:
            self._store_down = False
            logger.info("cache store %s is back", type(self._store).__name__)

    # --- entries ------------------------------------------------------------------------------------------

    def _storable(self, call: ChatCall, result: CreateResult) -> bool:
        return self._cache_tool_turns or call.turn is None or not isinstance(result.content, list)

    @staticmethod
    def _encode(result: CreateResult, chunks: list[tuple[str, str]] | None) -> bytes:
        # The result's own JSON spliced in: no intermediate dict. `model_dump_json` (not `to_json(result)`) builds
        # CreateResult's deferred serializer when a provider made the result with `model_construct`.
        body = result.model_dump_json(exclude=_NOT_STORED).encode()
        return b'{"v":%d,"result":%s,"chunks":%s}' % (_ENTRY_VERSION, body, to_json(chunks))

    @staticmethod
    def _decode(call: ChatCall, value: bytes) -> tuple[CreateResult, list[tuple[str, str]] | None] | None:
        try:
            entry = from_json(value)
            if entry.get("v") != _ENTRY_VERSION:
                return None
            data = entry["result"]
            data["cached"] = True
            result = CreateResult.model_validate(data)
        except Exception:  # an entry this version cannot read is a miss, not a failure
            logger.debug("unreadable cache entry", exc_info=True)
            return None
        json_output = call.json_output
        if json_output and isinstance(result.content, str):
            result = result.model_copy(
                update={"parsed": parse_json_output(result.content, json_output, finish_reason=result.finish_reason)}
            )
        chunks = entry.get("chunks")
        return result, [(c[0], c[1]) for c in chunks] if chunks is not None else None

    # --- hooks ---------------------------------------------------------------------------------------------

    async def _lookup(self, call: ChatCall) -> tuple[str, tuple[CreateResult, list[tuple[str, str]] | None] | None]:
        """The call's key and its stored entry (None on a miss), counting the hit or miss."""
        key = self.key(call)
        value = await self._get(key)
        entry = self._decode(call, value) if value is not None else None
        if entry is None:
            self.misses += 1
        else:
            self.hits += 1
        return key, entry

    async def create(self, call: ChatCall, next: CreateNext) -> CreateResult:
        key, entry = await self._lookup(call)
        if entry is not None:
            return entry[0]
        result = await next(call)
        if self._storable(call, result):
            await self._set(key, self._encode(result, None))
        return result

    async def create_stream(self, call: ChatCall, next: StreamNext) -> AsyncIterator[ChatItem]:
        key, entry = await self._lookup(call)
        if entry is not None:
            result, chunks = entry
            if chunks is None:  # stored by create: the text as one chunk
                chunks = [(result.content, result.thought or "")] if isinstance(result.content, str) else []
            for content, thought in chunks:
                yield StreamChunk.of(content, thought)
            yield result
            return
        seen: list[tuple[str, str]] = []
        stream = next(call)
        try:
            async for item in stream:
                if isinstance(item, CreateResult):
                    if self._storable(call, item):
                        await self._set(key, self._encode(item, seen))
                else:
                    seen.append((item.content, item.thought))
                yield item
        finally:
            aclose = getattr(stream, "aclose", None)
            if aclose is not None:
                await aclose()

    async def close(self) -> None:
        if self._close_store:
            await self._store.close()

    # --- components -------------------------------------------------------------------------------------

    def _to_config(self) -> CacheConfig:
        dump = getattr(self._store, "dump_component", None)
        if dump is None:
            raise ComponentError(f"cache store {type(self._store).__name__} is not a component and cannot be dumped")
        return CacheConfig(store=dump(), ttl=self._ttl, cache_tool_turns=self._cache_tool_turns)

    @classmethod
    def _from_config(cls, config: CacheConfig) -> CacheMiddleware:
        store = load_component(config.store) if config.store is not None else None
        return cls(store, ttl=config.ttl, cache_tool_turns=config.cache_tool_turns, close_store=True)
