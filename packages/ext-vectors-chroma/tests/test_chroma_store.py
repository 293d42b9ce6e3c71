"""ChromaVectorStore's own cases, against the real Chroma server (`chroma run`) unless a case says otherwise."""

from __future__ import annotations

import asyncio
import logging

import httpx
import pytest
from pydantic import SecretStr

from ext.core import (
    ConfigurationError,
    VectorRecord,
    VectorSizeError,
    VectorStoreError,
    VectorStoreOptions,
    VectorStoreUnavailableError,
    load_component,
)
from ext.testing.chroma import COLLECTIONS, ChromaServer, ChromaTokenGate
from ext.testing.redis import free_port
from ext.vectors.chroma import ChromaVectorStore

TOKEN = "chroma-test-token-5d2e"
# Chroma's server refuses a request body over 40 MiB (413 "Payload too large"; measured on chroma 1.5.9).
CHROMA_BODY_LIMIT = 40 * 1024 * 1024


async def test_a_batch_the_server_refuses_writes_nothing(chroma: ChromaServer) -> None:
    # The last record makes the request too large for the server: it answers 413 and must have written none of it.
    async with ChromaVectorStore(chroma.url, collection_name="rollback", vector_size=2) as store:
        await store.create_collection()
        try:
            good = [VectorRecord(id=f"g{i}", vector=[1.0, float(i)], metadata={"i": i}) for i in range(50)]
            huge = VectorRecord(id="huge", vector=[1.0, 0.0], text="x" * (CHROMA_BODY_LIMIT + 1))
            with pytest.raises(VectorStoreError, match="413") as caught:
                await store.upsert([*good, huge])
            assert "request size limit" in str(caught.value)
            assert await store.count() == 0
            await store.upsert(good)
            assert await store.count() == 50
        finally:
            await store.delete_collection()


async def test_metadata_chroma_cannot_hold_is_refused_before_any_request() -> None:
    # A closed port: a ValueError (not VectorStoreUnavailableError) proves nothing was sent.
    store = ChromaVectorStore(f"http://127.0.0.1:{free_port()}", collection_name="c", vector_size=2)
    async with store:
        cases: list[tuple[dict[str, object], str]] = [
            ({"#document": "x"}, "reserved"),
            ({"chroma:document": "x"}, "reserved"),
            ({"ext:keys": "x"}, "reserved"),
            ({"": 1}, "non-empty"),
            ({"big": 2**64}, "64-bit"),
        ]
        for metadata, message in cases:
            record = VectorRecord.model_construct(id="a", vector=[1.0, 0.0], text="", metadata=metadata)
            with pytest.raises(ValueError, match=message) as caught:
                await store.upsert([VectorRecord(id="ok", vector=[0.0, 1.0]), record])
            assert "records[1]" in str(caught.value)


async def test_upsert_replaces_metadata_and_keeps_nulls(chroma: ChromaServer) -> None:
    # Chroma's own upsert merges metadata into the stored record's; the store's must replace it.
    async with ChromaVectorStore(chroma.url, collection_name="replace", vector_size=2) as store:
        await store.create_collection()
        try:
            await store.upsert([VectorRecord(id="a", vector=[1.0, 0.0], metadata={"k": "v", "n": 1, "gone": None})])
            [record] = await store.get(["a"])
            assert record.metadata == {"k": "v", "n": 1, "gone": None}
            assert await store.count({"gone": None}) == 1
            await store.upsert([VectorRecord(id="a", vector=[1.0, 0.0], metadata={"n": 2})])
            [record] = await store.get(["a"])
            assert record.metadata == {"n": 2}
            assert await store.count({"k": None}) == 1
            await store.upsert([VectorRecord(id="a", vector=[1.0, 0.0])])
            [record] = await store.get(["a"])
            assert record.metadata == {}
            assert await store.count({"n": {"$in": [2, None]}}) == 1
        finally:
            await store.delete_collection()


async def test_names_chroma_refuses_are_kept_apart(chroma: ChromaServer) -> None:
    # Chroma wants 3-512 characters of [a-zA-Z0-9._-]; these are stored under digests, each its own collection.
    stores = [
        ChromaVectorStore(chroma.url, collection_name=name, vector_size=2)
        for name in ("a", "docs/2026 ü", "docs_2026_")
    ]
    try:
        for index, store in enumerate(stores):
            await store.create_collection()
            await store.upsert([VectorRecord(id=f"r{i}", vector=[1.0, float(i)]) for i in range(index + 1)])
        assert [await store.count() for store in stores] == [1, 2, 3]
    finally:
        for store in stores:
            await store.delete_collection()
            await store.close()


async def test_a_collection_dropped_and_made_again_is_checked_again(chroma: ChromaServer) -> None:
    first = ChromaVectorStore(chroma.url, collection_name="remade", vector_size=2)
    other = ChromaVectorStore(chroma.url, collection_name="remade", vector_size=3)
    try:
        await first.create_collection()
        assert await first.count() == 0  # the store now knows the collection's id
        await other.delete_collection()
        await other.create_collection()
        with pytest.raises(VectorSizeError, match="size 3"):
            await first.count()
    finally:
        await other.delete_collection()
        await first.close()
        await other.close()


async def test_a_collection_without_cosine_distance_is_refused(chroma: ChromaServer) -> None:
    async with httpx.AsyncClient(base_url=chroma.url) as raw:
        body = {"name": "l2-made-elsewhere", "configuration": {"hnsw": {"space": "l2"}}}
        assert (await raw.post(COLLECTIONS, json=body)).status_code == 200
        try:
            async with ChromaVectorStore(chroma.url, collection_name="l2-made-elsewhere", vector_size=2) as store:
                with pytest.raises(VectorStoreError, match="'l2' distance"):
                    await store.create_collection()
        finally:
            await raw.delete(f"{COLLECTIONS}/l2-made-elsewhere")


async def test_from_options_and_token_from_env_round_trip(
    chroma: ChromaServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    options = VectorStoreOptions(endpoint=chroma.url, api_key=SecretStr(TOKEN), collection_name="opts", vector_size=2)
    async with ChromaVectorStore.from_options(options) as store:
        await store.create_collection()
        try:
            await store.upsert([VectorRecord(id="a", vector=[0.0, 1.0], text="alpha")])
            [match] = await store.query([0.0, 2.0])
            assert (match.id, match.text) == ("a", "alpha")
            assert match.score == pytest.approx(1.0, abs=1e-6)
        finally:
            await store.delete_collection()
    monkeypatch.setenv("EXT_TEST_CHROMA_TOKEN", TOKEN)
    store = ChromaVectorStore(chroma.url, collection_name="opts", vector_size=2, api_key_env="EXT_TEST_CHROMA_TOKEN")
    dump = store.dump_component()
    assert dump.config["api_key_env"] == "EXT_TEST_CHROMA_TOKEN"
    assert TOKEN not in dump.model_dump_json() + repr(store)
    loaded = load_component(dump, ChromaVectorStore)
    try:
        assert await loaded.collection_exists() is False
    finally:
        await loaded.close()
        await store.close()


def test_credentials_in_the_url_are_refused_without_echoing_them() -> None:
    for url in (f"http://user:{TOKEN}@127.0.0.1:8000", f"http://127.0.0.1:8000/?token={TOKEN}"):
        with pytest.raises(ConfigurationError, match="api_key") as caught:
            ChromaVectorStore(url, collection_name="c", vector_size=2)
        assert TOKEN not in str(caught.value)
    with pytest.raises(ConfigurationError, match="http"):
        ChromaVectorStore("grpc://127.0.0.1:8000", collection_name="c", vector_size=2)
    with pytest.raises(ConfigurationError, match="api_key_header"):
        ChromaVectorStore("http://127.0.0.1:8000", collection_name="c", vector_size=2, api_key_header="x-api-key")


async def test_each_store_sends_its_own_token(caplog: pytest.LogCaptureFixture) -> None:
    # chromadb's AsyncHttpClient shares one httpx client per event loop between clients, so a second client sends
    # the first one's headers; this store keeps its own connection pool and headers.
    caplog.set_level(logging.DEBUG)
    async with ChromaTokenGate(["token-a", "token-b"]) as gate:
        a = ChromaVectorStore(gate.base_url, collection_name="c-a", vector_size=2, api_key="token-a")
        b = ChromaVectorStore(
            gate.base_url, collection_name="c-b", vector_size=2, api_key="token-b", api_key_header="authorization"
        )
        async with a, b:
            assert await a.collection_exists() is False
            assert await b.collection_exists() is False
        sent = [(r.headers.get("x-chroma-token"), r.headers.get("authorization")) for r in gate.requests]
        assert sent == [("token-a", None), (None, "Bearer token-b")]
    assert "token-a" not in caplog.text and "token-b" not in caplog.text


async def test_a_wrong_token_is_a_clear_error_without_it() -> None:
    async with ChromaTokenGate([TOKEN]) as gate:
        store = ChromaVectorStore(gate.base_url, collection_name="c", vector_size=2, api_key="wrong-" + TOKEN)
        async with store:
            with pytest.raises(VectorStoreUnavailableError, match="403 AuthError: Forbidden") as caught:
                await store.collection_exists()
            assert TOKEN not in str(caught.value)
            assert "api_key" in str(caught.value)


async def test_a_silent_server_times_out_promptly() -> None:
    # A listener that accepts and never answers: the call must give up after `timeout`, not hang.
    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read()

    server = await asyncio.start_server(silent, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        async with ChromaVectorStore(
            f"http://127.0.0.1:{port}", collection_name="c", vector_size=2, timeout=1
        ) as store:
            with pytest.raises(TimeoutError, match="timeout=1"):
                await asyncio.wait_for(store.count(), 20)
    finally:
        server.close()
