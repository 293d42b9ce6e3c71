"""A worker process of the shared-limit tests: `python limits_worker.py <json settings>`.

It sends `count` requests (`parallel` at a time) through a pipeline holding one `RateLimitMiddleware` on a
`RedisRateLimitBackend`, to the OpenAI loopback server of the test, and prints `done <n>` at the end. With
`warmup`, it first sends `parallel` requests past the limit (so the SDK's first-call work and its connections are
behind it: they would delay the first limited requests by up to a second on a loaded machine), prints `ready` and
waits for a line on stdin; without, it prints `ready` and starts."""

from __future__ import annotations

import asyncio
import json
import sys

from ext.core import UserMessage
from ext.models.openai import OpenAIChatCompletionClient
from ext.pipeline import ChatClientBuilder
from ext.redis import RedisConnection
from ext.resilience import RateLimitMiddleware, RedisRateLimitBackend


async def main(settings: dict[str, object]) -> None:
    client = OpenAIChatCompletionClient(
        "gpt-4o-mini",
        base_url=str(settings["base_url"]),
        api_key=str(settings["api_key"]),
        bundled_encodings=False,
        max_retries=0,
    )
    backend = RedisRateLimitBackend(RedisConnection(str(settings["redis_url"])), poll=0.02)
    limit = RateLimitMiddleware(backend=backend, close_backend=True, **settings["limit"])  # type: ignore[arg-type]
    count = int(settings["count"])  # type: ignore[call-overload]
    parallel = int(settings.get("parallel", 4))  # type: ignore[call-overload]
    gate = asyncio.Semaphore(parallel)
    async with ChatClientBuilder(client).use(limit).build() as pipeline:
        if settings.get("warmup"):
            await asyncio.gather(*(client.create([UserMessage(content="warm up")]) for _ in range(parallel)))
            print("ready", flush=True)
            await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)
        else:
            print("ready", flush=True)

        async def one(index: int) -> None:
            async with gate:
                await pipeline.create([UserMessage(content=f"request {index}")])

        await asyncio.gather(*(one(i) for i in range(count)))
    print(f"done {count}", flush=True)


if __name__ == "__main__":
    asyncio.run(main(json.loads(sys.argv[1])))
