"""Rate limits shared through a real redis-server by real worker processes, checked against the loopback server's own
request log (what reached the provider), not against the limiter's own records."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from pathlib import Path
from typing import Any

import redis.asyncio as aioredis
from ext_resilience_limits_support import KEY

from ext.testing.redis import RedisServer
from ext.testing.servers import OpenAIServer, Reply

WORKER = Path(__file__).with_name("limits_worker.py")
# What separates the limiter's decision from the request's arrival at the server (a connection, a scheduler turn on
# a loaded machine): the log is checked over windows this much shorter than the limiter's.
JITTER = 0.3


async def start_worker(settings: dict[str, Any]) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        sys.executable,
        str(WORKER),
        json.dumps(settings),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )


async def ready(process: asyncio.subprocess.Process) -> None:
    assert process.stdout is not None
    line = await asyncio.wait_for(process.stdout.readline(), 60)
    assert line.strip() == b"ready", line


async def finish(process: asyncio.subprocess.Process) -> str:
    out, err = await asyncio.wait_for(process.communicate(), timeout=60)
    assert process.returncode == 0, err.decode()
    return out.decode()


async def only_holder(slots: aioredis.Redis) -> bytes:
    (holder,) = await slots.zrange("ext:rl:shared-slots:global:slots", 0, -1)
    assert isinstance(holder, bytes)
    return holder


def most_in_any_window(times: list[float], window: float) -> int:
    """The most arrivals in any interval [t, t + window) starting at an arrival (linear, two pointers)."""
    times = sorted(times)
    most = start = 0
    for end, arrived in enumerate(times):
        while arrived - times[start] >= window:
            start += 1
        most = max(most, end - start + 1)
    return most


async def test_four_processes_share_one_requests_limit(limits_server: OpenAIServer, limits_redis: RedisServer) -> None:
    limits_server.default = Reply(text="ok")
    window = 2.0
    settings = {
        "base_url": limits_server.base_url + "/v1",
        "api_key": KEY,
        "redis_url": limits_redis.url,
        "limit": {"requests": 60, "window": window, "key": "global", "name": "shared-rpm"},
        "count": 50,
        "parallel": 8,
        "warmup": True,
    }
    workers = [await start_worker(settings) for _ in range(4)]
    for worker in workers:
        await ready(worker)
    warmups = len(limits_server.requests)
    assert warmups == 4 * 8
    for worker in workers:
        assert worker.stdin is not None
        worker.stdin.write(b"go\n")
        await worker.stdin.drain()
    outputs = [await finish(w) for w in workers]
    assert all(o.strip().endswith("done 50") for o in outputs)
    times = [r.received_at for r in limits_server.requests[warmups:]]
    assert len(times) == 200
    assert most_in_any_window(times, window - JITTER) <= 60
    # 200 requests at 60 per window need at least three full windows after the first
    assert max(times) - min(times) >= 3 * window - JITTER


async def test_a_killed_process_gives_its_concurrency_slot_back_within_the_lease(
    limits_server: OpenAIServer, limits_redis: RedisServer
) -> None:
    lease = 1.0
    limit = {"concurrency": 1, "lease": lease, "key": "global", "name": "shared-slots"}
    base = {"base_url": limits_server.base_url + "/v1", "api_key": KEY, "redis_url": limits_redis.url, "limit": limit}
    limits_server.enqueue(
        Reply(text="never", delay=120)
    )  # the first request to arrive hangs: its sender holds the slot
    limits_server.default = Reply(text="ok")
    holder = await start_worker({**base, "count": 1, "parallel": 1})
    (first,) = await limits_server.wait_for_requests(1, timeout=30)
    others = [await start_worker({**base, "count": 5, "parallel": 2}) for _ in range(3)]
    for other in others:
        await ready(other)

    # Wait until the holder has renewed its lease beyond the first one: it keeps the slot while it lives.
    slots = aioredis.Redis.from_url(limits_redis.url)
    try:
        taken_until = await slots.zscore("ext:rl:shared-slots:global:slots", await only_holder(slots))
        while True:
            renewed_until = await slots.zscore("ext:rl:shared-slots:global:slots", await only_holder(slots))
            assert taken_until is not None and renewed_until is not None
            if renewed_until - taken_until > lease * 1_000_000:
                break
            await asyncio.sleep(0.05)
    finally:
        await slots.aclose()
    assert len(limits_server.requests) == 1, "another process got past the limit while the slot was held"

    os.kill(holder.pid, signal.SIGKILL)
    killed_at = asyncio.get_running_loop().time()
    await holder.wait()
    assert holder.returncode == -signal.SIGKILL
    for other in others:
        assert (await finish(other)).strip().endswith("done 5")
    later = sorted(r.received_at for r in limits_server.requests if r is not first)
    assert len(later) == 15
    # the slot came back once the dead holder's lease ran out, and not a lease later
    assert later[0] - killed_at <= lease + 1.0  # + a scheduler allowance on a loaded machine
