"""ext-models-anthropic vs the raw anthropic SDK, against one loopback AnthropicServer in the same run.

Run (in the ext-models-anthropic environment):
``hatch run ext-models-anthropic:python tools/bench/bench_anthropic.py [--iterations N] [--rounds R]``.

Cases (see `_chat_bench`): one create (sequential and 64 concurrent), a 500-chunk stream (chunks/s after
the first, time to first chunk, CPU per chunk), and cold import time.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import Any

# Script-dir import: `python tools/bench/bench_anthropic.py` puts tools/bench on sys.path.
from _chat_bench import ChatSides, chat_main, compare_chat, compare_imports, text_and_stream_servers

MODEL = "claude-sonnet-5-5"
KEY = "sk-ant-bench"


async def run(iterations: int, rounds: int) -> None:
    import anthropic

    from ext.core import LLMMessage, UserMessage
    from ext.models.anthropic import AnthropicChatCompletionClient

    async with text_and_stream_servers("ext.testing.servers.anthropic", "AnthropicServer", KEY) as (
        text_port,
        stream_port,
    ):
        text_url, stream_url = f"http://127.0.0.1:{text_port}", f"http://127.0.0.1:{stream_port}"
        raw = anthropic.AsyncAnthropic(base_url=text_url, api_key=KEY, max_retries=0, timeout=60)
        raw_stream_sdk = anthropic.AsyncAnthropic(base_url=stream_url, api_key=KEY, max_retries=0, timeout=60)
        ours = AnthropicChatCompletionClient(MODEL, max_tokens=1024, base_url=text_url, api_key=KEY, timeout=60)
        ours_stream = AnthropicChatCompletionClient(
            MODEL, max_tokens=1024, base_url=stream_url, api_key=KEY, timeout=60
        )
        raw_messages: list[Any] = [{"role": "user", "content": "Hi"}]
        messages: list[LLMMessage] = [UserMessage(content="Hi")]

        async def raw_call() -> Any:
            return await raw.messages.create(model=MODEL, max_tokens=1024, messages=raw_messages)

        async def ext_call() -> Any:
            return await ours.create(messages)

        async def raw_events() -> AsyncIterator[Any]:
            stream = await raw_stream_sdk.messages.create(
                model=MODEL, max_tokens=1024, messages=raw_messages, stream=True
            )
            async for event in stream:
                if event.type == "content_block_delta":
                    yield event

        def ext_chunks() -> AsyncIterator[Any]:
            # What an ext user iterates: create_stream itself (the raw side needs its own generator to pick
            # the text deltas out of the SDK's events).
            return ours_stream.create_stream(messages)

        await compare_chat(ChatSides(raw_call, ext_call, raw_events, ext_chunks), iterations=iterations, rounds=rounds)
        for client in (raw, raw_stream_sdk, ours, ours_stream):
            await client.close()

    compare_imports(
        "anthropic",
        "ext.models.anthropic._client",
        also=[("ext.models.anthropic without the client (no SDK)", "ext.models.anthropic")],
    )


def main(argv: Sequence[str] | None = None) -> int:
    return chat_main(run, __doc__, argv)


if __name__ == "__main__":
    raise SystemExit(main())
