"""Shared logic each provider would otherwise rewrite: system-message policy, tool schemas,
tool-call arguments, finish reasons, JSON and structured output, token estimates."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Literal

from pydantic import BaseModel, ValidationError

from ._errors import ConfigurationError, OutputParseError, ToolArgumentsError
from ._messages import (
    AssistantMessage,
    FinishReason,
    FunctionExecutionResultMessage,
    LLMMessage,
    SystemMessage,
    UserMessage,
)

# --- system messages --------------------------------------------------------------------------

SystemPolicy = Literal["keep", "hoist", "leading_then_user"]
"""How a client handles system messages that are not at the start of the list.

- `keep`: leave them where they are (the API accepts system messages anywhere).
- `hoist`: join every system message, in order, into one system prompt.
- `leading_then_user`: join the leading ones into the system prompt; later ones become user
  messages (`source="system"`), keeping their place in the conversation.
"""


def split_system_messages(
    messages: Sequence[LLMMessage], policy: SystemPolicy = "hoist", separator: str = "\n\n"
) -> tuple[str | None, list[LLMMessage]]:
    """The system prompt (None if there is none) and the other messages, by `policy`."""
    if policy == "keep":
        return None, list(messages)
    system: list[str] = []
    rest: list[LLMMessage] = []
    leading = True
    for message in messages:
        if isinstance(message, SystemMessage):
            if policy == "hoist" or leading:
                system.append(message.content)
            else:
                rest.append(UserMessage(content=message.content, source="system"))
        else:
            leading = False
            rest.append(message)
    return (separator.join(system) if system else None), rest


# --- tool schemas -------------------------------------------------------------------------------

_TOOL_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")


def check_tool_name(name: str) -> str:
    """`name` if providers accept it (1 to 64 of letters, digits, '_' and '-'), else ConfigurationError."""
    if not isinstance(name, str) or not _TOOL_NAME.match(name):
        raise ConfigurationError(
            f"tool name {name!r} is invalid: use 1 to 64 letters, digits, '_' or '-' (providers reject others)"
        )
    return name


_SCHEMA_MAPS = ("properties", "$defs", "definitions", "patternProperties")
_SCHEMA_LISTS = ("anyOf", "allOf", "oneOf", "prefixItems")
_SCHEMA_ONE = ("items", "additionalProperties", "not", "if", "then", "else", "contains")


def _walk(schema: Any, defs: Mapping[str, Any], stack: tuple[str, ...], drop_titles: bool) -> Any:
    if not isinstance(schema, dict):
        return schema
    ref = schema.get("$ref")
    if isinstance(ref, str) and ref.startswith(("#/$defs/", "#/definitions/")):
        name = ref.rsplit("/", 1)[1]
        if name in stack or name not in defs:
            return schema  # recursive models keep their reference
        target = _walk(defs[name], defs, (*stack, name), drop_titles)
        extra = {k: v for k, v in schema.items() if k != "$ref"}
        return {**target, **_walk(extra, defs, stack, drop_titles)} if extra else target
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key in ("$defs", "definitions"):
            continue
        if drop_titles and key == "title" and isinstance(value, str):
            continue
        if key in _SCHEMA_MAPS and isinstance(value, dict):
            out[key] = {k: _walk(v, defs, stack, drop_titles) for k, v in value.items()}
        elif key in _SCHEMA_LISTS and isinstance(value, list):
            out[key] = [_walk(v, defs, stack, drop_titles) for v in value]
        elif key in _SCHEMA_ONE:
            out[key] = _walk(value, defs, stack, drop_titles)
        else:
            out[key] = value
    return out


def normalize_parameters(schema: Mapping[str, Any] | None, *, drop_titles: bool = True) -> dict[str, Any]:
    """An object schema a provider accepts: `$ref`s into `$defs` inlined (recursive ones kept, with
    their definitions), titles dropped, and `type: object` / `properties` always present."""
    if not schema:
        return {"type": "object", "properties": {}}
    defs: dict[str, Any] = {**schema.get("definitions", {}), **schema.get("$defs", {})}
    out = _walk(dict(schema), defs, (), drop_titles)
    if "$ref" in json.dumps(out) and defs:
        out["$defs"] = {k: _walk(v, defs, (k,), drop_titles) for k, v in defs.items()}
    out.setdefault("type", "object")
    if out.get("type") == "object":
        out.setdefault("properties", {})
    return dict(out)


# --- tool-call arguments ------------------------------------------------------------------------


def parse_tool_arguments(arguments: str | Mapping[str, Any] | None, *, tool: str = "tool") -> dict[str, Any]:
    """Tool-call arguments as a dict, whatever shape the server sent: a JSON object as text, a dict,
    a JSON string holding JSON again, empty text or None (no arguments)."""
    if arguments is None:
        return {}
    if isinstance(arguments, Mapping):
        return dict(arguments)
    text = arguments.strip()
    if not text:
        return {}
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ToolArgumentsError(f"arguments for {tool!r} are not valid JSON: {exc.msg} at {exc.pos}") from None
    except RecursionError:  # model output nested deeper than the parser's stack: refused, not raised on
        raise ToolArgumentsError(f"arguments for {tool!r} are nested too deeply to read") from None
    except ValueError as exc:  # an integer past the interpreter's digit limit
        raise ToolArgumentsError(f"arguments for {tool!r} cannot be read: {str(exc)[:200]}") from None
    if isinstance(value, str):  # double-encoded by some servers
        return parse_tool_arguments(value, tool=tool)
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ToolArgumentsError(f"arguments for {tool!r} must be a JSON object, got {type(value).__name__}")
    return value


def arguments_to_json(arguments: str | Mapping[str, Any] | None) -> str:
    """Tool-call arguments as the JSON text `FunctionCall.arguments` holds."""
    if arguments is None:
        return "{}"
    if isinstance(arguments, str):
        return arguments if arguments.strip() else "{}"
    return json.dumps(dict(arguments), ensure_ascii=False)


# --- finish reasons -----------------------------------------------------------------------------

_FINISH: dict[str, FinishReason] = {
    "stop": "stop",
    "end_turn": "stop",
    "stop_sequence": "stop",
    "eos": "stop",
    "pause_turn": "stop",
    "completed": "stop",
    "length": "length",
    "max_tokens": "length",
    "model_length": "length",
    "model_context_window_exceeded": "length",
    "tool_calls": "function_calls",
    "tool_use": "function_calls",
    "function_call": "function_calls",
    "function_calls": "function_calls",
    "content_filter": "content_filter",
    "refusal": "content_filter",
    "safety": "content_filter",
    "unknown": "unknown",
}


def normalize_finish_reason(raw: str | None, *, has_tool_calls: bool = False) -> FinishReason:
    """A provider's stop reason as one of `stop | length | function_calls | content_filter | unknown`.

    A response that carries tool calls is `function_calls` even when the server said `stop`
    (Ollama and some OpenAI-compatible servers do).
    """
    reason = _FINISH.get((raw or "").lower(), "unknown")
    if has_tool_calls and reason in ("stop", "unknown"):
        return "function_calls"
    if raw is None and not has_tool_calls:
        return "stop"
    return reason


# --- JSON and structured output -----------------------------------------------------------------

_FENCE = re.compile(r"^```(?:json)?\s*\n?(.*?)\n?```$", re.DOTALL)


def parse_json_output(text: str, json_output: bool | type[BaseModel], *, finish_reason: str | None = None) -> Any:
    """The JSON value (or pydantic model instance) in a model's output.

    Tolerates a ```json fence around the output. Raises `OutputParseError` (holding the raw text)
    when the output is not valid JSON or does not match the model; a truncated output says so.
    """
    body = text.strip()
    fenced = _FENCE.match(body)
    if fenced:
        body = fenced.group(1).strip()
    hint = " (the output was cut off by the token limit)" if finish_reason == "length" else ""
    if isinstance(json_output, type) and issubclass(json_output, BaseModel):
        try:
            return json_output.model_validate_json(body)
        except ValidationError as exc:
            detail = "; ".join(
                f"{'.'.join(str(p) for p in e['loc']) or '<root>'}: {e['msg']}"
                for e in exc.errors(include_input=False, include_url=False)
            )
            raise OutputParseError(f"output does not match {json_output.__name__}{hint}: {detail}", text=text) from None
    try:
        return json.loads(body)
    except json.JSONDecodeError as exc:
        raise OutputParseError(f"output is not valid JSON{hint}: {exc.msg} at {exc.pos}", text=text) from None


# --- token estimate -----------------------------------------------------------------------------

LETTERS_PER_TOKEN = 3
MESSAGE_OVERHEAD_TOKENS = 4
IMAGE_TOKENS = 85

_ASCII_LETTERS = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
_ASCII_SPACE = b" \t\n\r\f\v"
# A run of two or more spaces, or of other whitespace: one token each in the BPE vocabularies measured.
_WHITESPACE_RUNS = re.compile(r"[ ]{2,}|[\t\n\r\f\v]+")
# Candidates for opaque strings: 8+ characters of the base64 / key / id alphabet.
_CANDIDATES = re.compile(r"[A-Za-z0-9+/=_-]{8,}")
# Pieces of a candidate: an upper-case run, a (capitalised) lower-case word, or any other single character.
_PIECES = re.compile(r"[A-Z]{2,}(?![a-z])|[A-Z]?[a-z]+|[^a-z]")
_OPAQUE_PIECE_LENGTH = 3.0


def text_token_bound(text: str) -> int:
    """An upper bound of the tokens ``text`` takes in a byte-level BPE vocabulary: one token per 3 ASCII
    letters, per digit, per ASCII punctuation mark and per whitespace run (a single space joins the next token),
    the UTF-8 length minus one per other character (2 per Chinese character, 3 per emoji), and one per character
    of an opaque string (8 or more letters, digits and ``+/=_-`` whose case and digit runs average under 3
    characters: base64, keys, hashes), which BPE splits into short pieces.

    Measured against OpenAI's o200k and cl100k: code needs at most about 0.3 tokens per letter once the rest is
    counted, English prose 0.25, Chinese about 1.2 tokens a character (cl100k), so the bound holds with room. It
    over-counts English by about 1.5x, code by about 1.7x, Chinese by about 1.7x (cl100k) to 3x (o200k). Numbers count a
    token a digit, as tokenizers that split digits (SmolLM2, Llama 2) do. Random strings shorter than 8 characters,
    or of lower-case letters alone, can take more than their share; the room on the text around them covers a few."""
    if not text:
        return 0
    opaque = 0
    kept: list[str] = []
    last = 0
    for match in _CANDIDATES.finditer(text):
        candidate = match.group()
        # Words and identifiers (ChatCompletionClient, estimate_tokens) have long pieces; random strings short.
        if len(candidate) < _OPAQUE_PIECE_LENGTH * len(_PIECES.findall(candidate)):
            opaque += len(candidate)
            kept.append(text[last : match.start()])
            last = match.end()
    if kept:
        kept.append(text[last:])
        text = " ".join(kept)
    ascii_bytes = text.encode("ascii", "ignore")
    non_ascii_extra = len(text.encode("utf-8")) - len(text)  # (UTF-8 length - 1) summed over non-ASCII characters
    without_letters = ascii_bytes.translate(None, _ASCII_LETTERS)
    letters = len(ascii_bytes) - len(without_letters)
    # Digits and punctuation count one each; whitespace is counted by runs below.
    marks = len(without_letters.translate(None, _ASCII_SPACE))
    runs = len(_WHITESPACE_RUNS.findall(text))
    return -(-letters // LETTERS_PER_TOKEN) + marks + runs + non_ascii_extra + opaque


def estimate_tokens(messages: Iterable[LLMMessage], tools: Iterable[Mapping[str, Any]] = ()) -> int:
    """A provider-free upper bound of the prompt tokens: `text_token_bound` of every text, name, argument and
    tool schema (as JSON), plus 4 per message and 85 per image.

    Used when a provider's tokenizer or counting endpoint is unavailable (Ollama, Azure AI Inference, and as the
    fallback of the others), so `remaining_tokens` never overstates the room left. It errs high: about 1.5x on
    English, 1.7x on code."""
    count = 0
    texts: list[str] = []
    for message in messages:
        count += MESSAGE_OVERHEAD_TOKENS
        if isinstance(message, SystemMessage):
            texts.append(message.content)
        elif isinstance(message, UserMessage):
            if isinstance(message.content, str):
                texts.append(message.content)
            else:
                for part in message.content:
                    if isinstance(part, str):
                        texts.append(part)
                    else:
                        count += IMAGE_TOKENS
        elif isinstance(message, AssistantMessage):
            if isinstance(message.content, str):
                texts.append(message.content)
            else:
                texts.extend(f"{c.name} {c.arguments}" for c in message.content)
            texts.append(message.thought or "")
        elif isinstance(message, FunctionExecutionResultMessage):
            texts.extend(f"{r.call_id} {r.content}" for r in message.content)
    texts.extend(json.dumps(tool, default=str, ensure_ascii=False) for tool in tools)
    # One text: the letter rounding happens once, and the texts' boundaries cost a whitespace run each.
    return count + text_token_bound("\n".join(texts))
