"""`RedisCacheStore`: ext-pipeline's `CacheStore` protocol over the `redis` asyncio client."""

from __future__ import annotations

import math
from typing import Any

import redis.asyncio as aioredis
from pydantic import BaseModel, ConfigDict, Field, SecretStr

from ext.core import Component, ConfigurationError
from ext.pipeline import DEFAULT_CACHE_TTL, CacheTTL, check_ttl

from ._connection import DEFAULT_REDIS_URL, RedisConnection


class RedisCacheConfig(BaseModel):
    """Config of a `RedisCacheStore`. The password is never dumped: `password_env` names the variable it is
    read from."""

    model_config = ConfigDict(extra="forbid", defer_build=True)

    url: str = Field(default=DEFAULT_REDIS_URL, description="redis://, rediss:// or unix:// URL, no password.")
    prefix: str = Field(default="ext:chat-cache:", description="Prepended to every key.")
    ttl: CacheTTL = Field(
        default=DEFAULT_CACHE_TTL, description="Seconds an entry lives when set() gives none (None: no expiry)."
    )
    password_env: str | None = Field(default="REDIS_PASSWORD", description="Variable holding the password.")
    socket_timeout: float = Field(default=1.0, gt=0, description="Seconds a command may take.")
    connect_timeout: float = Field(default=1.0, gt=0, description="Seconds connecting may take.")
    max_retries: int = Field(default=0, ge=0, description="Retries of a failed command (no backoff).")
    max_connections: int = Field(default=100, ge=1, description="Connections at most; more commands wait.")


class RedisCacheStore(Component[RedisCacheConfig]):
    """Chat-cache entries in Redis, shared by every process that uses the same `url` and `prefix`.

    An entry is one Redis string under `prefix + key`, set with `PX` (milliseconds) when it has a TTL, so
    Redis expires it. Commands time out after `socket_timeout` seconds and are not retried by default
    (`max_retries=0`): a Redis that went away costs a call one failed command, and the `CacheMiddleware` then
    serves it uncached and logs the outage once. The connection (`RedisConnection`: a blocking pool of
    `max_connections`, the password from `password=` or the `password_env` variable, a URL with a password
    refused) is opened on first use and closed by `close()`.

    `ttl` defaults to `DEFAULT_CACHE_TTL` (one hour), the default of ext-pipeline's `InMemoryCacheStore` too, so
    swapping one store for the other keeps expiry; `ttl=None` means no expiry. A bool is refused.
    """

    component_type = "cache_store"
    component_config_schema = RedisCacheConfig
    component_provider_override = "ext.redis.RedisCacheStore"

    def __init__(
        self,
        url: str = DEFAULT_REDIS_URL,
        *,
        prefix: str = "ext:chat-cache:",
        ttl: float | None = DEFAULT_CACHE_TTL,
        password: str | SecretStr | None = None,
        password_env: str | None = "REDIS_PASSWORD",
        socket_timeout: float = 1.0,
        connect_timeout: float = 1.0,
        max_retries: int = 0,
        max_connections: int = 100,
        client: aioredis.Redis | None = None,
    ) -> None:
        if not isinstance(prefix, str):
            raise ConfigurationError(f"prefix must be a string, got {type(prefix).__name__}")
        self._connection = RedisConnection(
            url,
            password=password,
            password_env=password_env,
            socket_timeout=socket_timeout,
            connect_timeout=connect_timeout,
            max_retries=max_retries,
            max_connections=max_connections,
        )
        self._prefix = prefix
        self._ttl = check_ttl(ttl)
        self._client = client
        self._owns_client = client is None

    @property
    def prefix(self) -> str:
        return self._prefix

    @property
    def connection(self) -> RedisConnection:
        return self._connection

    def _redis(self) -> aioredis.Redis:
        client = self._client
        if client is None:
            client = self._client = self._connection.client()
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
        return f"RedisCacheStore(url={self._connection.url!r}, prefix={self._prefix!r}, ttl={self._ttl})"

    def _to_config(self) -> RedisCacheConfig:
        connection = self._connection
        return RedisCacheConfig(
            url=connection.url,
            prefix=self._prefix,
            ttl=self._ttl,
            password_env=connection.password_env,
            socket_timeout=connection.socket_timeout,
            connect_timeout=connection.connect_timeout,
            max_retries=connection.max_retries,
            max_connections=connection.max_connections,
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
            max_connections=config.max_connections,
        )


def _glob_escape(text: str) -> str:
    return "".join("\\" + c if c in "*?[]\\" else c for c in text)
