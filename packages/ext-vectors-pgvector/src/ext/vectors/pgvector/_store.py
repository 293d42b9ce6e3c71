"""`PgVectorStore`: ext-core's `VectorStore` on PostgreSQL with pgvector, through psycopg 3's async driver.

One table per collection (`vector(N)` column, HNSW index with cosine distance; a generated `tsvector` of the text
with a GIN index for keyword search), listed in a catalog table `ext_vector_collections` so a collection's vector
size is known before anything is written. Each call is one
transaction on one connection per store (calls of one store are serialised; `_session` runs them).

Concurrent writers: an upsert writes its rows in id order, so two batches over the same ids lock them in the same
order and one waits for the other instead of deadlocking. A transaction the server still aborts as a deadlock
(40P01) or a serialization failure (40001), e.g. a delete against an upsert, is run again, up to
`conflict_retries` times; then it is a `VectorStoreConflictError`, never "cannot be reached".
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, TypeVar

from psycopg import sql
from pydantic import BaseModel, ConfigDict, Field, SecretStr

from ext.core import (
    ALL_SEARCH_MODES,
    BaseVectorStore,
    ClientClosedError,
    ConfigurationError,
    KeywordQuery,
    MetadataValue,
    VectorMatch,
    VectorQuery,
    VectorRecord,
    VectorStoreOptions,
    resolve_secret,
)
from ext.vectors.pgvector._session import Conn, Session
from ext.vectors.pgvector._url import check_secret_names, split_secrets

T = TypeVar("T")
# pgvector caps hnsw.ef_search at 1000 (its docs: "Query options").
_MAX_EF_SEARCH = 1000
# Full-text search configuration: English stemming ("rotates" finds "rotate"), as SQLite's porter tokenizer does.
# Fixed when a collection's table is made (the generated column holds its result).
_TS_CONFIG = "english"


class PgVectorStoreConfig(BaseModel):
    """`PgVectorStore` as plain data (the password is never part of a dump: `password_env` names it)."""

    model_config = ConfigDict(extra="forbid", defer_build=True, hide_input_in_errors=True)

    url: str = Field(min_length=1, description="postgresql:// URL without its password or other secrets.")
    collection_name: str = Field(min_length=1)
    vector_size: int = Field(gt=0)
    password: SecretStr | None = Field(default=None, description="Database password; never printed or dumped.")
    password_env: str | None = Field(default=None, description="Environment variable holding the password.")
    secrets: dict[str, SecretStr] = Field(
        default_factory=dict,
        exclude=True,
        description="libpq's other secret parameters (sslpassword, oauth_client_secret, scram_client_key, "
        "scram_server_key) by name; never printed, and left out of dumps.",
    )
    connect_timeout: float = Field(default=10.0, gt=0, description="Seconds to wait for a connection.")
    timeout: float = Field(default=30.0, gt=0, description="Seconds one call (one transaction) may take.")
    hnsw_m: int = Field(default=16, ge=2, le=100, description="HNSW graph degree (pgvector's `m`).")
    hnsw_ef_construction: int = Field(default=64, ge=4, le=1000, description="HNSW build quality.")
    hnsw_ef_search: int = Field(
        default=100, ge=1, le=1000, description="HNSW candidates per query (raised to top_k when smaller)."
    )
    conflict_retries: int = Field(
        default=4,
        ge=0,
        le=20,
        description="How many times a call the server aborted as a deadlock or serialization failure runs again.",
    )


def _vector_literal(vector: list[float]) -> str:
    return "[" + ",".join(repr(x) for x in vector) + "]"


def _parse_vector(text: str) -> list[float]:
    return [float(x) for x in text.strip("[]").split(",")]


def _filter_sql(filter: dict[str, list[MetadataValue]], params: list[Any]) -> sql.Composable:
    parts: list[sql.Composable] = []
    for key, values in filter.items():
        options: list[sql.Composable] = []
        for value in values:
            if value is None:
                options.append(sql.SQL("(metadata -> %s IS NULL OR metadata -> %s = 'null'::jsonb)"))
                params += [key, key]
            else:
                # jsonb equality keeps JSON's kinds apart (true is not 1) and compares numbers by value (1 = 1.0).
                options.append(sql.SQL("metadata -> %s = %s::jsonb"))
                params += [key, json.dumps(value)]
        parts.append(sql.SQL("({})").format(sql.SQL(" OR ").join(options)))
    return sql.SQL("").join(sql.SQL(" AND ") + p for p in parts)


class PgVectorStore(BaseVectorStore[PgVectorStoreConfig]):
    """A collection of vectors in PostgreSQL with the pgvector extension (HNSW index, cosine distance).

    `url` is a `postgresql://` URL; a password in it (or in `password`, `password_env`, or
    `VectorStoreOptions.api_key`) and libpq's other secret parameters in it (or in `secrets`) are split off and
    never printed, logged or dumped. An option libpq does not know is refused here, before any connection. The
    database needs the `vector` extension available; the store runs `CREATE EXTENSION IF NOT EXISTS vector` once
    (README).
    """

    search_modes = ALL_SEARCH_MODES
    component_config_schema = PgVectorStoreConfig
    component_provider_override = "ext.vectors.pgvector.PgVectorStore"

    def __init__(
        self,
        url: str,
        *,
        collection_name: str,
        vector_size: int,
        password: str | SecretStr | None = None,
        password_env: str | None = None,
        secrets: Mapping[str, str | SecretStr] | None = None,
        connect_timeout: float = 10.0,
        timeout: float = 30.0,
        hnsw_m: int = 16,
        hnsw_ef_construction: int = 64,
        hnsw_ef_search: int = 100,
        conflict_retries: int = 4,
    ) -> None:
        super().__init__(collection_name=collection_name, vector_size=vector_size)
        clean, in_url = split_secrets(url)
        url_password = in_url.pop("password", None)
        if url_password is not None and (password is not None or password_env is not None):
            raise ConfigurationError(
                "PgVectorStore: the password is both in url and in password/password_env; set it once"
            )
        given = {name: v if isinstance(v, SecretStr) else SecretStr(v) for name, v in (secrets or {}).items()}
        check_secret_names(given)
        for name in given.keys() & in_url.keys():
            raise ConfigurationError(f"PgVectorStore: {name} is both in url and in secrets; set it once")
        secret, from_env = resolve_secret(url_password if url_password is not None else password, password_env)
        if password_env is not None and secret is None:
            raise ConfigurationError(f"PgVectorStore: password_env {password_env!r} is not set or empty")
        self._config = PgVectorStoreConfig(
            url=clean,
            collection_name=collection_name,
            vector_size=vector_size,
            password=secret,
            password_env=from_env,
            secrets={**in_url, **given},
            connect_timeout=connect_timeout,
            timeout=timeout,
            hnsw_m=hnsw_m,
            hnsw_ef_construction=hnsw_ef_construction,
            hnsw_ef_search=hnsw_ef_search,
            conflict_retries=conflict_retries,
        )
        digest = hashlib.sha256(collection_name.encode()).hexdigest()[:20]
        # Table names are derived, not the collection's own name: any collection name is then a safe identifier.
        self._table_name = f"ext_vec_{digest}"
        self._table = sql.Identifier(self._table_name)
        password = self._config.password
        self._session = Session(
            url=clean,
            secrets={**self._config.secrets, **({"password": password} if password is not None else {})},
            collection_name=collection_name,
            connect_timeout=connect_timeout,
            timeout=timeout,
            conflict_retries=conflict_retries,
        )
        self._closed = False

    @classmethod
    def from_options(cls, options: VectorStoreOptions, **kwargs: Any) -> PgVectorStore:
        """The store `options` describe: `endpoint` is the URL, `api_key` (if any) the database password."""
        return cls(
            options.endpoint,
            collection_name=options.collection_name,
            vector_size=options.vector_size,
            password=options.api_key,
            **kwargs,
        )

    def _where(self) -> str:
        return f"url={self._config.url!r}"

    # --- the connection -------------------------------------------------------------------------------

    async def _run(self, work: Callable[[Conn], Awaitable[T]]) -> T:
        if self._closed:
            raise ClientClosedError(f"{self!r} is closed")
        return await self._session.run(work)

    async def _size_of(self, conn: Conn) -> int | None:
        cur = await conn.execute(
            "SELECT vector_size FROM ext_vector_collections WHERE name = %s", (self.collection_name,)
        )
        row = await cur.fetchone()
        return None if row is None else int(row[0])

    async def _require(self, conn: Conn) -> None:
        self.check_stored_size(await self._size_of(conn))

    # --- collections --------------------------------------------------------------------------------------

    async def create_collection(self) -> None:
        async def work(conn: Conn) -> None:
            await conn.execute(
                "INSERT INTO ext_vector_collections(name, vector_size, table_name) VALUES (%s, %s, %s) "
                "ON CONFLICT (name) DO NOTHING",
                (self.collection_name, self.vector_size, self._table_name),
            )
            await self._require(conn)
            await conn.execute(
                sql.SQL(
                    "CREATE TABLE IF NOT EXISTS {} (id text PRIMARY KEY, embedding vector({}) NOT NULL, "
                    "text text NOT NULL, metadata jsonb NOT NULL)"
                ).format(self._table, sql.Literal(self.vector_size))
            )
            # A table made before keyword search gets the column here (computed for its rows).
            await conn.execute(
                sql.SQL(
                    "ALTER TABLE {} ADD COLUMN IF NOT EXISTS tsv tsvector "
                    "GENERATED ALWAYS AS (to_tsvector({}, text)) STORED"
                ).format(self._table, sql.Literal(_TS_CONFIG))
            )
            await conn.execute(
                sql.SQL("CREATE INDEX IF NOT EXISTS {} ON {} USING gin (tsv)").format(
                    sql.Identifier(f"{self._table_name}_tsv"), self._table
                )
            )
            await conn.execute(
                sql.SQL(
                    "CREATE INDEX IF NOT EXISTS {} ON {} USING hnsw (embedding vector_cosine_ops) "
                    "WITH (m = {}, ef_construction = {})"
                ).format(
                    sql.Identifier(f"{self._table_name}_hnsw"),
                    self._table,
                    sql.Literal(self._config.hnsw_m),
                    sql.Literal(self._config.hnsw_ef_construction),
                )
            )

        await self._run(work)

    async def collection_exists(self) -> bool:
        async def work(conn: Conn) -> bool:
            return await self._size_of(conn) is not None

        return await self._run(work)

    async def delete_collection(self) -> None:
        async def work(conn: Conn) -> None:
            await conn.execute(sql.SQL("DROP TABLE IF EXISTS {}").format(self._table))
            await conn.execute("DELETE FROM ext_vector_collections WHERE name = %s", (self.collection_name,))

        await self._run(work)

    # --- records ------------------------------------------------------------------------------------------

    async def _upsert(self, records: list[VectorRecord]) -> None:
        # In id order: two batches over the same ids then lock their rows in the same order (no deadlock).
        ordered = sorted(records, key=lambda r: r.id)
        rows = [(r.id, _vector_literal(r.vector), r.text, json.dumps(r.metadata)) for r in ordered]
        statement = sql.SQL(
            "INSERT INTO {} (id, embedding, text, metadata) VALUES (%s, %s::vector, %s, %s::jsonb) "
            "ON CONFLICT (id) DO UPDATE SET embedding = excluded.embedding, text = excluded.text, "
            "metadata = excluded.metadata"
        ).format(self._table)

        async def work(conn: Conn) -> None:
            await self._require(conn)
            async with conn.cursor() as cur:
                await cur.executemany(statement, rows)

        await self._run(work)

    async def _query(self, query: VectorQuery) -> list[VectorMatch]:
        params: list[Any] = [_vector_literal(query.vector)]
        where = _filter_sql(query.filter, params)
        params += [_vector_literal(query.vector), query.top_k]
        floor = sql.SQL("")
        if query.min_score is not None:
            floor = sql.SQL(" WHERE score >= %s")
            params.append(query.min_score)
        # ORDER BY the distance operator with LIMIT is the shape pgvector's HNSW index serves.
        statement = sql.SQL(
            "SELECT id, score, text, metadata FROM (SELECT id, 1 - (embedding <=> %s::vector) AS score, text, "
            "metadata FROM {} WHERE true{} ORDER BY embedding <=> %s::vector LIMIT %s) AS hits{} "
            "ORDER BY score DESC, id"
        ).format(self._table, where, floor)

        async def work(conn: Conn) -> list[VectorMatch]:
            # The collection check and ef_search for this transaction in one round trip.
            cur = await conn.execute(
                "SELECT (SELECT vector_size FROM ext_vector_collections WHERE name = %s), "
                "set_config('hnsw.ef_search', %s, true)",
                (self.collection_name, str(min(max(self._config.hnsw_ef_search, query.top_k), _MAX_EF_SEARCH))),
            )
            row = await cur.fetchone()
            self.check_stored_size(None if row is None or row[0] is None else int(row[0]))
            cur = await conn.execute(statement, params)
            return [
                VectorMatch(id=row[0], score=float(row[1]), text=row[2], metadata=row[3])
                for row in await cur.fetchall()
            ]

        return await self._run(work)

    async def _keyword_query(self, query: KeywordQuery) -> list[VectorMatch]:
        # Each word becomes a phrase through phraseto_tsquery (a bound parameter, never tsquery syntax: `&`, `|`,
        # `!`, `:*` are plain text to it), and the phrases are OR-ed: a record holding any of them matches.
        config = sql.Literal(_TS_CONFIG)
        tsquery = sql.SQL(" || ").join(sql.SQL("phraseto_tsquery({}, %s)").format(config) for _ in query.terms)
        params: list[Any] = [*query.terms]
        where = _filter_sql(query.filter, params)
        params.append(query.top_k)
        statement = sql.SQL(
            "SELECT id, text, metadata FROM {}, ({}) AS q(query) WHERE tsv @@ q.query{} "
            "ORDER BY ts_rank_cd(tsv, q.query) DESC, id LIMIT %s"
        ).format(self._table, sql.SQL("SELECT ") + tsquery, where)

        async def work(conn: Conn) -> list[VectorMatch]:
            await self._require(conn)
            cur = await conn.execute(statement, params)
            return [VectorMatch(id=row[0], score=0.0, text=row[1], metadata=row[2]) for row in await cur.fetchall()]

        return await self._run(work)

    async def _get(self, ids: list[str]) -> list[VectorRecord]:
        statement = sql.SQL("SELECT id, embedding::text, text, metadata FROM {} WHERE id = ANY(%s)").format(self._table)

        async def work(conn: Conn) -> list[VectorRecord]:
            await self._require(conn)
            cur = await conn.execute(statement, (ids,))
            found = {
                row[0]: VectorRecord(id=row[0], vector=_parse_vector(row[1]), text=row[2], metadata=row[3])
                for row in await cur.fetchall()
            }
            return [found[i] for i in ids if i in found]

        return await self._run(work)

    async def _delete(self, ids: list[str]) -> int:
        statement = sql.SQL("DELETE FROM {} WHERE id = ANY(%s)").format(self._table)

        async def work(conn: Conn) -> int:
            await self._require(conn)
            cur = await conn.execute(statement, (ids,))
            return cur.rowcount

        return await self._run(work)

    async def _delete_where(self, filter: dict[str, list[MetadataValue]]) -> int:
        params: list[Any] = []
        statement = sql.SQL("DELETE FROM {} WHERE true{}").format(self._table, _filter_sql(filter, params))

        async def work(conn: Conn) -> int:
            await self._require(conn)
            cur = await conn.execute(statement, params)
            return cur.rowcount

        return await self._run(work)

    async def _count(self, filter: dict[str, list[MetadataValue]]) -> int:
        params: list[Any] = []
        statement = sql.SQL("SELECT count(*) FROM {} WHERE true{}").format(self._table, _filter_sql(filter, params))

        async def work(conn: Conn) -> int:
            await self._require(conn)
            cur = await conn.execute(statement, params)
            row = await cur.fetchone()
            return 0 if row is None else int(row[0])

        return await self._run(work)

    async def close(self) -> None:
        self._closed = True
        await self._session.close()

    # --- components ----------------------------------------------------------------------------------------

    def _to_config(self) -> PgVectorStoreConfig:
        return self._config

    @classmethod
    def _from_config(cls, config: PgVectorStoreConfig) -> PgVectorStore:
        return cls(
            config.url,
            collection_name=config.collection_name,
            vector_size=config.vector_size,
            password=config.password if config.password_env is None else None,
            password_env=config.password_env,
            secrets=config.secrets,
            connect_timeout=config.connect_timeout,
            timeout=config.timeout,
            hnsw_m=config.hnsw_m,
            hnsw_ef_construction=config.hnsw_ef_construction,
            hnsw_ef_search=config.hnsw_ef_search,
            conflict_retries=config.conflict_retries,
        )
