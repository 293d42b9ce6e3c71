"""ext-models-ollama vs the raw ollama SDK (`ollama.AsyncClient`), against one loopback OllamaServer in the same run.

Run (in the ext-models-ollama environment):
``hatch run ext-models-ollama:python tools/bench/bench_ollama.py [--iterations N] [--rounds R]``.

Cases (see `_chat_bench`): one create (sequential and 64 concurrent) with an A/A control (the raw SDK on a second,
independent client in the same interleaved blocks: the noise floor ext's ratio is read against), a 500-chunk
NDJSON stream (chunks/s after the first, time to first chunk, CPU per chunk), and cold import time.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import Any

# Script-dir import: `python tools/bench/bench_ollama.py` puts tools/bench on sys.path.
from _chat_bench import STREAM_CHUNKS, ChatSides, chat_main, compare_chat, compare_imports, loopback_servers

MODEL = "llama3.2"

_SERVER = """
import asyncio, sys
from ext.testing.script import Reply
from ext.testing.servers.ollama import OllamaServer

async def main():
    text = OllamaServer(default=Reply(text="Hello! How can I help you today?"), record=False)
    stream = OllamaServer(default=Reply(chunks=[f"w{i} " for i in range(int(sys.argv[1]))]), record=False)
    async with text, stream:
        print(text.port, stream.port, flush=True)
        await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)

asyncio.run(main())
"""


async def run(iterations: int, rounds: int) -> None:
    import ollama

    from ext.core import LLMMessage, UserMessage
    from ext.models.ollama import OllamaChatCompletionClient

    async with loopback_servers(_SERVER, str(STREAM_CHUNKS)) as (text_port, stream_port):
        text_url, stream_url = f"http://127.0.0.1:{text_port}", f"http://127.0.0.1:{stream_port}"
        # The same timeout on every side (the SDK's default is none).
        raw = ollama.AsyncClient(host=text_url, timeout=300)
        raw_control = ollama.AsyncClient(host=text_url, timeout=300)
        raw_stream_sdk = ollama.AsyncClient(host=stream_url, timeout=300)
        ours = OllamaChatCompletionClient(MODEL, host=text_url, timeout=300)
        ours_stream = OllamaChatCompletionClient(MODEL, host=stream_url, timeout=300)
        raw_messages: list[Any] = [{"role": "user", "content": "Hi"}]
        messages: list[LLMMessage] = [UserMessage(content="Hi")]

        async def raw_call() -> Any:
            return await raw.chat(model=MODEL, messages=raw_messages)

        async def control_call() -> Any:
            return await raw_control.chat(model=MODEL, messages=raw_messages)

        async def ext_call() -> Any:
            return await ours.create(messages)

        async def raw_parts() -> AsyncIterator[Any]:
            async for part in await raw_stream_sdk.chat(model=MODEL, messages=raw_messages, stream=True):
                if part.message.content:
                    yield part

        def ext_chunks() -> AsyncIterator[Any]:
            return ours_stream.create_stream(messages)

        sides = ChatSides(raw_call, ext_call, raw_parts, ext_chunks, raw_control=control_call)
        await compare_chat(sides, iterations=iterations, rounds=rounds)
        for sdk in (raw, raw_control, raw_stream_sdk):
            close: Callable[[], Awaitable[None]] = sdk.close  # untyped in the SDK
            await close()
        for client in (ours, ours_stream):
            await client.close()

    compare_imports("ollama", "ext.models.ollama")


def main(argv: Sequence[str] | None = None) -> int:
    return chat_main(run, __doc__, argv)


if __name__ == "__main__":
    raise SystemExit(main())
