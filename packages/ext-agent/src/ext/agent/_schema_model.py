"""A pydantic model from the JSON Schema an agent spec gives for its typed answer (`output:`).

Spec files are data, so the answer's type is written as JSON Schema, the form every provider's structured output
takes. The subset read here is what those APIs accept for an answer: objects with properties (required or
optional, with descriptions), strings (with `enum`), integers, numbers, booleans, arrays of one item type, null,
and `anyOf` of those; nested objects become nested models. Anything else is refused naming the field, and
nesting is bounded, so a spec cannot build an unbounded type."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal, Optional, Union

from pydantic import BaseModel, ConfigDict, Field, create_model

from ext.core import ConfigurationError

MAX_DEPTH = 16
_SCALARS: dict[str, Any] = {"string": str, "integer": int, "number": float, "boolean": bool, "null": type(None)}


def model_from_schema(schema: Any, *, name: str = "Output", where: str = "output") -> type[BaseModel]:
    """A pydantic model of the object `schema` describes; errors name `where` and the field inside it."""
    annotation = _annotation(schema, name, where, 0)
    if not (isinstance(annotation, type) and issubclass(annotation, BaseModel)):
        raise ConfigurationError(f'{where}: the answer must be an object schema ({{"type": "object", ...}})')
    return annotation


def _annotation(schema: Any, name: str, where: str, depth: int) -> Any:
    if depth > MAX_DEPTH:
        raise ConfigurationError(f"{where}: nested deeper than {MAX_DEPTH} levels")
    if not isinstance(schema, Mapping):
        raise ConfigurationError(f"{where}: expected a JSON Schema mapping, got {type(schema).__name__}")
    if "anyOf" in schema:
        options = schema["anyOf"]
        if not isinstance(options, list) or not options:
            raise ConfigurationError(f"{where}.anyOf: expected a non-empty list of schemas")
        members = tuple(_annotation(o, f"{name}{i}", f"{where}.anyOf[{i}]", depth + 1) for i, o in enumerate(options))
        return Union[members] if len(members) > 1 else members[0]
    if "enum" in schema:
        values = schema["enum"]
        if not isinstance(values, list) or not values or not all(isinstance(v, (str, int, bool)) for v in values):
            raise ConfigurationError(f"{where}.enum: expected a non-empty list of strings, integers or booleans")
        return Literal[tuple(values)]
    kind = schema.get("type")
    if isinstance(kind, str) and kind in _SCALARS:
        return _SCALARS[kind]
    if kind == "array":
        items = schema.get("items", {})
        return list[_annotation(items, f"{name}Item", f"{where}.items", depth + 1)]  # type: ignore[misc]
    if kind == "object":
        return _object(schema, name, where, depth)
    raise ConfigurationError(
        f"{where}.type: expected one of object, array, string, integer, number, boolean, null, got {kind!r}"
    )


def _object(schema: Mapping[str, Any], name: str, where: str, depth: int) -> type[BaseModel]:
    properties = schema.get("properties", {})
    if not isinstance(properties, Mapping):
        raise ConfigurationError(f"{where}.properties: expected a mapping of field names to schemas")
    required = schema.get("required", [])
    if not isinstance(required, list) or not all(isinstance(r, str) for r in required):
        raise ConfigurationError(f"{where}.required: expected a list of field names")
    unknown = [r for r in required if r not in properties]
    if unknown:
        raise ConfigurationError(f"{where}.required: {unknown[0]!r} is not among the properties")
    fields: dict[str, Any] = {}
    for field, sub in properties.items():
        if not isinstance(field, str) or not field.isidentifier() or field.startswith("_"):
            raise ConfigurationError(f"{where}.properties: {field!r} is not a valid field name (letters, digits, '_')")
        inner = f"{where}.properties.{field}"
        annotation = _annotation(sub, f"{name}_{field}", inner, depth + 1)
        description = sub.get("description") if isinstance(sub, Mapping) else None
        if field in required:
            fields[field] = (annotation, Field(description=description))
        else:
            fields[field] = (Optional[annotation], Field(default=None, description=description))
    extra: Literal["forbid", "ignore"] = "forbid" if schema.get("additionalProperties") is False else "ignore"
    model: type[BaseModel] = create_model(name, __config__=ConfigDict(extra=extra), **fields)
    if isinstance(schema.get("description"), str):
        model.__doc__ = schema["description"]
    return model
