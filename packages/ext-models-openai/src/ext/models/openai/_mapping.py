"""ext types to OpenAI Chat Completions wire shapes and back, as plain functions.

Shared by `OpenAIChatCompletionClient` and `AzureOpenAIChatCompletionClient`; nothing here touches the
network, so every function can be tested on its own. Requests are built as plain dicts (what the SDK's
`chat.completions.create(**kwargs)` takes); responses are read from the SDK's `ChatCompletion` /
`ChatCompletionChunk` objects.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, NamedTuple

from ext.core import (
    CHAT_RESERVED_EXTRA_ARGS,
    CHAT_TOOL_ERROR_PREFIX,
    ChatOptions,
    ChatRequest,
    ChatToolCallDeltas,
    CreateResult,
    ExtError,
    FunctionCall,
    ModelInfo,
    PromptToolPlan,
    RequestUsage,
    StreamChunk,
    arguments_to_json,
    chat_messages,
    chat_options,
    chat_response_format,
    chat_tool_choice,
    chat_tools,
    normalize_finish_reason,
    split_chat_extra_args,
    strict_schema,
)

from ._models import SystemRole, is_openai_reasoning, system_role_for

if TYPE_CHECKING:
    from openai.types import CompletionUsage
    from openai.types.chat import ChatCompletion, ChatCompletionChunk

__all__ = [
    "TOOL_ERROR_PREFIX",
    "StreamState",
    "WireSettings",
    "map_messages",
    "map_options",
    "map_request",
    "map_response",
    "map_response_format",
    "map_stream_chunk",
    "map_tool_choice",
    "map_tools",
    "map_usage",
    "split_extra_args",
    "strict_schema",
]

TOOL_ERROR_PREFIX = CHAT_TOOL_ERROR_PREFIX
"""Prefixed to a failed tool result's content: Chat Completions has no `is_error` field on tool messages."""

map_messages = chat_messages
map_tools = chat_tools
map_tool_choice = chat_tool_choice
map_response_format = chat_response_format

RESERVED_EXTRA_ARGS = CHAT_RESERVED_EXTRA_ARGS
"""`extra_create_args` keys ext owns: messages and the model come from the call, streaming from the method."""


class WireSettings(NamedTuple):
    """Per-client settings that shape every request (from the client's configuration)."""

    system_role: SystemRole = "auto"
    include_usage: bool = True
    user: str | None = None
    reasoning_effort: str | None = None
    parallel_tool_calls: bool | None = None
    extra_body: Mapping[str, Any] | None = None


DEFAULT_SETTINGS = WireSettings()

# --- messages -----------------------------------------------------------------------------------


# --- options ------------------------------------------------------------------------------------------


def map_options(options: ChatOptions, *, reasoning: bool = False) -> dict[str, Any]:
    """Chat Completions parameters for `ChatOptions` (top_k is rejected earlier: OpenAI has none).

    Reasoning models (o-series, gpt-5) get `max_completion_tokens` and no sampling parameters;
    non-neutral sampling values for them are rejected before this point.
    """
    if reasoning:
        return chat_options(options, max_tokens_field="max_completion_tokens", sampling=False)
    return chat_options(options)


@functools.lru_cache(maxsize=1)
def _sdk_create_params() -> frozenset[str]:
    from openai.resources.chat.completions import AsyncCompletions

    names = frozenset(inspect.signature(AsyncCompletions.create).parameters)
    return names - {"self"}


def split_extra_args(extra: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """`extra_create_args` split into SDK keyword arguments and `extra_body` fields (anything the SDK
    does not name, e.g. `top_k` for a vLLM server). A given `extra_body` mapping is merged in."""
    return split_chat_extra_args(extra, known=_sdk_create_params(), extras_key="extra_body")


# --- the whole request ---------------------------------------------------------------------------------


def map_request(
    request: ChatRequest,
    info: ModelInfo,
    settings: WireSettings = DEFAULT_SETTINGS,
    *,
    stream: bool = False,
    plan: PromptToolPlan | None = None,
) -> dict[str, Any]:
    """Keyword arguments for `client.chat.completions.create(**kwargs)`. With `plan` (tool calling at the prompt
    level), its messages are sent instead of native tools, and its schema as llama.cpp's servers take one:
    `response_format: {"type": "json_object", "schema": ...}` (llama.cpp's `llama-server` and llama-cpp-python's
    server build a grammar from it)."""
    reasoning = is_openai_reasoning(info)
    messages = request.messages if plan is None else plan.messages
    kwargs: dict[str, Any] = {
        "model": request.model,
        "messages": map_messages(messages, system_role=system_role_for(info, settings.system_role)),
    }
    options = request.options
    if options is not None:
        kwargs.update(map_options(options, reasoning=reasoning))
    if request.tools and plan is None:
        kwargs["tools"] = map_tools(request.tools)
        kwargs["tool_choice"] = map_tool_choice(request.tool_choice)
        if settings.parallel_tool_calls is not None:
            kwargs["parallel_tool_calls"] = settings.parallel_tool_calls
    if plan is not None and plan.schema is not None:
        kwargs["response_format"] = {"type": "json_object", "schema": plan.schema}
    elif request.json_output is not False:
        response_format = map_response_format(request.json_output, info)
        if response_format is not None:
            kwargs["response_format"] = response_format
    if settings.user is not None:
        kwargs["user"] = settings.user
    if settings.reasoning_effort is not None:
        kwargs["reasoning_effort"] = settings.reasoning_effort
    if stream:
        kwargs["stream"] = True
        if settings.include_usage:
            kwargs["stream_options"] = {"include_usage": True}
    body: dict[str, Any] = dict(settings.extra_body) if settings.extra_body else {}
    if request.extra:
        extra_kwargs, extra_body = split_extra_args(request.extra)
        kwargs.update(extra_kwargs)
        body.update(extra_body)
    if body:
        kwargs["extra_body"] = body
    return kwargs


# --- responses ------------------------------------------------------------------------------------------


def map_usage(usage: CompletionUsage | None) -> RequestUsage:
    """Token usage, with cached prompt tokens and reasoning tokens when the server reports them."""
    if usage is None:
        return RequestUsage()
    prompt_details = usage.prompt_tokens_details
    completion_details = usage.completion_tokens_details
    return RequestUsage(
        prompt_tokens=usage.prompt_tokens or 0,
        completion_tokens=usage.completion_tokens or 0,
        cached_tokens=prompt_details.cached_tokens if prompt_details is not None else None,
        reasoning_tokens=completion_details.reasoning_tokens if completion_details is not None else None,
    )


def _reasoning_text(extra: dict[str, Any] | None) -> str | None:
    # `reasoning_content` (DeepSeek, vLLM, llama.cpp server) or `reasoning` (OpenRouter, newer vLLM).
    if not extra:
        return None
    value = extra.get("reasoning_content")
    if value is None:
        value = extra.get("reasoning")
    return value if isinstance(value, str) else None


def _custom_arguments(text: str) -> str:
    return arguments_to_json({"input": text})


def _join_thought(*parts: str | None) -> str | None:
    kept = [p for p in parts if p]
    return "\n".join(kept) if kept else None


def map_response(completion: ChatCompletion) -> CreateResult:
    """A `CreateResult` from the first choice.

    Tool calls become `FunctionCall`s (a `custom` tool call's free-form input becomes `{"input": ...}`);
    text that comes with tool calls is kept as the thought, after any reasoning text. A refusal with no
    other content is returned as the content with `finish_reason="content_filter"`.
    """
    if not completion.choices:
        raise ExtError("the server returned a chat completion with no choices")
    choice = completion.choices[0]
    message = choice.message
    reasoning = _reasoning_text(message.model_extra)
    text = message.content
    tool_calls = message.tool_calls
    usage = map_usage(completion.usage)
    if tool_calls:
        calls: list[FunctionCall] = []
        for call in tool_calls:
            if call.type == "function":
                calls.append(FunctionCall(id=call.id, name=call.function.name, arguments=call.function.arguments))
            else:
                calls.append(
                    FunctionCall(id=call.id, name=call.custom.name, arguments=_custom_arguments(call.custom.input))
                )
        return CreateResult(
            finish_reason=normalize_finish_reason(choice.finish_reason, has_tool_calls=True),
            content=calls,
            usage=usage,
            thought=_join_thought(reasoning, text),
        )
    finish = normalize_finish_reason(choice.finish_reason)
    if not text and message.refusal:
        text = message.refusal
        finish = "content_filter"
    return CreateResult(finish_reason=finish, content=text or "", usage=usage, thought=reasoning)


class StreamState:
    """What a stream has delivered so far; `result()` builds the final `CreateResult`."""

    __slots__ = ("content", "finish_reason", "refusal", "thought", "tool_calls", "usage")

    def __init__(self) -> None:
        self.content: list[str] = []
        self.thought: list[str] = []
        self.refusal: list[str] = []
        self.tool_calls = ChatToolCallDeltas()
        self.finish_reason: str | None = None
        self.usage: CompletionUsage | None = None

    def result(self) -> CreateResult:
        usage = map_usage(self.usage)
        reasoning = "".join(self.thought) or None
        text = "".join(self.content)
        if self.tool_calls:
            return CreateResult(
                finish_reason=normalize_finish_reason(self.finish_reason, has_tool_calls=True),
                content=self.tool_calls.calls(),
                usage=usage,
                thought=_join_thought(reasoning, text),
            )
        finish = normalize_finish_reason(self.finish_reason)
        if not text and self.refusal:
            text = "".join(self.refusal)
            finish = "content_filter"
        return CreateResult(finish_reason=finish, content=text, usage=usage, thought=reasoning)


def map_stream_chunk(chunk: ChatCompletionChunk, state: StreamState) -> StreamChunk | None:
    """Fold one streamed chunk into `state`; the `StreamChunk` to hand out, or None when the chunk
    carried no text or reasoning (role headers, tool-call fragments, the finish and usage chunks)."""
    usage = chunk.usage
    if usage is not None:
        state.usage = usage
    choices = chunk.choices
    if not choices:
        return None
    choice = choices[0]
    if choice.finish_reason is not None:
        state.finish_reason = choice.finish_reason
    delta = choice.delta
    if delta.tool_calls:
        add = state.tool_calls.add
        for fragment in delta.tool_calls:
            function = fragment.function
            if function is None:
                add(fragment.index, fragment.id, None, None)
            else:
                add(fragment.index, fragment.id, function.name, function.arguments)
    if delta.refusal:
        state.refusal.append(delta.refusal)
    thought = _reasoning_text(delta.__pydantic_extra__)
    text = delta.content
    if text:
        state.content.append(text)
        if thought:
            state.thought.append(thought)
            return StreamChunk(content=text, thought=thought)
        return StreamChunk(content=text)
    if thought:
        state.thought.append(thought)
        return StreamChunk(thought=thought)
    return None
