"""A worker in its own process, for tests that kill it: hosts agent type `far` (answers Ping, sleeps on Slow).

Usage: python worker_process.py HOST:PORT   (prints "ready" once registered and "slow started" when a Slow
handler begins, then serves until killed)
"""

from __future__ import annotations

import asyncio
import sys

from ext.runtime.grpc import GrpcAgentRuntime
from ext.testing.runtime_agents import MESSAGE_TYPES, EchoAgent, Journal


async def main(address: str) -> None:
    runtime = GrpcAgentRuntime(address, token_env=None, connect_timeout=5)
    for message_type in MESSAGE_TYPES:
        runtime.register_message_type(message_type)
    journal = Journal()
    async with runtime:
        await runtime.register_agent_factory("far", lambda aid, rt: EchoAgent(aid, rt, journal))
        print("ready", flush=True)
        await journal.slow_started.wait()
        print("slow started", flush=True)  # the test kills this process while that handler runs
        await asyncio.Event().wait()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
