"""The conformance suite every `VectorStore` passes.

Subclass it in the store's tests (the class name must start with `Test`)::

    class TestMyStore(VectorStoreConformance):
        async def make_store(self, collection_name: str, vector_size: int) -> BaseVectorStore[Any]:
            return MyStore(..., collection_name=collection_name, vector_size=vector_size)

        # For stores that persist (a file, a server): a new store object over the same data.
        async def reopen_store(self, store: BaseVectorStore[Any], vector_size: int) -> BaseVectorStore[Any] | None:
            return MyStore(..., collection_name=store.collection_name, vector_size=vector_size)

        # A store whose backend cannot be reached (a closed port, a path in a missing folder).
        def make_unreachable_store(self) -> BaseVectorStore[Any]: ...

        secrets: ClassVar[tuple[str, ...]] = ("the password the store was given",)

Each case gets a fresh collection name, so one database serves the whole suite.
"""

from __future__ import annotations

import itertools
import math
import re
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, ClassVar

import pytest
import pytest_asyncio

from ext.core import (
    BaseVectorStore,
    CollectionNotFoundError,
    MetadataValue,
    VectorRecord,
    VectorSizeError,
    VectorStore,
    VectorStoreUnavailableError,
)
from ext.testing.conformance._component import assert_dump_round_trip
from ext.testing.conformance._vectors_search import SearchConformance

SIZE = 4


def unit(*values: float) -> list[float]:
    """`values` scaled to length 1."""
    norm = math.sqrt(sum(v * v for v in values))
    return [v / norm for v in values]


def _records() -> list[VectorRecord]:
    # Cosine similarity to the query [1, 0, 0, 0]: a 1.0, b ~0.894, c ~0.707, d 0.0, e -1.0.
    return [
        VectorRecord(id="a", vector=unit(1, 0, 0, 0), text="alpha", metadata={"lang": "en", "n": 1}),
        VectorRecord(id="b", vector=unit(2, 1, 0, 0), text="beta", metadata={"lang": "fr", "n": 2}),
        VectorRecord(id="c", vector=unit(1, 1, 0, 0), text="gamma", metadata={"lang": "en", "n": 3, "flag": True}),
        VectorRecord(id="d", vector=unit(0, 0, 1, 0), text="delta", metadata={"lang": "de", "n": 1.0}),
        VectorRecord(id="e", vector=unit(-1, 0, 0, 0), text="epsilon", metadata={"lang": "en", "flag": False}),
    ]


QUERY = [1.0, 0.0, 0.0, 0.0]


class VectorStoreConformance(SearchConformance):
    """Backend-neutral cases for a `VectorStore` built on `BaseVectorStore` (with the keyword and hybrid cases of
    `SearchConformance`, which run as far as the store's `search_modes` declare). See the module docstring."""

    secrets: ClassVar[tuple[str, ...]] = ()
    """Secret values the store was given (passwords, keys): never in its repr, errors or dump."""

    # --- what a subclass provides -----------------------------------------------------------------

    async def make_store(self, collection_name: str, vector_size: int) -> BaseVectorStore[Any]:
        raise NotImplementedError

    async def reopen_store(self, store: BaseVectorStore[Any], vector_size: int) -> BaseVectorStore[Any] | None:
        """A new store object over the same data as `store` (its collection, opened with `vector_size`), or None
        for a store whose data lives in the store object alone (in memory)."""
        return None

    def make_unreachable_store(self) -> BaseVectorStore[Any]:
        raise NotImplementedError

    # --- fixtures -----------------------------------------------------------------------------------

    @pytest.fixture
    def collection_name(self) -> str:
        return f"c_{uuid.uuid4().hex[:12]}"

    @pytest_asyncio.fixture
    async def empty(self, collection_name: str) -> AsyncIterator[BaseVectorStore[Any]]:
        """A store whose collection does not exist yet."""
        store = await self.make_store(collection_name, SIZE)
        try:
            yield store
        finally:
            await store.delete_collection()
            await store.close()

    @pytest_asyncio.fixture
    async def store(self, empty: BaseVectorStore[Any]) -> BaseVectorStore[Any]:
        """A store with the five records of `_records()`."""
        await empty.create_collection()
        await empty.upsert(_records())
        return empty

    # --- cases ----------------------------------------------------------------------------------------

    async def test_satisfies_protocol(self, empty: BaseVectorStore[Any]) -> None:
        assert isinstance(empty, VectorStore)
        assert empty.vector_size == SIZE

    async def test_create_is_idempotent_and_exists(self, empty: BaseVectorStore[Any]) -> None:
        assert await empty.collection_exists() is False
        await empty.create_collection()
        await empty.create_collection()
        assert await empty.collection_exists() is True
        assert await empty.count() == 0

    async def test_unknown_collection_raises(self, empty: BaseVectorStore[Any]) -> None:
        calls: list[Callable[[], Awaitable[object]]] = [
            lambda: empty.upsert(_records()[:1]),
            lambda: empty.query(QUERY),
            lambda: empty.get(["a"]),
            lambda: empty.delete(["a"]),
            lambda: empty.delete_where({}),
            lambda: empty.count(),
        ]
        for call in calls:
            with pytest.raises(CollectionNotFoundError, match=empty.collection_name):
                await call()

    async def test_open_with_other_size_raises(self, store: BaseVectorStore[Any]) -> None:
        other = await self.reopen_store(store, SIZE + 1)
        if other is None:
            return  # data private to one store object: no second opener exists
        try:
            with pytest.raises(VectorSizeError, match=str(SIZE)):
                await other.create_collection()
            with pytest.raises(VectorSizeError):
                await other.count()
        finally:
            await other.close()
        assert await store.count() == 5

    async def test_query_orders_by_score(self, store: BaseVectorStore[Any]) -> None:
        matches = await store.query(QUERY, top_k=10)
        assert [m.id for m in matches] == ["a", "b", "c", "d", "e"]
        expected = [1.0, 2 / math.sqrt(5), 1 / math.sqrt(2), 0.0, -1.0]
        assert [m.score for m in matches] == pytest.approx(expected, abs=1e-5)
        assert matches[0].text == "alpha"
        assert matches[0].metadata == {"lang": "en", "n": 1}

    async def test_top_k(self, store: BaseVectorStore[Any]) -> None:
        assert [m.id for m in await store.query(QUERY, top_k=2)] == ["a", "b"]

    async def test_min_score(self, store: BaseVectorStore[Any]) -> None:
        assert [m.id for m in await store.query(QUERY, min_score=0.8)] == ["a", "b"]
        assert [m.id for m in await store.query(QUERY, min_score=-1.0)] == ["a", "b", "c", "d", "e"]

    async def test_filter_equality_and_in(self, store: BaseVectorStore[Any]) -> None:
        assert [m.id for m in await store.query(QUERY, filter={"lang": "en"})] == ["a", "c", "e"]
        assert [m.id for m in await store.query(QUERY, filter={"lang": {"$in": ["fr", "de"]}})] == ["b", "d"]
        assert [m.id for m in await store.query(QUERY, filter={"lang": "en", "n": 3})] == ["c"]
        assert [m.id for m in await store.query(QUERY, filter={"lang": "xx"})] == []

    async def test_filter_json_kinds(self, store: BaseVectorStore[Any]) -> None:
        # 1 equals 1.0; a bool is not a number; None matches an absent key.
        assert [m.id for m in await store.query(QUERY, filter={"n": 1})] == ["a", "d"]
        assert [m.id for m in await store.query(QUERY, filter={"flag": True})] == ["c"]
        assert [m.id for m in await store.query(QUERY, filter={"n": True})] == []
        assert [m.id for m in await store.query(QUERY, filter={"flag": None})] == ["a", "b", "d"]
        assert await store.count({"lang": "en"}) == 3

    async def test_bad_filter_and_query_raise(self, store: BaseVectorStore[Any]) -> None:
        with pytest.raises(ValueError, match=r"\$in"):
            await store.query(QUERY, filter={"lang": {"$gt": 1}})
        with pytest.raises(ValueError, match="lang"):
            await store.query(QUERY, filter={"lang": ["en"]})
        with pytest.raises(ValueError, match="top_k"):
            await store.query(QUERY, top_k=0)
        with pytest.raises(ValueError, match="min_score"):
            await store.query(QUERY, min_score=1.5)
        with pytest.raises(VectorSizeError, match="query vector"):
            await store.query([1.0, 0.0])
        with pytest.raises(ValueError, match="finite"):
            await store.query([math.nan, 0.0, 0.0, 0.0])

    async def test_upsert_overwrites(self, store: BaseVectorStore[Any]) -> None:
        await store.upsert([VectorRecord(id="e", vector=unit(1, 0, 0, 0.1), text="new", metadata={"v": 2})])
        assert await store.count() == 5
        [record] = await store.get(["e"])
        assert record.text == "new"
        assert record.metadata == {"v": 2}
        assert record.vector == pytest.approx(unit(1, 0, 0, 0.1), abs=1e-6)
        assert [m.id for m in await store.query(QUERY, top_k=2)] == ["a", "e"]

    async def test_get_keeps_order_and_skips_missing(self, store: BaseVectorStore[Any]) -> None:
        records = await store.get(["c", "zz", "a"])
        assert [r.id for r in records] == ["c", "a"]
        assert records[0].vector == pytest.approx(unit(1, 1, 0, 0), abs=1e-6)
        assert records[0].metadata == {"lang": "en", "n": 3, "flag": True}

    async def test_delete_and_count(self, store: BaseVectorStore[Any]) -> None:
        assert await store.delete(["a", "zz"]) == 1
        assert await store.count() == 4
        assert await store.delete_where({"lang": "en"}) == 2
        assert sorted(r.id for r in await store.get(["a", "b", "c", "d", "e"])) == ["b", "d"]
        assert await store.delete_where({}) == 2
        assert await store.count() == 0

    async def test_size_mismatch_and_non_finite_write_nothing(self, store: BaseVectorStore[Any]) -> None:
        good = VectorRecord(id="new", vector=unit(0, 1, 0, 0))
        with pytest.raises(VectorSizeError, match=r"records\[1\]\.vector"):
            await store.upsert([good, VectorRecord(id="short", vector=[1.0, 0.0])])
        with pytest.raises(ValueError, match="finite"):
            await store.upsert([good, {"id": "nan", "vector": [math.inf, 0, 0, 0]}])
        with pytest.raises(ValueError, match="zeros"):
            await store.upsert([good, {"id": "zero", "vector": [0, 0, 0, 0]}])
        with pytest.raises(ValueError, match="twice"):
            await store.upsert([good, good])
        assert await store.count() == 5
        assert await store.get(["new"]) == []

    async def test_vectors_float32_cannot_hold_are_refused(self, store: BaseVectorStore[Any]) -> None:
        # Every store keeps float32 and computes cosine in float32: what that cannot hold is refused, naming the
        # record and the component, and nothing of the batch is written.
        good = VectorRecord(id="new", vector=unit(0, 1, 0, 0))
        cases: list[tuple[list[float], str]] = [
            ([1e39, 0, 0, 0], r"vector\[0\] = 1e\+39 is outside float32's range"),
            ([0, -1e39, 0, 0], r"vector\[1\] = -1e\+39 is outside float32's range"),
            ([1e-46, 0, 0, 0], "every component underflows to zero as float32"),
            ([1e20, 0, 0, 0], r"length 1e\+20, above 1e\+18"),
            ([1e-30, 0, 0, 0], "length 1e-30, below 1e-18"),
        ]
        for vector, message in cases:
            with pytest.raises(ValueError, match=message) as caught:
                await store.upsert([good, {"id": "bad", "vector": vector}])
            assert "records[1] (id 'bad')" in str(caught.value)
            with pytest.raises(ValueError, match=message):
                await store.query(vector)
        assert await store.count() == 5
        assert await store.get(["new", "bad"]) == []
        # At the bounds every store still scores right and gives the vector back.
        edges = [
            VectorRecord(id="big", vector=[7e17, 7e17, 0, 0]),
            VectorRecord(id="small", vector=[7.1e-19, 0, 0, 7.1e-19]),
            VectorRecord(id="tiny-part", vector=[1.0, 1e-40, 0, 0]),
        ]
        await store.upsert(edges)
        for query in ([9e17, 0, 0, 0], [1.5e-18, 0, 0, 0]):
            scores = {m.id: m.score for m in await store.query(query)}
            assert scores["big"] == pytest.approx(1 / math.sqrt(2), abs=1e-5)
            assert scores["small"] == pytest.approx(1 / math.sqrt(2), abs=1e-5)
            assert scores["a"] == pytest.approx(1.0, abs=1e-5)
            assert scores["tiny-part"] == pytest.approx(1.0, abs=1e-5)
        for record, stored in zip(edges, await store.get([r.id for r in edges]), strict=True):
            assert stored.vector == pytest.approx(record.vector, rel=1e-6, abs=1e-44)

    async def test_values_no_store_can_keep_are_refused(self, store: BaseVectorStore[Any]) -> None:
        good = VectorRecord(id="new", vector=unit(0, 1, 0, 0))
        vector = unit(1, 1, 1, 0)
        cases: list[tuple[dict[str, Any], str]] = [
            ({"metadata": {"x": math.nan}}, r"metadata\['x'\] must be a finite number"),
            ({"metadata": {"x": -math.inf}}, r"metadata\['x'\] must be a finite number"),
            ({"metadata": {"x": 2**63}}, r"metadata\['x'\] = 9223372036854775808 does not fit in a signed 64-bit"),
            ({"metadata": {"x": -(2**63) - 1}}, r"metadata\['x'\] = -9223372036854775809 does not fit"),
            ({"metadata": {"x": "a\x00b"}}, r"metadata\['x'\] must not contain NUL"),
            ({"metadata": {"k\x00": 1}}, re.escape("metadata key 'k\\x00' must not contain NUL")),
            ({"metadata": {"": 1}}, "metadata keys must be non-empty strings"),
            ({"text": "a\x00b"}, "text must not contain NUL"),
            ({"id": "b\x00d"}, "id must not contain NUL"),
            ({"id": "x" * 2049}, "id is 2049 bytes as UTF-8; ids hold at most 2048"),
        ]
        for fields, message in cases:
            bad = {"id": "bad", "vector": vector, **fields}
            with pytest.raises(ValueError, match=message) as caught:
                await store.upsert([good, bad])
            assert str(caught.value).startswith("records[1]")
        # A record built without validation, or changed after it was built, is checked again before it is written.
        built = VectorRecord.model_construct(id="built", vector=[math.inf, 0.0, 0.0, 0.0], text="", metadata={})
        changed = VectorRecord(id="changed", vector=vector)
        changed.metadata["n"] = math.nan
        for record, message in ((built, r"vector\[0\] must be a finite"), (changed, r"metadata\['n'\]")):
            with pytest.raises(ValueError, match=message):
                await store.upsert([good, record])
        assert await store.count() == 5
        assert await store.get(["new", "bad", "built", "changed"]) == []
        # The limits themselves are kept exactly.
        edge: dict[str, MetadataValue] = {"max": 2**63 - 1, "min": -(2**63), "s": "é \u2028 ✓"}
        await store.upsert([VectorRecord(id="é" * 1024, vector=vector, text="ünïcode ✓", metadata=edge)])
        [stored] = await store.get(["é" * 1024])
        assert (stored.text, stored.metadata) == ("ünïcode ✓", edge)
        assert [m.id for m in await store.query(QUERY, filter={"max": 2**63 - 1})] == ["é" * 1024]
        assert await store.count({"min": {"$in": [-(2**63), 0]}}) == 1

    async def test_bad_input_refused_before_any_io(self) -> None:
        # The backend cannot be reached: a ValueError (not VectorStoreUnavailableError) shows nothing was sent.
        store = self.make_unreachable_store()
        try:
            calls: list[tuple[Callable[[], Awaitable[object]], str]] = [
                (lambda: store.upsert([{"id": "a", "vector": [1e39, 0, 0, 0]}]), "float32"),
                (lambda: store.upsert([{"id": "a", "vector": [3e19, 0, 0, 0]}]), "above 1e"),
                (lambda: store.upsert([{"id": "a", "vector": QUERY, "metadata": {"k": math.nan}}]), "finite"),
                (lambda: store.query([1e-30, 0, 0, 0]), "below 1e-18"),
                (lambda: store.query(QUERY, filter={"k": 2**64}), r"filter\['k'\] = 18446744073709551616 does not"),
                (lambda: store.query(QUERY, filter={"k": {"$in": [1, -(2**63) - 1]}}), r"\['\$in'\]\[1\]"),
                (lambda: store.query(QUERY, filter={"k": "a\x00"}), r"filter\['k'\] must not contain NUL"),
                (lambda: store.query(QUERY, filter={"k\x00": "a"}), re.escape("filter key 'k\\x00' must not contain")),
                (lambda: store.query(QUERY, filter={"k": {"$in": list(range(1001))}}), "more than 1000 values"),
                (lambda: store.count({"k": math.inf}), "finite"),
                (lambda: store.delete_where({"k": 2**64}), "64-bit"),
                (lambda: store.get(["a", "b\x00"]), r"ids\[1\] must not contain NUL"),
                (lambda: store.delete(["\ud800"]), r"ids\[0\] is not valid Unicode"),
                (lambda: store.get(["x" * 2049]), "2049 bytes"),
            ]
            for call, message in calls:
                with pytest.raises(ValueError, match=message):
                    await call()
        finally:
            await store.close()

    async def test_large_batch(self, store: BaseVectorStore[Any]) -> None:
        vectors = itertools.cycle([unit(0, 1, 0, 0), unit(0, 1, 1, 0), unit(0, 0, 0, 1)])
        await store.upsert([VectorRecord(id=f"r{i}", vector=next(vectors), metadata={"i": i}) for i in range(600)])
        assert await store.count() == 605
        assert await store.count({"i": {"$in": [0, 1, 599, 600]}}) == 3

    async def test_persists_across_reopen(self, store: BaseVectorStore[Any]) -> None:
        again = await self.reopen_store(store, store.vector_size)
        if again is None:
            return  # an in-memory store has nothing to reopen
        try:
            assert await again.collection_exists()
            assert [m.id for m in await again.query(QUERY, top_k=2)] == ["a", "b"]
        finally:
            await again.close()

    async def test_delete_collection(self, store: BaseVectorStore[Any]) -> None:
        await store.delete_collection()
        assert await store.collection_exists() is False
        with pytest.raises(CollectionNotFoundError):
            await store.count()
        await store.create_collection()
        assert await store.count() == 0

    async def test_unreachable_raises_promptly(self) -> None:
        store = self.make_unreachable_store()
        try:
            with pytest.raises(VectorStoreUnavailableError) as caught:
                await store.create_collection()
            for secret in self.secrets:
                assert secret not in str(caught.value)
                assert secret not in repr(caught.value.__cause__)
        finally:
            await store.close()

    async def test_secrets_not_in_repr_or_dump(self, empty: BaseVectorStore[Any]) -> None:
        text = repr(empty) + empty.dump_component().model_dump_json()
        for secret in self.secrets:
            assert secret not in text
        assert empty.collection_name in repr(empty)

    async def test_dump_round_trip(self, empty: BaseVectorStore[Any]) -> None:
        loaded = assert_dump_round_trip(empty)
        try:
            assert loaded.collection_name == empty.collection_name
            assert loaded.vector_size == SIZE
        finally:
            await loaded.close()

    async def test_closed_store_refuses(self, collection_name: str) -> None:
        store = await self.make_store(collection_name, SIZE)
        await store.close()
        await store.close()
        with pytest.raises(Exception, match="closed"):
            await store.count()
