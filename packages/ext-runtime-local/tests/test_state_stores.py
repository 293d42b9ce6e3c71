"""The in-memory and file-backed state stores pass the `StateStoreConformance` suite; the file store's writes
are atomic and its compare-and-set holds across processes; one unreadable record does not fail the runtime's
`save_state()` for the other agents."""

from __future__ import annotations

import asyncio
import logging
import subprocess
import sys
from pathlib import Path

import pytest

from ext.core import (
    AgentId,
    InMemoryStateStore,
    StateConflictError,
    StateCorruptError,
    StateStore,
    StoredState,
    UndeliverableError,
)
from ext.runtime.local import FileStateStore, LocalAgentRuntime
from ext.testing.conformance import StateStoreConformance
from ext.testing.runtime_agents import EchoAgent, Journal, Ping

A = AgentId("counter", "a")


def record_file(directory: Path, agent_id: AgentId) -> Path:
    """The file holding `agent_id`'s record (found by its content, not by the store's naming)."""
    (path,) = [p for p in directory.glob("*.state.json") if f'"{agent_id}"'.encode() in p.read_bytes()]
    return path


class TestInMemoryStateStore(StateStoreConformance):
    async def make_store(self) -> StateStore:
        return InMemoryStateStore()


class TestFileStateStore(StateStoreConformance):
    @pytest.fixture(autouse=True)
    def _directory(self, tmp_path: Path) -> None:
        self.directory = tmp_path / "states"

    async def make_store(self) -> StateStore:
        return FileStateStore(self.directory)

    async def reopen(self, store: StateStore) -> StateStore | None:
        return FileStateStore(self.directory)

    async def corrupt(self, store: StateStore, agent_id: AgentId) -> str | None:
        assert isinstance(store, FileStateStore)
        path = record_file(self.directory, agent_id)
        path.write_bytes(b'{"agent":"counter/b/with slash","version":1,"sta')  # cut short, as by a full disk
        return str(path)

    def setup_in_process(self) -> str | None:
        return f"from ext.runtime.local import FileStateStore\nstore = FileStateStore({str(self.directory)!r})"


async def test_a_leftover_temp_file_is_not_a_record(tmp_path: Path) -> None:
    # What a crash in the middle of a write leaves behind: a temp file, never a half-written record.
    store = FileStateStore(tmp_path)
    await store.put(A, {"n": 1}, None)
    (tmp_path / ".tmp-crashed").write_bytes(b'{"agent":"counter/a","version":2,"sta')
    record = await store.get(A)
    assert record is not None and (record.state, record.version) == ({"n": 1}, 1)
    assert await store.keys() == [A]


_WRITER = """
import asyncio, sys
from ext.core import AgentId, StateConflictError
from ext.runtime.local import FileStateStore

async def main() -> None:
    store = FileStateStore(sys.argv[1])
    try:
        await store.put(AgentId("counter", "a"), {"writer": sys.argv[2]}, 1)
        print("won")
    except StateConflictError:
        print("lost")

asyncio.run(main())
"""


async def test_writers_in_several_processes_one_wins(tmp_path: Path) -> None:
    store = FileStateStore(tmp_path)
    await store.put(A, {"writer": "none"}, None)
    processes = [
        await asyncio.create_subprocess_exec(
            sys.executable, "-c", _WRITER, str(tmp_path), f"p{i}", stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        for i in range(4)
    ]
    outputs = [await asyncio.wait_for(p.communicate(), 60) for p in processes]
    results = sorted(out.decode().strip() for out, _ in outputs)
    assert results == ["lost", "lost", "lost", "won"], [err.decode() for _, err in outputs]
    record = await store.get(A)
    assert record is not None and record.version == 2
    with pytest.raises(StateConflictError):
        await store.put(A, {}, 1)


def test_bad_directory_is_refused() -> None:
    with pytest.raises(TypeError, match="directory must be a path"):
        FileStateStore(42)  # type: ignore[arg-type]


async def test_one_unreadable_record_does_not_fail_save_state_for_the_others(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store = FileStateStore(tmp_path)
    journal = Journal()

    async def runtime() -> LocalAgentRuntime:
        rt = LocalAgentRuntime(state_store=store)
        await rt.register_agent_factory("echo", lambda aid, r: EchoAgent(aid, r, journal))
        return rt

    first = await runtime()
    for key in ("a", "b", "c"):
        await first.send_and_await_response(Ping(text=key), AgentId("echo", key))
    await first.stop()
    bad = AgentId("echo", "b")
    path = record_file(tmp_path, bad)
    path.write_bytes(b"\x00garbage")

    second = await runtime()
    try:
        with caplog.at_level(logging.WARNING):
            saved = await second.save_state()
        assert saved == {"echo/a": {"count": 1, "notes": []}, "echo/c": {"count": 1, "notes": []}}
        assert str(path) in caplog.text
        # Activating the agent whose record is bad fails naming it and the file; the others are served.
        with pytest.raises(UndeliverableError) as info:
            await second.send_and_await_response(Ping(text="again"), bad)
        assert "echo/b" in str(info.value) and str(path) in str(info.value)
        assert isinstance(info.value.__cause__, StateCorruptError)
        assert (await second.send_and_await_response(Ping(text="again"), AgentId("echo", "a"))).count == 2
    finally:
        await second.stop()


async def test_an_unreadable_deleted_version_file_is_named(tmp_path: Path) -> None:
    store = FileStateStore(tmp_path)
    await store.put(A, {"n": 1}, None)
    await store.delete(A)
    assert (tmp_path / ".deleted-version").read_text() == "1\n"
    (tmp_path / ".deleted-version").write_text("lost")
    with pytest.raises(ValueError, match=r"\.deleted-version does not hold a version number"):
        await store.put(A, {"n": 1}, None)


class ListsWhatItCannotRead(InMemoryStateStore):
    """A store whose `keys()` checks less than its `get()` (as a store of another library may): it lists a record
    that `get()` then finds unreadable."""

    async def get(self, agent_id: AgentId) -> StoredState | None:
        if agent_id.key == "bad":
            raise StateCorruptError(agent_id, "record #7 of the test store", "its state is not a JSON object")
        return await super().get(agent_id)


async def test_save_state_leaves_out_a_record_the_store_lists_but_cannot_read(caplog: pytest.LogCaptureFixture) -> None:
    store = ListsWhatItCannotRead()
    for key in ("a", "bad", "c"):
        await store.put(AgentId("echo", key), {"count": 1, "notes": []}, None)
    runtime = LocalAgentRuntime(state_store=store)
    await runtime.register_agent_factory("echo", lambda aid, r: EchoAgent(aid, r, Journal()))
    try:
        with caplog.at_level(logging.WARNING):
            saved = await runtime.save_state()
    finally:
        await runtime.stop()
    assert list(saved) == ["echo/a", "echo/c"]
    assert "echo/bad" in caplog.text and "record #7 of the test store" in caplog.text
