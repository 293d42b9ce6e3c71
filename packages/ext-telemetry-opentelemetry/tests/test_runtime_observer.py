"""OpenTelemetryRuntimeObserver in one process: a question sent to `front` crosses to `solver`, whose handler calls
the model (the real OpenAI client against ext-testing's loopback server) and a tool; every span is in one trace,
each with the right parent, read back with the OpenTelemetry SDK's in-memory exporter."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode
from traced_agents import Front, check_question_trace, script_solver_turns, solver_factory, span_record

from ext.core import (
    AgentId,
    MessageContext,
    RoutedAgent,
    RuntimeObserver,
    TopicId,
    TraceContext,
    TypeSubscription,
    message_handler,
)
from ext.runtime.local import LocalAgentRuntime
from ext.telemetry.opentelemetry import OpenTelemetryRuntimeObserver
from ext.testing.servers import OpenAIServer


@pytest.fixture
def exporter() -> InMemorySpanExporter:
    return InMemorySpanExporter()


@pytest.fixture
def tracer_provider(exporter: InMemorySpanExporter) -> Iterator[TracerProvider]:
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    try:
        yield provider
    finally:
        provider.shutdown()


async def test_one_trace_from_the_question_to_the_model_and_tool_calls(
    model_server: OpenAIServer, tracer_provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    script_solver_turns(model_server)
    observer = OpenTelemetryRuntimeObserver(tracer_provider=tracer_provider)
    assert isinstance(observer, RuntimeObserver)
    async with LocalAgentRuntime(observer=observer) as runtime:
        await runtime.register_agent_factory("front", Front)
        await runtime.register_agent_factory("solver", solver_factory(model_server.base_url + "/v1", tracer_provider))
        answer = await runtime.send_and_await_response("what is 2+3?", AgentId("front", "1"), timeout=30)
    assert answer == "front: 5"
    spans = [span_record(s) for s in exporter.get_finished_spans()]
    assert len(spans) == 8
    check_question_trace(spans)


class Seen(RoutedAgent):
    """Records the trace context each message arrived with; fails on "boom"."""

    traces: list[TraceContext | None]

    @message_handler
    async def on_text(self, message: str, ctx: MessageContext) -> None:
        type(self).traces.append(ctx.trace)
        if message == "boom":
            raise ValueError("boom")


async def test_one_way_and_broadcast_spans_and_a_failing_handler(
    tracer_provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    Seen.traces = []
    observer = OpenTelemetryRuntimeObserver(tracer_provider=tracer_provider)
    async with LocalAgentRuntime(observer=observer) as runtime:
        await runtime.register_agent_factory("seen", Seen)
        await runtime.send_message("one", AgentId("seen", "a"))
        await runtime.send_and_await_response("sync", AgentId("seen", "a"), timeout=5)
        await runtime.broadcast("all", "seen")
        with pytest.raises(ValueError, match="boom"):
            await runtime.send_and_await_response("boom", AgentId("seen", "a"), timeout=5)
    spans = list(exporter.get_finished_spans())
    sends = [s for s in spans if s.name == "send seen"]
    processes = [s for s in spans if s.name == "process seen"]
    assert [s.kind for s in sends] == [SpanKind.PRODUCER, SpanKind.CLIENT, SpanKind.PRODUCER, SpanKind.CLIENT]
    assert [dict(s.attributes or {})["messaging.operation.name"] for s in sends] == ["send", "rpc", "broadcast", "rpc"]
    assert "gen_ai.agent.id" not in dict(sends[2].attributes or {})  # a broadcast names a type, not an agent
    assert sorted(s.kind.name for s in processes) == ["CONSUMER", "CONSUMER", "SERVER", "SERVER"]
    # Each handler saw the context of its own send span, and its process span is that span's child.
    for send, trace in zip(sends, Seen.traces, strict=True):
        context = send.get_span_context()
        assert context is not None and trace is not None
        assert trace.traceparent.startswith(f"00-{context.trace_id:032x}-{context.span_id:016x}-")
        (process,) = [p for p in processes if p.parent is not None and p.parent.span_id == context.span_id]
        assert process.context is not None and process.context.trace_id == context.trace_id
    failed = [s for s in spans if s.status.status_code is StatusCode.ERROR]
    assert sorted((s.name, dict(s.attributes or {})["error.type"]) for s in failed) == [
        ("process seen", "ValueError"),
        ("send seen", "ValueError"),
    ]


async def test_a_publish_span_names_the_topic_and_parents_each_recipients_process_span(
    tracer_provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    Seen.traces = []
    observer = OpenTelemetryRuntimeObserver(tracer_provider=tracer_provider)
    async with LocalAgentRuntime(observer=observer) as runtime:
        await runtime.register_agent_factory("seen", Seen)
        await runtime.add_subscription(TypeSubscription("news", "seen"))
        await runtime.publish("hello", TopicId("news", "a"))
        await runtime.send_and_await_response("sync", AgentId("seen", "a"), timeout=5)  # the publish was handled
    spans = list(exporter.get_finished_spans())
    (publish,) = [s for s in spans if s.name == "send news"]
    attributes = dict(publish.attributes or {})
    assert publish.kind is SpanKind.PRODUCER
    assert attributes["messaging.operation.name"] == "publish"
    assert attributes["messaging.destination.name"] == "news"  # the topic type
    context = publish.get_span_context()
    assert context is not None
    (process,) = [
        s for s in spans if s.name == "process seen" and s.parent is not None and s.parent.span_id == context.span_id
    ]
    assert dict(process.attributes or {})["gen_ai.agent.id"] == "seen/a"  # the recipient: (agent type, topic source)


def test_trace_context_parse_follows_w3c() -> None:
    valid = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    assert TraceContext.parse(valid, "congo=t61rcWkgMzE") == TraceContext(valid, "congo=t61rcWkgMzE")
    assert TraceContext.parse(valid, "x" * 513) == TraceContext(valid, "")  # too long a tracestate is dropped
    for bad in (
        "",
        "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331",  # no flags
        "00-00000000000000000000000000000000-b7ad6b7169203331-01",  # all-zero trace id
        "00-0af7651916cd43dd8448eb211c80319c-0000000000000000-01",  # all-zero parent id
        "ff-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",  # version ff
        "00-0AF7651916CD43DD8448EB211C80319C-b7ad6b7169203331-01",  # upper case
        "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01-extra",  # version 00 has four fields
    ):
        assert TraceContext.parse(bad) is None, bad
    assert TraceContext.parse(valid[:-2] + "01-later") is None
    assert TraceContext.parse("01" + valid[2:] + "-later") is not None  # a later version may add fields
