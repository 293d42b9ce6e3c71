"""The conformance suite every chat-pipeline `CacheStore` passes: the store alone, then behind a
`CacheMiddleware` in a built pipeline around a real client talking to a loopback server.

Subclass it in the store's tests (the class name must start with `Test`)::

    class TestMyStore(CacheStoreConformance):
        async def make_store(self) -> CacheStore:
            return MyStore(...)           # a fresh store on a clean backend (or a fresh key prefix)

        async def make_shared_store(self, store: CacheStore) -> CacheStore:
            return MyStore(...)           # a second store object over the same entries as `store`

        def make_server(self) -> LoopbackServer:
            return OpenAIServer()

        def make_client(self, server: LoopbackServer) -> ChatCompletionClient:
            return OpenAIChatCompletionClient("gpt-4o-mini", base_url=server.base_url + "/v1", api_key="k",
                                              max_retries=0)
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import ClassVar

import pytest
import pytest_asyncio

from ext.core import ChatCompletionClient, CreateResult, StreamChunk, UserMessage
from ext.pipeline import CacheMiddleware, CacheStore, ChatClientBuilder
from ext.testing.script import Fault, Reply
from ext.testing.servers import LoopbackServer

HELLO = [UserMessage(content="Hi")]


class CacheStoreConformance:
    """Provider-neutral cases for a `CacheStore`. See the module docstring."""

    expiry_deadline: ClassVar[float] = 10.0
    """Seconds an entry set with `ttl=0.2` may take to disappear before the expiry case fails."""

    # --- what a subclass provides ---------------------------------------------------------------

    async def make_store(self) -> CacheStore:
        raise NotImplementedError

    async def make_shared_store(self, store: CacheStore) -> CacheStore:
        """A second store object over the same entries as `store` (default: `store` itself, for stores that
        live in one process)."""
        return store

    def make_server(self) -> LoopbackServer:
        raise NotImplementedError

    def make_client(self, server: LoopbackServer) -> ChatCompletionClient:
        raise NotImplementedError

    # --- fixtures ---------------------------------------------------------------------------------

    @pytest_asyncio.fixture
    async def store(self) -> AsyncIterator[CacheStore]:
        store = await self.make_store()
        try:
            yield store
        finally:
            await store.close()

    @pytest_asyncio.fixture
    async def server(self) -> AsyncIterator[LoopbackServer]:
        srv = self.make_server()
        await srv.start()
        try:
            yield srv
        finally:
            await srv.stop()

    def pipeline(self, server: LoopbackServer, store: CacheStore) -> ChatCompletionClient:
        return ChatClientBuilder(self.make_client(server)).use_cache(store).build()

    # --- the store alone --------------------------------------------------------------------------------

    async def test_missing_key_is_none(self, store: CacheStore) -> None:
        assert await store.get("ext-test:missing") is None

    async def test_set_then_get_round_trips_bytes(self, store: CacheStore) -> None:
        value = bytes(range(256)) * 4
        await store.set("ext-test:k", value)
        assert await store.get("ext-test:k") == value
        await store.set("ext-test:k", b"replaced")
        assert await store.get("ext-test:k") == b"replaced"

    async def test_ttl_expires_an_entry(self, store: CacheStore) -> None:
        await store.set("ext-test:short", b"1", ttl=0.2)
        await store.set("ext-test:long", b"2", ttl=60)
        assert await store.get("ext-test:short") == b"1"
        deadline = time.monotonic() + self.expiry_deadline
        while await store.get("ext-test:short") is not None:  # expiry is the store's clock: poll, bounded
            assert time.monotonic() < deadline, (
                f"an entry with ttl=0.2 s was still there after {self.expiry_deadline} s"
            )
            await asyncio.sleep(0.05)
        assert await store.get("ext-test:long") == b"2"

    # --- behind a CacheMiddleware -----------------------------------------------------------------------

    async def test_identical_request_is_served_from_the_store(self, server: LoopbackServer, store: CacheStore) -> None:
        server.enqueue(Reply(text="stored answer", prompt_tokens=8, completion_tokens=2), Reply(text="other"))
        client = self.pipeline(server, store)
        try:
            first = await client.create(HELLO)
            again = await client.create(HELLO)
            different = await client.create([UserMessage(content="something else")])
        finally:
            await client.close()
        assert (first.cached, again.cached, again.content, again.usage) == (False, True, "stored answer", first.usage)
        assert different.content == "other" and not different.cached
        assert len(server.requests) == 2

    async def test_stream_is_replayed_chunk_by_chunk(self, server: LoopbackServer, store: CacheStore) -> None:
        server.enqueue(Reply(text="one two three"))
        client = self.pipeline(server, store)
        try:
            live = [item async for item in client.create_stream(HELLO)]
            replay = [item async for item in client.create_stream(HELLO)]
        finally:
            await client.close()
        assert [i.content for i in replay if isinstance(i, StreamChunk)] == [
            i.content for i in live if isinstance(i, StreamChunk)
        ]
        assert isinstance(replay[-1], CreateResult) and replay[-1].cached and replay[-1].content == "one two three"
        assert len(server.requests) == 1

    async def test_two_clients_share_one_cache(self, server: LoopbackServer, store: CacheStore) -> None:
        server.enqueue(Reply(text="made once"))
        other_store = await self.make_shared_store(store)
        first = self.pipeline(server, store)
        second = ChatClientBuilder(self.make_client(server)).use(CacheMiddleware(other_store)).build()
        try:
            made = await first.create(HELLO)
            shared = await second.create(HELLO)
        finally:
            await first.close()
            await second.close()
        assert (made.cached, shared.cached, shared.content) == (False, True, "made once")
        assert len(server.requests) == 1

    async def test_errors_are_not_stored(self, server: LoopbackServer, store: CacheStore) -> None:
        server.enqueue(Fault("bad_request"), Reply(text="after the error"))
        client = self.pipeline(server, store)
        try:
            with pytest.raises(Exception):  # the provider's own error class  # noqa: B017
                await client.create(HELLO)
            result = await client.create(HELLO)
        finally:
            await client.close()
        assert result.content == "after the error" and not result.cached
        assert len(server.requests) == 2
