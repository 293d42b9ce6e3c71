"""Tolerant reading of tool calls that a model wrote as text, for servers that do not parse them.

Small models asked for tools in the prompt write calls in several shapes; these pure functions find them:

- JSON in the text, bare or fenced in a Markdown code block (```json ... ```), anywhere in the answer;
- Hermes/Qwen tags, ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>`` (a missing closing tag at the end
  of the answer is accepted: generation often stops on it);
- a call written like Python, ``get_weather(city="Paris", unit="c")`` or a list of them (read with `ast`, never
  evaluated: only literals are taken as arguments);
- inside any JSON: ``{"name": ..., "arguments" | "parameters": {...}}``, OpenAI's
  ``{"function": {"name": ..., "arguments": "..."}}``, ``{"tool_calls": [...]}``, or a list of these.

Only names among the offered tools become calls; an answer that names none stays text.
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Collection, Iterator, Mapping, Sequence
from typing import Any

__all__ = ["TextToolCall", "find_tool_calls"]

TextToolCall = tuple[str, dict[str, Any]]
"""A call found in text: the tool's name and its arguments."""

_TAG = re.compile(r"<tool_call>\s*(.*?)\s*(?:</tool_call>|$)", re.DOTALL)
_FENCE = re.compile(r"```[A-Za-z0-9_-]*\s*\n?(.*?)```", re.DOTALL)
_DECODER = json.JSONDecoder()
# A name followed by "(": where a Python-like call may start (possibly after "[" for a list of calls).
_CALL_START = re.compile(r"(?:\[\s*)?([A-Za-z_][A-Za-z0-9_.]*)\s*\(")


def _arguments(value: Any) -> dict[str, Any] | None:
    """Arguments as a dict: an object, JSON text of an object, or nothing (no arguments)."""
    if value is None:
        return {}
    if isinstance(value, str):
        if not value.strip():
            return {}
        try:
            value = json.loads(value)
        except ValueError:
            return None
    return dict(value) if isinstance(value, Mapping) else None


def _calls_in(value: Any, names: Collection[str]) -> Iterator[TextToolCall]:
    """The calls a decoded JSON value holds, in order (entries that are not calls of `names` are skipped)."""
    if isinstance(value, list):
        for item in value:
            yield from _calls_in(item, names)
        return
    if not isinstance(value, Mapping):
        return
    if "tool_calls" in value:
        yield from _calls_in(value["tool_calls"], names)
        return
    function = value.get("function")
    if isinstance(function, Mapping) and "name" in function:
        value = function
    name = value.get("name")
    if not isinstance(name, str) or name not in names:
        return
    if "description" in value and "arguments" not in value:
        return  # the tool's definition echoed back from the prompt, not a call
    raw = value["arguments"] if "arguments" in value else value.get("parameters")
    arguments = _arguments(raw)
    if arguments is not None:
        yield name, arguments


def _json_values(text: str) -> Iterator[Any]:
    """Every JSON object or array that starts in `text`, left to right (each one decoded whole, then skipped)."""
    index = 0
    length = len(text)
    while index < length:
        starts = [i for i in (text.find("{", index), text.find("[", index)) if i >= 0]
        if not starts:
            return
        start = min(starts)
        try:
            value, end = _DECODER.raw_decode(text, start)
        except ValueError:
            index = start + 1
            continue
        yield value
        index = end


def _literal(node: ast.expr) -> Any:
    """A literal argument's value; raises ValueError for anything else (names, calls, operators)."""
    if isinstance(node, ast.Name) and node.id in ("true", "false", "null"):  # JSON spellings
        return {"true": True, "false": False, "null": None}[node.id]
    return ast.literal_eval(node)


def _python_call(node: ast.expr, tools: Mapping[str, Sequence[str]]) -> TextToolCall | None:
    if not isinstance(node, ast.Call):
        return None
    name = ast.unparse(node.func)
    if name not in tools:
        name = name.rpartition(".")[2]  # `functions.get_weather(...)`, as some models write it
        if name not in tools:
            return None
    arguments: dict[str, Any] = {}
    try:
        if node.args:
            # Positional arguments follow the order of the schema's properties.
            order = tools[name]
            if len(node.args) > len(order):
                return None
            for key, arg in zip(order, node.args, strict=False):
                arguments[key] = _literal(arg)
        for keyword in node.keywords:
            if keyword.arg is None:
                return None
            arguments[keyword.arg] = _literal(keyword.value)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return None
    return name, arguments


def _python_calls(text: str, tools: Mapping[str, Sequence[str]]) -> list[TextToolCall]:
    """Calls written like Python: the first parseable expression that starts with a call of an offered tool."""
    for match in _CALL_START.finditer(text):
        if match.group(1).rpartition(".")[2] not in tools:
            continue
        start = match.start()
        # The expression ends at the last ")" or "]" after its start that leaves a parseable text.
        for end in sorted({m.end() for m in re.finditer(r"[)\]]", text[start:])}, reverse=True):
            source = text[start : start + end]
            try:
                tree = ast.parse(source.strip(), mode="eval")
            except (SyntaxError, ValueError, MemoryError, RecursionError):
                continue
            body = tree.body
            nodes = list(body.elts) if isinstance(body, (ast.List, ast.Tuple)) else [body]
            calls = [_python_call(node, tools) for node in nodes]
            if calls and all(call is not None for call in calls):
                return [call for call in calls if call is not None]
    return []


def find_tool_calls(text: str, tools: Mapping[str, Mapping[str, Any]]) -> list[TextToolCall]:
    """The tool calls written in `text`, in order, or an empty list when it holds none.

    `tools` maps each offered tool's name to its parameters' JSON schema (the schema's property order gives the
    positional arguments of a Python-like call). The first shape that yields a call of an offered tool wins:
    ``<tool_call>`` tags, then fenced blocks, then JSON anywhere in the text, then Python-like calls."""
    if not text or not tools:
        return []
    names = tools.keys()
    positions = {
        name: list((schema.get("properties") or {}).keys()) if isinstance(schema, Mapping) else []
        for name, schema in tools.items()
    }
    tagged = _TAG.findall(text) if "<tool_call>" in text else []
    if tagged:
        calls: list[TextToolCall] = []
        for inner in tagged:
            found = [c for value in _json_values(inner) for c in _calls_in(value, names)]
            calls.extend(found or _python_calls(inner, positions))
        if calls:
            return calls
    if "```" in text:
        for block in _FENCE.findall(text):
            calls = [c for value in _json_values(block) for c in _calls_in(value, names)]
            if calls:
                return calls
    calls = []
    for value in _json_values(text):
        found = list(_calls_in(value, names))
        if found:
            calls.extend(found)
        elif calls:
            break  # the calls are one run of JSON values: stop at the first that is not a call
    if calls:
        return calls
    return _python_calls(text, positions)
