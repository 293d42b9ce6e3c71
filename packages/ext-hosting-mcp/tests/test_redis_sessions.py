"""Sessions and resumable streams shared through a real redis-server by two servers (two stores, as two processes
would have): initialize on one, continue on the other; end it on one, gone on both; idle expiry held by Redis; a
stream cut on one server resumed on the other with every event once."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx2
import redis.asyncio as aioredis
from hosting_mcp_support import ACCEPT, call, messages, open_session, serving

from ext.core import FunctionTool
from ext.hosting.mcp import McpServer, current_context, streamable_http_app
from ext.hosting.mcp.redis import RedisSessionStore
from ext.redis import RedisConnection
from ext.testing.redis import RedisServer

release = asyncio.Event()


async def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


async def relay() -> str:
    """Says 'before', closes its stream, waits to be released, says 'after' and answers."""
    context = current_context()
    assert context is not None
    await context.log("info", "before")
    assert await context.close_stream()
    await release.wait()
    await context.log("info", "after")
    return "relayed"


def shared_app(redis_server: RedisServer, prefix: str, idle_timeout: float = 60.0) -> Any:
    store = RedisSessionStore(RedisConnection(redis_server.url), prefix=prefix)
    return streamable_http_app(
        McpServer([FunctionTool(add), FunctionTool(relay)]), sessions=store, idle_timeout=idle_timeout
    )


async def test_a_session_opened_on_one_server_continues_on_the_other_and_ends_on_both(
    redis_server: RedisServer,
) -> None:
    async with (
        serving(shared_app(redis_server, "t1")) as a,
        serving(shared_app(redis_server, "t1", idle_timeout=30)) as b,
        httpx2.AsyncClient(timeout=30) as client,
    ):
        redis = aioredis.from_url(redis_server.url)
        session = await open_session(client, a)
        [answer] = messages(await call(client, b, session, "add", {"a": 2, "b": 3}))
        assert answer["result"]["content"][0]["text"] == "5"
        # The expiry is the idle timeout of the server that served the last request (b: 30 s, a: 60 s).
        assert 0 < await redis.pttl(f"t1:s:{session}") <= 30_000
        [again] = messages(await call(client, a, session, "add", {"a": 1, "b": 1}, id=2))
        assert again["result"]["content"][0]["text"] == "2"
        assert 30_000 < await redis.pttl(f"t1:s:{session}") <= 60_000
        record = json.loads(await redis.get(f"t1:s:{session}") or "{}")
        assert record["v"] == "2025-11-25" and record["c"]["clientInfo"]["name"] == "raw-test-client"

        ended = await client.delete(
            b, headers={**ACCEPT, "mcp-session-id": session, "mcp-protocol-version": "2025-11-25"}
        )
        assert ended.status_code == 200
        assert await redis.exists(f"t1:s:{session}") == 0
        gone = await call(client, a, session, "add", {"a": 1, "b": 1}, id=3)
        assert gone.status_code == 404
        await redis.aclose()


async def test_an_unknown_or_expired_session_is_not_found_everywhere(redis_server: RedisServer) -> None:
    async with serving(shared_app(redis_server, "t2")) as a, httpx2.AsyncClient(timeout=30) as client:
        session = await open_session(client, a)
        redis = aioredis.from_url(redis_server.url)
        await redis.delete(f"t2:s:{session}")  # what expiry does
        await redis.aclose()
        assert (await call(client, a, session, "add", {"a": 1, "b": 1})).status_code == 404
        assert (await call(client, a, "f" * 32, "add", {"a": 1, "b": 1})).status_code == 404


async def test_a_stream_closed_on_one_server_resumes_on_the_other_with_every_event_once(
    redis_server: RedisServer,
) -> None:
    global release
    release = asyncio.Event()  # each test has its own event loop
    async with (
        serving(shared_app(redis_server, "t3")) as a,
        serving(shared_app(redis_server, "t3")) as b,
        httpx2.AsyncClient(timeout=30) as client,
    ):
        session = await open_session(client, a)
        first = await call(client, a, session, "relay", {}, id=7)  # the server closes this stream mid-call
        assert first.status_code == 200
        ids = [line[3:].strip() for line in first.text.splitlines() if line.startswith("id:")]
        seen = messages(first)  # "before", unless the stream closed before it was written (it is stored either way)
        headers = {**ACCEPT, "mcp-session-id": session, "mcp-protocol-version": "2025-11-25", "last-event-id": ids[-1]}
        async with client.stream("GET", b, headers=headers) as resumed:
            assert resumed.status_code == 200
            release.set()  # the call on a goes on; b follows it in Redis
            body = "".join([chunk async for chunk in resumed.aiter_text()])
        rest = [json.loads(line[5:]) for line in body.splitlines() if line.startswith("data:") and line[5:].strip()]
        every = seen + rest
        assert [m.get("params", {}).get("data") for m in every] == ["before", "after", None]  # each once, in order
        assert rest[-1]["id"] == 7 and rest[-1]["result"]["content"][0]["text"] == "relayed"


async def test_redis_going_away_gets_503_then_the_session_goes_on() -> None:
    from ext.testing.redis import start_redis_server

    own = start_redis_server()  # this test kills it: not the shared one
    try:
        async with serving(shared_app(own, "t4")) as a, httpx2.AsyncClient(timeout=30) as client:
            session = await open_session(client, a)
            own.kill()
            down = await call(client, a, session, "add", {"a": 1, "b": 1})
            assert down.status_code == 503
            assert down.json()["error"]["message"] == "Session store unavailable; retry later"
            own.restart()  # empty: the session is gone with the data
            gone = await call(client, a, session, "add", {"a": 1, "b": 1}, id=2)
            assert gone.status_code == 404
            fresh = await open_session(client, a)
            [answer] = messages(await call(client, a, fresh, "add", {"a": 1, "b": 1}, id=3))
            assert answer["result"]["content"][0]["text"] == "2"
    finally:
        own.stop()


async def test_a_stream_resumes_on_the_other_server_from_its_priming_event_with_every_event_once(
    redis_server: RedisServer,
) -> None:
    # The priming event is minted from the position the request's expiry refresh read, not written to Redis.
    global release
    release = asyncio.Event()  # each test has its own event loop
    async with (
        serving(shared_app(redis_server, "t5")) as a,
        serving(shared_app(redis_server, "t5")) as b,
        httpx2.AsyncClient(timeout=30) as client,
    ):
        session = await open_session(client, a)
        [answer] = messages(await call(client, a, session, "add", {"a": 2, "b": 2}))  # events before the relay call
        assert answer["result"]["content"][0]["text"] == "4"
        first = await call(client, a, session, "relay", {}, id=8)
        priming = next(line[3:].strip() for line in first.text.splitlines() if line.startswith("id:"))
        assert priming.count("~") == 2  # minted
        redis = aioredis.from_url(redis_server.url)
        entries: list[tuple[bytes, dict[bytes, bytes]]] = await redis.xrange(f"t5:ev:{session}")  # type: ignore[assignment]
        stored = [fields[b"s"] for _id, fields in entries]
        await redis.aclose()
        assert b"8" in stored and all(s != b"" for s in stored)
        headers = {**ACCEPT, "mcp-session-id": session, "mcp-protocol-version": "2025-11-25", "last-event-id": priming}
        async with client.stream("GET", b, headers=headers) as resumed:
            assert resumed.status_code == 200
            release.set()
            body = "".join([chunk async for chunk in resumed.aiter_text()])
        rest = [json.loads(line[5:]) for line in body.splitlines() if line.startswith("data:") and line[5:].strip()]
        assert [m.get("params", {}).get("data") for m in rest] == ["before", "after", None]  # each once, in order
        assert rest[-1]["id"] == 8 and rest[-1]["result"]["content"][0]["text"] == "relayed"


async def test_a_forged_priming_event_id_replays_nothing(redis_server: RedisServer) -> None:
    async with serving(shared_app(redis_server, "t6")) as a, httpx2.AsyncClient(timeout=30) as client:
        session = await open_session(client, a)
        [answer] = messages(await call(client, a, session, "add", {"a": 2, "b": 2}))
        assert answer["result"]["content"][0]["text"] == "4"
        headers = {**ACCEPT, "mcp-session-id": session, "mcp-protocol-version": "2025-11-25"}

        async def resume(event_id: str) -> list[dict[str, Any]]:
            async with client.stream("GET", a, headers={**headers, "last-event-id": event_id}) as resumed:
                body = "".join([chunk async for chunk in resumed.aiter_text()])
            return [json.loads(line[5:]) for line in body.splitlines() if line.startswith("data:") and line[5:].strip()]

        for forged in ("not-a-position~p~31", "0-0~p~zz", "a~b"):
            assert await resume(forged) == []
        # Well formed, naming request 9 run by a process that is not running: its request is reported lost (the
        # case of a process killed after its priming event and before any other).
        [lost] = await resume("0-0~" + "0" * 32 + "~" + "39")
        assert lost["id"] == 9 and "stopped before answering" in lost["error"]["message"]
        [again] = messages(await call(client, a, session, "add", {"a": 1, "b": 2}, id=2))
        assert again["result"]["content"][0]["text"] == "3"
