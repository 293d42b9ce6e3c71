"""ext types to Anthropic Messages API wire shapes and back, as plain functions.

Requests are built as plain dicts (the JSON body); responses and stream events are read from either the
anthropic SDK's objects or plain dicts (the JSON the Bedrock runtime returns), so `ext-models-bedrock` reuses
this one mapping. Nothing here imports the anthropic SDK at import time, and nothing touches the network.
"""

from __future__ import annotations

import functools
import json
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel

from ext.core import (
    KNOWN_MODELS,
    AssistantMessage,
    ChatRequest,
    ConfigurationError,
    CreateResult,
    FunctionCall,
    FunctionExecutionResultMessage,
    Image,
    LLMMessage,
    ModelInfo,
    ModelRule,
    ModelTable,
    ReasoningBlock,
    RequestUsage,
    StreamChunk,
    SystemPolicy,
    ToolArgumentsError,
    ToolSchema,
    UnsupportedOptionError,
    UserMessage,
    normalize_finish_reason,
    parse_tool_arguments,
    split_system_messages,
)

logger = logging.getLogger(__name__)

__all__ = [
    "ANTHROPIC_MODELS",
    "IMAGE_TYPES",
    "JSON_MODE_INSTRUCTION",
    "PROVIDER",
    "THINKING_TYPES",
    "AnthropicWireSettings",
    "IncompleteStreamError",
    "StreamState",
    "check_extra_args",
    "check_options",
    "check_sampling",
    "check_thinking",
    "map_messages",
    "map_output",
    "map_request",
    "map_response",
    "map_tool_choice",
    "map_tools",
    "map_usage",
    "structured_output_schema",
    "thinking_enabled",
]

PROVIDER = "anthropic"
"""`ReasoningBlock.provider` of thinking blocks this package produces (and sends back)."""

IMAGE_TYPES = frozenset({"image/jpeg", "image/png", "image/gif", "image/webp"})
"""Image MIME types the Messages API accepts."""

THINKING_TYPES = frozenset({"enabled", "adaptive", "between_tools", "disabled"})
_THINKING_ON = frozenset({"enabled", "adaptive", "between_tools"})
MIN_THINKING_BUDGET = 1024

JSON_MODE_INSTRUCTION = (
    "Respond with a single valid JSON value and nothing else: no text before or after it and no Markdown code fences."
)
"""Appended to the system prompt for `json_output=True`: the API has no schema-free JSON switch."""

_STRUCTURED_FALLBACK = (
    "Respond with a single JSON object that matches this JSON Schema, and nothing else: no text before or after "
    "it and no Markdown code fences.\nJSON Schema: {schema}"
)

_RESERVED_EXTRA = frozenset({"model", "messages", "stream", "system"})


_ANTHROPIC_RULES = (
    # An unknown name behind the Anthropic API (or a proxy speaking it) is most likely a current Claude model:
    # images and tools, but no structured output until told (model_info={"structured_output": True}).
    ModelRule.of("", vision=True, family="claude", context_window=200_000),
    ModelRule.of("claude-2", family="claude-2", context_window=100_000),
    ModelRule.of("claude-instant", family="claude-2", context_window=100_000),
    ModelRule.of("claude-3", vision=True, family="claude-3", context_window=200_000),
    ModelRule.of("claude-3-5-haiku", family="claude-3-5", context_window=200_000),
)

ANTHROPIC_MODELS: ModelTable = KNOWN_MODELS.extend(_ANTHROPIC_RULES)
"""ext-core's table plus Claude families it leaves out and a Claude-like default for unknown names."""


# --- settings and validation --------------------------------------------------------------------------


@dataclass(frozen=True)
class AnthropicWireSettings:
    """Per-client request settings the mapping needs (the SDK client's own options live elsewhere)."""

    max_tokens: int
    thinking: Mapping[str, Any] | None = None
    system_policy: SystemPolicy = "leading_then_user"
    extra_body: Mapping[str, Any] | None = None


def thinking_enabled(thinking: Mapping[str, Any] | None) -> bool:
    """Whether a `thinking` config lets the model think (so earlier thinking blocks are sent back)."""
    return thinking is not None and thinking.get("type") in _THINKING_ON


def check_thinking(thinking: Any, max_tokens: int, *, where: str = "thinking") -> dict[str, Any] | None:
    """A validated copy of a `thinking` config, or ConfigurationError naming what is wrong.

    Accepts `{"type": "enabled", "budget_tokens": n}` (1024 <= n < max_tokens), `{"type": "adaptive"}`,
    `{"type": "between_tools"}` and `{"type": "disabled"}`, with an optional `display` for enabled/adaptive.
    """
    if thinking is None:
        return None
    if not isinstance(thinking, Mapping):
        raise ConfigurationError(f"{where} must be a mapping like {{'type': 'enabled', 'budget_tokens': 2048}}")
    kind = thinking.get("type")
    if kind not in THINKING_TYPES:
        raise ConfigurationError(f"{where}.type must be one of {sorted(THINKING_TYPES)}, got {kind!r}")
    out = dict(thinking)
    allowed = {"type"}
    if kind == "enabled":
        allowed |= {"budget_tokens", "display"}
        budget = thinking.get("budget_tokens")
        if not isinstance(budget, int) or isinstance(budget, bool):
            raise ConfigurationError(f"{where}.budget_tokens is required for type 'enabled' (an int >= 1024)")
        if budget < MIN_THINKING_BUDGET:
            raise ConfigurationError(f"{where}.budget_tokens must be >= {MIN_THINKING_BUDGET}, got {budget}")
        if budget >= max_tokens:
            raise ConfigurationError(
                f"{where}.budget_tokens ({budget}) must be less than max_tokens ({max_tokens}): the budget is part "
                "of max_tokens"
            )
    elif kind == "adaptive":
        allowed |= {"display"}
    extra = set(thinking) - allowed
    if extra:
        raise ConfigurationError(f"{where}: unexpected keys {sorted(extra)} for type {kind!r}")
    display = thinking.get("display")
    if display is not None and display not in ("summarized", "omitted"):
        raise ConfigurationError(f"{where}.display must be 'summarized' or 'omitted', got {display!r}")
    return out


def check_sampling(
    temperature: float | None,
    top_p: float | None,
    top_k: int | None,
    thinking: Mapping[str, Any] | None,
    *,
    error: type[ConfigurationError] = ConfigurationError,
) -> None:
    """The API's rules for sampling with thinking on: temperature 1 (or unset), no top_k, top_p >= 0.95."""
    if temperature is not None and temperature > 1:
        raise error(f"temperature must be between 0 and 1 for Anthropic models, got {temperature}")
    if not thinking_enabled(thinking):
        return
    if temperature is not None and temperature != 1:
        raise error(f"temperature must be 1 (or unset) when thinking is on, got {temperature}")
    if top_k is not None:
        raise error("top_k must be unset when thinking is on")
    if top_p is not None and top_p < 0.95:
        raise error(f"top_p must be >= 0.95 (or unset) when thinking is on, got {top_p}")


def check_options(request: ChatRequest, settings: AnthropicWireSettings) -> None:
    """Raise `UnsupportedOptionError` for per-call options the Messages API cannot honour, before any request."""
    options = request.options
    for name in ("frequency_penalty", "presence_penalty", "seed"):
        if getattr(options, name) is not None:
            raise UnsupportedOptionError(f"{name} is not supported by the Anthropic Messages API; leave it unset")
    max_tokens = options.max_tokens or settings.max_tokens
    if request.extra:
        check_extra_args(request.extra, max_tokens)
    thinking = _thinking_of(request, settings)
    check_sampling(options.temperature, options.top_p, options.top_k, thinking, error=UnsupportedOptionError)
    if thinking is not None and thinking.get("type") == "enabled" and thinking["budget_tokens"] >= max_tokens:
        raise UnsupportedOptionError(
            f"max_tokens ({max_tokens}) must be greater than thinking.budget_tokens ({thinking['budget_tokens']})"
        )
    if thinking_enabled(thinking) and request.tools and request.tool_choice not in ("auto", "none"):
        raise UnsupportedOptionError(
            f"tool_choice={request.tool_choice!r} forces a tool call, which the API rejects while thinking is on; "
            "use 'auto' or turn thinking off"
        )


def check_extra_args(extra: Mapping[str, Any], max_tokens: int) -> None:
    """`extra_create_args` go into the request body; keys this package sets from other arguments are refused."""
    reserved = sorted(_RESERVED_EXTRA & set(extra))
    if reserved:
        raise ConfigurationError(
            f"extra_create_args must not set {reserved}: pass messages, the model (ChatOptions.model_id) and the "
            "system prompt (SystemMessage) as arguments"
        )
    if "thinking" in extra:
        check_thinking(extra["thinking"], max_tokens, where="extra_create_args['thinking']")


def _thinking_of(request: ChatRequest, settings: AnthropicWireSettings) -> Mapping[str, Any] | None:
    if "thinking" in request.extra:
        thinking: Mapping[str, Any] | None = request.extra["thinking"]
        return thinking
    return settings.thinking


# --- messages -----------------------------------------------------------------------------------------


def _image_block(image: Image, where: str) -> dict[str, Any]:
    if image.mime_type not in IMAGE_TYPES:
        raise ConfigurationError(
            f"{where}: the Anthropic API accepts {sorted(IMAGE_TYPES)} images, got {image.mime_type!r}"
        )
    return {"type": "image", "source": {"type": "base64", "media_type": image.mime_type, "data": image.to_base64()}}


def _text_block(text: str) -> dict[str, Any] | None:
    # The API rejects empty and whitespace-only text blocks.
    return {"type": "text", "text": text} if text and not text.isspace() else None


def _reasoning_blocks(reasoning: Sequence[ReasoningBlock]) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    for block in reasoning:
        if block.provider not in (None, PROVIDER):
            continue  # another provider's reasoning cannot be verified by this API
        if block.redacted_data is not None:
            blocks.append({"type": "redacted_thinking", "data": block.redacted_data})
        elif block.signature is not None:
            blocks.append({"type": "thinking", "thinking": block.text, "signature": block.signature})
    return blocks


def _assistant_blocks(message: AssistantMessage, where: str, send_thinking: bool) -> list[dict[str, Any]]:
    blocks = _reasoning_blocks(message.reasoning) if send_thinking and message.reasoning else []
    if isinstance(message.content, str):
        text = _text_block(message.content)
        if text is not None:
            blocks.append(text)
        return blocks
    for j, call in enumerate(message.content):
        try:
            arguments = parse_tool_arguments(call.arguments, tool=call.name)
        except ToolArgumentsError as exc:
            raise ConfigurationError(f"{where}.content[{j}].arguments: {exc}") from None
        blocks.append({"type": "tool_use", "id": call.id, "name": call.name, "input": arguments})
    return blocks


def _user_blocks(message: UserMessage, where: str) -> list[dict[str, Any]]:
    if isinstance(message.content, str):
        text = _text_block(message.content)
        return [text] if text is not None else []
    blocks: list[dict[str, Any]] = []
    for j, part in enumerate(message.content):
        if isinstance(part, str):
            text = _text_block(part)
            if text is not None:
                blocks.append(text)
        else:
            blocks.append(_image_block(part, f"{where}.content[{j}]"))
    return blocks


def _result_blocks(message: FunctionExecutionResultMessage) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    for result in message.content:
        block: dict[str, Any] = {"type": "tool_result", "tool_use_id": result.call_id}
        if result.content:  # the API rejects an empty text block but accepts a result without content
            block["content"] = result.content
        if result.is_error:
            block["is_error"] = True
        blocks.append(block)
    return blocks


def map_messages(
    messages: Sequence[LLMMessage],
    *,
    system_policy: SystemPolicy = "leading_then_user",
    send_thinking: bool = False,
) -> tuple[str | None, list[dict[str, Any]]]:
    """The system prompt and the `messages` list the API accepts.

    - System messages follow `system_policy` (`ext.core.split_system_messages`): with the default
      `leading_then_user`, the leading ones become the system prompt and later ones user turns in place.
    - Consecutive messages of one role are merged (the API needs user/assistant turns); tool results go in a
      user turn as `tool_result` blocks (with `is_error`), placed before any text of that turn.
    - Empty and whitespace-only text is left out (the API rejects it); a message left with nothing is dropped.
    - The final assistant message loses trailing whitespace (the API rejects it there).
    - Earlier thinking blocks (`AssistantMessage.reasoning`) are sent back unchanged, signatures included,
      when `send_thinking` (thinking is on); without a signature they cannot be, and are left out.
    """
    positions: dict[int, int] | None = None  # for error texts: made only when a message needs it
    system, rest = split_system_messages(messages, system_policy)
    wire: list[dict[str, Any]] = []
    for message in rest:
        if type(message) is UserMessage and type(message.content) is str:  # the common turn, nothing to name
            text = _text_block(message.content)
            if text is None:
                logger.debug("a user message has no content the API accepts; left out")
                continue
            if wire and wire[-1]["role"] == "user":
                wire[-1]["content"].append(text)
            else:
                wire.append({"role": "user", "content": [text]})
            continue
        if positions is None:
            positions = {id(m): i for i, m in enumerate(messages)}
        where = f"messages[{positions.get(id(message), '?')}]"
        if isinstance(message, UserMessage):
            role, blocks = "user", _user_blocks(message, where)
        elif isinstance(message, AssistantMessage):
            role, blocks = "assistant", _assistant_blocks(message, where, send_thinking)
        elif isinstance(message, FunctionExecutionResultMessage):
            role, blocks = "user", _result_blocks(message)
        else:  # pragma: no cover - split_system_messages leaves no other kind
            raise ConfigurationError(f"{where}: unexpected message type {type(message).__name__}")
        if not blocks:
            logger.debug("%s has no content the API accepts; left out", where)
            continue
        if wire and wire[-1]["role"] == role:
            wire[-1]["content"].extend(blocks)
        else:
            wire.append({"role": role, "content": blocks})
    for turn in wire:
        content = turn["content"]
        if turn["role"] == "user" and len(content) > 1 and any(b["type"] == "tool_result" for b in content):
            # tool_result blocks must open their turn: a stable sort keeps every other order.
            content.sort(key=lambda b: b["type"] != "tool_result")
    if wire and wire[-1]["role"] == "assistant":
        content = wire[-1]["content"]
        if content and content[-1]["type"] == "text":
            text = content[-1]["text"].rstrip()
            if text:
                content[-1] = {"type": "text", "text": text}
            else:
                content.pop()
        if not content:
            wire.pop()
    if not wire:
        raise ConfigurationError("messages: nothing to send: every user and assistant message is empty")
    if system is not None and not system.strip():
        system = None
    return system, wire


# --- tools and output -------------------------------------------------------------------------------


def map_tools(tools: Sequence[ToolSchema]) -> list[dict[str, Any]]:
    """Tool schemas as the API's custom tools (`input_schema`; `strict` when the schema asks for it)."""
    out: list[dict[str, Any]] = []
    for tool in tools:
        entry: dict[str, Any] = {"name": tool["name"], "input_schema": tool.get("parameters") or {"type": "object"}}
        if tool.get("description"):
            entry["description"] = tool["description"]
        if tool.get("strict"):
            entry["strict"] = True
        out.append(entry)
    return out


def map_tool_choice(tool_choice: str) -> dict[str, Any]:
    """`auto`, `none`, `required` (the API's `any`) or a tool name (`{"type": "tool", "name": ...}`)."""
    if tool_choice in ("auto", "none"):
        return {"type": tool_choice}
    if tool_choice == "required":
        return {"type": "any"}
    return {"type": "tool", "name": tool_choice}


@functools.lru_cache(maxsize=256)
def structured_output_schema(model: type[BaseModel]) -> dict[str, Any]:
    """The JSON schema of `model` in the form structured output accepts (the anthropic SDK's `transform_schema`:
    `additionalProperties: false`, unsupported constraints moved into descriptions)."""
    from anthropic import transform_schema  # the SDK is heavy to import: only when structured output is used

    return transform_schema(model)


def map_output(json_output: bool | type[BaseModel], info: ModelInfo) -> tuple[dict[str, Any] | None, str | None]:
    """`output_config` and an instruction to add to the system prompt, for JSON mode or structured output.

    A pydantic model goes as `output_config.format` (`json_schema`) when the model supports structured output
    (`ModelInfo.structured_output`); otherwise, and for JSON mode (the API has no schema-free JSON switch),
    the request asks for JSON in the system prompt. Either way core parses the reply into `CreateResult.parsed`.
    """
    if json_output is False:
        return None, None
    if json_output is True:
        return None, JSON_MODE_INSTRUCTION
    if info.structured_output:
        return {"format": {"type": "json_schema", "schema": structured_output_schema(json_output)}}, None
    schema = json.dumps(json_output.model_json_schema(), separators=(",", ":"))
    return None, _STRUCTURED_FALLBACK.format(schema=schema)


def map_request(request: ChatRequest, info: ModelInfo, settings: AnthropicWireSettings) -> dict[str, Any]:
    """The Messages API body for `request`, without `model` and `stream` (the caller adds what its endpoint
    needs). Sampling options (`temperature`, `top_p`, `top_k`) are plain body keys."""
    options = request.options
    thinking = _thinking_of(request, settings)
    system, messages = map_messages(
        request.messages, system_policy=settings.system_policy, send_thinking=thinking_enabled(thinking)
    )
    body: dict[str, Any] = {"max_tokens": options.max_tokens or settings.max_tokens, "messages": messages}
    output_config, instruction = map_output(request.json_output, info)
    system_blocks: list[dict[str, Any]] = []
    if system is not None:
        system_blocks.append({"type": "text", "text": system})
    if instruction is not None:
        system_blocks.append({"type": "text", "text": instruction})
    if system_blocks:
        body["system"] = system_blocks
    if request.tools:
        body["tools"] = map_tools(request.tools)
        body["tool_choice"] = map_tool_choice(request.tool_choice)
    if output_config is not None:
        body["output_config"] = output_config
    if options.stop_sequences:
        body["stop_sequences"] = list(options.stop_sequences)
    if thinking is not None:
        body["thinking"] = dict(thinking)
    if options.temperature is not None:
        body["temperature"] = options.temperature
    if options.top_p is not None:
        body["top_p"] = options.top_p
    if options.top_k is not None:
        body["top_k"] = options.top_k
    if settings.extra_body:
        body.update(settings.extra_body)
    if request.extra:
        body.update(request.extra)
    return body


# --- responses ----------------------------------------------------------------------------------------


def _get(obj: Any, name: str) -> Any:
    """A field of an SDK object or of the same object as parsed JSON."""
    if isinstance(obj, dict):
        return obj.get(name)
    return getattr(obj, name, None)


def map_usage(usage: Any) -> RequestUsage:
    """`usage` as `RequestUsage`: prompt tokens include tokens read from and written to the prompt cache
    (the API counts them apart from `input_tokens`); `cached_tokens` are those read from it."""
    if usage is None:
        return RequestUsage()
    if type(usage) is dict and "output_tokens_details" not in usage:
        # The JSON reply's usage (a dict): the keys read directly.
        cache_read = usage.get("cache_read_input_tokens")
        prompt = (usage.get("input_tokens") or 0) + (cache_read or 0) + (usage.get("cache_creation_input_tokens") or 0)
        completion = usage.get("output_tokens") or 0
        if type(prompt) is int and type(completion) is int and _int_or_none(cache_read):
            return RequestUsage.of(prompt, completion, cache_read, None)
    cache_read = _get(usage, "cache_read_input_tokens")
    cache_write = _get(usage, "cache_creation_input_tokens") or 0
    details = _get(usage, "output_tokens_details")
    thinking = _get(details, "thinking_tokens") if details is not None else None
    prompt = (_get(usage, "input_tokens") or 0) + (cache_read or 0) + cache_write
    completion = _get(usage, "output_tokens") or 0
    if type(prompt) is int and type(completion) is int and _int_or_none(cache_read) and _int_or_none(thinking):
        return RequestUsage.of(prompt, completion, cache_read, thinking)
    # Not plain ints (a float, a numeric string): validation converts them or names the bad field.
    return RequestUsage(
        prompt_tokens=prompt, completion_tokens=completion, cached_tokens=cache_read, reasoning_tokens=thinking
    )


def _int_or_none(value: Any) -> bool:
    return value is None or type(value) is int


def _join(parts: Sequence[str]) -> str | None:
    text = "\n".join([p for p in parts if p])
    return text or None


def _result(
    texts: list[str],
    calls: list[FunctionCall],
    reasoning: list[ReasoningBlock],
    stop_reason: str | None,
    usage: RequestUsage,
) -> CreateResult:
    # Every value here is built with its type (texts are checked `str`s, calls and reasoning ext models, usage
    # from `map_usage`), so the result is constructed without validating it again.
    thoughts = [block.text for block in reasoning if block.text]
    if calls:
        # The text a model writes before its tool calls has no place in `content`: it joins the thought.
        return CreateResult.of(
            normalize_finish_reason(stop_reason, has_tool_calls=True),
            calls,
            usage,
            _join([*thoughts, *texts]),
            reasoning,
        )
    return CreateResult.of(normalize_finish_reason(stop_reason), "".join(texts), usage, _join(thoughts), reasoning)


def _arguments_text(value: Any) -> str:
    if isinstance(value, str):
        return value or "{}"
    return json.dumps(value if value is not None else {}, ensure_ascii=False)


def map_response(message: Any) -> CreateResult:
    """A Messages API response (SDK `Message` or its JSON) as a `CreateResult`.

    Text blocks are joined; `tool_use` blocks become `FunctionCall`s; `thinking` and `redacted_thinking`
    blocks become `ReasoningBlock`s (provider `anthropic`) to send back next turn, and the thinking text the
    `thought`. `stop_reason` maps to `finish_reason` (`refusal` is `content_filter`).
    """
    if type(message) is dict:
        content = message.get("content")
        if type(content) is list and len(content) == 1:
            block = content[0]
            if type(block) is dict and block.get("type") == "text" and type(block.get("text")) is str:
                # The most common reply, as JSON: one text block.
                reason = normalize_finish_reason(message.get("stop_reason"))
                return CreateResult.of(reason, block["text"], map_usage(message.get("usage")), None, [])
    texts: list[str] = []
    calls: list[FunctionCall] = []
    reasoning: list[ReasoningBlock] = []
    for block in _get(message, "content") or ():
        kind = _get(block, "type")
        if kind == "text":
            texts.append(_get(block, "text") or "")
        elif kind == "tool_use":
            calls.append(
                FunctionCall(
                    id=_get(block, "id"), name=_get(block, "name"), arguments=_arguments_text(_get(block, "input"))
                )
            )
        elif kind == "thinking":
            reasoning.append(
                ReasoningBlock(
                    text=_get(block, "thinking") or "", signature=_get(block, "signature"), provider=PROVIDER
                )
            )
        elif kind == "redacted_thinking":
            reasoning.append(ReasoningBlock(redacted_data=_get(block, "data"), provider=PROVIDER))
    return _result(texts, calls, reasoning, _get(message, "stop_reason"), map_usage(_get(message, "usage")))


@dataclass
class _Block:
    kind: str
    text: list[str] = field(default_factory=list)
    signature: str | None = None
    data: str | None = None
    id: str = ""
    name: str = ""
    initial_input: Any = None


_chunk = StreamChunk.of


class StreamState:
    """Accumulates the events of a streamed response; `handle` returns a chunk for text and thinking deltas.

    Events are SDK objects or their JSON (Bedrock). Call `result()` after `message_stop`; a stream that ended
    before it raises `IncompleteStreamError`.
    """

    __slots__ = ("_blocks", "_done", "_input", "_output", "_stop_reason", "_usage")

    def __init__(self) -> None:
        self._blocks: dict[int, _Block] = {}
        self._usage: Any = None
        self._input: dict[str, Any] = {}
        self._output: int | None = None
        self._stop_reason: str | None = None
        self._done = False

    @property
    def done(self) -> bool:
        """Whether `message_stop` arrived."""
        return self._done

    def handle(self, event: Any) -> StreamChunk | None:
        as_dict = type(event) is dict
        kind = event.get("type") if as_dict else getattr(event, "type", None)
        if kind == "content_block_delta":
            # The hot path (one call per streamed token): plain attribute and key access, no helper calls.
            if as_dict:
                delta, index = event["delta"], event["index"]
                delta_kind = delta.get("type")
            else:
                delta, index = event.delta, event.index
                delta_kind = delta.type
            block = self._blocks.get(index)
            if block is None:
                raise IncompleteStreamError("a content_block_delta arrived for a block that was never started")
            if delta_kind == "text_delta":
                text = delta["text"] if as_dict else delta.text
                block.text.append(text)
                # A checked str needs no validation (the SDK's and the JSON's texts are str; anything else is
                # validated, which names the bad value).
                return _chunk(text) if type(text) is str else StreamChunk(content=text)
            if delta_kind == "input_json_delta":
                block.text.append(_get(delta, "partial_json"))
                return None
            if delta_kind == "thinking_delta":
                thinking = _get(delta, "thinking")
                block.text.append(thinking)
                return _chunk("", thinking) if type(thinking) is str else StreamChunk(thought=thinking)
            if delta_kind == "signature_delta":
                block.signature = _get(delta, "signature")
            return None
        if kind == "content_block_start":
            head = _get(event, "content_block")
            block = _Block(kind=_get(head, "type"))
            if block.kind == "text":
                initial = _get(head, "text")
                if initial:
                    block.text.append(initial)
            elif block.kind == "tool_use":
                block.id = _get(head, "id")
                block.name = _get(head, "name")
                block.initial_input = _get(head, "input")
            elif block.kind == "thinking":
                initial = _get(head, "thinking")
                if initial:
                    block.text.append(initial)
                block.signature = _get(head, "signature") or None
            elif block.kind == "redacted_thinking":
                block.data = _get(head, "data")
            self._blocks[_get(event, "index")] = block
            return None
        if kind == "message_start":
            message = _get(event, "message")
            self._usage = _get(message, "usage")
            return None
        if kind == "message_delta":
            self._stop_reason = _get(_get(event, "delta"), "stop_reason")
            usage = _get(event, "usage")
            if usage is not None:
                self._output = _get(usage, "output_tokens")
                for name in ("input_tokens", "cache_read_input_tokens", "cache_creation_input_tokens"):
                    value = _get(usage, name)
                    if value is not None:
                        self._input[name] = value
                details = _get(usage, "output_tokens_details")
                if details is not None:
                    self._input["output_tokens_details"] = details
            return None
        if kind == "message_stop":
            self._done = True
        return None

    def usage(self) -> RequestUsage:
        """Usage so far: input counts from `message_start` (updated by `message_delta`), output from the last
        `message_delta`."""
        merged: dict[str, Any] = {}
        if self._usage is not None:
            for name in ("input_tokens", "cache_read_input_tokens", "cache_creation_input_tokens", "output_tokens"):
                merged[name] = _get(self._usage, name)
        merged.update(self._input)
        if self._output is not None:
            merged["output_tokens"] = self._output
        return map_usage(merged)

    def result(self) -> CreateResult:
        if not self._done:
            raise IncompleteStreamError("the response stream ended before message_stop")
        texts: list[str] = []
        calls: list[FunctionCall] = []
        reasoning: list[ReasoningBlock] = []
        for index in sorted(self._blocks):
            block = self._blocks[index]
            if block.kind == "text":
                texts.append("".join(block.text))
            elif block.kind == "tool_use":
                arguments = "".join(block.text) if block.text else _arguments_text(block.initial_input)
                calls.append(FunctionCall(id=block.id, name=block.name, arguments=arguments or "{}"))
            elif block.kind == "thinking":
                reasoning.append(ReasoningBlock(text="".join(block.text), signature=block.signature, provider=PROVIDER))
            elif block.kind == "redacted_thinking":
                reasoning.append(ReasoningBlock(redacted_data=block.data, provider=PROVIDER))
        return _result(texts, calls, reasoning, self._stop_reason, self.usage())


class IncompleteStreamError(ConnectionError):
    """A response stream broke off before its end (`message_stop`). A `ConnectionError`, so core retries it
    when nothing was yielded yet."""
