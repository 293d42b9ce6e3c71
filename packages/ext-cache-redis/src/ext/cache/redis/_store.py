"""`RedisCacheStore`: ext-core's `CacheStore` protocol over the `redis` asyncio client."""

from __future__ import annotations

import math
from typing import Any
from urllib.parse import unquote, unquote_plus, urlsplit

import redis.asyncio as aioredis
from pydantic import BaseModel, ConfigDict, Field
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff

from ext.core import Component, ConfigurationError, resolve_secret
from ext.pipeline import DEFAULT_CACHE_TTL, CacheTTL, check_ttl


class RedisCacheConfig(BaseModel):
    """Config of a `RedisCacheStore`. The password is never dumped: `password_env` names the variable it is
    read from."""

    model_config = ConfigDict(extra="forbid", defer_build=True)

    url: str = Field(default="redis://127.0.0.1:6379/0", description="redis:// or rediss:// URL, no password.")
    prefix: str = Field(default="ext:chat-cache:", description="Prepended to every key.")
    ttl: CacheTTL = Field(
        default=DEFAULT_CACHE_TTL, description="Seconds an entry lives when set() gives none (None: no expiry)."
    )
    password_env: str | None = Field(default="REDIS_PASSWORD", description="Variable holding the password.")
    socket_timeout: float = Field(default=1.0, gt=0, description="Seconds a command may take.")
    connect_timeout: float = Field(default=1.0, gt=0, description="Seconds connecting may take.")
    max_retries: int = Field(default=0, ge=0, description="Retries of a failed command (no backoff).")


def _split_password(url: str) -> tuple[str, str | None]:
    """`url` without the password it carries, and that password (None if none).

    redis-py reads a password from a `password` query parameter (`?password=secret`) and from the user info
    (`redis://user:secret@host`), which wins, both percent-decoded, an empty one ignored
    (`redis.asyncio.connection.parse_url`). Both are cut out here; the rest of the URL (user name, other
    parameters) is kept as written."""
    parts = urlsplit(url)
    password: str | None = None
    cut = False
    kept: list[str] = []
    for item in parts.query.split("&") if parts.query else ():
        name, _, value = item.partition("=")
        if unquote_plus(name) == "password":
            password, cut = unquote_plus(value) or password, True
        else:
            kept.append(item)
    netloc = parts.netloc
    userinfo, at, hostport = netloc.rpartition("@")
    user, colon, secret = userinfo.partition(":")
    if at and colon:
        password, cut = unquote(secret) or password, True
        netloc = f"{user}@{hostport}" if user else hostport
    if not cut:
        return url, None  # the URL as given
    # Joined by hand: urlunsplit drops the "//" of a unix:// URL whose netloc became empty.
    query = "?" + "&".join(kept) if kept else ""
    fragment = "#" + parts.fragment if parts.fragment else ""
    return f"{parts.scheme}://{netloc}{parts.path}{query}{fragment}", password


class RedisCacheStore(Component[RedisCacheConfig]):
    """Chat-cache entries in Redis, shared by every process that uses the same `url` and `prefix`.

    An entry is one Redis string under `prefix + key`, set with `PX` (milliseconds) when it has a TTL, so
    Redis expires it. Commands time out after `socket_timeout` seconds and are not retried by default
    (`max_retries=0`): a Redis that went away costs a call one failed command, and the `CacheMiddleware` then
    serves it uncached and logs the outage once. The connection pool is opened on first use and closed by
    `close()`.

    The password comes from `password=`, else from the URL (user info or `?password=`), else from the
    `password_env` variable (`REDIS_PASSWORD`). Whichever it is, it is cut out of the URL the store keeps, so no
    `repr`, dump, error or log carries it; a dump names `password_env`, so a loaded copy reads the password from
    that variable (give it through the environment for a dump to load with it).

    `ttl` defaults to `DEFAULT_CACHE_TTL` (one hour), the default of ext-core's `InMemoryCacheStore` too, so
    swapping one store for the other keeps expiry; `ttl=None` means no expiry. A bool is refused.
    """

    component_type = "cache_store"
    component_config_schema = RedisCacheConfig
    component_provider_override = "ext.cache.redis.RedisCacheStore"

    def __init__(
        self,
        url: str = "redis://127.0.0.1:6379/0",
        *,
        prefix: str = "ext:chat-cache:",
        ttl: float | None = DEFAULT_CACHE_TTL,
        password: str | None = None,
        password_env: str | None = "REDIS_PASSWORD",
        socket_timeout: float = 1.0,
        connect_timeout: float = 1.0,
        max_retries: int = 0,
        client: aioredis.Redis | None = None,
    ) -> None:
        if not isinstance(url, str) or urlsplit(url).scheme not in ("redis", "rediss", "unix"):
            raise ConfigurationError("url must be a redis://, rediss:// or unix:// URL")
        if not isinstance(prefix, str):
            raise ConfigurationError(f"prefix must be a string, got {type(prefix).__name__}")
        for name, value in (("socket_timeout", socket_timeout), ("connect_timeout", connect_timeout)):
            if not isinstance(value, (int, float)) or isinstance(value, bool) or not value > 0:
                raise ConfigurationError(f"{name} must be > 0 seconds, got {value!r}")
        ttl = check_ttl(ttl)
        if not isinstance(max_retries, int) or isinstance(max_retries, bool) or max_retries < 0:
            raise ConfigurationError(f"max_retries must be an int >= 0, got {max_retries!r}")
        url, in_url = _split_password(url)
        secret, from_env = resolve_secret(password if password is not None else in_url, password_env)
        self._url = url
        self._prefix = prefix
        self._ttl = ttl
        self._password_env = password_env if password is None else None
        self._from_env = from_env
        self._socket_timeout = float(socket_timeout)
        self._connect_timeout = float(connect_timeout)
        self._max_retries = max_retries
        self._password = secret
        self._client = client
        self._owns_client = client is None

    @property
    def prefix(self) -> str:
        return self._prefix

    def _redis(self) -> aioredis.Redis:
        client = self._client
        if client is None:
            kwargs: dict[str, Any] = {
                "socket_timeout": self._socket_timeout,
                "socket_connect_timeout": self._connect_timeout,
                "retry": Retry(NoBackoff(), self._max_retries),
                "retry_on_timeout": self._max_retries > 0,
            }
            if self._password is not None:
                kwargs["password"] = self._password.get_secret_value()
            # redis-py's default pool refuses a command at once (MaxConnectionsError) when its 100 connections
            # are busy, which the cache middleware would take for an outage and serve uncached; a blocking pool
            # makes the extra commands wait (up to socket_timeout) for a free connection instead.
            pool = aioredis.BlockingConnectionPool.from_url(
                self._url, max_connections=100, timeout=self._socket_timeout, **kwargs
            )
            client = self._client = aioredis.Redis.from_pool(pool)
        return client

    async def get(self, key: str) -> bytes | None:
        value = await self._redis().get(self._prefix + key)
        if value is None:
            return None
        return value if isinstance(value, bytes) else str(value).encode("utf-8")

    async def set(self, key: str, value: bytes, ttl: float | None = None) -> None:
        ttl = self._ttl if ttl is None else ttl
        milliseconds = None if ttl is None else max(1, math.ceil(ttl * 1000))
        await self._redis().set(self._prefix + key, value, px=milliseconds)

    async def clear(self) -> int:
        """Delete every entry under this store's prefix; returns how many there were."""
        client = self._redis()
        deleted = 0
        batch: list[Any] = []
        async for name in client.scan_iter(match=_glob_escape(self._prefix) + "*", count=500):
            batch.append(name)
            if len(batch) >= 500:
                deleted += await client.delete(*batch)
                batch.clear()
        if batch:
            deleted += await client.delete(*batch)
        return deleted

    async def close(self) -> None:
        """Close the connection pool (a client passed in is left open). Idempotent; the next call reopens."""
        if not self._owns_client:
            return
        client, self._client = self._client, None
        if client is not None:
            await client.aclose()

    def __repr__(self) -> str:
        return f"RedisCacheStore(url={self._url!r}, prefix={self._prefix!r}, ttl={self._ttl})"

    def _to_config(self) -> RedisCacheConfig:
        return RedisCacheConfig(
            url=self._url,
            prefix=self._prefix,
            ttl=self._ttl,
            password_env=self._from_env or self._password_env,
            socket_timeout=self._socket_timeout,
            connect_timeout=self._connect_timeout,
            max_retries=self._max_retries,
        )

    @classmethod
    def _from_config(cls, config: RedisCacheConfig) -> RedisCacheStore:
        return cls(
            config.url,
            prefix=config.prefix,
            ttl=config.ttl,
            password_env=config.password_env,
            socket_timeout=config.socket_timeout,
            connect_timeout=config.connect_timeout,
            max_retries=config.max_retries,
        )


def _glob_escape(text: str) -> str:
    return "".join("\\" + c if c in "*?[]\\" else c for c in text)
