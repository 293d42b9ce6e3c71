"""A chat pipeline (or any ext chat client) served as one tool: a question in, the answer out, and progress
notifications while it works: one when it starts, one per tool call of its tool loop (with `tool_loop_progress` as
the loop's `on_event`), one when it answers.

An ext-agent `ChatAgent` is served through its own `as_tool()`: any ext `Tool` is served as it is.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ext.core import (
    CancellationToken,
    ChatCompletionClient,
    ConfigurationError,
    CreateResult,
    LLMMessage,
    SystemMessage,
    ToolArgumentsError,
    ToolSchema,
    UserMessage,
    check_tool_name,
    value_as_string,
)

from ._context import current_context

__all__ = ["PipelineTool", "tool_loop_progress"]


async def tool_loop_progress(event: Any) -> None:
    """A `ToolLoop(on_event=...)` callback that reports each tool call of a served call as progress."""
    context = current_context()
    call = getattr(event, "call", None)
    if context is None or call is None:
        return
    finished = getattr(event, "result", None) is not None
    await context.step(f"{'finished' if finished else 'calling'} {call.name}")


class PipelineTool:
    """`client` (a `ChatPipeline`, usually with a `ToolLoop`) as a tool taking `{"question": str}`.

    Arguments:
        client: what answers (any `ChatCompletionClient`).
        name, description: how the tool is listed.
        system_message: instructions put before the question.
    """

    def __init__(
        self,
        client: ChatCompletionClient,
        *,
        name: str = "ask",
        description: str = "Ask a question; the answer comes back as text.",
        system_message: str | None = None,
    ) -> None:
        if not hasattr(client, "create_stream"):
            raise ConfigurationError(f"client must be an ext chat client or pipeline, got {type(client).__name__}")
        self._client = client
        self._name = check_tool_name(name)
        self._description = description
        self._system = system_message

    @property
    def name(self) -> str:
        return self._name

    @property
    def description(self) -> str:
        return self._description

    @property
    def schema(self) -> ToolSchema:
        return {
            "name": self._name,
            "description": self._description,
            "parameters": {
                "type": "object",
                "properties": {"question": {"type": "string", "description": "The question to answer."}},
                "required": ["question"],
                "additionalProperties": False,
            },
        }

    async def run_json(
        self, args: Mapping[str, Any], cancellation_token: CancellationToken | None = None, call_id: str | None = None
    ) -> str:
        question = args.get("question") if isinstance(args, Mapping) else None
        if not isinstance(question, str) or not question.strip():
            raise ToolArgumentsError(f"tool {self._name!r}: question must be a non-empty string")
        messages: Sequence[LLMMessage] = [
            *([SystemMessage(content=self._system)] if self._system else []),
            UserMessage(content=question),
        ]
        context = current_context()
        if context is not None:
            await context.step("thinking")
        result: CreateResult | None = None
        async for item in self._client.create_stream(messages, cancellation_token):
            if isinstance(item, CreateResult):
                result = item
        if result is None or not isinstance(result.content, str):
            raise RuntimeError(f"tool {self._name!r}: the pipeline ended without a text answer")
        if context is not None:
            await context.step("answered")
        return result.content

    def return_value_as_string(self, value: Any) -> str:
        return value_as_string(value)

    def __repr__(self) -> str:
        return f"PipelineTool(name={self._name!r})"
