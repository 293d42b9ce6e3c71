"""Argument validation against the tool's JSON Schema.

`fastjsonschema` compiles the schema once into a Python function: one small pure-Python dependency,
and about twenty times faster per call than the `jsonschema` reference implementation, which matters
when validation runs before every request.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any, NoReturn

from ext.core import ConfigurationError, ToolArgumentsError

_MESSAGE_CHARS = 160

Check = Callable[[Mapping[str, Any], str], None]
"""`check(args, tool_name)`: returns None, or raises ToolArgumentsError naming each bad argument."""


def _refuse_remote(uri: str) -> NoReturn:
    raise ConfigurationError(f"json_schema: $ref {uri!r} points outside the schema; only local refs ('#/...') work")


class _NoRemoteRefs(Mapping[str, Callable[[str], Any]]):
    """fastjsonschema fetches any `$ref` URI whose scheme has no handler; this answers every scheme with a refusal,
    so building a tool never reaches the network."""

    def __getitem__(self, scheme: str) -> Callable[[str], Any]:
        return _refuse_remote

    def __contains__(self, scheme: object) -> bool:
        return True

    def __iter__(self) -> Iterator[str]:
        return iter(())

    def __len__(self) -> int:
        return 0


def compile_schema(schema: Mapping[str, Any]) -> Check:
    """The argument check for `schema`; ConfigurationError if it is not a usable object schema."""
    # Imported here so that importing ext.tools.http stays cheap.
    import fastjsonschema

    if not isinstance(schema, Mapping):
        raise ConfigurationError(f"json_schema must be a JSON Schema object (a dict), got {type(schema).__name__}")
    if schema.get("type") != "object":
        raise ConfigurationError(
            f'json_schema must describe an object ("type": "object"), got type {schema.get("type")!r}'
        )
    properties = schema.get("properties", {})
    if not isinstance(properties, Mapping):
        raise ConfigurationError("json_schema.properties must be an object mapping argument names to schemas")
    try:
        validate = fastjsonschema.compile(
            dict(schema),
            handlers=_NoRemoteRefs(),
            # The request carries what the model sent: defaults are not filled in, and `format` is an
            # annotation (as the JSON Schema specification and the `jsonschema` package treat it).
            use_default=False,
            use_formats=False,
            fast_fail=False,
        )
    except ConfigurationError:
        raise
    except fastjsonschema.JsonSchemaDefinitionException as exc:
        raise ConfigurationError(f"json_schema is not a valid JSON Schema: {_short(str(exc))}") from None
    except Exception as exc:  # e.g. re.error from a bad "pattern"
        raise ConfigurationError(f"json_schema is not a valid JSON Schema: {type(exc).__name__}: {exc}") from None
    many_errors = fastjsonschema.JsonSchemaValuesException
    one_error = fastjsonschema.JsonSchemaValueException

    def check(args: Mapping[str, Any], tool: str) -> None:
        try:
            validate(args)
        except many_errors as exc:
            problems = [_describe(e, args) for e in exc.errors]
        except one_error as exc:
            problems = [_describe(exc, args)]
        else:
            return
        raise ToolArgumentsError(f"invalid arguments for tool {tool!r}: " + "; ".join(dict.fromkeys(problems)))

    return check


def _describe(error: Any, args: Mapping[str, Any]) -> str:
    name: str = error.name or "data"
    rest = error.message[len(name) :].strip() if error.message.startswith(name) else error.message
    where = name.removeprefix("data.")
    value = args if name == "data" else error.value
    if error.rule == "required" and isinstance(error.rule_definition, list) and isinstance(value, Mapping):
        missing = ", ".join(repr(n) for n in error.rule_definition if n not in value)
        if missing:
            return f"missing required argument {missing}" if name == "data" else f"argument {where!r} lacks {missing}"
    definition = error.definition if isinstance(error.definition, Mapping) else {}
    if error.rule == "additionalProperties" and "patternProperties" not in definition and isinstance(value, Mapping):
        known = definition.get("properties") or {}
        extra = ", ".join(repr(n) for n in value if n not in known)
        if extra:
            return f"unexpected argument {extra}" if name == "data" else f"argument {where!r} has unexpected {extra}"
    if name == "data":
        return f"arguments {_short(rest)}"
    return f"argument {where!r} {_short(rest)}"


def _short(text: str) -> str:
    # Messages may quote `const`/`enum` values from the schema: keep them readable for a model.
    return text if len(text) <= _MESSAGE_CHARS else text[: _MESSAGE_CHARS - 1] + "…"
