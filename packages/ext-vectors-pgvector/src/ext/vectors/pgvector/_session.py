"""One store's connection to PostgreSQL: opened on first use (and again after it broke), one transaction per call,
calls one at a time, and every failure turned into what it is.

- The server cannot be reached, or the connection broke: `VectorStoreUnavailableError` (the next call reconnects).
- A call took longer than `timeout`: `TimeoutError` (psycopg cancels the statement on the server).
- The server aborted the transaction as a deadlock (40P01) or a serialization failure (40001): the whole
  transaction is run again after a short random pause, up to `conflict_retries` times, then
  `VectorStoreConflictError`. A wait past the server's `lock_timeout` (55P03) is one too, at once.
- Any other refusal on a working connection (a constraint, a server limit): `VectorStoreError` with the server's
  message.

No message holds a secret: each is rebuilt from the driver's text with the secrets scrubbed out, without the
driver's exception attached.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, TypeVar

import psycopg
from psycopg import sql
from pydantic import SecretStr

from ext.core import VectorStoreConflictError, VectorStoreError, VectorStoreUnavailableError
from ext.vectors.pgvector._url import scrub

T = TypeVar("T")
Conn = psycopg.AsyncConnection[Any]
logger = logging.getLogger(__name__)

_CATALOG = sql.SQL(
    "CREATE TABLE IF NOT EXISTS ext_vector_collections "
    "(name text PRIMARY KEY, vector_size integer NOT NULL, table_name text NOT NULL)"
)
_RETRIED = (psycopg.errors.DeadlockDetected, psycopg.errors.SerializationFailure)


class Session:
    """The connection of one `PgVectorStore` (see the module docstring)."""

    def __init__(
        self,
        *,
        url: str,
        secrets: Mapping[str, SecretStr],
        collection_name: str,
        connect_timeout: float,
        timeout: float,
        conflict_retries: int,
    ) -> None:
        self._url = url
        self._secrets = dict(secrets)
        self._what = f"a call on collection {collection_name!r}"
        self._connect_timeout = connect_timeout
        self._timeout = timeout
        self._conflict_retries = conflict_retries
        self._conn: Conn | None = None
        self._lock = asyncio.Lock()

    def _detail(self, exc: BaseException) -> str:
        return scrub(str(exc), self._secrets).strip()

    def _unavailable(self, exc: BaseException) -> VectorStoreUnavailableError:
        return VectorStoreUnavailableError(f"PostgreSQL at {self._url} cannot be reached: {self._detail(exc)}")

    async def _connect(self) -> Conn:
        kwargs: dict[str, Any] = {"connect_timeout": max(1, round(self._connect_timeout))}
        kwargs.update({name: value.get_secret_value() for name, value in self._secrets.items()})
        try:
            conn = await psycopg.AsyncConnection.connect(self._url, autocommit=True, **kwargs)
        except psycopg.OperationalError as exc:
            # `from None`: the driver's exception is rebuilt without any secret, the original is dropped.
            raise self._unavailable(exc) from None
        try:
            async with conn.transaction():
                await conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
                await conn.execute(_CATALOG)
        except psycopg.errors.InsufficientPrivilege as exc:
            await conn.close()
            raise VectorStoreUnavailableError(
                "the pgvector extension is not enabled in this database and this user cannot enable it: run "
                f"CREATE EXTENSION vector as its owner ({exc.diag.message_primary})"
            ) from None
        except BaseException:
            await conn.close()
            raise
        return conn

    async def run(self, work: Callable[[Conn], Awaitable[T]]) -> T:
        """`work` in one transaction, run again when the server aborts it as a deadlock or serialization failure."""
        async with self._lock:
            attempt = 0
            while True:
                try:
                    return await self._attempt(work)
                except _RETRIED as exc:
                    # The server rolled the whole transaction back: running it again is safe.
                    attempt += 1
                    what = f"{exc.sqlstate} {exc.diag.message_primary}"
                    if attempt > self._conflict_retries:
                        raise VectorStoreConflictError(
                            f"PostgreSQL at {self._url} aborted {self._what} {attempt} times as other transactions "
                            f"wrote the same rows ({what}); this call changed nothing (retry it, or raise "
                            f"conflict_retries={self._conflict_retries})"
                        ) from None
                    logger.info(
                        "PostgreSQL aborted %s (%s); running it again (%d of %d)",
                        self._what,
                        what,
                        attempt,
                        self._conflict_retries,
                    )
                    # A short random pause, growing with each attempt, so the transactions in the way finish first.
                    await asyncio.sleep(random.uniform(0, 0.01 * 2**attempt))

    async def _attempt(self, work: Callable[[Conn], Awaitable[T]]) -> T:
        if self._conn is None or self._conn.closed:
            self._conn = await self._connect()
        conn = self._conn

        async def transaction() -> T:
            async with conn.transaction():
                return await work(conn)

        try:
            return await asyncio.wait_for(transaction(), self._timeout)
        except _RETRIED:
            raise
        except psycopg.errors.LockNotAvailable as exc:
            raise VectorStoreConflictError(
                f"PostgreSQL at {self._url}: {self._what} waited longer than the server's lock_timeout for rows or "
                f"tables another transaction held ({self._detail(exc)}); this call changed nothing"
            ) from None
        except psycopg.Error as exc:
            if not conn.closed:
                # The server refused this statement on a working connection: say so, not "cannot be reached".
                raise VectorStoreError(f"PostgreSQL at {self._url} refused {self._what}: {self._detail(exc)}") from None
            # A broken connection: the next call opens a new one.
            self._conn = None
            raise self._unavailable(exc) from None
        except asyncio.TimeoutError:
            # psycopg cancels the statement on the server when its task is cancelled; the connection may be
            # mid-protocol, so the next call opens a new one.
            self._conn = None
            await conn.close()
            raise TimeoutError(
                f"PostgreSQL at {self._url} did not finish {self._what} within timeout={self._timeout} s"
            ) from None

    async def close(self) -> None:
        async with self._lock:
            conn, self._conn = self._conn, None
            if conn is not None:
                await conn.close()
