"""`json_dumps_compact` / `json_loads` against the standard library: same values, same errors."""

from __future__ import annotations

import json
import math
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
def test_dumps_compact_is_json_dumps_compact_utf8(value: Any) -> None:
    expected = json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode()
    assert json_dumps_compact(value) == expected
    assert json.loads(json_dumps_compact(value)) == value


def test_dumps_compact_refuses_what_json_cannot_carry() -> None:
    with pytest.raises(TypeError, match="Object of type set is not JSON serializable"):
        json_dumps_compact({"tools": {1, 2}})
    for bad in (math.nan, math.inf, -math.inf):
        with pytest.raises(ValueError, match="not JSON compliant"):
            json_dumps_compact({"temperature": bad})
    with pytest.raises(TypeError, match="keys must be str"):
        json_dumps_compact({(1, 2): "tuple key"})


def test_dumps_compact_cycle_raises() -> None:
    cycle: list[Any] = []
    cycle.append(cycle)
    with pytest.raises(RecursionError):
        json_dumps_compact(cycle)


@pytest.mark.parametrize("value", VALUES)
def test_loads_matches_json_loads(value: Any) -> None:
    text = json.dumps(value, ensure_ascii=False)
    for data in (text, text.encode(), f"  {text}\n", f"{text}  \r\n".encode(), "\ufeff".encode() + text.encode()):
        assert json_loads(data) == json.loads(data)
    assert json_loads(text.encode("utf-16")) == value  # json.loads detects UTF-16 from the bytes


def test_loads_returns_fresh_objects() -> None:
    # The scanner's key memo is per call: two decodes share nothing.
    first, second = json_loads(b'{"a": [1]}'), json_loads(b'{"a": [1]}')
    first["a"].append(2)
    assert second == {"a": [1]}


@pytest.mark.parametrize(
    "data", [b"", b"   ", b"{", b'{"a": 1} x', b'{"a": 1}{"b": 2}', b"[1,]", b"nul", "{'single': 1}", b"\xff\xfe\xfd"]
)
def test_loads_raises_what_json_loads_raises(data: bytes | str) -> None:
    with pytest.raises(Exception) as ours:
        json_loads(data)
    with pytest.raises(Exception) as theirs:
        json.loads(data)
    assert type(ours.value) is type(theirs.value)
    assert str(ours.value) == str(theirs.value)


def test_loads_refuses_non_text() -> None:
    with pytest.raises(TypeError, match="the JSON object must be str, bytes or bytearray, not int"):
        json_loads(12)  # type: ignore[arg-type]
