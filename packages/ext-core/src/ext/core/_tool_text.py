"""Tolerant reading of tool calls that a model wrote as text, for servers that do not parse them.

Small models asked for tools in the prompt write calls in several shapes. The rule: **the whole answer, with
surrounding whitespace trimmed, is the call**; a call mentioned inside prose, an example, or a code block between
explanations is text. The answer is calls when it is exactly one of:

1. one JSON object or array in a call shape: ``{"tool_calls": [call, ...]}``, a call, or a list of calls, where a
   call is ``{"name": ..., "arguments" | "parameters": {...}}`` or OpenAI's ``{"function": {"name": ...,
   "arguments": "<JSON text>"}}`` (missing arguments are ``{}``);
2. one or more ``<tool_call>...</tool_call>`` blocks (Hermes/Qwen) with only whitespace between them, each holding
   a JSON call (or list of calls) or a Python-like call; the last closing tag may be missing (generation often stops
   on it);
3. a Python-like call, ``get_weather(city="Paris", unit="c")``, or a list of them, ``[f(a=1), g("x")]``: read by
   `_call_syntax` (literal arguments only, never evaluated; positional arguments follow the schema's property
   order);
4. a single fenced block that is the whole answer (```` ```json ```` ... ```` ``` ````, any language word or
   none, no other fence in the answer) whose body is one of 1-3.

Every call must name an offered tool, exactly (``functions.<name>``, OpenAI's namespace, is also read; any other
dotted name is not the tool); one entry that is not such a call makes the whole answer text. A tool's definition
echoed back from the prompt is not a call: an object with a ``"description"``, or arguments shaped like a JSON
schema (``"type": "object"`` or a ``"properties"`` object, unless the tool has parameters of those names).

Model output is untrusted: reading is linear in the answer's length, nesting is limited to `MAX_DEPTH` levels, JSON
to `MAX_CONTAINERS` arrays and objects, Python-like calls to `MAX_CALL_TOKENS` tokens, an answer to `MAX_CALLS`
calls, numbers must be finite (``1e999``, ``NaN``, ``Infinity`` make an answer text), and no input raises: what is
not a call is text.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from itertools import chain, compress
from typing import Any

from pydantic_core import from_json

from ._call_syntax import MAX_CALL_TOKENS, MAX_CALLS, MAX_DEPTH, TokenBudget, python_calls

__all__ = [
    "INVALID",
    "MAX_CALLS",
    "MAX_CALL_TOKENS",
    "MAX_CONTAINERS",
    "MAX_DEPTH",
    "TextToolCall",
    "find_tool_calls",
    "json_tool_calls",
    "load_json",
]

TextToolCall = tuple[str, dict[str, Any]]
"""A call found in text: the tool's name and its arguments."""

_OPEN_TAG = "<tool_call>"
_CLOSE_TAG = "</tool_call>"
_FENCE = "```"
_SPACE = re.compile(r"\s*")
_LANGUAGE = re.compile(r"[A-Za-z0-9_+.#-]*")

MAX_CONTAINERS = 10_000
"""The most arrays and objects a JSON answer may hold; one with more is text. Each is a tracked Python object:
tens of thousands made at once set off a full garbage collection of the process (about 60 ms in a client's
process, all on the event loop), and no real tool call holds that many."""


class _Invalid:
    """The type of `INVALID`, what `load_json` returns for text that is not bounded, strict JSON (None is JSON)."""

    def __repr__(self) -> str:
        return "INVALID"


INVALID = _Invalid()


def load_json(text: str) -> Any:
    """`text` decoded as strict JSON, or `INVALID`: not JSON, holding more than `MAX_CONTAINERS` arrays and objects,
    nested deeper than `MAX_DEPTH`, or holding a number no JSON number may hold (``NaN``, ``Infinity``, ``1e999``).
    Linear (the decoder is pydantic-core's, in native code, with a nesting limit of its own) and never raises."""
    if _containers(text) > MAX_CONTAINERS:
        return INVALID
    try:
        value = from_json(text, allow_inf_nan=False)
    except (ValueError, TypeError):  # TypeError: a str holding a lone surrogate cannot be encoded as UTF-8
        return INVALID
    return value if _bounded(value) else INVALID


def _containers(text: str) -> int:
    """How many arrays and objects `text` opens outside its strings (an upper bound where it is not JSON)."""
    if text.count("[") + text.count("{") <= MAX_CONTAINERS:
        return 0  # the common case, without copying the text
    # Escapes out first, then every other piece between quotes is outside the strings (all in native code).
    outside = "".join(text.replace("\\\\", "").replace('\\"', "").split('"')[::2])
    return outside.count("[") + outside.count("{")


_CONTAINER_TYPES = frozenset((dict, list))
_FLOAT_TYPES = frozenset((float,))


def _bounded(value: Any) -> bool:
    """True when `value` nests at most `MAX_DEPTH` containers and all its floats are finite.

    Walked a level at a time with native iteration (`map`, `compress`, `chain`), so the cost per value is a few
    tens of nanoseconds, not a Python step: an answer of many tiny arrays is as cheap as one of numbers."""
    level: list[Any] = [value]
    for depth in range(MAX_DEPTH + 1):
        kinds = list(map(type, level))
        present = set(kinds)
        if float in present:
            floats = compress(level, map(_FLOAT_TYPES.__contains__, kinds))
            if not all(map(math.isfinite, floats)):
                return False
        if dict not in present and list not in present:
            return True
        containers = list(compress(level, map(_CONTAINER_TYPES.__contains__, kinds)))
        if depth == MAX_DEPTH:
            return False  # containers below MAX_DEPTH others
        lists = compress(containers, map(list.__instancecheck__, containers))
        dicts = compress(containers, map(dict.__instancecheck__, containers))
        level = list(chain(chain.from_iterable(lists), chain.from_iterable(map(dict.values, dicts))))
    return True  # not reached: the last level returns


def _arguments(value: Any) -> dict[str, Any] | None:
    """Arguments as a dict: an object, JSON text of an object, or nothing (no arguments)."""
    if value is None:
        return {}
    if isinstance(value, str):
        if not value.strip():
            return {}
        value = load_json(value)
    return value if isinstance(value, dict) else None


def _echoes_schema(arguments: Mapping[str, Any], parameters: Sequence[str]) -> bool:
    """True when `arguments` look like the tool's JSON schema rather than values for it."""
    if "type" not in parameters and arguments.get("type") == "object":
        return True
    return "properties" not in parameters and isinstance(arguments.get("properties"), dict)


def _json_call(value: Any, tools: Mapping[str, Sequence[str]]) -> TextToolCall | None:
    if not isinstance(value, dict):
        return None
    function = value.get("function")
    if isinstance(function, dict) and "name" in function:
        value = function
    name = value.get("name")
    if not isinstance(name, str) or name not in tools or "description" in value:
        return None  # not an offered tool, or its definition echoed back from the prompt
    arguments = _arguments(value["arguments"] if "arguments" in value else value.get("parameters"))
    if arguments is None or _echoes_schema(arguments, tools[name]):
        return None
    return name, arguments


def _json_calls(value: Any, tools: Mapping[str, Sequence[str]]) -> list[TextToolCall] | None:
    """The calls a decoded JSON value is (``{"tool_calls": [...]}``, a call, or a list of calls), or None when it
    is not exactly calls of `tools` (a name to its parameters' names, in order)."""
    if isinstance(value, dict) and "tool_calls" in value:
        value = value["tool_calls"]
    entries = value if isinstance(value, list) else [value]
    if len(entries) > MAX_CALLS:
        return None
    calls = [_json_call(entry, tools) for entry in entries]
    if not calls or any(call is None for call in calls):
        return None
    return [call for call in calls if call is not None]


def _body_calls(text: str, tools: Mapping[str, Sequence[str]], budget: TokenBudget) -> list[TextToolCall] | None:
    """The calls `text` (trimmed) is as JSON or a Python-like call."""
    if text[:1] in ("{", "["):
        value = load_json(text)
        if value is not INVALID:
            return _json_calls(value, tools)
        if text[0] == "{":
            return None
    return python_calls(text, tools, budget)


def _tagged_calls(text: str, tools: Mapping[str, Sequence[str]], budget: TokenBudget) -> list[TextToolCall] | None:
    """The calls `text` is as ``<tool_call>`` blocks with only whitespace between them."""
    calls: list[TextToolCall] = []
    position = 0
    while position < len(text):
        if not text.startswith(_OPEN_TAG, position):
            return None
        start = position + len(_OPEN_TAG)
        end = text.find(_CLOSE_TAG, start)
        found = _body_calls(text[start : len(text) if end < 0 else end].strip(), tools, budget)
        if not found or len(calls) + len(found) > MAX_CALLS:
            return None
        calls.extend(found)
        if end < 0:
            break
        space = _SPACE.match(text, end + len(_CLOSE_TAG))
        position = space.end() if space else end + len(_CLOSE_TAG)
    return calls or None


def _fenced_body(text: str) -> str | None:
    """The body of `text` when it is exactly one fenced code block."""
    inner = text[len(_FENCE) : -len(_FENCE)]
    if len(text) < 2 * len(_FENCE) or _FENCE in inner:
        return None
    first, newline, rest = inner.partition("\n")
    return (rest if newline and _LANGUAGE.fullmatch(first.strip()) else inner).strip()


def _answer_calls(
    text: str, tools: Mapping[str, Sequence[str]], budget: TokenBudget, *, fenced: bool
) -> list[TextToolCall] | None:
    if text.startswith(_OPEN_TAG):
        return _tagged_calls(text, tools, budget)
    if fenced and text.startswith(_FENCE) and text.endswith(_FENCE):
        body = _fenced_body(text)
        return None if not body else _answer_calls(body, tools, budget, fenced=False)
    return _body_calls(text, tools, budget)


def find_tool_calls(text: str, tools: Mapping[str, Mapping[str, Any]]) -> list[TextToolCall]:
    """The tool calls `text` is, in order, or an empty list when it is not exactly calls (the module's rule).

    `tools` maps each tool that may be called to its parameters' JSON schema (the schema's property order gives
    the positional arguments of a Python-like call)."""
    if not isinstance(text, str) or not tools:
        return []
    stripped = text.strip()
    if not stripped:
        return []
    return _answer_calls(stripped, _parameter_names(tools), TokenBudget(), fenced=True) or []


def json_tool_calls(value: Any, tools: Mapping[str, Mapping[str, Any]]) -> list[TextToolCall]:
    """The tool calls a decoded JSON value (from `load_json`) is, or an empty list: `find_tool_calls`'s first
    shape, for a reply already decoded (one held to the call schema)."""
    if not tools:
        return []
    return _json_calls(value, _parameter_names(tools)) or []


def _parameter_names(tools: Mapping[str, Mapping[str, Any]]) -> dict[str, list[str]]:
    """Each tool's parameter names in the schema's order."""
    names: dict[str, list[str]] = {}
    for name, schema in tools.items():
        properties = schema.get("properties") if isinstance(schema, Mapping) else None
        names[name] = [str(key) for key in properties] if isinstance(properties, Mapping) else []
    return names
