"""The scoring rules, one by one, on hand-made cases: each test has an answer that must pass and one that must not."""

from __future__ import annotations

import itertools
import json
import random
from collections import Counter
from typing import Any

import pytest

from ext.core import FunctionCall
from ext.eval import EvalCase, normalize, parse_case, score
from ext.eval._matching import max_matching

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


# --- parallel calls: a matching, checked against trying every order -------------------------------------------


def _brute_force_correct(expected: list[dict[str, Any]], calls: list[FunctionCall]) -> bool:
    """The old rule, stated directly: some order of the calls fits the expected calls one to one (each pair judged
    as a one-call case)."""
    if len(calls) != len(expected):
        return False
    fit = [[score(case([want]), [c]).correct for c in calls] for want in expected]
    return any(all(fit[i][j] for i, j in enumerate(order)) for order in itertools.permutations(range(len(calls))))


def test_parallel_verdicts_equal_trying_every_order_on_random_cases() -> None:
    rng = random.Random(20261130)
    cities = ["Paris", "Oslo", "Rome"]
    seen = Counter[bool]()
    for _ in range(400):
        n = rng.randint(1, 5)
        expected: list[dict[str, Any]] = []
        for _ in range(n):
            if rng.random() < 0.2:
                expected.append({"name": "triangle_area", "arguments": {"base": [rng.randint(1, 2)], "height": [1.0]}})
            else:
                allowed = rng.sample(cities, rng.randint(1, 2))
                expected.append({"name": "local_time", "arguments": {"city": allowed}})
        calls = [
            call("triangle_area", {"base": rng.randint(1, 2), "height": 1}, str(k))
            if rng.random() < 0.2
            else call("local_time", {"city": rng.choice(cities)}, str(k))
            for k in range(n + (rng.random() < 0.05))
        ]
        verdict = score(case(expected, category="parallel"), calls)
        assert verdict.correct == _brute_force_correct(expected, calls), (expected, calls)
        assert verdict.correct == (verdict.reason == "")
        seen[verdict.correct] += 1
    assert min(seen.values()) > 50  # both verdicts well represented


def test_the_matching_judges_each_pair_once_and_finds_a_largest_pairing() -> None:
    # 50 expected calls that all accept calls 0..48, none call 49: no full pairing exists, and trying orders would
    # visit 49! of them before saying so.
    judged = Counter[tuple[int, int]]()

    def fits(i: int, j: int) -> bool:
        judged[i, j] += 1
        return j < 49

    pairing = max_matching(50, 50, fits)
    assert set(judged.values()) == {1} and len(judged) == 50 * 50
    assert sorted(j for j in pairing if j is not None) == list(range(49))
    # A pairing only an augmenting path finds: greedy order takes j=0 for i=0, which i=1 needs.
    assert max_matching(2, 2, lambda i, j: (i, j) in {(0, 0), (0, 1), (1, 0)}) == [1, 0]


def test_fifty_parallel_calls_are_scored_and_the_reason_names_the_call_that_fits_nothing() -> None:
    cities = [f"City{k}" for k in range(50)]
    tool = {**TIME, "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}
    expected = [{"name": "local_time", "arguments": {"city": cities[:49]}} for _ in range(50)]
    c = case(expected, tools=[tool], category="parallel")
    # Before the matching this took 49! pairings (never returned); it is now 2,500 judged pairs.
    verdict = score(c, [call("local_time", {"city": city}, str(k)) for k, city in enumerate(cities)])
    assert not verdict.correct
    assert verdict.reason.startswith("call 50: local_time.city: 'City49' is not among the allowed values")
    right = [call("local_time", {"city": city}, str(k)) for k, city in enumerate(reversed(cities[:49]))]
    assert score(c, [*right, call("local_time", {"city": "City0"}, "x")]).correct


def test_the_reason_names_an_expected_call_no_call_fits_or_the_competition() -> None:
    expected = [
        {"name": "local_time", "arguments": {"city": ["Paris"]}},
        {"name": "local_time", "arguments": {"city": ["Oslo"]}},
    ]
    c = case(expected, category="parallel")
    oslo_twice = [call("local_time", {"city": "Oslo"}, "1"), call("local_time", {"city": "Oslo"}, "2")]
    assert score(c, oslo_twice).reason == "local_time.city: 'Oslo' is not among the allowed values ['Paris']"
    # Every call fits some expected call and each expected call some call, but two want the one Paris.
    competing = [expected[0], expected[0], {"name": "local_time", "arguments": {"city": ["Oslo", "Rome"]}}]
    three = [call("local_time", {"city": city}, city) for city in ("Paris", "Oslo", "Rome")]
    verdict = score(case(competing, category="parallel"), three)
    assert verdict.reason == "expected call 2 (local_time) fits only calls other expected calls need"


# --- numbers -----------------------------------------------------------------------------------------------------

NOTE = {
    "name": "note",
    "description": "Keep a value.",
    "parameters": {"type": "object", "properties": {"value": {"type": "string"}, "any": {}}},
}


@pytest.mark.parametrize(
    ("answer", "allowed", "right"),
    [
        ("1.5", "1.5", True),
        ("1.5", "15", False),  # normalisation dropped the point: "1.5" and "15" were one
        ("-1.5", "1.5", False),  # ... and the sign
        ("1.50", "1.5", True),  # the same number, written otherwise
        ("+2", "2", True),
        ("1e3", "1000", True),
        (".5", "0.5", True),
        (" 7 ", "7", True),
        ("1.5", 1.5, True),  # a string holding a number against a number: by value
        ("2", 2, True),
        ("2.5", 2, False),
        ("1,000", "1000", False),  # grouping is text, and text never equals a number
        ("1.5", "one and a half", False),
        ("12345678901234567890", "12345678901234567891", False),  # exact: no float rounding
        ("2024-01-05", "2024/01/05", True),  # not a number: normalised text, as BFCL compares dates
        ("New-York", "new york", True),
    ],
)
def test_numbers_in_strings_compare_as_numbers(answer: str, allowed: Any, right: bool) -> None:
    expected = [{"name": "note", "arguments": {"value": [allowed]}}]
    verdict = score(case(expected, tools=[NOTE]), [call("note", {"value": answer})])
    assert verdict.correct is right, verdict.reason


@pytest.mark.parametrize(
    ("answer", "allowed", "right"),
    [
        (5, 5.0, True),  # int and float of one value are equal (Python's ==, as BFCL compares)
        (0.1, "0.1", True),  # a float against a decimal string: its shortest decimal form
        (0.30000000000000004, 0.3, False),
        (True, 1, False),  # booleans are not numbers
        ("1", True, False),
        ([1.5, "2"], ["1.5", 2], True),  # inside lists ...
        ({"k": "1.5"}, {"k": ["15"]}, False),  # ... and objects
        ("1e99999999999999999999999", "1", False),  # an exponent Decimal cannot hold is no number: text vs number
    ],
)
def test_numbers_compare_by_value_in_an_untyped_parameter(answer: Any, allowed: Any, right: bool) -> None:
    expected = [{"name": "note", "arguments": {"any": [allowed]}}]
    verdict = score(case(expected, tools=[NOTE]), [call("note", {"any": answer})])
    assert verdict.correct is right, verdict.reason


@pytest.mark.parametrize(
    ("arguments", "reason"),
    [
        ('{"city": ' + "[" * 100_000 + "]" * 100_000 + "}", "recursion limit exceeded"),
        ('{"city": ' + "1" * 5000 + "}", "number out of range"),
    ],
)
def test_arguments_too_deep_or_too_long_are_malformed_not_a_crash(arguments: str, reason: str) -> None:
    verdict = score(case([{"name": "local_time", "arguments": {"city": ["Paris"]}}]), [call("local_time", arguments)])
    assert (verdict.correct, verdict.malformed) == (False, True)
    assert verdict.reason.startswith("malformed call: local_time: arguments are not valid JSON (")
    assert reason in verdict.reason
