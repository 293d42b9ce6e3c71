"""OpenTelemetryMiddleware over the wire: the real OpenAI client (the openai SDK over a socket) against
ext-testing's OpenAI-protocol loopback server, read back with the OpenTelemetry SDK's in-memory span exporter and
in-memory metric reader."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from typing import Any, ClassVar

import genai_prices
import openai
import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import HistogramDataPoint, InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from ext.core import (
    CancellationToken,
    ChatCompletionClient,
    ChatOptions,
    ConfigurationError,
    CreateResult,
    FallbackEvent,
    FunctionTool,
    Image,
    LLMMessage,
    RetryPolicy,
    StaticWorkbench,
    StreamChunk,
    SystemMessage,
    UserMessage,
    load_component,
)
from ext.models.openai import OpenAIChatCompletionClient
from ext.pipeline import ChatCall, ChatClientBuilder, ChatItem, ChatMiddleware, StreamNext, pipeline_from_config
from ext.telemetry.opentelemetry import FALLBACK, OpenTelemetryMiddleware
from ext.telemetry.opentelemetry._semconv import DURATION_BUCKETS, TOKEN_BUCKETS
from ext.testing.conformance import ChatCompletionsConformance
from ext.testing.servers import Fault, LoopbackServer, OpenAIServer, Reply, ToolCallSpec

SECRET = "sk-otel-secret-0000"


@dataclass
class Telemetry:
    """An SDK tracer and meter provider of one test, with the in-memory exporter and reader behind them."""

    tracer_provider: TracerProvider
    meter_provider: MeterProvider
    exporter: InMemorySpanExporter
    reader: InMemoryMetricReader

    def middleware(self, **kwargs: Any) -> OpenTelemetryMiddleware:
        return OpenTelemetryMiddleware(
            tracer_provider=self.tracer_provider, meter_provider=self.meter_provider, **kwargs
        )

    def spans(self) -> list[ReadableSpan]:
        """The finished spans, in the order they ended."""
        return list(self.exporter.get_finished_spans())

    def span(self, name: str) -> ReadableSpan:
        (found,) = [s for s in self.spans() if s.name == name]
        return found

    def points(self, metric: str) -> list[HistogramDataPoint]:
        """The histogram points of `metric` (cumulative since the provider started)."""
        data = self.reader.get_metrics_data()
        found: list[HistogramDataPoint] = []
        if data is None:
            return found
        for resource in data.resource_metrics:
            for scope in resource.scope_metrics:
                for m in scope.metrics:
                    if m.name == metric:
                        found.extend(p for p in m.data.data_points if isinstance(p, HistogramDataPoint))
        return found


@pytest.fixture
def telemetry() -> Iterator[Telemetry]:
    exporter = InMemorySpanExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(exporter))
    reader = InMemoryMetricReader()
    meter_provider = MeterProvider(metric_readers=[reader])
    try:
        yield Telemetry(tracer_provider, meter_provider, exporter, reader)
    finally:
        tracer_provider.shutdown()
        meter_provider.shutdown()


@pytest.fixture
async def server() -> AsyncIterator[OpenAIServer]:
    async with OpenAIServer(api_key=SECRET) as srv:
        yield srv


def bare(server: OpenAIServer, **kwargs: Any) -> OpenAIChatCompletionClient:
    """The real OpenAI client (the openai SDK over a socket) against the loopback server; it does not retry."""
    return OpenAIChatCompletionClient(
        "gpt-4o-mini",
        base_url=server.base_url + "/v1",
        api_key=SECRET,
        bundled_encodings=False,
        max_retries=kwargs.pop("max_retries", 0),
        **kwargs,
    )


HELLO = [UserMessage(content="Hi")]


def attrs(span: ReadableSpan) -> dict[str, Any]:
    return dict(span.attributes or {})


def every_value(t: Telemetry) -> str:
    """Every span attribute, event and status text, as one string (to look for what must not be there)."""
    out = []
    for s in t.spans():
        out.append(s.name)
        out.extend(f"{k}={v}" for k, v in attrs(s).items())
        out.extend(f"{e.name} {dict(e.attributes or {})}" for e in s.events)
        out.append(str(s.status.description))
    return "\n".join(out)


def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def divide(a: float, b: float) -> float:
    """Divide a by b."""
    return a / b


# --- one model call -------------------------------------------------------------------------------------------


async def test_create_makes_one_chat_span(server: OpenAIServer, telemetry: Telemetry) -> None:
    server.enqueue(Reply(text="four", prompt_tokens=12, completion_tokens=1))
    options = ChatOptions(temperature=0.5, max_tokens=50, top_p=0.9, seed=7, stop_sequences=["END"])
    app = telemetry.tracer_provider.get_tracer("app")
    async with ChatClientBuilder(bare(server)).use(telemetry.middleware()).build() as client:
        with app.start_as_current_span("request") as parent:
            result = await client.create([UserMessage(content="what is 2+2")], options=options)
    assert result.content == "four"
    (span,) = [s for s in telemetry.spans() if s.name != "request"]
    assert span.name == "chat gpt-4o-mini" and span.kind is SpanKind.CLIENT
    assert span.parent is not None and span.parent.span_id == parent.get_span_context().span_id
    assert attrs(span) == {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "openai",
        "gen_ai.request.model": "gpt-4o-mini",
        "server.address": "127.0.0.1",
        "server.port": server.port,
        "gen_ai.request.temperature": 0.5,
        "gen_ai.request.max_tokens": 50,
        "gen_ai.request.top_p": 0.9,
        "gen_ai.request.seed": 7,
        "gen_ai.request.stop_sequences": ("END",),
        "gen_ai.usage.input_tokens": 12,
        "gen_ai.usage.output_tokens": 1,
        "gen_ai.usage.cache_read.input_tokens": 0,
        "gen_ai.usage.reasoning.output_tokens": 0,
        "gen_ai.response.finish_reasons": ("stop",),
        # [cost]: ext-resilience prices the call with genai-prices (12 and 1 tokens of gpt-4o-mini)
        "ext.usage.cost": float(
            genai_prices.calc_price(genai_prices.Usage(input_tokens=12, output_tokens=1), "gpt-4o-mini").total_price
        ),
        "ext.usage.cost.currency": "USD",
    }
    assert span.status.status_code is StatusCode.UNSET
    wire = server.decode(server.requests[0])
    assert (wire.options["temperature"], wire.options["max_tokens"]) == (0.5, 50)


async def test_a_model_without_a_price_gets_no_cost(server: OpenAIServer, telemetry: Telemetry) -> None:
    server.enqueue(Reply(text="ok", prompt_tokens=1000, completion_tokens=1000), Reply(text="ok"))
    async with ChatClientBuilder(bare(server)).use(telemetry.middleware()).build() as client:
        await client.create(HELLO, options={"model_id": "my-local-model"})
        await client.create(HELLO, options={"model_id": "gpt-4o"})
    unpriced, priced = (attrs(s) for s in telemetry.spans())
    assert "ext.usage.cost" not in unpriced
    assert priced["ext.usage.cost"] > 0 and priced["ext.usage.cost.currency"] == "USD"


async def test_options_as_a_mapping_and_json_output(server: OpenAIServer, telemetry: Telemetry) -> None:
    server.enqueue(Reply(text='{"a": 1}'))
    async with ChatClientBuilder(bare(server)).use(telemetry.middleware()).build() as client:
        await client.create(HELLO, options={"temperature": 0.0, "model_id": "gpt-4o"}, json_output=True)
    (span,) = telemetry.spans()
    assert span.name == "chat gpt-4o"
    a = attrs(span)
    assert (a["gen_ai.request.model"], a["gen_ai.request.temperature"], a["gen_ai.output.type"]) == (
        "gpt-4o",
        0.0,
        "json",
    )
    assert "gen_ai.request.max_tokens" not in a


async def test_stream_span_ends_with_the_stream(server: OpenAIServer, telemetry: Telemetry) -> None:
    server.enqueue(Reply(text="streamed words here", prompt_tokens=7, completion_tokens=3))
    async with ChatClientBuilder(bare(server)).use(telemetry.middleware()).build() as client:
        stream = client.create_stream(HELLO)
        first = await stream.__anext__()
        assert isinstance(first, StreamChunk)
        assert telemetry.spans() == []  # still open while the stream runs
        rest = [item async for item in stream]
    assert isinstance(rest[-1], CreateResult)
    (span,) = telemetry.spans()
    a = attrs(span)
    assert span.name == "chat gpt-4o-mini" and span.status.status_code is StatusCode.UNSET
    assert (a["gen_ai.request.stream"], a["gen_ai.usage.input_tokens"], a["gen_ai.usage.output_tokens"]) == (
        True,
        7,
        3,
    )
    assert 0 < a["gen_ai.response.time_to_first_chunk"] < (span.end_time - span.start_time) / 1e9  # type: ignore[operator]


async def test_an_error_sets_the_status_and_error_type(server: OpenAIServer, telemetry: Telemetry) -> None:
    server.enqueue(Fault("bad_request"), Fault("bad_request"))
    async with ChatClientBuilder(bare(server)).use(telemetry.middleware()).build() as client:
        with pytest.raises(openai.BadRequestError):
            await client.create(HELLO)
        with pytest.raises(openai.BadRequestError):
            async for _ in client.create_stream(HELLO):
                pass
    created, streamed = telemetry.spans()
    for span in (created, streamed):
        assert span.status.status_code is StatusCode.ERROR
        assert span.status.description == "BadRequestError"
        assert attrs(span)["error.type"] == "BadRequestError"
        assert "gen_ai.usage.input_tokens" not in attrs(span)
    (duration,) = telemetry.points("gen_ai.client.operation.duration")
    assert duration.count == 2 and dict(duration.attributes or {})["error.type"] == "BadRequestError"
    assert telemetry.points("gen_ai.client.token.usage") == []  # no usage for a failed call


async def test_a_cancelled_stream_ends_its_span(server: OpenAIServer, telemetry: Telemetry) -> None:
    server.enqueue(Reply(text="alpha beta gamma delta", stall_after_chunks=2))
    token = CancellationToken()
    got = asyncio.Event()
    async with ChatClientBuilder(bare(server)).use(telemetry.middleware()).build() as client:

        async def consume() -> None:
            async for item in client.create_stream(HELLO, token):
                if isinstance(item, StreamChunk) and item.content:
                    got.set()

        task = asyncio.ensure_future(consume())
        await asyncio.wait_for(got.wait(), 10)
        token.cancel()
        with pytest.raises(asyncio.CancelledError):
            await asyncio.wait_for(task, 10)
    await asyncio.wait_for(server.requests[0].disconnected.wait(), 10)
    (span,) = telemetry.spans()
    assert span.end_time is not None
    assert span.status.status_code is StatusCode.ERROR and attrs(span)["error.type"] == "cancelled"
    assert "gen_ai.usage.input_tokens" not in attrs(span)


async def test_a_stream_closed_early_ends_its_span(server: OpenAIServer, telemetry: Telemetry) -> None:
    server.enqueue(Reply(text="alpha beta gamma delta"))
    async with ChatClientBuilder(bare(server)).use(telemetry.middleware()).build() as client:
        stream = client.create_stream(HELLO)
        async for _ in stream:
            break
        await stream.aclose()  # type: ignore[attr-defined]
    (span,) = telemetry.spans()
    assert span.status.status_code is StatusCode.ERROR and attrs(span)["error.type"] == "cancelled"


async def test_a_cancelled_create_ends_its_span(server: OpenAIServer, telemetry: Telemetry) -> None:
    server.enqueue(Fault("hang"))
    async with ChatClientBuilder(bare(server)).use(telemetry.middleware()).build() as client:
        token = CancellationToken()
        task = asyncio.ensure_future(client.create(HELLO, token))
        await server.wait_for_requests(1)
        token.cancel()
        with pytest.raises(asyncio.CancelledError):
            await asyncio.wait_for(task, 10)
    (span,) = telemetry.spans()
    assert span.status.status_code is StatusCode.ERROR and attrs(span)["error.type"] == "cancelled"


class Refuses(ChatMiddleware):
    """A middleware whose stream fails before it starts (raises when called, not when iterated)."""

    def create_stream(self, call: ChatCall, next: StreamNext) -> AsyncIterator[ChatItem]:
        raise ValueError("no streams today")


class Truncates(ChatMiddleware):
    """A middleware that drops the stream's final result (a broken stream)."""

    async def create_stream(self, call: ChatCall, next: StreamNext) -> AsyncIterator[ChatItem]:
        async for item in next(call):
            if not isinstance(item, CreateResult):
                yield item


async def test_a_stream_that_fails_to_start_or_has_no_result(server: OpenAIServer, telemetry: Telemetry) -> None:
    async with ChatClientBuilder(bare(server)).use(telemetry.middleware()).use(Refuses()).build() as client:
        with pytest.raises(ValueError, match="no streams today"):
            async for _ in client.create_stream(HELLO):
                pass
    server.enqueue(Reply(text="cut short"))
    async with ChatClientBuilder(bare(server)).use(telemetry.middleware()).use(Truncates()).build() as client:
        items = [item async for item in client.create_stream(HELLO)]
    assert items and not any(isinstance(i, CreateResult) for i in items)
    refused, truncated = telemetry.spans()
    assert attrs(refused)["error.type"] == "ValueError" and refused.status.status_code is StatusCode.ERROR
    assert attrs(truncated)["error.type"] == "no_result"


# --- the tool loop ----------------------------------------------------------------------------------------------


def two_tool_calls(server: OpenAIServer) -> None:
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


def check_loop_spans(t: Telemetry, stream: bool) -> None:
    loop = t.span("invoke_agent calculator")
    chats = sorted((s for s in t.spans() if s.name == "chat gpt-4o-mini"), key=lambda s: s.start_time or 0)
    tools = {s.name: s for s in t.spans() if s.name.startswith("execute_tool")}
    assert len(t.spans()) == 5 and len(chats) == 2 and set(tools) == {"execute_tool add", "execute_tool divide"}
    assert loop.kind is SpanKind.INTERNAL and loop.parent is None
    assert attrs(loop) == {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.agent.name": "calculator",
        "gen_ai.request.model": "gpt-4o-mini",
        "gen_ai.usage.input_tokens": 60,
        "gen_ai.usage.output_tokens": 17,
        "gen_ai.usage.cache_read.input_tokens": 0,
        "gen_ai.usage.reasoning.output_tokens": 0,
        "gen_ai.response.finish_reasons": ("stop",),
        **({"gen_ai.request.stream": True} if stream else {}),
    }
    loop_id = loop.get_span_context().span_id  # type: ignore[union-attr]
    for span in [*chats, *tools.values()]:
        assert span.parent is not None and span.parent.span_id == loop_id
        assert span.context.trace_id == loop.context.trace_id
    first, second = chats
    assert (attrs(first)["gen_ai.usage.input_tokens"], attrs(first)["gen_ai.response.finish_reasons"]) == (
        20,
        ("tool_call",),
    )
    assert attrs(second)["gen_ai.usage.input_tokens"] == 40
    for tool in tools.values():  # both tools ran between the two model turns
        assert first.end_time <= tool.start_time <= tool.end_time <= second.start_time  # type: ignore[operator]
    ok, failed = tools["execute_tool add"], tools["execute_tool divide"]
    assert ok.kind is SpanKind.INTERNAL and ok.status.status_code is StatusCode.UNSET
    assert attrs(ok) == {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "add",
        "gen_ai.tool.call.id": "call_a",
        "gen_ai.tool.type": "function",
        "gen_ai.tool.description": "Add two integers.",
    }
    assert failed.status.status_code is StatusCode.ERROR and attrs(failed)["error.type"] == "tool_error"
    assert attrs(failed)["gen_ai.tool.call.id"] == "call_b"


async def test_tool_loop_spans_after_the_loop(server: OpenAIServer, telemetry: Telemetry) -> None:
    two_tool_calls(server)
    async with (
        ChatClientBuilder(bare(server))
        .use_tool_loop([FunctionTool(add), FunctionTool(divide)])
        .use(telemetry.middleware(agent_name="calculator"))
        .build() as client
    ):
        result = await client.create(HELLO)
    assert result.content == "2+3 is 5, and 1/0 is undefined"
    check_loop_spans(telemetry, stream=False)
    tokens = {dict(p.attributes or {})["gen_ai.token.type"]: p for p in telemetry.points("gen_ai.client.token.usage")}
    # Counted per model turn (20 + 40 input), never again for the loop.
    assert (tokens["input"].count, tokens["input"].sum, tokens["output"].sum) == (2, 60, 17)
    durations = {dict(p.attributes or {})["gen_ai.operation.name"]: p.count for p in telemetry.points(DURATION)}
    assert durations == {"chat": 2, "invoke_agent": 1}


async def test_tool_loop_spans_when_streaming(server: OpenAIServer, telemetry: Telemetry) -> None:
    two_tool_calls(server)
    async with (
        ChatClientBuilder(bare(server))
        .use_tool_loop([FunctionTool(add), StaticWorkbench([FunctionTool(divide)])])
        .use(telemetry.middleware(agent_name="calculator"))
        .build() as client
    ):
        items = [item async for item in client.create_stream(HELLO)]
    assert isinstance(items[-1], CreateResult) and items[-1].content == "2+3 is 5, and 1/0 is undefined"
    # A workbench tool has no description on the invocation: the span leaves it out.
    description = attrs(telemetry.span("execute_tool divide")).get("gen_ai.tool.description")
    assert description is None
    loop = telemetry.span("invoke_agent calculator")
    assert attrs(loop)["gen_ai.usage.output_tokens"] == 17 and attrs(loop)["gen_ai.request.stream"] is True
    chats = [s for s in telemetry.spans() if s.name == "chat gpt-4o-mini"]
    assert [attrs(s)["gen_ai.request.stream"] for s in chats] == [True, True]
    assert all(s.parent is not None and s.parent.span_id == loop.context.span_id for s in chats)


async def test_before_the_loop_one_chat_span_per_user_call(server: OpenAIServer, telemetry: Telemetry) -> None:
    two_tool_calls(server)
    async with (
        ChatClientBuilder(bare(server))
        .use(telemetry.middleware())
        .use_tool_loop([FunctionTool(add), FunctionTool(divide)])
        .build() as client
    ):
        await client.create(HELLO)
    # Outside the loop the middleware sees the user's call only: one span, the loop's summed usage, no tools.
    (span,) = telemetry.spans()
    assert span.name == "chat gpt-4o-mini"
    assert (attrs(span)["gen_ai.usage.input_tokens"], attrs(span)["gen_ai.usage.output_tokens"]) == (60, 17)
    tokens = {dict(p.attributes or {})["gen_ai.token.type"]: p for p in telemetry.points("gen_ai.client.token.usage")}
    assert (tokens["input"].count, tokens["input"].sum) == (1, 60)


async def test_a_cancelled_tool_ends_its_span_and_the_loop(server: OpenAIServer, telemetry: Telemetry) -> None:
    started = asyncio.Event()

    async def slow(x: int) -> int:
        """Takes forever."""
        started.set()
        await asyncio.Event().wait()
        return x

    server.enqueue(Reply(tool_calls=[ToolCallSpec("slow", {"x": 1}, id="s1"), ToolCallSpec("slow", {"x": 2})]))
    async with (
        ChatClientBuilder(bare(server)).use_tool_loop([FunctionTool(slow)]).use(telemetry.middleware()).build()
    ) as client:
        token = CancellationToken()
        task = asyncio.ensure_future(client.create(HELLO, token))
        await asyncio.wait_for(started.wait(), 10)
        token.cancel()
        with pytest.raises(asyncio.CancelledError):
            await asyncio.wait_for(task, 10)
    names = sorted(s.name for s in telemetry.spans())
    assert names == ["chat gpt-4o-mini", "execute_tool slow", "execute_tool slow", "invoke_agent"]
    for span in telemetry.spans():
        if span.name != "chat gpt-4o-mini":
            assert span.status.status_code is StatusCode.ERROR and attrs(span)["error.type"] == "cancelled"


# --- retry placement ----------------------------------------------------------------------------------------------


async def test_outside_a_retry_one_span_inside_one_per_attempt(server: OpenAIServer, telemetry: Telemetry) -> None:
    fast = RetryPolicy(max_retries=2, multiplier=0.0, jitter=0.0)
    server.enqueue(Fault("rate_limit", retry_after=0), Reply(text="made it"))
    server.enqueue(Fault("rate_limit", retry_after=0), Reply(text="made it again"))
    async with ChatClientBuilder(bare(server)).use(telemetry.middleware()).use_retry(fast).build() as client:
        await client.create(HELLO)
    (outside,) = telemetry.spans()
    assert outside.status.status_code is StatusCode.UNSET
    telemetry.exporter.clear()
    async with ChatClientBuilder(bare(server)).use_retry(fast).use(telemetry.middleware()).build() as client:
        await client.create(HELLO)
    failed, succeeded = telemetry.spans()
    assert attrs(failed)["error.type"] == "RateLimitError" and succeeded.status.status_code is StatusCode.UNSET


# --- content ------------------------------------------------------------------------------------------------------


CONVERSATION: list[LLMMessage] = [SystemMessage(content="be brief"), UserMessage(content="what is 2+3, privately")]


async def run_loop_with(server: OpenAIServer, telemetry: Telemetry, **kwargs: Any) -> None:
    server.enqueue(
        Reply(tool_calls=[ToolCallSpec("add", {"a": 2, "b": 3}, id="call_a")], thought=None),
        Reply(text="the answer is 5"),
    )
    async with (
        ChatClientBuilder(bare(server)).use_tool_loop([FunctionTool(add)]).use(telemetry.middleware(**kwargs)).build()
    ) as client:
        await client.create(CONVERSATION)


async def test_content_is_not_recorded_by_default(server: OpenAIServer, telemetry: Telemetry) -> None:
    await run_loop_with(server, telemetry)
    text = every_value(telemetry)
    assert "privately" not in text and "be brief" not in text and "the answer is 5" not in text
    assert '"a"' not in text and "gen_ai.input.messages" not in text and "gen_ai.tool.call.result" not in text
    assert SECRET not in text


async def test_content_is_recorded_when_asked(server: OpenAIServer, telemetry: Telemetry) -> None:
    await run_loop_with(server, telemetry, capture_content=True)
    first, second = sorted((s for s in telemetry.spans() if s.name.startswith("chat")), key=lambda s: s.start_time or 0)
    assert json.loads(attrs(first)["gen_ai.system_instructions"]) == [{"type": "text", "content": "be brief"}]
    assert json.loads(attrs(first)["gen_ai.input.messages"]) == [
        {"role": "user", "parts": [{"type": "text", "content": "what is 2+3, privately"}]}
    ]
    tool_call = {"type": "tool_call", "id": "call_a", "name": "add", "arguments": {"a": 2, "b": 3}}
    assert json.loads(attrs(first)["gen_ai.output.messages"]) == [
        {"role": "assistant", "parts": [tool_call], "finish_reason": "tool_call"}
    ]
    assert json.loads(attrs(second)["gen_ai.input.messages"])[1:] == [
        {"role": "assistant", "parts": [tool_call]},
        {"role": "tool", "parts": [{"type": "tool_call_response", "id": "call_a", "response": "5"}]},
    ]
    assert json.loads(attrs(second)["gen_ai.output.messages"]) == [
        {"role": "assistant", "parts": [{"type": "text", "content": "the answer is 5"}], "finish_reason": "stop"}
    ]
    tool = attrs(telemetry.span("execute_tool add"))
    assert (json.loads(tool["gen_ai.tool.call.arguments"]), tool["gen_ai.tool.call.result"]) == ({"a": 2, "b": 3}, "5")
    loop = attrs(telemetry.span("invoke_agent"))
    assert "privately" in loop["gen_ai.input.messages"] and "the answer is 5" in loop["gen_ai.output.messages"]
    assert SECRET not in every_value(telemetry)


def test_images_are_recorded_without_their_bytes() -> None:
    from ext.telemetry.opentelemetry._content import input_messages

    png = Image.from_bytes(b"\x89PNG\r\n\x1a\n" + b"\x00" * 32)
    _, messages = input_messages([UserMessage(content=["look", png])])
    assert json.loads(messages) == [
        {
            "role": "user",
            "parts": [
                {"type": "text", "content": "look"},
                {"type": "blob", "modality": "image", "mime_type": "image/png"},
            ],
        }
    ]


@pytest.mark.parametrize(
    ("base_url", "expected"),
    [
        ("https://user:sk-in-the-url@api.example.com/v1", {"server.address": "api.example.com", "server.port": 443}),
        ("http://10.0.0.5:8080", {"server.address": "10.0.0.5", "server.port": 8080}),
    ],
)
def test_server_attributes_come_from_the_provider_declaration_without_userinfo(
    base_url: str, expected: dict[str, Any]
) -> None:
    client = OpenAIChatCompletionClient(model="m", api_key=SECRET, base_url=base_url)
    assert OpenTelemetryMiddleware()._server_of(client) == expected


def test_an_undeclared_client_has_no_server_attributes() -> None:
    # Telemetry does not guess from attributes: a client no provider declares gets no server.address, even with
    # a base_url (the other providers' addresses are tested in tests-integration/test_provider_declarations.py).
    class Client:
        base_url = "http://10.0.0.5:8080"

    assert OpenTelemetryMiddleware()._server_of(Client()) == {}


# --- metrics --------------------------------------------------------------------------------------------------------

DURATION = "gen_ai.client.operation.duration"


async def test_metrics_values(server: OpenAIServer, telemetry: Telemetry) -> None:
    server.enqueue(
        Reply(text="one", prompt_tokens=12, completion_tokens=1),
        Reply(text="two", prompt_tokens=7, completion_tokens=3),
    )
    async with ChatClientBuilder(bare(server)).use(telemetry.middleware()).build() as client:
        await client.create(HELLO)
        [item async for item in client.create_stream(HELLO)]
    common = {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "openai",
        "gen_ai.request.model": "gpt-4o-mini",
        "server.address": "127.0.0.1",
        "server.port": server.port,
    }
    tokens = {dict(p.attributes or {})["gen_ai.token.type"]: p for p in telemetry.points("gen_ai.client.token.usage")}
    assert set(tokens) == {"input", "output"}
    assert dict(tokens["input"].attributes or {}) == {**common, "gen_ai.token.type": "input"}
    assert (tokens["input"].count, tokens["input"].sum, tokens["input"].min, tokens["input"].max) == (2, 19, 7, 12)
    assert (tokens["output"].count, tokens["output"].sum) == (2, 4)
    assert tuple(tokens["input"].explicit_bounds) == TOKEN_BUCKETS
    (duration,) = telemetry.points(DURATION)
    assert dict(duration.attributes or {}) == common and duration.count == 2
    assert tuple(duration.explicit_bounds) == DURATION_BUCKETS
    spans = telemetry.spans()
    elapsed = sum((s.end_time or 0) - (s.start_time or 0) for s in spans) / 1e9
    assert 0 < duration.sum <= elapsed * 1.5 + 0.01  # seconds, not milliseconds


async def test_a_cache_hit_spends_no_tokens(server: OpenAIServer, telemetry: Telemetry) -> None:
    server.enqueue(Reply(text="cached", prompt_tokens=9, completion_tokens=2))
    async with ChatClientBuilder(bare(server)).use(telemetry.middleware()).use_cache().build() as client:
        await client.create(HELLO)
        hit = await client.create(HELLO)
    assert hit.cached and len(server.requests) == 1
    fresh, cached = telemetry.spans()
    assert "ext.response.cached" not in attrs(fresh) and attrs(cached)["ext.response.cached"] is True
    tokens = {dict(p.attributes or {})["gen_ai.token.type"]: p for p in telemetry.points("gen_ai.client.token.usage")}
    assert (tokens["input"].count, tokens["input"].sum) == (1, 9)


# --- without an SDK, configuration, components -----------------------------------------------------------------------


async def test_without_an_sdk_everything_is_a_no_op(server: OpenAIServer) -> None:
    # No provider passed and none set globally in this process: the API's no-op tracer and meter.
    server.enqueue(Reply(text="fine"), Reply(text="streamed"))
    async with ChatClientBuilder(bare(server)).use(OpenTelemetryMiddleware(capture_content=True)).build() as client:
        assert (await client.create(HELLO)).content == "fine"
        items = [i async for i in client.create_stream(HELLO)]
    assert isinstance(items[-1], CreateResult) and items[-1].content == "streamed"


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"tracer_provider": "console"}, "tracer_provider"),
        ({"meter_provider": object()}, "meter_provider"),
        ({"capture_content": "yes"}, "capture_content"),
        ({"agent_name": ""}, "agent_name"),
    ],
)
def test_bad_arguments_name_the_field(kwargs: dict[str, Any], field: str) -> None:
    with pytest.raises(ConfigurationError, match=field):
        OpenTelemetryMiddleware(**kwargs)


def test_dump_and_load(telemetry: Telemetry) -> None:
    middleware = telemetry.middleware(capture_content=True, agent_name="helper")
    dump = middleware.dump_component()
    assert dump.provider == "ext.telemetry.opentelemetry.OpenTelemetryMiddleware"
    assert dump.config == {"capture_content": True, "agent_name": "helper"}
    loaded = load_component(dump, ChatMiddleware)
    assert isinstance(loaded, OpenTelemetryMiddleware)
    assert (loaded.capture_content, loaded.agent_name) == (True, "helper")
    assert load_component(OpenTelemetryMiddleware().dump_component()).capture_content is False


async def test_a_pipeline_file_names_the_middleware(server: OpenAIServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EXT_OTEL_TEST_KEY", SECRET)
    document = {
        "client": {
            "provider": "openai",
            "options": {
                "endpoint": server.base_url + "/v1",
                "default_model": "gpt-4o-mini",
                "api_key_env": "EXT_OTEL_TEST_KEY",
                "max_retries": 0,
            },
            "args": {"bundled_encodings": False},
        },
        "middleware": [
            {"retry": {"max_retries": 0}},
            {"provider": "ext.telemetry.opentelemetry.OpenTelemetryMiddleware", "config": {"agent_name": "from-file"}},
        ],
    }
    client = pipeline_from_config(document)
    otel = client.middleware[-1]
    assert isinstance(otel, OpenTelemetryMiddleware) and otel.agent_name == "from-file"
    server.enqueue(Reply(text="configured"))
    async with client:
        assert (await client.create(HELLO)).content == "configured"
    assert SECRET not in client.dump_component().model_dump_json()


def test_names_match_the_semantic_conventions_package() -> None:
    # The names are written out in the library (it depends on the API only); the SDK's semconv package checks them.
    from opentelemetry.semconv._incubating.attributes import gen_ai_attributes as g
    from opentelemetry.semconv._incubating.metrics import gen_ai_metrics as m
    from opentelemetry.semconv.attributes import error_attributes as e
    from opentelemetry.semconv.attributes import server_attributes

    from ext.telemetry.opentelemetry import _semconv as sc

    registry = {v for k, v in vars(g).items() if k.startswith("GEN_AI_") and isinstance(v, str)}
    ours = {v for k, v in vars(sc).items() if k.isupper() and isinstance(v, str) and v.startswith("gen_ai.")}
    metrics_ours = {sc.CLIENT_OPERATION_DURATION, sc.CLIENT_TOKEN_USAGE}
    assert ours - metrics_ours <= registry, ours - metrics_ours - registry
    assert metrics_ours <= {m.GEN_AI_CLIENT_OPERATION_DURATION, m.GEN_AI_CLIENT_TOKEN_USAGE}
    assert sc.ERROR_TYPE == e.ERROR_TYPE
    assert (sc.SERVER_ADDRESS, sc.SERVER_PORT) == (server_attributes.SERVER_ADDRESS, server_attributes.SERVER_PORT)
    operations = {v.value for v in g.GenAiOperationNameValues}
    assert {sc.CHAT, sc.INVOKE_AGENT, sc.EXECUTE_TOOL} <= operations
    assert {sc.TOKEN_INPUT, sc.TOKEN_OUTPUT} <= {v.value for v in g.GenAiTokenTypeValues}
    assert set(sc.PROVIDER_NAMES.values()) <= {v.value for v in g.GenAiProviderNameValues}


# --- a traced pipeline is still a client ------------------------------------------------------------------------


class TestTracedPipelineConformance(ChatCompletionsConformance):
    """The shared chat-client suite against a pipeline traced inside and outside a retry, content capture on."""

    rate_limit_error = openai.RateLimitError
    server_error = openai.InternalServerError
    connection_error = openai.APIConnectionError
    timeout_error = openai.APITimeoutError
    secret = SECRET
    unsupported_options: ClassVar[list[tuple[dict[str, Any], str]]] = [({"top_k": 5}, "top_k")]

    def make_server(self) -> LoopbackServer:
        return OpenAIServer(api_key=SECRET)

    def make_client(self, server: LoopbackServer, **kwargs: Any) -> ChatCompletionClient:
        assert isinstance(server, OpenAIServer)
        max_retries = kwargs.pop("max_retries", 3)
        exporter = InMemorySpanExporter()
        tracer_provider = TracerProvider()
        tracer_provider.add_span_processor(SimpleSpanProcessor(exporter))
        reader = InMemoryMetricReader()
        telemetry = Telemetry(tracer_provider, MeterProvider(metric_readers=[reader]), exporter, reader)
        return (
            ChatClientBuilder(bare(server, **kwargs))
            .use(telemetry.middleware(capture_content=True))
            .use_retry(RetryPolicy(max_retries=max_retries))
            .use(telemetry.middleware())
            .build()
        )


class _Switched(ChatMiddleware):
    """Announces a fallback switch as ext-resilience's FallbackMiddleware does: in the call's context and, in a
    stream, as a `FallbackEvent` item before the answer."""

    EVENT = FallbackEvent(
        from_client="openai/primary", to_client="openai/gpt-4o-mini", error_kind="server_error", reason="server_error"
    )

    async def create(self, call: ChatCall, next: Any) -> CreateResult:
        call.context.setdefault("fallback_events", []).append(self.EVENT)
        result: CreateResult = await next(call)
        return result

    async def create_stream(self, call: ChatCall, next: StreamNext) -> AsyncIterator[ChatItem]:
        call.context.setdefault("fallback_events", []).append(self.EVENT)
        yield self.EVENT
        async for item in next(call):
            yield item


@pytest.mark.parametrize("streamed", [False, True])
async def test_a_fallback_switch_is_a_span_event(server: OpenAIServer, telemetry: Telemetry, streamed: bool) -> None:
    server.enqueue(Reply(text="from the backup"))
    client = ChatClientBuilder(bare(server)).use(telemetry.middleware()).use(_Switched()).build()
    async with client:
        if streamed:
            items = [item async for item in client.create_stream(HELLO)]
            assert isinstance(items[0], FallbackEvent)  # passed on to the caller too
        else:
            await client.create(HELLO)
    (span,) = telemetry.spans()
    events = [(e.name, dict(e.attributes or {})) for e in span.events]
    assert events == [
        (
            FALLBACK,
            {
                "ext.fallback.from": "openai/primary",
                "ext.fallback.to": "openai/gpt-4o-mini",
                "ext.fallback.reason": "server_error",
                "ext.fallback.text_sent": 0,
                "error.type": "server_error",
            },
        )
    ]
    assert span.status.status_code is not StatusCode.ERROR
