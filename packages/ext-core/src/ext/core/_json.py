"""JSON for request and response bodies: the standard library's C encoder and scanner called directly.

`json.dumps` and `json.loads` add Python layers on every call (an encoder object, `iterencode`,
`detect_encoding`, `decode`): on a small chat body that is most of their cost, about 10k and 14k
instructions a call. `json_dumps_compact` and `json_loads` give the same values and raise the same errors,
for a provider's hot path.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from json.encoder import c_make_encoder, encode_basestring  # type: ignore[attr-defined]  # not in typeshed
from typing import Any

__all__ = ["json_dumps_compact", "json_loads"]


def _unserializable(value: object) -> Any:
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


_dumps: Callable[[Any], str]
if c_make_encoder is not None:
    # No circular-reference markers (a body is a tree built per call): a cycle ends in RecursionError.
    _iterencode = c_make_encoder(None, _unserializable, encode_basestring, None, ":", ",", False, False, False)

    def _dumps(value: Any) -> str:
        return "".join(_iterencode(value, 0))

else:  # pragma: no cover - CPython always has the C encoder
    _dumps = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode


def json_dumps_compact(value: Any) -> bytes:
    """`value` as compact UTF-8 JSON (`separators=(",", ":")`, `ensure_ascii=False`). NaN and infinities raise
    ValueError (they are not JSON, and APIs reject them); a value JSON has no form for raises TypeError."""
    return _dumps(value).encode()


_scan_once: Callable[[str, int], tuple[Any, int]] = json.JSONDecoder().scan_once  # type: ignore[attr-defined]


def json_loads(data: bytes | str) -> Any:
    """`json.loads(data)`: the same value, or the same `json.JSONDecodeError`. The common body (UTF-8 text that
    starts with its value) goes straight to the C scanner; anything else through `json.loads` itself."""
    try:
        text = data.decode() if isinstance(data, bytes) else data
        value, end = _scan_once(text, 0)
    except (StopIteration, UnicodeDecodeError, TypeError):
        return json.loads(data)  # leading whitespace, a BOM, UTF-16, not JSON: json's own handling and errors
    if end != len(text) and not text[end:].isspace():
        return json.loads(data)  # extra data: json's error
    return value
