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
    VectorStoreConflictError,
    VectorStoreError,
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
    # A CHECK constraint refuses the batch's last row (rows are written in id order) on the server: the whole batch
    # must roll back, and the refusal is a VectorStoreError naming the server, not a raw driver error.
    import psycopg

    async with PgVectorStore(postgres.url, collection_name="rollback", vector_size=2) as store:
        await store.create_collection()
        try:
            async with await psycopg.AsyncConnection.connect(postgres.url, autocommit=True) as admin:
                cur = await admin.execute("SELECT table_name FROM ext_vector_collections WHERE name = 'rollback'")
                row = await cur.fetchone()
                assert row is not None
                await admin.execute(f"ALTER TABLE \"{row[0]}\" ADD CONSTRAINT no_bad CHECK (id <> 'zz-bad')")
            good = [VectorRecord(id=f"g{i}", vector=[1.0, float(i)]) for i in range(50)]
            bad = VectorRecord(id="zz-bad", vector=[1.0, 0.0])
            with pytest.raises(VectorStoreError, match=r"refused a call on collection 'rollback'.*no_bad") as caught:
                await store.upsert([bad, *good])
            assert not isinstance(caught.value, VectorStoreUnavailableError)
            assert PASSWORD not in str(caught.value)
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
    # Options libpq does not know (here a typo of sslmode) are refused naming the option, not at the first call.
    for url, option in (
        ("postgresql://u@127.0.0.1:1/db?sslmod=require", "'sslmod'"),
        ("postgresql://u@127.0.0.1:1/db?sslmode=require&foo=secret-looking", "'foo'"),
    ):
        with pytest.raises(ConfigurationError, match=f"unknown connection option {option}") as caught:
            PgVectorStore(url, collection_name="c", vector_size=2)
        assert "secret-looking" not in str(caught.value)
    with pytest.raises(ConfigurationError, match='invalid URI query parameter: "ssl"'):
        PgVectorStore("postgresql://u@h/db?ssl=maybe", collection_name="c", vector_size=2)
    with pytest.raises(ConfigurationError, match="sslpassword twice"):
        PgVectorStore("postgresql://u@h/db?sslpassword=a&sslpassword=b", collection_name="c", vector_size=2)
    with pytest.raises(ConfigurationError, match=r"secret parameters other than the password.*'sslmode'"):
        PgVectorStore("postgresql://u@h/db", collection_name="c", vector_size=2, secrets={"sslmode": "require"})
    with pytest.raises(ConfigurationError, match="sslpassword is both in url and in secrets"):
        PgVectorStore(
            "postgresql://u@h/db?sslpassword=a", collection_name="c", vector_size=2, secrets={"sslpassword": "b"}
        )


# libpq's secret parameters (PostgreSQL 18 "Parameter Key Words"; password fields in PQconninfoOptions).
LIBPQ_SECRETS = {
    "sslpassword": "ssl-key-secret-41d7",
    "oauth_client_secret": "oauth-secret-93bb",
    "scram_client_key": "c2NyYW0tY2xpZW50LWtleS0xNzA",
    "scram_server_key": "c2NyYW0tc2VydmVyLWtleS0zMzg",
}


async def test_libpq_secrets_are_split_off_the_url(postgres: PostgresServer) -> None:
    # Every secret in the query (the password too, as ?password=) is kept out of repr, dumps and errors, and still
    # reaches libpq (it ignores the SSL key password and the OAuth secret on this plain, password-only connection).
    in_use = {"password": PASSWORD, "sslpassword": LIBPQ_SECRETS["sslpassword"]}
    in_use["oauth_client_secret"] = LIBPQ_SECRETS["oauth_client_secret"]
    query = "&".join(f"{name}={value}" for name, value in in_use.items())
    url = f"{postgres.url_without_password}?application_name=ext-test&{query}"
    store = PgVectorStore(url, collection_name="secrets", vector_size=2)
    try:
        await store.create_collection()
        await store.upsert([VectorRecord(id="a", vector=[1.0, 0.0])])
        assert await store.count() == 1
        dump = store.dump_component()
        text = repr(store) + dump.model_dump_json() + repr(dump)
        for secret in in_use.values():
            assert secret not in text
        assert dump.config["url"] == f"{postgres.url_without_password}?application_name=ext-test"
        assert "secrets" not in dump.config
    finally:
        await store.delete_collection()
        await store.close()
    # A SCRAM client key in the URL reaches libpq (which refuses this one) and stays out of the error.
    key = LIBPQ_SECRETS["scram_client_key"]
    async with PgVectorStore(f"{url}&scram_client_key={key}", collection_name="c", vector_size=2) as keyed:
        with pytest.raises(VectorStoreUnavailableError, match="invalid SCRAM client key") as caught:
            await keyed.count()
        assert key not in str(caught.value)
    # The same URL pointing at a closed port: the error names the URL without any secret.
    unreachable = url.replace(f":{postgres.port}/", f":{free_port()}/")
    async with PgVectorStore(unreachable, collection_name="c", vector_size=2, connect_timeout=5) as closed:
        with pytest.raises(VectorStoreUnavailableError) as caught:
            await closed.count()
        message = str(caught.value) + repr(caught.value.__cause__) + repr(caught.value.__context__)
        assert "application_name=ext-test" in message
        for secret in in_use.values():
            assert secret not in message


async def test_secrets_given_apart_from_the_url(postgres: PostgresServer) -> None:
    given = {name: LIBPQ_SECRETS[name] for name in ("sslpassword", "oauth_client_secret")}
    store = PgVectorStore(postgres.url, collection_name="c", vector_size=2, secrets=given)
    try:
        assert await store.collection_exists() is False
        text = repr(store) + store.dump_component().model_dump_json()
        for secret in given.values():
            assert secret not in text
    finally:
        await store.close()
    key = {"scram_client_key": LIBPQ_SECRETS["scram_client_key"]}
    async with PgVectorStore(postgres.url, collection_name="c", vector_size=2, secrets=key) as keyed:
        with pytest.raises(VectorStoreUnavailableError, match="invalid SCRAM client key") as caught:
            await keyed.count()
        assert key["scram_client_key"] not in str(caught.value)


async def test_a_statement_the_server_refuses_is_not_unreachable(postgres: PostgresServer) -> None:
    # lock_timeout makes the server refuse a statement that waits for a lock: a conflict, on a working connection.
    import psycopg

    url = postgres.url + "?options=-c%20lock_timeout%3D200"
    async with PgVectorStore(url, collection_name="refused", vector_size=2) as store:
        await store.create_collection()
        try:
            async with await psycopg.AsyncConnection.connect(postgres.url) as other:
                await other.execute("LOCK TABLE ext_vector_collections IN ACCESS EXCLUSIVE MODE")
                with pytest.raises(VectorStoreConflictError, match="lock_timeout") as caught:
                    await store.count()
                assert "cannot be reached" not in str(caught.value)
                await other.rollback()
            assert await store.count() == 0
        finally:
            await store.delete_collection()


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
