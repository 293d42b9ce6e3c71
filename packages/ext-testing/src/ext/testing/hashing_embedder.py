"""`HashingEmbedder`: a deterministic, offline `EmbeddingClient` for tests.

For tests only: it hashes each word of a text into one of `vector_size` buckets (with a sign), so texts that
share words get a higher cosine similarity than texts that do not. It knows nothing about meaning.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Sequence
from types import TracebackType

from ext.core import CancellationToken, ClientClosedError, EmbeddingResult, RequestUsage

__all__ = ["HashingEmbedder"]

_WORD = re.compile(r"\w+")


class HashingEmbedder:
    """A deterministic `EmbeddingClient` for tests (see the module docstring): words hashed into buckets, the
    vector normalised to length 1. A text without words gets a fixed unit vector (never all zeros). `calls`
    records each batch it was asked to embed."""

    def __init__(self, vector_size: int = 64) -> None:
        if isinstance(vector_size, bool) or not isinstance(vector_size, int) or vector_size <= 1:
            raise ValueError(f"vector_size must be an integer above 1, got {vector_size!r}")
        self._size = vector_size
        self._usage = RequestUsage(prompt_tokens=0, completion_tokens=0)
        self._closed = False
        self.calls: list[list[str]] = []

    @property
    def vector_size(self) -> int:
        return self._size

    def embed_one(self, text: str) -> list[float]:
        """The vector of one text (synchronously; `embed` is the protocol's call)."""
        vector = [0.0] * self._size
        for word in _WORD.findall(text.lower()):
            digest = hashlib.blake2b(word.encode(), digest_size=8).digest()
            bucket = int.from_bytes(digest[:4], "little") % self._size
            vector[bucket] += 1.0 if digest[4] & 1 else -1.0
        norm = math.sqrt(sum(x * x for x in vector))
        if norm == 0.0:
            vector[0] = 1.0
            return vector
        return [x / norm for x in vector]

    async def embed(self, texts: Sequence[str], cancellation_token: CancellationToken | None = None) -> EmbeddingResult:
        if self._closed:
            raise ClientClosedError("HashingEmbedder is closed")
        if isinstance(texts, str):
            raise TypeError("texts must be a list of strings, not one string")
        batch = list(texts)
        self.calls.append(batch)
        tokens = sum(len(_WORD.findall(t)) for t in batch)
        self._usage = RequestUsage(
            prompt_tokens=self._usage.prompt_tokens + tokens, completion_tokens=self._usage.completion_tokens
        )
        return EmbeddingResult(
            vectors=[self.embed_one(t) for t in batch],
            usage=RequestUsage(prompt_tokens=tokens, completion_tokens=0),
            model="hashing",
        )

    def total_usage(self) -> RequestUsage:
        return self._usage

    async def close(self) -> None:
        self._closed = True

    async def __aenter__(self) -> HashingEmbedder:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()
