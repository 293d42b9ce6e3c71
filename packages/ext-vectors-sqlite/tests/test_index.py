"""The in-memory index of large collections: its recall against the exact scan (HNSW and the exact SIMD scan),
filters that stay correct (never applied after a cut at top_k), and consistency with the rows across store
objects and processes: writes by another process, a restart, a change log pruned past the index's position."""

from __future__ import annotations

import asyncio
import sys
import textwrap
from pathlib import Path
from typing import Any

import apsw
import numpy as np
import pytest

from ext.core import BaseVectorStore, ConfigurationError, VectorRecord
from ext.vectors.sqlite import SqliteVectorStore

DIM = 32
N = 3000


def _data(n: int = N, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    data = rng.standard_normal((n, DIM)).astype(np.float32)
    picks = data[rng.choice(n, 40, replace=False)]
    queries = picks + 0.3 * rng.standard_normal((40, DIM)).astype(np.float32)
    return data, queries


def _records(data: np.ndarray, first: int = 0) -> list[VectorRecord]:
    return [
        VectorRecord(
            id=f"r{first + i}", vector=v.tolist(), text=f"row {first + i}", metadata={"part": (first + i) % 10}
        )
        for i, v in enumerate(data)
    ]


async def _fill(path: str, data: np.ndarray) -> None:
    async with SqliteVectorStore(path, collection_name="c", vector_size=DIM, index_threshold=None) as store:
        await store.create_collection()
        for first in range(0, len(data), 1000):
            await store.upsert(_records(data[first : first + 1000], first))


def _store(path: str, **options: object) -> SqliteVectorStore:
    return SqliteVectorStore(path, collection_name="c", vector_size=DIM, **options)  # type: ignore[arg-type]


async def _ids(store: BaseVectorStore[Any], vector: np.ndarray, **kwargs: object) -> list[str]:
    return [m.id for m in await store.query(vector.tolist(), **kwargs)]  # type: ignore[arg-type]


@pytest.fixture
def path(tmp_path: Path) -> str:
    return str(tmp_path / "v.db")


async def test_hnsw_recall_against_the_exact_scan(path: str) -> None:
    data, queries = _data()
    await _fill(path, data)
    async with _store(path, index_threshold=None) as exact, _store(path, exact_limit=0) as hnsw:
        found = total = 0
        for q in queries:
            truth = await exact.query(q.tolist(), top_k=10)
            near = await hnsw.query(q.tolist(), top_k=10)
            found += len({m.id for m in truth} & {m.id for m in near})
            total += len(truth)
            # Same scores for the same records (both cosine similarity over float32).
            scores = {m.id: m.score for m in truth}
            for m in near:
                if m.id in scores:
                    assert m.score == pytest.approx(scores[m.id], abs=1e-5)
        assert found / total >= 0.98


async def test_exact_index_scan_equals_the_sql_scan(path: str) -> None:
    data, queries = _data()
    await _fill(path, data)
    async with _store(path, index_threshold=None) as exact, _store(path) as indexed:
        for q in queries[:10]:
            assert await _ids(indexed, q, top_k=10) == await _ids(exact, q, top_k=10)
            assert await _ids(indexed, q, top_k=5, min_score=0.5) == await _ids(exact, q, top_k=5, min_score=0.5)


@pytest.mark.parametrize("exact_limit", [0, 20_000])
async def test_filters_apply_before_the_cut(path: str, exact_limit: int) -> None:
    data, queries = _data()
    await _fill(path, data)
    # part 3: a tenth of the rows (the candidate list grows until ten pass); r7 alone: the exact scan answers.
    filters: list[dict[str, object]] = [{"part": 3}, {"part": {"$in": [3, 4]}}, {"text": "no such"}]
    async with _store(path, index_threshold=None) as exact, _store(path, exact_limit=exact_limit) as indexed:
        await indexed.upsert([VectorRecord(id="lonely", vector=data[7].tolist(), metadata={"lonely": True})])
        await exact.upsert([VectorRecord(id="lonely", vector=data[7].tolist(), metadata={"lonely": True})])
        found = total = 0
        for q in queries[:20]:
            for where in filters:
                truth = await _ids(exact, q, top_k=10, filter=where)
                near = await indexed.query(q.tolist(), top_k=10, filter=where)
                assert len(near) == len(truth)
                found += len(set(truth) & {m.id for m in near})
                total += len(truth)
                if "part" in where:
                    parts = where["part"]
                    allowed = parts["$in"] if isinstance(parts, dict) else [parts]
                    assert all(m.metadata["part"] in allowed for m in near)
            assert await _ids(indexed, q, filter={"lonely": True}) == ["lonely"]
        assert found / total >= (1.0 if exact_limit else 0.95)


async def test_follows_writes_of_another_store(path: str) -> None:
    data, _queries = _data()
    await _fill(path, data)
    async with _store(path) as reader, _store(path) as writer:
        assert (await _ids(reader, data[5], top_k=1)) == ["r5"]
        # Another store replaces r5's vector, deletes r6 and adds a new record where r6 was.
        await writer.upsert([VectorRecord(id="r5", vector=data[9].tolist(), text="moved")])
        await writer.delete(["r6"])
        await writer.upsert([VectorRecord(id="new", vector=data[6].tolist())])
        assert (await _ids(reader, data[6], top_k=1)) == ["new"]
        assert set(await _ids(reader, data[9], top_k=2)) == {"r5", "r9"}
        assert "r5" not in await _ids(reader, data[5], top_k=3)
        assert await reader.count() == N


async def test_rebuilds_when_the_log_no_longer_reaches_back(path: str) -> None:
    data, _queries = _data()
    await _fill(path, data)
    async with _store(path) as reader:
        assert (await _ids(reader, data[5], top_k=1)) == ["r5"]
        # Another writer (an older version, or one that pruned the log): changes whose log entries are gone.
        conn = apsw.Connection(path)
        conn.execute("UPDATE ext_records SET id = 'renamed' WHERE id = 'r5'")
        conn.execute("DELETE FROM ext_changes")
        conn.execute("INSERT INTO ext_changes(collection, id) VALUES ('other', 'x')")
        conn.close()
        assert (await _ids(reader, data[5], top_k=1)) == ["renamed"]


async def test_many_updates_stay_correct(path: str) -> None:
    data, _ = _data(1200)
    await _fill(path, data)
    async with _store(path, exact_limit=0) as store:
        for round_ in range(3):  # every vector replaced three times: tombstones past the live count, a rebuild
            shifted = np.roll(data, round_ + 1, axis=0)
            await store.upsert(_records(shifted))
            assert await _ids(store, shifted[17], top_k=1) == ["r17"]
        assert await store.count() == 1200


WRITER = textwrap.dedent(
    """
    import asyncio
    import json
    import sys

    from ext.core import VectorRecord
    from ext.vectors.sqlite import SqliteVectorStore


    async def main():
        path, name = sys.argv[1], sys.argv[2]
        vectors = json.loads(sys.stdin.readline())
        async with SqliteVectorStore(path, collection_name="c", vector_size=len(vectors[0]), index_threshold=0) as s:
            await s.create_collection()
            ids = [f"{name}{i}" for i in range(len(vectors))]
            await s.upsert([VectorRecord(id=i, vector=v) for i, v in zip(ids, vectors)])
            await s.delete([f"r{i}" for i in range(10)] if name == "a" else [])
            # Each process sees its own writes and the other's through its index.
            found = [(await s.query(v, top_k=1))[0].id for v in vectors]
            print(json.dumps(found), flush=True)


    asyncio.run(main())
    """
)


async def test_two_writer_processes(path: str) -> None:
    import json

    data, _ = _data(2000)
    await _fill(path, data[:1000])
    async with _store(path, index_threshold=0) as reader:
        assert await _ids(reader, data[3], top_k=1) == ["r3"]  # the index is built before the writers run

        async def writer(name: str, vectors: np.ndarray) -> list[str]:
            process = await asyncio.create_subprocess_exec(
                sys.executable,
                "-c",
                WRITER,
                path,
                name,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
            )
            out, _ = await process.communicate(json.dumps(vectors.tolist()).encode() + b"\n")
            assert process.returncode == 0
            return list(json.loads(out))

        found_a, found_b = await asyncio.gather(writer("a", data[1000:1500]), writer("b", data[1500:2000]))
        assert found_a == [f"a{i}" for i in range(500)]
        assert found_b == [f"b{i}" for i in range(500)]
        # The first store's index follows both processes: their records found, a's deletions gone.
        assert await reader.count() == 1990
        assert await _ids(reader, data[1200], top_k=1) == ["a200"]
        assert await _ids(reader, data[1700], top_k=1) == ["b200"]
        assert "r3" not in await _ids(reader, data[3], top_k=5)
    # A restart (a new store object) rebuilds from the rows and answers the same.
    async with _store(path, index_threshold=0) as again:
        assert await _ids(again, data[1700], top_k=1) == ["b200"]
        assert "r3" not in await _ids(again, data[3], top_k=5)


def test_bad_index_options_are_refused() -> None:
    with pytest.raises(ConfigurationError, match="index_threshold"):
        _store(":memory:", index_threshold=-1)
    with pytest.raises(ConfigurationError, match="hnsw_connectivity"):
        _store(":memory:", hnsw_connectivity=1)
    store = _store(":memory:", index_threshold=5, exact_limit=7)
    dumped = store.dump_component().config
    assert (dumped["index_threshold"], dumped["exact_limit"]) == (5, 7)
