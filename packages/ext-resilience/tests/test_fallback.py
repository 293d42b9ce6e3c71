"""FallbackMiddleware over real SDK clients (openai, anthropic) on ext-testing's loopback servers, with the embedded
llama.cpp default model as the last fallback."""

from __future__ import annotations

import asyncio

import pytest
from ext_resilience_support import anthropic_client, local_model, openai_client

from ext.core import ConfigurationError, ErrorKind, FallbackEvent, RetryPolicy, UserMessage, classify_error
from ext.pipeline import ChatClientBuilder, RetryMiddleware
from ext.resilience import AllClientsFailedError, FallbackMiddleware
from ext.testing.servers import AnthropicServer, Fault, OpenAIServer, Reply

Q = [UserMessage(content="What is the capital of France? Answer in one sentence.")]


async def test_a_server_error_switches_to_the_next_client(
    openai_server: OpenAIServer, anthropic_server: AnthropicServer
) -> None:
    openai_server.enqueue(Fault("server_error"))
    anthropic_server.enqueue(Reply(text="Paris (from the backup)"))
    fallback = FallbackMiddleware([anthropic_client(anthropic_server)])
    async with ChatClientBuilder(openai_client(openai_server)).use(fallback).build() as client:
        result = await client.create(Q)
    assert result.content == "Paris (from the backup)"
    assert len(openai_server.requests) == 1  # the fallback owns retries: the SDK's own are off
    assert len(anthropic_server.requests) == 1


async def test_overloaded_529_switches(openai_server: OpenAIServer, anthropic_server: AnthropicServer) -> None:
    anthropic_server.enqueue(Fault("overloaded"))
    openai_server.enqueue(Reply(text="from openai"))
    fallback = FallbackMiddleware([openai_client(openai_server)])
    pipeline = ChatClientBuilder(anthropic_client(anthropic_server)).use(fallback).build()
    async with pipeline:
        result = await pipeline.create(Q)
    assert result.content == "from openai"
    assert anthropic_server.requests[0].completed  # it answered 529, once


async def test_a_long_retry_after_fails_over_at_once_past_a_retry_middleware(
    openai_server: OpenAIServer, anthropic_server: AnthropicServer
) -> None:
    openai_server.enqueue(Fault("rate_limit", retry_after=30))
    anthropic_server.enqueue(Reply(text="no waiting"))
    retry = RetryMiddleware(RetryPolicy(max_retries=3, max_retry_after=60))
    fallback = FallbackMiddleware([anthropic_client(anthropic_server)], max_retry_after=5)
    pipeline = ChatClientBuilder(openai_client(openai_server)).use(fallback).use(retry).build()
    async with pipeline:
        result = await asyncio.wait_for(pipeline.create(Q), 10)  # a guard: waiting out 30 s would fail it
    assert result.content == "no waiting"
    assert len(openai_server.requests) == 1


async def test_a_short_retry_after_is_waited_out_by_the_retry_middleware(
    openai_server: OpenAIServer, anthropic_server: AnthropicServer
) -> None:
    openai_server.enqueue(Fault("rate_limit", retry_after=0.05), Reply(text="after a short wait"))
    fallback = FallbackMiddleware([anthropic_client(anthropic_server)], max_retry_after=5)
    retry = RetryMiddleware(RetryPolicy(max_retries=2))
    pipeline = ChatClientBuilder(openai_client(openai_server)).use(fallback).use(retry).build()
    async with pipeline:
        result = await pipeline.create(Q)
    assert result.content == "after a short wait"
    assert len(openai_server.requests) == 2
    assert len(anthropic_server.requests) == 0


async def test_a_stall_times_out_and_switches(openai_server: OpenAIServer, anthropic_server: AnthropicServer) -> None:
    openai_server.enqueue(Fault("hang"))
    anthropic_server.enqueue(Reply(text="awake"))
    fallback = FallbackMiddleware([anthropic_client(anthropic_server)])
    pipeline = ChatClientBuilder(openai_client(openai_server, timeout=0.5)).use(fallback).build()
    async with pipeline:
        call = pipeline.create(Q)
        result = await asyncio.wait_for(call, 10)
    assert result.content == "awake"


async def test_the_switch_is_recorded_in_the_call_context(
    openai_server: OpenAIServer, anthropic_server: AnthropicServer
) -> None:
    seen: list[FallbackEvent] = []

    from ext.pipeline import ChatCall, ChatMiddleware, CreateNext

    class Watch(ChatMiddleware):
        async def create(self, call: ChatCall, next: CreateNext):  # type: ignore[no-untyped-def]
            result = await next(call)
            seen.extend(call.context.get("fallback_events", []))
            return result

    openai_server.enqueue(Fault("server_error"))
    anthropic_server.enqueue(Reply(text="ok"))
    fallback = FallbackMiddleware([anthropic_client(anthropic_server)], names=["primary", "backup"])
    pipeline = ChatClientBuilder(openai_client(openai_server)).use(Watch()).use(fallback).build()
    async with pipeline:
        await pipeline.create(Q)
    assert [(e.from_client, e.to_client, e.error_kind) for e in seen] == [("primary", "backup", "server_error")]


async def test_finish_reason_length_switches_when_asked(
    openai_server: OpenAIServer, anthropic_server: AnthropicServer
) -> None:
    openai_server.enqueue(Reply(text="Paris is the cap", finish_reason="length"))
    anthropic_server.enqueue(Reply(text="Paris is the capital of France."))
    fallback = FallbackMiddleware([anthropic_client(anthropic_server)], when=["length"])
    async with ChatClientBuilder(openai_client(openai_server)).use(fallback).build() as pipeline:
        result = await pipeline.create(Q)
    assert result.content == "Paris is the capital of France."


async def test_without_a_rule_a_cut_answer_is_returned(
    openai_server: OpenAIServer, anthropic_server: AnthropicServer
) -> None:
    openai_server.enqueue(Reply(text="Paris is the cap", finish_reason="length"))
    fallback = FallbackMiddleware([anthropic_client(anthropic_server)])
    async with ChatClientBuilder(openai_client(openai_server)).use(fallback).build() as pipeline:
        result = await pipeline.create(Q)
    assert (result.content, result.finish_reason) == ("Paris is the cap", "length")
    assert len(anthropic_server.requests) == 0


async def test_a_refused_answer_is_returned_when_nothing_better_comes(
    openai_server: OpenAIServer, anthropic_server: AnthropicServer
) -> None:
    openai_server.enqueue(Reply(text="", finish_reason="stop"))
    anthropic_server.enqueue(Fault("server_error"))
    fallback = FallbackMiddleware([anthropic_client(anthropic_server)], when=["empty"])
    async with ChatClientBuilder(openai_client(openai_server)).use(fallback).build() as pipeline:
        result = await pipeline.create(Q)
    assert result.content == ""
    assert len(anthropic_server.requests) == 1


async def test_a_context_window_error_goes_to_the_larger_client(
    openai_server: OpenAIServer, anthropic_server: AnthropicServer
) -> None:
    openai_server.enqueue(Fault("context_window"), Reply(text="read it all"))
    big = openai_client(openai_server, model="gpt-4.1")
    fallback = FallbackMiddleware([anthropic_client(anthropic_server)], context_window_client=big)
    async with ChatClientBuilder(openai_client(openai_server)).use(fallback).build() as pipeline:
        result = await pipeline.create(Q)
    assert result.content == "read it all"
    assert [r.json["model"] for r in openai_server.requests] == ["gpt-4o-mini", "gpt-4.1"]  # type: ignore[index]
    assert len(anthropic_server.requests) == 0  # the larger client first, not the next in the list


async def test_without_a_larger_client_a_context_window_error_is_raised_unchanged(
    openai_server: OpenAIServer, anthropic_server: AnthropicServer
) -> None:
    import openai

    openai_server.enqueue(Fault("context_window"))
    fallback = FallbackMiddleware([anthropic_client(anthropic_server)])
    async with ChatClientBuilder(openai_client(openai_server)).use(fallback).build() as pipeline:
        with pytest.raises(openai.BadRequestError) as caught:
            await pipeline.create(Q)
    found = classify_error(caught.value)
    assert found is not None and found.kind is ErrorKind.CONTEXT_WINDOW
    assert len(anthropic_server.requests) == 0


async def test_a_bad_request_is_no_reason_to_switch(
    openai_server: OpenAIServer, anthropic_server: AnthropicServer
) -> None:
    import openai

    openai_server.enqueue(Fault("bad_request"))
    fallback = FallbackMiddleware([anthropic_client(anthropic_server)])
    async with ChatClientBuilder(openai_client(openai_server)).use(fallback).build() as pipeline:
        with pytest.raises(openai.BadRequestError):
            await pipeline.create(Q)
    assert len(anthropic_server.requests) == 0


async def test_when_all_fail_one_error_lists_every_attempt_in_order(
    openai_server: OpenAIServer, anthropic_server: AnthropicServer
) -> None:
    openai_server.enqueue(Fault("server_error"), Fault("rate_limit", retry_after=60))
    anthropic_server.enqueue(Fault("overloaded"))
    second = openai_client(openai_server, model="gpt-4.1")
    fallback = FallbackMiddleware([anthropic_client(anthropic_server), second])
    async with ChatClientBuilder(openai_client(openai_server)).use(fallback).build() as pipeline:
        with pytest.raises(AllClientsFailedError) as caught:
            await pipeline.create(Q)
    attempts = caught.value.attempts
    assert [(a.client, a.kind) for a in attempts] == [
        ("openai/gpt-4o-mini", ErrorKind.SERVER_ERROR),
        ("anthropic/claude-sonnet-5-5", ErrorKind.OVERLOADED),
        ("openai/gpt-4.1", ErrorKind.RATE_LIMITED),
    ]
    text = str(caught.value)
    assert "1. openai/gpt-4o-mini: server_error" in text and "3. openai/gpt-4.1: rate_limited" in text
    assert caught.value.__cause__ is attempts[-1].error


async def test_the_embedded_model_is_the_last_fallback(
    openai_server: OpenAIServer, anthropic_server: AnthropicServer, local_model_path: str
) -> None:
    openai_server.enqueue(Fault("server_error"))
    anthropic_server.enqueue(Fault("overloaded"))
    fallback = FallbackMiddleware([anthropic_client(anthropic_server), local_model(local_model_path)])
    async with ChatClientBuilder(openai_client(openai_server)).use(fallback).build() as pipeline:
        result = await pipeline.create(Q)
    assert isinstance(result.content, str) and "Paris" in result.content


async def test_context_window_errors_of_each_real_sdk_are_classified(
    openai_server: OpenAIServer, anthropic_server: AnthropicServer, local_model_path: str
) -> None:
    openai_server.enqueue(Fault("context_window"))
    anthropic_server.enqueue(Fault("context_window"))
    errors: list[BaseException] = []
    for client in (openai_client(openai_server), anthropic_client(anthropic_server)):
        async with client:
            with pytest.raises(Exception) as caught:
                await client.create(Q)
            errors.append(caught.value)
    small = local_model(local_model_path, n_ctx=256)
    async with small:
        with pytest.raises(ValueError) as caught_local:
            await small.create([UserMessage(content="word " * 600)])
    errors.append(caught_local.value)
    kinds = [getattr(classify_error(e), "kind", None) for e in errors]
    assert kinds == [ErrorKind.CONTEXT_WINDOW] * 3


async def test_bad_arguments_are_refused_naming_the_field(openai_server: OpenAIServer) -> None:
    backup = openai_client(openai_server)
    with pytest.raises(ConfigurationError, match="clients must name at least one client"):
        FallbackMiddleware([])
    with pytest.raises(ConfigurationError, match="stream must be one of"):
        FallbackMiddleware([backup], stream="sideways")  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match=r"clients\[0\] must be a ChatCompletionClient"):
        FallbackMiddleware(["gpt-4o"])  # type: ignore[list-item]
    with pytest.raises(ConfigurationError, match="on: unknown error kind 'teapot'"):
        FallbackMiddleware([backup], on=["teapot"])
    with pytest.raises(ConfigurationError, match="when: unknown result rule 'short'"):
        FallbackMiddleware([backup], when=["short"])
    with pytest.raises(ConfigurationError, match="names must give 2 non-empty names"):
        FallbackMiddleware([backup], names=["only-one"])
    await backup.close()
