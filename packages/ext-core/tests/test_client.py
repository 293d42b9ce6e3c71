"""BaseChatCompletionClient's shared behaviour, through a minimal in-process provider."""

from __future__ import annotations

import asyncio
import base64
from collections.abc import AsyncIterator
from typing import Any

import pytest
from pydantic import BaseModel, ValidationError

from ext.core import (
    AssistantMessage,
    BaseChatCompletionClient,
    CancellationToken,
    ChatCompletionClient,
    ChatOptions,
    ChatRequest,
    ClientClosedError,
    ConfigurationError,
    CreateResult,
    EventStream,
    ExtError,
    FunctionCall,
    FunctionExecutionResult,
    FunctionExecutionResultMessage,
    FunctionTool,
    Image,
    OutputParseError,
    RequestUsage,
    RetryPolicy,
    StreamChunk,
    SystemMessage,
    UnsupportedOptionError,
    UserMessage,
)

PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
)


class RateLimited(Exception):
    status_code = 429

    class response:
        status_code = 429
        headers = {"retry-after-ms": "1"}


class Fake(BaseChatCompletionClient):
    provider_name = "fake"

    def __init__(self, script: list[Any] | None = None, **kwargs: Any) -> None:
        super().__init__(model=kwargs.pop("model", "fake-model"), **kwargs)
        self.script = list(script or [])
        self.requests: list[ChatRequest] = []
        self.cancelled = asyncio.Event()
        self.hanging = asyncio.Event()
        self.in_create = asyncio.Event()
        self.closed_calls = 0

    def _next(self) -> Any:
        item = self.script.pop(0)
        if isinstance(item, BaseException):
            raise item
        return item

    async def _create(self, request: ChatRequest) -> CreateResult:
        self.requests.append(request)
        item = self._next()
        if item == "hang":
            self.in_create.set()
            try:
                await asyncio.Event().wait()
            finally:
                self.cancelled.set()
        return item  # type: ignore[no-any-return]

    async def _stream(self, request: ChatRequest) -> AsyncIterator[StreamChunk | CreateResult]:
        self.requests.append(request)
        item = self._next()
        text = item.content
        for piece in ["", *text.split(" ")]:
            if piece == "HANG":
                self.hanging.set()
                try:
                    await asyncio.Event().wait()
                finally:
                    self.cancelled.set()
            yield StreamChunk(content=piece)
        yield item

    async def _close(self) -> None:
        self.closed_calls += 1


def result(text: str = "hi", usage: tuple[int, int] = (3, 2)) -> CreateResult:
    return CreateResult(
        finish_reason="stop", content=text, usage=RequestUsage(prompt_tokens=usage[0], completion_tokens=usage[1])
    )


USER = [UserMessage(content="hello")]


def add(a: int, b: int) -> int:
    """Add."""
    return a + b


async def test_create_and_usage_accounting() -> None:
    client = Fake([result(usage=(3, 2)), result(usage=(1, 1))])
    assert isinstance(client, ChatCompletionClient)
    first = await client.create(USER)
    assert first.content == "hi"
    await client.create([{"type": "UserMessage", "content": "dict form"}])  # type: ignore[list-item]
    assert client.actual_usage() == RequestUsage(prompt_tokens=1, completion_tokens=1)
    assert client.total_usage() == RequestUsage(prompt_tokens=4, completion_tokens=3)
    assert client.requests[1].messages[0] == UserMessage(content="dict form")


async def test_total_usage_sums_every_call_across_the_batched_summing() -> None:
    # Usages are summed in batches (every 64 calls, and whenever total_usage() asks): the total must be exact
    # before, at and after a batch boundary, with the optional counts None until some call reports them.
    usages = [
        RequestUsage(prompt_tokens=i, completion_tokens=2 * i, cached_tokens=1 if i % 3 == 0 else None)
        for i in range(1, 151)
    ]
    client = Fake([CreateResult(finish_reason="stop", content="hi", usage=u) for u in usages])
    await client.create(USER)
    assert client.total_usage() == RequestUsage(prompt_tokens=1, completion_tokens=2)
    for n in range(2, 151):
        await client.create(USER)
        if n in (63, 64, 65, 128, 150):
            expected = RequestUsage(
                prompt_tokens=n * (n + 1) // 2, completion_tokens=n * (n + 1), cached_tokens=n // 3 if n >= 3 else None
            )
            assert client.total_usage() == expected, n
    assert client.actual_usage() == usages[-1]
    assert client.total_usage().reasoning_tokens is None


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"messages": []}, "must not be empty"),
        ({"messages": "hi"}, "list of messages"),
        ({"messages": [42]}, r"messages\[0\]"),
        ({"messages": [{"type": "UserMessage"}]}, r"messages\[0\] is invalid: UserMessage.content"),
        ({"tool_choice": "required"}, "needs tools"),
        ({"tools": [FunctionTool(add)], "tool_choice": "mul"}, "not among the tools"),
        ({"tool_choice": 3}, "tool_choice"),
        ({"tools": "add"}, "list of tools"),
        ({"tools": [object()]}, "tools entries"),
        ({"tools": [{"name": "bad name"}]}, "tool name"),
        ({"tools": [FunctionTool(add), FunctionTool(add)]}, "duplicate"),
        ({"json_output": "yes"}, "json_output"),
        ({"options": 5}, "options"),
        ({"extra_create_args": [1]}, "extra_create_args"),
        ({"cancellation_token": "x"}, "cancellation_token"),
    ],
)
async def test_bad_arguments_fail_before_any_request(kwargs: dict[str, Any], match: str) -> None:
    client = Fake([result()])
    kwargs = dict(kwargs)
    messages = kwargs.pop("messages", USER)
    with pytest.raises(ConfigurationError, match=match):
        await client.create(messages, **kwargs)
    assert client.requests == []


async def test_bad_options_name_the_field() -> None:
    client = Fake([result()])
    with pytest.raises(ValidationError, match="temperature"):
        await client.create(USER, options={"temperature": 9})
    assert client.requests == []


async def test_capabilities_gate_requests() -> None:
    no_tools = Fake([result()], model_info={"function_calling": False, "json_output": False})
    with pytest.raises(UnsupportedOptionError, match="function calling"):
        await no_tools.create(USER, tools=[FunctionTool(add)])
    with pytest.raises(UnsupportedOptionError, match="JSON"):
        await no_tools.create(USER, json_output=True)
    with pytest.raises(UnsupportedOptionError, match="images"):
        await no_tools.create([UserMessage(content=["x", Image.from_bytes(PNG)])])
    assert no_tools.requests == []
    vision = Fake([result()], model_info={"vision": True})
    await vision.create([UserMessage(content=["x", Image.from_bytes(PNG)])])
    assert len(vision.requests) == 1


async def test_request_normalisation() -> None:
    client = Fake([result()], default_options={"temperature": 0.5, "max_tokens": 10})
    tool = FunctionTool(add)
    await client.create(
        [SystemMessage(content="s"), *USER],
        tools=[tool, {"name": "raw", "parameters": {"type": "object", "properties": {"q": {"type": "string"}}}}],
        tool_choice=tool,
        options=ChatOptions(max_tokens=5, model_id="other-model"),
        extra_create_args={"user": "u1"},
    )
    request = client.requests[0]
    assert request.model == "other-model"
    assert request.tool_choice == "add"
    assert [t["name"] for t in request.tools] == ["add", "raw"]
    assert request.tools[1]["description"] == ""
    assert request.options.set_fields() == {"temperature": 0.5, "max_tokens": 5, "model_id": "other-model"}
    assert request.extra == {"user": "u1"}


class City(BaseModel):
    name: str


async def test_json_and_structured_output_are_parsed() -> None:
    client = Fake([result('{"a": 1}'), result('{"name": "Oslo"}'), result("not json")])
    assert (await client.create(USER, json_output=True)).parsed == {"a": 1}
    structured = await client.create(USER, json_output=City)
    assert structured.parsed == City(name="Oslo")
    assert client.requests[1].structured_model is City
    with pytest.raises(OutputParseError, match="not valid JSON"):
        await client.create(USER, json_output=True)


async def test_retries_rate_limits_then_succeeds() -> None:
    client = Fake([RateLimited(), RateLimited(), result("after")], max_retries=2)
    assert (await client.create(USER)).content == "after"
    assert len(client.requests) == 3


async def test_rate_limit_outlasting_retries_raises_the_provider_error() -> None:
    client = Fake([RateLimited(), RateLimited()], max_retries=1)
    with pytest.raises(RateLimited):
        await client.create(USER)
    zero = Fake([RateLimited()], retry_policy=RetryPolicy(max_retries=0))
    with pytest.raises(RateLimited):
        await zero.create(USER)


async def test_cancel_aborts_in_flight_create() -> None:
    client = Fake(["hang"])
    token = CancellationToken()
    task = asyncio.ensure_future(client.create(USER, token))
    await client.in_create.wait()
    token.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert client.cancelled.is_set()


async def test_stream_gives_chunks_then_one_result() -> None:
    client = Fake([result("a b c", usage=(5, 3))])
    items = [item async for item in client.create_stream(USER)]
    assert isinstance(items[-1], CreateResult)
    assert all(isinstance(i, StreamChunk) for i in items[:-1])
    assert "".join(i.content for i in items if isinstance(i, StreamChunk)) == "abc"
    assert client.actual_usage().prompt_tokens == 5


async def test_stream_retries_before_first_chunk_and_cancels_mid_stream() -> None:
    client = Fake([RateLimited(), result("a HANG b")])
    token = CancellationToken()
    seen: list[str] = []

    async def consume() -> None:
        async for item in client.create_stream(USER, token):
            if isinstance(item, StreamChunk):
                seen.append(item.content)

    task = asyncio.ensure_future(consume())
    await client.hanging.wait()
    token.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert seen == ["", "a"]
    assert client.cancelled.is_set()
    assert len(client.requests) == 2


async def test_stream_cancelled_between_chunks_stops_at_next_read() -> None:
    client = Fake([result("a b c")])
    token = CancellationToken()
    seen: list[str] = []
    with pytest.raises(asyncio.CancelledError):
        async for item in client.create_stream(USER, token):
            seen.append(item.content if isinstance(item, StreamChunk) else "RESULT")
            if seen[-1] == "a":
                token.cancel()
    assert seen == ["", "a"]


async def test_stream_without_result_is_an_error() -> None:
    class Broken(Fake):
        async def _stream(self, request: ChatRequest) -> AsyncIterator[StreamChunk | CreateResult]:
            yield StreamChunk(content="x")

    with pytest.raises(ExtError, match="without a result"):
        async for _ in Broken().create_stream(USER):
            pass


async def test_count_and_remaining_tokens_never_raise_for_unknown_model() -> None:
    client = Fake(model="totally-unknown-model")
    used = client.count_tokens(USER, tools=[FunctionTool(add)])
    assert used > 0
    assert client.remaining_tokens(USER) == 8192 - client.count_tokens(USER)
    limited = Fake(model="gpt-4o", token_limit=100)
    assert limited.remaining_tokens(USER) == 100 - limited.count_tokens(USER)
    assert limited.capabilities.vision is True

    class Exploding(Fake):
        def count_tokens(self, messages: Any, *, tools: Any = ()) -> int:
            raise RuntimeError("tokenizer missing")

    assert Exploding().remaining_tokens(USER) > 0


async def test_close_and_context_manager() -> None:
    async with Fake([result()]) as client:
        await client.create(USER)
    assert isinstance(client, Fake) and client.closed_calls == 1
    await client.close()
    assert client.closed_calls == 1
    with pytest.raises(ClientClosedError):
        await client.create(USER)


def test_constructor_validation_and_repr() -> None:
    with pytest.raises(ConfigurationError, match="model"):
        Fake(model="")
    with pytest.raises(ConfigurationError, match="max_retries"):
        Fake(max_retries=-1)
    with pytest.raises(ConfigurationError, match="token_limit"):
        Fake(token_limit=0)
    with pytest.raises(ConfigurationError, match="model_info"):
        Fake(model_info={"context_window": -5})
    assert repr(Fake()) == "Fake(model='fake-model')"


async def test_assistant_function_calls_pass_through() -> None:
    calls = [FunctionCall(id="1", name="add", arguments="{}")]
    client = Fake([result()])
    answered = FunctionExecutionResultMessage(content=[FunctionExecutionResult(call_id="1", name="add", content="0")])
    await client.create([*USER, AssistantMessage(content=calls), answered])
    assert client.requests[0].messages[1] == AssistantMessage(content=calls)


async def test_count_tokens_async_defaults_to_the_sync_count() -> None:
    client = Fake()
    assert await client.count_tokens_async(USER, tools=[ADD_TOOL]) == client.count_tokens(USER, tools=[ADD_TOOL])


ADD_TOOL = FunctionTool(add)


def test_config_dict_helpers() -> None:
    from ext.core import ModelInfo, model_info_dict, options_dict

    assert model_info_dict(None) is None
    assert model_info_dict({"vision": True}) == {"vision": True}
    assert model_info_dict(ModelInfo(family="x"))["family"] == "x"  # type: ignore[index]
    assert options_dict(ChatOptions(temperature=0.1)) == {"temperature": 0.1}
    assert options_dict({"seed": 1}) == {"seed": 1}
    with pytest.raises(ConfigurationError, match="model_info"):
        model_info_dict(3)  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="default_options"):
        options_dict("x")  # type: ignore[arg-type]


def test_config_from_arguments_takes_the_fields_and_plain_values() -> None:
    from pathlib import Path
    from types import MappingProxyType

    from pydantic import BaseModel, ConfigDict, SecretStr

    from ext.core import ModelInfo, config_from_arguments

    class Config(BaseModel):
        model_config = ConfigDict(extra="forbid")
        model: str
        api_key: SecretStr | None = None
        stop: str | list[str] | None = None
        headers: dict[str, str] | None = None
        cache_dir: str | None = None
        model_info: dict[str, object] | None = None
        default_options: dict[str, object] | None = None

    arguments = {
        "self": object(),  # not a field: ignored
        "http_client": object(),
        "model": "m",
        "api_key": "sk-secret",
        "stop": ("a", "b"),
        "headers": MappingProxyType({"x": "1"}),
        "cache_dir": Path("/tmp/cache"),
        "model_info": ModelInfo(vision=True),
        "default_options": ChatOptions(temperature=0.5),
    }
    config = config_from_arguments(Config, arguments, "Owner")
    assert config.stop == ["a", "b"] and config.headers == {"x": "1"} and config.cache_dir == "/tmp/cache"
    assert config.model_info is not None and config.model_info["vision"] is True
    assert config.default_options == {"temperature": 0.5}
    assert config.api_key is not None and config.api_key.get_secret_value() == "sk-secret"
    assert config_from_arguments(Config, {"model": "m", "stop": "end"}, "Owner").stop == "end"
    with pytest.raises(ConfigurationError, match=r"^Owner: model: ") as excinfo:
        config_from_arguments(Config, {"model": 3, "api_key": "sk-secret"}, "Owner")
    assert "sk-secret" not in str(excinfo.value)


# --- the event-stream path (`_open_events`) ---------------------------------------------------------------


class _Events:
    """An SDK-like event iterator: dict events, then the end; can fail at a given event."""

    def __init__(self, events: list[Any], fail_at: int | None = None, error: Exception | None = None) -> None:
        self.events = list(events)
        self.fail_at = fail_at
        self.error = error
        self.read = 0
        self.closed = False

    def __aiter__(self) -> _Events:
        return self

    async def __anext__(self) -> Any:
        if self.fail_at is not None and self.read == self.fail_at:
            assert self.error is not None
            raise self.error
        if not self.events:
            raise StopAsyncIteration
        self.read += 1
        event = self.events.pop(0)
        if event == "HANG":
            await asyncio.Event().wait()
        return event


class Translated(ConnectionError):
    pass


class EventsFake(Fake):
    """A provider on `_open_events`: events are `{"text": ...}` (a chunk) or `{"meta": ...}` (no chunk)."""

    def __init__(self, streams: list[Any], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.streams = list(streams)
        self.opened: list[_Events] = []

    async def _open_events(self, request: ChatRequest) -> EventStream:
        self.requests.append(request)
        item = self.streams.pop(0)
        if isinstance(item, BaseException):
            raise item
        events: _Events = item
        self.opened.append(events)
        texts: list[str] = []

        def handle(event: Any) -> StreamChunk | None:
            if "text" not in event:
                return None
            texts.append(event["text"])
            return StreamChunk.of(event["text"])

        def final() -> CreateResult:
            if events.events or events.read == 0:
                raise ConnectionError("ended early")
            return CreateResult.of("stop", "".join(texts), RequestUsage.of(1, len(texts)))

        def translate(exc: Exception) -> BaseException | None:
            return Translated(f"translated {exc}") if isinstance(exc, OSError) else None

        async def close() -> None:
            events.closed = True

        return EventStream(events, handle, final, close, translate)


async def test_events_stream_chunks_then_result() -> None:
    client = EventsFake([_Events([{"meta": 1}, {"text": "a"}, {"meta": 2}, {"text": "b"}])])
    items = [item async for item in client.create_stream(USER)]
    assert [i.content for i in items if isinstance(i, StreamChunk)] == ["a", "b"]
    last = items[-1]
    assert isinstance(last, CreateResult) and last.content == "ab" and last.usage.completion_tokens == 2
    assert client.total_usage().completion_tokens == 2
    assert client.opened[0].closed


async def test_events_stream_retries_before_the_first_chunk_only() -> None:
    failing = _Events([{"meta": 1}, {"text": "x"}], fail_at=1, error=ConnectionError("reset"))
    client = EventsFake([failing, _Events([{"text": "ok"}])], retry_policy=RetryPolicy(max_retries=2, multiplier=0))
    items = [item async for item in client.create_stream(USER)]
    assert isinstance(items[-1], CreateResult) and items[-1].content == "ok"
    assert len(client.requests) == 2 and failing.closed
    late = _Events([{"text": "a"}, {"text": "b"}], fail_at=1, error=ConnectionError("reset"))
    client = EventsFake([late, _Events([{"text": "never"}])], retry_policy=RetryPolicy(max_retries=2, multiplier=0))
    seen: list[str] = []
    with pytest.raises(ConnectionError, match="reset"):
        async for item in client.create_stream(USER):
            seen.append(item.content if isinstance(item, StreamChunk) else "RESULT")
    assert seen == ["a"] and len(client.requests) == 1 and late.closed


async def test_events_stream_translates_errors_and_keeps_others() -> None:
    client = EventsFake([_Events([{"text": "a"}], fail_at=1, error=OSError("cut"))])
    with pytest.raises(Translated, match="translated cut") as info:
        async for _ in client.create_stream(USER):
            pass
    assert isinstance(info.value.__cause__, OSError)
    client = EventsFake([_Events([{"text": "a"}], fail_at=1, error=ValueError("bad"))])
    with pytest.raises(ValueError, match="bad") as caught:
        async for _ in client.create_stream(USER):
            pass
    assert caught.value.__cause__ is None


async def test_events_stream_that_ends_early_is_retried_then_raised() -> None:
    client = EventsFake([_Events([]), _Events([])], retry_policy=RetryPolicy(max_retries=1, multiplier=0))
    with pytest.raises(ConnectionError, match="ended early"):
        async for _ in client.create_stream(USER):
            pass
    assert len(client.requests) == 2 and all(e.closed for e in client.opened)


async def test_events_stream_closed_when_the_consumer_stops_or_cancels() -> None:
    client = EventsFake([_Events([{"text": "a"}, {"text": "b"}])])
    stream = client.create_stream(USER)
    assert isinstance(await stream.__anext__(), StreamChunk)
    await stream.aclose()
    assert client.opened[0].closed
    client = EventsFake([_Events([{"text": "a"}, "HANG"])])
    token = CancellationToken()
    seen: list[str] = []
    with pytest.raises(asyncio.CancelledError):
        async for item in client.create_stream(USER, token):
            assert isinstance(item, StreamChunk)
            seen.append(item.content)
            asyncio.get_running_loop().call_soon(token.cancel)
    assert seen == ["a"] and client.opened[0].closed


async def test_create_without_token_retries_and_raises_the_last_error() -> None:
    client = Fake([RateLimited(), result("second")], retry_policy=RetryPolicy(max_retries=1, multiplier=0))
    assert (await client.create(USER)).content == "second"
    assert len(client.requests) == 2
    client = Fake([RateLimited(), RateLimited()], retry_policy=RetryPolicy(max_retries=1, multiplier=0))
    with pytest.raises(RateLimited):
        await client.create(USER)
    assert len(client.requests) == 2
    client = Fake([ValueError("not retryable"), result()], retry_policy=RetryPolicy(max_retries=3, multiplier=0))
    with pytest.raises(ValueError, match="not retryable"):
        await client.create(USER)
    assert len(client.requests) == 1


async def test_calls_without_options_share_one_empty_options_object() -> None:
    client = Fake([result(), result()])
    await client.create(USER)
    await client.create(USER)
    first, second = client.requests
    assert first.options is second.options and first.options == ChatOptions()
    assert first.tools == [] and second.tools == []
