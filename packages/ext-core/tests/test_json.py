"""`json_dumps_compact` / `json_loads` (thin wrappers over `pydantic_core.to_json` / `from_json`) against the
standard library: the same values."""

from __future__ import annotations

import json
from typing import Any

import pytest

from ext.core import json_dumps_compact, json_loads

VALUES: list[Any] = [
    {"max_tokens": 1024, "messages": [{"role": "user", "content": [{"type": "text", "text": "Hi"}]}]},
    {"text": 'quote " backslash \\ newline \n tab \t nul \x00 bell \x07', "é": "日本語 🙂", "": ""},
    [1, -2, 3.5, 1e300, -0.0, 2**70, True, False, None, "", [], {}],
    {"nested": {"deeper": [{"a": [1, {"b": None}]}]}},
    "just a string",
    42,
    None,
]


@pytest.mark.parametrize("value", VALUES)
def test_dumps_compact_round_trips_through_json(value: Any) -> None:
    data = json_dumps_compact(value)
    assert isinstance(data, bytes)
    assert json.loads(data) == value
    assert b", " not in data.replace(b'", "', b"") and b'": ' not in data  # compact


def test_dumps_compact_keeps_non_ascii() -> None:
    assert json_dumps_compact({"é": "日本"}) == '{"é":"日本"}'.encode()


def test_dumps_compact_refuses_what_json_cannot_carry() -> None:
    with pytest.raises(ValueError, match="Unable to serialize unknown type"):
        json_dumps_compact({"tool": object()})


@pytest.mark.parametrize("value", VALUES)
def test_loads_matches_json_loads(value: Any) -> None:
    text = json.dumps(value, ensure_ascii=False)
    for data in (text, text.encode(), f"  {text}\n", f"{text}  \r\n".encode()):
        assert json_loads(data) == json.loads(data)


def test_loads_returns_fresh_objects() -> None:
    first, second = json_loads(b'{"a": [1]}'), json_loads(b'{"a": [1]}')
    first["a"].append(2)
    assert second == {"a": [1]}


@pytest.mark.parametrize("data", [b"", b"   ", b"{", b'{"a": 1} x', b'{"a": 1}{"b": 2}', b"[1,]", b"nul", "{'s': 1}"])
def test_loads_raises_value_error_where_json_loads_does(data: bytes | str) -> None:
    with pytest.raises(ValueError):
        json.loads(data)
    with pytest.raises(ValueError):
        json_loads(data)
