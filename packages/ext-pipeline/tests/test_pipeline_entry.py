"""Where a call enters the pipeline: its messages are validated once there, and the cache key and entries are
written with serializers that are always built, on every supported pydantic and in a fresh interpreter.

Message classes are declared with `defer_build=True`; until a class validates something in a process, its own
serializer is a placeholder that `pydantic_core.to_json` cannot use. Which classes are built is per process
state, so the crash cases run each in a fresh interpreter (`python -c`).
"""

from __future__ import annotations

import base64
import subprocess
import sys
import textwrap
from collections.abc import AsyncIterator
from typing import Any

import pytest

from ext.core import (
    AssistantMessage,
    BaseChatCompletionClient,
    ChatRequest,
    ConfigurationError,
    CreateResult,
    FunctionCall,
    FunctionExecutionResult,
    FunctionExecutionResultMessage,
    Image,
    ReasoningBlock,
    RequestUsage,
    StreamChunk,
    SystemMessage,
    UserMessage,
    dump_messages,
)
from ext.pipeline import ChatCall, ChatClientBuilder, ChatMiddleware, CreateNext

# One client for every fresh interpreter: its result is built with `model_construct`, as a provider's hot path
# builds it, so the stored entry's serializer is a placeholder too.
_CLIENT = """
import asyncio, json, sys
from ext.core import BaseChatCompletionClient, CreateResult, RequestUsage, UserMessage, load_messages
from ext.pipeline import ChatClientBuilder

class Fixed(BaseChatCompletionClient):
    provider_name = "fixed"
    calls = 0

    async def _create(self, request):
        Fixed.calls += 1
        usage = RequestUsage.model_construct(prompt_tokens=1, completion_tokens=1)
        return CreateResult.model_construct(finish_reason="stop", content="hi", usage=usage, cached=False)

    async def _stream(self, request):
        yield await self._create(request)
"""

_CASES = {
    "load_messages": "load_messages(json.dumps([{'type': 'UserMessage', 'content': 'hello'}]))",
    "dicts": "[{'type': 'UserMessage', 'content': 'hello'}]",
    "model_construct": "[UserMessage.model_construct(content='hello')]",
}


def _run_fresh(body: str) -> str:
    code = _CLIENT + textwrap.dedent(body)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout.strip()


@pytest.mark.parametrize("messages", sorted(_CASES))
def test_a_cached_pipeline_takes_every_message_form_in_a_fresh_interpreter(messages: str) -> None:
    # The case: ChatClientBuilder(client).use_cache().build().create(load_messages(text)) raised
    # PydanticSerializationError ('MockValSer' ...) on pydantic 2.9 to 2.13 before anything else validated.
    out = _run_fresh(
        f"""
        async def main():
            client = ChatClientBuilder(Fixed(model="m", max_retries=0)).use_cache().build()
            first = await client.create({_CASES[messages]})
            again = await client.create({_CASES[messages]})
            streamed = [item async for item in client.create_stream({_CASES[messages]})]
            print(first.content, first.cached, again.cached, streamed[-1].cached, Fixed.calls)

        asyncio.run(main())
        """
    )
    assert out == "hi False True True 1"


def test_the_cache_key_does_not_depend_on_what_the_process_built_before() -> None:
    # A key written by one process must be found by another (a shared Redis): it may not depend on which model
    # classes happen to be built already. One interpreter validates a message of each class first, one does not.
    key = """
        from ext.pipeline import CacheMiddleware, ChatCall
        call = ChatCall(load_messages('[{"type": "UserMessage", "content": "hello"}]'), client=Fixed(model="m"))
        print(CacheMiddleware().key(call))
        """
    warm = "\nUserMessage(content='warm-up').model_dump_json()\n"
    cold_key = _run_fresh(key)
    warm_key = _run_fresh(warm + textwrap.dedent(key))
    assert cold_key == warm_key and cold_key.startswith("ext-chat:")


_PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="
)


def test_the_fast_message_json_is_what_dump_messages_writes() -> None:
    # The cache key's fast path (each class's serializer built once, then `to_json` on the objects) against the
    # plain path (`dump_messages`, through the list adapter), on classes that nothing had built before.
    conversation = dump_messages(
        [
            SystemMessage(content="Be brief."),
            UserMessage(content=["What is this?", Image.from_bytes(_PNG)], source="me"),
            AssistantMessage(
                content=[FunctionCall(id="c1", name="look", arguments='{"q": "é ☃"}')],
                thought="let me look",
                reasoning=[ReasoningBlock(text="hm", signature="sig", provider="anthropic")],
            ),
            FunctionExecutionResultMessage(content=[FunctionExecutionResult(call_id="c1", name="look", content="x")]),
            AssistantMessage(content="A pixel."),
        ]
    )
    out = _run_fresh(
        f"""
        from pydantic_core import to_json
        from ext.core import dump_messages
        from ext.core._messages import ensure_serializers
        messages = load_messages({conversation!r})
        ensure_serializers(messages)
        print(to_json(messages).decode() == dump_messages(messages) == {conversation!r})
        """
    )
    assert out == "True"


class _Fixed(BaseChatCompletionClient):
    provider_name = "fixed"

    async def _create(self, request: ChatRequest) -> CreateResult:
        return CreateResult(
            finish_reason="stop", content="hi", usage=RequestUsage(prompt_tokens=1, completion_tokens=1)
        )

    async def _stream(self, request: ChatRequest) -> AsyncIterator[StreamChunk | CreateResult]:
        yield await self._create(request)


class Seen(ChatMiddleware):
    """Records the messages each call carries when it reaches this middleware."""

    def __init__(self) -> None:
        self.messages: list[list[Any]] = []

    async def create(self, call: ChatCall, next: CreateNext) -> CreateResult:
        self.messages.append(list(call.messages))
        return await next(call)


async def test_middlewares_see_validated_message_objects_not_dicts() -> None:
    seen = Seen()
    client = ChatClientBuilder(_Fixed(model="m", max_retries=0)).use(seen).build()
    await client.create([{"type": "UserMessage", "content": "hello", "source": "me"}])  # type: ignore[list-item]
    assert seen.messages == [[UserMessage(content="hello", source="me")]]
    assert type(seen.messages[0][0]) is UserMessage


async def test_an_invalid_message_is_refused_at_entry_naming_it() -> None:
    seen = Seen()
    client = ChatClientBuilder(_Fixed(model="m", max_retries=0)).use(seen).build()
    bad: Any = [{"type": "UserMessage", "content": "ok"}, {"type": "UserMessage"}]
    with pytest.raises(ConfigurationError, match=r"messages\[1\] is invalid: .*content"):
        await client.create(bad)
    with pytest.raises(ConfigurationError, match=r"messages\[1\] is invalid: .*content"):
        async for _ in client.create_stream(bad):
            pass
    with pytest.raises(ConfigurationError, match="messages must be a list of messages, got str"):
        await client.create("hello")  # type: ignore[arg-type]
    assert seen.messages == []  # refused before any middleware ran
