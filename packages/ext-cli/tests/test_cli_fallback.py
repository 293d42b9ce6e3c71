"""`ext chat` shows a fallback switch (an `ext.core.FallbackEvent` in the stream) on stderr, not in the answer."""

from __future__ import annotations

import io
from collections.abc import AsyncIterator

from ext_cli_support import KEY

from ext.cli._chat import ChatSettings, chat_turn
from ext.cli._output import Output
from ext.core import FallbackEvent, UserMessage
from ext.models.openai import OpenAIChatCompletionClient
from ext.pipeline import ChatCall, ChatClientBuilder, ChatItem, ChatMiddleware, StreamNext
from ext.testing.servers import OpenAIServer, Reply


class _Switched(ChatMiddleware):
    """Yields the event a fallback middleware yields when it switches, then the answer."""

    def create_stream(self, call: ChatCall, next: StreamNext) -> AsyncIterator[ChatItem]:
        return self._stream(call, next)

    async def _stream(self, call: ChatCall, next: StreamNext) -> AsyncIterator[ChatItem]:
        yield FallbackEvent(from_client="openai/main", to_client="openai/gpt-4o-mini", reason="server_error")
        async for item in next(call):
            yield item


async def test_a_switch_is_shown_on_stderr(server: OpenAIServer) -> None:
    server.enqueue(Reply(text="Paris."))
    bare = OpenAIChatCompletionClient("gpt-4o-mini", base_url=server.base_url + "/v1", api_key=KEY)
    out, err = io.StringIO(), io.StringIO()
    async with ChatClientBuilder(bare).use(_Switched()).build() as client:
        await chat_turn(
            client, [UserMessage(content="Capital?")], ChatSettings(model="openai:gpt-4o-mini"), Output(out, err)
        )
    assert out.getvalue() == "Paris.\n"
    assert "[fallback: openai/main -> openai/gpt-4o-mini (server_error)]" in err.getvalue()
