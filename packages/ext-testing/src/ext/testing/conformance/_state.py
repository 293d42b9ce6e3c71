"""The conformance suite every `StateStore` passes (`InMemoryStateStore`, `FileStateStore`,
`ext.runtime.grpc.RedisStateStore`).

Subclass it in the store's tests (the class name must start with `Test`)::

    class TestMyStore(StateStoreConformance):
        async def make_store(self) -> StateStore:
            return MyStore(...)           # a fresh, empty store (a new directory, a new key prefix)

        async def reopen(self, store: StateStore) -> StateStore | None:
            return MyStore(...)           # a new store object over the same records, or None when records
                                          # cannot outlive the object (in memory)
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import AsyncIterator

import pytest
import pytest_asyncio

from ext.core import AgentId, StateConflictError, StateStore

A = AgentId("counter", "a")
B = AgentId("counter", "b/with slash")
OTHER = AgentId("other", "a")


class StateStoreConformance:
    """Store-neutral cases for a `StateStore`. See the module docstring."""

    async def make_store(self) -> StateStore:
        raise NotImplementedError

    async def reopen(self, store: StateStore) -> StateStore | None:
        """A second store object over `store`'s records (default None: the records live in the object)."""
        return None

    @pytest_asyncio.fixture
    async def store(self) -> AsyncIterator[StateStore]:
        store = await self.make_store()
        try:
            yield store
        finally:
            await store.close()

    async def test_missing_record_is_none(self, store: StateStore) -> None:
        assert await store.get(A) is None
        assert await store.keys() == []

    async def test_versions_start_at_one_and_grow(self, store: StateStore) -> None:
        assert await store.put(A, {"n": 1, "items": ["x", {"deep": None}]}, None) == 1
        assert await store.put(A, {"n": 2}, 1) == 2
        record = await store.get(A)
        assert record is not None
        assert (record.state, record.version) == ({"n": 2}, 2)
        state, version = record  # a plain (state, version) pair too
        assert (state, version) == ({"n": 2}, 2)

    async def test_stale_write_is_refused(self, store: StateStore) -> None:
        await store.put(A, {"n": 1}, None)
        await store.put(A, {"n": 2}, 1)
        with pytest.raises(StateConflictError, match=r"counter/a.*expected version 1, found version 2") as info:
            await store.put(A, {"n": 99}, 1)
        assert (info.value.agent_id, info.value.expected, info.value.found) == (A, 1, 2)
        with pytest.raises(StateConflictError, match="expected no record, found version 2"):
            await store.put(A, {"n": 99}, None)
        with pytest.raises(StateConflictError, match="expected version 5, found no record"):
            await store.put(B, {"n": 99}, 5)
        record = await store.get(A)
        assert record is not None and record.state == {"n": 2}
        assert await store.get(B) is None

    async def test_non_json_state_is_refused_naming_the_path(self, store: StateStore) -> None:
        with pytest.raises(TypeError, match=r"state\['items'\]\[1\]: expected a JSON value .* got set"):
            await store.put(A, {"items": [1, {2}]}, None)
        with pytest.raises(TypeError, match=r"state\['t'\].*got tuple"):
            await store.put(A, {"t": (1, 2)}, None)
        with pytest.raises(TypeError, match=r"state\['m'\]: JSON object keys must be str"):
            await store.put(A, {"m": {1: "one"}}, None)
        with pytest.raises(ValueError, match=r"state\['x'\]: JSON has no nan"):
            await store.put(A, {"x": math.nan}, None)
        with pytest.raises(TypeError, match="state must be a mapping"):
            await store.put(A, ["not", "a", "mapping"], None)  # type: ignore[arg-type]
        with pytest.raises(TypeError, match="expected_version must be a positive int"):
            await store.put(A, {}, 0)
        assert await store.get(A) is None

    async def test_saved_state_is_a_copy(self, store: StateStore) -> None:
        state: dict[str, object] = {"items": [1]}
        await store.put(A, state, None)
        state["items"] = [1, 2]
        record = await store.get(A)
        assert record is not None and record.state == {"items": [1]}
        record.state["items"] = "changed by the reader"
        again = await store.get(A)
        assert again is not None and again.state == {"items": [1]}

    async def test_keys_and_delete(self, store: StateStore) -> None:
        for agent_id in (OTHER, B, A):
            await store.put(agent_id, {"id": str(agent_id)}, None)
        assert await store.keys() == [A, B, OTHER]
        assert await store.keys("counter") == [A, B]
        await store.delete(B)
        await store.delete(B)  # no record: no error
        assert await store.keys() == [A, OTHER]
        assert await store.get(B) is None
        assert await store.put(B, {}, None) == 1  # a deleted record starts over

    async def test_two_writers_one_wins(self, store: StateStore) -> None:
        await store.put(A, {"writer": "none"}, None)
        second = await self.reopen(store) or store
        try:
            results = await asyncio.gather(
                *(s.put(A, {"writer": name}, 1) for s, name in ((store, "one"), (second, "two"), (store, "three"))),
                return_exceptions=True,
            )
        finally:
            if second is not store:
                await second.close()
        winners = [r for r in results if r == 2]
        losers = [r for r in results if isinstance(r, StateConflictError)]
        assert (len(winners), len(losers)) == (1, 2), results
        record = await store.get(A)
        assert record is not None and record.version == 2
        assert record.state["writer"] == ["one", "two", "three"][results.index(2)]

    async def test_records_survive_reopening(self, store: StateStore) -> None:
        await store.put(A, {"n": 1, "text": "h\u00e9llo"}, None)
        await store.put(A, {"n": 2, "text": "h\u00e9llo"}, 1)
        reopened = await self.reopen(store)
        if reopened is None:
            return  # records live in the store object (in memory): nothing outlives it
        try:
            record = await reopened.get(A)
            assert record is not None
            assert (record.state, record.version) == ({"n": 2, "text": "h\u00e9llo"}, 2)
            assert await reopened.put(A, {"n": 3}, 2) == 3
        finally:
            await reopened.close()
        record = await store.get(A)
        assert record is not None and record.version == 3
