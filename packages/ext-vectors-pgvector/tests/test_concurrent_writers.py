"""Writers that meet on the same rows: two processes upserting one batch in opposite orders never deadlock, and a
deadlock the server does detect is run again (or, past `conflict_retries`, is a `VectorStoreConflictError`)."""

from __future__ import annotations

import asyncio
import logging
import sys
import textwrap
from typing import Any

import psycopg
import pytest

from ext.core import VectorRecord, VectorStoreConflictError, VectorStoreUnavailableError
from ext.testing.postgres import PostgresServer
from ext.vectors.pgvector import PgVectorStore

GUARD = 120  # seconds: a generous bound on any one step, so a broken build fails rather than hangs

# One writer: each line on stdin starts a round, in which it upserts the same 300 ids (in its own order) with
# values naming the writer and the round.
WRITER = textwrap.dedent(
    """
    import asyncio
    import sys

    from ext.core import VectorRecord
    from ext.vectors.pgvector import PgVectorStore


    async def main(url, name, order):
        ids = [f"id{i:03d}" for i in range(300)]
        if order == "descending":
            ids.reverse()
        weight = 1.0 if name == "one" else 2.0
        async with PgVectorStore(url, collection_name="race", vector_size=3) as store:
            print("ready", flush=True)
            for round_ in range(int(sys.argv[4])):
                sys.stdin.readline()
                batch = [
                    VectorRecord(
                        id=i, vector=[weight, round_ + 1.0, 1.0], text=f"{name}:{round_}",
                        metadata={"writer": name, "round": round_},
                    )
                    for i in ids
                ]
                await store.upsert(batch)
                print(f"done {round_}", flush=True)


    asyncio.run(main(sys.argv[1], sys.argv[2], sys.argv[3]))
    """
)


async def _line(process: asyncio.subprocess.Process) -> str:
    assert process.stdout is not None
    line = (await asyncio.wait_for(process.stdout.readline(), GUARD)).decode().strip()
    if not line:
        assert process.stderr is not None
        error = (await asyncio.wait_for(process.stderr.read(), GUARD)).decode()
        raise AssertionError(f"the writer ended without a line: {error[-3000:]}")
    return line


async def test_opposite_orders_in_two_processes_never_deadlock(postgres: PostgresServer) -> None:
    rounds = 10
    async with PgVectorStore(postgres.url, collection_name="race", vector_size=3) as store:
        await store.create_collection()
        try:
            writers = [
                await asyncio.create_subprocess_exec(
                    sys.executable, "-c", WRITER, postgres.url, name, order, str(rounds),
                    stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
                )
                for name, order in (("one", "ascending"), ("two", "descending"))
            ]  # fmt: skip
            try:
                for writer in writers:
                    assert await _line(writer) == "ready"
                for round_ in range(rounds):
                    # Both writers start each round together, so their batches overlap.
                    for writer in writers:
                        assert writer.stdin is not None
                        writer.stdin.write(b"go\n")
                        await writer.stdin.drain()
                    for writer in writers:
                        assert await _line(writer) == f"done {round_}"
                for writer in writers:
                    assert writer.stdin is not None
                    writer.stdin.close()
                    assert await asyncio.wait_for(writer.wait(), GUARD) == 0
            finally:
                for writer in writers:
                    if writer.returncode is None:
                        writer.kill()
                        await writer.wait()
            # Each batch is one transaction over rows locked in one order: the last round's later batch holds
            # every row, each record agreeing with itself.
            records = await store.get([f"id{i:03d}" for i in range(300)])
            assert len(records) == 300 and await store.count() == 300
            writers_seen = set()
            for record in records:
                name, last = record.metadata["writer"], record.metadata["round"]
                assert last == rounds - 1
                assert record.text == f"{name}:{last}"
                assert record.vector == [1.0 if name == "one" else 2.0, float(rounds), 1.0]
                writers_seen.add(name)
            assert len(writers_seen) == 1
        finally:
            await store.delete_collection()


async def _table(conn: psycopg.AsyncConnection[Any], collection: str) -> str:
    cur = await conn.execute("SELECT table_name FROM ext_vector_collections WHERE name = %s", (collection,))
    row = await cur.fetchone()
    assert row is not None
    return str(row[0])


async def _until_waiting_for_a_lock(conn: psycopg.AsyncConnection[Any], application_name: str) -> None:
    # PostgreSQL tells no one when a session starts waiting for a lock: look at pg_stat_activity until it does.
    for _ in range(GUARD * 100):
        cur = await conn.execute(
            "SELECT wait_event_type FROM pg_stat_activity WHERE application_name = %s", (application_name,)
        )
        row = await cur.fetchone()
        if row is not None and row[0] == "Lock":
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"{application_name} never waited for a lock")


@pytest.mark.parametrize("conflict_retries", [4, 0])
async def test_a_detected_deadlock_is_run_again_or_reported(
    postgres: PostgresServer, conflict_retries: int, caplog: pytest.LogCaptureFixture
) -> None:
    # The store locks a, then waits for b, which another transaction holds; that transaction then asks for a. Only
    # the store's server process looks for deadlocks within the test (the other waits 100 s before looking), so
    # the server aborts the store's transaction.
    caplog.set_level(logging.INFO, logger="ext.vectors.pgvector")
    name = f"victim-{conflict_retries}"
    url = f"{postgres.url}?application_name={name}"
    async with PgVectorStore(
        url, collection_name="deadlock", vector_size=2, conflict_retries=conflict_retries
    ) as store:
        await store.create_collection()
        try:
            await store.upsert([VectorRecord(id=i, vector=[1.0, 0.0], text="before") for i in ("a", "b")])
            async with (
                await psycopg.AsyncConnection.connect(postgres.url, autocommit=True) as watcher,
                await psycopg.AsyncConnection.connect(postgres.url) as other,
            ):
                table = await _table(watcher, "deadlock")
                await other.execute("SET deadlock_timeout = '100s'")
                await other.execute(f"UPDATE \"{table}\" SET text = 'other' WHERE id = 'b'")
                upsert = asyncio.create_task(
                    store.upsert([VectorRecord(id=i, vector=[0.0, 1.0], text="store") for i in ("a", "b")])
                )
                await _until_waiting_for_a_lock(watcher, name)
                # Returns once the server has aborted the store's transaction (and released a).
                await asyncio.wait_for(other.execute(f"UPDATE \"{table}\" SET text = 'other' WHERE id = 'a'"), GUARD)
                await other.commit()
                if conflict_retries:
                    await asyncio.wait_for(upsert, GUARD)
                    expected = "store"
                    assert "40P01" in caplog.text and "running it again (1 of 4)" in caplog.text
                else:
                    with pytest.raises(VectorStoreConflictError, match="40P01 deadlock detected") as caught:
                        await asyncio.wait_for(upsert, GUARD)
                    assert not isinstance(caught.value, VectorStoreUnavailableError)
                    assert "cannot be reached" not in str(caught.value)
                    expected = "other"
            assert [r.text for r in await store.get(["a", "b"])] == [expected, expected]
        finally:
            await store.delete_collection()
