"""The agents of the runtime-trace tests, shared by the test process and its worker processes: `front` takes a
question and asks `solver`, which answers it with a model call and a tool call through a traced chat pipeline
(the real OpenAI client against ext-testing's loopback server)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import TracerProvider

from ext.core import AgentId, AgentRuntime, FunctionTool, MessageContext, RoutedAgent, UserMessage, message_handler
from ext.models.openai import OpenAIChatCompletionClient
from ext.pipeline import ChatClientBuilder
from ext.telemetry.opentelemetry import OpenTelemetryMiddleware
from ext.testing.servers import OpenAIServer, Reply, ToolCallSpec

API_KEY = "sk-trace-test-0000"
MODEL = "gpt-4o-mini"


def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def script_solver_turns(server: OpenAIServer) -> None:
    """What the model answers `solver`: a tool call, then the text."""
    server.enqueue(
        Reply(tool_calls=[ToolCallSpec("add", {"a": 2, "b": 3}, id="call_a")], prompt_tokens=9, completion_tokens=4),
        Reply(text="5", prompt_tokens=12, completion_tokens=1),
    )


class Front(RoutedAgent):
    """Passes a question on to `solver/1` and answers with its reply."""

    @message_handler
    async def on_question(self, message: str, ctx: MessageContext) -> str:
        answer = await self.send_and_await_response(message, AgentId("solver", "1"), timeout=30)
        return f"front: {answer}"


def solver_factory(base_url: str, tracer_provider: TracerProvider) -> type[RoutedAgent]:
    """A `solver` agent class whose handler calls the model at `base_url` through a traced tool loop."""

    class Solver(RoutedAgent):
        def __init__(self, id: AgentId, runtime: AgentRuntime) -> None:
            super().__init__(id, runtime)
            client = OpenAIChatCompletionClient(
                MODEL, base_url=base_url, api_key=API_KEY, bundled_encodings=False, max_retries=0
            )
            self._client = (
                ChatClientBuilder(client)
                .use_tool_loop([FunctionTool(add)])
                .use(OpenTelemetryMiddleware(tracer_provider=tracer_provider, agent_name="solver"))
                .build()
            )

        @message_handler(types=str)
        async def on_question(self, message: str, ctx: MessageContext) -> str:
            result = await self._client.create([UserMessage(content=message)])
            assert isinstance(result.content, str)
            return result.content

        async def close(self) -> None:
            await self._client.close()

    return Solver


def span_record(span: ReadableSpan) -> dict[str, Any]:
    """A finished span as plain JSON data (what the worker processes dump)."""
    context = span.get_span_context()
    assert context is not None
    return {
        "name": span.name,
        "kind": span.kind.name,
        "trace_id": f"{context.trace_id:032x}",
        "span_id": f"{context.span_id:016x}",
        "parent_id": f"{span.parent.span_id:016x}" if span.parent is not None else None,
        "status": span.status.status_code.name,
        "attributes": dict(span.attributes or {}),
        "links": [f"{link.context.span_id:016x}" for link in span.links],
    }


def by_name(spans: Sequence[Any]) -> dict[str, list[Any]]:
    found: dict[str, list[Any]] = {}
    for span in spans:
        found.setdefault(span["name"], []).append(span)
    return found


def check_question_trace(spans: Sequence[Mapping[str, Any]]) -> None:
    """One question from outside: send front -> process front -> send solver -> process solver -> the tool loop,
    its two model calls and its tool call, all in one trace; each RPC's client span links the answering span."""
    named = by_name(spans)
    (send_front,) = named["send front"]
    (process_front,) = named["process front"]
    (send_solver,) = named["send solver"]
    (process_solver,) = named["process solver"]
    (loop,) = named["invoke_agent solver"]
    chats = named["chat gpt-4o-mini"]
    (tool,) = named["execute_tool add"]
    assert len(chats) == 2
    assert {s["trace_id"] for s in spans} == {send_front["trace_id"]}, "every span is in the question's trace"
    assert send_front["parent_id"] is None
    assert process_front["parent_id"] == send_front["span_id"]
    assert send_solver["parent_id"] == process_front["span_id"]
    assert process_solver["parent_id"] == send_solver["span_id"]
    assert loop["parent_id"] == process_solver["span_id"]
    assert {c["parent_id"] for c in chats} == {loop["span_id"]} and tool["parent_id"] == loop["span_id"]
    # The answer came back with the handling span's context.
    assert send_front["links"] == [process_front["span_id"]]
    assert send_solver["links"] == [process_solver["span_id"]]
    assert (send_front["kind"], process_front["kind"]) == ("CLIENT", "SERVER")
    for span, operation, name in ((send_solver, "send", "rpc"), (process_solver, "process", "process")):
        assert span["attributes"] == {
            "messaging.system": "ext",
            "messaging.operation.type": operation,
            "messaging.operation.name": name,
            "messaging.destination.name": "solver",
            "messaging.message.id": span["attributes"]["messaging.message.id"],
            "gen_ai.agent.name": "solver",
            "gen_ai.agent.id": "solver/1",
        }
        assert span["attributes"]["messaging.message.id"]
    assert all(s["status"] != "ERROR" for s in spans)
