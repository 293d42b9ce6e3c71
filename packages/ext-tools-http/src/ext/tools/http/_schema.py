"""Argument validation against the tool's JSON Schema (with the `jsonschema` reference implementation)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ext.core import ConfigurationError, ToolArgumentsError

# jsonschema ships no type information (types-jsonschema is a separate stub package): its objects are
# handled as Any here, and `unused-ignore` keeps mypy quiet where the stubs happen to be installed.
Validator = Any

_MESSAGE_CHARS = 160


def compile_schema(schema: Mapping[str, Any]) -> Validator:
    """A validator for `schema` (its `$schema` draft, else 2020-12); ConfigurationError if it is not a
    valid object schema."""
    # Imported here: jsonschema takes a noticeable time to import and only tools need it.
    from jsonschema.exceptions import SchemaError  # type: ignore[import-untyped, unused-ignore]
    from jsonschema.validators import Draft202012Validator, validator_for  # type: ignore[import-untyped, unused-ignore]

    if not isinstance(schema, Mapping):
        raise ConfigurationError(f"json_schema must be a JSON Schema object (a dict), got {type(schema).__name__}")
    schema = dict(schema)
    if schema.get("type") != "object":
        raise ConfigurationError(
            f'json_schema must describe an object ("type": "object"), got type {schema.get("type")!r}'
        )
    properties = schema.get("properties", {})
    if not isinstance(properties, Mapping):
        raise ConfigurationError("json_schema.properties must be an object mapping argument names to schemas")
    cls = validator_for(schema, default=Draft202012Validator)
    try:
        cls.check_schema(schema)
    except SchemaError as exc:
        where = "/".join(str(p) for p in exc.path) or "<root>"
        raise ConfigurationError(f"json_schema is not a valid JSON Schema at {where}: {_short(exc.message)}") from None
    return cls(schema)


def check_arguments(validator: Validator, args: Mapping[str, Any], tool: str) -> None:
    """Raise ToolArgumentsError naming every argument that does not match the schema."""
    errors = list(validator.iter_errors(args))
    if not errors:
        return
    errors.sort(key=lambda e: [str(p) for p in e.absolute_path])
    raise ToolArgumentsError(f"invalid arguments for tool {tool!r}: " + "; ".join(_describe(e, args) for e in errors))


def _describe(error: Any, args: Mapping[str, Any]) -> str:
    path = list(error.absolute_path)
    if not path:
        if error.validator == "required" and isinstance(error.validator_value, list):
            missing = [name for name in error.validator_value if name not in args]
            if missing:
                return "missing required argument " + ", ".join(repr(m) for m in missing)
        return _short(error.message)
    where = str(path[0]) + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in path[1:])
    return f"argument {where!r}: {_short(error.message)}"


def _short(text: str) -> str:
    # jsonschema quotes the offending value; a huge one must not flood the model's context.
    return text if len(text) <= _MESSAGE_CHARS else text[: _MESSAGE_CHARS - 1] + "…"
