"""ext messages, tools and output settings to the Anthropic Messages request body (a plain dict)."""

from __future__ import annotations

import functools
import json
import logging
from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel

from ext.core import (
    AssistantMessage,
    ChatRequest,
    ConfigurationError,
    FunctionExecutionResultMessage,
    Image,
    LLMMessage,
    ModelInfo,
    ReasoningBlock,
    SystemPolicy,
    ToolArgumentsError,
    ToolSchema,
    UserMessage,
    parse_tool_arguments,
    split_system_messages,
)

from ._settings import PROVIDER, AnthropicWireSettings, _thinking_of, thinking_enabled

logger = logging.getLogger("ext.models.anthropic._mapping")

__all__ = [
    "IMAGE_TYPES",
    "JSON_MODE_INSTRUCTION",
    "map_messages",
    "map_output",
    "map_request",
    "map_tool_choice",
    "map_tools",
    "structured_output_schema",
]

IMAGE_TYPES = frozenset({"image/jpeg", "image/png", "image/gif", "image/webp"})
"""Image MIME types the Messages API accepts."""

JSON_MODE_INSTRUCTION = (
    "Respond with a single valid JSON value and nothing else: no text before or after it and no Markdown code fences."
)
"""Appended to the system prompt for `json_output=True`: the API has no schema-free JSON switch."""

_STRUCTURED_FALLBACK = (
    "Respond with a single JSON object that matches this JSON Schema, and nothing else: no text before or after "
    "it and no Markdown code fences.\nJSON Schema: {schema}"
)


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
