"""Keyword and hybrid search over a vector store: the modes, the query a backend receives, how query text becomes
search terms, and how two rankings are fused. Shared by every backend, so each mode means the same everywhere.

- `vector` (the default): the records closest to the query vector; `score` is cosine similarity.
- `keyword`: the records whose text holds the query's words, ranked by the backend's full-text relevance (SQLite
  FTS5's BM25, PostgreSQL's `ts_rank_cd`); `score` is the rank score `(k + 1) / (k + rank)`: 1.0 for the first,
  then falling slowly (k = 60). A record holding none of the words is not a match.
- `hybrid`: both rankings fused by reciprocal rank fusion (Cormack, Clarke and Buettcher, SIGIR 2009): each record
  scores `1 / (k + rank)` in each ranking it appears in (k = 60), summed, and scaled by `(k + 1) / 2` so that 1.0
  means first in both. RRF needs no calibration between BM25 and cosine scales, which differ per backend and per
  embedder; a record that only one ranking finds (an exact identifier the embedder does not know, a paraphrase
  without the query's words) still places. Each ranking contributes its first `fusion_depth(top_k)` records.

Metadata filters apply inside each ranking, before it is cut (never after the fusion). `min_score` is a cosine
floor: in hybrid mode it cuts the vector ranking only (a keyword match is kept, whatever its similarity); keyword
mode refuses it.

Query text is user or model input. A backend never passes it to its query language as syntax: `keyword_terms`
splits it into words, and each backend quotes every word as a literal phrase (FTS5 string, `phraseto_tsquery`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Literal, TypeAlias

from pydantic import BaseModel, ConfigDict, Field

from ._vector_values import MetadataValue

SearchMode: TypeAlias = Literal["vector", "keyword", "hybrid"]
SEARCH_MODES: tuple[SearchMode, ...] = ("vector", "keyword", "hybrid")
VECTOR_ONLY: frozenset[SearchMode] = frozenset({"vector"})
ALL_SEARCH_MODES: frozenset[SearchMode] = frozenset(SEARCH_MODES)

RRF_K = 60
"""Reciprocal rank fusion's constant (the value its authors found robust; also Elasticsearch's and Azure's)."""
MAX_KEYWORD_TERMS = 64
"""Words of a query text searched at most (the first distinct ones): a pasted page stays one cheap query."""
MAX_TERM_CHARS = 256
"""A longer word is left out of a keyword query (PostgreSQL ignores words past 2047 bytes; none is a real word)."""


class KeywordQuery(BaseModel):
    """A validated keyword query: the words (`keyword_terms` of the text), `top_k`, the normalised filter."""

    model_config = ConfigDict(extra="forbid", defer_build=True)

    terms: list[str] = Field(description="Distinct words of the query text, in order, each a literal to match.")
    top_k: int = Field(gt=0, le=10_000)
    filter: dict[str, list[MetadataValue]] = Field(default_factory=dict)


def keyword_terms(text: str, limit: int = MAX_KEYWORD_TERMS) -> list[str]:
    """The words of `text` a keyword search looks for: whitespace-separated, each holding a letter or digit and
    at most `MAX_TERM_CHARS` characters, case-insensitively distinct, the first `limit`. Linear in the text's
    length. A word keeps its inner punctuation (`ERR_0x7f3a`, `user@example.com`): a backend's tokenizer splits it
    into a phrase."""
    terms: list[str] = []
    seen: set[str] = set()
    for word in text.split():
        if len(word) > MAX_TERM_CHARS or not any(c.isalnum() for c in word):
            continue
        folded = word.casefold()
        if folded in seen:
            continue
        seen.add(folded)
        terms.append(word)
        if len(terms) >= limit:
            break
    return terms


def fusion_depth(top_k: int) -> int:
    """How many records of each ranking take part in a hybrid fusion for `top_k` results."""
    return min(max(4 * top_k, 40), 10_000)


def rank_score(rank: int, k: int = RRF_K) -> float:
    """A keyword match's score for its 1-based `rank`: 1.0 for the first."""
    return (k + 1) / (k + rank)


def fuse_rankings(rankings: Sequence[Iterable[str]], k: int = RRF_K) -> list[tuple[str, float]]:
    """Reciprocal rank fusion of ranked id lists (best first): `(id, score)` best first, ties by id. The score is
    scaled so a record first in every ranking scores 1.0."""
    totals: dict[str, float] = {}
    for ranking in rankings:
        for rank, id_ in enumerate(ranking, 1):
            totals[id_] = totals.get(id_, 0.0) + 1.0 / (k + rank)
    scale = (k + 1) / max(len(rankings), 1)
    return sorted(((id_, total * scale) for id_, total in totals.items()), key=lambda item: (-item[1], item[0]))


__all__ = [
    "ALL_SEARCH_MODES",
    "MAX_KEYWORD_TERMS",
    "MAX_TERM_CHARS",
    "RRF_K",
    "SEARCH_MODES",
    "VECTOR_ONLY",
    "KeywordQuery",
    "SearchMode",
    "fuse_rankings",
    "fusion_depth",
    "keyword_terms",
    "rank_score",
]
