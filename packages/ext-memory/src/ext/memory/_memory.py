"""`VectorMemory`: texts and documents split into overlapping chunks, embedded by any `EmbeddingClient`, kept in
any `VectorStore`, and found again by text. Each chunk keeps its source and position."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from ext.core import (
    CancellationToken,
    ConfigurationError,
    EmbeddingClient,
    MetadataFilter,
    MetadataValue,
    SearchMode,
    VectorRecord,
    VectorSizeError,
    VectorStore,
)

from ._chunking import (
    DEFAULT_CHUNK_OVERLAP,
    DEFAULT_CHUNK_SIZE,
    DEFAULT_MAX_CHUNK_CHARS,
    TextChunk,
    check_int,
    split_text,
)
from ._markdown import split_markdown

# Metadata keys VectorMemory writes on every chunk; a document's own metadata cannot use them. `content_sha256` and
# `chunk_count` tell an unchanged document (same text, format and chunking) from a changed one, and list sources.
RESERVED_KEYS = frozenset({"source", "chunk", "start", "end", "chunk_count", "content_sha256"})

DocumentFormat = Literal["text", "markdown"]
"""How a document is chunked: `text` by `split_text`, `markdown` by `split_markdown` (headings and paragraphs)."""


class MemoryDocument(BaseModel):
    """A text to remember with where it came from (`source`, e.g. a path or URL) and metadata for filters."""

    model_config = ConfigDict(extra="forbid", defer_build=True)

    text: str
    source: str = Field(min_length=1, description="Where the text came from; adding a source again replaces it.")
    metadata: dict[str, MetadataValue] = Field(default_factory=dict)
    format: DocumentFormat = Field(
        default="text", description="text: chunked by words; markdown: by headings, paragraphs."
    )


class MemorySource(BaseModel):
    """One source in a memory and how many chunks it has there."""

    model_config = ConfigDict(frozen=True, defer_build=True)

    source: str
    chunks: int


class MemoryHit(BaseModel):
    """One remembered chunk found by a query, with its score (higher is closer: cosine similarity in vector search,
    the fused rank score in hybrid search, 1.0 when first by both meaning and words)."""

    model_config = ConfigDict(defer_build=True)

    id: str
    text: str
    score: float
    source: str
    chunk: int = Field(description="Position of the chunk in its source (0, 1, ...).")
    start: int = Field(description="Character offset of the chunk in its source.")
    end: int
    metadata: dict[str, MetadataValue] = Field(default_factory=dict, description="The document's own metadata.")


def _chunk_id(source: str, index: int) -> str:
    return f"{source}#{index}"


class VectorMemory:
    """Memory for agents over any `EmbeddingClient` and `VectorStore`.

    `add` splits each text or `MemoryDocument` into chunks (`split_text`: at most `chunk_size` words and
    `max_chunk_chars` characters, `chunk_overlap` words shared with the previous chunk), embeds them `batch_size`
    at a time and upserts them with their source and position; adding a source again replaces its chunks.
    `query` returns the chunks closest to a text: by `search="hybrid"` (the default where the store has keyword
    search: the text's embedding and its words, fused by rank, so an exact identifier the embedder does not know is
    still found), `"vector"` (the embedding alone; the default on a store without keyword search) or `"keyword"`
    (the words alone; nothing is embedded). The collection is created on first use. The memory owns neither the
    embedder nor the store: close them yourself.
    """

    def __init__(
        self,
        embedder: EmbeddingClient,
        store: VectorStore,
        *,
        chunk_size: int = DEFAULT_CHUNK_SIZE,
        chunk_overlap: int = DEFAULT_CHUNK_OVERLAP,
        max_chunk_chars: int = DEFAULT_MAX_CHUNK_CHARS,
        batch_size: int | None = None,
        search: SearchMode | None = None,
    ) -> None:
        if not isinstance(embedder, EmbeddingClient):
            raise ConfigurationError(
                f"VectorMemory: embedder must be an EmbeddingClient, got {type(embedder).__name__}"
            )
        if not isinstance(store, VectorStore):
            raise ConfigurationError(f"VectorMemory: store must be a VectorStore, got {type(store).__name__}")
        split_text("", chunk_size=chunk_size, chunk_overlap=chunk_overlap, max_chunk_chars=max_chunk_chars)
        if batch_size is None:
            # The embedder's own request size (BaseEmbeddingClient's), so each `embed` call is one request.
            own = getattr(embedder, "batch_size", None)
            batch_size = own if isinstance(own, int) and not isinstance(own, bool) and own > 0 else 64
        check_int("batch_size", batch_size, 1, "a positive number of chunks per embed call")
        size = embedder.vector_size
        if size is not None and size != store.vector_size:
            raise VectorSizeError(
                f"VectorMemory: the embedder makes vectors of size {size}, the store's collection "
                f"{store.collection_name!r} holds size {store.vector_size}"
            )
        self._search = _check_search(store, search, "VectorMemory: search")
        self._embedder = embedder
        self._store = store
        self._chunk_size = chunk_size
        self._chunk_overlap = chunk_overlap
        self._max_chunk_chars = max_chunk_chars
        self._batch_size = batch_size
        self._ready = False

    @property
    def search(self) -> SearchMode:
        """How `query` searches unless told otherwise: `"hybrid"`, `"vector"` or `"keyword"`."""
        return self._search

    @property
    def store(self) -> VectorStore:
        return self._store

    @property
    def embedder(self) -> EmbeddingClient:
        return self._embedder

    async def _ensure(self) -> None:
        if not self._ready:
            await self._store.create_collection()
            self._ready = True

    async def _embed(self, texts: Sequence[str], token: CancellationToken | None) -> list[list[float]]:
        result = await self._embedder.embed(texts, token)
        if len(result.vectors) != len(texts):
            raise ValueError(f"the embedder returned {len(result.vectors)} vectors for {len(texts)} texts")
        return result.vectors

    async def add(
        self,
        items: Sequence[str | MemoryDocument],
        cancellation_token: CancellationToken | None = None,
        *,
        progress: Callable[[int, int], object] | None = None,
    ) -> list[str]:
        """Remember `items` (plain texts get a source made from their content); returns the chunk ids written.

        A document already stored with the same text, format, metadata and chunking is left as it is (nothing
        embedded or written: see `unchanged`); a changed one replaces its chunks. `progress(done, total)` is called
        with the number of chunks embedded so far and the number in all: once before the first `embed` call (`done`
        0) and after each. Every chunk is embedded before any is written, so a failure part-way leaves the memory as
        it was.
        """
        if isinstance(items, (str, MemoryDocument)):
            items = [items]
        documents: list[MemoryDocument] = []
        first_of: dict[str, int] = {}
        for index, item in enumerate(items):
            if isinstance(item, str):
                item = MemoryDocument(text=item, source="text:" + hashlib.sha256(item.encode()).hexdigest()[:16])
            elif not isinstance(item, MemoryDocument):
                raise ValueError(f"items[{index}] must be a str or a MemoryDocument, got {type(item).__name__}")
            clash = RESERVED_KEYS & item.metadata.keys()
            if clash:
                raise ValueError(f"items[{index}].metadata uses keys VectorMemory sets itself: {sorted(clash)}")
            if item.source in first_of:
                raise ValueError(f"items[{index}].source {item.source!r} is also items[{first_of[item.source]}]'s")
            first_of[item.source] = index
            documents.append(item)
        await self._ensure()
        unchanged = await self.unchanged(documents)
        documents = [doc for doc in documents if doc.source not in unchanged]
        digests = {doc.source: self._digest(doc) for doc in documents}
        chunked = {doc.source: self.chunks(doc) for doc in documents}
        planned: list[tuple[MemoryDocument, TextChunk]] = [
            (doc, chunk) for doc in documents for chunk in chunked[doc.source]
        ]
        old_counts = {doc.source: await self._store.count({"source": doc.source}) for doc in documents}
        texts = [chunk.text for _, chunk in planned]
        vectors: list[list[float]] = []
        if progress is not None:
            progress(0, len(texts))
        for at in range(0, len(texts), self._batch_size):
            vectors += await self._embed(texts[at : at + self._batch_size], cancellation_token)
            if progress is not None:
                progress(len(vectors), len(texts))
        records = [
            VectorRecord(
                id=_chunk_id(doc.source, chunk.index),
                vector=vector,
                text=chunk.text,
                metadata={
                    **doc.metadata,
                    "source": doc.source,
                    "chunk": chunk.index,
                    "start": chunk.start,
                    "end": chunk.end,
                    "chunk_count": len(chunked[doc.source]),
                    "content_sha256": digests[doc.source],
                },
            )
            for (doc, chunk), vector in zip(planned, vectors, strict=True)
        ]
        await self._store.upsert(records)
        # A shorter new version of a source leaves old chunks past its end: remove them after the new ones exist.
        new_counts: dict[str, int] = {}
        for doc, _ in planned:
            new_counts[doc.source] = new_counts.get(doc.source, 0) + 1
        stale = [
            _chunk_id(source, i) for source, old in old_counts.items() for i in range(new_counts.get(source, 0), old)
        ]
        if stale:
            await self._store.delete(stale)
        return [record.id for record in records]

    def chunks(self, document: MemoryDocument) -> list[TextChunk]:
        """The chunks `add` makes of `document`: `split_markdown` for Markdown, else `split_text`."""
        split = split_markdown if document.format == "markdown" else split_text
        return split(
            document.text,
            chunk_size=self._chunk_size,
            chunk_overlap=self._chunk_overlap,
            max_chunk_chars=self._max_chunk_chars,
        )

    def _digest(self, document: MemoryDocument) -> str:
        """What the chunks of `document` depend on, hashed: its text, format, metadata and this memory's chunking."""
        settings = json.dumps(
            [document.format, self._chunk_size, self._chunk_overlap, self._max_chunk_chars, document.metadata],
            sort_keys=True,
        )
        return hashlib.sha256(f"{settings}\0{document.text}".encode("utf-8", "surrogatepass")).hexdigest()

    async def unchanged(self, documents: Sequence[MemoryDocument]) -> set[str]:
        """The sources of `documents` stored already with the same content (text, format, metadata and chunking,
        hashed into each chunk's `content_sha256`) and all their chunks."""
        await self._ensure()
        wanted = {_chunk_id(doc.source, 0): doc for doc in documents}
        same: set[str] = set()
        for record in await self._store.get(list(wanted)) if wanted else []:
            doc = wanted.get(record.id)
            if doc is None or record.metadata.get("content_sha256") != self._digest(doc):
                continue
            if await self._store.count({"source": doc.source}) == record.metadata.get("chunk_count"):
                same.add(doc.source)
        return same

    async def sources(self) -> list[MemorySource]:
        """Every source in the collection (up to 10,000, a store's largest query) with its number of chunks, by name.

        Read through the store's protocol alone: the first chunk of each source, found by a metadata filter
        (`chunk` 0) on a query whose vector does not matter, carries its source's chunk count."""
        await self._ensure()
        total = await self._store.count({"chunk": 0})
        if total == 0:
            return []
        probe = [1.0] + [0.0] * (self._store.vector_size - 1)
        firsts = await self._store.query(probe, top_k=min(total, 10_000), filter={"chunk": 0})
        listed: list[MemorySource] = []
        for match in firsts:
            source = str(match.metadata.get("source", ""))
            count = match.metadata.get("chunk_count")
            if not isinstance(count, int) or isinstance(count, bool):  # chunks written before counts were kept
                count = await self._store.count({"source": source})
            listed.append(MemorySource(source=source, chunks=count))
        return sorted(listed, key=lambda s: s.source)

    async def query(
        self,
        text: str,
        *,
        top_k: int = 5,
        filter: MetadataFilter | None = None,
        min_score: float | None = None,
        cancellation_token: CancellationToken | None = None,
        search: SearchMode | None = None,
    ) -> list[MemoryHit]:
        """The `top_k` chunks closest to `text` (best first), passing `filter`, searched the memory's way or as
        `search` says. `min_score` is a cosine-similarity floor: in hybrid search it applies to the embedding's
        ranking only (a chunk holding the words stays); keyword search refuses it."""
        if not isinstance(text, str) or not text.strip():
            raise ValueError("query text must be a non-empty string")
        mode = self._search if search is None else _check_search(self._store, search, "query: search")
        await self._ensure()
        if mode == "keyword":
            matches = await self._store.query(top_k=top_k, filter=filter, min_score=min_score, text=text, mode=mode)
        else:
            [vector] = await self._embed([text], cancellation_token)
            words = text if mode == "hybrid" else None
            matches = await self._store.query(
                vector, top_k=top_k, filter=filter, min_score=min_score, text=words, mode=mode
            )
        return [_hit(m.id, m.text, m.score, m.metadata) for m in matches]

    async def remove(self, source: str) -> int:
        """Forget every chunk of `source`; returns how many."""
        await self._ensure()
        return await self._store.delete_where({"source": source})

    async def clear(self) -> int:
        """Forget everything in the collection; returns how many chunks."""
        await self._ensure()
        return await self._store.delete_where({})

    def __repr__(self) -> str:
        return (
            f"VectorMemory(store={self._store!r}, chunk_size={self._chunk_size}, chunk_overlap={self._chunk_overlap}, "
            f"max_chunk_chars={self._max_chunk_chars}, search={self._search!r})"
        )


def _check_search(store: VectorStore, search: object, where: str) -> SearchMode:
    """`search`, or the store's best mode when None; a `ConfigurationError` for a mode the store cannot run."""
    modes = store.search_modes
    if search is None:
        return "hybrid" if "hybrid" in modes else "vector"
    if search not in ("vector", "keyword", "hybrid"):
        raise ConfigurationError(f"{where} must be 'hybrid', 'vector' or 'keyword', got {search!r}")
    if search not in modes:
        raise ConfigurationError(
            f"{where}={search!r}: {type(store).__name__} has no keyword search (its search_modes are "
            f"{sorted(modes)}); use search='vector'"
        )
    return search


def _hit(id: str, text: str, score: float, metadata: Mapping[str, Any]) -> MemoryHit:
    own = {k: v for k, v in metadata.items() if k not in RESERVED_KEYS}
    return MemoryHit(
        id=id,
        text=text,
        score=score,
        source=str(metadata.get("source", "")),
        chunk=int(metadata.get("chunk", 0)),
        start=int(metadata.get("start", 0)),
        end=int(metadata.get("end", 0)),
        metadata=own,
    )


__all__ = [
    "DEFAULT_CHUNK_OVERLAP",
    "DEFAULT_CHUNK_SIZE",
    "DEFAULT_MAX_CHUNK_CHARS",
    "MemoryDocument",
    "MemoryHit",
    "MemorySource",
    "DocumentFormat",
    "TextChunk",
    "VectorMemory",
    "split_text",
]
