"""A second process for the cooldown tests: `cooldown_process.py <redis url> <prefix> record <n>` records n failures
of `shared-client` (a cooldown needs 400 calls, all failed) and prints how many of its decisions started one;
`... auth 1` calls a real OpenAI client that gets a 401 from a loopback server, through a `CooldownMiddleware` keyed
`shared-client`, and prints 1 when the client then cools down."""

from __future__ import annotations

import asyncio
import sys

from ext.core import ErrorKind, UserMessage
from ext.models.openai import OpenAIChatCompletionClient
from ext.pipeline import ChatClientBuilder
from ext.resilience import CooldownMiddleware, CooldownPolicy, Cooldowns, RedisCooldowns
from ext.testing.servers import Fault, OpenAIServer

KEY = "sk-test-fallback-0123456789"


async def record(url: str, prefix: str, n: int) -> int:
    cooldowns = Cooldowns(
        CooldownPolicy(min_calls=2 * n, failure_rate=1.0, window=60), RedisCooldowns(url, prefix=prefix)
    )
    started = 0
    for _ in range(n):
        started += bool(await cooldowns.failed("shared-client", ErrorKind.SERVER_ERROR))
    await cooldowns.close()
    return started


async def auth(url: str, prefix: str) -> int:
    cooldowns = Cooldowns(backend=RedisCooldowns(url, prefix=prefix))
    async with OpenAIServer(api_key=KEY) as server:
        server.enqueue(Fault("auth"))
        bare = OpenAIChatCompletionClient(
            "gpt-4o-mini", base_url=server.base_url + "/v1", api_key=KEY, bundled_encodings=False
        )
        client = ChatClientBuilder(bare).use(CooldownMiddleware(cooldowns, name="shared-client")).build()
        async with client:
            try:
                await client.create([UserMessage(content="hi")])
            except Exception:
                pass
            return int(await cooldowns.remaining("shared-client") > 0)


def main() -> None:
    url, prefix, mode, n = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    result = asyncio.run(record(url, prefix, n) if mode == "record" else auth(url, prefix))
    print(result)


if __name__ == "__main__":
    main()
