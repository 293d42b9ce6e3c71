"""The prompt-level tool-call mapping, without a model."""

from __future__ import annotations

from ext.core import ToolSchema
from ext.models.llama_cpp import parse_output

TOOLS: list[ToolSchema] = [{"name": "add", "description": "", "parameters": {"type": "object", "properties": {}}}]
TWO_CALLS = '{"tool_calls": [{"name": "add", "arguments": {"a": 1}}, {"name": "add", "arguments": {"a": 2}}]}'


def test_call_ids_are_stable_per_turn_and_unique_in_it() -> None:
    first = parse_output(TWO_CALLS, TOOLS, turn=3)
    again = parse_output(TWO_CALLS, TOOLS, turn=3)
    later = parse_output(TWO_CALLS, TOOLS, turn=5)
    assert first is not None and again is not None and later is not None
    assert [c.id for c in first] == ["call_3_0", "call_3_1"] == [c.id for c in again]  # same prompt, same ids
    assert {c.id for c in later}.isdisjoint(c.id for c in first)  # a later turn never reuses an id
    assert [c.arguments for c in first] == ['{"a":1}', '{"a":2}']


def test_without_a_turn_ids_are_random() -> None:
    one, two = parse_output(TWO_CALLS, TOOLS), parse_output(TWO_CALLS, TOOLS)
    assert one is not None and two is not None
    assert {c.id for c in one}.isdisjoint(c.id for c in two)
    assert all(c.id.startswith("call_") for c in one)


def test_text_and_unknown_tools_are_not_calls() -> None:
    assert parse_output("The answer is 3.", TOOLS, turn=1) is None
    assert parse_output('{"tool_calls": [{"name": "other", "arguments": {}}]}', TOOLS, turn=1) is None
