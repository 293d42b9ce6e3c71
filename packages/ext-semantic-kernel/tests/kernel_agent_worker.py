"""A gRPC worker in its own process hosting a kernel agent: a `ChatCompletionAgent` on a kernel built from
configuration (ext's OpenAI client on the loopback server whose URL is the second argument; the key comes from
OPENAI_API_KEY), with a plugin the kernel invokes.

Usage: python kernel_agent_worker.py GATEWAY_HOST:PORT OPENAI_BASE_URL   (prints "ready" once registered)
"""

from __future__ import annotations

import asyncio
import sys
from typing import Annotated

from semantic_kernel.agents import ChatCompletionAgent
from semantic_kernel.functions import kernel_function

from ext.core import AgentId
from ext.runtime.grpc import GrpcAgentRuntime
from ext.semantic_kernel import build_kernel, host_kernel_agent


class OrdersPlugin:
    @kernel_function(description="The status of an order.")
    def status(self, order: Annotated[str, "the order number"]) -> str:
        return f"order {order} shipped"


async def main(gateway: str, base_url: str) -> None:
    def make_agent(agent_id: AgentId) -> ChatCompletionAgent:
        kernel = build_kernel("openai", {"endpoint": base_url, "default_model": "gpt-4o-mini", "max_retries": 0})
        kernel.add_plugin(OrdersPlugin(), "orders")
        return ChatCompletionAgent(kernel=kernel, name="support", instructions="Answer order questions.")

    runtime = GrpcAgentRuntime(gateway, token_env=None, connect_timeout=5)
    async with runtime:
        await host_kernel_agent(runtime, "support", make_agent)
        print("ready", flush=True)
        await asyncio.Event().wait()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2]))
