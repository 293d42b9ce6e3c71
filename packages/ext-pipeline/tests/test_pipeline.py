"""The chat pipeline and the tool loop, offline, through an in-process provider scripted per test.

The same middlewares run over the wire against real SDK clients in tests-integration/test_pipeline_wire.py.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator
from typing import Any

import pytest

from ext.core import (
    BaseChatCompletionClient,
    CancellationToken,
    ChatCompletionClient,
    ChatOptions,
    ChatRequest,
    ConfigurationError,
    CreateResult,
    FunctionCall,
    FunctionExecutionResult,
    FunctionExecutionResultMessage,
    FunctionTool,
    LLMMessage,
    RequestUsage,
    RetryPolicy,
    StaticWorkbench,
    StreamChunk,
    UserMessage,
    load_component,
)
from ext.pipeline import (
    RETRY_MAX_WAIT,
    CacheMiddleware,
    ChatCall,
    ChatClientBuilder,
    ChatItem,
    ChatMiddleware,
    ChatPipeline,
    CreateNext,
    InMemoryCacheStore,
    LoggingMiddleware,
    ModelTurn,
    RetryMiddleware,
    StreamNext,
    ToolCallFinished,
    ToolCallHeld,
    ToolCallStarted,
    ToolInvocation,
    ToolLoop,
    ToolNext,
)

USER = [UserMessage(content="hello")]


class Scripted(BaseChatCompletionClient):
    """A provider whose replies a test lists in order: a `CreateResult`, an exception, or `"hang"`."""

    provider_name = "scripted"

    def __init__(self, *script: Any, **kwargs: Any) -> None:
        super().__init__(model=kwargs.pop("model", "scripted-model"), max_retries=kwargs.pop("max_retries", 0))
        self.script = list(script)
        self.requests: list[ChatRequest] = []
        self.entered = asyncio.Event()
        self.requested = asyncio.Event()
        self.cancelled = asyncio.Event()
        self.closed_calls = 0

    def _next(self, request: ChatRequest) -> Any:
        self.requests.append(request)
        self.requested.set()
        item = self.script.pop(0)
        if isinstance(item, BaseException):
            raise item
        return item

    async def _create(self, request: ChatRequest) -> CreateResult:
        item = self._next(request)
        if item == "hang":
            self.entered.set()
            try:
                await asyncio.Event().wait()
            finally:
                self.cancelled.set()
        return item  # type: ignore[no-any-return]

    async def _stream(self, request: ChatRequest) -> AsyncIterator[StreamChunk | CreateResult]:
        item = self._next(request)
        if isinstance(item.content, str):
            for word in item.content.split(" "):
                yield StreamChunk(content=word)
        yield item

    async def _close(self) -> None:
        self.closed_calls += 1


def text(content: str, usage: tuple[int, int] = (3, 2)) -> CreateResult:
    return CreateResult(
        finish_reason="stop", content=content, usage=RequestUsage(prompt_tokens=usage[0], completion_tokens=usage[1])
    )


def calls(*items: tuple[str, str, dict[str, Any] | str], usage: tuple[int, int] = (5, 1)) -> CreateResult:
    content = [FunctionCall(id=i, name=n, arguments=a if isinstance(a, str) else json.dumps(a)) for i, n, a in items]
    return CreateResult(
        finish_reason="function_calls",
        content=content,
        usage=RequestUsage(prompt_tokens=usage[0], completion_tokens=usage[1]),
    )


def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def fail(reason: str) -> str:
    """Always fails."""
    raise RuntimeError(f"broken: {reason}")


ADD = FunctionTool(add)
FAIL = FunctionTool(fail)


def results_of(request: ChatRequest) -> list[FunctionExecutionResult]:
    last = request.messages[-1]
    assert isinstance(last, FunctionExecutionResultMessage)
    return last.content


# --- the pipeline is a client ----------------------------------------------------------------------------


async def test_built_pipeline_is_a_client_and_delegates() -> None:
    inner = Scripted(text("one"), text("two", (7, 4)))
    client = ChatClientBuilder(inner).use_logging().use_retry(RetryPolicy(max_retries=0)).build()
    assert isinstance(client, ChatCompletionClient)
    assert isinstance(client, ChatPipeline)
    assert client.capabilities is inner.capabilities
    assert client.count_tokens(USER) == inner.count_tokens(USER)
    assert client.remaining_tokens(USER) == inner.remaining_tokens(USER)
    assert (await client.create(USER)).content == "one"
    items = [item async for item in client.create_stream(USER)]
    assert [i.content for i in items if isinstance(i, StreamChunk)] == ["two"]
    assert isinstance(items[-1], CreateResult)
    assert client.actual_usage() == RequestUsage(prompt_tokens=7, completion_tokens=4)
    assert client.total_usage() == RequestUsage(prompt_tokens=10, completion_tokens=6)
    async with client:
        pass
    assert inner.closed_calls == 1
    await client.close()
    assert inner.closed_calls == 1


class ClosingOrder(ChatMiddleware):
    def __init__(self, name: str, closed: list[str], fail: bool = False) -> None:
        self.name, self.closed, self.fail = name, closed, fail

    async def close(self) -> None:
        self.closed.append(self.name)
        if self.fail:
            raise RuntimeError(f"{self.name} could not close")


async def test_close_closes_middleware_outermost_first_then_the_client_once_even_when_one_fails() -> None:
    closed: list[str] = []
    inner = Scripted()
    pipeline = ChatPipeline(inner, [ClosingOrder("outer", closed), ClosingOrder("inner", closed, fail=True)])
    with pytest.raises(RuntimeError, match="inner could not close"):
        await pipeline.close()
    assert closed == ["outer", "inner"]
    assert inner.closed_calls == 1  # the client is closed although a middleware failed
    await pipeline.close()
    assert closed == ["outer", "inner"]
    assert inner.closed_calls == 1


async def test_builder_rejects_what_is_not_middleware_or_client() -> None:
    with pytest.raises(ConfigurationError, match="ChatCompletionClient"):
        ChatClientBuilder(object())  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="ChatMiddleware"):
        ChatClientBuilder(Scripted()).use(lambda c, n: n(c))  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="at most one tool loop"):
        ChatClientBuilder(Scripted()).use_tool_loop([ADD]).use_tool_loop([ADD]).build()
    with pytest.raises(ConfigurationError, match="max_iterations"):
        ChatClientBuilder(Scripted()).use_tool_loop([ADD], max_iterations=0)
    with pytest.raises(ConfigurationError, match=r"tools\[0\]"):
        ChatClientBuilder(Scripted()).use_tool_loop([42])  # type: ignore[list-item]


class Trace(ChatMiddleware):
    """Records the order hooks run in."""

    def __init__(self, name: str, seen: list[str]) -> None:
        self.name = name
        self.seen = seen

    async def create(self, call: ChatCall, next: CreateNext) -> CreateResult:
        self.seen.append(f"{self.name}>create turn={call.turn}")
        result = await next(call)
        self.seen.append(f"{self.name}<create")
        return result

    async def create_stream(self, call: ChatCall, next: StreamNext) -> AsyncIterator[ChatItem]:
        self.seen.append(f"{self.name}>stream turn={call.turn}")
        async for item in next(call):
            yield item
        self.seen.append(f"{self.name}<stream")

    async def call_tool(self, invocation: ToolInvocation, next: ToolNext) -> FunctionExecutionResult:
        self.seen.append(f"{self.name}>tool {invocation.call.name} turn={invocation.turn}")
        return await next(invocation)

    async def run_tool_loop(self, call: ChatCall, next: CreateNext) -> CreateResult:
        self.seen.append(f"{self.name}>loop")
        result = await next(call)
        self.seen.append(f"{self.name}<loop")
        return result

    async def run_tool_loop_stream(self, call: ChatCall, next: StreamNext) -> AsyncIterator[ChatItem]:
        self.seen.append(f"{self.name}>loop-stream")
        async for item in next(call):
            yield item
        self.seen.append(f"{self.name}<loop-stream")


async def test_order_outer_middleware_sees_one_call_inner_sees_turns_and_tools() -> None:
    seen: list[str] = []
    inner = Scripted(calls(("c1", "add", {"a": 1, "b": 2})), text("3"))
    client = (
        ChatClientBuilder(inner)
        .use(Trace("outer", seen))
        .use_tool_loop([ADD])
        .use(Trace("a", seen))
        .use(Trace("b", seen))
        .build()
    )
    assert (await client.create(USER)).content == "3"
    assert seen == [
        "outer>create turn=None",
        "a>loop",
        "b>loop",
        "a>create turn=1",
        "b>create turn=1",
        "b<create",
        "a<create",
        "a>tool add turn=1",
        "b>tool add turn=1",
        "a>create turn=2",
        "b>create turn=2",
        "b<create",
        "a<create",
        "b<loop",
        "a<loop",
        "outer<create",
    ]


async def test_order_in_streams() -> None:
    seen: list[str] = []
    inner = Scripted(calls(("c1", "add", {"a": 1, "b": 2})), text("is 3"))
    client = ChatClientBuilder(inner).use(Trace("outer", seen)).use_tool_loop([ADD]).use(Trace("a", seen)).build()
    items = [item async for item in client.create_stream(USER)]
    assert [i.content for i in items if isinstance(i, StreamChunk)] == ["is", "3"]
    assert seen == [
        "outer>stream turn=None",
        "a>loop-stream",
        "a>stream turn=1",
        "a<stream",
        "a>tool add turn=1",
        "a>stream turn=2",
        "a<stream",
        "a<loop-stream",
        "outer<stream",
    ]


# --- the tool loop ---------------------------------------------------------------------------------------


async def test_tool_loop_runs_tools_until_the_answer_and_sums_usage() -> None:
    inner = Scripted(calls(("c1", "add", {"a": 2, "b": 40}), usage=(10, 3)), text("42", (20, 2)))
    client = ChatClientBuilder(inner).use_tool_loop([ADD]).build()
    result = await client.create(USER)
    assert result.content == "42"
    assert result.usage == RequestUsage(prompt_tokens=30, completion_tokens=5)
    assert client.total_usage() == RequestUsage(prompt_tokens=30, completion_tokens=5)
    assert [t["name"] for t in inner.requests[0].tools] == ["add"]
    second = inner.requests[1]
    assert [type(m).__name__ for m in second.messages] == [
        "UserMessage",
        "AssistantMessage",
        "FunctionExecutionResultMessage",
    ]
    assert results_of(second) == [FunctionExecutionResult(call_id="c1", name="add", content="42", is_error=False)]


async def test_several_calls_in_one_turn_run_concurrently_in_order() -> None:
    both_running = asyncio.Event()
    running = 0

    async def slow_echo(word: str) -> str:
        """Echo once every call of the turn is running."""
        nonlocal running
        running += 1
        if running == 3:
            both_running.set()
        await asyncio.wait_for(both_running.wait(), 5)
        return word.upper()

    inner = Scripted(
        calls(
            ("c1", "slow_echo", {"word": "a"}), ("c2", "slow_echo", {"word": "b"}), ("c3", "slow_echo", {"word": "c"})
        ),
        text("done"),
    )
    client = ChatClientBuilder(inner).use_tool_loop([FunctionTool(slow_echo)]).build()
    assert (await client.create(USER)).content == "done"
    assert [(r.call_id, r.content) for r in results_of(inner.requests[1])] == [("c1", "A"), ("c2", "B"), ("c3", "C")]


async def test_tool_errors_go_back_to_the_model() -> None:
    inner = Scripted(
        calls(
            ("c1", "fail", {"reason": "disk"}),
            ("c2", "add", "{not json"),
            ("c3", "nope", {}),
            ("c4", "add", {"a": "x"}),
        ),
        text("sorry"),
    )
    client = ChatClientBuilder(inner).use_tool_loop([ADD, FAIL]).build()
    assert (await client.create(USER)).content == "sorry"
    got = results_of(inner.requests[1])
    assert [r.is_error for r in got] == [True, True, True, True]
    assert got[0].content == "RuntimeError: broken: disk"
    assert "not valid JSON" in got[1].content
    assert got[2].content == "unknown tool 'nope'"
    assert "invalid arguments for tool 'add'" in got[3].content


async def test_workbench_tools_run_and_are_stopped_on_close() -> None:
    class Bench(StaticWorkbench):
        started = 0
        stopped = 0

        async def start(self) -> None:
            Bench.started += 1

        async def stop(self) -> None:
            Bench.stopped += 1

    bench = Bench([ADD, FAIL], tool_overrides={"add": {"name": "plus"}})
    inner = Scripted(calls(("c1", "plus", {"a": 1, "b": 1}), ("c2", "fail", {"reason": "x"})), text("ok"))
    client = ChatClientBuilder(inner).use_tool_loop([bench]).build()
    assert (await client.create(USER)).content == "ok"
    assert sorted(t["name"] for t in inner.requests[0].tools) == ["fail", "plus"]
    got = results_of(inner.requests[1])
    assert [(r.name, r.content, r.is_error) for r in got] == [
        ("plus", "2", False),
        ("fail", "RuntimeError: broken: x", True),
    ]
    assert Bench.started == 1
    await client.close()
    assert Bench.stopped == 1


async def test_max_iterations_returns_the_last_calls_unrun(caplog: pytest.LogCaptureFixture) -> None:
    inner = Scripted(*[calls((f"c{i}", "add", {"a": i, "b": 0})) for i in range(3)])
    client = ChatClientBuilder(inner).use_tool_loop([ADD], max_iterations=2).build()
    with caplog.at_level(logging.WARNING, logger="ext.pipeline._tool_loop"):
        result = await client.create(USER)
    assert result.finish_reason == "function_calls"
    assert isinstance(result.content, list) and result.content[0].id == "c1"
    assert len(inner.requests) == 2
    assert result.usage == RequestUsage(prompt_tokens=10, completion_tokens=2)
    assert "max_iterations=2" in caplog.text


async def test_tool_choice_applies_to_the_first_turn_only() -> None:
    inner = Scripted(calls(("c1", "add", {"a": 1, "b": 2})), text("3"))
    client = ChatClientBuilder(inner).use_tool_loop([ADD]).build()
    await client.create(USER, tool_choice="required")
    assert [r.tool_choice for r in inner.requests] == ["required", "auto"]


async def test_a_call_to_a_schema_only_tool_is_handed_back_to_the_caller() -> None:
    inner = Scripted(calls(("c1", "lookup", {"q": "x"})))
    client = ChatClientBuilder(inner).use_tool_loop([ADD]).build()
    result = await client.create(USER, tools=[{"name": "lookup", "parameters": {"type": "object"}}])
    assert isinstance(result.content, list) and result.content[0].name == "lookup"
    assert len(inner.requests) == 1


async def test_events_report_each_turn_and_tool_call() -> None:
    events: list[Any] = []

    async def on_event(event: Any) -> None:
        events.append(event)

    inner = Scripted(calls(("c1", "add", {"a": 1, "b": 2})), text("three is 3"))
    client = ChatClientBuilder(inner).use_tool_loop([ADD], on_event=on_event).build()
    items = [item async for item in client.create_stream(USER)]
    assert [i.content for i in items if isinstance(i, StreamChunk)] == ["three", "is", "3"]
    final = items[-1]
    assert isinstance(final, CreateResult) and final.content == "three is 3"
    assert final.usage == RequestUsage(prompt_tokens=8, completion_tokens=3)
    assert [type(e).__name__ for e in events] == ["ModelTurn", "ToolCallStarted", "ToolCallFinished", "ModelTurn"]
    assert isinstance(events[1], ToolCallStarted) and events[1].call.name == "add"
    assert isinstance(events[2], ToolCallFinished) and events[2].result.content == "3"
    assert isinstance(events[3], ModelTurn) and events[3].turn == 2


async def test_cancel_stops_the_tools_in_flight() -> None:
    started = asyncio.Event()
    stopped = asyncio.Event()

    async def wait_forever(x: int) -> int:
        """Never returns."""
        started.set()
        try:
            await asyncio.Event().wait()
        finally:
            stopped.set()
        return x

    inner = Scripted(calls(("c1", "wait_forever", {"x": 1}), ("c2", "wait_forever", {"x": 2})), text("never"))
    client = ChatClientBuilder(inner).use_tool_loop([FunctionTool(wait_forever)]).build()
    token = CancellationToken()
    task = asyncio.create_task(client.create(USER, token))
    await asyncio.wait_for(started.wait(), 5)
    token.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(task, 5)
    assert stopped.is_set()
    assert len(inner.requests) == 1  # no further model turn


async def test_cancel_stops_the_model_call_in_the_loop() -> None:
    inner = Scripted(calls(("c1", "add", {"a": 1, "b": 2})), "hang")
    client = ChatClientBuilder(inner).use_tool_loop([ADD]).build()
    token = CancellationToken()
    task = asyncio.create_task(client.create(USER, token))
    await asyncio.wait_for(inner.entered.wait(), 5)
    token.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(task, 5)
    assert inner.cancelled.is_set()


# --- logging and retry -----------------------------------------------------------------------------------


async def test_logging_one_record_per_call_without_content(caplog: pytest.LogCaptureFixture) -> None:
    inner = Scripted(text("secret answer", (4, 3)), RuntimeError("boom"))
    client = ChatClientBuilder(inner).use_logging().build()
    with caplog.at_level(logging.INFO, logger="ext.core.pipeline"):
        await client.create([UserMessage(content="private question")])
        with pytest.raises(RuntimeError):
            await client.create(USER)
    records = [r for r in caplog.records if r.name == "ext.core.pipeline"]
    assert len(records) == 2
    ok, failed = (r.chat for r in records)  # type: ignore[attr-defined]
    assert ok["provider"] == "scripted" and ok["model"] == "scripted-model"
    assert (ok["prompt_tokens"], ok["completion_tokens"], ok["finish_reason"]) == (4, 3, "stop")
    assert ok["error"] is None and ok["latency_ms"] >= 0
    assert failed["error"] == "RuntimeError" and records[1].levelno == logging.WARNING
    assert "private question" not in caplog.text and "secret answer" not in caplog.text


async def test_logging_with_content(caplog: pytest.LogCaptureFixture) -> None:
    client = ChatClientBuilder(Scripted(text("the answer"))).use_logging(include_content=True).build()
    with caplog.at_level(logging.INFO, logger="ext.core.pipeline"):
        await client.create([UserMessage(content="the question")])
    (record,) = [r for r in caplog.records if r.name == "ext.core.pipeline"]
    assert "the question" in record.chat["messages"]  # type: ignore[attr-defined]
    assert record.chat["content"] == "the answer"  # type: ignore[attr-defined]


class Transient(Exception):
    status_code = 503


async def test_retry_middleware_retries_transient_errors() -> None:
    inner = Scripted(Transient(), Transient(), text("finally"))
    client = ChatClientBuilder(inner).use_retry(RetryPolicy(max_retries=2, multiplier=0.0, jitter=0.0)).build()
    assert (await client.create(USER)).content == "finally"
    assert len(inner.requests) == 3
    inner.script = [Transient(), Transient(), Transient()]
    with pytest.raises(Transient):
        await client.create(USER)


async def test_retry_middleware_retries_a_stream_before_its_first_item() -> None:
    inner = Scripted(Transient(), text("a b"))
    client = ChatClientBuilder(inner).use_retry(RetryPolicy(max_retries=1, multiplier=0.0, jitter=0.0)).build()
    items = [item async for item in client.create_stream(USER)]
    assert [i.content for i in items if isinstance(i, StreamChunk)] == ["a", "b"]


async def test_retry_wait_is_cut_short_by_cancel() -> None:
    inner = Scripted(Transient(), text("never"))
    client = ChatClientBuilder(inner).use_retry(RetryPolicy(max_retries=1, multiplier=3600.0)).build()
    token = CancellationToken()
    task = asyncio.create_task(client.create(USER, token))
    await asyncio.wait_for(inner.requested.wait(), 5)
    token.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(task, 5)


class _Headers:
    headers = {"retry-after": "30"}


class LongWait(Exception):
    status_code = 429
    response = _Headers()


class _MaxWait(ChatMiddleware):
    """Puts RETRY_MAX_WAIT in the call's context, as a fallback placed before the retry does."""

    async def create(self, call: ChatCall, next: CreateNext) -> CreateResult:
        call.context[RETRY_MAX_WAIT] = 5.0
        return await next(call)


async def test_retry_gives_up_at_once_on_a_wait_longer_than_the_calls_max_wait() -> None:
    inner = Scripted(LongWait(), text("after half a minute"))
    client = ChatClientBuilder(inner).use(_MaxWait()).use_retry(RetryPolicy(max_retries=2)).build()
    with pytest.raises(LongWait):
        await asyncio.wait_for(client.create(USER), 10)  # a guard: waiting out the 30 s would fail it
    assert len(inner.requests) == 1


# --- components --------------------------------------------------------------------------------------------


async def test_pipeline_dump_and_load_round_trip() -> None:
    pipeline = (
        ChatClientBuilder(Scripted())
        .use_logging(logger="my.app", include_content=True)
        .use_retry(RetryPolicy(max_retries=5, multiplier=0.5))
        .use_tool_loop([StaticWorkbench([])], max_iterations=4)
        .build()
    )
    with pytest.raises(Exception, match="Scripted"):
        pipeline.dump_component()  # the scripted client is not a component
    dumps = [m.dump_component() for m in pipeline.middleware]
    assert [d.provider for d in dumps] == [
        "ext.pipeline.LoggingMiddleware",
        "ext.pipeline.RetryMiddleware",
        "ext.pipeline.ToolLoop",
    ]
    loaded = [load_component(d, ChatMiddleware) for d in dumps]
    assert isinstance(loaded[0], LoggingMiddleware) and loaded[0].dump_component() == dumps[0]
    assert isinstance(loaded[1], RetryMiddleware) and loaded[1].policy.max_retries == 5
    assert isinstance(loaded[2], ToolLoop) and loaded[2].max_iterations == 4


def test_logging_middleware_dumps_its_arguments_as_checked() -> None:
    # A Logger object dumps as its name, level names as numbers: the config is built once, from the checked values.
    middleware = LoggingMiddleware(logger=logging.getLogger("my.app"), level="debug", error_level=40)
    assert middleware.dump_component().config == {
        "logger": "my.app",
        "level": logging.DEBUG,
        "error_level": logging.ERROR,
        "include_content": False,
    }
    with pytest.raises(ConfigurationError, match="include_content must be a bool, got str"):
        LoggingMiddleware(include_content="yes")  # type: ignore[arg-type]


# --- cache -------------------------------------------------------------------------------------------------


async def test_cache_serves_an_identical_request_with_cached_true() -> None:
    inner = Scripted(text("first", (9, 9)), text("second"))
    client = ChatClientBuilder(inner).use_cache().build()
    one = await client.create(USER)
    as_dict = [{"type": "UserMessage", "content": "hello"}]
    two = await client.create(as_dict)  # type: ignore[arg-type]  # the same request, as a dict
    assert (one.content, one.cached) == ("first", False)
    assert (two.content, two.cached) == ("first", True)
    assert two.usage == one.usage
    assert len(inner.requests) == 1
    assert client.total_usage() == RequestUsage(prompt_tokens=9, completion_tokens=9)  # the hit spent nothing
    three = await client.create(USER, options={"temperature": 0.5})  # another request
    assert three.content == "second" and not three.cached


async def test_cache_key_covers_messages_tools_options_model_and_json_output() -> None:
    cache = CacheMiddleware()
    client = Scripted()
    base = ChatCall(USER, client=client)
    keys = {
        cache.key(base),
        cache.key(base.replace(messages=[UserMessage(content="other")])),
        cache.key(base.replace(tools=[ADD])),
        cache.key(base.replace(tools=[ADD], tool_choice="required")),
        cache.key(base.replace(options=ChatOptions(temperature=0.1))),
        cache.key(base.replace(options={"model_id": "other-model"})),
        cache.key(base.replace(json_output=True)),
        cache.key(base.replace(extra_create_args={"user": "u1"})),
        cache.key(base.replace(client=Scripted(model="another"))),
    }
    assert len(keys) == 9
    assert cache.key(base) == cache.key(base.replace(options=ChatOptions(), tools=[]))


async def test_cache_streams_replay_chunk_by_chunk() -> None:
    inner = Scripted(text("alpha beta gamma"))
    client = ChatClientBuilder(inner).use_cache().build()
    first = [item async for item in client.create_stream(USER)]
    again = [item async for item in client.create_stream(USER)]
    assert [i.content for i in again if isinstance(i, StreamChunk)] == ["alpha", "beta", "gamma"]
    assert isinstance(again[-1], CreateResult) and again[-1].cached and again[-1].content == "alpha beta gamma"
    assert isinstance(first[-1], CreateResult) and not first[-1].cached
    created = await client.create(USER)  # a stream's entry answers create too
    assert created.cached and len(inner.requests) == 1


async def test_cache_does_not_store_errors_cancellations_or_streams_left_early() -> None:
    inner = Scripted(RuntimeError("boom"), text("a b c"), text("after"))
    cache = CacheMiddleware()
    client = ChatClientBuilder(inner).use(cache).build()
    with pytest.raises(RuntimeError):
        await client.create(USER)
    stream = client.create_stream(USER)
    async for _item in stream:
        break
    await stream.aclose()  # type: ignore[attr-defined]
    assert len(cache.store) == 0  # type: ignore[arg-type]
    assert (await client.create(USER)).content == "after"
    assert len(cache.store) == 1  # type: ignore[arg-type]


async def test_cache_skips_tool_turns_when_asked() -> None:
    for cache_tool_turns, stored in ((True, 2), (False, 1)):
        inner = Scripted(calls(("c1", "add", {"a": 1, "b": 2})), text("3"))
        cache = CacheMiddleware(cache_tool_turns=cache_tool_turns)
        client = ChatClientBuilder(inner).use_tool_loop([ADD]).use(cache).build()
        assert (await client.create(USER)).content == "3"
        assert len(cache.store) == stored  # type: ignore[arg-type]


async def test_in_memory_store_size_and_ttl_limits(monkeypatch: pytest.MonkeyPatch) -> None:
    now = [1000.0]
    monkeypatch.setattr("ext.pipeline._cache.time.monotonic", lambda: now[0])
    store = InMemoryCacheStore(max_entries=2, ttl=10)
    await store.set("a", b"1")
    await store.set("b", b"2")
    assert await store.get("a") == b"1"  # a is now the most recently used
    await store.set("c", b"3")
    assert (await store.get("b"), await store.get("a"), await store.get("c")) == (None, b"1", b"3")
    await store.set("short", b"4", ttl=1)
    now[0] += 1.5
    assert await store.get("short") is None
    assert await store.get("c") == b"3"
    now[0] += 10
    assert await store.get("c") is None
    with pytest.raises(ConfigurationError, match="max_entries"):
        InMemoryCacheStore(max_entries=0)


async def test_in_memory_store_defaults_to_1024_entries_of_one_hour(monkeypatch: pytest.MonkeyPatch) -> None:
    now = [1000.0]
    monkeypatch.setattr("ext.pipeline._cache.time.monotonic", lambda: now[0])
    store = InMemoryCacheStore()
    assert store.dump_component().config == {"max_entries": 1024, "ttl": 3600.0}
    forever = InMemoryCacheStore(ttl=None)
    for each in (store, forever):
        await each.set("k", b"v")
    now[0] += 3599
    assert (await store.get("k"), await forever.get("k")) == (b"v", b"v")
    now[0] += 2
    assert (await store.get("k"), await forever.get("k")) == (None, b"v")
    for key in range(1025):
        await store.set(str(key), b"x")
    assert len(store) == 1024 and await store.get("0") is None and await store.get("1024") == b"x"
    default = CacheMiddleware().store
    assert isinstance(default, InMemoryCacheStore) and default.dump_component().config["ttl"] == 3600.0
    for bad in (0, -1, True, "60"):
        with pytest.raises(ConfigurationError, match="ttl must be > 0 seconds or None"):
            InMemoryCacheStore(ttl=bad)  # type: ignore[arg-type]


class BrokenStore:
    """A store whose backend is gone."""

    def __init__(self) -> None:
        self.broken = True
        self.data: dict[str, bytes] = {}

    async def get(self, key: str) -> bytes | None:
        if self.broken:
            raise ConnectionError("store is down")
        return self.data.get(key)

    async def set(self, key: str, value: bytes, ttl: float | None = None) -> None:
        if self.broken:
            raise ConnectionError("store is down")
        self.data[key] = value

    async def close(self) -> None:
        pass


async def test_a_failing_store_serves_uncached_and_logs_once(caplog: pytest.LogCaptureFixture) -> None:
    store = BrokenStore()
    inner = Scripted(text("a"), text("b"), text("c"))
    client = ChatClientBuilder(inner).use_cache(store).build()
    with caplog.at_level(logging.INFO, logger="ext.pipeline._cache"):
        assert (await client.create(USER)).content == "a"
        assert (await client.create(USER)).content == "b"
        store.broken = False
        assert (await client.create(USER)).content == "c"
        assert (await client.create(USER)).cached
    messages = [r.getMessage() for r in caplog.records if r.name == "ext.pipeline._cache"]
    assert len([m for m in messages if "failed" in m]) == 1
    assert len([m for m in messages if "is back" in m]) == 1


async def test_cache_components_round_trip() -> None:
    cache = CacheMiddleware(InMemoryCacheStore(max_entries=7, ttl=30), ttl=5, cache_tool_turns=False)
    dump = cache.dump_component()
    loaded = load_component(dump, ChatMiddleware)
    assert isinstance(loaded, CacheMiddleware) and loaded.dump_component() == dump
    assert isinstance(loaded.store, InMemoryCacheStore)
    with pytest.raises(ConfigurationError, match="CacheStore"):
        CacheMiddleware(object())  # type: ignore[arg-type]


async def test_structured_output_hit_is_parsed_again() -> None:
    from pydantic import BaseModel

    class City(BaseModel):
        name: str

    inner = Scripted(text('{"name": "Paris"}'))
    client = ChatClientBuilder(inner).use_cache().build()
    first = await client.create(USER, json_output=City)
    hit = await client.create(USER, json_output=City)
    assert hit.cached and isinstance(hit.parsed, City) and hit.parsed == first.parsed


async def test_a_tracing_middleware_after_the_loop_sees_the_loop_as_parent_of_every_call() -> None:
    """The guarantee a telemetry middleware relies on: a context variable set in run_tool_loop is seen by every
    model call and every tool call of the loop, the concurrent ones included, and a create's own span is not."""
    import contextvars

    current: contextvars.ContextVar[str | None] = contextvars.ContextVar("current", default=None)
    spans: list[tuple[str, str | None]] = []

    class Tracer(ChatMiddleware):
        async def run_tool_loop(self, call: ChatCall, next: CreateNext) -> CreateResult:
            token = current.set("loop")
            try:
                return await next(call)
            finally:
                current.reset(token)

        async def create(self, call: ChatCall, next: CreateNext) -> CreateResult:
            spans.append((f"model turn {call.turn}", current.get()))
            token = current.set(f"model {call.turn}")
            try:
                return await next(call)
            finally:
                current.reset(token)

        async def call_tool(self, invocation: ToolInvocation, next: ToolNext) -> FunctionExecutionResult:
            spans.append((f"tool {invocation.call.id}", current.get()))
            return await next(invocation)

    inner = Scripted(calls(("c1", "add", {"a": 1, "b": 2}), ("c2", "add", {"a": 3, "b": 4})), text("3 and 7"))
    client = ChatClientBuilder(inner).use_tool_loop([ADD]).use(Tracer()).build()
    assert (await client.create(USER)).content == "3 and 7"
    assert sorted(spans) == [
        ("model turn 1", "loop"),
        ("model turn 2", "loop"),
        ("tool c1", "loop"),
        ("tool c2", "loop"),
    ]
    assert current.get() is None


# --- holding calls and continuing an interrupted turn (the agent's hooks) ----------------------------------


async def test_hold_keeps_a_call_back_runs_the_others_and_stops_the_loop() -> None:
    events: list[Any] = []
    ran: list[int] = []

    def count(a: int, b: int) -> int:
        """Add and record."""
        ran.append(a)
        return a + b

    tool = FunctionTool(count, name="add")
    inner = Scripted(calls(("c1", "add", {"a": 1, "b": 2}), ("c2", "add", {"a": 100, "b": 1})))
    client = (
        ChatClientBuilder(inner)
        .use_tool_loop([tool], on_event=events.append, hold=lambda inv: json.loads(inv.call.arguments)["a"] >= 100)
        .build()
    )
    result = await client.create(USER)
    assert ran == [1]  # the held call did not run
    assert result.finish_reason == "function_calls"
    assert [fc.id for fc in result.content] == ["c2"]  # type: ignore[union-attr]
    assert len(inner.requests) == 1  # the loop stopped instead of asking the model again
    assert [type(e).__name__ for e in events] == ["ModelTurn", "ToolCallHeld", "ToolCallStarted", "ToolCallFinished"]
    assert isinstance(events[1], ToolCallHeld) and events[1].call.id == "c2"


async def test_an_interrupted_turn_runs_only_the_calls_without_a_result() -> None:
    ran: list[int] = []

    async def count(a: int, b: int) -> int:
        """Add and record."""
        ran.append(a)
        return a + b

    tool = FunctionTool(count, name="add")
    answer = calls(("c1", "add", {"a": 1, "b": 2}), ("c2", "add", {"a": 5, "b": 5}), ("c3", "add", {"a": 7, "b": 0}))
    done = FunctionExecutionResult(call_id="c2", name="add", content="10", is_error=False)
    history: list[LLMMessage] = [
        UserMessage(content="sum them", source="user"),
        answer.to_assistant_message(),
        FunctionExecutionResultMessage(content=[done]),
    ]
    for stream in (False, True):
        ran.clear()
        inner = Scripted(text("done"))
        client = ChatClientBuilder(inner).use_tool_loop([tool]).build()
        if stream:
            items = [item async for item in client.create_stream(history)]
            result = items[-1]
        else:
            result = await client.create(history)
        assert isinstance(result, CreateResult) and result.content == "done"
        assert sorted(ran) == [1, 7]  # c2 had a result: it never runs again
        sent = inner.requests[0].messages
        assert [type(m).__name__ for m in sent] == ["UserMessage", "AssistantMessage", "FunctionExecutionResultMessage"]
        assert [r.call_id for r in results_of(inner.requests[0])] == ["c1", "c2", "c3"]  # in the order of the calls
        assert [r.content for r in results_of(inner.requests[0])] == ["3", "10", "7"]


async def test_an_unanswered_turn_at_the_end_runs_before_the_model_is_asked_and_hold_applies() -> None:
    ran: list[int] = []

    def count(a: int, b: int) -> int:
        """Add and record."""
        ran.append(a)
        return a + b

    tool = FunctionTool(count, name="add")
    answer = calls(("c1", "add", {"a": 1, "b": 2}), ("c2", "add", {"a": 2, "b": 2}))
    history: list[LLMMessage] = [UserMessage(content="sum", source="user"), answer.to_assistant_message()]
    inner = Scripted()
    client = ChatClientBuilder(inner).use_tool_loop([tool], hold=lambda inv: inv.call.id == "c2").build()
    result = await client.create(history)
    assert ran == [1] and inner.requests == []  # c1 ran, c2 is held: the model was not asked
    assert result.finish_reason == "function_calls" and [fc.id for fc in result.content] == ["c2"]  # type: ignore[union-attr]
    assert result.usage == RequestUsage()


async def test_hold_must_be_callable() -> None:
    with pytest.raises(ConfigurationError, match="hold must be callable"):
        ToolLoop([ADD], hold=42)  # type: ignore[arg-type]
