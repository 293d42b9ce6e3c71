"""Cooldowns: the rule, in memory and in a real Redis shared by several processes, and fallback skipping cooled
clients."""

from __future__ import annotations

import asyncio
import sys
import uuid
from pathlib import Path

import pytest
from ext_resilience_support import anthropic_client, openai_client
from pydantic import ValidationError

from ext.core import ErrorKind, UserMessage
from ext.pipeline import ChatClientBuilder
from ext.resilience import (
    AllClientsFailedError,
    ClientCoolingDownError,
    CooldownBackend,
    CooldownMiddleware,
    CooldownPolicy,
    Cooldowns,
    FallbackMiddleware,
    InMemoryCooldowns,
    RedisCooldowns,
)
from ext.testing.redis import RedisServer
from ext.testing.servers import AnthropicServer, Fault, OpenAIServer, Reply

Q = [UserMessage(content="hi")]
HERE = Path(__file__).resolve().parent


def prefix() -> str:
    return f"test:{uuid.uuid4().hex}"


def backends(redis_server: RedisServer) -> list[CooldownBackend]:
    return [InMemoryCooldowns(), RedisCooldowns(redis_server.url, prefix=prefix())]


async def test_one_failure_never_cools(redis_server: RedisServer) -> None:
    policy = CooldownPolicy(min_calls=2, failure_rate=0.5)
    for backend in backends(redis_server):
        started = await backend.record("c", failed=True, immediate=False, policy=policy)
        assert started == 0.0 and await backend.remaining("c") == 0.0
        await backend.close()
    with pytest.raises(ValidationError, match="min_calls"):
        CooldownPolicy(min_calls=1)


async def test_the_failure_rate_over_the_minimum_count_cools(redis_server: RedisServer) -> None:
    policy = CooldownPolicy(min_calls=4, failure_rate=0.75, cooldown=30)
    for backend in backends(redis_server):
        outcomes = [False, True, True]
        for failed in outcomes:  # 3 calls: under the minimum count, whatever the rate
            assert await backend.record("c", failed=failed, immediate=False, policy=policy) == 0.0
        assert await backend.record("c", failed=True, immediate=False, policy=policy) == 30.0  # 3 of 4 failed
        assert 29.0 < await backend.remaining("c") <= 30.0
        assert await backend.remaining("other") == 0.0
        await backend.close()


async def test_successes_keep_the_rate_under_the_threshold(redis_server: RedisServer) -> None:
    policy = CooldownPolicy(min_calls=4, failure_rate=0.5)
    for backend in backends(redis_server):
        for failed in [True, False, False, False, True]:  # 2 of 5
            assert await backend.record("c", failed=failed, immediate=False, policy=policy) == 0.0
        assert await backend.remaining("c") == 0.0
        await backend.close()


async def test_the_window_forgets_old_calls(redis_server: RedisServer) -> None:
    policy = CooldownPolicy(min_calls=2, failure_rate=1.0, window=0.2)
    for backend in backends(redis_server):
        assert await backend.record("c", failed=True, immediate=False, policy=policy) == 0.0
        await asyncio.sleep(0.3)  # the window passes: what is measured here is time itself
        assert await backend.record("c", failed=True, immediate=False, policy=policy) == 0.0  # 1 call in a new one
        assert await backend.record("c", failed=True, immediate=False, policy=policy) > 0  # 2 of 2 in it
        await backend.close()


async def test_auth_cools_at_once_and_fallback_skips_the_cooled_client(
    openai_server: OpenAIServer, anthropic_server: AnthropicServer
) -> None:
    openai_server.enqueue(Fault("auth"))
    anthropic_server.enqueue(Reply(text="one"), Reply(text="two"))
    cooldowns = Cooldowns(CooldownPolicy(cooldown=60))
    fallback = FallbackMiddleware([anthropic_client(anthropic_server)], cooldown=cooldowns, names=["main", "backup"])
    async with ChatClientBuilder(openai_client(openai_server)).use(fallback).build() as client:
        assert (await client.create(Q)).content == "one"
        assert await cooldowns.remaining("main") > 59
        assert (await client.create(Q)).content == "two"
    assert len(openai_server.requests) == 1  # the second call skipped the cooled client: no request


async def test_every_client_cooling_is_one_error(
    openai_server: OpenAIServer, anthropic_server: AnthropicServer
) -> None:
    openai_server.enqueue(Fault("auth"))
    anthropic_server.enqueue(Fault("not_found"))
    cooldowns = Cooldowns()
    fallback = FallbackMiddleware([anthropic_client(anthropic_server)], cooldown=cooldowns, names=["main", "backup"])
    async with ChatClientBuilder(openai_client(openai_server)).use(fallback).build() as client:
        with pytest.raises(AllClientsFailedError):
            await client.create(Q)
        with pytest.raises(AllClientsFailedError) as caught:
            await client.create(Q)
    assert [(a.client, a.skipped) for a in caught.value.attempts] == [("main", True), ("backup", True)]
    assert "main: skipped (cooling down" in str(caught.value)


async def test_cooldown_middleware_refuses_before_any_request(openai_server: OpenAIServer) -> None:
    openai_server.enqueue(Fault("auth"))
    cooldowns = Cooldowns()
    client = ChatClientBuilder(openai_client(openai_server)).use(CooldownMiddleware(cooldowns)).build()
    async with client:
        with pytest.raises(Exception, match="Incorrect API key"):
            await client.create(Q)
        with pytest.raises(ClientCoolingDownError, match="openai/gpt-4o-mini is cooling down"):
            await client.create(Q)
    assert len(openai_server.requests) == 1


async def test_two_processes_counting_at_once_start_one_cooldown(redis_server: RedisServer) -> None:
    """400 failures needed (min_calls=400, rate 1.0), 200 recorded by each of two processes at once: exactly one of
    the 400 decisions starts the cooldown (each decision is one atomic script)."""
    key = prefix()
    runs = [
        await asyncio.create_subprocess_exec(
            sys.executable,
            str(HERE / "cooldown_process.py"),
            redis_server.url,
            key,
            "record",
            "200",
            stdout=asyncio.subprocess.PIPE,
        )
        for _ in range(2)
    ]
    outputs = await asyncio.wait_for(asyncio.gather(*(run.communicate() for run in runs)), 60)
    started = [int(out.split()[-1]) for out, _ in outputs]
    assert all(run.returncode == 0 for run in runs)
    assert sorted(started) == [0, 1]
    backend = RedisCooldowns(redis_server.url, prefix=key)
    assert await backend.remaining("shared-client") > 0
    await backend.close()


async def test_a_cooldown_set_by_one_process_is_respected_by_another(
    redis_server: RedisServer, openai_server: OpenAIServer, anthropic_server: AnthropicServer
) -> None:
    key = prefix()
    other = await asyncio.create_subprocess_exec(
        sys.executable,
        str(HERE / "cooldown_process.py"),
        redis_server.url,
        key,
        "auth",
        "1",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(other.communicate(), 60)
    assert other.returncode == 0, err.decode()
    assert out.split()[-1] == b"1"  # that process's 401 cooled the client
    anthropic_server.enqueue(Reply(text="from the backup"))
    cooldowns = Cooldowns(backend=RedisCooldowns(redis_server.url, prefix=key))
    fallback = FallbackMiddleware(
        [anthropic_client(anthropic_server)], cooldown=cooldowns, names=["shared-client", "backup"]
    )
    async with ChatClientBuilder(openai_client(openai_server)).use(fallback).build() as client:
        result = await client.create(Q)
    assert result.content == "from the backup"
    assert len(openai_server.requests) == 0  # this process never called the client another process cooled


def test_the_policy_reads_kinds_by_name() -> None:
    policy = CooldownPolicy.model_validate({"immediate": ["auth", "rate_limited"]})
    assert policy.immediate == frozenset({ErrorKind.AUTH, ErrorKind.RATE_LIMITED})
    with pytest.raises(ValidationError):
        CooldownPolicy.model_validate({"immediate": ["teapot"]})


async def test_a_redis_that_goes_away_never_stops_a_call(
    openai_server: OpenAIServer, anthropic_server: AnthropicServer, caplog: pytest.LogCaptureFixture
) -> None:
    from ext.testing.redis import start_redis_server

    gone = start_redis_server()
    cooldowns = Cooldowns(backend=RedisCooldowns(gone.url, prefix=prefix()))
    openai_server.enqueue(Reply(text="before"), Fault("server_error"))
    anthropic_server.enqueue(Reply(text="after, from the backup"))
    fallback = FallbackMiddleware([anthropic_client(anthropic_server)], cooldown=cooldowns)
    try:
        async with ChatClientBuilder(openai_client(openai_server)).use(fallback).build() as client:
            assert (await client.create(Q)).content == "before"
            gone.stop()
            result = await asyncio.wait_for(client.create(Q), 30)
    finally:
        gone.stop()
    assert result.content == "after, from the backup"
    assert any("counts as not cooling" in r.getMessage() for r in caplog.records)


async def test_refresh_reuses_not_cooling_for_at_most_that_long(redis_server: RedisServer) -> None:
    key = prefix()
    here = RedisCooldowns(redis_server.url, prefix=key, refresh=0.3)
    elsewhere = RedisCooldowns(redis_server.url, prefix=key)
    policy = CooldownPolicy()
    assert await here.remaining("c") == 0.0  # asked Redis: not cooling, reused for 0.3 s
    assert await elsewhere.record("c", failed=True, immediate=True, policy=policy) > 0
    assert await here.remaining("c") == 0.0  # the reused answer: this process has not looked again yet
    await asyncio.sleep(0.35)  # what is measured is the refresh period itself
    assert await here.remaining("c") > 0  # seen once the period is over
    await here.close()
    await elsewhere.close()


async def _counted_calls(redis_server: RedisServer, key: str, client: str) -> int | None:
    from ext.redis import RedisConnection

    redis = RedisConnection(redis_server.url).client()
    try:
        value = await redis.hget(f"{key}:{client}:n", "calls")
    finally:
        await redis.aclose()
    return None if value is None else int(value)


async def test_a_success_rides_with_the_next_check_not_a_round_trip_of_its_own(redis_server: RedisServer) -> None:
    key = prefix()
    backend = RedisCooldowns(redis_server.url, prefix=key)
    policy = CooldownPolicy()
    for _ in range(3):
        assert await backend.record("c", failed=False, immediate=False, policy=policy) == 0.0
    assert await _counted_calls(redis_server, key, "c") is None  # nothing sent yet
    assert await backend.remaining("c") == 0.0  # the check carries the 3 successes
    assert await _counted_calls(redis_server, key, "c") == 3
    assert await backend.record("c", failed=False, immediate=False, policy=policy) == 0.0
    await backend.close()  # close sends what is left
    assert await _counted_calls(redis_server, key, "c") == 4


async def test_successes_not_sent_yet_count_in_the_next_failures_rate(redis_server: RedisServer) -> None:
    """3 successes, then 2 failures: 2 of 5 under a 0.5 rate, no cooldown (were the 3 lost, 2 of 2 would cool)."""
    policy = CooldownPolicy(min_calls=2, failure_rate=0.5)
    backend = RedisCooldowns(redis_server.url, prefix=prefix())
    for failed in [False, False, False, True, True]:
        assert await backend.record("c", failed=failed, immediate=False, policy=policy) == 0.0
    assert await backend.remaining("c") == 0.0
    await backend.close()


async def test_a_success_with_no_later_call_is_sent_on_its_own(redis_server: RedisServer) -> None:
    key = prefix()
    backend = RedisCooldowns(redis_server.url, prefix=key)
    assert await backend.record("c", failed=False, immediate=False, policy=CooldownPolicy()) == 0.0

    seen = None
    for _ in range(200):  # polling Redis for the background send, bounded at 10 s
        seen = await _counted_calls(redis_server, key, "c")
        if seen == 1:
            break
        await asyncio.sleep(0.05)
    assert seen == 1  # sent within about a second, without another call or close()
    await backend.close()
    assert await _counted_calls(redis_server, key, "c") == 1  # and not sent twice
