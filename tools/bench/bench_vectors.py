"""Vector stores: query p50/p99 and recall@10 (against exact search) for ext's stores and the raw driver running
the same SQL, in one run, with an A/A control (the ext side measured twice, interleaved with the others).

    python tools/bench/bench_vectors.py --sizes 10000,100000 --dim 128 --store sqlite --store pgvector --store chroma

Needs numpy (the exact search and the data), ext-vectors-sqlite (apsw, sqlite-vec), for `pgvector`
ext-vectors-pgvector plus the `pgserver` wheel (a PostgreSQL with pgvector started on 127.0.0.1 by
ext.testing.postgres), and for `chroma` ext-vectors-chroma plus the `chromadb` package (a Chroma server started
on 127.0.0.1 by ext.testing.chroma; the raw side is httpx posting the same query body to the same endpoint).
The data are random unit vectors; queries are stored vectors plus noise, so each has clear near neighbours.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import numpy as np
from _harness import Row, measure_interleaved, print_table

from ext.core import BaseVectorStore, VectorRecord

Side = tuple[str, Callable[[], Awaitable[Any]]]


def make_data(n: int, dim: int, queries: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    data = rng.standard_normal((n, dim)).astype(np.float32)
    data /= np.linalg.norm(data, axis=1, keepdims=True)
    picks = data[rng.choice(n, queries, replace=False)]
    q = picks + 0.5 * rng.standard_normal((queries, dim)).astype(np.float32) / np.sqrt(dim)
    q /= np.linalg.norm(q, axis=1, keepdims=True)
    return data, q


def exact_top10(data: np.ndarray, queries: np.ndarray) -> list[set[str]]:
    scores = queries @ data.T
    return [{str(i) for i in np.argsort(-row)[:10]} for row in scores]


async def fill(store: BaseVectorStore[Any], data: np.ndarray, batch: int = 2000) -> float:
    await store.create_collection()
    started = time.perf_counter()
    for first in range(0, len(data), batch):
        chunk = data[first : first + batch]
        await store.upsert(
            [VectorRecord(id=str(first + i), vector=v.tolist(), metadata={"i": first + i}) for i, v in enumerate(chunk)]
        )
    return time.perf_counter() - started


async def recall(
    search: Callable[[list[float]], Awaitable[list[str]]], queries: np.ndarray, truth: list[set[str]]
) -> float:
    found = 0
    for q, expected in zip(queries, truth, strict=True):
        found += len(set(await search(q.tolist())) & expected)
    return found / (10 * len(truth))


def sqlite_sides(path: str, store: BaseVectorStore[Any], queries: np.ndarray) -> tuple[list[Side], Callable[..., Any]]:
    import apsw
    import sqlite_vec

    conn = apsw.Connection(path)
    conn.enable_load_extension(True)
    conn.load_extension(sqlite_vec.loadable_path())
    # The statement SqliteVectorStore runs for a query without filter or min_score.
    statement = (
        "SELECT id, score, text, metadata FROM (SELECT id, 1.0 - vec_distance_cosine(embedding, ?) AS score, text, "
        "metadata FROM ext_records WHERE collection = ?) ORDER BY score DESC, id LIMIT ?"
    )
    blobs = itertools.cycle([q.astype(np.float32).tobytes() for q in queries])
    lists = itertools.cycle([q.tolist() for q in queries])

    async def raw() -> list[str]:
        return [row[0] for row in conn.execute(statement, (next(blobs), store.collection_name, 10))]

    async def ours() -> list[str]:
        return [m.id for m in await store.query(next(lists), top_k=10)]

    async def raw_search(vector: list[float]) -> list[str]:
        blob = np.asarray(vector, dtype=np.float32).tobytes()
        return [row[0] for row in conn.execute(statement, (blob, store.collection_name, 10))]

    return [("raw apsw", raw), ("ext", ours), ("ext (A/A)", ours)], raw_search


async def pg_sides(url: str, store: Any, queries: np.ndarray) -> tuple[list[Side], Callable[..., Any], Any]:
    import psycopg

    conn = await psycopg.AsyncConnection.connect(url, autocommit=True)
    # The collection's table, as the store's catalog records it.
    cur = await conn.execute("SELECT table_name FROM ext_vector_collections WHERE name = %s", (store.collection_name,))
    row = await cur.fetchone()
    assert row is not None
    table = row[0]
    # What the store sets per query (its default hnsw_ef_search), so both sides search the index alike.
    await conn.execute("SET hnsw.ef_search = 100")
    statement = (
        f"SELECT id, 1 - (embedding <=> %s::vector) AS score, text, metadata FROM {table} "
        "ORDER BY embedding <=> %s::vector LIMIT %s"
    )
    literals = itertools.cycle(["[" + ",".join(repr(float(x)) for x in q) + "]" for q in queries])
    lists = itertools.cycle([q.tolist() for q in queries])

    async def raw() -> list[str]:
        literal = next(literals)
        cur = await conn.execute(statement, (literal, literal, 10))
        return [row[0] for row in await cur.fetchall()]

    async def ours() -> list[str]:
        return [m.id for m in await store.query(next(lists), top_k=10)]

    async def raw_search(vector: list[float]) -> list[str]:
        literal = "[" + ",".join(repr(float(x)) for x in vector) + "]"
        cur = await conn.execute(statement, (literal, literal, 10))
        return [row[0] for row in await cur.fetchall()]

    return [("raw psycopg", raw), ("ext", ours), ("ext (A/A)", ours)], raw_search, conn


async def chroma_sides(url: str, store: Any, queries: np.ndarray) -> tuple[list[Side], Callable[..., Any], Any]:
    import httpx

    raw_client = httpx.AsyncClient(base_url=url, timeout=30)
    # The collection's Chroma id, as the store looks it up; the query body the store sends without filter.
    collections = "/api/v2/tenants/default_tenant/databases/default_database/collections"
    response = await raw_client.get(f"{collections}/{store.collection_name}")
    path = f"{collections}/{response.json()['id']}/query"
    lists = itertools.cycle([q.tolist() for q in queries])

    async def raw_search(vector: list[float]) -> list[str]:
        body = {"query_embeddings": [vector], "n_results": 10, "include": ["documents", "metadatas", "distances"]}
        response = await raw_client.post(path, json=body)
        response.raise_for_status()
        return list(response.json()["ids"][0])

    async def raw() -> list[str]:
        return await raw_search(next(lists))

    async def ours() -> list[str]:
        return [m.id for m in await store.query(next(lists), top_k=10)]

    return [("raw httpx", raw), ("ext", ours), ("ext (A/A)", ours)], raw_search, raw_client.aclose


async def run_store(kind: str, n: int, dim: int, args: argparse.Namespace, directory: Path) -> None:
    data, queries = make_data(n, dim, args.queries)
    truth = exact_top10(data, queries)
    name = f"{kind} n={n}"
    closer: Callable[[], Awaitable[Any]] | None = None
    stop_server: Callable[[], None] | None = None
    if kind == "sqlite":
        from ext.vectors.sqlite import SqliteVectorStore

        path = str(directory / f"bench-{n}.db")
        # The exact scan, the SQL the raw side runs (bench_vectors_ann.py measures the in-memory index).
        store: BaseVectorStore[Any] = SqliteVectorStore(
            path, collection_name="bench", vector_size=dim, index_threshold=None
        )
        load_s = await fill(store, data)
        sides, raw_search = sqlite_sides(path, store, queries)
    elif kind == "chroma":
        from ext.testing.chroma import start_chroma_server
        from ext.vectors.chroma import ChromaVectorStore

        chroma = start_chroma_server()
        stop_server = chroma.stop
        store = ChromaVectorStore(chroma.url, collection_name="bench", vector_size=dim, timeout=300)
        load_s = await fill(store, data)
        sides, raw_search, closer = await chroma_sides(chroma.url, store, queries)
    else:
        from ext.testing.postgres import start_postgres_server
        from ext.vectors.pgvector import PgVectorStore

        server = start_postgres_server()
        stop_server = server.stop
        pg = PgVectorStore(server.url, collection_name="bench", vector_size=dim)
        store = pg
        load_s = await fill(store, data)
        sides, raw_search, conn = await pg_sides(server.url, pg, queries)
        closer = conn.close
    try:
        ext_recall = await recall(lambda v: _ids(store, v), queries, truth)
        raw_recall = await recall(raw_search, queries, truth)
        results, _ = await measure_interleaved(sides, blocks=args.blocks, block=args.block, warmup=5)
        print(f"\n{name}, dim {dim}: loaded in {load_s:.1f} s; recall@10 ext {ext_recall:.3f}, raw {raw_recall:.3f}")
        print_table(
            [
                Row(name, results[0]),
                Row(name, results[1], baseline=results[0]),
                Row(name, results[2], baseline=results[0]),
            ]
        )
    finally:
        await store.delete_collection()
        await store.close()
        if closer is not None:
            await closer()
        if stop_server is not None:
            stop_server()


async def _ids(store: BaseVectorStore[Any], vector: list[float]) -> list[str]:
    return [m.id for m in await store.query(vector, top_k=10)]


async def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="10000,100000")
    parser.add_argument("--dim", type=int, default=128)
    parser.add_argument("--store", action="append", choices=["sqlite", "pgvector", "chroma"])
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--blocks", type=int, default=10)
    parser.add_argument("--block", type=int, default=10)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="ext-bench-vectors-") as tmp:
        for n in (int(s) for s in args.sizes.split(",")):
            for kind in args.store or ["sqlite", "pgvector"]:
                await run_store(kind, n, args.dim, args, Path(tmp))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1:]))
