"""JSON for request and response bodies, through pydantic-core's public, maintained functions.

`pydantic_core.to_json` and `from_json` are fast (Rust) and already a dependency. Earlier releases called the
standard library's private C encoder and scanner for a few percent per call; a CPython release could have broken
that silently. These two names stay as thin wrappers so code written against them keeps working.
"""

from __future__ import annotations

from typing import Any

from pydantic_core import from_json, to_json

__all__ = ["json_dumps_compact", "json_loads"]


def json_dumps_compact(value: Any) -> bytes:
    """`value` as compact UTF-8 JSON (`pydantic_core.to_json`: no spaces, non-ASCII kept). A value JSON has no
    form for raises `pydantic_core.PydanticSerializationError` (a `ValueError`)."""
    return to_json(value)


def json_loads(data: bytes | str) -> Any:
    """The value of the JSON text `data` (`pydantic_core.from_json`); invalid JSON raises `ValueError`."""
    return from_json(data)
