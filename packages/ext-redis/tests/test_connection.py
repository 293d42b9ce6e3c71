"""`RedisConnection`, the one connection setup of every store here, against real redis-servers: a URL carrying a
password is refused without repeating it; the password comes from an argument or the environment and reaches a
redis-server that requires it (default user and an ACL user) while no repr, dump, error or log record shows it;
the blocking pool lets 300 concurrent commands through 100 connections and bounds the wait for a free one."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterator
from urllib.parse import quote

import pytest
import redis
import redis.asyncio as aioredis
from pydantic import SecretStr

from ext.core import AgentId, ChatCompletionClient, ConfigurationError, UserMessage, load_component
from ext.pipeline import ChatClientBuilder
from ext.redis import RedisCacheStore, RedisConnection, RedisStateStore
from ext.testing.redis import RedisServer, start_redis_server

# Characters that must be percent-encoded in a URL.
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


def _shows(text: str, password: str) -> bool:
    return password in text or quote(password, safe="") in text


def _urls_with_a_password(port: int) -> dict[str, str]:
    base = f"127.0.0.1:{port}/0"
    secret = quote(PASSWORD, safe="")
    return {
        "user info": f"redis://:{secret}@{base}",
        "user and password": f"redis://alice:{secret}@{base}",
        "query": f"redis://{base}?password={secret}",
        "query among others": f"redis://{base}?health_check_interval=5&password={secret}",
        "tls": f"rediss://:{secret}@{base}",
    }


@pytest.mark.parametrize("case", ["user info", "user and password", "query", "query among others", "tls"])
def test_a_url_carrying_a_password_is_refused_without_repeating_it(case: str) -> None:
    url = _urls_with_a_password(6379)[case]
    makers: list[Callable[[], object]] = [
        lambda: RedisConnection(url),
        lambda: RedisCacheStore(url),
        lambda: RedisStateStore(url),
    ]
    for make in makers:
        with pytest.raises(ConfigurationError, match="url must not carry a password") as info:
            make()
        assert not _shows(str(info.value) + repr(info.value), PASSWORD), info.value
    # Nor through a config (a pipeline file, a dump edited by hand).
    dump = RedisCacheStore().dump_component().model_dump()
    dump["config"]["url"] = url
    with pytest.raises(ConfigurationError, match="url must not carry a password") as loading:
        load_component(dump, RedisCacheStore)
    assert not _shows(str(loading.value), PASSWORD), loading.value


def test_bad_settings_are_named() -> None:
    for kwargs, field in [
        ({"url": "http://127.0.0.1:6379"}, "url must be a redis://"),
        ({"url": 6379}, "url must be a redis://"),
        ({"url": "redis://[::1/0"}, "does not parse"),
        ({"password": 42}, "password must be a str or SecretStr"),
        ({"password_env": ""}, "password_env"),
        ({"max_connections": 0}, "max_connections"),
        ({"socket_timeout": 0}, "socket_timeout"),
        ({"connect_timeout": float("inf")}, "connect_timeout"),
        ({"pool_timeout": -1}, "pool_timeout"),
        ({"max_retries": -1}, "max_retries"),
        ({"max_retries": True}, "max_retries"),
    ]:
        with pytest.raises(ConfigurationError, match=field):
            RedisConnection(**kwargs)  # type: ignore[arg-type]


@pytest.mark.parametrize("how", ["environment", "custom variable", "argument", "secret argument"])
async def test_the_password_reaches_redis_and_shows_nowhere(
    how: str, locked_redis: RedisServer, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.delenv("REDIS_PASSWORD", raising=False)
    kwargs: dict[str, object] = {}
    if how == "environment":
        monkeypatch.setenv("REDIS_PASSWORD", PASSWORD)
    elif how == "custom variable":
        monkeypatch.setenv("MY_REDIS_SECRET", PASSWORD)
        kwargs["password_env"] = "MY_REDIS_SECRET"
    else:
        kwargs["password"] = PASSWORD if how == "argument" else SecretStr(PASSWORD)
    connection = RedisConnection(locked_redis.url, **kwargs)  # type: ignore[arg-type]
    cache = RedisCacheStore(locked_redis.url, prefix=f"secrets-{how}:", **kwargs)  # type: ignore[arg-type]
    state = RedisStateStore(connection, prefix=f"secrets-{how}")
    client = connection.client()
    with caplog.at_level(logging.DEBUG):
        try:
            assert await client.ping()
            await cache.set("k", b"v")
            assert await cache.get("k") == b"v"
            assert await state.put(AgentId("t", "k"), {"n": 1}, None) == 1
            assert await state.keys() == [AgentId("t", "k")]
        finally:
            await client.aclose()
            await cache.clear()
            await cache.close()
            await state.close()
    dump = cache.dump_component()
    assert dump.config["url"] == locked_redis.url
    assert dump.config["password_env"] == kwargs.get("password_env", "REDIS_PASSWORD")
    assert connection.has_password and "password=set" in repr(connection)
    for text in (repr(connection), repr(cache), repr(state), dump.model_dump_json(), caplog.text):
        assert not _shows(text, PASSWORD), text
    # The dump loads again with the password from the variable it names.
    monkeypatch.setenv(str(dump.config["password_env"]), PASSWORD)
    loaded = load_component(dump, RedisCacheStore)
    try:
        assert await loaded.get("missing") is None
    finally:
        await loaded.close()


async def test_an_acl_user_in_the_url_with_the_password_from_the_environment(
    locked_redis: RedisServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("REDIS_PASSWORD", ALICE_PASSWORD)
    url = f"redis://alice@127.0.0.1:{locked_redis.port}/0"
    client = RedisConnection(url).client()
    try:
        assert await client.acl_whoami() == "alice"
    finally:
        await client.aclose()
    store = RedisCacheStore(url, prefix="alice:")
    assert store.dump_component().config["url"] == url  # a user name is kept as written
    await store.close()


async def test_a_wrong_password_fails_without_showing_it(
    locked_redis: RedisServer,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    fixed_client: Callable[[], ChatCompletionClient],
) -> None:
    monkeypatch.setenv("REDIS_PASSWORD", WRONG)
    store = RedisCacheStore(locked_redis.url)
    with pytest.raises(redis.exceptions.AuthenticationError) as raised:
        await store.get("k")
    await store.close()
    assert not _shows(str(raised.value) + repr(raised.value), WRONG)
    state = RedisStateStore(locked_redis.url)
    with pytest.raises(ConnectionError, match="AuthenticationError") as failed:
        await state.get(AgentId("t", "k"))
    await state.close()
    assert not _shows(str(failed.value), WRONG)
    # Behind the cache middleware the failure is logged (once) and the call goes on uncached.
    client = ChatClientBuilder(fixed_client()).use_cache(store, close_store=True).build()
    with caplog.at_level(logging.DEBUG):
        async with client:
            assert not (await client.create([UserMessage(content="q")])).cached
    assert "cache store RedisCacheStore failed" in caplog.text
    assert not _shows(caplog.text + repr(store) + store.dump_component().model_dump_json(), WRONG)


async def test_no_password_anywhere_means_none(redis_server: RedisServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("REDIS_PASSWORD", raising=False)
    connection = RedisConnection(redis_server.url)
    assert not connection.has_password and "password=none" in repr(connection)
    assert RedisConnection(redis_server.url, password_env=None).password_env is None
    client = connection.client()
    try:
        assert await client.ping()
    finally:
        await client.aclose()


async def test_300_concurrent_commands_pass_through_100_connections() -> None:
    """redis-py's default pool refuses a command at once (MaxConnectionsError) when its connections are all busy:
    both stores failed the 101st concurrent call before. The blocking pool makes the others wait their turn, and
    never opens more connections than `max_connections` (counted by the server, a redis-server of this test's own)."""
    server = start_redis_server()
    admin = aioredis.Redis.from_url(server.url)
    client = RedisConnection(server.url).client()
    try:
        await client.set("shared", b"v")
        values = await asyncio.gather(*(client.get("shared") for _ in range(300)))
        assert values == [b"v"] * 300
        clients = await admin.client_list()
        assert 1 < len(clients) - 1 <= 100  # the admin's own connection aside
    finally:
        await client.aclose()
        await admin.aclose()
        server.stop()


async def test_waiting_for_a_free_connection_is_bounded(redis_server: RedisServer) -> None:
    connection = RedisConnection(redis_server.url, max_connections=1, pool_timeout=0.2)
    client = connection.client()
    held = await client.connection_pool.get_connection()  # type: ignore[no-untyped-call]  # the only one, taken
    try:
        started = time.monotonic()
        with pytest.raises(redis.exceptions.ConnectionError, match="No connection available"):
            await asyncio.wait_for(client.get("k"), 30)
        assert time.monotonic() - started < 10  # a generous guard: the wait is 0.2 s, not forever
    finally:
        await client.connection_pool.release(held)
    assert await client.get("k") is None  # the connection is back: commands go through again
    await client.aclose()


def test_where_names_host_and_port_or_socket() -> None:
    assert RedisConnection("redis://example.org/0").where == "example.org:6379"
    assert RedisConnection("rediss://alice@10.0.0.5:6380/1").where == "10.0.0.5:6380"
    assert RedisConnection("unix:///run/redis.sock").where == "unix:/run/redis.sock"
