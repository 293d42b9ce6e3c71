"""The protocol-neutral script types."""

from __future__ import annotations

import pytest

from ext.testing.script import (
    Fault,
    NeutralMessage,
    NeutralRequest,
    Reply,
    ToolCallSpec,
    split_fragments,
    split_words,
)


def test_tool_call_ids_are_generated_and_unique() -> None:
    a = ToolCallSpec("f", {"x": 1})
    b = ToolCallSpec("f", {"x": 1})
    assert a.id is not None
    assert a.id.startswith("call_")
    assert a.id != b.id
    assert a.call_id == a.id
    assert ToolCallSpec("f", {}, id="mine").id == "mine"


def test_tool_call_arguments_forms() -> None:
    assert ToolCallSpec("f", {"city": "Paris", "n": 2}).arguments_json == '{"city":"Paris","n":2}'
    assert ToolCallSpec("f", "{broken").arguments_json == "{broken"
    assert ToolCallSpec("f", '{"a": [1]}').arguments_dict == {"a": [1]}
    with pytest.raises(ValueError, match="not a JSON object"):
        _ = ToolCallSpec("f", "[1]").arguments_dict


def test_reply_defaults() -> None:
    reply = Reply(text="Hello big world")
    assert reply.resolved_finish_reason == "stop"
    assert reply.text_chunks == ["Hello ", "big ", "world"]
    assert reply.total_tokens == 15
    assert Reply(tool_calls=[ToolCallSpec("f")]).resolved_finish_reason == "tool_calls"
    assert Reply(tool_calls=[ToolCallSpec("f")], finish_reason="length").resolved_finish_reason == "length"


def test_reply_chunks() -> None:
    assert Reply(chunks=["", "a", "b"]).text == "ab"
    assert Reply(text="ab", chunks=["a", "b"]).text_chunks == ["a", "b"]
    with pytest.raises(ValueError, match="join to"):
        Reply(text="abc", chunks=["a", "b"])
    with pytest.raises(ValueError, match="delays"):
        Reply(delay=-1)
    with pytest.raises(ValueError, match="stall_after_chunks"):
        Reply(stall_after_chunks=-1)


def test_fault_kind_is_checked() -> None:
    assert Fault("rate_limit", retry_after=1).retry_after == 1
    with pytest.raises(ValueError, match="unknown Fault kind"):
        Fault("explode")  # type: ignore[arg-type]


@pytest.mark.parametrize("text", ["", "one", "  leading and trailing  ", "a\nb\tc  d", "ünïcode wörds"])
def test_split_words_round_trips(text: str) -> None:
    pieces = split_words(text)
    assert "".join(pieces) == text
    assert all(pieces)


@pytest.mark.parametrize(("text", "parts"), [("", 3), ("x", 4), ('{"city":"Paris"}', 4), ("abcdef", 3), ("ab", 5)])
def test_split_fragments_round_trips(text: str, parts: int) -> None:
    fragments = split_fragments(text, parts)
    assert "".join(fragments) == text
    assert all(fragments)
    assert len(fragments) <= parts


def test_neutral_request_last_user_text() -> None:
    request = NeutralRequest(
        messages=[NeutralMessage("user", "first"), NeutralMessage("assistant", "x"), NeutralMessage("user", "last")]
    )
    assert request.last_user_text == "last"
    assert NeutralRequest().last_user_text == ""
