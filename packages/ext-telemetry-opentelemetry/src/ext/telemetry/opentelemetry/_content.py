"""Message content in the shapes the GenAI conventions give `gen_ai.input.messages`, `gen_ai.output.messages` and
`gen_ai.system_instructions` (JSON text of role + parts). Used only when content capture is on."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from ext.core import (
    AssistantMessage,
    CreateResult,
    FunctionCall,
    FunctionExecutionResultMessage,
    Image,
    LLMMessage,
    SystemMessage,
    UserMessage,
)

_FINISH_REASONS = {"function_calls": "tool_call"}
"""ext's finish reasons whose conventions name differs (the others, `stop`, `length`, `content_filter`, are the
same; `unknown` stays as is)."""


def finish_reason(reason: str) -> str:
    """A result's `finish_reason` as the conventions name it."""
    return _FINISH_REASONS.get(reason, reason)


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _arguments(call: FunctionCall) -> Any:
    try:
        return json.loads(call.arguments)
    except ValueError:
        return call.arguments  # not JSON: recorded as the model sent it


def _tool_call_part(call: FunctionCall) -> dict[str, Any]:
    return {"type": "tool_call", "id": call.id, "name": call.name, "arguments": _arguments(call)}


def _user_parts(content: str | Sequence[str | Image]) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "content": content}]
    parts: list[dict[str, Any]] = []
    for item in content:
        if isinstance(item, str):
            parts.append({"type": "text", "content": item})
        else:  # the image's bytes are left out: only that there was one, and its type
            parts.append({"type": "blob", "modality": "image", "mime_type": item.mime_type})
    return parts


def _assistant_parts(content: str | list[FunctionCall], thought: str | None) -> list[dict[str, Any]]:
    parts: list[dict[str, Any]] = []
    if thought:
        parts.append({"type": "reasoning", "content": thought})
    if isinstance(content, str):
        if content:
            parts.append({"type": "text", "content": content})
    else:
        parts.extend(_tool_call_part(c) for c in content)
    return parts


def input_messages(messages: Sequence[LLMMessage]) -> tuple[str | None, str]:
    """(`gen_ai.system_instructions` or None, `gen_ai.input.messages`) as JSON text."""
    system: list[dict[str, Any]] = []
    out: list[dict[str, Any]] = []
    for message in messages:
        if isinstance(message, SystemMessage):
            system.append({"type": "text", "content": message.content})
        elif isinstance(message, UserMessage):
            out.append({"role": "user", "parts": _user_parts(message.content)})
        elif isinstance(message, AssistantMessage):
            out.append({"role": "assistant", "parts": _assistant_parts(message.content, message.thought)})
        elif isinstance(message, FunctionExecutionResultMessage):
            parts = [{"type": "tool_call_response", "id": r.call_id, "response": r.content} for r in message.content]
            out.append({"role": "tool", "parts": parts})
    return (_json(system) if system else None), _json(out)


def output_messages(result: CreateResult) -> str:
    """`gen_ai.output.messages` for one result, as JSON text."""
    message = {
        "role": "assistant",
        "parts": _assistant_parts(result.content, result.thought),
        "finish_reason": finish_reason(result.finish_reason),
    }
    return _json([message])
