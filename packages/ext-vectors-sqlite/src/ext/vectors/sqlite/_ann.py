"""The in-memory vector index of one collection, for collections past `index_threshold` records: usearch (HNSW,
with SIMD brute force below `exact_limit`), rebuilt from the SQLite rows and kept in step with them.

The rows stay the truth; the index is a cache of their vectors, one per store object (per process). It follows
every writer, this store or another process, through `ext_changes`: triggers on `ext_records` log each written or
deleted id with a sequence number, in the writer's own transaction. Before each search the index applies the
entries past the last one it applied (re-reading those ids' rows: present means put, absent means remove). When
the log no longer reaches back that far (writers prune it past `LOG_KEEP` entries), the index is rebuilt from the
rows. Nothing is persisted beside the database: a new process rebuilds on its first search (README: the cost).

Scores are inner products of unit vectors (each vector normalised in float64, kept as float32): cosine
similarity, as the exact scan computes it.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence

import apsw
import numpy as np
from usearch.index import Index

from ext.vectors.sqlite._sql import log_position


def _unit(blobs: Sequence[bytes], size: int) -> np.ndarray:
    vectors = np.frombuffer(b"".join(blobs), dtype=np.float32).reshape(len(blobs), size).astype(np.float64)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors.astype(np.float32)


class VectorIndex:
    """One collection's vectors in a usearch index (see the module docstring). Used from one thread."""

    def __init__(self, collection: str, size: int, *, connectivity: int, expansion_add: int, expansion_search: int):
        self._collection = collection
        self._size = size
        self._expansion_search = expansion_search
        self._connectivity = connectivity
        self._expansion_add = expansion_add
        self._index = self._new_index()
        self._key_of: dict[str, int] = {}
        self._id_of: dict[int, str] = {}
        self._next_key = 0
        self._removed = 0  # entries HNSW keeps as tombstones: past the live count, a rebuild is cheaper
        self._seq = -1  # no change applied yet: the first sync builds

    def _new_index(self) -> Index:
        return Index(
            ndim=self._size,
            metric="ip",
            dtype="f32",
            connectivity=self._connectivity,
            expansion_add=self._expansion_add,
            expansion_search=self._expansion_search,
        )

    def __len__(self) -> int:
        return len(self._key_of)

    def sync(self, conn: apsw.Connection) -> None:
        """Bring the index level with the rows (call inside a read transaction, so the log and rows agree)."""
        first, last = log_position(conn)
        if last == self._seq:
            return
        if self._seq < 0 or first > self._seq + 1 or self._removed > max(len(self), 1000):
            self._rebuild(conn, last)
            return
        changed = [
            row[0]
            for row in conn.execute(
                "SELECT DISTINCT id FROM ext_changes WHERE seq > ? AND collection = ?", (self._seq, self._collection)
            )
        ]
        self._remove(changed)
        self._put(self._rows(conn, changed))
        self._seq = last

    def _rows(self, conn: apsw.Connection, ids: list[str]) -> Iterable[tuple[str, bytes]]:
        return conn.execute(
            "SELECT id, embedding FROM ext_records WHERE collection = ? AND id IN (SELECT value FROM json_each(?))",
            (self._collection, json.dumps(ids)),
        )

    def _rebuild(self, conn: apsw.Connection, last: int) -> None:
        self._index = self._new_index()
        self._removed = 0
        self._key_of.clear()
        self._id_of.clear()
        self._put(conn.execute("SELECT id, embedding FROM ext_records WHERE collection = ?", (self._collection,)))
        self._seq = last

    def _remove(self, ids: list[str]) -> None:
        keys = [self._key_of.pop(id_) for id_ in ids if id_ in self._key_of]
        for key in keys:
            del self._id_of[key]
        if keys:
            self._index.remove(np.array(keys, dtype=np.uint64))
            self._removed += len(keys)

    def _put(self, rows: Iterable[tuple[str, bytes]]) -> None:
        ids: list[str] = []
        blobs: list[bytes] = []
        for id_, blob in rows:
            ids.append(id_)
            blobs.append(blob)
        if not ids:
            return
        keys = np.arange(self._next_key, self._next_key + len(ids), dtype=np.uint64)
        self._next_key += len(ids)
        for id_, key in zip(ids, keys.tolist(), strict=True):
            self._key_of[id_] = key
            self._id_of[key] = id_
        self._index.add(keys, _unit(blobs, self._size), threads=0)

    def search(self, vector: Sequence[float], count: int, *, exact: bool) -> list[tuple[str, float]]:
        """The `count` nearest (id, cosine similarity), best first; exact: a brute-force scan of the index."""
        if not self._key_of:
            return []
        query = np.asarray(vector, dtype=np.float64)
        query = (query / np.linalg.norm(query)).astype(np.float32)
        count = min(count, len(self._key_of))
        # usearch's setter is public but unannotated, which mypy reads as no setter at all.
        self._index.expansion_search = max(self._expansion_search, count)  # type: ignore[misc]
        found = self._index.search(query, count, exact=exact, threads=1)
        return [
            (self._id_of[int(key)], 1.0 - float(distance))
            for key, distance in zip(found.keys, found.distances, strict=True)
            if int(key) in self._id_of
        ]
