"""The in-memory and file-backed state stores pass the `StateStoreConformance` suite; the file store's writes
are atomic and its compare-and-set holds across processes."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

import pytest

from ext.core import AgentId, InMemoryStateStore, StateConflictError, StateStore
from ext.runtime.local import FileStateStore
from ext.testing.conformance import StateStoreConformance

A = AgentId("counter", "a")


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
