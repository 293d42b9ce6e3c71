"""ext types to OpenAI Chat Completions wire shapes and back, as plain functions.

Shared by `OpenAIChatCompletionClient` and `AzureOpenAIChatCompletionClient`; nothing here touches the
network, so every function can be tested on its own. Requests are built as plain dicts (what the SDK's
`chat.completions.create(**kwargs)` takes); responses are read from the SDK's `ChatCompletion` /
`ChatCompletionChunk` objects.
"""

from __future__ import annotations

import copy
import functools
import inspect
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

from pydantic import BaseModel

from ext.core import (
    AssistantMessage,
    ChatOptions,
    ChatRequest,
    ConfigurationError,
    CreateResult,
    ExtError,
    FunctionCall,
    LLMMessage,
    ModelInfo,
    RequestUsage,
    StreamChunk,
    SystemMessage,
    ToolSchema,
    UserMessage,
    arguments_to_json,
    normalize_finish_reason,
    normalize_parameters,
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

TOOL_ERROR_PREFIX = "Error: "
"""Prefixed to a failed tool result's content: Chat Completions has no `is_error` field on tool messages."""

RESERVED_EXTRA_ARGS = frozenset({"messages", "model", "stream"})
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


def _user_content(content: str | Sequence[Any]) -> str | list[dict[str, Any]]:
    if isinstance(content, str):
        return content
    parts: list[dict[str, Any]] = []
    for part in content:
        if isinstance(part, str):
            parts.append({"type": "text", "text": part})
        else:  # Image: OpenAI takes images as data URIs
            parts.append({"type": "image_url", "image_url": {"url": part.data_uri}})
    return parts


def map_messages(messages: Iterable[LLMMessage], *, system_role: str = "system") -> list[dict[str, Any]]:
    """Chat Completions messages, one per ext message (one per result for tool results), in order.

    System messages stay where they are, with `system_role` as their role (`system`, `developer`, or
    `user` for models that take neither). An assistant turn's `thought` is not sent back: OpenAI has
    no input field for it and some compatible servers reject `reasoning_content` in requests. A
    failed tool result's content starts with `TOOL_ERROR_PREFIX`.
    """
    out: list[dict[str, Any]] = []
    for message in messages:
        if isinstance(message, UserMessage):
            out.append({"role": "user", "content": _user_content(message.content)})
        elif isinstance(message, SystemMessage):
            out.append({"role": system_role, "content": message.content})
        elif isinstance(message, AssistantMessage):
            content = message.content
            if isinstance(content, str):
                out.append({"role": "assistant", "content": content})
            else:
                out.append(
                    {
                        "role": "assistant",
                        "tool_calls": [
                            {
                                "id": call.id,
                                "type": "function",
                                "function": {"name": call.name, "arguments": call.arguments},
                            }
                            for call in content
                        ],
                    }
                )
        else:
            for result in message.content:
                text = result.content
                out.append(
                    {
                        "role": "tool",
                        "tool_call_id": result.call_id,
                        "content": TOOL_ERROR_PREFIX + text if result.is_error else text,
                    }
                )
    return out


# --- tools and structured output ---------------------------------------------------------------------


def _strictify(schema: Any) -> bool:
    """Make `schema` (a fresh copy) fit OpenAI's strict mode in place; False if it cannot fit."""
    if isinstance(schema, list):
        # Every item is rewritten even after one fails: no short-circuit.
        results = [_strictify(item) for item in schema]
        return all(results)
    if not isinstance(schema, dict):
        return True
    ok = True
    if "patternProperties" in schema:
        ok = False
    properties = schema.get("properties")
    if schema.get("type") == "object" or isinstance(properties, dict):
        extra = schema.get("additionalProperties")
        if extra not in (None, False):
            ok = False  # a free-form map (dict[str, X]) has no strict equivalent
        schema["additionalProperties"] = False
        if isinstance(properties, dict):
            # Strict mode needs every property listed; optional fields stay nullable via their anyOf.
            schema["required"] = list(properties)
    if "default" in schema and schema["default"] is None:
        del schema["default"]
    for key, value in schema.items():
        if key in ("properties", "$defs", "definitions") and isinstance(value, dict):
            ok = _strictify(list(value.values())) and ok
        elif key in ("items", "anyOf", "allOf", "oneOf", "prefixItems", "not"):
            ok = _strictify(value) and ok
    return ok


def strict_schema(parameters: Mapping[str, Any]) -> tuple[dict[str, Any], bool]:
    """A copy of a JSON schema made strict-compatible (`additionalProperties: false` and every property
    required on each object), and whether strict mode can take it (free-form maps cannot)."""
    schema = copy.deepcopy(dict(parameters))
    return schema, _strictify(schema)


_SCHEMA_NAME = re.compile(r"[^a-zA-Z0-9_-]")


@functools.lru_cache(maxsize=256)
def _structured_format(model: type[BaseModel]) -> dict[str, Any]:
    schema, strict = strict_schema(normalize_parameters(model.model_json_schema()))
    name = _SCHEMA_NAME.sub("_", model.__name__)[:64] or "output"
    return {"type": "json_schema", "json_schema": {"name": name, "schema": schema, "strict": strict}}


_JSON_OBJECT: dict[str, Any] = {"type": "json_object"}


def map_response_format(json_output: bool | type[BaseModel], info: ModelInfo) -> dict[str, Any] | None:
    """`response_format` for JSON mode (`json_object`) or a pydantic model (a strict `json_schema`).

    A model without structured output support gets JSON mode; ext still validates the reply against the
    pydantic model. Returns None for plain text.
    """
    if json_output is False:
        return None
    if json_output is True:
        return _JSON_OBJECT
    if info.structured_output:
        return _structured_format(json_output)
    return _JSON_OBJECT


def map_tools(tools: Sequence[ToolSchema]) -> list[dict[str, Any]]:
    """Function tools. A schema marked `strict` is sent strict-compatible with `strict: true`."""
    out: list[dict[str, Any]] = []
    for tool in tools:
        function: dict[str, Any] = {"name": tool["name"]}
        if tool.get("description"):
            function["description"] = tool["description"]
        parameters = tool.get("parameters") or {"type": "object", "properties": {}}
        if tool.get("strict"):
            parameters, strict = strict_schema(parameters)
            function["strict"] = strict
        function["parameters"] = parameters
        out.append({"type": "function", "function": function})
    return out


def map_tool_choice(tool_choice: str) -> str | dict[str, Any]:
    """`auto` / `none` / `required` as is, a tool name as a named function choice.

    `auto` is the API's default, but it is sent anyway: some OpenAI-compatible servers (llama-cpp-python's with
    the `chatml-function-calling` chat format) ignore `tools` unless the request carries `tool_choice`.
    """
    if tool_choice in ("auto", "none", "required"):
        return tool_choice
    return {"type": "function", "function": {"name": tool_choice}}


# --- options ------------------------------------------------------------------------------------------


def map_options(options: ChatOptions, *, reasoning: bool = False) -> dict[str, Any]:
    """Chat Completions parameters for `ChatOptions` (top_k is rejected earlier: OpenAI has none).

    Reasoning models (o-series, gpt-5) get `max_completion_tokens` and no sampling parameters;
    non-neutral sampling values for them are rejected before this point.
    """
    out: dict[str, Any] = {}
    if options.max_tokens is not None:
        out["max_completion_tokens" if reasoning else "max_tokens"] = options.max_tokens
    if options.stop_sequences:
        out["stop"] = list(options.stop_sequences)
    if options.seed is not None:
        out["seed"] = options.seed
    if reasoning:
        return out
    if options.temperature is not None:
        out["temperature"] = options.temperature
    if options.top_p is not None:
        out["top_p"] = options.top_p
    if options.frequency_penalty is not None:
        out["frequency_penalty"] = options.frequency_penalty
    if options.presence_penalty is not None:
        out["presence_penalty"] = options.presence_penalty
    return out


@functools.lru_cache(maxsize=1)
def _sdk_create_params() -> frozenset[str]:
    from openai.resources.chat.completions import AsyncCompletions

    names = frozenset(inspect.signature(AsyncCompletions.create).parameters)
    return names - {"self"}


def split_extra_args(extra: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """`extra_create_args` split into SDK keyword arguments and `extra_body` fields (anything the SDK
    does not name, e.g. `top_k` for a vLLM server). A given `extra_body` mapping is merged in."""
    known = _sdk_create_params()
    kwargs: dict[str, Any] = {}
    body: dict[str, Any] = {}
    for key, value in extra.items():
        if key in RESERVED_EXTRA_ARGS:
            raise ConfigurationError(
                f"extra_create_args must not set {key!r}: pass messages to create(), the model as "
                "options={'model_id': ...}, and use create_stream() to stream"
            )
        if key == "extra_body":
            if not isinstance(value, Mapping):
                raise ConfigurationError(
                    f"extra_create_args['extra_body'] must be a mapping, got {type(value).__name__}"
                )
            body.update(value)
        elif key in known:
            kwargs[key] = value
        else:
            body[key] = value
    return kwargs, body


# --- the whole request ---------------------------------------------------------------------------------


def map_request(
    request: ChatRequest, info: ModelInfo, settings: WireSettings = DEFAULT_SETTINGS, *, stream: bool = False
) -> dict[str, Any]:
    """Keyword arguments for `client.chat.completions.create(**kwargs)`."""
    reasoning = is_openai_reasoning(info)
    kwargs: dict[str, Any] = {
        "model": request.model,
        "messages": map_messages(request.messages, system_role=system_role_for(info, settings.system_role)),
    }
    options = request.options
    if options is not None:
        kwargs.update(map_options(options, reasoning=reasoning))
    if request.tools:
        kwargs["tools"] = map_tools(request.tools)
        kwargs["tool_choice"] = map_tool_choice(request.tool_choice)
        if settings.parallel_tool_calls is not None:
            kwargs["parallel_tool_calls"] = settings.parallel_tool_calls
    if request.json_output is not False:
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


class _ToolCallParts:
    __slots__ = ("arguments", "id", "name")

    def __init__(self) -> None:
        self.id: str | None = None
        self.name = ""
        self.arguments: list[str] = []


class StreamState:
    """What a stream has delivered so far; `result()` builds the final `CreateResult`."""

    __slots__ = ("content", "finish_reason", "refusal", "thought", "tool_calls", "usage")

    def __init__(self) -> None:
        self.content: list[str] = []
        self.thought: list[str] = []
        self.refusal: list[str] = []
        self.tool_calls: dict[int, _ToolCallParts] = {}
        self.finish_reason: str | None = None
        self.usage: CompletionUsage | None = None

    def result(self) -> CreateResult:
        usage = map_usage(self.usage)
        reasoning = "".join(self.thought) or None
        text = "".join(self.content)
        if self.tool_calls:
            calls = [
                FunctionCall(id=part.id or f"call_{index}", name=part.name, arguments="".join(part.arguments))
                for index, part in sorted(self.tool_calls.items())
            ]
            return CreateResult(
                finish_reason=normalize_finish_reason(self.finish_reason, has_tool_calls=True),
                content=calls,
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
        for fragment in delta.tool_calls:
            parts = state.tool_calls.get(fragment.index)
            if parts is None:
                parts = state.tool_calls[fragment.index] = _ToolCallParts()
            if fragment.id:
                parts.id = fragment.id
            function = fragment.function
            if function is not None:
                if function.name:
                    parts.name = function.name
                if function.arguments:
                    parts.arguments.append(function.arguments)
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
