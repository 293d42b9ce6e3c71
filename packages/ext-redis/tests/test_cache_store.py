"""RedisCacheStore against a real redis-server started by the tests: the shared cache-store suite (store alone, then
behind a CacheMiddleware around the real OpenAI client over a loopback server), expiry in Redis itself, prefixes,
secrets, and a Redis that goes away mid-run."""

from __future__ import annotations

import asyncio
import itertools
import logging
import os
import subprocess
import sys
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest
import redis.asyncio as aioredis

from ext.core import ChatCompletionClient, ComponentError, ConfigurationError, UserMessage, load_component
from ext.models.openai import OpenAIChatCompletionClient
from ext.pipeline import (
    DEFAULT_CACHE_TTL,
    CacheMiddleware,
    CacheStore,
    ChatClientBuilder,
    ChatPipeline,
    InMemoryCacheStore,
)
from ext.redis import RedisCacheStore
from ext.testing.conformance import CacheStoreConformance
from ext.testing.redis import RedisServer, start_redis_server
from ext.testing.servers import LoopbackServer, OpenAIServer, Reply

KEY = "sk-redis-cache-test"
_prefixes = itertools.count()


def fresh_prefix() -> str:
    return f"ext-test-{next(_prefixes)}:"


def openai_client(server: LoopbackServer) -> ChatCompletionClient:
    return OpenAIChatCompletionClient(
        "gpt-4o-mini", base_url=server.base_url + "/v1", api_key=KEY, bundled_encodings=False, max_retries=0
    )


class TestRedisCacheStore(CacheStoreConformance):
    @pytest.fixture(autouse=True)
    def _redis(self, redis_server: RedisServer) -> None:
        self.redis_url = redis_server.url
        self.prefix = fresh_prefix()

    async def make_store(self) -> CacheStore:
        return RedisCacheStore(self.redis_url, prefix=self.prefix)

    async def make_shared_store(self, store: CacheStore) -> CacheStore:
        return RedisCacheStore(self.redis_url, prefix=self.prefix)  # another connection pool, same entries

    def make_server(self) -> LoopbackServer:
        return OpenAIServer(api_key=KEY)

    def make_client(self, server: LoopbackServer) -> ChatCompletionClient:
        return openai_client(server)


@pytest.fixture
async def raw(redis_server: RedisServer) -> AsyncIterator[aioredis.Redis]:
    client = aioredis.Redis.from_url(redis_server.url)
    try:
        yield client
    finally:
        await client.aclose()


async def test_entries_carry_their_ttl_in_redis(redis_server: RedisServer, raw: aioredis.Redis) -> None:
    store = RedisCacheStore(redis_server.url, prefix=fresh_prefix(), ttl=30)
    try:
        await store.set("default", b"a")
        await store.set("explicit", b"b", ttl=2.5)
        await store.set("tiny", b"c", ttl=0.0001)
        default_ms = await raw.pttl(store.prefix + "default")
        explicit_ms = await raw.pttl(store.prefix + "explicit")
        assert 29_000 < default_ms <= 30_000
        assert 2_000 < explicit_ms <= 2_500
        assert await raw.get(store.prefix + "explicit") == b"b"
    finally:
        await store.close()
    no_ttl = RedisCacheStore(redis_server.url, prefix=fresh_prefix(), ttl=None)
    try:
        await no_ttl.set("k", b"v")
        assert await raw.pttl(no_ttl.prefix + "k") == -1  # no expiry
    finally:
        await no_ttl.close()


async def test_the_default_ttl_is_the_in_memory_stores_one_hour(
    redis_server: RedisServer, raw: aioredis.Redis, fixed_client: Callable[[], ChatCompletionClient]
) -> None:
    # One default for every built-in store: swapping InMemoryCacheStore for RedisCacheStore keeps expiry.
    assert DEFAULT_CACHE_TTL == InMemoryCacheStore().dump_component().config["ttl"] == 3600.0
    store = RedisCacheStore(redis_server.url, prefix=fresh_prefix())
    assert store.dump_component().config["ttl"] == DEFAULT_CACHE_TTL
    client = ChatClientBuilder(fixed_client()).use_cache(store, close_store=True).build()
    async with client:
        await client.create([UserMessage(content="q")])
    (name,) = [key async for key in raw.scan_iter(match=store.prefix + "*")]
    assert 3_590_000 < await raw.pttl(name) <= 3_600_000


async def test_a_bool_ttl_is_refused_everywhere() -> None:
    for make in (
        lambda: RedisCacheStore(ttl=True),
        lambda: CacheMiddleware(RedisCacheStore(), ttl=True),
    ):
        with pytest.raises(ConfigurationError, match="ttl must be > 0 seconds or None, got True"):
            make()
    dump = RedisCacheStore().dump_component().model_dump()
    dump["config"]["ttl"] = True
    with pytest.raises(ComponentError, match="ttl"):
        load_component(dump, RedisCacheStore)


_FRESH = """
import asyncio, sys
from ext.redis import RedisCacheStore
from ext.core import BaseChatCompletionClient, CreateResult, RequestUsage, load_messages
from ext.pipeline import ChatClientBuilder

class Fixed(BaseChatCompletionClient):
    provider_name = "fixed"

    async def _create(self, request):
        usage = RequestUsage.model_construct(prompt_tokens=1, completion_tokens=1)
        return CreateResult.model_construct(finish_reason="stop", content="hi", usage=usage, cached=False)

async def main():
    store = RedisCacheStore(sys.argv[1], prefix=sys.argv[2])
    client = ChatClientBuilder(Fixed(model="m", max_retries=0)).use_cache(store, close_store=True).build()
    async with client:
        result = await client.create(load_messages('[{"type": "UserMessage", "content": "hello"}]'))
    print(result.content, result.cached)

asyncio.run(main())
"""


def test_two_fresh_interpreters_share_one_entry(redis_server: RedisServer) -> None:
    # The Redis store shares ext-core's key code: each process builds the key and the entry from messages that
    # load_messages made, in an interpreter where no model class was built before (the pydantic 2.9 to 2.13
    # crash), and the second process finds what the first stored.
    prefix = fresh_prefix()
    outputs = []
    for _ in range(2):
        done = subprocess.run(
            [sys.executable, "-c", _FRESH, redis_server.url, prefix], capture_output=True, text=True, timeout=60
        )
        assert done.returncode == 0, done.stderr[-2000:]
        outputs.append(done.stdout.strip())
    assert outputs == ["hi False", "hi True"]


async def test_prefixes_keep_stores_apart_and_clear_only_its_own(redis_server: RedisServer) -> None:
    one = RedisCacheStore(redis_server.url, prefix=fresh_prefix() + "a*[x]:")
    two = RedisCacheStore(redis_server.url, prefix=fresh_prefix())
    try:
        await one.set("k", b"1")
        await one.set("k2", b"1")
        await two.set("k", b"2")
        assert (await one.get("k"), await two.get("k")) == (b"1", b"2")
        assert await one.clear() == 2
        assert (await one.get("k"), await two.get("k")) == (None, b"2")
    finally:
        await one.close()
        await two.close()


async def test_a_redis_that_goes_away_mid_run(caplog: pytest.LogCaptureFixture) -> None:
    redis_server = start_redis_server()
    store = RedisCacheStore(redis_server.url, prefix=fresh_prefix(), socket_timeout=2, connect_timeout=2)
    try:
        async with OpenAIServer(api_key=KEY) as server:
            server.enqueue(Reply(text="first"), Reply(text="while redis is down"), Reply(text="still down"))
            client = ChatClientBuilder(openai_client(server)).use_cache(store).build()
            async with client:
                with caplog.at_level(logging.INFO, logger="ext.pipeline._cache"):
                    assert (await client.create([UserMessage(content="q")])).content == "first"
                    assert (await client.create([UserMessage(content="q")])).cached
                    redis_server.stop()
                    down = await asyncio.wait_for(client.create([UserMessage(content="q2")]), 10)
                    again = await asyncio.wait_for(client.create([UserMessage(content="q2")]), 10)
            assert (down.content, down.cached) == ("while redis is down", False)
            assert (again.content, again.cached) == ("still down", False)  # nothing could be stored
            assert len(server.requests) == 3
    finally:
        redis_server.stop()
        await store.close()
    warnings = [r for r in caplog.records if r.name == "ext.pipeline._cache" and r.levelno == logging.WARNING]
    assert len(warnings) == 1
    assert "RedisCacheStore failed" in warnings[0].getMessage()


async def test_redis_comes_back(caplog: pytest.LogCaptureFixture) -> None:
    """A store whose first commands fail (nothing listening yet), then Redis answers: caching resumes."""
    gone = start_redis_server()
    url = gone.url
    gone.stop()
    cache = CacheMiddleware(RedisCacheStore(url, prefix=fresh_prefix()), close_store=True)
    async with OpenAIServer(api_key=KEY) as server:
        server.enqueue(Reply(text="a"), Reply(text="b"))
        client = ChatClientBuilder(openai_client(server)).use(cache).build()
        async with client:
            with caplog.at_level(logging.INFO, logger="ext.pipeline._cache"):
                assert not (await client.create([UserMessage(content="x")])).cached
                back = start_redis_server(gone.port)
                try:
                    assert not (await client.create([UserMessage(content="x")])).cached  # stored now
                    assert (await client.create([UserMessage(content="x")])).cached
                finally:
                    back.stop()
    messages = [r.getMessage() for r in caplog.records if r.name == "ext.pipeline._cache"]
    assert [m.split(" (")[0].split(" is ")[0] for m in messages] == [
        "cache store RedisCacheStore failed",
        "cache store RedisCacheStore",
    ]


async def test_password_never_in_repr_or_dump(redis_server: RedisServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MY_REDIS_PASSWORD", "hunter2-secret")
    store = RedisCacheStore("redis://127.0.0.1:6390/1", password_env="MY_REDIS_PASSWORD", ttl=5, max_connections=7)
    dump = store.dump_component()
    text = repr(store) + dump.model_dump_json()
    assert "hunter2-secret" not in text
    assert dump.config["url"] == "redis://127.0.0.1:6390/1"
    assert dump.config["password_env"] == "MY_REDIS_PASSWORD"
    assert dump.config["max_connections"] == 7
    loaded = load_component(dump, RedisCacheStore)
    assert loaded.dump_component() == dump


async def test_a_whole_pipeline_with_redis_round_trips_through_its_dump(
    redis_server: RedisServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with OpenAIServer(api_key=KEY) as server:
        store = RedisCacheStore(redis_server.url, prefix=fresh_prefix(), ttl=60)
        pipeline = ChatClientBuilder(openai_client(server)).use_logging().use_cache(store, close_store=True).build()
        dump = pipeline.dump_component()
        await pipeline.close()
        monkeypatch.setenv("OPENAI_API_KEY", KEY)  # the dump names the variable; the key itself is not in it
        loaded = load_component(dump, ChatPipeline)
        server.enqueue(Reply(text="via config"))
        async with loaded:
            assert (await loaded.create([UserMessage(content="y")])).content == "via config"
            assert (await loaded.create([UserMessage(content="y")])).cached
    assert KEY not in dump.model_dump_json()


def test_bad_configuration_is_named() -> None:
    with pytest.raises(ConfigurationError, match="url"):
        RedisCacheStore("http://127.0.0.1:6379")
    with pytest.raises(ConfigurationError, match="ttl"):
        RedisCacheStore(ttl=0)
    with pytest.raises(ConfigurationError, match="socket_timeout"):
        RedisCacheStore(socket_timeout=-1)
    with pytest.raises(ConfigurationError, match="max_retries"):
        RedisCacheStore(max_retries=-1)


async def test_the_readme_example_runs_as_written(
    redis_server: RedisServer, tmp_path: Path, readme_example: Callable[[str], str]
) -> None:
    script = tmp_path / "example.py"
    script.write_text(readme_example("RedisCacheStore("))
    async with OpenAIServer(api_key=KEY) as server:
        server.enqueue(Reply(text="2, 3 and 5."))
        env = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")}
        env.update(OPENAI_API_KEY=KEY, OPENAI_BASE_URL=server.base_url + "/v1", REDIS_URL=redis_server.url)
        process = await asyncio.create_subprocess_exec(
            sys.executable, str(script), env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
        )
        out, err = await asyncio.wait_for(process.communicate(), 60)
        assert process.returncode == 0, err.decode()
        assert out.decode().strip() == "2, 3 and 5. True"
        assert len(server.requests) == 1


async def test_more_concurrent_commands_than_pool_connections_all_succeed(redis_server: RedisServer) -> None:
    """redis-py's default pool refuses a command at once (MaxConnectionsError) when its 100 connections are busy,
    which the cache middleware would take for an outage: a pipeline serving more calls at a time than that would
    silently run uncached. The store's pool makes the extra commands wait for a free connection instead."""
    store = RedisCacheStore(redis_server.url, prefix=fresh_prefix(), socket_timeout=10, connect_timeout=10)
    try:
        await store.set("shared", b"v")
        values = await asyncio.gather(*(store.get("shared") for _ in range(300)))
    finally:
        await store.close()
    assert values == [b"v"] * 300
