"""The scoring rules, one by one, on hand-made cases: each test has an answer that must pass and one that must not."""

from __future__ import annotations

import json
from typing import Any

import pytest

from ext.core import FunctionCall
from ext.eval import EvalCase, normalize, parse_case, score

AREA = {
    "name": "triangle_area",
    "description": "Area of a triangle.",
    "parameters": {
        "type": "object",
        "properties": {
            "base": {"type": "integer"},
            "height": {"type": "number"},
            "unit": {"type": "string"},
            "flags": {"type": "array", "items": {"type": "string"}},
            "opts": {"type": "object"},
            "exact": {"type": "boolean"},
        },
        "required": ["base", "height"],
    },
}
TIME = {
    "name": "local_time",
    "description": "Time in a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
}


def case(expected: Any, tools: list[dict[str, Any]] | None = None, category: str = "simple") -> EvalCase:
    return parse_case(
        {
            "id": "c",
            "category": category,
            "messages": [{"role": "user", "content": "q"}],
            "tools": [AREA, TIME] if tools is None else tools,
            "expected": expected,
        }
    )


def call(name: str, arguments: dict[str, Any] | str, id: str = "1") -> FunctionCall:
    return FunctionCall(id=id, name=name, arguments=arguments if isinstance(arguments, str) else json.dumps(arguments))


AREA_10_5 = [{"name": "triangle_area", "arguments": {"base": [10], "height": [5.0], "unit": ["units", ""]}}]


def test_the_expected_call_is_right() -> None:
    verdict = score(case(AREA_10_5), [call("triangle_area", {"base": 10, "height": 5.0, "unit": "units"})])
    assert (verdict.correct, verdict.malformed, verdict.reason) == (True, False, "")


def test_a_wrong_value_is_wrong() -> None:
    verdict = score(case(AREA_10_5), [call("triangle_area", {"base": 11, "height": 5.0})])
    assert (verdict.correct, verdict.malformed) == (False, False)
    assert "triangle_area.base: 11 is not among the allowed values [10]" in verdict.reason


def test_an_optional_parameter_may_be_left_out_only_when_empty_string_is_allowed() -> None:
    assert score(case(AREA_10_5), [call("triangle_area", {"base": 10, "height": 5})]).correct
    strict = [{"name": "triangle_area", "arguments": {"base": [10], "height": [5.0], "unit": ["units"]}}]
    verdict = score(case(strict), [call("triangle_area", {"base": 10, "height": 5})])
    assert not verdict.correct
    assert "missing parameter 'unit'" in verdict.reason


def test_an_integer_counts_for_a_number_but_a_float_not_for_an_integer() -> None:
    assert score(case(AREA_10_5), [call("triangle_area", {"base": 10, "height": 5})]).correct
    verdict = score(case(AREA_10_5), [call("triangle_area", {"base": 10.0, "height": 5})])
    assert not verdict.correct
    assert not verdict.malformed  # 10.0 is a JSON Schema integer: well formed, but BFCL wants an int
    assert "expected integer, got float" in verdict.reason


def test_strings_are_compared_after_normalisation() -> None:
    expected = [{"name": "local_time", "arguments": {"city": ["New York"]}}]
    assert score(case(expected), [call("local_time", {"city": "new-york"})]).correct
    assert score(case(expected), [call("local_time", {"city": "NEW YORK."})]).correct
    assert not score(case(expected), [call("local_time", {"city": "New Jersey"})]).correct
    assert normalize("It's 1, 2/3") == 'it"s123'


def test_a_parameter_not_in_the_expected_arguments_is_unexpected() -> None:
    verdict = score(case(AREA_10_5), [call("triangle_area", {"base": 10, "height": 5, "exact": True})])
    assert not verdict.correct
    assert "unexpected parameter 'exact'" in verdict.reason


def test_lists_compare_item_by_item_and_objects_key_by_key() -> None:
    expected = [
        {
            "name": "triangle_area",
            "arguments": {
                "base": [1],
                "height": [1.0],
                "flags": [["Fast", "Exact"]],
                "opts": [{"mode": ["quick"], "depth": [2, ""]}],
            },
        }
    ]
    right = {"base": 1, "height": 1, "flags": ["fast", "exact"], "opts": {"mode": "Quick"}}
    assert score(case(expected), [call("triangle_area", right)]).correct
    assert not score(case(expected), [call("triangle_area", {**right, "flags": ["exact", "fast"]})]).correct
    assert not score(case(expected), [call("triangle_area", {**right, "opts": {"mode": "quick", "x": 1}})]).correct
    assert not score(case(expected), [call("triangle_area", {**right, "opts": {"depth": 2}})]).correct


def test_booleans_are_not_numbers() -> None:
    expected = [{"name": "triangle_area", "arguments": {"base": [1], "height": [1.0], "exact": [True]}}]
    assert score(case(expected), [call("triangle_area", {"base": 1, "height": 1, "exact": True})]).correct
    verdict = score(case(expected), [call("triangle_area", {"base": True, "height": 1, "exact": True})])
    assert (verdict.correct, verdict.malformed) == (False, True)  # true is no JSON Schema integer


def test_parallel_calls_are_matched_in_any_order() -> None:
    expected = [
        {"name": "local_time", "arguments": {"city": ["Paris"]}},
        {"name": "local_time", "arguments": {"city": ["Oslo"]}},
    ]
    c = case(expected, category="parallel")
    assert score(c, [call("local_time", {"city": "Oslo"}, "1"), call("local_time", {"city": "Paris"}, "2")]).correct
    assert not score(c, [call("local_time", {"city": "Oslo"}, "1"), call("local_time", {"city": "Oslo"}, "2")]).correct
    verdict = score(c, [call("local_time", {"city": "Oslo"})])
    assert verdict.reason == "expected 2 call(s), got 1"


def test_pairing_backtracks_when_a_greedy_pairing_would_fail() -> None:
    # The first expected call accepts either city; the second only Paris. Greedy pairing takes Paris for the
    # first and leaves nothing for the second; the right pairing exists.
    expected = [
        {"name": "local_time", "arguments": {"city": ["Paris", "Oslo"]}},
        {"name": "local_time", "arguments": {"city": ["Paris"]}},
    ]
    calls = [call("local_time", {"city": "Paris"}, "1"), call("local_time", {"city": "Oslo"}, "2")]
    assert score(case(expected, category="parallel"), calls).correct


def test_the_wrong_tool_is_wrong() -> None:
    expected = [{"name": "local_time", "arguments": {"city": ["Paris"]}}]
    verdict = score(case(expected, category="multiple"), [call("triangle_area", {"base": 1, "height": 2})])
    assert verdict.reason == "called triangle_area, expected local_time"


@pytest.mark.parametrize(
    ("the_call", "reason"),
    [
        (call("local_time", "{city: Paris"), "malformed call: local_time: arguments are not valid JSON"),
        (call("local_time", "[1]"), "malformed call: local_time: arguments are a JSON list, not an object"),
        (call("clock", {"city": "Paris"}), "malformed call: 'clock' is not among the tools"),
        (call("local_time", {}), "malformed call: local_time: city: required, missing"),
        (call("local_time", {"city": 3}), "malformed call: local_time: city: expected string, got integer"),
    ],
)
def test_malformed_calls(the_call: FunctionCall, reason: str) -> None:
    verdict = score(case([{"name": "local_time", "arguments": {"city": ["Paris"]}}]), [the_call])
    assert (verdict.correct, verdict.malformed) == (False, True)
    assert verdict.reason.startswith(reason)


def test_irrelevance_is_right_only_without_a_call() -> None:
    c = case({"no_call": True}, category="irrelevance")
    assert score(c, "I cannot help with that.").correct
    verdict = score(c, [call("local_time", {"city": "Paris"})])
    assert (verdict.correct, verdict.malformed) == (False, False)
    assert "no tool should be called" in verdict.reason


def test_answer_checks() -> None:
    c = case({"contains": ["paris"], "regex": r"\bcapital\b"}, tools=[], category="answer")
    assert score(c, "Paris is the capital of France.").correct
    assert score(c, "The capital is Lyon.").reason == "the answer does not contain 'paris'"
    assert score(c, "Paris, of course.").reason == "the answer does not match '\\\\bcapital\\\\b'"
