"""Whether a tool call is well formed: its arguments are a JSON object, its name is among the case's tools, and its
arguments satisfy the tool's JSON Schema.

The schema check covers what tool schemas use: `type` (one or a list), `properties` (recursively), `required`,
`items`, `enum`, and `additionalProperties: false`. Other keywords are not checked (the README says so).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ext.core import FunctionCall, ToolSchema, json_loads

_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "boolean": (bool,),
    "array": (list,),
    "object": (dict,),
    "number": (int, float),
    "integer": (int, float),
}


def parse_arguments(call: FunctionCall) -> dict[str, Any] | str:
    """The call's arguments as a dict, or why they are not a JSON object."""
    # pydantic-core's parser, not json.loads: model output nested thousands deep makes json.loads raise
    # RecursionError, and an integer past Python's digit limit a bare ValueError; this one refuses both as invalid.
    try:
        value = json_loads(call.arguments) if call.arguments.strip() else {}
    except ValueError as exc:
        return f"arguments are not valid JSON ({exc})"
    if not isinstance(value, dict):
        return f"arguments are a JSON {type(value).__name__}, not an object"
    return value


def malformed_reason(call: FunctionCall, tools: Mapping[str, ToolSchema]) -> str | None:
    """Why `call` is malformed, or None when it is well formed."""
    tool = tools.get(call.name)
    if tool is None:
        return f"{call.name!r} is not among the tools ({', '.join(sorted(tools)) or 'none'})"
    arguments = parse_arguments(call)
    if isinstance(arguments, str):
        return f"{call.name}: {arguments}"
    problem = schema_problem(arguments, tool.get("parameters") or {"type": "object"}, "")
    return f"{call.name}: {problem}" if problem else None


def schema_problem(value: Any, schema: Mapping[str, Any], path: str) -> str | None:
    """The first way `value` fails `schema`, as `path: what`; None when it satisfies it."""
    where = path or "arguments"
    kinds = schema.get("type")
    if kinds is not None:
        names = [kinds] if isinstance(kinds, str) else list(kinds)
        if not any(_is_type(value, name) for name in names):
            return f"{where}: expected {' or '.join(names)}, got {_json_type(value)}"
    enum = schema.get("enum")
    if isinstance(enum, list) and not any(_same(value, option) for option in enum):
        return f"{where}: {value!r} is not one of {enum}"
    if isinstance(value, dict):
        return _object_problem(value, schema, path)
    items = schema.get("items")
    if isinstance(value, list) and isinstance(items, Mapping):
        for index, item in enumerate(value):
            problem = schema_problem(item, items, f"{path}[{index}]" if path else f"[{index}]")
            if problem:
                return problem
    return None


def _object_problem(value: dict[str, Any], schema: Mapping[str, Any], path: str) -> str | None:
    prefix = f"{path}." if path else ""
    for name in schema.get("required") or ():
        if name not in value:
            return f"{prefix}{name}: required, missing"
    properties: Mapping[str, Any] = schema.get("properties") or {}
    for name, item in value.items():
        sub = properties.get(name)
        if sub is None:
            if schema.get("additionalProperties") is False:
                return f"{prefix}{name}: not a parameter of the tool ({', '.join(properties) or 'none'})"
            continue
        problem = schema_problem(item, sub, f"{prefix}{name}")
        if problem:
            return problem
    return None


def _is_type(value: Any, name: str) -> bool:
    if name == "null":
        return value is None
    if isinstance(value, bool):  # JSON true/false are never numbers
        return name == "boolean"
    if name == "integer":
        # JSON Schema counts 1.0 as an integer (a number with a zero fractional part).
        return isinstance(value, int) or (isinstance(value, float) and value.is_integer())
    expected = _TYPES.get(name)
    return expected is None or isinstance(value, expected)


def _same(a: Any, b: Any) -> bool:
    return type(a) is type(b) and a == b if isinstance(a, bool) or isinstance(b, bool) else bool(a == b)


def _json_type(value: Any) -> str:
    for name, kinds in (("null", (type(None),)), ("boolean", (bool,)), ("integer", (int,)), ("number", (float,))):
        if isinstance(value, kinds):
            return name
    names: dict[type, str] = {str: "string", list: "array", dict: "object"}
    return names.get(type(value), type(value).__name__)
