"""`RedisStateStore` against a real redis-server: the `StateStoreConformance` suite (two processes included), records
of the wrong shape, an unreachable server, and more concurrent calls than the pool has connections."""

from __future__ import annotations

import asyncio
import logging
import os
import sys
import uuid
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest
import redis.asyncio as aioredis

from ext.core import AgentId, ConfigurationError, StateCorruptError, StateStore
from ext.redis import RedisConnection, RedisStateStore
from ext.testing.conformance import StateStoreConformance
from ext.testing.redis import RedisServer, free_port


def fresh_prefix() -> str:
    return f"t{uuid.uuid4().hex[:8]}"


class TestRedisStateStore(StateStoreConformance):
    @pytest.fixture(autouse=True)
    def _server(self, redis_server: RedisServer) -> None:
        self.url = redis_server.url
        self.prefix = fresh_prefix()

    async def make_store(self) -> StateStore:
        return RedisStateStore(self.url, prefix=self.prefix)

    async def reopen(self, store: StateStore) -> StateStore | None:
        return RedisStateStore(self.url, prefix=self.prefix)

    async def corrupt(self, store: StateStore, agent_id: AgentId) -> str | None:
        key = f"{self.prefix}:state:{agent_id}"
        raw = aioredis.Redis.from_url(self.url)
        try:
            await raw.delete(key)
            await raw.set(key, b"garbage")  # a string where the store keeps a hash
        finally:
            await raw.aclose()
        return key

    def setup_in_process(self) -> str | None:
        return f"from ext.redis import RedisStateStore\nstore = RedisStateStore({self.url!r}, prefix={self.prefix!r})"


@pytest.fixture
async def raw(redis_server: RedisServer) -> AsyncIterator[aioredis.Redis]:
    client = aioredis.Redis.from_url(redis_server.url)
    try:
        yield client
    finally:
        await client.aclose()


@pytest.mark.parametrize(
    ("fields", "reason"),
    [
        ({"v": "1", "s": "{not json"}, "its state is not a JSON object"),
        ({"v": "1", "s": "[1, 2]"}, "its state is not a JSON object"),
        ({"v": "one", "s": "{}"}, "its version is not a positive integer"),
        ({"v": "0", "s": "{}"}, "its version is not a positive integer"),
        ({"s": "{}"}, "its version is not a positive integer"),
        ({"v": "3"}, "it holds no state"),
    ],
)
async def test_a_hash_of_the_wrong_shape_is_named_and_skipped(
    fields: dict[str, str],
    reason: str,
    redis_server: RedisServer,
    raw: aioredis.Redis,
    caplog: pytest.LogCaptureFixture,
) -> None:
    prefix = fresh_prefix()
    store = RedisStateStore(redis_server.url, prefix=prefix)
    good, bad = AgentId("t", "good"), AgentId("t", "bad")
    try:
        await store.put(good, {"n": 1}, None)
        await store.put(bad, {"n": 1}, None)
        key = f"{prefix}:state:t/bad"
        await raw.delete(key)
        await raw.hset(key, mapping=fields)  # type: ignore[arg-type]
        with pytest.raises(StateCorruptError, match=reason) as info:
            await store.get(bad)
        assert "t/bad" in str(info.value) and key in str(info.value) and "127.0.0.1:" in str(info.value)
        with caplog.at_level(logging.WARNING):
            assert await store.keys() == [good]
        assert key in caplog.text and reason in caplog.text
        await store.delete(bad)
        assert await store.get(bad) is None
        assert await store.keys() == [good]
    finally:
        await store.close()


async def test_a_state_that_only_looks_like_an_object_is_listed_but_not_read(
    redis_server: RedisServer, raw: aioredis.Redis
) -> None:
    # keys() checks shapes on the server without moving states; get() decodes, and names what it cannot.
    prefix = fresh_prefix()
    store = RedisStateStore(redis_server.url, prefix=prefix)
    agent = AgentId("t", "braces")
    try:
        await store.put(agent, {"n": 1}, None)
        await raw.hset(f"{prefix}:state:t/braces", "s", "{garbage}")
        assert await store.keys() == [agent]
        with pytest.raises(StateCorruptError, match=r"t/braces .*its state is not a JSON object"):
            await store.get(agent)
    finally:
        await store.close()


async def test_a_member_that_is_not_an_agent_id_is_skipped(
    redis_server: RedisServer, raw: aioredis.Redis, caplog: pytest.LogCaptureFixture
) -> None:
    prefix = fresh_prefix()
    store = RedisStateStore(redis_server.url, prefix=prefix)
    try:
        await store.put(AgentId("t", "a"), {}, None)
        await raw.sadd(f"{prefix}:states", "no slash here")
        with caplog.at_level(logging.WARNING):
            assert await store.keys() == [AgentId("t", "a")]
        assert f"{prefix}:states" in caplog.text
    finally:
        await store.close()


async def test_the_highest_deleted_version_is_kept_in_redis(redis_server: RedisServer, raw: aioredis.Redis) -> None:
    prefix = fresh_prefix()
    store = RedisStateStore(redis_server.url, prefix=prefix)
    a, b = AgentId("t", "a"), AgentId("t", "b")
    try:
        for expected in (None, 1, 2, 3):
            await store.put(a, {}, expected)
        await store.put(b, {}, None)
        await store.delete(a)
        await store.delete(b)  # a lower version never lowers the mark
        assert await raw.get(f"{prefix}:state-deleted") == b"4"
        assert await store.put(b, {}, None) == 5
    finally:
        await store.close()


async def test_unreachable_redis_fails_promptly_naming_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REDIS_PASSWORD", "hunter2")
    connection = RedisConnection(f"redis://127.0.0.1:{free_port()}/0", connect_timeout=2)
    store = RedisStateStore(connection)
    try:
        with pytest.raises(ConnectionError, match=r"state store \(Redis at 127.0.0.1:\d+\)") as info:
            await asyncio.wait_for(store.get(AgentId("t", "k")), 30)
        assert "hunter2" not in str(info.value) and "hunter2" not in repr(store) + repr(connection)
    finally:
        await store.close()


def test_bad_arguments() -> None:
    with pytest.raises(ConfigurationError, match="url must be"):
        RedisStateStore("http://127.0.0.1:6379")
    with pytest.raises(ConfigurationError, match="redis must be a redis:// URL or a RedisConnection"):
        RedisStateStore(6379)  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="prefix"):
        RedisStateStore("redis://127.0.0.1:6379", prefix="")
    with pytest.raises(ConfigurationError, match="must not carry a password") as info:
        RedisStateStore("redis://:hunter2@127.0.0.1:6379/0")
    assert "hunter2" not in str(info.value)


async def test_more_concurrent_calls_than_connections_wait_their_turn(redis_server: RedisServer) -> None:
    # redis-py's default pool holds 100 connections and refused the 101st concurrent command at once
    # (MaxConnectionsError): a worker activating or saving more than 100 agents at a time failed their messages.
    store = RedisStateStore(redis_server.url, prefix=fresh_prefix())
    ids = [AgentId("t", str(i)) for i in range(250)]
    try:
        assert await asyncio.gather(*(store.put(a, {"n": i}, None) for i, a in enumerate(ids))) == [1] * 250
        loaded = await asyncio.gather(*(store.get(a) for a in ids))
        assert [(s.state, s.version) if s else None for s in loaded] == [({"n": i}, 1) for i in range(250)]
        assert await store.keys() == sorted(ids, key=lambda a: a.key)  # read in batches of 500 per round trip
    finally:
        await store.close()


async def test_the_readme_example_runs_as_written(
    redis_server: RedisServer, tmp_path: Path, readme_example: Callable[[str], str]
) -> None:
    script = tmp_path / "example.py"
    script.write_text(readme_example("RedisStateStore("))
    env = {k: v for k, v in os.environ.items() if k != "REDIS_PASSWORD"}
    env["REDIS_URL"] = redis_server.url
    outputs = []
    for _ in range(2):
        process = await asyncio.create_subprocess_exec(
            sys.executable, str(script), env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
        )
        out, err = await asyncio.wait_for(process.communicate(), 60)
        assert process.returncode == 0, err.decode()
        outputs.append(out.decode().strip())
    shown = f"RedisConnection(url={redis_server.url!r}, password=none"
    assert outputs[0] == outputs[1] and outputs[0].startswith(shown)
    store = RedisStateStore(redis_server.url, prefix="myapp")
    try:
        record = await store.get(AgentId("counter", "alice"))
        assert record is not None and (record.state, record.version) == ({"count": 2}, 2)  # one count per run
    finally:
        await store.close()
