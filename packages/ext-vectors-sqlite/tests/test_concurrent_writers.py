"""Two writers on one SQLite file, in two processes: a writer waits for the other's lock up to `busy_timeout`, and
a lock held longer is a `VectorStoreConflictError` (never a raw `apsw.BusyError`).

No sleeps: the holder process takes the write lock and says so on stdout, then waits for a line on stdin; the
waiting writer's process opens files through an apsw VFS that passes everything to SQLite's own and prints
"waiting" when SQLite is refused a lock, so the test releases the holder only once the writer is known to wait.
"""

from __future__ import annotations

import asyncio
import sys
import textwrap
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio

from ext.core import VectorRecord, VectorStoreConflictError
from ext.vectors.sqlite import SqliteVectorStore

# Another writer: takes the write lock (BEGIN IMMEDIATE and a write), says "holding", commits on a line on stdin.
HOLDER = textwrap.dedent(
    """
    import sys
    import apsw

    conn = apsw.Connection(sys.argv[1])
    # Its COMMIT waits for readers' momentary shared locks (the waiting writer takes one on each attempt).
    conn.set_busy_timeout(60_000)
    conn.execute("BEGIN IMMEDIATE")
    conn.execute("CREATE TABLE IF NOT EXISTS other_app(x)")
    conn.execute("INSERT INTO other_app VALUES (1)")
    print("holding", flush=True)
    sys.stdin.readline()
    conn.execute("COMMIT")
    print("released", flush=True)
    """
)

# A store writing one record; its SQLite files go through a VFS that reports the first lock SQLite is refused.
WAITER = textwrap.dedent(
    """
    import asyncio
    import sys

    import apsw

    from ext.core import VectorRecord
    from ext.vectors.sqlite import SqliteVectorStore


    class ReportingFile(apsw.VFSFile):
        reported = False

        def xLock(self, level):
            try:
                super().xLock(level)
            except apsw.BusyError:
                if not ReportingFile.reported:
                    ReportingFile.reported = True
                    print("waiting", flush=True)
                raise


    class ReportingVFS(apsw.VFS):
        def __init__(self):
            super().__init__("reporting", base="unix", makedefault=True)

        def xOpen(self, name, flags):
            return ReportingFile("unix", name, flags)


    vfs = ReportingVFS()


    async def main():
        store = SqliteVectorStore(sys.argv[1], collection_name="docs", vector_size=2, busy_timeout=120)
        async with store:
            await store.upsert([VectorRecord(id="from-waiter", vector=[0.0, 1.0], text="waited")])
            print("written", await store.count(), flush=True)


    asyncio.run(main())
    """
)

# A store writing `rounds` batches once told to start: the two-writer case as `ext memory add` meets it.
BATCHES = textwrap.dedent(
    """
    import asyncio
    import sys

    from ext.core import VectorRecord
    from ext.vectors.sqlite import SqliteVectorStore


    async def main(path, name, rounds):
        async with SqliteVectorStore(path, collection_name="docs", vector_size=2) as store:
            await store.create_collection()
            print("ready", flush=True)
            sys.stdin.readline()
            for r in range(rounds):
                batch = [VectorRecord(id=f"{name}-{r}-{i}", vector=[1.0, float(i)]) for i in range(20)]
                await store.upsert(batch)
                await store.delete([f"{name}-{r}-0"])
            print("done", flush=True)


    asyncio.run(main(sys.argv[1], sys.argv[2], int(sys.argv[3])))
    """
)

GUARD = 120  # seconds: a generous bound on any one step, so a broken build fails rather than hangs


async def _start(script: str, *args: str) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        script,
        *args,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )


async def _line(process: asyncio.subprocess.Process) -> str:
    assert process.stdout is not None
    line = (await asyncio.wait_for(process.stdout.readline(), GUARD)).decode().strip()
    if not line:
        assert process.stderr is not None
        error = (await asyncio.wait_for(process.stderr.read(), GUARD)).decode()
        raise AssertionError(f"the child process ended without a line: {error[-3000:]}")
    return line


async def _tell(process: asyncio.subprocess.Process, line: str = "go") -> None:
    assert process.stdin is not None
    process.stdin.write(f"{line}\n".encode())
    await process.stdin.drain()


async def _finish(process: asyncio.subprocess.Process) -> tuple[int, str]:
    _, err = await asyncio.wait_for(process.communicate(), GUARD)
    return process.returncode or 0, err.decode()


@pytest_asyncio.fixture
async def path(tmp_path: Path) -> AsyncIterator[str]:
    """A file with the collection `docs` (vector size 2) holding one record."""
    file = str(tmp_path / "shared.db")
    async with SqliteVectorStore(file, collection_name="docs", vector_size=2) as store:
        await store.create_collection()
        await store.upsert([VectorRecord(id="first", vector=[1.0, 0.0])])
    yield file


@pytest_asyncio.fixture
async def holder(path: str) -> AsyncIterator[asyncio.subprocess.Process]:
    """A process holding the file's write lock until told to release it."""
    process = await _start(HOLDER, path)
    try:
        assert await _line(process) == "holding"
        yield process
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()


async def test_a_writer_waits_for_another_process_lock(path: str, holder: asyncio.subprocess.Process) -> None:
    waiter = await _start(WAITER, path)
    try:
        # The waiter's store was refused the write lock: it must now wait, not fail.
        assert await _line(waiter) == "waiting"
        await _tell(holder, "release")
        assert await _line(holder) == "released"
        assert await _line(waiter) == "written 2"
        code, err = await _finish(waiter)
        assert code == 0, err
    finally:
        if waiter.returncode is None:
            waiter.kill()
            await waiter.wait()
    async with SqliteVectorStore(path, collection_name="docs", vector_size=2) as store:
        assert [r.text for r in await store.get(["from-waiter"])] == ["waited"]


async def test_a_lock_held_past_busy_timeout_is_a_conflict_error(path: str, holder: asyncio.subprocess.Process) -> None:
    async with SqliteVectorStore(path, collection_name="docs", vector_size=2, busy_timeout=0.2) as store:
        with pytest.raises(VectorStoreConflictError, match=r"busy_timeout=0\.2 s; this call changed nothing") as caught:
            await store.upsert([VectorRecord(id="late", vector=[0.0, 1.0])])
        assert path in str(caught.value)
        with pytest.raises(VectorStoreConflictError):
            await store.delete_where({})
        await _tell(holder, "release")
        assert await _line(holder) == "released"
        # Nothing of the refused calls was written, and the same store writes once the lock is free.
        assert [r.id for r in await store.get(["first", "late"])] == ["first"]
        await store.upsert([VectorRecord(id="late", vector=[0.0, 1.0])])
        assert await store.count() == 2


async def test_two_store_processes_write_the_same_file(path: str) -> None:
    rounds = 30
    writers = [await _start(BATCHES, path, name, str(rounds)) for name in ("one", "two")]
    try:
        for writer in writers:
            assert await _line(writer) == "ready"
        for writer in writers:
            await _tell(writer)
        for writer in writers:
            assert await _line(writer) == "done"
            code, err = await _finish(writer)
            assert code == 0, err
    finally:
        for writer in writers:
            if writer.returncode is None:
                writer.kill()
                await writer.wait()
    async with SqliteVectorStore(path, collection_name="docs", vector_size=2) as store:
        # Each round wrote 20 records and deleted one of them, in each process; plus the fixture's record.
        assert await store.count() == 2 * rounds * 19 + 1
