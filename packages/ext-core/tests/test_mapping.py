from __future__ import annotations

import pytest
from pydantic import BaseModel

from ext.core import (
    AssistantMessage,
    ConfigurationError,
    FunctionCall,
    FunctionExecutionResult,
    FunctionExecutionResultMessage,
    Image,
    OutputParseError,
    SystemMessage,
    ToolArgumentsError,
    UserMessage,
    arguments_to_json,
    check_tool_name,
    estimate_tokens,
    normalize_finish_reason,
    normalize_parameters,
    parse_json_output,
    parse_tool_arguments,
    split_system_messages,
)


def _conversation() -> list:  # type: ignore[type-arg]
    return [
        SystemMessage(content="A"),
        SystemMessage(content="B"),
        UserMessage(content="hi"),
        SystemMessage(content="C"),
        AssistantMessage(content="yo"),
    ]


def test_system_hoist_joins_all_in_order() -> None:
    system, rest = split_system_messages(_conversation(), "hoist")
    assert system == "A\n\nB\n\nC"
    assert [type(m).__name__ for m in rest] == ["UserMessage", "AssistantMessage"]


def test_system_leading_then_user_keeps_position() -> None:
    system, rest = split_system_messages(_conversation(), "leading_then_user")
    assert system == "A\n\nB"
    assert isinstance(rest[1], UserMessage) and rest[1].content == "C" and rest[1].source == "system"


def test_system_keep_and_none() -> None:
    assert split_system_messages(_conversation(), "keep") == (None, _conversation())
    assert split_system_messages([UserMessage(content="x")]) == (None, [UserMessage(content="x")])


def test_tool_name_rules() -> None:
    assert check_tool_name("get_weather-2") == "get_weather-2"
    for bad in ["", "has space", "x" * 65, "dots.no"]:
        with pytest.raises(ConfigurationError, match="tool name"):
            check_tool_name(bad)


def test_normalize_parameters_inlines_refs_and_drops_titles_not_properties() -> None:
    class Inner(BaseModel):
        title: str

    class Outer(BaseModel):
        inner: Inner
        items: list[Inner]

    out = normalize_parameters(Outer.model_json_schema())
    assert "$defs" not in out
    assert out["properties"]["inner"]["properties"]["title"] == {"type": "string"}
    assert out["properties"]["items"]["items"]["type"] == "object"
    assert "title" not in out
    assert normalize_parameters(None) == {"type": "object", "properties": {}}


def test_normalize_parameters_keeps_recursive_refs() -> None:
    class Node(BaseModel):
        children: list[Node] = []

    out = normalize_parameters(Node.model_json_schema())
    assert out["properties"]["children"]["items"] == {"$ref": "#/$defs/Node"}
    assert "Node" in out["$defs"]


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ('{"a": 1}', {"a": 1}),
        ({"a": 1}, {"a": 1}),
        ('"{\\"a\\": 1}"', {"a": 1}),
        ("", {}),
        ("  ", {}),
        (None, {}),
        ("null", {}),
    ],
)
def test_parse_tool_arguments_variants(raw: object, expected: dict[str, int]) -> None:
    assert parse_tool_arguments(raw) == expected  # type: ignore[arg-type]


def test_parse_tool_arguments_errors_name_the_tool() -> None:
    with pytest.raises(ToolArgumentsError, match=r"'add'.*not valid JSON"):
        parse_tool_arguments("{a:", tool="add")
    with pytest.raises(ToolArgumentsError, match="JSON object"):
        parse_tool_arguments("[1]", tool="add")


def test_parse_tool_arguments_refuses_hostile_model_output_without_an_interpreter_error() -> None:
    # Model output is untrusted: deep nesting and huge integers become ToolArgumentsError (the tool loop turns it
    # into an error result the model sees), never RecursionError or a bare ValueError.
    with pytest.raises(ToolArgumentsError, match="'add' are nested too deeply"):
        parse_tool_arguments('{"a": ' + "[" * 200_000, tool="add")
    with pytest.raises(ToolArgumentsError, match="'add' cannot be read"):
        parse_tool_arguments('{"a": ' + "9" * 5_000 + "}", tool="add")


def test_arguments_to_json() -> None:
    assert arguments_to_json({"a": "é"}) == '{"a": "é"}'
    assert arguments_to_json(None) == "{}"
    assert arguments_to_json("") == "{}"
    assert arguments_to_json('{"x":1}') == '{"x":1}'


@pytest.mark.parametrize(
    ("raw", "tools", "expected"),
    [
        ("stop", False, "stop"),
        ("end_turn", False, "stop"),
        ("max_tokens", False, "length"),
        ("length", False, "length"),
        ("tool_use", True, "function_calls"),
        ("tool_calls", True, "function_calls"),
        ("stop", True, "function_calls"),
        ("content_filter", False, "content_filter"),
        ("refusal", False, "content_filter"),
        ("weird", False, "unknown"),
        (None, False, "stop"),
        (None, True, "function_calls"),
    ],
)
def test_finish_reasons(raw: str | None, tools: bool, expected: str) -> None:
    assert normalize_finish_reason(raw, has_tool_calls=tools) == expected


class Answer(BaseModel):
    city: str
    population: int


def test_parse_json_output() -> None:
    assert parse_json_output('{"a": [1]}', True) == {"a": [1]}
    assert parse_json_output('```json\n{"a": 1}\n```', True) == {"a": 1}
    parsed = parse_json_output('{"city": "Oslo", "population": 700000}', Answer)
    assert parsed == Answer(city="Oslo", population=700000)


def test_parse_json_output_errors_are_clear() -> None:
    with pytest.raises(OutputParseError, match="not valid JSON") as info:
        parse_json_output("Sure! {", True)
    assert info.value.text == "Sure! {"
    with pytest.raises(OutputParseError, match=r"Answer.*population"):
        parse_json_output('{"city": "Oslo"}', Answer)
    with pytest.raises(OutputParseError, match="cut off"):
        parse_json_output('{"city": ', Answer, finish_reason="length")


def test_estimate_tokens_counts_everything() -> None:
    base = estimate_tokens([UserMessage(content="x" * 40)])
    assert base == 4 + 14  # one token per 3 letters, rounded up
    with_image = estimate_tokens([UserMessage(content=["x" * 40, Image.from_bytes(b"\x89PNG\r\n\x1a\n")])])
    assert with_image == base + 85
    calls = estimate_tokens(
        [
            AssistantMessage(content=[FunctionCall(id="1", name="abcd", arguments="{}" * 2)]),
            FunctionExecutionResultMessage(content=[FunctionExecutionResult(call_id="1", name="abcd", content="r")]),
        ],
        [{"name": "t"}],
    )
    assert calls > 8
