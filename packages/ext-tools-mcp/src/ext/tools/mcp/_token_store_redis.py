"""`RedisTokenStore`: OAuth records in Redis, so the workers of a cluster share one login (the `[redis]` extra).

Each record is one Redis string (`SET` replaces it whole), reached through ext-redis's `RedisConnection` (a URL
without a password, timeouts on every command). Records may be encrypted with a Fernet key, as in the file store.
"""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING, Any

from pydantic import SecretStr

from ext.core import ConfigurationError

from ._token_store import RecordCodec, resolve_key

if TYPE_CHECKING:
    from ext.redis import RedisConnection


class RedisTokenStore:
    """OAuth records as Redis strings under `prefix` + a hash of the key.

    Arguments:
        connection: an `ext.redis.RedisConnection` (install `ext-tools-mcp[redis]`).
        prefix: the key prefix (`ext:mcp-oauth:`).
        encryption_key / encryption_key_env: a Fernet key; records are then encrypted in Redis.
    """

    __slots__ = ("_client", "_codec", "_connection", "_prefix")

    def __init__(
        self,
        connection: RedisConnection,
        *,
        prefix: str = "ext:mcp-oauth:",
        encryption_key: str | SecretStr | None = None,
        encryption_key_env: str | None = None,
    ) -> None:
        if not callable(getattr(connection, "client", None)) or not isinstance(getattr(connection, "where", None), str):
            raise ConfigurationError(
                f"RedisTokenStore.connection must be an ext.redis.RedisConnection, got {type(connection).__name__}"
            )
        if not isinstance(prefix, str) or not prefix:
            raise ConfigurationError("RedisTokenStore.prefix must be a non-empty string")
        self._connection = connection
        self._prefix = prefix
        self._codec = RecordCodec(resolve_key(encryption_key, encryption_key_env, "RedisTokenStore"), "RedisTokenStore")
        self._client: Any = None

    @property
    def encrypted(self) -> bool:
        return self._codec.encrypted

    def describe(self) -> str:
        return f"redis {self._connection.where} {self._prefix}*"

    def _redis(self) -> Any:
        if self._client is None:
            self._client = self._connection.client()
        return self._client

    def _key(self, key: str) -> str:
        return self._prefix + hashlib.sha256(key.encode("utf-8")).hexdigest()[:40]

    async def get(self, key: str) -> dict[str, Any] | None:
        data = await self._redis().get(self._key(key))
        if data is None:
            return None
        return self._codec.decode(bytes(data), f"{self._key(key)} at {self._connection.where}")

    async def put(self, key: str, record: dict[str, Any]) -> None:
        await self._redis().set(self._key(key), self._codec.encode(record))

    async def delete(self, key: str) -> None:
        await self._redis().delete(self._key(key))

    async def aclose(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            await client.aclose()

    def __repr__(self) -> str:
        return f"RedisTokenStore({self._connection.where!r}, prefix={self._prefix!r}, encrypted={self.encrypted})"
