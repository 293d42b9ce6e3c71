from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ext.core import BaseVectorStore, ConfigurationError, VectorRecord, VectorStoreOptions
from ext.testing.conformance import VectorStoreConformance
from ext.vectors.sqlite import SqliteVectorStore


class TestSqliteFile(VectorStoreConformance):
    @pytest.fixture(autouse=True)
    def _database(self, tmp_path: Path) -> None:
        self.path = str(tmp_path / "vectors.db")

    async def make_store(self, collection_name: str, vector_size: int) -> BaseVectorStore[Any]:
        return SqliteVectorStore(self.path, collection_name=collection_name, vector_size=vector_size)

    async def reopen_store(self, store: BaseVectorStore[Any], vector_size: int) -> BaseVectorStore[Any] | None:
        return SqliteVectorStore(self.path, collection_name=store.collection_name, vector_size=vector_size)

    def make_unreachable_store(self) -> BaseVectorStore[Any]:
        return SqliteVectorStore(self.path + "-missing/sub/v.db", collection_name="c", vector_size=4)


class TestSqliteIndexedExact(TestSqliteFile):
    """The whole suite through the in-memory index (from the first record), scanned exactly."""

    async def make_store(self, collection_name: str, vector_size: int) -> BaseVectorStore[Any]:
        return SqliteVectorStore(self.path, collection_name=collection_name, vector_size=vector_size, index_threshold=0)

    async def reopen_store(self, store: BaseVectorStore[Any], vector_size: int) -> BaseVectorStore[Any] | None:
        return await self.make_store(store.collection_name, vector_size)


class TestSqliteIndexedHnsw(TestSqliteFile):
    """The whole suite through the index's HNSW graph (`exact_limit=0`)."""

    async def make_store(self, collection_name: str, vector_size: int) -> BaseVectorStore[Any]:
        return SqliteVectorStore(
            self.path, collection_name=collection_name, vector_size=vector_size, index_threshold=0, exact_limit=0
        )

    async def reopen_store(self, store: BaseVectorStore[Any], vector_size: int) -> BaseVectorStore[Any] | None:
        return await self.make_store(store.collection_name, vector_size)


class TestSqliteMemory(VectorStoreConformance):
    async def make_store(self, collection_name: str, vector_size: int) -> BaseVectorStore[Any]:
        return SqliteVectorStore(collection_name=collection_name, vector_size=vector_size)

    def make_unreachable_store(self) -> BaseVectorStore[Any]:
        return SqliteVectorStore("/proc/no-such-dir/v.db", collection_name="c", vector_size=4)


async def test_from_options(tmp_path: Path) -> None:
    options = VectorStoreOptions(endpoint=str(tmp_path / "o.db"), collection_name="docs", vector_size=3)
    async with SqliteVectorStore.from_options(options) as store:
        await store.create_collection()
        await store.upsert([VectorRecord(id="x", vector=[1.0, 2.0, 3.0])])
        assert await store.count() == 1
    with pytest.raises(ConfigurationError, match="api_key"):
        SqliteVectorStore.from_options(options.model_copy(update={"api_key": "k"}))


async def test_two_collections_share_a_file(tmp_path: Path) -> None:
    path = str(tmp_path / "shared.db")
    async with (
        SqliteVectorStore(path, collection_name="one", vector_size=2) as one,
        SqliteVectorStore(path, collection_name="two", vector_size=3) as two,
    ):
        await one.create_collection()
        await two.create_collection()
        await one.upsert([VectorRecord(id="a", vector=[1.0, 0.0])])
        await two.upsert([VectorRecord(id="a", vector=[1.0, 0.0, 0.0]), VectorRecord(id="b", vector=[0.0, 1.0, 0.0])])
        assert (await one.count(), await two.count()) == (1, 2)
        await one.delete_collection()
        assert await two.count() == 2


async def test_filter_key_sqlite_cannot_name(tmp_path: Path) -> None:
    async with SqliteVectorStore(collection_name="c", vector_size=2) as store:
        await store.create_collection()
        with pytest.raises(ValueError, match="filter key"):
            await store.query([1.0, 0.0], filter={'a"b': 1})
