"""`VectorMemory`: texts and documents split into overlapping chunks, embedded by any `EmbeddingClient`, kept in
any `VectorStore`, and found again by text. Each chunk keeps its source and position."""

from __future__ import annotations

import hashlib
import re
import unicodedata
from collections.abc import Callable, Mapping, Sequence
from typing import Any

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

_WORD = re.compile(r"\S+")
# Metadata keys VectorMemory writes on every chunk; a document's own metadata cannot use them.
RESERVED_KEYS = frozenset({"source", "chunk", "start", "end"})

DEFAULT_CHUNK_SIZE = 100
"""Words per chunk: about 130 tokens of English prose (about 600 characters), a common retrieval size."""
DEFAULT_CHUNK_OVERLAP = 20
"""Words a chunk shares with the one before (a fifth of it)."""
DEFAULT_MAX_CHUNK_CHARS = 1000
"""Characters per chunk at most, whatever the words. Text of about one token a character (CJK, base64, minified
code) then stays near 1,000 tokens: within every hosted embedder's input (OpenAI's 8,191 tokens) and twice the
512 tokens the smallest embedding models read (they cut the rest); five such chunks fit `MemoryMiddleware`'s
default budget."""

# Characters that continue the one before them: a cut before one would split a letter from its accent or an emoji
# from its modifier. (A cut right after a zero-width joiner would split a joined emoji.)
_JOINERS = frozenset("\u200c\u200d\u034f") | frozenset(map(chr, range(0xFE00, 0xFE10)))
_CUT_BACKTRACK = 8


class TextChunk(BaseModel):
    """One piece of a text: its words, its position among the chunks (`index`) and its character span."""

    model_config = ConfigDict(frozen=True, defer_build=True)

    text: str
    index: int = Field(ge=0)
    start: int = Field(ge=0, description="Offset of the first character in the whole text.")
    end: int = Field(ge=0, description="Offset just past the last character.")


def _check_int(name: str, value: object, low: int, what: str) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise ValueError(f"{name} must be {what}, got {value!r}")


def _joined(text: str, at: int) -> bool:
    """True when a cut at `at` would separate two code points that make one visible character."""
    here = text[at]
    return (
        here in _JOINERS
        or text[at - 1] == "\u200d"
        or unicodedata.category(here) in ("Mn", "Mc", "Me")  # combining marks
        or "\U0001f3fb" <= here <= "\U0001f3ff"  # emoji skin-tone modifiers
    )


def _words(text: str, piece: int) -> list[tuple[int, int]]:
    """The spans of the words of `text`, a run of more than `piece` characters without whitespace counted as one
    word per `piece` characters (cut at most `_CUT_BACKTRACK` characters early to keep a character whole)."""
    spans: list[tuple[int, int]] = []
    for match in _WORD.finditer(text):
        start, end = match.span()
        while end - start > piece:
            cut = start + piece
            floor = max(start + 1, cut - _CUT_BACKTRACK)
            while cut > floor and _joined(text, cut):
                cut -= 1
            if _joined(text, cut):  # a sequence longer than the backtrack: cut at the bound after all
                cut = start + piece
            spans.append((start, cut))
            start = cut
        spans.append((start, end))
    return spans


def split_text(
    text: str,
    *,
    chunk_size: int = DEFAULT_CHUNK_SIZE,
    chunk_overlap: int = DEFAULT_CHUNK_OVERLAP,
    max_chunk_chars: int = DEFAULT_MAX_CHUNK_CHARS,
) -> list[TextChunk]:
    """`text` in chunks of at most `chunk_size` words and at most `max_chunk_chars` characters; neighbours share
    `chunk_overlap` words. A chunk's text is the original span (`text[chunk.start:chunk.end]`), whitespace kept.

    - A word is a run of non-whitespace. A run longer than `max_chunk_chars // chunk_size` characters (a URL,
      base64, minified code, CJK text without spaces) counts as one word per that many characters, cut between
      code points that do not join (never between a letter and its combining accent, nor inside an emoji
      sequence): so a 3 MB line is chunked like 3 MB of prose.
    - A chunk ends before the word that would make it longer than `max_chunk_chars`. The next chunk starts
      `chunk_overlap` words before the end of this one; after a chunk cut short by characters, the same share of
      its words (`words * chunk_overlap // chunk_size`). It always starts at least one word later, so the work and
      the chunks' total size are linear in the text's length.
    """
    _check_int("chunk_size", chunk_size, 1, "a positive number of words")
    _check_int("chunk_overlap", chunk_overlap, 0, "a number of words from 0 to chunk_size - 1")
    if chunk_overlap >= chunk_size:
        raise ValueError(f"chunk_overlap must be a number of words from 0 to chunk_size - 1, got {chunk_overlap!r}")
    _check_int("max_chunk_chars", max_chunk_chars, 1, "a positive number of characters")
    words = _words(text, max(1, max_chunk_chars // chunk_size))
    chunks: list[TextChunk] = []
    first = 0
    while first < len(words):
        start = words[first][0]
        last = first  # one word always fits: none is longer than max_chunk_chars
        limit = min(len(words), first + chunk_size)
        while last + 1 < limit and words[last + 1][1] - start <= max_chunk_chars:
            last += 1
        end = words[last][1]
        chunks.append(TextChunk(text=text[start:end], index=len(chunks), start=start, end=end))
        if last + 1 == len(words):
            break
        taken = last + 1 - first
        shared = chunk_overlap if taken == chunk_size else taken * chunk_overlap // chunk_size
        first = max(first + 1, last + 1 - shared)
    return chunks


class MemoryDocument(BaseModel):
    """A text to remember with where it came from (`source`, e.g. a path or URL) and metadata for filters."""

    model_config = ConfigDict(extra="forbid", defer_build=True)

    text: str
    source: str = Field(min_length=1, description="Where the text came from; adding a source again replaces it.")
    metadata: dict[str, MetadataValue] = Field(default_factory=dict)


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
        _check_int("batch_size", batch_size, 1, "a positive number of chunks per embed call")
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

        `progress(done, total)` is called with the number of chunks embedded so far and the number in all: once
        before the first `embed` call (`done` 0) and after each. Every chunk is embedded before any is written, so
        a failure part-way leaves the memory as it was.
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
        planned: list[tuple[MemoryDocument, TextChunk]] = [
            (doc, chunk)
            for doc in documents
            for chunk in split_text(
                doc.text,
                chunk_size=self._chunk_size,
                chunk_overlap=self._chunk_overlap,
                max_chunk_chars=self._max_chunk_chars,
            )
        ]
        await self._ensure()
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
    "TextChunk",
    "VectorMemory",
    "split_text",
]
