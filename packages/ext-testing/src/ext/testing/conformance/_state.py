"""The conformance suite every `StateStore` passes (`InMemoryStateStore`, `ext.runtime.local.FileStateStore`,
`ext.redis.RedisStateStore`).

Subclass it in the store's tests (the class name must start with `Test`)::

    class TestMyStore(StateStoreConformance):
        async def make_store(self) -> StateStore:
            return MyStore(...)           # a fresh, empty store (a new directory, a new key prefix)

        async def reopen(self, store: StateStore) -> StateStore | None:
            return MyStore(...)           # a new store object over the same records, or None when records
                                          # cannot outlive the object (in memory)

        async def corrupt(self, store: StateStore, agent_id: AgentId) -> str | None:
            ...                           # garbage where the record of agent_id is kept; return where that is
                                          # (a text the error must name), or None when the store cannot hold one

        def setup_in_process(self) -> str | None:
            return "from my.store import MyStore\nstore = MyStore(...)"
                                          # Python source binding `store` over the same records, run in a
                                          # fresh interpreter; None when records cannot be shared (in memory)
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections.abc import AsyncIterator

import pytest
import pytest_asyncio

from ext.core import AgentId, StateConflictError, StateCorruptError, StateStore
from ext.testing.conformance._state_process import StateStoreProcess

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

    async def corrupt(self, store: StateStore, agent_id: AgentId) -> str | None:
        """Replace the record of `agent_id` (which exists) with something the store never writes, the way a disk
        or another program could, and return where it is (the file, the key): the store's errors and logs must
        name it. Default None: the store cannot hold such a record (in memory, records are only what it wrote)."""
        return None

    def setup_in_process(self) -> str | None:
        """Python source that binds `store` to a store over the same records as `make_store`'s, run in a fresh
        interpreter (`StateStoreProcess`). Default None: records cannot be shared between processes."""
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
        assert await store.put(B, {}, None) > 1  # a new record, above the deleted one's version

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

    async def test_versions_never_repeat_after_delete(self, store: StateStore) -> None:
        # A writer that read version n before a delete must not overwrite the record created after it (ABA).
        for expected in (None, 1, 2):
            await store.put(A, {"n": expected}, expected)
        seen = [1, 2, 3]
        for round_ in range(3):
            await store.delete(A)
            created = await store.put(A, {"round": round_}, None)
            assert created > max(seen), (created, seen)
            for stale in seen:
                with pytest.raises(StateConflictError) as info:
                    await store.put(A, {"stale": stale}, stale)
                assert (info.value.expected, info.value.found) == (stale, created)
            seen.append(await store.put(A, {"round": round_, "again": True}, created))
        record = await store.get(A)
        assert record is not None and record.state == {"round": 2, "again": True} and record.version == seen[-1]
        # Another key is unaffected by A's history: it grows from wherever it starts.
        first = await store.put(B, {}, None)
        assert await store.put(B, {}, first) == first + 1

    async def test_versions_never_repeat_after_delete_and_reopening(self, store: StateStore) -> None:
        await store.put(A, {"n": 1}, None)
        await store.put(A, {"n": 2}, 1)
        await store.delete(A)
        reopened = await self.reopen(store)
        if reopened is None:
            return  # records live in the store object: covered by test_versions_never_repeat_after_delete
        try:
            created = await reopened.put(A, {"n": "new"}, None)
        finally:
            await reopened.close()
        assert created > 2
        with pytest.raises(StateConflictError):
            await store.put(A, {"n": "stale"}, 2)

    async def test_a_corrupt_record_is_named_and_skipped_in_listings(
        self, store: StateStore, caplog: pytest.LogCaptureFixture
    ) -> None:
        for agent_id in (A, B, OTHER):
            await store.put(agent_id, {"id": str(agent_id)}, None)
        where = await self.corrupt(store, B)
        if where is None:
            return  # the store holds only what it wrote
        with pytest.raises(StateCorruptError) as info:
            await store.get(B)
        assert info.value.agent_id == B
        assert str(B) in str(info.value) and where in str(info.value), str(info.value)
        good = await store.get(A)
        assert good is not None and good.state == {"id": str(A)}
        with caplog.at_level(logging.WARNING):
            assert await store.keys() == [A, OTHER]
            assert await store.keys("counter") == [A]
        warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
        assert any(where in message for message in warnings), warnings
        # Writing over it is refused too (the version it holds cannot be compared): nothing is half-written.
        with pytest.raises(StateCorruptError):
            await store.put(B, {"n": 1}, 1)
        # Deleting it is how a user starts the agent over.
        await store.delete(B)
        assert await store.get(B) is None
        version = await store.put(B, {"fresh": True}, None)
        record = await store.get(B)
        assert record is not None and (record.state, record.version) == ({"fresh": True}, version)
        assert await store.keys() == [A, B, OTHER]

    async def test_a_stale_writer_in_another_process_loses_after_delete(self, store: StateStore) -> None:
        """Process one deletes and re-creates a record while process two holds the version it read before: two's
        write is refused (ABA across processes), and neither process ever sees a version twice."""
        setup = self.setup_in_process()
        if setup is None:
            return  # records live in one process
        one, two = await StateStoreProcess.start(setup), await StateStoreProcess.start(setup)
        try:
            assert await one.put(A, {"by": "one"}, None) == 1
            assert await one.put(A, {"by": "one", "n": 2}, 1) == 2
            assert await two.get(A) == ({"by": "one", "n": 2}, 2)  # two holds version 2
            await one.delete(A)
            created = await one.put(A, {"by": "one, again"}, None)
            assert created > 2
            with pytest.raises(StateConflictError) as info:
                await two.put(A, {"by": "two"}, 2)
            assert (info.value.expected, info.value.found) == (2, created)
            # The roles swapped: two deletes and re-creates, one's version is stale.
            await two.delete(A)
            again = await two.put(A, {"by": "two"}, None)
            assert again > created
            with pytest.raises(StateConflictError):
                await one.put(A, {"by": "one"}, created)
            assert await one.get(A) == ({"by": "two"}, again)
        finally:
            await one.close()
            await two.close()
        record = await store.get(A)
        assert record is not None and (record.state, record.version) == ({"by": "two"}, again)
