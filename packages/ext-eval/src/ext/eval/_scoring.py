"""Scoring one answer against a case, by the rules of the Berkeley Function Calling Leaderboard's AST checker.

The rules (the README lists them for dataset authors) were learnt from BFCL's checker and written anew here:

- the model makes exactly as many calls as expected; for several calls the pairing is order-free (a maximum
  bipartite matching, `_matching`: some pairing covers every expected call);
- a call has the expected name, every parameter the tool's schema requires, and no parameter that is not both in
  the tool's schema and in the expected arguments; an expected parameter may be left out only when `""` is among
  its allowed values;
- a value has the type the tool's schema declares (an integer counts for a `number`; a float never counts for an
  `integer`; booleans are not numbers) and equals one of the allowed values: numbers by value, and so is a string
  holding one decimal number (`"1.5"` equals `1.5` and `"1.50"`, not `"15"` or `"-1.5"`; if one side is such a
  number, the other must be one too); other strings after normalisation (lower case, without spaces and
  `,./-_*^`, `'` read as `"`); lists item by item, objects key by key (each key's allowed values listed, `""` for
  an optional key);
- irrelevance (`no_call`): correct when the model calls no tool;
- answer checks: correct when the model answers in text that contains every `contains` string (case-insensitive)
  and matches `regex`.

A malformed call (see `_wellformed`) makes the case wrong and malformed.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any

from ext.core import FunctionCall, ToolSchema

from ._dataset import AnswerCheck, EvalCase, ExpectedCall, NoCall
from ._matching import max_matching
from ._wellformed import malformed_reason, parse_arguments

_PUNCTUATION = re.compile(r"[ ,./\-_*^]")
# A decimal number as people and JSON write one: sign, digits, point, exponent. No grouping ("1,000" is text),
# no `inf`/`nan`, ASCII digits only.
_DECIMAL = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
_OPTIONAL = ""


@dataclass(frozen=True)
class Verdict:
    """How one answer scored: `reason` says why it is wrong (empty when correct)."""

    correct: bool
    malformed: bool = False
    reason: str = ""


def score(case: EvalCase, content: str | Sequence[FunctionCall]) -> Verdict:
    """Score the model's answer (its text, or its tool calls) against `case`."""
    calls = [] if isinstance(content, str) else list(content)
    tools = case.tools_by_name
    for call in calls:
        reason = malformed_reason(call, tools)
        if reason is not None:
            return Verdict(False, True, f"malformed call: {reason}")
    expected = case.expected
    if isinstance(expected, NoCall):
        if calls:
            return Verdict(False, reason=f"called {', '.join(c.name for c in calls)}; no tool should be called")
        return Verdict(True)
    if isinstance(expected, AnswerCheck):
        return _check_answer(expected, content)
    return _check_calls(expected, calls, tools)


def _check_answer(check: AnswerCheck, content: str | Sequence[FunctionCall]) -> Verdict:
    if not isinstance(content, str):
        return Verdict(False, reason=f"called {', '.join(c.name for c in content)}; expected an answer in text")
    text = content.lower()
    for needle in check.contains:
        if needle.lower() not in text:
            return Verdict(False, reason=f"the answer does not contain {needle!r}")
    if check.regex is not None and re.search(check.regex, content) is None:
        return Verdict(False, reason=f"the answer does not match {check.regex!r}")
    return Verdict(True)


def _check_calls(
    expected: Sequence[ExpectedCall], calls: Sequence[FunctionCall], tools: Mapping[str, ToolSchema]
) -> Verdict:
    if len(calls) != len(expected):
        return Verdict(False, reason=f"expected {len(expected)} call(s), got {len(calls)}")
    parsed = [(call.name, parse_arguments(call)) for call in calls]
    problems: dict[tuple[int, int], str | None] = {}

    def fits(i: int, j: int) -> bool:
        want = expected[i]
        problems[i, j] = call_problem(want, *parsed[j], tools[want.name])
        return problems[i, j] is None

    pairing = max_matching(len(expected), len(calls), fits)
    if None not in pairing:
        return Verdict(True)
    return Verdict(False, reason=_unpaired_reason(expected, [name for name, _ in parsed], pairing, problems))


def _unpaired_reason(
    expected: Sequence[ExpectedCall],
    called: Sequence[str],
    pairing: Sequence[int | None],
    problems: Mapping[tuple[int, int], str | None],
) -> str:
    """Why no pairing covers every expected call: an expected call no call fits (compared with a call of its
    name when there is one), else a call that fits no expected call, else the competition for the same calls."""
    everywhere = range(len(called))
    unpaired = [i for i, j in enumerate(pairing) if j is None]
    for i in unpaired:
        if all(problems[i, j] is not None for j in everywhere):
            j = next((j for j in everywhere if called[j] == expected[i].name), 0)
            return str(problems[i, j])
    for j in sorted(set(everywhere) - set(pairing)):
        if all(problems[i, j] is not None for i in everywhere):
            i = next((i for i in everywhere if expected[i].name == called[j]), 0)
            return f"call {j + 1}: {problems[i, j]}"
    return f"expected call {unpaired[0] + 1} ({expected[unpaired[0]].name}) fits only calls other expected calls need"


def call_problem(want: ExpectedCall, name: str, arguments: Any, tool: ToolSchema) -> str | None:
    """Why a call (`name`, parsed `arguments`) is not `want`, or None when it is."""
    if name != want.name:
        return f"called {name}, expected {want.name}"
    if not isinstance(arguments, dict):
        return f"{name}: {arguments}"
    schema = tool.get("parameters") or {}
    properties: Mapping[str, Any] = schema.get("properties") or {}
    for param in schema.get("required") or ():
        if param not in arguments:
            return f"{name}: missing required parameter {param!r}"
    for param, value in arguments.items():
        if param not in properties or param not in want.arguments:
            return f"{name}: unexpected parameter {param!r}"
        problem = value_problem(value, properties[param], want.arguments[param])
        if problem:
            return f"{name}.{param}: {problem}"
    for param, allowed in want.arguments.items():
        if param not in arguments and _OPTIONAL not in allowed:
            return f'{name}: missing parameter {param!r} (its allowed values do not include "")'
    return None


def value_problem(value: Any, schema: Mapping[str, Any], allowed: Sequence[Any]) -> str | None:
    """Why `value` is not right for a parameter of `schema` with `allowed` values, or None when it is."""
    kind = schema.get("type")
    if kind == "number" and type(value) is int:
        value = float(value)  # an integer is a fine number; the reverse does not hold
    if isinstance(kind, str) and not _has_type(value, kind):
        return f"expected {kind}, got {type(value).__name__} {value!r}"
    if any(matches(value, option) for option in allowed if not (isinstance(option, str) and option == _OPTIONAL)):
        return None
    return f"{value!r} is not among the allowed values {list(allowed)}"


def _has_type(value: Any, kind: str) -> bool:
    if kind == "integer":
        return type(value) is int
    if kind == "number":
        return type(value) is float
    if kind == "boolean":
        return type(value) is bool
    expected = {"string": str, "array": list, "object": dict}.get(kind)
    return expected is None or isinstance(value, expected)


def matches(value: Any, option: Any) -> bool:
    """Whether `value` equals the allowed value `option` under BFCL's comparison, numbers compared as numbers."""
    if isinstance(value, bool) or isinstance(option, bool):
        return type(value) is type(option) and value == option
    if isinstance(value, (int, float)) and isinstance(option, (int, float)):
        return value == option
    number, allowed = _number(value), _number(option)
    if number is not None or allowed is not None:
        # A decimal number in a string ("1.5") is its value: normalisation would make "1.5", "15" and "-1.5" one.
        return number is not None and allowed is not None and number == allowed
    if isinstance(value, str) and isinstance(option, str):
        return normalize(value) == normalize(option)
    if isinstance(value, list) and isinstance(option, list):
        return len(value) == len(option) and all(matches(v, o) for v, o in zip(value, option, strict=True))
    if isinstance(value, dict) and isinstance(option, dict):
        return _dict_matches(value, option)
    return False


def _number(value: Any) -> Decimal | None:
    """The value of a number, or of a string holding one decimal number; None for anything else."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return Decimal(value)
    if isinstance(value, float):
        return Decimal(repr(value))  # the shortest decimal that reads back as this float: 0.1 as "0.1"
    if isinstance(value, str) and _DECIMAL.fullmatch(value.strip()):
        try:
            return Decimal(value.strip())
        except InvalidOperation:  # an exponent past what Decimal holds: no number to compare
            return None
    return None


def _dict_matches(value: Mapping[str, Any], option: Mapping[str, Any]) -> bool:
    """An object against an allowed object whose keys each list their allowed values (`""`: the key may be absent)."""
    for key, item in value.items():
        if key not in option:
            return False
        choices = option[key] if isinstance(option[key], list) else [option[key]]
        if not any(matches(item, choice) for choice in choices if choice != _OPTIONAL):
            return False
    for key, choices in option.items():
        if key not in value and not (isinstance(choices, list) and _OPTIONAL in choices):
            return False
    return True


def normalize(text: str) -> str:
    """A string as BFCL compares it: lower case, without spaces and `,./-_*^`, single quotes as double quotes."""
    return _PUNCTUATION.sub("", text).lower().replace("'", '"')
