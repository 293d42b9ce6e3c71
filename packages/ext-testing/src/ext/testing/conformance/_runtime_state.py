"""Durable-state scenarios of the runtime conformance suite: a runtime given a `StateStore` loads an agent's
state on activation, saves it per the `SavePolicy` (never after a failed handler), deactivates idle agents and
brings them back with their state; `save_state`/`load_state` move every agent's state. `RuntimeConformance`
inherits these, so every runtime runs them."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

import pytest

from ext.core import (
    AgentId,
    AgentNotFoundError,
    AgentRuntime,
    InMemoryStateStore,
    MessageHandlerError,
    SavePolicy,
    StateConflictError,
)
from ext.testing.conformance._waits import within
from ext.testing.runtime_agents import EchoAgent, GetNotes, Journal, Note, Ping, Spoil

A = AgentId("echo", "a")
B = AgentId("echo", "b")


def _raised(exc: BaseException, error: type[BaseException], text: str) -> bool:
    """Whether `exc` is `error` with `text`, raised here or (as `MessageHandlerError`) in another process."""
    if isinstance(exc, error):
        return text in str(exc)
    return isinstance(exc, MessageHandlerError) and exc.error_type == error.__name__ and text in str(exc)


class RuntimeStateScenarios:
    """See the module docstring; `make_runtime(**options)` is `RuntimeConformance`'s."""

    async def make_runtime(self, **options: Any) -> AgentRuntime:
        raise NotImplementedError

    @contextlib.asynccontextmanager
    async def started(self, journal: Journal, **options: Any) -> AsyncIterator[AgentRuntime]:
        """A started runtime built with `options`, hosting `EchoAgent`s as type "echo"; stopped on exit."""
        runtime = await self.make_runtime(**options)
        await within(runtime.start())
        try:
            await within(runtime.register_agent_factory("echo", lambda aid, rt: EchoAgent(aid, rt, journal)))
            yield runtime
        finally:
            await within(runtime.stop(), 30)

    async def test_state_is_loaded_on_activation_and_saved_after_each_message(self, journal: Journal) -> None:
        store = InMemoryStateStore()
        await store.put(A, {"count": 5, "notes": ["before"]}, None)
        async with self.started(journal, state_store=store) as runtime:
            reply = await within(runtime.send_and_await_response(Ping(text="hi"), A))
            assert reply.count == 6
            record = await store.get(A)
            assert record is not None and (record.state, record.version) == ({"count": 6, "notes": ["before"]}, 2)
            await within(runtime.send_message(Note(text="n1"), A))
            notes = await within(runtime.send_and_await_response(GetNotes(), A))
            assert notes.notes == ["before", "n1"]
            record = await store.get(A)
            assert record is not None and record.state["notes"] == ["before", "n1"]

    async def test_a_failed_handler_saves_nothing_and_the_agent_comes_back_from_its_last_save(
        self, journal: Journal
    ) -> None:
        store = InMemoryStateStore()
        async with self.started(journal, state_store=store) as runtime:
            await within(runtime.send_and_await_response(Ping(text="one"), A))
            await within(runtime.send_message(Note(text="kept"), A))
            with pytest.raises(Exception) as info:
                await within(runtime.send_and_await_response(Spoil(text="half"), A))
            assert _raised(info.value, ValueError, "spoilt: half"), repr(info.value)
            record = await store.get(A)
            assert record is not None and record.state == {"count": 1, "notes": ["kept"]}
            # The agent object that saw the half-done change is gone; its successor starts from the save.
            notes = await within(runtime.send_and_await_response(GetNotes(), A))
            assert notes.notes == ["kept"]
            assert journal.created == [A, A] and journal.closed == [A]

    async def test_every_n_messages_policy(self, journal: Journal) -> None:
        store = InMemoryStateStore()
        async with self.started(journal, state_store=store, save_policy=SavePolicy.every(3)) as runtime:
            for text in ("1", "2"):
                await within(runtime.send_and_await_response(Ping(text=text), A))
            assert await store.get(A) is None
            await within(runtime.send_and_await_response(Ping(text="3"), A))
            record = await store.get(A)
            assert record is not None and (record.state["count"], record.version) == (3, 1)
            await within(runtime.send_and_await_response(Ping(text="4"), A))
            record = await store.get(A)
            assert record is not None and record.state["count"] == 3
        # Stopping saves what the policy had not saved yet.
        record = await store.get(A)
        assert record is not None and (record.state["count"], record.version) == (4, 2)

    async def test_on_deactivation_policy_saves_at_stop_only(self, journal: Journal) -> None:
        store = InMemoryStateStore()
        async with self.started(journal, state_store=store, save_policy=SavePolicy.on_deactivation()) as runtime:
            for key in ("a", "b"):
                await within(runtime.send_and_await_response(Ping(text="x"), AgentId("echo", key)))
            assert await store.keys() == []
        assert await store.keys() == [A, B]
        record = await store.get(B)
        assert record is not None and record.state == {"count": 1, "notes": []}

    async def test_idle_agents_are_deactivated_and_come_back_with_their_state(self, journal: Journal) -> None:
        store = InMemoryStateStore()
        keys = [f"idle{i}" for i in range(5)]
        async with self.started(journal, state_store=store, idle_timeout=0.05) as runtime:
            for key in keys:
                await within(runtime.send_and_await_response(Ping(text="first"), AgentId("echo", key)))
            await within(journal.wait_closed(len(keys)))
            assert journal.live == 0  # every object released
            assert await store.keys() == [AgentId("echo", k) for k in keys]
            for key in keys:
                reply = await within(runtime.send_and_await_response(Ping(text="again"), AgentId("echo", key)))
                assert reply.count == 2  # the state survived the deactivation
            await within(journal.wait_closed(2 * len(keys)))
            assert journal.live == 0
            assert len(journal.created) == 2 * len(keys)

    async def test_idle_timeout_without_a_store_keeps_state_in_memory(self, journal: Journal) -> None:
        async with self.started(journal, idle_timeout=0.05) as runtime:
            await within(runtime.send_and_await_response(Ping(text="first"), A))
            await within(journal.wait_closed(1))
            reply = await within(runtime.send_and_await_response(Ping(text="again"), A))
            assert (reply.count, journal.live) == (2, 1)

    async def test_a_stale_writer_gets_a_conflict_and_rereads(self, journal: Journal) -> None:
        store = InMemoryStateStore()
        async with self.started(journal, state_store=store) as runtime:
            await within(runtime.send_and_await_response(Ping(text="one"), A))
            # Another writer (another worker, after a failover) saves version 2 behind this agent's back.
            await store.put(A, {"count": 40, "notes": []}, 1)
            with pytest.raises(Exception) as info:
                await within(runtime.send_and_await_response(Ping(text="two"), A))
            assert _raised(info.value, StateConflictError, "expected version 1, found version 2"), repr(info.value)
            record = await store.get(A)
            assert record is not None and record.state["count"] == 40
            reply = await within(runtime.send_and_await_response(Ping(text="three"), A))
            assert reply.count == 41

    async def test_runtime_save_state_and_load_state(self, journal: Journal) -> None:
        async with self.started(journal) as runtime:
            await within(runtime.send_and_await_response(Ping(text="x"), A))
            await within(runtime.send_message(Note(text="b's"), B))
            await within(runtime.send_and_await_response(GetNotes(), B))
            saved = await within(runtime.save_state())
        assert saved == {"echo/a": {"count": 1, "notes": []}, "echo/b": {"count": 0, "notes": ["b's"]}}
        store = InMemoryStateStore()
        async with self.started(Journal(), state_store=store) as runtime:
            with pytest.raises(ValueError, match="not an agent id"):
                await within(runtime.load_state({"no-slash": {}}))
            with pytest.raises(AgentNotFoundError, match="nobody"):
                await within(runtime.load_state({"nobody/x": {}}))
            assert await store.keys() == []
            await within(runtime.load_state(saved))
            reply = await within(runtime.send_and_await_response(Ping(text="y"), A))
            assert reply.count == 2
            record = await store.get(B)
            assert record is not None and record.state == {"count": 0, "notes": ["b's"]}

    async def test_bad_state_options_fail_at_construction(self) -> None:
        with pytest.raises(TypeError, match="state_store"):
            await self.make_runtime(state_store={"not": "a store"})
        with pytest.raises(TypeError, match="save_policy"):
            await self.make_runtime(save_policy="each")
        with pytest.raises(ValueError, match="idle_timeout"):
            await self.make_runtime(idle_timeout=-1)
