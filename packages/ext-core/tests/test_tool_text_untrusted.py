"""The tolerant tool-call reader on untrusted answers: linear work, bounded nesting, no interpreter error, no call
read from a mere mention, strict finite JSON, and the `text_calls` opt-out.

Each deterministic test below reproduces a defect of the earlier reader (which found calls anywhere in the answer
with `ast.parse` once per closing bracket): quadratic time (2.4 s for a 4 KB runaway call, minutes at 32 KB),
`RecursionError` from `json.raw_decode` and `ast.unparse`, mentions in prose and code read as calls, a dotted prefix
dropped (`evil.module.delete_file` read as `delete_file`), and ``Infinity`` in call arguments. The property-based
tests feed arbitrary and adversarial text and assert the answer comes back as text or as calls, never an
exception, and that well-formed calls of any literal arguments read back exactly."""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ext.core import (
    AssistantMessage,
    ConfigurationError,
    FunctionCall,
    FunctionTool,
    ToolSchema,
    calls_text,
    chat_tools,
    find_tool_calls,
    prompt_messages,
    read_reply,
    tool_schema_of,
)
from ext.core._tool_text import MAX_CALL_TOKENS, MAX_CALLS, MAX_CONTAINERS, MAX_DEPTH

WEATHER = {
    "type": "object",
    "properties": {"city": {"type": "string"}, "unit": {"type": "string"}},
    "required": ["city"],
}
DELETE = {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}
TOOLS = {"get_weather": WEATHER, "delete_file": DELETE}
SCHEMAS: list[ToolSchema] = [
    {"name": "get_weather", "description": "The current weather in a city.", "parameters": WEATHER},
    {"name": "delete_file", "description": "Delete a file.", "parameters": DELETE},
]
KB = 1024


def _strict(text: str) -> Any:
    """`text` parsed as JSON that may not hold NaN or Infinity."""

    def refuse(constant: str) -> Any:
        raise AssertionError(f"not strict JSON: {constant}")

    return json.loads(text, parse_constant=refuse)


def _runaway_call(size: int) -> str:
    """An answer that starts a call of an offered tool and never closes it (the issue's repro)."""
    return "get_weather(" + "(1)," * (size // 4)


RUNAWAYS: dict[str, Callable[[int], str]] = {
    "python call": _runaway_call,
    "python list of calls": lambda size: "[" + 'get_weather(city="x"), ' * (size // 23),
    "unclosed string": lambda size: 'get_weather(city="' + 'a\\"' * (size // 3),
    "json": lambda size: '{"tool_calls": [' + '{"name": "get_weather", "arguments": {}}, ' * (size // 42),
    "tags": lambda size: '<tool_call>{"name": "get_weather"}</tool_call>' * (size // 46) + "<tool_call>x",
    "python tags": lambda size: '<tool_call>get_weather("x")</tool_call>\n' * (size // 41) + "<tool_call>x",
    "json list of calls": lambda size: json.dumps(
        [{"name": "get_weather", "arguments": {}}] * max(MAX_CALLS + 1, size // 42)
    ),
    "tag and spaces": lambda size: "<tool_call>" + " " * size,
    "fences": lambda size: "```" * (size // 3),
    "brackets": lambda size: "[" * size,
    "quotes": lambda size: '"\\' * (size // 2),
}


# --- linear work ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("family", sorted(RUNAWAYS))
def test_runaway_answers_stay_text_within_a_generous_time_guard(family: str) -> None:
    # The earlier reader took 2.4 s at 4 KB and 163 s at 32 KB for the first family; linear reading takes
    # milliseconds at 256 KB (tools/bench/bench_tool_text.py prints the table). The guard is a second per answer.
    for size in (4 * KB, 16 * KB, 64 * KB, 256 * KB):
        text = RUNAWAYS[family](size)
        started = time.perf_counter()
        assert find_tool_calls(text, TOOLS) == []
        assert read_reply(text, SCHEMAS) == text
        elapsed = time.perf_counter() - started
        assert elapsed < 1.0, f"{family} at {size // KB} KB took {elapsed:.2f} s"


def _python_steps(text: str) -> int:
    """The Python and native function calls reading `text` makes (a count of work that does not depend on speed)."""
    count = 0

    def profile(frame: Any, event: str, arg: Any) -> None:
        nonlocal count
        if event in ("call", "c_call"):
            count += 1

    sys.setprofile(profile)
    try:
        find_tool_calls(text, TOOLS)
    finally:
        sys.setprofile(None)
    return count


@pytest.mark.parametrize("family", sorted(RUNAWAYS))
def test_reading_work_grows_linearly(family: str) -> None:
    # A Python-like call is read up to MAX_CALL_TOKENS tokens: compare sizes below that (a token or more a
    # character here), and past it, where the work stops growing.
    for small in (MAX_CALL_TOKENS // 8, 16 * KB):
        steps, steps_4x = _python_steps(RUNAWAYS[family](small)), _python_steps(RUNAWAYS[family](4 * small))
        assert steps_4x <= 4 * steps + 50, f"{family}: {steps} steps at {small} chars, {steps_4x} at 4x"


def test_a_python_like_call_of_more_than_max_call_tokens_is_text() -> None:
    def call(numbers: int) -> str:  # 7 tokens and 2 a number
        return "get_weather(city=[" + "1," * numbers + "])"

    most = (MAX_CALL_TOKENS - 7) // 2
    assert find_tool_calls(call(most), TOOLS) == [("get_weather", {"city": [1] * most})]
    assert find_tool_calls(call(most + 1), TOOLS) == []
    # A long string is one token; JSON, read in native code, has no such cap.
    long = "x" * (512 * KB)
    assert find_tool_calls(f'get_weather(city="{long}")', TOOLS) == [("get_weather", {"city": long})]
    big = json.dumps({"name": "get_weather", "arguments": {"city": [1] * (64 * KB)}})
    assert find_tool_calls(big, TOOLS) == [("get_weather", {"city": [1] * (64 * KB)})]


def test_a_json_answer_of_more_than_max_containers_is_text() -> None:
    # Tens of thousands of arrays made at once set off a full garbage collection (about 60 ms on the event loop).
    def call(arrays: int) -> str:  # the call object, its arguments and their list: 3 more
        return json.dumps({"name": "get_weather", "arguments": {"city": [[]] * arrays}})

    assert find_tool_calls(call(MAX_CONTAINERS - 3), TOOLS) == [("get_weather", {"city": [[]] * (MAX_CONTAINERS - 3)})]
    assert find_tool_calls(call(MAX_CONTAINERS - 2), TOOLS) == []
    # Brackets inside strings are not arrays.
    code = "[{" * MAX_CONTAINERS
    assert find_tool_calls(json.dumps({"name": "get_weather", "arguments": {"city": code}}), TOOLS) == [
        ("get_weather", {"city": code})
    ]


def test_an_answer_of_more_than_max_calls_is_text() -> None:
    def calls(count: int, style: str) -> str:
        if style == "json":
            return json.dumps({"tool_calls": [{"name": "get_weather", "arguments": {}}] * count})
        if style == "tags":
            return '<tool_call>get_weather("x")</tool_call>\n' * count
        return "[" + ", ".join(['get_weather("x")'] * count) + "]"

    for style in ("json", "tags", "python"):
        assert len(find_tool_calls(calls(MAX_CALLS, style), TOOLS)) == MAX_CALLS, style
        assert find_tool_calls(calls(MAX_CALLS + 1, style), TOOLS) == [], style


def test_the_tagged_blocks_of_an_answer_share_one_token_budget() -> None:
    numbers = (MAX_CALL_TOKENS // 4 - 7) // 2  # a block's call: 7 tokens and 2 a number, a quarter of the budget

    def blocks(count: int) -> str:
        return f"<tool_call>get_weather(city=[{'1,' * numbers}])</tool_call>" * count

    assert find_tool_calls(blocks(4), TOOLS) == [("get_weather", {"city": [1] * numbers})] * 4
    assert find_tool_calls(blocks(5), TOOLS) == []


# --- bounded nesting, no interpreter error ------------------------------------------------------------------

DEGENERATE = [
    "[" * 1500,  # json.raw_decode raised RecursionError
    '{"a":' * 1500,
    "get_weather(x)" + "(1)" * 2000,  # ast.unparse raised RecursionError
    "get_weather(" + "a." * 100_000 + "b)",  # ast.parse: RecursionError during ast construction
    "get_weather(" + "1+" * 100_000 + "1)",
    "get_weather(" + "-" * 100_000 + "1)",  # ast.parse: MemoryError
    "get_weather(" + "(" * 1500 + ")" * 1500 + ")",
    "get_weather(city=" + "[" * 5000 + "]" * 5000 + ")",
    '{"name": "get_weather", "arguments": ' + "[" * 150 + "]" * 150 + "}",
    '{"name": "get_weather", "arguments": "' + "[" * 3000 + '"}',
    "<tool_call>" + "[" * 3000,
    "```\n" + '{"a":' * 3000 + "\n```",
]


@pytest.mark.parametrize("text", DEGENERATE, ids=lambda text: repr(text[:24]))
def test_degenerate_answers_are_text_never_an_interpreter_error(text: str) -> None:
    assert find_tool_calls(text, TOOLS) == []
    for constrained in (False, True):
        assert read_reply(text, SCHEMAS, constrained=constrained, unwrap_answer=True) == text


def test_nesting_is_read_up_to_max_depth_and_no_deeper() -> None:
    # The answer's brackets count: the call object and its arguments (JSON), or the call's parentheses (Python).
    def json_call(lists: int) -> str:
        return '{"name": "get_weather", "arguments": {"city": ' + "[" * lists + "]" * lists + "}}"

    def python_call(lists: int) -> str:
        return "get_weather(city=" + "[" * lists + "]" * lists + ")"

    assert find_tool_calls(json_call(MAX_DEPTH - 2), TOOLS) != []
    assert find_tool_calls(json_call(MAX_DEPTH - 1), TOOLS) == []
    assert find_tool_calls(python_call(MAX_DEPTH - 1), TOOLS) != []
    assert find_tool_calls(python_call(MAX_DEPTH), TOOLS) == []


def test_arguments_from_history_that_are_not_bounded_json_are_kept_as_written() -> None:
    # A native call's arguments (model output too) go back into the prompt as text in prompt mode.
    deep, nan = "[" * 2000 + "]" * 2000, '{"x": NaN}'
    calls = [FunctionCall(id="1", name="get_weather", arguments=deep), FunctionCall(id="2", name="x", arguments=nan)]
    message = AssistantMessage(content=calls, source="model")
    text = calls_text(calls)
    assert [c["arguments"] for c in _strict(text)["tool_calls"]] == [deep, nan]
    assert prompt_messages([message])[0].content == text


# --- mentions are not calls -----------------------------------------------------------------------------------

MENTIONS = [
    "you'd normally write delete_file('/home/me/thesis.tex') - but I won't do that",
    "Here is how to call it:\n```python\ndelete_file('/home/me/thesis.tex')\n```\nDon't run it.",
    'An example call is {"name": "delete_file", "arguments": {"path": "/home/me/thesis.tex"}} in JSON.',
    '```json\n{"name": "delete_file", "arguments": {"path": "/a"}}\n```\n```json\n{"name": "delete_file"}\n```',
    '{"name": "delete_file", "arguments": {"path": "/a"}} and then I will stop.',
    'I would call <tool_call>{"name": "delete_file", "arguments": {"path": "/a"}}</tool_call>',
    '<tool_call>{"name": "delete_file", "arguments": {"path": "/a"}}</tool_call> was my first idea.',
    "delete_file('/a'); get_weather('Oslo')",
]
ECHOES = [
    '{"name": "delete_file", "parameters": {"type": "object", "properties": {"path": {"type": "string"}}}}',
    '[{"name": "delete_file", "parameters": {"properties": {"path": {"type": "string"}}, "required": ["path"]}}]',
    '{"name": "delete_file", "arguments": {"type": "object", "properties": {"path": {}}}}',
    '{"name": "delete_file", "description": "Delete a file.", "parameters": {"path": "/a"}}',
]


@pytest.mark.parametrize("text", MENTIONS + ECHOES)
def test_a_mention_or_a_definition_echo_is_text(text: str) -> None:
    assert find_tool_calls(text, TOOLS) == []
    assert read_reply(text, SCHEMAS) == text


def test_a_dotted_name_is_not_the_tool() -> None:
    for text in ("evil.module.delete_file('/a')", "os.delete_file('/a')", "x.functions.delete_file('/a')"):
        assert find_tool_calls(text, TOOLS) == [], text
    # OpenAI's own namespace for tools, `functions.`, is the one prefix read.
    assert find_tool_calls("functions.delete_file('/a')", TOOLS) == [("delete_file", {"path": "/a"})]


def test_a_parameter_named_like_a_schema_keyword_is_still_an_argument() -> None:
    tools = {"make": {"type": "object", "properties": {"type": {}, "properties": {}}}}
    text = '{"name": "make", "arguments": {"type": "object", "properties": {"a": 1}}}'
    assert find_tool_calls(text, tools) == [("make", {"type": "object", "properties": {"a": 1}})]


# --- numbers --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "get_weather(city=1e999)",
        "get_weather(city=-1e999)",
        "get_weather(city=inf)",
        "get_weather(city=nan)",
        "get_weather(city=float('inf'))",
        "get_weather(city=[1, 2e400])",
        "get_weather(city=" + "9" * 5000 + ")",
        '{"name": "get_weather", "arguments": {"city": 1e999}}',
        '{"name": "get_weather", "arguments": {"city": NaN}}',
        '{"name": "get_weather", "arguments": {"city": -Infinity}}',
        '{"function": {"name": "get_weather", "arguments": "{\\"city\\": Infinity}"}}',
        '{"function": {"name": "get_weather", "arguments": "{\\"city\\": 1E400}"}}',
    ],
)
def test_a_number_no_json_can_hold_leaves_the_answer_text(text: str) -> None:
    assert find_tool_calls(text, TOOLS) == []
    assert read_reply(text, SCHEMAS) == text


def test_finite_numbers_are_read_and_written_as_strict_json() -> None:
    calls = read_reply("get_weather(city=1e308, unit=[-0.5, 10, 1_000])", SCHEMAS)
    assert isinstance(calls, list)
    assert _strict(calls[0].arguments) == {"city": 1e308, "unit": [-0.5, 10, 1000]}


# --- opting a tool out of tolerant reading ---------------------------------------------------------------------

GUARDED: list[ToolSchema] = [SCHEMAS[0], {**SCHEMAS[1], "text_calls": False}]


def test_a_tool_that_opted_out_is_never_called_from_free_text() -> None:
    for text in (
        '{"tool_calls": [{"name": "delete_file", "arguments": {"path": "/a"}}]}',
        "delete_file('/a')",
        '<tool_call>{"name": "delete_file", "arguments": {"path": "/a"}}</tool_call>',
        '[get_weather("Oslo"), delete_file("/a")]',
    ):
        assert read_reply(text, GUARDED) == text
        # A server that ignored the constraint wrote free text: still not a call.
        if not text.startswith("{"):
            assert read_reply(text, GUARDED, constrained=True) == text
    # The other tool is still read tolerantly.
    assert isinstance(read_reply("get_weather('Oslo')", GUARDED), list)


def test_a_tool_that_opted_out_is_called_from_a_reply_held_to_the_call_schema() -> None:
    text = '{"tool_calls": [{"name": "delete_file", "arguments": {"path": "/a"}}]}'
    calls = read_reply(text, GUARDED, constrained=True, turn=1)
    assert calls == [FunctionCall(id="call_1_0", name="delete_file", arguments='{"path":"/a"}')]


def test_the_opt_out_is_carried_by_tools_and_schemas_and_never_sent_to_a_provider() -> None:
    def delete_file(path: str) -> None:
        """Delete a file."""

    tool = FunctionTool(delete_file, text_calls=False)
    assert tool.schema.get("text_calls") is False
    assert "text_calls" not in FunctionTool(delete_file).schema
    schema = tool_schema_of(tool)
    assert schema.get("text_calls") is False
    assert "text_calls" not in tool_schema_of(FunctionTool(delete_file))
    assert "text_calls" not in json.dumps(chat_tools([schema]))
    with pytest.raises(ConfigurationError, match="text_calls must be True or False, got 'no'"):
        tool_schema_of({"name": "delete_file", "text_calls": "no"})
    with pytest.raises(ConfigurationError, match="text_calls"):
        FunctionTool(delete_file, text_calls=0)  # type: ignore[arg-type]


# --- property-based ---------------------------------------------------------------------------------------

FUZZ = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])

FRAGMENTS = st.sampled_from(
    [
        "get_weather",
        "delete_file",
        "functions.",
        "evil.",
        "(",
        ")",
        "[",
        "]",
        "{",
        "}",
        ",",
        ":",
        "=",
        ".",
        '"',
        "'",
        "'''",
        "\\",
        "\\u",
        "\\N{",
        "r'",
        " ",
        "\n",
        "city=",
        "1",
        "-",
        "1e999",
        "1.5e3",
        "NaN",
        "Infinity",
        "true",
        "None",
        '"name": "get_weather"',
        '"arguments": ',
        '"parameters": ',
        '"tool_calls": ',
        '"type": "object"',
        '"function": ',
        "<tool_call>",
        "</tool_call>",
        "```",
        "```json\n",
        "\ud800",
        "'\ud800'",
        "\x00",
        "é",
    ]
)
ADVERSARIAL = st.lists(st.one_of(FRAGMENTS, st.text(max_size=4)), max_size=80).map("".join)
DEEP = st.builds(
    lambda prefix, count, middle, suffix, count_after: prefix * count + middle + suffix * count_after,
    st.sampled_from(["[", '{"a":', "(", "get_weather(", "(1)", "-", "a.", "<tool_call>", "```", "[get_weather(x),"]),
    st.integers(0, 2500),
    ADVERSARIAL,
    st.sampled_from(["]", "}", ")", "(1)", ""]),
    st.integers(0, 2500),
)
ANSWERS = st.one_of(st.text(), ADVERSARIAL, DEEP)


def _check_reply(text: str, reply: list[FunctionCall] | str) -> None:
    if isinstance(reply, str):
        assert reply == text or json.loads(text).get("answer") == reply
        return
    assert reply and all(call.name in TOOLS and isinstance(_strict(call.arguments), dict) for call in reply)


@FUZZ
@given(ANSWERS)
def test_any_answer_is_text_or_calls_never_an_exception(text: str) -> None:
    calls = find_tool_calls(text, TOOLS)
    assert isinstance(calls, list)
    for name, arguments in calls:
        assert name in TOOLS and isinstance(arguments, dict)
        _strict(json.dumps(arguments, allow_nan=False))
    for constrained in (False, True):
        for unwrap in (False, True):
            _check_reply(text, read_reply(text, SCHEMAS, constrained=constrained, unwrap_answer=unwrap))


SAFE_TEXT = st.text(st.characters(exclude_categories=["Cs"]), max_size=12)
LITERALS = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(10**30), 10**30)
    | st.floats(allow_nan=False, allow_infinity=False)
    | SAFE_TEXT,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(SAFE_TEXT, children, max_size=4),
    max_leaves=20,
)
ARGUMENTS = st.fixed_dictionaries({"city": LITERALS}, optional={"unit": LITERALS})


def _written(style: str, name: str, arguments: dict[str, Any]) -> str:
    as_json = json.dumps({"name": name, "arguments": arguments})
    if style == "json":
        return as_json
    if style == "tool_calls":
        return json.dumps({"tool_calls": [{"name": name, "arguments": arguments}]}, indent=2)
    if style == "openai":
        return json.dumps([{"type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}}])
    if style == "tagged":
        return f"<tool_call>\n{as_json}\n</tool_call>"
    if style == "fenced":
        return f"```json\n{as_json}\n```"
    if style == "python keywords":
        return f"{name}(" + ", ".join(f"{key}={value!r}" for key, value in arguments.items()) + ")"
    # Positional: in the schema's property order.
    return f"{name}(" + ", ".join(repr(arguments[key]) for key in ("city", "unit") if key in arguments) + ")"


@FUZZ
@given(
    ARGUMENTS,
    st.sampled_from(["json", "tool_calls", "openai", "tagged", "fenced", "python keywords", "python positional"]),
    st.sampled_from(["", " ", "\n\n"]),
)
def test_a_well_formed_call_reads_back_exactly(arguments: dict[str, Any], style: str, space: str) -> None:
    text = space + _written(style, "get_weather", arguments) + space
    assert find_tool_calls(text, TOOLS) == [("get_weather", arguments)]
    calls = read_reply(text, SCHEMAS)
    assert isinstance(calls, list) and _strict(calls[0].arguments) == arguments


@FUZZ
@given(
    ARGUMENTS,
    st.sampled_from(["json", "tool_calls", "openai", "tagged", "fenced", "python keywords", "python positional"]),
    st.sampled_from(["Sure! ", "You would write ", "Example:\n", "I won't run "]),
    st.sampled_from(["", " but I won't.", "\nThat would delete it.", " - then stop."]),
)
def test_a_call_written_inside_prose_is_text(arguments: dict[str, Any], style: str, before: str, after: str) -> None:
    text = before + _written(style, "get_weather", arguments) + after
    assert find_tool_calls(text, TOOLS) == []
    assert read_reply(text, SCHEMAS) == text
