from __future__ import annotations

import asyncio
import logging
from typing import Any, ClassVar

import pytest
from pydantic import SecretStr

from ext.core import (
    BaseVectorStore,
    ConfigurationError,
    VectorRecord,
    VectorStoreOptions,
    VectorStoreUnavailableError,
    load_component,
)
from ext.testing.conformance import VectorStoreConformance
from ext.testing.postgres import PASSWORD, PostgresServer
from ext.testing.redis import free_port
from ext.vectors.pgvector import PgVectorStore


class TestPgVector(VectorStoreConformance):
    secrets: ClassVar[tuple[str, ...]] = (PASSWORD,)

    @pytest.fixture(autouse=True)
    def _server(self, postgres: PostgresServer) -> None:
        self.server = postgres

    async def make_store(self, collection_name: str, vector_size: int) -> BaseVectorStore[Any]:
        return PgVectorStore(self.server.url, collection_name=collection_name, vector_size=vector_size)

    async def reopen_store(self, store: BaseVectorStore[Any], vector_size: int) -> BaseVectorStore[Any] | None:
        return PgVectorStore(self.server.url, collection_name=store.collection_name, vector_size=vector_size)

    def make_unreachable_store(self) -> BaseVectorStore[Any]:
        url = f"postgresql://postgres:{PASSWORD}@127.0.0.1:{free_port()}/postgres"
        return PgVectorStore(url, collection_name="c", vector_size=4, connect_timeout=5)


async def test_failed_batch_in_the_database_writes_nothing(postgres: PostgresServer) -> None:
    # jsonb refuses "\u0000" (server side, on the last row): the whole batch must roll back.
    async with PgVectorStore(postgres.url, collection_name="rollback", vector_size=2) as store:
        await store.create_collection()
        try:
            good = [VectorRecord(id=f"g{i}", vector=[1.0, float(i)]) for i in range(50)]
            bad = VectorRecord(id="bad", vector=[1.0, 0.0], metadata={"k": "a\x00b"})
            with pytest.raises(Exception, match="0000"):
                await store.upsert([*good, bad])
            assert await store.count() == 0
            await store.upsert(good)
            assert await store.count() == 50
        finally:
            await store.delete_collection()


async def test_password_redacted_everywhere(postgres: PostgresServer, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    store = PgVectorStore(postgres.url, collection_name="secret", vector_size=2)
    try:
        await store.create_collection()
        dump = store.dump_component().model_dump_json()
        assert PASSWORD not in repr(store) + dump + caplog.text
        assert "postgres@127.0.0.1" in dump
    finally:
        await store.delete_collection()
        await store.close()


async def test_wrong_password_is_a_clear_error_without_it(postgres: PostgresServer) -> None:
    url = postgres.url.replace(PASSWORD, "wrong-" + PASSWORD)
    async with PgVectorStore(url, collection_name="c", vector_size=2) as store:
        with pytest.raises(Exception, match="password authentication failed") as caught:
            await store.count()
        assert PASSWORD not in str(caught.value)


async def test_password_from_env_round_trips(postgres: PostgresServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EXT_TEST_PG_PASSWORD", PASSWORD)
    store = PgVectorStore(
        postgres.url_without_password, collection_name="envpw", vector_size=2, password_env="EXT_TEST_PG_PASSWORD"
    )
    dump = store.dump_component()
    assert dump.config["password_env"] == "EXT_TEST_PG_PASSWORD"
    assert PASSWORD not in dump.model_dump_json()
    loaded = load_component(dump, PgVectorStore)
    try:
        await loaded.create_collection()
        assert await loaded.count() == 0
    finally:
        await loaded.delete_collection()
        await loaded.close()


async def test_from_options_uses_api_key_as_password(postgres: PostgresServer) -> None:
    options = VectorStoreOptions(
        endpoint=postgres.url_without_password, api_key=SecretStr(PASSWORD), collection_name="opts", vector_size=2
    )
    async with PgVectorStore.from_options(options) as store:
        await store.create_collection()
        try:
            await store.upsert([VectorRecord(id="a", vector=[0.0, 1.0])])
            assert [m.id for m in await store.query([0.0, 2.0])] == ["a"]
        finally:
            await store.delete_collection()


def test_bad_urls_refused_before_connecting() -> None:
    with pytest.raises(ConfigurationError, match="postgresql://"):
        PgVectorStore("mysql://u:p@h/db", collection_name="c", vector_size=2)
    with pytest.raises(ConfigurationError, match="set it once"):
        PgVectorStore("postgresql://u:p@h/db", collection_name="c", vector_size=2, password="q")


async def test_hnsw_index_exists(postgres: PostgresServer) -> None:
    import psycopg

    async with PgVectorStore(postgres.url, collection_name="idx", vector_size=3) as store:
        await store.create_collection()
        try:
            async with await psycopg.AsyncConnection.connect(postgres.url) as conn:
                cur = await conn.execute("SELECT indexdef FROM pg_indexes WHERE indexname LIKE 'ext_vec_%%_hnsw'")
                definitions = [row[0] for row in await cur.fetchall()]
            assert any("hnsw" in d and "vector_cosine_ops" in d for d in definitions)
        finally:
            await store.delete_collection()


async def test_a_silent_server_fails_within_connect_timeout() -> None:
    # A listener that accepts and never answers: the connection attempt must give up, not hang.
    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read()

    server = await asyncio.start_server(silent, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        url = f"postgresql://postgres:{PASSWORD}@127.0.0.1:{port}/postgres"
        async with PgVectorStore(url, collection_name="c", vector_size=2, connect_timeout=1) as store:
            with pytest.raises(VectorStoreUnavailableError) as caught:
                await asyncio.wait_for(store.count(), 20)
            assert PASSWORD not in str(caught.value)
    finally:
        server.close()


async def test_a_call_blocked_by_another_transaction_times_out(postgres: PostgresServer) -> None:
    import psycopg

    async with PgVectorStore(postgres.url, collection_name="blocked", vector_size=2, timeout=1) as store:
        await store.create_collection()
        try:
            async with await psycopg.AsyncConnection.connect(postgres.url) as other:
                await other.execute("LOCK TABLE ext_vector_collections IN ACCESS EXCLUSIVE MODE")
                with pytest.raises(TimeoutError, match="timeout=1"):
                    await asyncio.wait_for(store.count(), 20)
                await other.rollback()
            assert await store.count() == 0  # a new connection after the timeout
        finally:
            await store.delete_collection()
