"""ext-models-azure-ai vs the raw azure-ai-inference SDK, against one loopback AzureAIServer in the same run.

Run (in the ext-models-azure-ai environment):
``hatch run ext-models-azure-ai:python tools/bench/bench_azure_ai.py [--iterations N] [--rounds R] [--aa]``.

Cases (see `_chat_bench`): one create (sequential and 64 concurrent), a 500-chunk stream with usage (chunks/s
after the first, time to first chunk, CPU per chunk), and cold import time. `--aa` runs the A/A control: the
raw SDK against a second raw SDK client in the ext slot, so the spread it shows is the noise of the run.
"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator, Sequence
from typing import Any

# Script-dir import: `python tools/bench/bench_azure_ai.py` puts tools/bench on sys.path.
from _chat_bench import ChatSides, chat_main, compare_chat, compare_imports, text_and_stream_servers

MODEL = "Phi-4"
KEY = "azure-ai-bench-key"
_AA = False


async def run(iterations: int, rounds: int) -> None:
    from azure.ai.inference.aio import ChatCompletionsClient
    from azure.core.credentials import AzureKeyCredential

    from ext.core import LLMMessage, UserMessage
    from ext.models.azure_ai import AzureAIChatCompletionClient

    async with text_and_stream_servers("ext.testing.servers", "AzureAIServer", KEY) as (text_port, stream_port):
        text_url, stream_url = f"http://127.0.0.1:{text_port}", f"http://127.0.0.1:{stream_port}"

        def raw_client(url: str) -> ChatCompletionsClient:
            # SDK retries off and the same timeouts as ext's client sets, so both sides run the same pipeline.
            return ChatCompletionsClient(
                url, AzureKeyCredential(KEY), retry_total=0, connection_timeout=60, read_timeout=60
            )

        raw = raw_client(text_url)
        raw_stream_sdk = raw_client(stream_url)
        raw_messages: list[Any] = [{"role": "user", "content": "Hi"}]
        messages: list[LLMMessage] = [UserMessage(content="Hi")]
        usage = {"stream_options": {"include_usage": True}}

        def raw_call_on(sdk: ChatCompletionsClient) -> Any:
            async def call() -> Any:
                return await sdk.complete(messages=raw_messages, model=MODEL)

            return call

        def raw_events_on(sdk: ChatCompletionsClient) -> Any:
            async def events() -> AsyncIterator[Any]:
                stream = await sdk.complete(messages=raw_messages, model=MODEL, stream=True, model_extras=usage)
                async for update in stream:
                    if update.choices and update.choices[0].delta.content:
                        yield update

            return events

        closers: list[Any] = [raw, raw_stream_sdk]
        if _AA:
            raw_b, raw_stream_b = raw_client(text_url), raw_client(stream_url)
            closers += [raw_b, raw_stream_b]
            sides = ChatSides(
                raw_call_on(raw), raw_call_on(raw_b), raw_events_on(raw_stream_sdk), raw_events_on(raw_stream_b)
            )
        else:
            ours = AzureAIChatCompletionClient(endpoint=text_url, model=MODEL, credential=KEY, timeout=60)
            ours_stream = AzureAIChatCompletionClient(endpoint=stream_url, model=MODEL, credential=KEY, timeout=60)
            closers += [ours, ours_stream]

            async def ext_call() -> Any:
                return await ours.create(messages)

            def ext_chunks() -> AsyncIterator[Any]:
                return ours_stream.create_stream(messages)

            sides = ChatSides(raw_call_on(raw), ext_call, raw_events_on(raw_stream_sdk), ext_chunks)

        print("A/A control: raw SDK in both slots" if _AA else "raw azure-ai-inference vs ext")
        await compare_chat(sides, iterations=iterations, rounds=rounds)
        for client in closers:
            await client.close()

    # `import ext.models.azure_ai` loads no SDK (the client imports it when first built); the ratio that
    # matters is the SDK against the SDK plus ext.
    compare_imports("azure.ai.inference.aio", "ext.models.azure_ai")


def main(argv: Sequence[str] | None = None) -> int:
    global _AA
    args = list(sys.argv[1:] if argv is None else argv)
    if "--aa" in args:
        args.remove("--aa")
        _AA = True
    return chat_main(run, __doc__, args)


if __name__ == "__main__":
    raise SystemExit(main())
