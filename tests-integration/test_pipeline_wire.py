"""ext-pipeline's chat pipeline over the wire: every built-in middleware around the real OpenAI client (the openai SDK
over a real socket) against ext-testing's OpenAI-protocol loopback server, streams and cancellation included.

`TestPipelineConformance` runs the shared chat-client conformance suite against a built pipeline (logging, retry
and a user middleware around the client, which itself does not retry): a built client is a client.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, ClassVar

import openai
import pytest
from pydantic import SecretStr

from ext.core import (
    AIClientOptions,
    CancellationToken,
    ChatCompletionClient,
    Component,
    ComponentError,
    ConfigurationError,
    CreateResult,
    FunctionTool,
    RetryPolicy,
    StaticWorkbench,
    StreamChunk,
    UserMessage,
    load_component,
)
from ext.models.openai import OpenAIChatCompletionClient
from ext.pipeline import (
    CacheMiddleware,
    CacheStore,
    ChatCall,
    ChatClientBuilder,
    ChatItem,
    ChatMiddleware,
    CreateNext,
    InMemoryCacheStore,
    StreamNext,
    ToolCallFinished,
    ToolCallStarted,
    build_client,
    load_pipeline,
)
from ext.testing.conformance import CacheStoreConformance, ChatCompletionsConformance
from ext.testing.servers import Fault, LoopbackServer, OpenAIServer, Reply, ToolCallSpec

SECRET = "sk-pipeline-secret-0000"
HELLO = [UserMessage(content="Hi")]
FAST_RETRY = RetryPolicy(max_retries=2, multiplier=0.0, jitter=0.0)


class Passthrough(ChatMiddleware):
    """A user middleware that counts what passes through it."""

    def __init__(self) -> None:
        self.creates = 0
        self.streams = 0

    async def create(self, call: ChatCall, next: CreateNext) -> CreateResult:
        self.creates += 1
        return await next(call)

    async def create_stream(self, call: ChatCall, next: StreamNext) -> AsyncIterator[ChatItem]:
        self.streams += 1
        async for item in next(call):
            yield item


def bare(server: OpenAIServer, **kwargs: Any) -> OpenAIChatCompletionClient:
    return OpenAIChatCompletionClient(
        "gpt-4o-mini",
        base_url=server.base_url + "/v1",
        api_key=SECRET,
        bundled_encodings=False,
        max_retries=0,
        **kwargs,
    )


class TestPipelineConformance(ChatCompletionsConformance):
    rate_limit_error = openai.RateLimitError
    server_error = openai.InternalServerError
    connection_error = openai.APIConnectionError
    timeout_error = openai.APITimeoutError
    secret = SECRET
    unsupported_options: ClassVar[list[tuple[dict[str, Any], str]]] = [({"top_k": 5}, "top_k")]

    def make_server(self) -> LoopbackServer:
        return OpenAIServer(api_key=SECRET)

    def make_client(self, server: LoopbackServer, **kwargs: Any) -> ChatCompletionClient:
        max_retries = kwargs.pop("max_retries", 3)
        assert isinstance(server, OpenAIServer)
        return (
            ChatClientBuilder(bare(server, **kwargs))
            .use_logging(include_content=True)
            .use_retry(RetryPolicy(max_retries=max_retries))
            .use(Passthrough())
            .build()
        )

    async def test_dump_round_trip_loses_nothing(
        self, server: LoopbackServer, client: ChatCompletionClient, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        # `Passthrough` is defined in this module, not registered by an installed distribution, so this chain's
        # dump loads only with it allowed: loading says so, naming it. The same chain without it (every part
        # registered) goes through the suite's round trip.
        assert isinstance(client, Component)
        monkeypatch.setenv("OPENAI_API_KEY", SECRET)
        with pytest.raises(ComponentError, match=r"test_pipeline_wire\.Passthrough' is not a registered ext component"):
            load_component(client.dump_component().model_dump_json())
        assert isinstance(server, OpenAIServer)
        registered = (
            ChatClientBuilder(bare(server))
            .use_logging(include_content=True)
            .use_retry(RetryPolicy(max_retries=3))
            .build()
        )
        try:
            await super().test_dump_round_trip_loses_nothing(server, registered, monkeypatch)
        finally:
            await registered.close()


class TestInMemoryCacheStore(CacheStoreConformance):
    """The cache-store suite on ext-core's default store (ext-redis runs it on Redis)."""

    async def make_store(self) -> CacheStore:
        return InMemoryCacheStore(max_entries=16)

    def make_server(self) -> LoopbackServer:
        return OpenAIServer(api_key=SECRET)

    def make_client(self, server: LoopbackServer) -> ChatCompletionClient:
        assert isinstance(server, OpenAIServer)
        return bare(server)


@pytest.fixture
async def server() -> AsyncIterator[OpenAIServer]:
    async with OpenAIServer(api_key=SECRET) as srv:
        yield srv


# --- logging ------------------------------------------------------------------------------------------------


def chat_records(caplog: pytest.LogCaptureFixture) -> list[dict[str, Any]]:
    return [getattr(r, "chat") for r in caplog.records if hasattr(r, "chat")]  # noqa: B009


async def test_logging_over_the_wire(server: OpenAIServer, caplog: pytest.LogCaptureFixture) -> None:
    server.enqueue(
        Reply(text="four", prompt_tokens=12, completion_tokens=1),
        Reply(text="streamed words here", prompt_tokens=7, completion_tokens=3),
        Fault("bad_request"),
    )
    async with ChatClientBuilder(bare(server)).use_logging().build() as client:
        with caplog.at_level(logging.INFO, logger="ext.core.pipeline"):
            await client.create([UserMessage(content="what is 2+2, privately")])
            items = [item async for item in client.create_stream(HELLO)]
            with pytest.raises(openai.BadRequestError):
                await client.create(HELLO)
    assert "".join(i.content for i in items if isinstance(i, StreamChunk)) == "streamed words here"
    created, streamed, failed = chat_records(caplog)
    assert created["operation"] == "create" and created["provider"] == "openai" and created["model"] == "gpt-4o-mini"
    assert (created["prompt_tokens"], created["completion_tokens"], created["finish_reason"]) == (12, 1, "stop")
    assert streamed["operation"] == "stream" and streamed["completion_tokens"] == 3
    assert failed["error"] == "BadRequestError"
    assert SECRET not in caplog.text and "privately" not in caplog.text and "four" not in caplog.text


async def test_logging_records_a_cancelled_stream(server: OpenAIServer, caplog: pytest.LogCaptureFixture) -> None:
    server.enqueue(Reply(text="alpha beta gamma delta", stall_after_chunks=2))
    token = CancellationToken()
    got = asyncio.Event()
    async with ChatClientBuilder(bare(server)).use_logging().build() as client:

        async def consume() -> None:
            async for item in client.create_stream(HELLO, token):
                if isinstance(item, StreamChunk) and item.content:
                    got.set()

        with caplog.at_level(logging.INFO, logger="ext.core.pipeline"):
            task = asyncio.ensure_future(consume())
            await asyncio.wait_for(got.wait(), 10)
            token.cancel()
            with pytest.raises(asyncio.CancelledError):
                await asyncio.wait_for(task, 10)
    await asyncio.wait_for(server.requests[0].disconnected.wait(), 10)
    (record,) = chat_records(caplog)
    assert record["error"] == "CancelledError" and record["prompt_tokens"] is None


# --- cache ----------------------------------------------------------------------------------------------------


async def test_cache_over_the_wire(server: OpenAIServer) -> None:
    server.enqueue(Reply(text="cached words", prompt_tokens=9, completion_tokens=2), Reply(text="fresh"))
    async with ChatClientBuilder(bare(server)).use_cache(InMemoryCacheStore()).build() as client:
        first = await client.create(HELLO)
        hit = await client.create(HELLO)
        replay = [item async for item in client.create_stream(HELLO)]
        other = await client.create([UserMessage(content="something else")])
    assert len(server.requests) == 2
    assert (first.cached, hit.cached, hit.content, hit.usage) == (False, True, "cached words", first.usage)
    assert isinstance(replay[-1], CreateResult) and replay[-1].cached
    assert other.content == "fresh" and not other.cached


async def test_cache_stream_is_replayed_chunk_by_chunk(server: OpenAIServer) -> None:
    server.enqueue(Reply(text="one two three four"))
    async with ChatClientBuilder(bare(server)).use_cache().build() as client:
        live = [i.content for i in [x async for x in client.create_stream(HELLO)] if isinstance(i, StreamChunk)]
        again = [x async for x in client.create_stream(HELLO)]
    assert len(server.requests) == 1
    assert [i.content for i in again if isinstance(i, StreamChunk)] == live
    assert len([c for c in live if c]) == 4


async def test_cache_does_not_keep_a_cancelled_call(server: OpenAIServer) -> None:
    server.enqueue(Fault("hang"), Reply(text="second try"))
    cache = CacheMiddleware()
    async with ChatClientBuilder(bare(server)).use(cache).build() as client:
        token = CancellationToken()
        task = asyncio.ensure_future(client.create(HELLO, token))
        await server.wait_for_requests(1)
        token.cancel()
        with pytest.raises(asyncio.CancelledError):
            await asyncio.wait_for(task, 10)
        await asyncio.wait_for(server.requests[0].disconnected.wait(), 10)
        result = await client.create(HELLO)
    assert result.content == "second try" and not result.cached
    assert (cache.hits, cache.misses) == (0, 2)


# --- retry ----------------------------------------------------------------------------------------------------


async def test_retry_over_the_wire(server: OpenAIServer) -> None:
    server.enqueue(Fault("rate_limit", retry_after=0), Fault("server_error"), Reply(text="made it"))
    server.enqueue(Fault("rate_limit", retry_after=0), Reply(text="streamed after retry"))
    async with ChatClientBuilder(bare(server)).use_retry(FAST_RETRY).build() as client:
        assert (await client.create(HELLO)).content == "made it"
        items = [item async for item in client.create_stream(HELLO)]
        assert "".join(i.content for i in items if isinstance(i, StreamChunk)) == "streamed after retry"
        server.enqueue(Fault("bad_request"))
        with pytest.raises(openai.BadRequestError):
            await client.create(HELLO)
    assert len(server.requests) == 6


async def test_retry_gives_up_with_the_provider_error(server: OpenAIServer) -> None:
    server.enqueue(*[Fault("rate_limit", retry_after=0)] * 3)
    async with ChatClientBuilder(bare(server)).use_retry(FAST_RETRY).build() as client:
        with pytest.raises(openai.RateLimitError):
            await client.create(HELLO)
    assert len(server.requests) == 3


async def test_retry_wait_is_cancelled(server: OpenAIServer) -> None:
    server.enqueue(Fault("rate_limit", retry_after=3600))
    policy = RetryPolicy(max_retries=1, max_retry_after=3600)
    async with ChatClientBuilder(bare(server)).use_retry(policy).build() as client:
        token = CancellationToken()
        task = asyncio.ensure_future(client.create(HELLO, token))
        await server.wait_for_requests(1)
        token.cancel()
        with pytest.raises(asyncio.CancelledError):
            await asyncio.wait_for(task, 10)
    assert len(server.requests) == 1


async def test_one_retry_owner_the_server_sees_max_retries_plus_one_attempts(server: OpenAIServer) -> None:
    # The client as users build it, with its own default retries (max_retries=3): the pipeline's RetryMiddleware
    # turns them off, so the server sees 1 + 3 attempts, not (1 + 3) * (1 + 3) = 16.
    client = OpenAIChatCompletionClient(
        "gpt-4o-mini", base_url=server.base_url + "/v1", api_key=SECRET, bundled_encodings=False
    )
    assert client.retry_policy.max_retries == 3
    server.enqueue(*[Fault("rate_limit", retry_after=0)] * 4)
    server.enqueue(*[Fault("server_error")] * 4)
    async with (
        ChatClientBuilder(client).use_retry(RetryPolicy(max_retries=3, multiplier=0.0, jitter=0.0)).build() as pipeline
    ):
        with pytest.raises(openai.RateLimitError):
            await pipeline.create(HELLO)
        assert len(server.requests) == 4
        with pytest.raises(openai.InternalServerError):
            async for _ in pipeline.create_stream(HELLO):
                pass
        assert len(server.requests) == 8


async def test_without_a_retry_middleware_the_client_keeps_its_own_retries(server: OpenAIServer) -> None:
    client = OpenAIChatCompletionClient(
        "gpt-4o-mini", base_url=server.base_url + "/v1", api_key=SECRET, bundled_encodings=False, max_retries=2
    )
    server.enqueue(*[Fault("rate_limit", retry_after=0)] * 2, Reply(text="third time"))
    async with ChatClientBuilder(client).use_logging().build() as pipeline:
        assert (await pipeline.create(HELLO)).content == "third time"
    assert len(server.requests) == 3


# --- the tool loop --------------------------------------------------------------------------------------------


def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def divide(a: float, b: float) -> float:
    """Divide a by b."""
    return a / b


async def test_tool_loop_over_the_wire(server: OpenAIServer) -> None:
    server.enqueue(
        Reply(
            tool_calls=[
                ToolCallSpec("add", {"a": 2, "b": 3}, id="call_a"),
                ToolCallSpec("divide", {"a": 1, "b": 0}, id="call_b"),
            ],
            prompt_tokens=20,
            completion_tokens=8,
        ),
        Reply(text="2+3 is 5, and 1/0 is undefined", prompt_tokens=40, completion_tokens=9),
    )
    events: list[Any] = []
    tools = StaticWorkbench([FunctionTool(divide)])
    async with (
        ChatClientBuilder(bare(server))
        .use_tool_loop([FunctionTool(add), tools], on_event=events.append)
        .build() as client
    ):
        result = await client.create(HELLO)
    assert result.content == "2+3 is 5, and 1/0 is undefined"
    assert (result.usage.prompt_tokens, result.usage.completion_tokens) == (60, 17)
    first, second = (server.decode(r) for r in server.requests)
    assert sorted(first.tools) == ["add", "divide"]
    (assistant, *tool_messages) = [m for m in second.messages if m.role in ("assistant", "tool")]
    assert [c.name for c in assistant.tool_calls] == ["add", "divide"]
    sent = {r.call_id: r.content for m in tool_messages for r in m.tool_results}
    # OpenAI has no is_error field: the client marks an error result in its text.
    assert sent == {"call_a": "5", "call_b": "Error: ZeroDivisionError: float division by zero"}
    assert [type(e).__name__ for e in events].count("ToolCallFinished") == 2
    finished = {e.call.id: e.result.is_error for e in events if isinstance(e, ToolCallFinished)}
    assert finished == {"call_a": False, "call_b": True}


async def test_tool_loop_streams_every_turn(server: OpenAIServer) -> None:
    server.enqueue(
        Reply(text="let me add", tool_calls=[ToolCallSpec("add", {"a": 20, "b": 22}, id="c1")]),
        Reply(text="the sum is 42"),
    )
    shown: list[str] = []

    def on_event(event: Any) -> None:
        if isinstance(event, ToolCallStarted):
            shown.append(f"calling {event.call.name}({event.call.arguments})")
        elif isinstance(event, ToolCallFinished):
            shown.append(f"-> {event.result.content}")

    async with ChatClientBuilder(bare(server)).use_tool_loop([FunctionTool(add)], on_event=on_event).build() as client:
        items = [item async for item in client.create_stream(HELLO)]
    text = "".join(i.content for i in items if isinstance(i, StreamChunk))
    assert text == "let me addthe sum is 42"
    assert shown == ['calling add({"a":20,"b":22})', "-> 42"]
    final = items[-1]
    assert isinstance(final, CreateResult) and final.content == "the sum is 42"
    assert [server.decode(r).stream for r in server.requests] == [True, True]


async def test_tool_loop_cancel_during_a_tool_sends_nothing_more(server: OpenAIServer) -> None:
    started = asyncio.Event()
    stopped = asyncio.Event()

    async def slow(x: int) -> int:
        """Takes forever."""
        started.set()
        try:
            await asyncio.Event().wait()
        finally:
            stopped.set()
        return x

    server.enqueue(Reply(tool_calls=[ToolCallSpec("slow", {"x": 1}), ToolCallSpec("slow", {"x": 2})]))
    async with ChatClientBuilder(bare(server)).use_tool_loop([FunctionTool(slow)]).build() as client:
        token = CancellationToken()
        task = asyncio.ensure_future(client.create(HELLO, token))
        await asyncio.wait_for(started.wait(), 10)
        token.cancel()
        with pytest.raises(asyncio.CancelledError):
            await asyncio.wait_for(task, 10)
    assert stopped.is_set()
    assert len(server.requests) == 1


async def test_tool_loop_cancel_during_a_model_turn_closes_the_connection(server: OpenAIServer) -> None:
    server.enqueue(Reply(tool_calls=[ToolCallSpec("add", {"a": 1, "b": 1})]), Fault("hang"))
    async with ChatClientBuilder(bare(server)).use_tool_loop([FunctionTool(add)]).build() as client:
        token = CancellationToken()
        task = asyncio.ensure_future(client.create(HELLO, token))
        await server.wait_for_requests(2)
        token.cancel()
        with pytest.raises(asyncio.CancelledError):
            await asyncio.wait_for(task, 10)
    await asyncio.wait_for(server.requests[1].disconnected.wait(), 10)


async def test_tool_loop_stream_cancelled_in_the_second_turn(server: OpenAIServer) -> None:
    server.enqueue(
        Reply(tool_calls=[ToolCallSpec("add", {"a": 1, "b": 1})]),
        Reply(text="one two three four five", stall_after_chunks=2),
    )
    token = CancellationToken()
    seen: list[str] = []
    got = asyncio.Event()
    async with ChatClientBuilder(bare(server)).use_logging().use_tool_loop([FunctionTool(add)]).build() as client:

        async def consume() -> None:
            async for item in client.create_stream(HELLO, token):
                if isinstance(item, StreamChunk) and item.content:
                    seen.append(item.content)
                    got.set()

        task = asyncio.ensure_future(consume())
        await asyncio.wait_for(got.wait(), 10)
        token.cancel()
        with pytest.raises(asyncio.CancelledError):
            await asyncio.wait_for(task, 10)
    await asyncio.wait_for(server.requests[1].disconnected.wait(), 10)
    assert seen and "five" not in "".join(seen)


# --- everything together ---------------------------------------------------------------------------------------


async def test_full_pipeline(server: OpenAIServer, caplog: pytest.LogCaptureFixture) -> None:
    server.enqueue(
        Fault("rate_limit", retry_after=0),
        Reply(tool_calls=[ToolCallSpec("add", {"a": 1, "b": 2}, id="c1")], prompt_tokens=10, completion_tokens=2),
        Reply(text="3", prompt_tokens=15, completion_tokens=1),
    )
    client = (
        ChatClientBuilder(bare(server))
        .use_logging()
        .use_cache()
        .use_tool_loop([FunctionTool(add)])
        .use_retry(FAST_RETRY)
        .use_logging(logger="ext.core.pipeline.turns")
        .build()
    )
    async with client:
        with caplog.at_level(logging.INFO, logger="ext.core.pipeline"):
            first = await client.create(HELLO)
            again = await client.create(HELLO)
    assert (first.content, first.cached, again.cached) == ("3", False, True)
    assert (first.usage.prompt_tokens, first.usage.completion_tokens) == (25, 3)
    assert len(server.requests) == 3  # the rate-limited attempt, then two turns; the repeat came from the cache
    outer = [r.chat for r in caplog.records if r.name == "ext.core.pipeline"]  # type: ignore[attr-defined]
    turns = [r.chat for r in caplog.records if r.name == "ext.core.pipeline.turns"]  # type: ignore[attr-defined]
    assert [(r["operation"], r["cached"]) for r in outer] == [("create", False), ("create", True)]
    # The inner logger sits inside the retry: it sees the rate-limited attempt as its own call.
    assert [(r["operation"], r["turn"], r["error"]) for r in turns] == [
        ("create", 1, "RateLimitError"),
        ("create", 1, None),
        ("tool", 1, None),
        ("create", 2, None),
    ]
    assert json.loads(server.decode(server.requests[2]).raw["messages"][-1]["content"]) == 3


# --- building from configuration --------------------------------------------------------------------------------


async def test_build_client_from_options_and_a_provider_name(server: OpenAIServer) -> None:
    options = AIClientOptions(
        endpoint=server.base_url + "/v1",
        api_key=SecretStr(SECRET),
        default_model="gpt-4o-mini",
        timeout=5,
        max_retries=0,
    )
    client = build_client("openai", options, bundled_encodings=False)
    assert isinstance(client, OpenAIChatCompletionClient)
    server.enqueue(Reply(text="built from options"))
    async with client:
        assert (await client.create(HELLO)).content == "built from options"
    assert server.decode(server.requests[0]).model == "gpt-4o-mini"


async def test_build_client_from_the_environment(server: OpenAIServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EXT_AI_ENDPOINT", server.base_url + "/v1")
    monkeypatch.setenv("EXT_AI_API_KEY", SECRET)
    monkeypatch.setenv("EXT_AI_DEFAULT_MODEL", "gpt-4o")
    monkeypatch.setenv("EXT_AI_MAX_RETRIES", "0")
    client = build_client("openai", AIClientOptions.from_env(), bundled_encodings=False)
    server.enqueue(Reply(text="from the environment"))
    async with client:
        assert (await client.create(HELLO)).content == "from the environment"
    assert server.decode(server.requests[0]).model == "gpt-4o"
    assert server.requests[0].headers["authorization"] == f"Bearer {SECRET}"


def pipeline_document(server: OpenAIServer) -> dict[str, Any]:
    return {
        "client": {
            "provider": "openai",
            "options": {
                "endpoint": server.base_url + "/v1",
                "default_model": "gpt-4o-mini",
                "api_key_env": "EXT_PIPELINE_TEST_KEY",
                "max_retries": 0,
            },
            "args": {"bundled_encodings": False, "temperature": 0.25},
        },
        "middleware": [
            {"logging": {"level": "INFO", "logger": "ext.core.pipeline.from-file"}},
            {"cache": {"store": "memory", "max_entries": 10, "ttl": 60}},
            {"retry": {"max_retries": 2, "multiplier": 0, "jitter": 0}},
        ],
    }


async def test_load_a_pipeline_from_json(
    server: OpenAIServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("EXT_PIPELINE_TEST_KEY", SECRET)
    path = tmp_path / "pipeline.json"
    path.write_text(json.dumps(pipeline_document(server)))
    client = load_pipeline(path)
    assert [type(m).__name__ for m in client.middleware] == ["LoggingMiddleware", "CacheMiddleware", "RetryMiddleware"]
    server.enqueue(Fault("rate_limit", retry_after=0), Reply(text="from a file"))
    async with client:
        with caplog.at_level(logging.INFO, logger="ext.core.pipeline.from-file"):
            assert (await client.create(HELLO)).content == "from a file"
            assert (await client.create(HELLO)).cached
        dump = client.dump_component().model_dump_json()
    wire = server.decode(server.requests[-1])
    assert wire.options["temperature"] == 0.25
    assert server.requests[-1].headers["authorization"] == f"Bearer {SECRET}"
    assert len(chat_records(caplog)) == 2
    assert SECRET not in dump and "EXT_PIPELINE_TEST_KEY" in dump  # the dump names the variable, never the key


@pytest.mark.parametrize(
    ("entry", "config"),
    [
        ({}, {"max_entries": 1024, "ttl": 3600.0}),
        ({"store": "memory", "max_entries": 10}, {"max_entries": 10, "ttl": 3600.0}),
        ({"store": "memory", "store_ttl": 60}, {"max_entries": 1024, "ttl": 60.0}),
        ({"store_ttl": None}, {"max_entries": 1024, "ttl": None}),
        ({"store": {"max_entries": 5}}, {"max_entries": 5, "ttl": 3600.0}),
    ],
)
def test_a_memory_store_from_a_file_takes_the_store_defaults(
    server: OpenAIServer, monkeypatch: pytest.MonkeyPatch, entry: dict[str, Any], config: dict[str, Any]
) -> None:
    monkeypatch.setenv("EXT_PIPELINE_TEST_KEY", SECRET)
    document = pipeline_document(server)
    document["middleware"] = [{"cache": entry}]
    client = load_pipeline(document)
    (cache,) = client.middleware
    assert isinstance(cache, CacheMiddleware) and isinstance(cache.store, InMemoryCacheStore)
    assert cache.store.dump_component().config == config


async def test_load_a_pipeline_from_yaml(server: OpenAIServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import yaml  # PyYAML: the whole-workspace test environment has it (hatch.toml)

    monkeypatch.setenv("EXT_PIPELINE_TEST_KEY", SECRET)
    path = tmp_path / "pipeline.yaml"
    path.write_text(yaml.safe_dump(pipeline_document(server)))
    server.enqueue(Reply(text="from yaml"))
    async with load_pipeline(path) as client:
        assert (await client.create(HELLO)).content == "from yaml"


def test_a_key_in_the_file_is_refused(server: OpenAIServer) -> None:
    document = pipeline_document(server)
    document["client"]["options"]["api_key"] = SECRET
    with pytest.raises(ConfigurationError, match=r"client\.options\.api_key") as caught:
        load_pipeline(document)
    assert SECRET not in str(caught.value)


# --- ext-pipeline's README example, as written ------------------------------------------------------------------------

README = Path(__file__).resolve().parents[1] / "packages" / "ext-pipeline" / "README.md"


def readme_pipeline_example() -> str:
    text = README.read_text(encoding="utf-8")
    section = text[text.index("## Middleware around any client") :]
    start = section.index("```python\n") + len("```python\n")
    return section[start : section.index("```", start)]


async def test_the_readme_example_runs_as_written(server: OpenAIServer, tmp_path: Path) -> None:
    server.enqueue(
        Reply(tool_calls=[ToolCallSpec("get_weather", {"city": "Paris"})], prompt_tokens=30, completion_tokens=5),
        Reply(text="It is sunny and 21 degrees in Paris.", prompt_tokens=50, completion_tokens=9),
    )
    script = tmp_path / "example.py"
    script.write_text(readme_pipeline_example())
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "AZURE_OPENAI_"))}
    env.update(OPENAI_API_KEY=SECRET, OPENAI_BASE_URL=server.base_url + "/v1")
    process = await asyncio.create_subprocess_exec(
        sys.executable, str(script), env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    out, err = await asyncio.wait_for(process.communicate(), 60)
    assert process.returncode == 0, err.decode()
    assert out.decode().splitlines() == ["It is sunny and 21 degrees in Paris.", "tokens: 80 + 14", "cached: True"]
    assert len(server.requests) == 2
    sent = [r for m in server.decode(server.requests[1]).messages for r in m.tool_results]
    assert [r.content for r in sent] == ["Sunny and 21 degrees in Paris"]
    assert "operation=create" in err.decode() and SECRET not in err.decode()
