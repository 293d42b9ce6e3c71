"""`OpenTelemetryMiddleware`: spans and metrics for a chat pipeline, after the OpenTelemetry GenAI conventions."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

from opentelemetry import metrics, trace
from opentelemetry.trace import Span, SpanKind, Status, StatusCode
from pydantic import BaseModel, ConfigDict, Field

from ext.core import (
    ChatOptions,
    ConfigurationError,
    CreateResult,
    FallbackEvent,
    FunctionExecutionResult,
    server_address,
)
from ext.pipeline import ChatCall, ChatItem, ChatMiddleware, CreateNext, StreamNext, ToolInvocation, ToolNext

from . import _semconv as sc
from .__about__ import __version__
from ._content import finish_reason, input_messages, output_messages
from ._cost import cost_attributes, find_pricer

INSTRUMENTATION_NAME = "ext.telemetry.opentelemetry"

_OPTIONS = (
    ("temperature", sc.REQUEST_TEMPERATURE),
    ("max_tokens", sc.REQUEST_MAX_TOKENS),
    ("top_p", sc.REQUEST_TOP_P),
    ("top_k", sc.REQUEST_TOP_K),
    ("frequency_penalty", sc.REQUEST_FREQUENCY_PENALTY),
    ("presence_penalty", sc.REQUEST_PRESENCE_PENALTY),
    ("seed", sc.REQUEST_SEED),
)
CANCELLED = "cancelled"
"""`error.type` of a call cancelled (`asyncio.CancelledError`) or a stream closed before its end."""
NO_RESULT = "no_result"
"""`error.type` of a stream that ended without its final `CreateResult`."""
TOOL_ERROR = "tool_error"
"""`error.type` of a tool call whose result is an error result (`is_error=True`)."""
CACHED = "ext.response.cached"
"""Span attribute (ext's own): the result came from a `CacheMiddleware` placed after this middleware."""
FALLBACK = "ext.fallback"
"""Span event (ext's own): a fallback middleware placed after this one switched to another client
(`ext.fallback.from`, `ext.fallback.to`, `error.type` (the error kind, when an error caused it),
`ext.fallback.reason`, `ext.fallback.text_sent`)."""


class OpenTelemetryConfig(BaseModel):
    """Config of an `OpenTelemetryMiddleware` (the tracer and meter providers are not dumped: a loaded
    middleware uses the global ones)."""

    model_config = ConfigDict(extra="forbid", defer_build=True)

    capture_content: bool = Field(
        default=False,
        description="Record prompts, replies, tool arguments and tool results on the spans (opt-in: they may "
        "hold personal or secret data).",
    )
    agent_name: str | None = Field(
        default=None, min_length=1, description="`gen_ai.agent.name` of the tool loop's `invoke_agent` span."
    )


class OpenTelemetryMiddleware(ChatMiddleware):
    """Spans and metrics after the OpenTelemetry GenAI semantic conventions, on `opentelemetry-api` only.

    - One `chat {model}` span (kind CLIENT) per model call, streamed or not: `gen_ai.operation.name=chat`,
      `gen_ai.provider.name`, `gen_ai.request.model`, `server.address` / `server.port` (where the client
      sends, as its provider's declaration says; none for an in-process model), the request options
      (`gen_ai.request.temperature`, `max_tokens`, `top_p`, `top_k`, `frequency_penalty`, `presence_penalty`,
      `stop_sequences`, `seed`),
      `gen_ai.output.type=json` for JSON output, `gen_ai.request.stream` and
      `gen_ai.response.time_to_first_chunk` for streams, then `gen_ai.usage.input_tokens`,
      `gen_ai.usage.output_tokens` (and the cache-read and reasoning counts when the provider gives them) and
      `gen_ai.response.finish_reasons`; with ext-resilience installed (the `[cost]` extra), the call's cost in
      `ext.usage.cost` (US dollars, `ext.usage.cost.currency`; the GenAI conventions have no cost attribute),
      for a model the `genai-prices` table prices and a call not answered from a cache.
    - Placed after a tool loop: one `invoke_agent` span (kind INTERNAL; `invoke_agent {agent_name}` when given)
      around the whole loop, the parent of one `chat` span per model turn and one `execute_tool {name}` span
      (kind INTERNAL; `gen_ai.tool.name`, `gen_ai.tool.call.id`, `gen_ai.tool.type=function`) per tool call.
    - A failure sets the span status to ERROR and `error.type` to the exception's class name (`cancelled` for a
      cancelled call or a stream closed before its end, `tool_error` for a tool's error result). The status
      description is that type too: an exception's message is not recorded, as it may quote the request.
    - Metrics: `gen_ai.client.operation.duration` (seconds, per model call and per loop) and
      `gen_ai.client.token.usage` (tokens, per model call, by `gen_ai.token.type`; not for cache hits).

    Prompts, replies, tool arguments and results (`gen_ai.input.messages`, `gen_ai.output.messages`,
    `gen_ai.system_instructions`, `gen_ai.tool.call.arguments`, `gen_ai.tool.call.result`) are recorded only
    with `capture_content=True`. Nothing from the client's configuration is recorded, so no key can leak.

    `tracer_provider` / `meter_provider` default to the global providers (`opentelemetry.trace` /
    `opentelemetry.metrics`); without an SDK installed and configured every span and instrument is a no-op.
    """

    component_config_schema = OpenTelemetryConfig
    component_provider_override = "ext.telemetry.opentelemetry.OpenTelemetryMiddleware"

    def __init__(
        self,
        *,
        tracer_provider: trace.TracerProvider | None = None,
        meter_provider: metrics.MeterProvider | None = None,
        capture_content: bool = False,
        agent_name: str | None = None,
    ) -> None:
        if tracer_provider is not None and not isinstance(tracer_provider, trace.TracerProvider):
            raise ConfigurationError(
                f"tracer_provider must be an opentelemetry TracerProvider, got {type(tracer_provider).__name__}"
            )
        if meter_provider is not None and not isinstance(meter_provider, metrics.MeterProvider):
            raise ConfigurationError(
                f"meter_provider must be an opentelemetry MeterProvider, got {type(meter_provider).__name__}"
            )
        if not isinstance(capture_content, bool):
            raise ConfigurationError(f"capture_content must be a bool, got {type(capture_content).__name__}")
        if agent_name is not None and (not isinstance(agent_name, str) or not agent_name):
            raise ConfigurationError(f"agent_name must be a non-empty string or None, got {agent_name!r}")
        self._capture = capture_content
        self._agent_name = agent_name
        self._config = OpenTelemetryConfig(capture_content=capture_content, agent_name=agent_name)
        self._server: tuple[object, dict[str, Any]] | None = None
        self._pricer = find_pricer()
        self._tracer = trace.get_tracer(INSTRUMENTATION_NAME, __version__, tracer_provider)
        meter = metrics.get_meter(INSTRUMENTATION_NAME, __version__, meter_provider)
        self._duration = meter.create_histogram(
            sc.CLIENT_OPERATION_DURATION,
            unit="s",
            description="GenAI operation duration.",
            explicit_bucket_boundaries_advisory=sc.DURATION_BUCKETS,
        )
        self._tokens = meter.create_histogram(
            sc.CLIENT_TOKEN_USAGE,
            unit="{token}",
            description="Number of input and output tokens used.",
            explicit_bucket_boundaries_advisory=sc.TOKEN_BUCKETS,
        )

    @property
    def capture_content(self) -> bool:
        return self._capture

    @property
    def agent_name(self) -> str | None:
        return self._agent_name

    def __repr__(self) -> str:
        return f"OpenTelemetryMiddleware(capture_content={self._capture}, agent_name={self._agent_name!r})"

    # --- hooks -----------------------------------------------------------------------------------------------

    async def create(self, call: ChatCall, next: CreateNext) -> CreateResult:
        return await self._traced(call, next, sc.CHAT)

    def create_stream(self, call: ChatCall, next: StreamNext) -> AsyncIterator[ChatItem]:
        return self._traced_stream(call, next, sc.CHAT)

    async def run_tool_loop(self, call: ChatCall, next: CreateNext) -> CreateResult:
        return await self._traced(call, next, sc.INVOKE_AGENT)

    def run_tool_loop_stream(self, call: ChatCall, next: StreamNext) -> AsyncIterator[ChatItem]:
        return self._traced_stream(call, next, sc.INVOKE_AGENT)

    async def call_tool(self, invocation: ToolInvocation, next: ToolNext) -> FunctionExecutionResult:
        fc = invocation.call
        attributes: dict[str, Any] = {
            sc.OPERATION_NAME: sc.EXECUTE_TOOL,
            sc.TOOL_NAME: fc.name,
            sc.TOOL_CALL_ID: fc.id,
            sc.TOOL_TYPE: "function",
        }
        if invocation.tool is not None:
            attributes[sc.TOOL_DESCRIPTION] = invocation.tool.description
        if self._capture:
            attributes[sc.TOOL_CALL_ARGUMENTS] = fc.arguments
        span = self._tracer.start_span(f"{sc.EXECUTE_TOOL} {fc.name}", kind=SpanKind.INTERNAL, attributes=attributes)
        try:
            with trace.use_span(span, record_exception=False, set_status_on_exception=False):
                outcome = await next(invocation)
        except BaseException as exc:
            _fail(span, _error_type(exc))
            span.end()
            raise
        if outcome.is_error:
            _fail(span, TOOL_ERROR)
        if self._capture:
            span.set_attribute(sc.TOOL_CALL_RESULT, outcome.content)
        span.end()
        return outcome

    # --- model calls and loops ---------------------------------------------------------------------------------

    def _start(self, call: ChatCall, operation: str, stream: bool) -> tuple[Span, dict[str, Any]]:
        """The span of one model call or loop, and the attributes its duration metric is recorded with."""
        model = call.model
        metric: dict[str, Any] = {sc.OPERATION_NAME: operation}
        if operation == sc.CHAT:
            metric[sc.PROVIDER_NAME] = _provider(call)
            metric.update(self._server_of(call.client))
            name = f"{sc.CHAT} {model}" if model else sc.CHAT
            kind = SpanKind.CLIENT
        else:
            # The conventions' in-process agent span: INTERNAL, without a provider (the turns' spans carry it).
            name = f"{sc.INVOKE_AGENT} {self._agent_name}" if self._agent_name else sc.INVOKE_AGENT
            kind = SpanKind.INTERNAL
        if model:
            metric[sc.REQUEST_MODEL] = model
        attributes = dict(metric)
        if operation == sc.INVOKE_AGENT and self._agent_name:
            attributes[sc.AGENT_NAME] = self._agent_name
        _request_attributes(call, attributes)
        if stream:
            attributes[sc.REQUEST_STREAM] = True
        span = self._tracer.start_span(name, kind=kind, attributes=attributes)
        if self._capture and span.is_recording():
            system, messages = input_messages(call.messages)
            if system is not None:
                span.set_attribute(sc.SYSTEM_INSTRUCTIONS, system)
            span.set_attribute(sc.INPUT_MESSAGES, messages)
        return span, metric

    def _server_of(self, client: object) -> dict[str, Any]:
        """`server.address` / `server.port` where `client` sends its requests, as its provider's declaration says
        (`ext.core.server_address`: host and port only, never userinfo; nothing for an in-process model or an
        undeclared client); remembered for the last client seen."""
        known = self._server
        if known is not None and known[0] is client:
            return known[1]
        found: dict[str, Any] = {}
        address = server_address(client)
        if address is not None:
            found[sc.SERVER_ADDRESS] = address.host
            if address.port:
                found[sc.SERVER_PORT] = address.port
        self._server = (client, found)
        return found

    def _succeed(
        self, span: Span, metric: dict[str, Any], started: float, result: CreateResult, operation: str
    ) -> None:
        self._duration.record(time.perf_counter() - started, metric)
        usage = result.usage
        if span.is_recording():
            done: dict[str, Any] = {
                sc.USAGE_INPUT_TOKENS: usage.prompt_tokens,
                sc.USAGE_OUTPUT_TOKENS: usage.completion_tokens,
                sc.RESPONSE_FINISH_REASONS: (finish_reason(result.finish_reason),),
            }
            if usage.cached_tokens is not None:
                done[sc.USAGE_CACHE_READ_INPUT_TOKENS] = usage.cached_tokens
            if usage.reasoning_tokens is not None:
                done[sc.USAGE_REASONING_OUTPUT_TOKENS] = usage.reasoning_tokens
            if result.cached:
                done[CACHED] = True
            elif operation == sc.CHAT:
                model, provider = metric.get(sc.REQUEST_MODEL), metric.get(sc.PROVIDER_NAME)
                done.update(cost_attributes(self._pricer, model, provider, usage))
            if self._capture:
                done[sc.OUTPUT_MESSAGES] = output_messages(result)
            span.set_attributes(done)
        # Tokens are counted once, by the model calls: a loop's usage is the sum of its turns', and a cache hit
        # spent none.
        if operation == sc.CHAT and not result.cached:
            self._tokens.record(usage.prompt_tokens, {**metric, sc.TOKEN_TYPE: sc.TOKEN_INPUT})
            self._tokens.record(usage.completion_tokens, {**metric, sc.TOKEN_TYPE: sc.TOKEN_OUTPUT})
        span.end()

    def _failed(self, span: Span, metric: dict[str, Any], started: float, error_type: str) -> None:
        self._duration.record(time.perf_counter() - started, {**metric, sc.ERROR_TYPE: error_type})
        _fail(span, error_type)
        span.end()

    async def _traced(self, call: ChatCall, next: CreateNext, operation: str) -> CreateResult:
        span, metric = self._start(call, operation, stream=False)
        started = time.perf_counter()
        switches = len(call.context.get("fallback_events", ()))  # the user call's earlier turns had theirs
        try:
            with trace.use_span(span, record_exception=False, set_status_on_exception=False):
                result = await next(call)
        except BaseException as exc:
            _fallback_events(span, call, switches)
            self._failed(span, metric, started, _error_type(exc))
            raise
        _fallback_events(span, call, switches)
        self._succeed(span, metric, started, result, operation)
        return result

    async def _traced_stream(self, call: ChatCall, next: StreamNext, operation: str) -> AsyncIterator[ChatItem]:
        span, metric = self._start(call, operation, stream=True)
        started = time.perf_counter()
        result: CreateResult | None = None
        first = True
        error: str | None = None
        stream: AsyncIterator[ChatItem] | None = None
        # The span is current only while the stream is pulled, never while the consumer holds an item: the
        # consumer's own spans stay out of it, and nothing is attached in one task and detached in another.
        try:
            with trace.use_span(span, record_exception=False, set_status_on_exception=False):
                stream = next(call)
            while True:
                with trace.use_span(span, record_exception=False, set_status_on_exception=False):
                    try:
                        item = await stream.__anext__()
                    except StopAsyncIteration:
                        break
                if first:
                    first = False
                    span.set_attribute(sc.RESPONSE_TIME_TO_FIRST_CHUNK, time.perf_counter() - started)
                if isinstance(item, CreateResult):
                    result = item
                elif isinstance(item, FallbackEvent):
                    span.add_event(FALLBACK, _fallback_attributes(item))
                yield item
        except GeneratorExit:
            if result is None:
                error = CANCELLED  # the consumer stopped reading before the result
            raise
        except BaseException as exc:
            error = _error_type(exc)
            raise
        finally:
            try:
                aclose = getattr(stream, "aclose", None)
                if aclose is not None:
                    with trace.use_span(span, record_exception=False, set_status_on_exception=False):
                        await aclose()
            finally:
                if error is None and result is not None:
                    self._succeed(span, metric, started, result, operation)
                else:  # no error and no result: the stream ended without its CreateResult
                    self._failed(span, metric, started, error or NO_RESULT)


def _fallback_attributes(event: FallbackEvent) -> dict[str, Any]:
    attributes: dict[str, Any] = {
        "ext.fallback.from": event.from_client,
        "ext.fallback.to": event.to_client,
        "ext.fallback.reason": event.reason,
        "ext.fallback.text_sent": event.text_sent,
    }
    if event.error_kind is not None:
        attributes[sc.ERROR_TYPE] = event.error_kind
    return attributes


def _fallback_events(span: Span, call: ChatCall, seen: int) -> None:
    events = call.context.get("fallback_events")
    if events:
        for event in events[seen:]:
            if isinstance(event, FallbackEvent):
                span.add_event(FALLBACK, _fallback_attributes(event))


def _provider(call: ChatCall) -> str:
    name = call.provider
    return sc.PROVIDER_NAMES.get(name, name)


def _request_attributes(call: ChatCall, attributes: dict[str, Any]) -> None:
    options = call.options
    if options is not None:
        # ChatOptions' fields are read as attributes (a model_dump per call would cost more than the rest).
        get: Callable[[str], Any] = options.__getattribute__ if isinstance(options, ChatOptions) else options.get
        for field, key in _OPTIONS:
            value = get(field)
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                attributes[key] = value
        stops = get("stop_sequences")
        if isinstance(stops, (list, tuple)) and all(isinstance(s, str) for s in stops):
            attributes[sc.REQUEST_STOP_SEQUENCES] = tuple(stops)
    if call.json_output is not None and call.json_output is not False:
        attributes[sc.OUTPUT_TYPE] = "json"


def _error_type(exc: BaseException) -> str:
    if isinstance(exc, (asyncio.CancelledError, GeneratorExit)):
        return CANCELLED
    return type(exc).__qualname__


def _fail(span: Span, error_type: str) -> None:
    span.set_attribute(sc.ERROR_TYPE, error_type)
    span.set_status(Status(StatusCode.ERROR, error_type))
