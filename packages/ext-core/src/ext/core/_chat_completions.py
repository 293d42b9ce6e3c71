"""Request shapes of the OpenAI Chat Completions wire format, as plain dicts.

Several providers speak this format: OpenAI and Azure OpenAI, Azure AI Inference,
and OpenAI-compatible servers (vLLM, llama.cpp's server). The messages, tools, tool
choice and response format they take are built here once; each provider adds its own options and reads
its SDK's responses itself.
"""

from __future__ import annotations

import copy
import functools
import re
from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import Any

from pydantic import BaseModel

from ._errors import ConfigurationError
from ._mapping import normalize_parameters
from ._messages import AssistantMessage, FunctionCall, LLMMessage, SystemMessage, UserMessage
from ._model_info import ModelInfo
from ._options import ChatOptions
from ._tools import ToolSchema

__all__ = [
    "CHAT_RESERVED_EXTRA_ARGS",
    "CHAT_TOOL_ERROR_PREFIX",
    "split_chat_extra_args",
    "ChatToolCallDeltas",
    "chat_options",
    "chat_messages",
    "chat_response_format",
    "chat_tool_choice",
    "chat_tools",
    "strict_schema",
]

CHAT_TOOL_ERROR_PREFIX = "Error: "
"""Prefixed to a failed tool result's content: Chat Completions has no `is_error` field on tool messages."""


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


def chat_messages(messages: Iterable[LLMMessage], *, system_role: str = "system") -> list[dict[str, Any]]:
    """Chat Completions messages, one per ext message (one per result for tool results), in order.

    System messages stay where they are, with `system_role` as their role (`system`, `developer`, or
    `user` for models that take neither). An assistant turn's `thought` is not sent back: OpenAI has
    no input field for it and some compatible servers reject `reasoning_content` in requests. A
    failed tool result's content starts with `CHAT_TOOL_ERROR_PREFIX`.
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
                # An empty `content` is sent, not left out or null: the API takes all three, but llama-cpp-python's
                # server refuses null (its request type wants a string) and its chatml-function-calling template
                # fails (500) on a missing key.
                out.append(
                    {
                        "role": "assistant",
                        "content": "",
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
                        "content": CHAT_TOOL_ERROR_PREFIX + text if result.is_error else text,
                    }
                )
    return out


# --- tools and structured output ---------------------------------------------------------------


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


def chat_response_format(json_output: bool | type[BaseModel], info: ModelInfo) -> dict[str, Any] | None:
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


def chat_tools(tools: Sequence[ToolSchema]) -> list[dict[str, Any]]:
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


def chat_tool_choice(tool_choice: str) -> str | dict[str, Any]:
    """`auto` / `none` / `required` as is, a tool name as a named function choice.

    `auto` is the API's default, but it is sent anyway: some OpenAI-compatible servers (llama-cpp-python's with
    the `chatml-function-calling` chat format) ignore `tools` unless the request carries `tool_choice`.
    """
    if tool_choice in ("auto", "none", "required"):
        return tool_choice
    return {"type": "function", "function": {"name": tool_choice}}


# --- options ------------------------------------------------------------------------------------------


def chat_options(
    options: ChatOptions, *, max_tokens_field: str = "max_tokens", sampling: bool = True
) -> dict[str, Any]:
    """Chat Completions parameters for `ChatOptions` (`top_k` has no field: each provider decides).

    `max_tokens_field` names the token limit (OpenAI's reasoning models take `max_completion_tokens`);
    `sampling=False` leaves out temperature, top_p and the penalties (for models that take none).
    """
    out: dict[str, Any] = {}
    if options.max_tokens is not None:
        out[max_tokens_field] = options.max_tokens
    if options.stop_sequences:
        out["stop"] = list(options.stop_sequences)
    if options.seed is not None:
        out["seed"] = options.seed
    if not sampling:
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


# --- streamed tool calls ----------------------------------------------------------------------------------


class _ToolCallParts:
    __slots__ = ("arguments", "id", "name")

    def __init__(self) -> None:
        self.id: str | None = None
        self.name = ""
        self.arguments: list[str] = []


class ChatToolCallDeltas:
    """Tool calls of a Chat Completions stream, assembled from their deltas by `index` (fragments of parallel
    calls may interleave). `add` takes one delta's fields; `calls()` gives the `FunctionCall`s in index order
    (a call whose id never came gets `call_<index>`)."""

    __slots__ = ("_parts",)

    def __init__(self) -> None:
        self._parts: dict[int, _ToolCallParts] = {}

    def add(self, index: int, id: str | None, name: str | None, arguments: str | None) -> None:
        parts = self._parts.get(index)
        if parts is None:
            parts = self._parts[index] = _ToolCallParts()
        if id:
            parts.id = id
        if name:
            parts.name = name
        if arguments:
            parts.arguments.append(arguments)

    def __bool__(self) -> bool:
        return bool(self._parts)

    def calls(self) -> list[FunctionCall]:
        return [
            FunctionCall.of(part.id or f"call_{index}", part.name, "".join(part.arguments))
            for index, part in sorted(self._parts.items())
        ]


# --- extra_create_args ------------------------------------------------------------------------------------

CHAT_RESERVED_EXTRA_ARGS = frozenset({"messages", "model", "stream"})
"""`extra_create_args` keys ext owns: messages and the model come from the call, streaming from the method."""


def split_chat_extra_args(
    extra: Mapping[str, Any], *, known: Collection[str], extras_key: str
) -> tuple[dict[str, Any], dict[str, Any]]:
    """`extra_create_args` split into the fields a provider's API (or SDK call) names (`known`) and the rest,
    which the provider sends as extra body fields. A mapping under `extras_key` (e.g. `extra_body`,
    `model_extras`) is merged into the rest. `CHAT_RESERVED_EXTRA_ARGS` raise `ConfigurationError`."""
    fields: dict[str, Any] = {}
    extras: dict[str, Any] = {}
    for key, value in extra.items():
        if key in CHAT_RESERVED_EXTRA_ARGS:
            raise ConfigurationError(
                f"extra_create_args must not set {key!r}: pass messages to create(), the model as "
                "options={'model_id': ...}, and use create_stream() to stream"
            )
        if key == extras_key:
            if not isinstance(value, Mapping):
                raise ConfigurationError(
                    f"extra_create_args[{extras_key!r}] must be a mapping, got {type(value).__name__}"
                )
            extras.update(value)
        elif key in known:
            fields[key] = value
        else:
            extras[key] = value
    return fields, extras
