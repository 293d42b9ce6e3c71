"""Vector stores: the `VectorStore` protocol, its record and query types, the metadata filter language, and
`BaseVectorStore`, which validates every call once so each backend only moves data.

Scores are cosine similarity, in [-1, 1], higher is closer, in every backend.

Metadata filter language (small on purpose, so every backend can run it in its own query language):
a mapping of metadata key to a condition; every condition must hold (AND).

- `{"lang": "en"}`: the value equals `"en"`;
- `{"lang": {"$in": ["en", "fr"]}}`: the value is one of the listed values.

Values are JSON scalars (str, int, float, bool, None): numbers finite, integers within signed 64 bits, strings
without NUL characters, at most 1000 values in one filter. A bool never equals a number (`True` is not `1`), and
`None` matches a key that is null or absent. `{}` (or None) matches every record.

What a store accepts (float32 vectors of a bounded length, strings without NUL, ...) is checked in
`_vector_values`, once, before any backend is reached; its docstring says why each rule exists. Keyword and hybrid
search (`mode=`), for the backends that declare them in `search_modes`, are described in `_vector_search`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from types import TracebackType
from typing import Any, ClassVar, Protocol, TypeAlias, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from ._component import Component, ConfigT
from ._errors import ExtError
from ._vector_search import (
    SEARCH_MODES,
    VECTOR_ONLY,
    KeywordQuery,
    SearchMode,
    fuse_rankings,
    fusion_depth,
    keyword_terms,
    rank_score,
)
from ._vector_values import (
    MetadataValue,
    check_id,
    check_ids,
    check_length,
    check_metadata,
    check_text,
    check_vector,
    normalize_filter,
)

MetadataFilter: TypeAlias = Mapping[str, Any]
"""See the module docstring: `{key: value}` or `{key: {"$in": [values]}}`."""


class VectorStoreError(ExtError):
    """A vector store cannot do what was asked (the message says why)."""


class CollectionNotFoundError(VectorStoreError, LookupError):
    """The collection does not exist: call `create_collection()` first."""


class VectorSizeError(VectorStoreError, ValueError):
    """A vector's length is not the collection's vector size."""


class VectorStoreUnavailableError(VectorStoreError, ConnectionError):
    """The store's backend cannot be reached (the message names where, without any secret)."""


class VectorStoreConflictError(VectorStoreError):
    """Other connections writing the same data kept this call from finishing: a lock held longer than the store's
    wait limit (SQLite's `busy_timeout`), or a deadlock or serialization failure that outlasted the store's retries
    (PostgreSQL). The backend is reachable and the call changed nothing; it can be retried."""


class VectorRecord(BaseModel):
    """One stored item: its id, vector, text and metadata (JSON scalars).

    Validated whenever it is built or handed to a store (`revalidate_instances`): a record built with
    `model_construct` or changed after it was built is checked again before anything is written."""

    model_config = ConfigDict(extra="forbid", defer_build=True, revalidate_instances="always")

    id: str = Field(
        min_length=1,
        description="Unique within the collection; upserting an id again replaces it. No NUL characters, at most "
        "2048 bytes as UTF-8.",
    )
    vector: list[float] = Field(
        description="As many numbers as the collection's vector size, each finite and within float32's range, not "
        "all zero."
    )
    text: str = Field(default="", description="The text the vector stands for (no NUL characters).")
    metadata: dict[str, MetadataValue] = Field(
        default_factory=dict,
        description="JSON scalars, for filters: finite numbers, integers within signed 64 bits, strings and keys "
        "without NUL characters.",
    )

    @field_validator("id", mode="after")
    @classmethod
    def _id(cls, value: str) -> str:
        return check_id(value, "id")

    @field_validator("text", mode="after")
    @classmethod
    def _text(cls, value: str) -> str:
        return check_text(value, "text")

    @field_validator("vector", mode="after")
    @classmethod
    def _float32(cls, value: list[float]) -> list[float]:
        return check_vector(value, "vector")

    @field_validator("metadata", mode="after")
    @classmethod
    def _scalars(cls, value: dict[str, MetadataValue]) -> dict[str, MetadataValue]:
        return check_metadata(value)


class VectorMatch(BaseModel):
    """One query result: the record (without its vector) and its cosine similarity to the query."""

    model_config = ConfigDict(defer_build=True)

    id: str
    score: float = Field(
        description="Higher is closer. Vector search: cosine similarity in [-1, 1]. Keyword search: the rank score "
        "(1.0 for the first match). Hybrid: the fused rank score in (0, 1], 1.0 when first in both rankings."
    )
    text: str = ""
    metadata: dict[str, MetadataValue] = Field(default_factory=dict)


class VectorQuery(BaseModel):
    """A validated query: the vector, how many results (`top_k`), a metadata `filter`, a `min_score`."""

    model_config = ConfigDict(extra="forbid", defer_build=True)

    vector: list[float]
    top_k: int = Field(default=10, gt=0, le=10_000, description="How many results at most (1 to 10000).")
    filter: dict[str, list[MetadataValue]] = Field(
        default_factory=dict, description="Normalised filter: key -> accepted values (see `normalize_filter`)."
    )
    min_score: float | None = Field(default=None, ge=-1.0, le=1.0, description="Cosine similarity floor, -1 to 1.")

    @field_validator("vector", mode="after")
    @classmethod
    def _float32(cls, value: list[float]) -> list[float]:
        check_vector(value, "vector")
        check_length(value, "vector")
        return value

    @field_validator("filter", mode="before")
    @classmethod
    def _filter(cls, value: Any) -> dict[str, list[MetadataValue]]:
        return normalize_filter(value)


def _same(a: MetadataValue, b: MetadataValue) -> bool:
    # JSON semantics: a bool is not a number, 1 == 1.0.
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    return a == b


def matches_filter(metadata: Mapping[str, MetadataValue], normalized: Mapping[str, Sequence[MetadataValue]]) -> bool:
    """Whether `metadata` passes a filter from `normalize_filter` (for backends that filter in Python)."""
    return all(any(_same(metadata.get(key), v) for v in values) for key, values in normalized.items())


@runtime_checkable
class VectorStore(Protocol):
    """One collection of vectors of a fixed size: create or open it, upsert, query, get, delete, count.

    Every call validates its input before touching the backend: a vector of the wrong length raises
    `VectorSizeError`; a value no store can keep (a component outside float32's range, a vector whose length
    float32 cannot square, a non-finite number, a NUL character, an integer beyond 64 bits) or a bad filter
    `ValueError` naming it; and a batch with one bad record writes nothing. A collection that does not exist
    raises `CollectionNotFoundError`; other writers holding the data past the store's limits
    `VectorStoreConflictError`.
    """

    @property
    def collection_name(self) -> str: ...

    @property
    def vector_size(self) -> int: ...

    @property
    def search_modes(self) -> frozenset[SearchMode]:
        """The `mode`s `query` accepts: always `"vector"`; `"keyword"` and `"hybrid"` where the backend has full-text
        search."""
        ...

    async def create_collection(self) -> None:
        """Create the collection, or open it if it exists with the same vector size (else `VectorSizeError`)."""
        ...

    async def collection_exists(self) -> bool: ...

    async def delete_collection(self) -> None:
        """Drop the collection and every record in it (nothing happens if it does not exist)."""
        ...

    async def upsert(self, records: Sequence[VectorRecord]) -> None:
        """Insert or replace `records`, all of them or none (one transaction)."""
        ...

    async def query(
        self,
        vector: Sequence[float] | None = None,
        *,
        top_k: int = 10,
        filter: MetadataFilter | None = None,
        min_score: float | None = None,
        text: str | None = None,
        mode: SearchMode = "vector",
    ) -> list[VectorMatch]:
        """The `top_k` best records passing `filter`, best first. `mode="vector"`: closest to `vector`, with a cosine
        similarity of at least `min_score`. `"keyword"`: whose text holds the words of `text` (no `vector`).
        `"hybrid"`: both, fused by rank (`vector` and `text`; `min_score` cuts the vector side). A mode outside
        `search_modes` is a `ValueError`, before the backend is reached."""
        ...

    async def get(self, ids: Sequence[str]) -> list[VectorRecord]:
        """The records with these ids (vectors included), in the order asked; missing ids are left out."""
        ...

    async def delete(self, ids: Sequence[str]) -> int:
        """Delete these ids; returns how many existed."""
        ...

    async def delete_where(self, filter: MetadataFilter) -> int:
        """Delete every record passing `filter` (`{}` deletes them all); returns how many."""
        ...

    async def count(self, filter: MetadataFilter | None = None) -> int: ...

    async def close(self) -> None: ...

    async def __aenter__(self) -> VectorStore: ...

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None: ...


def _first_error(exc: ValidationError) -> str:
    # Never echo input values (a vector of thousands of numbers, or a misplaced secret): the field and the reason.
    error = exc.errors(include_input=False, include_url=False)[0]
    message = str(error["msg"]).removeprefix("Value error, ")
    if error["type"] == "value_error":
        return message  # the validators of VectorRecord name the field themselves
    where = ".".join(str(part) for part in error["loc"])
    return f"{where}: {message}" if where else message


def _given_id(item: object) -> object:
    return item.get("id") if isinstance(item, Mapping) else getattr(item, "id", None)


class BaseVectorStore(ABC, Component[ConfigT]):
    """What every backend shares: validation of every call against the collection's vector size (before the
    backend is reached), the async context manager, and a repr without secrets. A backend implements the
    `_`-prefixed methods, which receive validated input."""

    component_type = "vector_store"
    search_modes: ClassVar[frozenset[SearchMode]] = VECTOR_ONLY
    """A backend with full-text search sets `ALL_SEARCH_MODES` and implements `_keyword_query`."""

    def __init__(self, *, collection_name: str, vector_size: int) -> None:
        if not isinstance(collection_name, str) or not collection_name:
            raise ValueError(f"collection_name must be a non-empty string, got {collection_name!r}")
        check_text(collection_name, "collection_name")
        if isinstance(vector_size, bool) or not isinstance(vector_size, int) or vector_size <= 0:
            raise ValueError(f"vector_size must be a positive integer, got {vector_size!r}")
        self._collection_name = collection_name
        self._vector_size = vector_size

    @property
    def collection_name(self) -> str:
        return self._collection_name

    @property
    def vector_size(self) -> int:
        return self._vector_size

    def _check_size(self, vector: Sequence[float], where: str) -> None:
        if len(vector) != self._vector_size:
            raise VectorSizeError(
                f"{where} has {len(vector)} dimensions; collection {self._collection_name!r} holds vectors of "
                f"size {self._vector_size}"
            )

    def check_records(self, records: Sequence[VectorRecord | Mapping[str, Any]]) -> list[VectorRecord]:
        """`records` validated for this collection, each record (a `VectorRecord` or a mapping) checked again as
        a whole: a `ValueError` names the record (index and id), the field and what was expected."""
        given: object = records
        if isinstance(given, (str, bytes)) or not isinstance(given, Sequence):
            raise ValueError(f"records must be a list of VectorRecord, got {type(given).__name__}")
        out: list[VectorRecord] = []
        seen: set[str] = set()
        for index, item in enumerate(records):
            given_id = _given_id(item)
            named = f" (id {given_id!r})" if isinstance(given_id, str) else ""
            try:
                record = VectorRecord.model_validate(item)
            except ValidationError as exc:
                raise ValueError(f"records[{index}]{named}: {_first_error(exc)}") from None
            self._check_size(record.vector, f"records[{index}].vector{named}")
            try:
                check_length(record.vector, "vector")
            except ValueError as exc:
                raise ValueError(f"records[{index}]{named}: {exc}") from None
            if record.id in seen:
                raise ValueError(f"records[{index}].id {record.id!r} appears twice in one batch")
            seen.add(record.id)
            out.append(record)
        return out

    def make_query(
        self, vector: Sequence[float], top_k: int, filter: MetadataFilter | None, min_score: float | None
    ) -> VectorQuery:
        """The validated query; a `ValueError` names the field and what was expected (never echoing the input)."""
        try:
            query = VectorQuery(vector=list(vector), top_k=top_k, filter=filter, min_score=min_score)  # type: ignore[arg-type]
        except ValidationError as exc:
            raise ValueError(f"query: {_first_error(exc)}") from None
        self._check_size(query.vector, "query vector")
        return query

    def make_keyword_query(
        self, text: object, top_k: int, filter: MetadataFilter | None, mode: SearchMode
    ) -> KeywordQuery:
        """The validated keyword side of a `keyword` or `hybrid` query."""
        if not isinstance(text, str) or not text.strip():
            raise ValueError(f"query: text must be a non-empty string in {mode} mode, got {type(text).__name__}")
        check_text(text, "query text")
        try:
            return KeywordQuery(terms=keyword_terms(text), top_k=top_k, filter=normalize_filter(filter))
        except ValidationError as exc:
            raise ValueError(f"query: {_first_error(exc)}") from None

    def check_mode(self, mode: object) -> SearchMode:
        """`mode` if this store can search that way, else a `ValueError` naming what it can do."""
        if mode not in SEARCH_MODES:
            raise ValueError(f"query: mode must be one of {list(SEARCH_MODES)}, got {mode!r}")
        if mode not in self.search_modes:
            raise ValueError(
                f"{type(self).__name__} does not support {mode} search (its search_modes are "
                f"{sorted(self.search_modes)}): this backend has no full-text search"
            )
        return mode

    def check_stored_size(self, size: int | None) -> None:
        """For a backend: raise unless the collection exists (`size` is the vector size the backend recorded for
        it, None when it has no such collection) with this store's vector size."""
        if size is None:
            raise self.not_found()
        if size != self._vector_size:
            raise VectorSizeError(
                f"collection {self._collection_name!r} holds vectors of size {size}, this store was made for "
                f"{self._vector_size}"
            )

    def not_found(self) -> CollectionNotFoundError:
        return CollectionNotFoundError(
            f"collection {self._collection_name!r} does not exist; call create_collection() first"
        )

    # --- the protocol, validated ------------------------------------------------------------------

    async def upsert(self, records: Sequence[VectorRecord | Mapping[str, Any]]) -> None:
        checked = self.check_records(records)
        if checked:
            await self._upsert(checked)

    async def query(
        self,
        vector: Sequence[float] | None = None,
        *,
        top_k: int = 10,
        filter: MetadataFilter | None = None,
        min_score: float | None = None,
        text: str | None = None,
        mode: SearchMode = "vector",
    ) -> list[VectorMatch]:
        mode = self.check_mode(mode)
        if mode == "vector":
            if text is not None:
                raise ValueError("query: text is used in keyword and hybrid mode only; pass mode='hybrid' to use it")
            if vector is None:
                raise ValueError("query: a vector is required in vector mode")
            return await self._query(self.make_query(vector, top_k, filter, min_score))
        if mode == "keyword":
            if vector is not None:
                raise ValueError("query: keyword mode takes no vector; pass mode='hybrid' to use both")
            if min_score is not None:
                raise ValueError("query: min_score is a cosine-similarity floor; keyword mode has none")
            keyword = self.make_keyword_query(text, top_k, filter, mode)
            if not keyword.terms:
                return []
            found = await self._keyword_query(keyword)
            return [m.model_copy(update={"score": rank_score(rank)}) for rank, m in enumerate(found[:top_k], 1)]
        if vector is None:
            raise ValueError("query: a vector is required in hybrid mode (and text)")
        keyword = self.make_keyword_query(text, top_k, filter, mode)
        depth = fusion_depth(top_k)
        near = await self._query(self.make_query(vector, depth, filter, min_score))
        words = await self._keyword_query(keyword.model_copy(update={"top_k": depth})) if keyword.terms else []
        by_id = {m.id: m for m in words} | {m.id: m for m in near}
        fused = fuse_rankings([[m.id for m in near], [m.id for m in words]])
        return [by_id[id_].model_copy(update={"score": score}) for id_, score in fused[:top_k]]

    async def get(self, ids: Sequence[str]) -> list[VectorRecord]:
        return await self._get(check_ids(ids))

    async def delete(self, ids: Sequence[str]) -> int:
        return await self._delete(check_ids(ids))

    async def delete_where(self, filter: MetadataFilter) -> int:
        if filter is None:
            raise ValueError("filter is required; pass {} to delete every record of the collection")
        return await self._delete_where(normalize_filter(filter))

    async def count(self, filter: MetadataFilter | None = None) -> int:
        return await self._count(normalize_filter(filter))

    async def __aenter__(self) -> BaseVectorStore[ConfigT]:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}({self._where()}, collection_name={self._collection_name!r}, "
            f"vector_size={self._vector_size})"
        )

    # --- what a backend implements ----------------------------------------------------------------

    def _where(self) -> str:
        """Where the store lives, for repr and errors, without secrets."""
        return ""

    @abstractmethod
    async def create_collection(self) -> None: ...

    @abstractmethod
    async def collection_exists(self) -> bool: ...

    @abstractmethod
    async def delete_collection(self) -> None: ...

    @abstractmethod
    async def close(self) -> None: ...

    @abstractmethod
    async def _upsert(self, records: list[VectorRecord]) -> None: ...

    @abstractmethod
    async def _query(self, query: VectorQuery) -> list[VectorMatch]: ...

    async def _keyword_query(self, query: KeywordQuery) -> list[VectorMatch]:
        """The records whose text holds any of `query.terms` (each a literal phrase, never query syntax), passing
        `query.filter`, best first by the backend's text relevance, at most `query.top_k` (scores are replaced).
        Only called when `search_modes` includes `"keyword"`."""
        raise NotImplementedError(f"{type(self).__name__} declares keyword search but does not implement it")

    @abstractmethod
    async def _get(self, ids: list[str]) -> list[VectorRecord]: ...

    @abstractmethod
    async def _delete(self, ids: list[str]) -> int: ...

    @abstractmethod
    async def _delete_where(self, filter: dict[str, list[MetadataValue]]) -> int: ...

    @abstractmethod
    async def _count(self, filter: dict[str, list[MetadataValue]]) -> int: ...


__all__ = [
    "BaseVectorStore",
    "CollectionNotFoundError",
    "MetadataFilter",
    "MetadataValue",
    "VectorMatch",
    "VectorQuery",
    "VectorRecord",
    "VectorSizeError",
    "VectorStore",
    "VectorStoreConflictError",
    "VectorStoreError",
    "VectorStoreUnavailableError",
    "matches_filter",
    "normalize_filter",
]
