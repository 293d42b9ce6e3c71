"""The three stream rules, with an OpenAI stream cut after 10 text chunks and Anthropic as the fallback."""

from __future__ import annotations

from typing import Any

import pytest
from ext_resilience_support import anthropic_client, openai_client

from ext.core import CreateResult, ErrorKind, FallbackEvent, StreamChunk, UserMessage, classify_error
from ext.pipeline import ChatClientBuilder, ToolLoop
from ext.resilience import CONTINUE_PROMPT, AllClientsFailedError, FallbackMiddleware
from ext.testing.servers import AnthropicServer, Fault, OpenAIServer, Reply

Q = [UserMessage(content="Count to twenty.")]
PIECES = [f"w{i} " for i in range(20)]
SENT = "".join(PIECES[:10])
CUT = Reply(chunks=PIECES, cut_after_chunks=11)  # the role frame, then 10 text chunks, then the connection closes
BACKUP = "the backup's whole answer"
REST = "w10 w11 w12 w13 w14 w15 w16 w17 w18 w19"


async def collect(stream: Any) -> tuple[list[Any], BaseException | None]:
    items: list[Any] = []
    try:
        async for item in stream:
            items.append(item)
    except Exception as exc:
        return items, exc
    return items, None


def text_of(items: list[Any]) -> str:
    return "".join(i.content for i in items if isinstance(i, StreamChunk))


def pipeline(openai_server: OpenAIServer, anthropic_server: AnthropicServer, rule: str, **kwargs: Any) -> Any:
    fallback = FallbackMiddleware(
        [anthropic_client(anthropic_server)],
        stream=rule,  # type: ignore[arg-type]
        names=["primary", "backup"],
        **kwargs,
    )
    return ChatClientBuilder(openai_client(openai_server)).use(fallback).build()


async def test_before_first_chunk_keeps_the_text_sent_and_raises_the_cut(
    openai_server: OpenAIServer, anthropic_server: AnthropicServer
) -> None:
    openai_server.enqueue(CUT)
    async with pipeline(openai_server, anthropic_server, "before_first_chunk") as client:
        items, error = await collect(client.create_stream(Q))
    assert text_of(items) == SENT  # what came before the cut, as it came
    assert not any(isinstance(i, (FallbackEvent, CreateResult)) for i in items)
    assert error is not None
    found = classify_error(error)
    assert found is not None and found.kind is ErrorKind.CONNECTION
    assert len(anthropic_server.requests) == 0  # text had gone out: no switch


async def test_before_first_chunk_switches_on_an_error_before_any_text(
    openai_server: OpenAIServer, anthropic_server: AnthropicServer
) -> None:
    openai_server.enqueue(Fault("server_error"))
    anthropic_server.enqueue(Reply(text=BACKUP))
    async with pipeline(openai_server, anthropic_server, "before_first_chunk") as client:
        items, error = await collect(client.create_stream(Q))
    assert error is None
    events = [i for i in items if isinstance(i, FallbackEvent)]
    assert [(e.from_client, e.to_client, e.error_kind, e.text_sent) for e in events] == [
        ("primary", "backup", "server_error", 0)
    ]
    assert items.index(events[0]) == 0  # announced before the backup's chunks
    assert text_of(items) == BACKUP and items[-1].content == BACKUP


async def test_buffer_hides_the_broken_answer(openai_server: OpenAIServer, anthropic_server: AnthropicServer) -> None:
    openai_server.enqueue(CUT)
    anthropic_server.enqueue(Reply(text=BACKUP))
    async with pipeline(openai_server, anthropic_server, "buffer") as client:
        items, error = await collect(client.create_stream(Q))
    assert error is None
    assert text_of(items) == BACKUP  # nothing of the cut answer reached the caller
    assert isinstance(items[-1], CreateResult) and items[-1].content == BACKUP
    events = [i for i in items if isinstance(i, FallbackEvent)]
    assert [(e.error_kind, e.text_sent) for e in events] == [("connection", 0)]


async def test_continue_carries_on_from_the_text_already_sent(
    openai_server: OpenAIServer, anthropic_server: AnthropicServer
) -> None:
    openai_server.enqueue(CUT)
    anthropic_server.enqueue(Reply(text=REST))
    async with pipeline(openai_server, anthropic_server, "continue") as client:
        items, error = await collect(client.create_stream(Q))
    assert error is None
    events = [i for i in items if isinstance(i, FallbackEvent)]
    assert [(e.error_kind, e.text_sent) for e in events] == [("connection", len(SENT))]
    assert text_of(items[: items.index(events[0])]) == SENT
    assert text_of(items) == SENT + REST
    final = items[-1]
    assert isinstance(final, CreateResult) and final.content == SENT + REST
    asked = anthropic_server.decode(anthropic_server.requests[0])
    assert [(m.role, m.text) for m in asked.messages[-2:]] == [("assistant", SENT), ("user", CONTINUE_PROMPT)]


async def test_continue_goes_on_after_an_answer_cut_at_the_token_limit(
    openai_server: OpenAIServer, anthropic_server: AnthropicServer
) -> None:
    openai_server.enqueue(Reply(chunks=PIECES[:10], finish_reason="length"))
    anthropic_server.enqueue(Reply(text=REST))
    async with pipeline(openai_server, anthropic_server, "continue", when=["length"]) as client:
        items, error = await collect(client.create_stream(Q))
    assert error is None
    assert items[-1].content == SENT + REST and items[-1].finish_reason == "stop"


async def test_a_stream_where_every_client_fails_lists_the_attempts(
    openai_server: OpenAIServer, anthropic_server: AnthropicServer
) -> None:
    openai_server.enqueue(Fault("rate_limit", retry_after=60))
    anthropic_server.enqueue(Fault("overloaded"))
    async with pipeline(openai_server, anthropic_server, "buffer") as client:
        items, error = await collect(client.create_stream(Q))
    assert isinstance(error, AllClientsFailedError)
    assert [(a.client, a.kind) for a in error.attempts] == [
        ("primary", ErrorKind.RATE_LIMITED),
        ("backup", ErrorKind.OVERLOADED),
    ]
    assert text_of(items) == ""


@pytest.mark.parametrize("rule", ["before_first_chunk", "buffer", "continue"])
async def test_the_tool_loop_passes_the_switch_on(
    openai_server: OpenAIServer, anthropic_server: AnthropicServer, rule: str
) -> None:
    openai_server.enqueue(Fault("server_error"))
    anthropic_server.enqueue(Reply(text=BACKUP))
    fallback = FallbackMiddleware([anthropic_client(anthropic_server)], stream=rule)  # type: ignore[arg-type]
    client = ChatClientBuilder(openai_client(openai_server)).use(ToolLoop([])).use(fallback).build()
    async with client:
        items, error = await collect(client.create_stream(Q))
    assert error is None
    assert sum(isinstance(i, FallbackEvent) for i in items) == 1
    assert items[-1].content == BACKUP
