"""A Redis password never shows: wherever the URL carries it (user info or `?password=`), against a real
redis-server that requires it, the password reaches Redis and appears in no repr, dump, error or log record."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from urllib.parse import quote

import pytest
import redis
import redis.asyncio as aioredis

from ext.cache.redis import RedisCacheStore
from ext.core import ChatCompletionClient, UserMessage, load_component
from ext.pipeline import ChatClientBuilder
from ext.testing.redis import RedisServer, start_redis_server

# Characters that must be percent-encoded in a URL: the store has to decode them as redis-py does.
PASSWORD = "s3cr3t/p@ss+word"
ALICE_PASSWORD = "alice:only-hers"
WRONG = "wrong-guess-9f2c"


@pytest.fixture(scope="module")
def locked_redis() -> Iterator[RedisServer]:
    """A redis-server of its own whose default user needs PASSWORD, plus an ACL user `alice`."""
    server = start_redis_server()
    try:
        admin = redis.Redis(host="127.0.0.1", port=server.port)
        admin.config_set("requirepass", PASSWORD)
        admin.acl_setuser("alice", enabled=True, passwords=["+" + ALICE_PASSWORD], keys=["*"], categories=["+@all"])
        admin.close()
        yield server
    finally:
        server.stop()


def _urls(port: int) -> dict[str, tuple[str, str, str]]:
    """Case -> (URL, the password it carries, the URL a dump keeps)."""
    base = f"127.0.0.1:{port}/0"
    return {
        "userinfo": (f"redis://:{quote(PASSWORD, safe='')}@{base}", PASSWORD, f"redis://{base}"),
        "query": (f"redis://{base}?password={quote(PASSWORD, safe='')}", PASSWORD, f"redis://{base}"),
        "query among others": (
            f"redis://{base}?health_check_interval=5&password={quote(PASSWORD, safe='')}",
            PASSWORD,
            f"redis://{base}?health_check_interval=5",
        ),
        "both, user info wins as in redis-py": (
            f"redis://:{quote(PASSWORD, safe='')}@{base}?password={WRONG}",
            PASSWORD,
            f"redis://{base}",
        ),
        "user and password": (
            f"redis://alice:{quote(ALICE_PASSWORD, safe='')}@{base}",
            ALICE_PASSWORD,
            f"redis://alice@{base}",
        ),
    }


def _shows(text: str, password: str) -> bool:
    return password in text or quote(password, safe="") in text


@pytest.mark.parametrize(
    "case", ["userinfo", "query", "query among others", "both, user info wins as in redis-py", "user and password"]
)
async def test_a_password_in_the_url_is_used_and_never_shown(
    case: str,
    locked_redis: RedisServer,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    fixed_client: Callable[[], ChatCompletionClient],
) -> None:
    monkeypatch.delenv("REDIS_PASSWORD", raising=False)
    url, password, kept = _urls(locked_redis.port)[case]
    store = RedisCacheStore(url, prefix=f"secrets-{case}:")
    client = ChatClientBuilder(fixed_client()).use_logging().use_cache(store, close_store=True).build()
    with caplog.at_level(logging.DEBUG):
        async with client:
            first = await client.create([UserMessage(content="q")])
            again = await client.create([UserMessage(content="q")])
    assert (first.cached, again.cached) == (False, True)  # Redis took the password: it answered and stored
    dump = store.dump_component()
    assert dump.config["url"] == kept
    assert dump.config["password_env"] == "REDIS_PASSWORD"
    for text in (repr(store), dump.model_dump_json(), repr(client), caplog.text):
        assert not _shows(text, password) and not _shows(text, WRONG), text

    # The dump loads again with the password from the variable it names.
    monkeypatch.setenv("REDIS_PASSWORD", password)
    loaded = load_component(dump, RedisCacheStore)
    try:
        assert await loaded.get("missing") is None
    finally:
        await loaded.close()


@pytest.mark.parametrize("where", ["userinfo", "query"])
async def test_a_wrong_password_fails_without_showing_it(
    where: str,
    locked_redis: RedisServer,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    fixed_client: Callable[[], ChatCompletionClient],
) -> None:
    monkeypatch.delenv("REDIS_PASSWORD", raising=False)
    base = f"127.0.0.1:{locked_redis.port}/0"
    url = f"redis://:{WRONG}@{base}" if where == "userinfo" else f"redis://{base}?password={WRONG}"
    store = RedisCacheStore(url)
    with pytest.raises(redis.exceptions.AuthenticationError) as raised:
        await store.get("k")
    await store.close()
    assert not _shows(str(raised.value) + repr(raised.value), WRONG)
    # Behind the cache middleware the failure is logged (once) and the call goes on uncached.
    client = ChatClientBuilder(fixed_client()).use_cache(store, close_store=True).build()
    with caplog.at_level(logging.DEBUG):
        async with client:
            assert not (await client.create([UserMessage(content="q")])).cached
    assert "cache store RedisCacheStore failed" in caplog.text
    assert not _shows(caplog.text + repr(store) + store.dump_component().model_dump_json(), WRONG)


async def test_the_password_argument_wins_over_the_url(locked_redis: RedisServer) -> None:
    store = RedisCacheStore(f"redis://:{WRONG}@127.0.0.1:{locked_redis.port}/0", password=PASSWORD)
    try:
        await store.set("k", b"v")
        assert await store.get("k") == b"v"
    finally:
        await store.clear()
        await store.close()
    assert not _shows(repr(store) + store.dump_component().model_dump_json(), WRONG)


async def test_a_url_without_a_password_is_kept_as_written(locked_redis: RedisServer) -> None:
    url = f"redis://127.0.0.1:{locked_redis.port}/0?health_check_interval=5"
    store = RedisCacheStore(url, password=PASSWORD)
    assert store.dump_component().config["url"] == url
    await store.close()
    raw = aioredis.Redis.from_url(url, password=PASSWORD)
    try:
        assert await raw.ping()
    finally:
        await raw.aclose()
