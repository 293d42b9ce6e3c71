"""ext's types to Ollama's `/api/chat` body and back, in plain functions over dicts (no network, no SDK models).

Ollama's wire, as `ollama serve` speaks it: tool calls come with arguments as a JSON object and without ids;
tool results go back as `tool` messages with the tool's name (no id: Ollama's API defines none) and are paired with
the calls by name, then position; token
counts (`prompt_eval_count`, `eval_count`) and `done_reason` come only on the last part of a stream; a turn that
ends in tool calls says `done_reason: "stop"`.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ext.core import (
    KNOWN_MODELS,
    AssistantMessage,
    ChatRequest,
    ConfigurationError,
    CreateResult,
    FunctionCall,
    FunctionExecutionResult,
    FunctionExecutionResultMessage,
    LLMMessage,
    ModelRule,
    PromptToolPlan,
    RequestUsage,
    StreamChunk,
    SystemMessage,
    ToolArgumentsError,
    UnsupportedOptionError,
    UserMessage,
    arguments_to_json,
    normalize_finish_reason,
    normalize_parameters,
    parse_tool_arguments,
)

__all__ = [
    "OLLAMA_MODELS",
    "RESERVED_BODY_KEYS",
    "OllamaWireSettings",
    "StreamState",
    "check_tool_choice",
    "map_messages",
    "map_options",
    "map_request",
    "map_response",
    "map_tools",
    "new_call_id",
]

# Ollama serves any model with `format` (a grammar built from the schema), so every entry has structured output.
# The catch-all "" rule is what an unknown name gets (see the README).
OLLAMA_MODELS = KNOWN_MODELS.extend(
    [
        ModelRule.of("", structured_output=True, family="unknown", context_window=4096),
        ModelRule.of(
            "llama3.2-vision",
            vision=True,
            function_calling=False,
            structured_output=True,
            family="llama-3",
            context_window=131_072,
        ),
        ModelRule.of("llama3", structured_output=True, family="llama-3", context_window=131_072),
        ModelRule.of(
            "llava", vision=True, function_calling=False, structured_output=True, family="llava", context_window=4096
        ),
        ModelRule.of(
            "gemma3",
            vision=True,
            function_calling=False,
            structured_output=True,
            family="gemma",
            context_window=131_072,
        ),
        ModelRule.of("qwen3", structured_output=True, family="qwen3", context_window=40_960, reasoning=True),
        ModelRule.of(
            "qwen2.5vl",
            vision=True,
            function_calling=False,
            structured_output=True,
            family="qwen",
            context_window=128_000,
        ),
        ModelRule.of("qwen", structured_output=True, family="qwen", context_window=32_768),
        ModelRule.of(
            "deepseek-r1", structured_output=True, family="deepseek-r1", context_window=131_072, reasoning=True
        ),
        ModelRule.of("gpt-oss", structured_output=True, family="gpt-oss", context_window=131_072, reasoning=True),
        ModelRule.of("mistral-small3", vision=True, structured_output=True, family="mistral", context_window=131_072),
        ModelRule.of("mistral", structured_output=True, family="mistral", context_window=32_768),
        ModelRule.of("phi4", structured_output=True, family="phi-4", context_window=16_384),
        ModelRule.of("granite3", structured_output=True, family="granite", context_window=131_072),
        # SmolLM2 (smollm2:135m, :360m, :1.7b): no native tool calling in practice (see the README's model table);
        # the client calls tools for it at the prompt level, constrained by `format`.
        ModelRule.of("smollm", function_calling=False, structured_output=True, family="smollm", context_window=8_192),
    ]
)
"""ext-core's table with Ollama's common model names (tags such as `:8b` match by prefix)."""

RESERVED_BODY_KEYS = frozenset({"model", "messages", "stream", "tools", "format"})
"""Body fields the client owns: `extra_create_args` may not set them."""


@dataclass(frozen=True)
class OllamaWireSettings:
    """What the client adds to every body: Ollama options (`num_ctx`, `repeat_penalty`, ...), `think`,
    `keep_alive`."""

    options: Mapping[str, Any] = field(default_factory=dict)
    think: bool | str | None = None
    keep_alive: float | str | None = None


def new_call_id() -> str:
    """A unique id for a tool call (Ollama sends none)."""
    return "call_" + os.urandom(12).hex()


# --- requests -----------------------------------------------------------------------------------------------


def _tool_call(call: FunctionCall, where: str) -> dict[str, Any]:
    try:
        arguments = parse_tool_arguments(call.arguments, tool=call.name)
    except ToolArgumentsError as exc:
        raise ConfigurationError(f"{where}.arguments: {exc}") from None
    # Ollama's `ToolCall` is `function` alone: no id (the official SDK sends none, and Ollama would ignore one).
    return {"function": {"name": call.name, "arguments": arguments}}


def _ordered_results(
    results: list[FunctionExecutionResult], calls: Sequence[FunctionCall]
) -> list[FunctionExecutionResult]:
    """Results in the order of the calls they answer: Ollama pairs a `tool` message with the first unanswered call
    of its `tool_name`, else by position, so calls' order keeps two calls of one tool paired right."""
    if len(results) < 2 or not calls:
        return results
    order = {call.id: index for index, call in enumerate(calls)}
    return sorted(results, key=lambda result: order.get(result.call_id, len(order)))


def map_messages(messages: Sequence[LLMMessage]) -> list[dict[str, Any]]:
    """ext messages as Ollama chat messages. System messages stay in place (Ollama takes them anywhere)."""
    out: list[dict[str, Any]] = []
    calls: Sequence[FunctionCall] = ()
    for i, message in enumerate(messages):
        if isinstance(message, UserMessage):
            content = message.content
            if isinstance(content, str):
                out.append({"role": "user", "content": content})
                continue
            texts = [part for part in content if isinstance(part, str)]
            images = [part.to_base64() for part in content if not isinstance(part, str)]
            entry: dict[str, Any] = {"role": "user", "content": "\n".join(texts)}
            if images:
                entry["images"] = images
            out.append(entry)
        elif isinstance(message, SystemMessage):
            out.append({"role": "system", "content": message.content})
        elif isinstance(message, AssistantMessage):
            entry = {"role": "assistant"}
            if isinstance(message.content, str):
                entry["content"] = message.content
                calls = ()
            else:
                calls = message.content
                entry["content"] = ""
                entry["tool_calls"] = [
                    _tool_call(call, f"messages[{i}].content[{j}]") for j, call in enumerate(message.content)
                ]
            if message.thought:
                entry["thinking"] = message.thought
            out.append(entry)
        elif isinstance(message, FunctionExecutionResultMessage):
            for result in _ordered_results(message.content, calls):
                # Ollama's `Message` has no call id: the tool's name and the order pair the result with its call.
                out.append({"role": "tool", "content": result.content, "tool_name": result.name})
        else:  # pragma: no cover - the base validates message types
            raise ConfigurationError(f"messages[{i}]: unsupported message type {type(message).__name__}")
    return out


def map_tools(request: ChatRequest) -> list[dict[str, Any]]:
    """Tool schemas as Ollama's `tools`, whole: nested objects, arrays, enums and `required` as given."""
    return [
        {
            "type": "function",
            "function": {"name": tool["name"], "description": tool["description"], "parameters": tool["parameters"]},
        }
        for tool in request.tools
    ]


def check_tool_choice(request: ChatRequest) -> None:
    """Ollama has no `tool_choice`: `auto` is what it does and `none` leaves the tools out; a forced choice
    cannot be honoured."""
    if request.tool_choice not in ("auto", "none"):
        raise UnsupportedOptionError(
            f"tool_choice={request.tool_choice!r}: Ollama has no way to force a tool call; use 'auto' or 'none'"
        )


_OPTION_NAMES = (
    ("temperature", "temperature"),
    ("top_p", "top_p"),
    ("top_k", "top_k"),
    ("max_tokens", "num_predict"),
    ("stop_sequences", "stop"),
    ("seed", "seed"),
    ("frequency_penalty", "frequency_penalty"),
    ("presence_penalty", "presence_penalty"),
)
"""`ChatOptions` fields and the Ollama options they set (every field but `model_id`, which picks the model)."""


def map_options(request: ChatRequest, settings: OllamaWireSettings) -> dict[str, Any]:
    """Ollama's `options`: the client's Ollama options, then the call's `ChatOptions` over them."""
    options = dict(settings.options)
    given = request.options
    for field_name, option in _OPTION_NAMES:
        value = getattr(given, field_name)
        if value is not None:
            options[option] = list(value) if option == "stop" else value
    return options


def map_request(
    request: ChatRequest, settings: OllamaWireSettings, *, stream: bool, plan: PromptToolPlan | None = None
) -> dict[str, Any]:
    """The `/api/chat` body for `request`. With `plan` (tool calling at the prompt level) its messages are sent
    instead of native tools, and its schema as `format` (Ollama builds a grammar from a JSON schema there)."""
    messages = request.messages if plan is None else plan.messages
    body: dict[str, Any] = {"model": request.model, "messages": map_messages(messages), "stream": stream}
    if request.tools and request.tool_choice != "none" and plan is None:
        body["tools"] = map_tools(request)
    model = request.structured_model
    if plan is not None and plan.schema is not None:
        body["format"] = plan.schema
    elif model is not None:
        body["format"] = normalize_parameters(model.model_json_schema())
    elif request.json_output:
        body["format"] = "json"
    options = map_options(request, settings)
    if options:
        body["options"] = options
    if settings.think is not None:
        body["think"] = settings.think
    if settings.keep_alive is not None:
        body["keep_alive"] = settings.keep_alive
    if request.extra:
        extra = dict(request.extra)
        extra_options = extra.pop("options", None)
        if extra_options:
            body["options"] = {**options, **extra_options}
        body.update(extra)
    return body


# --- replies ------------------------------------------------------------------------------------------------


def _calls(raw: Sequence[Any]) -> list[FunctionCall]:
    out: list[FunctionCall] = []
    for call in raw:
        function = call.get("function") or {}
        out.append(
            FunctionCall.of(new_call_id(), str(function.get("name", "")), arguments_to_json(function.get("arguments")))
        )
    return out


def _result(text: str, thinking: str | None, calls: list[FunctionCall], data: Mapping[str, Any]) -> CreateResult:
    usage = RequestUsage.of(int(data.get("prompt_eval_count") or 0), int(data.get("eval_count") or 0))
    finish = normalize_finish_reason(data.get("done_reason"), has_tool_calls=bool(calls))
    if calls:
        # Text said alongside tool calls is kept as part of the thought (`content` holds the calls).
        thought = "\n".join(part for part in (thinking, text) if part) or None
        return CreateResult.of(finish, calls, usage, thought)
    return CreateResult.of(finish, text, usage, thinking or None)


def map_response(data: Mapping[str, Any]) -> CreateResult:
    """A non-streamed `/api/chat` reply as a `CreateResult` (each tool call gets a new unique id)."""
    message = data.get("message") or {}
    raw_calls = message.get("tool_calls")
    return _result(message.get("content") or "", message.get("thinking"), _calls(raw_calls) if raw_calls else [], data)


class StreamState:
    """Reads the parts of an `/api/chat` NDJSON stream: `handle` each part (a chunk of answer text and/or
    thinking, or None), then `result()`. Tool calls may come in any part; counts only in the last one."""

    __slots__ = ("_calls", "_final", "_text", "_thinking")

    def __init__(self) -> None:
        self._text: list[str] = []
        self._thinking: list[str] = []
        self._calls: list[FunctionCall] = []
        self._final: Mapping[str, Any] | None = None

    def handle(self, part: Mapping[str, Any]) -> StreamChunk | None:
        message = part.get("message")
        if part.get("done"):
            self._final = part
        if not message:
            return None
        content = message.get("content")
        thinking = message.get("thinking")
        raw_calls = message.get("tool_calls")
        if raw_calls:
            self._calls.extend(_calls(raw_calls))
        if content:
            self._text.append(content)
            if thinking:
                self._thinking.append(thinking)
                return StreamChunk.of(content, thinking)
            return StreamChunk.of(content)
        if thinking:
            self._thinking.append(thinking)
            return StreamChunk.of("", thinking)
        return None

    @property
    def done(self) -> bool:
        """Whether the last part (`done: true`) was read."""
        return self._final is not None

    def result(self) -> CreateResult:
        if self._final is None:
            raise ConnectionError("the Ollama stream ended before its last part (done: true)")
        return _result("".join(self._text), "".join(self._thinking) or None, self._calls, self._final)
