"""`SqliteVectorStore`: ext-core's `VectorStore` in one SQLite file (or in memory), with the `sqlite-vec`
extension loaded through apsw (which bundles its own SQLite, so it works on Python builds that cannot load
SQLite extensions). A collection of fewer than `index_threshold` records is searched exactly, by a scan with
`vec_distance_cosine` and filters in SQL; a larger one through an in-memory index (`_ann`: exact SIMD scan up to
`exact_limit` records, HNSW past it) that follows the rows, with filters checked in SQL on an adaptively grown
candidate list and an exact scan when a filter is too selective for that (README: the numbers). Keyword search is
SQLite's FTS5.

Writes run in `BEGIN IMMEDIATE` transactions: the write lock is taken first, so a second writer (another store,
another process) waits up to `busy_timeout` for it. A deferred transaction that reads before it writes could not
wait: SQLite refuses at once to upgrade a read lock while another connection holds the write lock, since waiting
could deadlock. A lock held past `busy_timeout` is a `VectorStoreConflictError`.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, TypeVar

import apsw
import sqlite_vec
from pydantic import BaseModel, ConfigDict, Field, ValidationError

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
    VectorStoreConflictError,
    VectorStoreOptions,
    VectorStoreUnavailableError,
)
from ext.vectors.sqlite._sql import (
    SCHEMA,
    SEARCH_SCHEMA,
    fts_match,
    has_schema,
    pack,
    prune_log,
    reading,
    unpack,
    where_sql,
    writing,
)

if TYPE_CHECKING:  # numpy and usearch load with the first index, not with the store (`ext memory` starts faster)
    from ext.vectors.sqlite._ann import VectorIndex

T = TypeVar("T")

_UNUSABLE = (apsw.CantOpenError, apsw.IOError, apsw.PermissionsError, apsw.NotADBError)


class SqliteVectorStoreConfig(BaseModel):
    """`SqliteVectorStore` as plain data."""

    model_config = ConfigDict(extra="forbid", defer_build=True)

    path: str = Field(default=":memory:", min_length=1, description="Database file, or ':memory:'.")
    collection_name: str = Field(min_length=1, description="The collection in that file.")
    vector_size: int = Field(gt=0, description="Dimensions of each vector.")
    busy_timeout: float = Field(default=5.0, ge=0, description="Seconds to wait for another writer's lock.")
    index_threshold: int | None = Field(
        default=1000,
        ge=0,
        description="Collections of at least this many records are searched through the in-memory index; smaller "
        "ones by an exact SQL scan. None: always the scan.",
    )
    exact_limit: int = Field(
        default=20_000, ge=0, description="Up to this many records the index is scanned exactly (SIMD); past it, HNSW."
    )
    hnsw_connectivity: int = Field(default=16, ge=2, le=256, description="HNSW graph degree (usearch `connectivity`).")
    hnsw_expansion_add: int = Field(default=64, ge=1, le=4096, description="HNSW build quality.")
    hnsw_expansion_search: int = Field(
        default=160, ge=1, le=4096, description="HNSW candidates per query (raised to the count asked for)."
    )


class SqliteVectorStore(BaseVectorStore[SqliteVectorStoreConfig]):
    """A collection of vectors in a SQLite file (`path`) or in memory (`":memory:"`, the default).

    Several collections can share one file. Calls run on one worker thread per store, so the event loop never
    blocks on disk; each batch is one transaction.
    """

    search_modes = ALL_SEARCH_MODES
    component_config_schema = SqliteVectorStoreConfig
    component_provider_override = "ext.vectors.sqlite.SqliteVectorStore"

    def __init__(
        self,
        path: str = ":memory:",
        *,
        collection_name: str,
        vector_size: int,
        busy_timeout: float = 5.0,
        index_threshold: int | None = 1000,
        exact_limit: int = 20_000,
        hnsw_connectivity: int = 16,
        hnsw_expansion_add: int = 64,
        hnsw_expansion_search: int = 160,
    ) -> None:
        super().__init__(collection_name=collection_name, vector_size=vector_size)
        try:
            self._index_config = SqliteVectorStoreConfig(
                collection_name=collection_name,
                vector_size=vector_size,
                index_threshold=index_threshold,
                exact_limit=exact_limit,
                hnsw_connectivity=hnsw_connectivity,
                hnsw_expansion_add=hnsw_expansion_add,
                hnsw_expansion_search=hnsw_expansion_search,
            )
        except ValidationError as exc:
            error = exc.errors(include_input=False, include_url=False)[0]
            raise ConfigurationError(f"SqliteVectorStore: {error['loc'][0]}: {error['msg']}") from None
        self._index: VectorIndex | None = None
        self._sized: tuple[int, int] | None = None  # (log position, record count) when last counted
        if not isinstance(path, str) or not path:
            raise ConfigurationError(f"SqliteVectorStore: path must be a file path or ':memory:', got {path!r}")
        if isinstance(busy_timeout, bool) or not isinstance(busy_timeout, (int, float)) or not 0 <= busy_timeout < 1e6:
            raise ConfigurationError(
                f"SqliteVectorStore: busy_timeout must be a number of seconds from 0 to 1e6, got {busy_timeout!r}"
            )
        self._path = path
        self._busy_timeout = float(busy_timeout)
        self._executor: ThreadPoolExecutor | None = ThreadPoolExecutor(1, thread_name_prefix="ext-vectors-sqlite")
        self._conn: apsw.Connection | None = None

    @classmethod
    def from_options(cls, options: VectorStoreOptions) -> SqliteVectorStore:
        """The store `options` describe: `endpoint` is the file path (or ':memory:'); no `api_key` is used."""
        if options.api_key is not None:
            raise ConfigurationError("SqliteVectorStore: api_key is not used by a local file store; leave it unset")
        return cls(options.endpoint, collection_name=options.collection_name, vector_size=options.vector_size)

    def _where(self) -> str:
        return f"path={self._path!r}"

    # --- the worker thread ------------------------------------------------------------------------

    async def _run(self, work: Callable[[apsw.Connection], T]) -> T:
        if self._executor is None:
            raise ClientClosedError(f"{self!r} is closed")
        return await asyncio.get_running_loop().run_in_executor(self._executor, self._call, work)

    def _call(self, work: Callable[[apsw.Connection], T]) -> T:
        try:
            if self._conn is None:
                self._conn = self._connect()
            return work(self._conn)
        except apsw.BusyError:
            raise VectorStoreConflictError(
                f"SQLite database {self._path!r} stayed locked by another connection for longer than "
                f"busy_timeout={self._busy_timeout} s; this call changed nothing (retry it, or raise busy_timeout)"
            ) from None
        except _UNUSABLE as exc:
            raise VectorStoreUnavailableError(f"SQLite database {self._path!r} cannot be used: {exc}") from exc

    def _connect(self) -> apsw.Connection:
        try:
            conn = apsw.Connection(self._path)
        except _UNUSABLE as exc:
            raise VectorStoreUnavailableError(f"SQLite database {self._path!r} cannot be opened: {exc}") from exc
        try:
            conn.enable_load_extension(True)
            conn.load_extension(sqlite_vec.loadable_path())
            conn.enable_load_extension(False)
            conn.set_busy_timeout(int(self._busy_timeout * 1000))
            conn.execute("PRAGMA foreign_keys = ON")
            # Only a file without the tables takes the write lock to make them: readers need not queue behind
            # a writer's transaction just to open the file.
            if not has_schema(conn):
                with writing(conn):
                    conn.execute(SCHEMA)
                    if conn.execute("SELECT 1 FROM sqlite_schema WHERE name = 'ext_fts'").fetchone() is None:
                        # A file written before keyword search: index the text it already holds.
                        conn.execute(SEARCH_SCHEMA)
                        conn.execute("INSERT INTO ext_fts(ext_fts) VALUES ('rebuild')")
                    conn.execute(SEARCH_SCHEMA)
        except _UNUSABLE as exc:
            conn.close()
            raise VectorStoreUnavailableError(f"SQLite database {self._path!r} cannot be opened: {exc}") from exc
        except BaseException:
            conn.close()
            raise
        return conn

    def _size_of(self, conn: apsw.Connection) -> int | None:
        row = conn.execute("SELECT vector_size FROM ext_collections WHERE name = ?", (self.collection_name,)).fetchone()
        return None if row is None else int(row[0])

    def _require(self, conn: apsw.Connection) -> None:
        self.check_stored_size(self._size_of(conn))

    # --- collections --------------------------------------------------------------------------------

    async def create_collection(self) -> None:
        def work(conn: apsw.Connection) -> None:
            with writing(conn):
                conn.execute(
                    "INSERT OR IGNORE INTO ext_collections(name, vector_size) VALUES (?, ?)",
                    (self.collection_name, self.vector_size),
                )
                self._require(conn)

        await self._run(work)

    async def collection_exists(self) -> bool:
        return await self._run(lambda conn: self._size_of(conn) is not None)

    async def delete_collection(self) -> None:
        def work(conn: apsw.Connection) -> None:
            with writing(conn):
                conn.execute("DELETE FROM ext_records WHERE collection = ?", (self.collection_name,))
                conn.execute("DELETE FROM ext_collections WHERE name = ?", (self.collection_name,))

        await self._run(work)

    # --- records ------------------------------------------------------------------------------------

    async def _upsert(self, records: list[VectorRecord]) -> None:
        rows = [
            (self.collection_name, r.id, pack(r.vector), r.text, json.dumps(r.metadata, ensure_ascii=False))
            for r in records
        ]

        def work(conn: apsw.Connection) -> None:
            with writing(conn):  # one transaction: a failure rolls the whole batch back
                self._require(conn)
                prune_log(conn)
                conn.executemany(
                    "INSERT INTO ext_records(collection, id, embedding, text, metadata) VALUES (?, ?, ?, ?, ?) "
                    "ON CONFLICT (collection, id) DO UPDATE SET embedding = excluded.embedding, "
                    "text = excluded.text, metadata = excluded.metadata",
                    rows,
                )

        await self._run(work)

    # --- the in-memory index (`_ann`) -------------------------------------------------------------------

    def _index_for(self, conn: apsw.Connection) -> VectorIndex | None:
        """The collection's index, level with the rows, or None while the collection is below the threshold."""
        config = self._index_config
        if self._index is None:
            threshold = config.index_threshold
            if threshold is None:
                return None
            if threshold > 0:
                last = conn.execute("SELECT max(seq) FROM ext_changes").fetchone()
                position = -1 if last is None or last[0] is None else int(last[0])
                if self._sized is None or self._sized[0] != position:
                    row = conn.execute(
                        "SELECT count(*) FROM ext_records WHERE collection = ?", (self.collection_name,)
                    ).fetchone()
                    self._sized = (position, 0 if row is None else int(row[0]))
                if self._sized[1] < threshold:
                    return None
            from ext.vectors.sqlite._ann import VectorIndex

            self._index = VectorIndex(
                self.collection_name,
                self.vector_size,
                connectivity=config.hnsw_connectivity,
                expansion_add=config.hnsw_expansion_add,
                expansion_search=config.hnsw_expansion_search,
            )
        self._index.sync(conn)
        return self._index

    def _indexed_query(self, conn: apsw.Connection, index: VectorIndex, query: VectorQuery) -> list[VectorMatch] | None:
        """The query through the index, or None when its filter is too selective for the candidates it gives
        (then the exact scan answers). Filters are checked in SQL on the candidates, whose number grows until
        `top_k` of them pass: never a filter applied after a cut at `top_k`. Through HNSW it grows until four
        times `top_k` pass, as an approximate list's best passing records need not be its first ones."""
        exact = len(index) <= self._index_config.exact_limit
        enough = query.top_k if exact else 4 * query.top_k
        count = query.top_k if not query.filter else max(4 * query.top_k, 40)
        while True:
            candidates = index.search(query.vector, count, exact=exact)
            params: list[Any] = [self.collection_name, json.dumps([id_ for id_, _ in candidates])]
            sql = (
                "SELECT id, text, metadata FROM ext_records WHERE collection = ? "
                "AND id IN (SELECT value FROM json_each(?))" + where_sql(query.filter, params)
            )
            rows = {row[0]: (row[1], row[2]) for row in conn.execute(sql, params)}
            floor = -2.0 if query.min_score is None else query.min_score
            found = [(id_, score) for id_, score in candidates if id_ in rows and score >= floor]
            done = (
                len(found) >= enough
                or len(candidates) < count  # the whole index was searched
                or (candidates and candidates[-1][1] < floor)  # no further candidate can pass min_score
                or not query.filter
            )
            if done:
                break
            if count * 4 > max(len(index) // 4, 1000):
                if len(found) >= query.top_k:
                    break  # enough to answer; a search four times wider would cost more than it adds
                return None  # a selective filter: the exact scan, over the matching rows only, is cheaper
            count *= 4
        found.sort(key=lambda item: (-item[1], item[0]))
        return [
            VectorMatch(id=id_, score=score, text=rows[id_][0], metadata=json.loads(rows[id_][1]))
            for id_, score in found[: query.top_k]
        ]

    async def _query(self, query: VectorQuery) -> list[VectorMatch]:
        params: list[Any] = [pack(query.vector), self.collection_name]
        where = where_sql(query.filter, params)
        floor = ""
        if query.min_score is not None:
            floor = " WHERE score >= ?"
            params.append(query.min_score)
        params.append(query.top_k)
        sql = (
            "SELECT id, score, text, metadata FROM ("
            "SELECT id, 1.0 - vec_distance_cosine(embedding, ?) AS score, text, metadata FROM ext_records "
            f"WHERE collection = ?{where}){floor} ORDER BY score DESC, id LIMIT ?"
        )

        def work(conn: apsw.Connection) -> list[VectorMatch]:
            with reading(conn):
                self._require(conn)
                index = self._index_for(conn)
                if index is not None:
                    indexed = self._indexed_query(conn, index, query)
                    if indexed is not None:
                        return indexed
                return [
                    VectorMatch(id=row[0], score=float(row[1]), text=row[2], metadata=json.loads(row[3]))
                    for row in conn.execute(sql, params)
                ]

        return await self._run(work)

    _match = staticmethod(fts_match)

    async def _keyword_query(self, query: KeywordQuery) -> list[VectorMatch]:
        params: list[Any] = [self._match(query.terms), self.collection_name]
        where = where_sql(query.filter, params)
        params.append(query.top_k)
        sql = (
            "SELECT r.id, r.text, r.metadata FROM ext_fts JOIN ext_records AS r ON r.rowid = ext_fts.rowid "
            f"WHERE ext_fts MATCH ? AND r.collection = ?{where} ORDER BY bm25(ext_fts), r.id LIMIT ?"
        )

        def work(conn: apsw.Connection) -> list[VectorMatch]:
            self._require(conn)
            return [
                VectorMatch(id=row[0], score=0.0, text=row[1], metadata=json.loads(row[2]))
                for row in conn.execute(sql, params)
            ]

        return await self._run(work)

    async def _get(self, ids: list[str]) -> list[VectorRecord]:
        def work(conn: apsw.Connection) -> list[VectorRecord]:
            self._require(conn)
            found: dict[str, VectorRecord] = {}
            for row in conn.execute(
                "SELECT id, embedding, text, metadata FROM ext_records WHERE collection = ? "
                "AND id IN (SELECT value FROM json_each(?))",
                (self.collection_name, json.dumps(ids)),
            ):
                found[row[0]] = VectorRecord(id=row[0], vector=unpack(row[1]), text=row[2], metadata=json.loads(row[3]))
            return [found[i] for i in ids if i in found]

        return await self._run(work)

    async def _delete(self, ids: list[str]) -> int:
        def work(conn: apsw.Connection) -> int:
            with writing(conn):
                self._require(conn)
                conn.execute(
                    "DELETE FROM ext_records WHERE collection = ? AND id IN (SELECT value FROM json_each(?))",
                    (self.collection_name, json.dumps(ids)),
                )
                deleted = conn.changes()
            return deleted

        return await self._run(work)

    async def _delete_where(self, filter: dict[str, list[MetadataValue]]) -> int:
        params: list[Any] = [self.collection_name]
        sql = "DELETE FROM ext_records WHERE collection = ?" + where_sql(filter, params)

        def work(conn: apsw.Connection) -> int:
            with writing(conn):
                self._require(conn)
                conn.execute(sql, params)
                deleted = conn.changes()
            return deleted

        return await self._run(work)

    async def _count(self, filter: dict[str, list[MetadataValue]]) -> int:
        params: list[Any] = [self.collection_name]
        sql = "SELECT count(*) FROM ext_records WHERE collection = ?" + where_sql(filter, params)

        def work(conn: apsw.Connection) -> int:
            self._require(conn)
            row = conn.execute(sql, params).fetchone()
            return 0 if row is None else int(row[0])

        return await self._run(work)

    async def close(self) -> None:
        executor, self._executor = self._executor, None
        if executor is None:
            return

        def shut() -> None:
            self._index = None
            if self._conn is not None:
                self._conn.close()
                self._conn = None

        await asyncio.get_running_loop().run_in_executor(executor, shut)
        executor.shutdown(wait=False)

    # --- components ----------------------------------------------------------------------------------

    def _to_config(self) -> SqliteVectorStoreConfig:
        return self._index_config.model_copy(update={"path": self._path, "busy_timeout": self._busy_timeout})

    @classmethod
    def _from_config(cls, config: SqliteVectorStoreConfig) -> SqliteVectorStore:
        return cls(
            config.path,
            collection_name=config.collection_name,
            vector_size=config.vector_size,
            busy_timeout=config.busy_timeout,
            index_threshold=config.index_threshold,
            exact_limit=config.exact_limit,
            hnsw_connectivity=config.hnsw_connectivity,
            hnsw_expansion_add=config.hnsw_expansion_add,
            hnsw_expansion_search=config.hnsw_expansion_search,
        )
