"""`VectorMemory`: texts and documents split into overlapping chunks, embedded by any `EmbeddingClient`, kept in
any `VectorStore`, and found again by text. Each chunk keeps its source and position."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from ext.core import (
    CancellationToken,
    ConfigurationError,
    EmbeddingClient,
    MetadataFilter,
    MetadataValue,
    VectorRecord,
    VectorSizeError,
    VectorStore,
)

_WORD = re.compile(r"\S+")
# Metadata keys VectorMemory writes on every chunk; a document's own metadata cannot use them.
RESERVED_KEYS = frozenset({"source", "chunk", "start", "end"})


class TextChunk(BaseModel):
    """One piece of a text: its words, its position among the chunks (`index`) and its character span."""

    model_config = ConfigDict(frozen=True, defer_build=True)

    text: str
    index: int = Field(ge=0)
    start: int = Field(ge=0, description="Offset of the first character in the whole text.")
    end: int = Field(ge=0, description="Offset just past the last character.")


def split_text(text: str, *, chunk_size: int = 200, chunk_overlap: int = 40) -> list[TextChunk]:
    """`text` in chunks of `chunk_size` words, each starting `chunk_size - chunk_overlap` words after the last
    (so neighbours share `chunk_overlap` words). A chunk's text is the original span, whitespace kept inside."""
    if isinstance(chunk_size, bool) or not isinstance(chunk_size, int) or chunk_size <= 0:
        raise ValueError(f"chunk_size must be a positive number of words, got {chunk_size!r}")
    if isinstance(chunk_overlap, bool) or not isinstance(chunk_overlap, int) or not 0 <= chunk_overlap < chunk_size:
        raise ValueError(f"chunk_overlap must be a number of words from 0 to chunk_size - 1, got {chunk_overlap!r}")
    words = [m.span() for m in _WORD.finditer(text)]
    chunks: list[TextChunk] = []
    step = chunk_size - chunk_overlap
    for index, first in enumerate(range(0, len(words), step)):
        span = words[first : first + chunk_size]
        start, end = span[0][0], span[-1][1]
        chunks.append(TextChunk(text=text[start:end], index=index, start=start, end=end))
        if first + chunk_size >= len(words):
            break
    return chunks


class MemoryDocument(BaseModel):
    """A text to remember with where it came from (`source`, e.g. a path or URL) and metadata for filters."""

    model_config = ConfigDict(extra="forbid", defer_build=True)

    text: str
    source: str = Field(min_length=1, description="Where the text came from; adding a source again replaces it.")
    metadata: dict[str, MetadataValue] = Field(default_factory=dict)


class MemoryHit(BaseModel):
    """One remembered chunk found by a query, with its score (cosine similarity, higher is closer)."""

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

    `add` splits each text or `MemoryDocument` into chunks (`chunk_size` words, `chunk_overlap` words shared
    with the previous chunk), embeds them and upserts them with their source and position; adding a source again
    replaces its chunks. `query` embeds a text and returns the closest chunks. The collection is created on
    first use. The memory owns neither the embedder nor the store: close them yourself.
    """

    def __init__(
        self, embedder: EmbeddingClient, store: VectorStore, *, chunk_size: int = 200, chunk_overlap: int = 40
    ) -> None:
        if not isinstance(embedder, EmbeddingClient):
            raise ConfigurationError(
                f"VectorMemory: embedder must be an EmbeddingClient, got {type(embedder).__name__}"
            )
        if not isinstance(store, VectorStore):
            raise ConfigurationError(f"VectorMemory: store must be a VectorStore, got {type(store).__name__}")
        split_text("", chunk_size=chunk_size, chunk_overlap=chunk_overlap)  # validates both numbers
        size = embedder.vector_size
        if size is not None and size != store.vector_size:
            raise VectorSizeError(
                f"VectorMemory: the embedder makes vectors of size {size}, the store's collection "
                f"{store.collection_name!r} holds size {store.vector_size}"
            )
        self._embedder = embedder
        self._store = store
        self._chunk_size = chunk_size
        self._chunk_overlap = chunk_overlap
        self._ready = False

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
        self, items: Sequence[str | MemoryDocument], cancellation_token: CancellationToken | None = None
    ) -> list[str]:
        """Remember `items` (plain texts get a source made from their content); returns the chunk ids written."""
        if isinstance(items, (str, MemoryDocument)):
            items = [items]
        documents: list[MemoryDocument] = []
        for index, item in enumerate(items):
            if isinstance(item, str):
                item = MemoryDocument(text=item, source="text:" + hashlib.sha256(item.encode()).hexdigest()[:16])
            elif not isinstance(item, MemoryDocument):
                raise ValueError(f"items[{index}] must be a str or a MemoryDocument, got {type(item).__name__}")
            clash = RESERVED_KEYS & item.metadata.keys()
            if clash:
                raise ValueError(f"items[{index}].metadata uses keys VectorMemory sets itself: {sorted(clash)}")
            documents.append(item)
        planned: list[tuple[MemoryDocument, TextChunk]] = [
            (doc, chunk)
            for doc in documents
            for chunk in split_text(doc.text, chunk_size=self._chunk_size, chunk_overlap=self._chunk_overlap)
        ]
        await self._ensure()
        old_counts = {doc.source: await self._store.count({"source": doc.source}) for doc in documents}
        vectors = await self._embed([chunk.text for _, chunk in planned], cancellation_token) if planned else []
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

    async def query(
        self,
        text: str,
        *,
        top_k: int = 5,
        filter: MetadataFilter | None = None,
        min_score: float | None = None,
        cancellation_token: CancellationToken | None = None,
    ) -> list[MemoryHit]:
        """The `top_k` chunks closest to `text` (best first), passing `filter` and scoring at least `min_score`."""
        if not isinstance(text, str) or not text.strip():
            raise ValueError("query text must be a non-empty string")
        await self._ensure()
        [vector] = await self._embed([text], cancellation_token)
        matches = await self._store.query(vector, top_k=top_k, filter=filter, min_score=min_score)
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
            f"VectorMemory(store={self._store!r}, chunk_size={self._chunk_size}, chunk_overlap={self._chunk_overlap})"
        )


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


__all__ = ["MemoryDocument", "MemoryHit", "TextChunk", "VectorMemory", "split_text"]
