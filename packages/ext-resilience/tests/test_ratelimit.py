"""`RateLimitMiddleware` in one process: the real OpenAI client on the loopback server, the in-memory backend (and
its decisions on an injected clock), queues, cancellation, streams and the token estimate's correction."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from ext_resilience_limits_support import openai_client

from ext.core import CancellationToken, ConfigurationError, CreateResult, UserMessage
from ext.pipeline import ChatClientBuilder
from ext.resilience import (
    InMemoryRateLimitBackend,
    RateDecision,
    RateLimitMiddleware,
    RateLimitQueueFullError,
    RateLimitTooLargeError,
    RateLimitWaitError,
    limit_key,
)
from ext.testing.servers import OpenAIServer, Reply

HELLO = [UserMessage(content="Hi")]


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


async def admit(backend: InMemoryRateLimitBackend, key: str = "k", **limits: Any) -> RateDecision:
    settings: dict[str, Any] = {"window": 60, "requests": None, "tokens": None, "cost": 0, **limits}
    return await backend.admit(key, **settings)


async def test_the_window_slides_on_an_injected_clock() -> None:
    clock = Clock()
    backend = InMemoryRateLimitBackend(clock=clock)
    admitted = [await admit(backend, requests=3) for _ in range(4)]
    assert [d.admitted for d in admitted] == [True, True, True, False]
    assert admitted[3].retry_after == pytest.approx(60.0) and not admitted[3].slot
    clock.now += 30
    assert (await admit(backend, requests=3)).retry_after == pytest.approx(30.0)
    clock.now += 30  # the first three leave the window together
    assert (await admit(backend, requests=3)).admitted
    assert (await admit(backend, "other", requests=3)).admitted


async def test_tokens_are_charged_before_and_corrected_after() -> None:
    backend = InMemoryRateLimitBackend(clock=Clock())
    first = await admit(backend, tokens=100, cost=80)
    assert first.admitted and first.entry is not None
    assert not (await admit(backend, tokens=100, cost=30)).admitted
    await backend.finish("k", window=60, entry=first.entry, tokens=20)  # the call used less than its estimate
    assert (await admit(backend, tokens=100, cost=30)).admitted
    assert not (await admit(backend, tokens=100, cost=60)).admitted


async def test_a_lease_that_is_not_renewed_runs_out() -> None:
    clock = Clock()
    backend = InMemoryRateLimitBackend(clock=clock)
    assert (await admit(backend, holder="a", concurrency=1, lease=5)).admitted
    refused = await admit(backend, holder="b", concurrency=1, lease=5)
    assert not refused.admitted and refused.slot and refused.retry_after == pytest.approx(5.0)
    clock.now += 4
    assert await backend.renew("k", "a", lease=5)
    clock.now += 4
    assert (await admit(backend, holder="b", concurrency=1, lease=5)).retry_after == pytest.approx(1.0)
    clock.now += 1.5  # a stopped renewing: its lease ran out
    assert not await backend.renew("k", "a", lease=5)
    assert (await admit(backend, holder="b", concurrency=1, lease=5)).admitted


async def test_a_call_without_room_in_the_window_takes_no_slot() -> None:
    backend = InMemoryRateLimitBackend(clock=Clock())
    assert (await admit(backend, requests=1, holder="a", concurrency=2)).admitted
    assert not (await admit(backend, requests=1, holder="b", concurrency=2)).admitted
    # b holds nothing: c gets the second slot once the window has room (here: a bigger limit)
    assert (await admit(backend, requests=2, holder="c", concurrency=2)).admitted
    assert (await admit(backend, requests=3, holder="b", concurrency=2)).slot


async def test_requests_per_window_over_the_wire(limits_server: OpenAIServer) -> None:
    limits_server.default = Reply(text="ok")
    limit = RateLimitMiddleware(requests=5, window=0.5, key="global")
    bare = openai_client(limits_server)
    # the SDK's first calls (connections, lazy imports) would delay the first limited ones: done past the limit
    await asyncio.gather(*(bare.create(HELLO) for _ in range(5)))
    async with ChatClientBuilder(bare).use(limit).build() as client:
        await asyncio.gather(*(client.create(HELLO) for _ in range(12)))
    times = sorted(r.received_at for r in limits_server.requests[5:])
    assert len(times) == 12
    # the 6th and 11th requests waited for the first and the sixth to leave the window
    assert times[5] - times[0] >= 0.5 - 0.05
    assert times[10] - times[5] >= 0.5 - 0.05


async def test_tokens_per_window_use_the_reported_usage(limits_server: OpenAIServer) -> None:
    limits_server.enqueue(Reply(text="a", prompt_tokens=30, completion_tokens=10), Reply(text="b"))
    backend = InMemoryRateLimitBackend()
    limit = RateLimitMiddleware(tokens=100, window=60, key="global", backend=backend)
    async with ChatClientBuilder(openai_client(limits_server)).use(limit).build() as client:
        await client.create(HELLO)
        # 40 tokens are in the window now, whatever was estimated: 60 more fit, 61 do not
        assert not (await admit(backend, "rl:global", tokens=100, cost=61)).admitted
        assert (await admit(backend, "rl:global", tokens=100, cost=60)).admitted


async def test_a_call_larger_than_the_window_is_refused_before_the_network(limits_server: OpenAIServer) -> None:
    limit = RateLimitMiddleware(tokens=10, key="global")
    async with ChatClientBuilder(openai_client(limits_server)).use(limit).build() as client:
        with pytest.raises(RateLimitTooLargeError, match="more than the limit of 10 tokens") as caught:
            await client.create([UserMessage(content="a long prompt " * 20)])
    assert caught.value.key == "rl:global" and caught.value.limit == 10
    assert limits_server.requests == []


async def test_concurrency_queue_refuses_when_full_and_frees_on_cancel(limits_server: OpenAIServer) -> None:
    limits_server.enqueue(Reply(text="slow", delay=30))
    limits_server.default = Reply(text="ok")
    limit = RateLimitMiddleware(concurrency=1, max_queue=1, key="global")
    async with ChatClientBuilder(openai_client(limits_server)).use(limit).build() as client:
        holder = asyncio.ensure_future(client.create(HELLO))
        await limits_server.wait_for_requests(1)
        token = CancellationToken()
        queued = asyncio.ensure_future(client.create(HELLO, token))
        while limit.queued("rl:global") == 0:  # noqa: ASYNC110 - a scheduler turn until the call is queued
            await asyncio.sleep(0)
        with pytest.raises(RateLimitQueueFullError, match="max_queue=1"):
            await client.create(HELLO)
        token.cancel()
        with pytest.raises(asyncio.CancelledError):
            await queued
        assert limit.queued("rl:global") == 0
        holder.cancel()
        with pytest.raises(asyncio.CancelledError):
            await holder
        # the cancelled holder gave its slot back: the next call goes through at once
        result = await asyncio.wait_for(client.create(HELLO), 10)
        assert result.content == "ok"
    assert len(limits_server.requests) == 2


async def test_max_wait_gives_a_typed_error(limits_server: OpenAIServer) -> None:
    limits_server.default = Reply(text="ok")
    limit = RateLimitMiddleware(requests=1, window=60, max_wait=0.05, key="global")
    async with ChatClientBuilder(openai_client(limits_server)).use(limit).build() as client:
        await client.create(HELLO)
        with pytest.raises(RateLimitWaitError, match=r"max_wait=0\.05"):
            await client.create(HELLO)
    assert len(limits_server.requests) == 1


async def test_a_stream_holds_its_slot_until_it_ends(limits_server: OpenAIServer) -> None:
    limits_server.default = Reply(text="one two three")
    backend = InMemoryRateLimitBackend()
    limit = RateLimitMiddleware(concurrency=1, max_queue=0, key="global", backend=backend)
    async with ChatClientBuilder(openai_client(limits_server)).use(limit).build() as client:
        stream = client.create_stream(HELLO)
        first = await stream.__anext__()
        assert not isinstance(first, CreateResult)
        with pytest.raises(RateLimitQueueFullError):
            await client.create(HELLO)
        items = [item async for item in stream]
        assert isinstance(items[-1], CreateResult)
        assert (await client.create(HELLO)).content == "one two three"


async def test_keys_per_model_and_per_caller(limits_server: OpenAIServer) -> None:
    limits_server.default = Reply(text="ok")
    limit = RateLimitMiddleware(requests=1, window=60, max_queue=0, key="caller")
    async with ChatClientBuilder(openai_client(limits_server)).use(limit).build() as client:
        with limit_key("tenant-a"):
            await client.create(HELLO)
            with pytest.raises(RateLimitQueueFullError, match="tenant-a"):
                await client.create(HELLO)
        with limit_key("tenant-b"):
            await client.create(HELLO)
    per_model = RateLimitMiddleware(requests=1, window=60, max_queue=0, key="model")
    async with ChatClientBuilder(openai_client(limits_server)).use(per_model).build() as client:
        await client.create(HELLO)
        await client.create(HELLO, options={"model_id": "gpt-4o"})
        with pytest.raises(RateLimitQueueFullError, match="openai/gpt-4o-mini"):
            await client.create(HELLO)
    assert len(limits_server.requests) == 4


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({}, "at least one of requests, tokens or concurrency"),
        ({"requests": 0}, "requests must be an int >= 1"),
        ({"requests": 5, "window": -1}, "window must be a number of seconds > 0"),
        ({"concurrency": 2, "max_queue": -1}, "max_queue must be an int >= 0"),
        ({"requests": 5, "key": "tenant"}, "key must be one of global, client, model, caller"),
        ({"requests": 5, "backend": object()}, "backend must be a RateLimitBackend"),
    ],
)
def test_bad_arguments_name_the_field(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        RateLimitMiddleware(**kwargs)  # type: ignore[arg-type]
