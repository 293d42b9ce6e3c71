"""Retrieval quality of ext's memory: questions with known answers over a fixed corpus, recall@5 and MRR@10 for each
way of searching.

    hatch run bench-ingest:python tools/bench/bench_retrieval.py [--method NAME ...] [--smollm2-questions 20]

The data is in `tools/bench/retrieval/`: `pydoc_topics.json`, the Python reference documentation that CPython ships
in `pydoc_data.topics` (75 topics, 358 KB; four topics that only repeat others are left out), and
`questions.json`, 68 questions written for this benchmark, each with the topic(s) that answer it. Every topic is
added to a `VectorMemory` (one source per topic, the default chunking) over an in-memory `SqliteVectorStore`; a
question's hits are chunks, and a hit is relevant when its source is one of the question's topics.

- recall@5: the share of questions with a relevant chunk among the first 5 hits.
- MRR@10: the mean of 1 / (rank of the first relevant hit), 0 when none is in the first 10.

Methods:

- ``hashing``: ext-testing's `HashingEmbedder` (words hashed into 256 buckets): shared words, no meaning.
- ``wordllama``: `WordLlamaEmbeddingClient()`, the offline default.
- ``smollm2``: `LlamaCppEmbeddingClient()` on SmolLM2-135M (mean-pooled states). About 2 s of CPU a chunk: it
  embeds a corpus cut to the topics of its first `--smollm2-questions` questions plus as many other topics (the
  first ones by name) and is scored on those questions only; the other methods are also run on that same cut
  (the ``@cut`` rows) so that its row has like-for-like neighbours.
- ``keyword``: BM25 (k1 1.2, b 0.75) over the same chunks, written here; or the store's own keyword search
  (SQLite FTS5) when the installed ext-vectors-sqlite has one (``store-keyword``).
- ``hybrid``: reciprocal rank fusion (k 60) of the wordllama and BM25 rankings (top 100 each), written here; and
  the store's own hybrid mode when it has one (``store-hybrid``).

Printed: one row per method with the corpus, the number of questions, recall@5, MRR@10, indexing seconds and
the median query milliseconds. ``--quick`` runs hashing and keyword on 6 topics: a check that it runs.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import re
import statistics
import sys
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

DATA = Path(__file__).resolve().parent / "retrieval"
METHODS = ("hashing", "wordllama", "keyword", "hybrid", "smollm2")
HEADER = ("method", "corpus", "questions", "recall@5", "MRR@10", "index s", "query ms")
RRF_K = 60
FUSED_DEPTH = 100
_TERM = re.compile(r"\w+")


@dataclass(frozen=True)
class Question:
    id: str
    text: str
    passages: tuple[str, ...]


@dataclass
class Scored:
    method: str
    corpus: str
    questions: int
    recall_at_5: float
    mrr_at_10: float
    index_s: float
    query_ms: float


def load_data() -> tuple[dict[str, str], list[Question]]:
    """The corpus (topic -> text) and the questions, checked: every question names passages the corpus has."""
    corpus: dict[str, str] = json.loads((DATA / "pydoc_topics.json").read_text(encoding="utf-8"))["passages"]
    raw = json.loads((DATA / "questions.json").read_text(encoding="utf-8"))["questions"]
    questions = [Question(q["id"], q["question"], tuple(q["passages"])) for q in raw]
    for q in questions:
        missing = [p for p in q.passages if p not in corpus]
        if missing:
            raise ValueError(f"{q.id}: passages {missing} are not in the corpus")
    return corpus, questions


def score(ranked: Sequence[Sequence[str]], questions: Sequence[Question]) -> tuple[float, float]:
    """recall@5 and MRR@10 of `ranked` (for each question, the sources of its hits, best first)."""
    recall = mrr = 0.0
    for sources, question in zip(ranked, questions, strict=True):
        ranks = [i for i, source in enumerate(sources[:10], start=1) if source in question.passages]
        recall += 1.0 if ranks and ranks[0] <= 5 else 0.0
        mrr += 1.0 / ranks[0] if ranks else 0.0
    return recall / len(questions), mrr / len(questions)


def terms(text: str) -> list[str]:
    return _TERM.findall(text.lower())


class BM25:
    """Okapi BM25 over chunks (id, text): the keyword baseline, in the benchmark so that it runs on any store."""

    def __init__(self, chunks: Sequence[tuple[str, str]], k1: float = 1.2, b: float = 0.75) -> None:
        self.ids = [cid for cid, _ in chunks]
        self.freqs = [Counter(terms(text)) for _, text in chunks]
        self.lengths = [sum(f.values()) for f in self.freqs]
        self.average = sum(self.lengths) / max(1, len(self.lengths))
        documents: Counter[str] = Counter()
        for f in self.freqs:
            documents.update(f.keys())
        n = len(chunks)
        self.idf = {t: math.log(1 + (n - d + 0.5) / (d + 0.5)) for t, d in documents.items()}
        self.k1, self.b = k1, b

    def search(self, query: str, top_k: int) -> list[str]:
        wanted = set(terms(query)) & self.idf.keys()
        scores: list[tuple[float, int]] = []
        for i, f in enumerate(self.freqs):
            s = 0.0
            norm = self.k1 * (1 - self.b + self.b * self.lengths[i] / self.average)
            for t in wanted:
                tf = f.get(t, 0)
                if tf:
                    s += self.idf[t] * tf * (self.k1 + 1) / (tf + norm)
            if s > 0:
                scores.append((s, i))
        scores.sort(key=lambda x: (-x[0], x[1]))
        return [self.ids[i] for _, i in scores[:top_k]]


def fuse(rankings: Sequence[Sequence[str]], top_k: int) -> list[str]:
    """Reciprocal rank fusion: each id scores the sum of 1 / (RRF_K + rank) over the rankings holding it."""
    scores: dict[str, float] = {}
    for ranking in rankings:
        for rank, cid in enumerate(ranking, start=1):
            scores[cid] = scores.get(cid, 0.0) + 1.0 / (RRF_K + rank)
    return sorted(scores, key=lambda cid: (-scores[cid], cid))[:top_k]


def source_of(chunk_id: str) -> str:
    return chunk_id.rsplit("#", 1)[0]


def make_embedder(name: str) -> Any:
    if name == "hashing":
        from ext.testing.hashing_embedder import HashingEmbedder

        return HashingEmbedder(256)
    if name == "wordllama":
        from ext.models.wordllama import WordLlamaEmbeddingClient

        return WordLlamaEmbeddingClient()
    from ext.models.llama_cpp import LlamaCppEmbeddingClient

    return LlamaCppEmbeddingClient()


async def _timed_queries(
    questions: Sequence[Question], search: Callable[[str], Awaitable[list[str]]]
) -> tuple[list[list[str]], float]:
    ranked: list[list[str]] = []
    times: list[float] = []
    for q in questions:
        started = time.perf_counter()
        ids = await search(q.text)
        times.append(time.perf_counter() - started)
        ranked.append([source_of(cid) for cid in ids])
    return ranked, statistics.median(times) * 1000


async def run_methods(
    methods: Sequence[str], corpus: dict[str, str], questions: Sequence[Question], label: str
) -> list[Scored]:
    """Every method of `methods` on `corpus` and `questions` (`label` names the corpus in the rows)."""
    from ext.memory import MemoryDocument, VectorMemory
    from ext.vectors.sqlite import SqliteVectorStore

    documents = [MemoryDocument(text=text, source=topic) for topic, text in corpus.items()]
    rows: list[Scored] = []
    keyword: BM25 | None = None
    wordllama_rankings: list[list[str]] | None = None

    def bm25() -> BM25:
        nonlocal keyword
        if keyword is None:
            # The same chunks as the memories: VectorMemory's own split of each document.
            memory = VectorMemory(make_embedder("hashing"), SqliteVectorStore(collection_name="x", vector_size=256))
            keyword = BM25([(f"{d.source}#{c.index}", c.text) for d in documents for c in memory.chunks(d)])
        return keyword

    for method in methods:
        if method in ("keyword", "hybrid"):
            continue
        embedder = make_embedder(method)
        async with SqliteVectorStore(collection_name="bench", vector_size=embedder.vector_size or 256) as store:
            # Vector search alone: the embedder's own ranking (VectorMemory's default is hybrid where the store
            # has keyword search; the store's rows below measure that).
            memory = VectorMemory(embedder, store, search="vector")
            started = time.perf_counter()
            await memory.add(documents)
            index_s = time.perf_counter() - started

            async def vector_search(text: str, memory: Any = memory) -> list[str]:
                return [hit.id for hit in await memory.query(text, top_k=FUSED_DEPTH)]

            ranked, query_ms = await _timed_queries(questions, vector_search)
            rows.append(Scored(method, label, len(questions), *score(ranked, questions), index_s, query_ms))
            if method == "wordllama":
                wordllama_rankings = [await vector_search(q.text) for q in questions]
                rows += await _store_modes(store, embedder, questions, label)
        await embedder.close()

    if "keyword" in methods or "hybrid" in methods:
        started = time.perf_counter()
        index = bm25()
        index_s = time.perf_counter() - started

        async def keyword_search(text: str) -> list[str]:
            return index.search(text, FUSED_DEPTH)

        if "keyword" in methods:
            ranked, query_ms = await _timed_queries(questions, keyword_search)
            rows.append(Scored("keyword (BM25)", label, len(questions), *score(ranked, questions), index_s, query_ms))
        if "hybrid" in methods:
            if wordllama_rankings is None:
                raise SystemExit("hybrid fuses wordllama's ranking with BM25's: run it with --method wordllama")
            vector_of = {q.text: r for q, r in zip(questions, wordllama_rankings, strict=True)}

            async def hybrid_search(text: str) -> list[str]:
                return fuse([vector_of[text], index.search(text, FUSED_DEPTH)], FUSED_DEPTH)

            ranked, query_ms = await _timed_queries(questions, hybrid_search)
            rows.append(
                Scored("hybrid (wordllama+BM25, RRF)", label, len(questions), *score(ranked, questions), 0.0, query_ms)
            )
    return rows


async def _store_modes(store: Any, embedder: Any, questions: Sequence[Question], label: str) -> list[Scored]:
    """THE STORE'S OWN KEYWORD AND HYBRID SEARCH (ext-vectors-sqlite's FTS5, issue 40's other half), on the wordllama
    memory, when the installed store declares them in `search_modes`; nothing before that lands."""
    modes = getattr(store, "search_modes", frozenset({"vector"}))
    rows: list[Scored] = []
    for mode in ("keyword", "hybrid"):
        if mode not in modes:
            continue

        async def search(text: str, mode: str = mode) -> list[str]:
            vector = None if mode == "keyword" else (await embedder.embed([text])).vectors[0]
            matches = await store.query(vector, top_k=FUSED_DEPTH, text=text, mode=mode)
            return [m.id for m in matches]

        ranked, query_ms = await _timed_queries(questions, search)
        rows.append(Scored(f"store-{mode}", label, len(questions), *score(ranked, questions), 0.0, query_ms))
    return rows


def cut_corpus(
    corpus: dict[str, str], questions: Sequence[Question], count: int
) -> tuple[dict[str, str], list[Question]]:
    """The first `count` questions, and a corpus of their topics plus as many others (the first by name)."""
    chosen = list(questions[:count])
    needed = {p for q in chosen for p in q.passages}
    others = [t for t in corpus if t not in needed][: len(needed)]
    return {t: corpus[t] for t in corpus if t in needed or t in others}, chosen


def table(rows: Sequence[Scored]) -> list[str]:
    cells = [HEADER] + [
        (r.method, r.corpus, str(r.questions), f"{r.recall_at_5:.3f}", f"{r.mrr_at_10:.3f}", f"{r.index_s:.1f}",
         f"{r.query_ms:.1f}")
        for r in rows
    ]  # fmt: skip
    widths = [max(len(row[i]) for row in cells) for i in range(len(HEADER))]
    lines = [
        "  ".join(c.rjust(w) if i > 1 else c.ljust(w) for i, (c, w) in enumerate(zip(row, widths, strict=True)))
        for row in cells
    ]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return lines


async def run(args: argparse.Namespace) -> list[Scored]:
    corpus, questions = load_data()
    methods = args.method or list(METHODS)
    if args.quick:
        small, chosen = cut_corpus(corpus, questions, 3)
        return await run_methods([m for m in methods if m in ("hashing", "keyword")], small, chosen, "quick")
    rows = await run_methods([m for m in methods if m != "smollm2"], corpus, questions, "full")
    if "smollm2" in methods:
        small, chosen = cut_corpus(corpus, questions, args.smollm2_questions)
        label = f"cut ({len(small)} topics)"
        others = [m for m in methods if m != "smollm2"]
        rows += await run_methods(["smollm2", *others], small, chosen, label)
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--method", action="append", choices=METHODS, help="only these (repeatable)")
    parser.add_argument("--smollm2-questions", type=int, default=20, help="questions smollm2 is scored on")
    parser.add_argument("--quick", action="store_true", help="hashing and keyword on 6 topics: checks that it runs")
    args = parser.parse_args(argv)
    rows = asyncio.run(run(args))
    print("\n".join(table(rows)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
