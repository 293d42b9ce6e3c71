"""`--schema`: a pydantic model for structured output, from `module:Model`, a JSON Schema file or a short form.

The short form lists fields separated by commas, each `name` (a string) or `name TYPE` with TYPE one of
`str`, `int`, `float`, `bool`: `--schema 'name, age int, height float'`.
"""

from __future__ import annotations

import sys
from importlib import import_module
from pathlib import Path
from typing import Any

from pydantic import BaseModel, create_model

from ._errors import CliError
from ._files import read_json_file

_SHORT_TYPES: dict[str, type[Any]] = {"str": str, "int": int, "float": float, "bool": bool}
_JSON_TYPES: dict[str, type[Any]] = {"string": str, "integer": int, "number": float, "boolean": bool}


def schema_model(spec: str) -> type[BaseModel]:
    """The pydantic model `spec` describes (see the module docstring)."""
    spec = spec.strip()
    if not spec:
        raise CliError("--schema is empty", hint="for example --schema 'name, age int'")
    path = Path(spec)
    if spec.endswith(".json") or path.is_file():
        return _from_file(path)
    if ":" in spec and " " not in spec and "," not in spec:
        return _from_import(spec)
    return _from_short(spec)


def _from_import(spec: str) -> type[BaseModel]:
    module_name, _, attr = spec.partition(":")
    if "" not in sys.path:
        sys.path.insert(0, "")
    try:
        found = getattr(import_module(module_name), attr)
    except (ImportError, AttributeError) as exc:
        raise CliError(f"--schema {spec}: {exc}") from None
    if not (isinstance(found, type) and issubclass(found, BaseModel)):
        raise CliError(f"--schema {spec}: {attr!r} is not a pydantic model class")
    return found


def _from_short(spec: str) -> type[BaseModel]:
    fields: dict[str, Any] = {}
    for part in spec.split(","):
        words = part.split()
        if not words:
            raise CliError(f"--schema {spec!r}: an empty field between commas")
        if len(words) > 2 or (len(words) == 2 and words[1] not in _SHORT_TYPES):
            raise CliError(
                f"--schema {spec!r}: cannot read field {part.strip()!r}",
                hint=f"write 'name' or 'name TYPE' with TYPE one of {', '.join(_SHORT_TYPES)}",
            )
        name = words[0]
        if not name.isidentifier():
            raise CliError(f"--schema {spec!r}: {name!r} is not a valid field name")
        fields[name] = (_SHORT_TYPES[words[1]] if len(words) == 2 else str, ...)
    return create_model("Output", **fields)


def _from_file(path: Path) -> type[BaseModel]:
    schema = read_json_file(path, f"--schema {path}")
    return _object_model(schema, str(schema.get("title") or "Output") if isinstance(schema, dict) else "Output", path)


def _object_model(schema: Any, name: str, path: Path) -> type[BaseModel]:
    if not isinstance(schema, dict) or schema.get("type") != "object" or not isinstance(schema.get("properties"), dict):
        raise CliError(f"--schema {path}: {name} must be a JSON Schema object with 'properties'")
    required = set(schema.get("required", []))
    fields: dict[str, Any] = {}
    for prop, sub in schema["properties"].items():
        annotation = _annotation(sub, f"{name}_{prop}", path)
        fields[prop] = (annotation, ...) if prop in required else (annotation | None, None)
    return create_model(name.replace(" ", "_") or "Output", **fields)


def _annotation(schema: Any, name: str, path: Path) -> Any:
    if not isinstance(schema, dict):
        raise CliError(f"--schema {path}: the schema of {name} is not an object")
    kind = schema.get("type")
    if kind in _JSON_TYPES:
        return _JSON_TYPES[kind]
    if kind == "array":
        return list[_annotation(schema.get("items", {"type": "string"}), name, path)]  # type: ignore[misc]
    if kind == "object":
        return _object_model(schema, name, path)
    raise CliError(
        f"--schema {path}: {name} has type {kind!r}",
        hint="supported: string, integer, number, boolean, array, object (or pass a pydantic model as module:Model)",
    )
