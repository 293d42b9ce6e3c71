"""ext-models-bedrock vs raw aioboto3, against one loopback BedrockServer (SigV4-verifying) in the same run.

Run (in the ext-models-bedrock environment):
``hatch run ext-models-bedrock:python tools/bench/bench_bedrock.py [--iterations N] [--rounds R]``.

Cases (see `_chat_bench`): one create (sequential and 64 concurrent), a 500-chunk stream (chunks/s after
the first, time to first chunk, CPU per chunk), and cold import time.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Sequence
from typing import Any

# Script-dir import: `python tools/bench/bench_bedrock.py` puts tools/bench on sys.path.
from _chat_bench import STREAM_CHUNKS, ChatSides, chat_main, compare_chat, compare_imports, loopback_servers

MODEL = "us.anthropic.claude-sonnet-5-5-v1:0"
KEY = "AKIDBENCH0000000001"
SECRET = "bench-secret"
REGION = "us-east-1"

_SERVER = """
import asyncio, sys
from ext.testing.script import Reply
from ext.testing.servers.bedrock import BedrockServer

async def main():
    auth = dict(access_key=sys.argv[1], secret_key=sys.argv[3], region="us-east-1")
    text = BedrockServer(**auth, default=Reply(text="Hello! How can I help you today?"), record=False)
    stream = BedrockServer(**auth, default=Reply(chunks=[f"w{i} " for i in range(int(sys.argv[2]))]), record=False)
    async with text, stream:
        print(text.port, stream.port, flush=True)
        await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)

asyncio.run(main())
"""


def raw_body() -> bytes:
    # Built per call, as code on the raw SDK does (it has a new conversation each time).
    request = {
        "anthropic_version": "bedrock-2023-05-31",
        "max_tokens": 1024,
        "messages": [{"role": "user", "content": [{"type": "text", "text": "Hi"}]}],
    }
    return json.dumps(request).encode()


async def run(iterations: int, rounds: int) -> None:
    import aioboto3
    from botocore.config import Config

    from ext.core import LLMMessage, UserMessage
    from ext.models.bedrock import AnthropicBedrockChatCompletionClient

    async with loopback_servers(_SERVER, KEY, str(STREAM_CHUNKS), SECRET) as (text_port, stream_port):
        text_url, stream_url = f"http://127.0.0.1:{text_port}", f"http://127.0.0.1:{stream_port}"
        session = aioboto3.Session(aws_access_key_id=KEY, aws_secret_access_key=SECRET, region_name=REGION)
        config = Config(retries={"total_max_attempts": 1}, read_timeout=60, connect_timeout=60)
        raw_cm = session.client("bedrock-runtime", endpoint_url=text_url, config=config)
        raw_stream_cm = session.client("bedrock-runtime", endpoint_url=stream_url, config=config)
        raw = await raw_cm.__aenter__()
        raw_stream_sdk = await raw_stream_cm.__aenter__()
        common: dict[str, Any] = {
            "max_tokens": 1024,
            "aws_region": REGION,
            "aws_access_key": KEY,
            "aws_secret_key": SECRET,
        }
        ours = AnthropicBedrockChatCompletionClient(MODEL, endpoint_url=text_url, **common)
        ours_stream = AnthropicBedrockChatCompletionClient(MODEL, endpoint_url=stream_url, **common)
        messages: list[LLMMessage] = [UserMessage(content="Hi")]

        async def raw_call() -> Any:
            response = await raw.invoke_model(
                modelId=MODEL, body=raw_body(), contentType="application/json", accept="application/json"
            )
            return json.loads(await response["body"].read())

        async def ext_call() -> Any:
            return await ours.create(messages)

        async def raw_events() -> AsyncIterator[Any]:
            response = await raw_stream_sdk.invoke_model_with_response_stream(
                modelId=MODEL, body=raw_body(), contentType="application/json", accept="application/json"
            )
            async for event in response["body"]:
                payload = json.loads(event["chunk"]["bytes"])
                if payload["type"] == "content_block_delta":
                    yield payload

        def ext_chunks() -> AsyncIterator[Any]:
            # What an ext user iterates: create_stream itself (the raw side needs its own generator to pick
            # the text deltas out of the SDK's events).
            return ours_stream.create_stream(messages)

        await compare_chat(ChatSides(raw_call, ext_call, raw_events, ext_chunks), iterations=iterations, rounds=rounds)
        await raw_cm.__aexit__(None, None, None)
        await raw_stream_cm.__aexit__(None, None, None)
        await ours.close()
        await ours_stream.close()

    compare_imports(
        "aioboto3",
        "ext.models.bedrock._client",
        also=[("pydantic (which aioboto3 does not use; ext-core is built on it)", "pydantic.main")],
    )


def main(argv: Sequence[str] | None = None) -> int:
    return chat_main(run, __doc__, argv)


if __name__ == "__main__":
    raise SystemExit(main())
