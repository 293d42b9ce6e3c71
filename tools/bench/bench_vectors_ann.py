"""The embedded store beside chromadb's embedded client (HNSW; what autogen-ext's memory uses), in one run on the
same 128-d vectors: ingestion (until the first query is answered: building an index counts), query p50 / p99 and
recall@10 against exact search, with and without a metadata filter.

    python tools/bench/bench_vectors_ann.py --sizes 10000,100000

Needs numpy, ext-vectors-sqlite and chromadb (`hatch run bench-vectors:python tools/bench/bench_vectors_ann.py`).
Data as in bench_vectors.py: random unit vectors; queries are stored vectors plus noise. Each record carries
`{"i": i, "part": i % 10}`; the filtered queries ask for `part = 3` (a tenth of the collection). Queries run one at
a time, the two stores interleaved in blocks so a load change on a shared machine hits both.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from _harness import percentile

from ext.core import VectorRecord
from ext.vectors.sqlite import SqliteVectorStore

BATCH = 2000
PART = 3


def make_data(n: int, dim: int, queries: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    data = rng.standard_normal((n, dim)).astype(np.float32)
    data /= np.linalg.norm(data, axis=1, keepdims=True)
    picks = data[rng.choice(n, queries, replace=False)]
    q = picks + 0.5 * rng.standard_normal((queries, dim)).astype(np.float32) / np.sqrt(dim)
    q /= np.linalg.norm(q, axis=1, keepdims=True)
    return data, q


def exact_top10(data: np.ndarray, queries: np.ndarray, rows: np.ndarray | None = None) -> list[set[str]]:
    ids = np.arange(len(data)) if rows is None else rows
    scores = queries @ data[ids].T
    return [{str(ids[i]) for i in np.argsort(-row)[:10]} for row in scores]


class Ext:
    name = "ext-vectors-sqlite"

    def __init__(self, path: str, dim: int) -> None:
        self.store = SqliteVectorStore(path, collection_name="bench", vector_size=dim)

    async def ingest(self, data: np.ndarray) -> None:
        await self.store.create_collection()
        for first in range(0, len(data), BATCH):
            chunk = data[first : first + BATCH]
            await self.store.upsert(
                [
                    VectorRecord(
                        id=str(first + i), vector=v.tolist(), metadata={"i": first + i, "part": (first + i) % 10}
                    )
                    for i, v in enumerate(chunk)
                ]
            )
        await self.search(data[0].tolist(), None)  # the first query builds the index (counted in ingestion)

    async def search(self, vector: list[float], part: int | None) -> list[str]:
        where = None if part is None else {"part": part}
        return [m.id for m in await self.store.query(vector, top_k=10, filter=where)]

    async def close(self) -> None:
        await self.store.close()


class Chroma:
    name = "chromadb embedded"

    def __init__(self, path: str, dim: int) -> None:
        import chromadb

        self.client = chromadb.PersistentClient(path=path)
        self.collection = self.client.create_collection("bench", configuration={"hnsw": {"space": "cosine"}})

    async def ingest(self, data: np.ndarray) -> None:
        for first in range(0, len(data), BATCH):
            chunk = data[first : first + BATCH]
            self.collection.add(
                ids=[str(first + i) for i in range(len(chunk))],
                embeddings=chunk,
                metadatas=[{"i": first + i, "part": (first + i) % 10} for i in range(len(chunk))],
            )
        await self.search(data[0].tolist(), None)

    async def search(self, vector: list[float], part: int | None) -> list[str]:
        where: Any = None if part is None else {"part": part}
        query: Any = [vector]  # chromadb's stubs list nested Sequence[float] only through a union mypy rejects
        found = self.collection.query(query_embeddings=query, n_results=10, where=where)
        return list(found["ids"][0])

    async def close(self) -> None:
        pass


async def measure(
    sides: list[Any], queries: np.ndarray, part: int | None, blocks: int
) -> dict[str, tuple[list[float], list[list[str]]]]:
    out: dict[str, tuple[list[float], list[list[str]]]] = {s.name: ([], [[] for _ in queries]) for s in sides}
    order = list(range(len(queries)))
    size = max(1, len(order) // blocks)
    for start in range(0, len(order), size):
        for side in sides:
            times, found = out[side.name]
            for i in order[start : start + size]:
                began = time.perf_counter()
                found[i] = await side.search(queries[i].tolist(), part)
                times.append(time.perf_counter() - began)
    return out


def recall(found: list[list[str]], truth: list[set[str]]) -> float:
    return sum(len(set(f) & t) for f, t in zip(found, truth, strict=True)) / (10 * len(truth))


async def run(n: int, dim: int, args: argparse.Namespace, directory: Path) -> list[str]:
    data, queries = make_data(n, dim, args.queries)
    truth = exact_top10(data, queries)
    part_truth = exact_top10(data, queries, np.arange(PART, n, 10))
    makers: dict[str, Callable[[], Any]] = {
        "ext": lambda: Ext(str(directory / f"ext-{n}.db"), dim),
        "chroma": lambda: Chroma(str(directory / f"chroma-{n}"), dim),
    }
    sides = []
    ingest: dict[str, float] = {}
    for kind in args.store or list(makers):
        side = makers[kind]()
        began = time.perf_counter()
        await side.ingest(data)
        ingest[side.name] = time.perf_counter() - began
        sides.append(side)
    rows = []
    try:
        for label, part, expected in (("", None, truth), (" (filter 1/10)", PART, part_truth)):
            for _ in range(2):  # warm-up
                await measure(sides, queries[:5], part, 1)
            results = await measure(sides, queries, part, args.blocks)
            for side in sides:
                times, found = results[side.name]
                rows.append(
                    f"| {side.name}{label} | {n:,} | {ingest[side.name]:.1f} s | "
                    f"{percentile(times, 50) * 1000:.2f} ms | {percentile(times, 99) * 1000:.2f} ms | "
                    f"{recall(found, expected):.3f} |"
                )
    finally:
        for side in sides:
            await side.close()
    return rows


async def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="10000,100000")
    parser.add_argument("--dim", type=int, default=128)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--blocks", type=int, default=10)
    parser.add_argument("--store", action="append", choices=["ext", "chroma"], help="default: both")
    args = parser.parse_args(argv)
    rows = [
        "| store | vectors | ingestion (to first answer) | query p50 | query p99 | recall@10 |",
        "|---|---|---|---|---|---|",
    ]
    with tempfile.TemporaryDirectory(prefix="ext-bench-ann-") as tmp:
        for n in (int(s) for s in args.sizes.split(",")):
            rows += await run(n, args.dim, args, Path(tmp))
            print("\n".join(rows), flush=True)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1:]))
