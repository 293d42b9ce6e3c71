"""ext-semantic-kernel's two directions against what each wraps, on the same loopback OpenAIServer, in one run.

Run: ``hatch run ext-semantic-kernel:python tools/bench/bench_semantic_kernel.py [--blocks B] [--block N]``

Six sides, each one text create over a real socket to ext-testing's OpenAI server (in the same event loop, so every
side pays the same server share), run in short interleaved blocks (``measure_interleaved``):

- ``ext client`` and ``ext client (A/A)``: two identical ext ``OpenAIChatCompletionClient``s. Their difference is
  this machine's noise: the yardstick for the first direction.
- ``ExtChatCompletion``: an ext client as a kernel chat service (``get_chat_message_content``): the first direction,
  compared with ``ext client``.
- ``kernel connector`` and ``kernel connector (A/A)``: two of the kernel's own ``OpenAIChatCompletion`` connectors
  (``get_chat_message_content``), each on its own ``AsyncOpenAI``.
- ``KernelChatCompletionClient``: the kernel connector as an ext client (``create``): the second direction,
  compared with ``kernel connector``.

Each direction's cost is its p50 less its baseline's p50, next to that baseline's A/A difference, and the median
of the per-block CPU ratios (side / baseline) with a 95 % confidence interval.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
from collections.abc import Awaitable, Callable
from typing import Any

from _harness import Row, format_table, measure_interleaved, median_ci

KEY = "sk-bench"
MODEL = "gpt-4o-mini"


async def run(blocks: int, block: int) -> list[tuple[str, float, float, float, float]]:
    """Measure and print; returns per compared side (name, p50 overhead µs, A/A noise µs, CPU ratio, A/A ratio)."""
    from openai import AsyncOpenAI
    from semantic_kernel.connectors.ai.open_ai import OpenAIChatCompletion, OpenAIChatPromptExecutionSettings
    from semantic_kernel.contents import ChatHistory

    from ext.core import UserMessage
    from ext.models.openai import OpenAIChatCompletionClient
    from ext.semantic_kernel import ExtChatCompletion, ExtPromptExecutionSettings, KernelChatCompletionClient
    from ext.testing.script import Reply
    from ext.testing.servers import OpenAIServer

    reply = Reply(text="Hello! How can I help you today?", prompt_tokens=9, completion_tokens=9)
    async with OpenAIServer(api_key=KEY, default=reply, record=False) as server:
        url = server.base_url + "/v1"

        def ext_client() -> OpenAIChatCompletionClient:
            return OpenAIChatCompletionClient(MODEL, base_url=url, api_key=KEY, bundled_encodings=False, max_retries=0)

        def connector() -> OpenAIChatCompletion:
            sdk = AsyncOpenAI(base_url=url, api_key=KEY, max_retries=0)
            return OpenAIChatCompletion(ai_model_id=MODEL, async_client=sdk)

        ext_a, ext_b, ext_inner = ext_client(), ext_client(), ext_client()
        service = ExtChatCompletion(ext_inner)
        conn_a, conn_b, conn_inner = connector(), connector(), connector()
        wrapped = KernelChatCompletionClient(conn_inner, max_retries=0)
        ext_settings = ExtPromptExecutionSettings()
        openai_settings = OpenAIChatPromptExecutionSettings()

        def history() -> ChatHistory:
            chat = ChatHistory()
            chat.add_user_message("Say hi")
            return chat

        def ext_side(client: Any) -> Callable[[], Awaitable[None]]:
            async def call() -> None:
                await client.create([UserMessage(content="Say hi")])

            return call

        def kernel_side(kernel_service: Any, settings: Any) -> Callable[[], Awaitable[None]]:
            async def call() -> None:
                await kernel_service.get_chat_message_content(history(), settings)

            return call

        sides = [
            ("ext client", ext_side(ext_a)),
            ("ext client (A/A)", ext_side(ext_b)),
            ("ExtChatCompletion", kernel_side(service, ext_settings)),
            ("kernel connector", kernel_side(conn_a, openai_settings)),
            ("kernel connector (A/A)", kernel_side(conn_b, openai_settings)),
            ("KernelChatCompletionClient", ext_side(wrapped)),
        ]
        results, ratios = await measure_interleaved(sides, blocks=blocks, block=block, warmup=block)
        for client in (ext_a, ext_b, ext_inner, wrapped):
            await client.close()
        for conn in (conn_a, conn_b, conn_inner):
            await conn.client.close()

    ext_base, ext_aa, ext_service, conn_base, conn_aa, conn_wrapped = results
    print(f"{blocks} blocks of {block} creates per side, interleaved\n")
    print(
        format_table(
            [
                Row("ext client", ext_base),
                Row("ext client", ext_aa, baseline=ext_base),
                Row("ext as kernel", ext_service, baseline=ext_base),
                Row("kernel conn.", conn_base),
                Row("kernel conn.", conn_aa, baseline=conn_base),
                Row("kernel as ext", conn_wrapped, baseline=conn_base),
            ]
        )
    )
    print()
    out = []
    for name, side, base, aa, side_i, base_i, aa_i in (
        ("ExtChatCompletion vs ext client", ext_service, ext_base, ext_aa, 2, 0, 1),
        ("KernelChatCompletionClient vs kernel connector", conn_wrapped, conn_base, conn_aa, 5, 3, 4),
    ):
        per_block = [s / b for s, b in zip(ratios[side_i], ratios[base_i], strict=True)]
        per_block_aa = [a / b for a, b in zip(ratios[aa_i], ratios[base_i], strict=True)]
        lo, hi = median_ci(per_block)
        overhead = (side.p50_ms - base.p50_ms) * 1000
        noise = abs(aa.p50_ms - base.p50_ms) * 1000
        print(
            f"{name}: p50 {overhead:+.1f} µs per create (A/A noise {noise:.1f} µs); CPU per block median "
            f"{statistics.median(per_block):.3f} (95 % CI {lo:.3f}-{hi:.3f}), A/A {statistics.median(per_block_aa):.3f}"
        )
        out.append((name, overhead, noise, statistics.median(per_block), statistics.median(per_block_aa)))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0] if __doc__ else None)
    parser.add_argument("--blocks", type=int, default=40, help="interleaved blocks per side")
    parser.add_argument("--block", type=int, default=25, help="creates per block")
    args = parser.parse_args()
    asyncio.run(run(args.blocks, args.block))


if __name__ == "__main__":
    main()
