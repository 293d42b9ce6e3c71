"""Tolerant reading of tool calls written as text (`find_tool_calls`, `read_reply`).

The `SMOLLM2_*` answers were captured from SmolLM2-135M-Instruct (Q4_1, the embedded model) at temperature 0 with
the tool system text of `tool_system_text` and no grammar: what a small model writes when nothing holds it to
the call JSON. The other shapes are what other small models write (Hermes/Qwen tags, Llama 3.2's Python-like
calls, fenced JSON)."""

from __future__ import annotations

import json

from ext.core import FunctionCall, ToolSchema, find_tool_calls, read_reply

WEATHER = {
    "type": "object",
    "properties": {"city": {"type": "string"}, "unit": {"type": "string", "enum": ["c", "f"]}},
    "required": ["city"],
}
TIME = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
TOOLS = {"get_weather": WEATHER, "local_time": TIME}
SCHEMAS: list[ToolSchema] = [
    {"name": "get_weather", "description": "The current weather in a city.", "parameters": WEATHER},
    {"name": "local_time", "description": "The local time in a city.", "parameters": TIME},
]

# Real SmolLM2-135M answers (see the module docstring).
SMOLLM2_PROSE = "Tokyo is currently 9:30 AM Japan Time."
SMOLLM2_CODE = (
    "Here's how you can call the `get_weather` function using `json.dumps()`:\n\n```python\nimport json\n\n"
    'def get_weather_for_london():\n    return json.dumps({"city": "London"})\n\ndef main():\n    return main()\n'
    "```\n\nThis will return a JSON object with the desired data."
)
SMOLLM2_ECHO = (
    'The local time Tokyo is a JSON Schema of the arguments:\n{\n  "tool_calls": [\n    {\n      "name": '
    '"get_weather",\n      "description": "The current weather in a city.",\n      "parameters": {\n        "type": '
    '"object",\n        "properties": {\n          "city": {\n            "type": "string",\n            "enum": '
    '["c", "f"]\n          }\n        },\n        "required": ["city"]\n      }\n    },\n    {\n      "name": '
    '"get_weather",\n      "description": "The current weather in a city'
)
SMOLLM2_BARE_ARGUMENTS = 'The current weather in Madrid is:\n{\n  "city": "Madrid",\n  "type": "c",\n  "unit": "f"'


def test_the_exact_call_json() -> None:
    text = '{"tool_calls": [{"name": "get_weather", "arguments": {"city": "Paris"}}]}'
    assert find_tool_calls(text, TOOLS) == [("get_weather", {"city": "Paris"})]


def test_a_call_object_with_the_parameters_key() -> None:
    text = '  {"name": "local_time", "parameters": {"city": "Tokyo"}}\n'
    assert find_tool_calls(text, TOOLS) == [("local_time", {"city": "Tokyo"})]


def test_a_fenced_block_that_is_the_whole_answer() -> None:
    text = '```json\n{"name": "get_weather", "arguments": {"city": "Oslo", "unit": "c"}}\n```\n'
    assert find_tool_calls(text, TOOLS) == [("get_weather", {"city": "Oslo", "unit": "c"})]
    assert find_tool_calls('```\nlocal_time("Oslo")\n```', TOOLS) == [("local_time", {"city": "Oslo"})]
    assert find_tool_calls('```{"name": "local_time", "arguments": {}}```', TOOLS) == [("local_time", {})]


def test_hermes_tags_several_and_an_unclosed_last_one() -> None:
    text = (
        '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Berlin"}}\n</tool_call>\n'
        '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Rome"}}'
    )
    assert find_tool_calls(text, TOOLS) == [("get_weather", {"city": "Berlin"}), ("get_weather", {"city": "Rome"})]


def test_openai_shape_with_arguments_as_json_text() -> None:
    text = json.dumps([{"type": "function", "function": {"name": "local_time", "arguments": '{"city": "Lima"}'}}])
    assert find_tool_calls(text, TOOLS) == [("local_time", {"city": "Lima"})]


def test_python_like_calls_keyword_positional_and_a_list() -> None:
    assert find_tool_calls('get_weather(city="Paris", unit="c")', TOOLS) == [
        ("get_weather", {"city": "Paris", "unit": "c"})
    ]
    assert find_tool_calls("local_time('Tokyo')", TOOLS) == [("local_time", {"city": "Tokyo"})]
    assert find_tool_calls('[get_weather(city="A"), local_time(city="B")]', TOOLS) == [
        ("get_weather", {"city": "A"}),
        ("local_time", {"city": "B"}),
    ]
    assert find_tool_calls('functions.local_time(city="Quito")', TOOLS) == [("local_time", {"city": "Quito"})]


def test_python_like_calls_are_read_never_run() -> None:
    # Not a literal: refused (ast.literal_eval), so nothing is evaluated.
    assert find_tool_calls('get_weather(city=__import__("os").getcwd())', TOOLS) == []
    assert find_tool_calls("get_weather(**{'city': 'x'})", TOOLS) == []


def test_only_offered_tool_names_become_calls() -> None:
    assert find_tool_calls('{"name": "delete_everything", "arguments": {}}', TOOLS) == []
    assert find_tool_calls('send_mail(to="x")', TOOLS) == []
    # One entry that is not a call of an offered tool makes the whole answer text (it was: the other calls kept).
    mixed = '[{"name": "nope", "arguments": {}}, {"name": "local_time", "arguments": {"city": "Oslo"}}]'
    assert find_tool_calls(mixed, TOOLS) == []
    assert find_tool_calls('[local_time(city="Oslo"), send_mail(to="x")]', TOOLS) == []


def test_real_small_model_answers_that_hold_no_call_stay_text() -> None:
    for text in (SMOLLM2_PROSE, SMOLLM2_CODE, SMOLLM2_BARE_ARGUMENTS):
        assert find_tool_calls(text, TOOLS) == [], text
        assert read_reply(text, SCHEMAS) == text


def test_a_tool_definition_echoed_from_the_prompt_is_not_a_call() -> None:
    # SmolLM2 copied the tool list (names with "parameters" holding the schema) and stopped mid-way.
    assert find_tool_calls(SMOLLM2_ECHO, TOOLS) == []


def test_arguments_that_are_not_an_object_are_not_a_call() -> None:
    assert find_tool_calls('{"name": "get_weather", "arguments": "Paris"}', TOOLS) == []
    assert find_tool_calls('{"name": "get_weather", "arguments": [1]}', TOOLS) == []


def test_read_reply_gives_function_calls_with_compact_arguments_and_ids() -> None:
    calls = read_reply(
        '<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}</tool_call>', SCHEMAS, turn=4
    )
    assert calls == [FunctionCall(id="call_4_0", name="get_weather", arguments='{"city":"Paris"}')]
    random = read_reply('local_time(city="Oslo")', SCHEMAS)
    assert isinstance(random, list) and random[0].id.startswith("call_") and len(random[0].id) == 29


def test_read_reply_unwraps_a_plain_answer_only_when_asked() -> None:
    text = '{"answer": "Paris is the capital of France."}'
    assert read_reply(text, SCHEMAS, unwrap_answer=True) == "Paris is the capital of France."
    assert read_reply(text, SCHEMAS) == text
    assert read_reply('{"answer": 3}', SCHEMAS, unwrap_answer=True) == '{"answer": 3}'


def test_constrained_json_output_next_to_tools_stays_text() -> None:
    # A structured-output reply that happens to look like a call is the JSON the caller asked for.
    text = '{"name": "get_weather", "arguments": {"city": "Paris"}}'
    assert read_reply(text, SCHEMAS, constrained=True) == text
    assert isinstance(read_reply(text, SCHEMAS), list)  # without a constraint it is read as a call
    calls = read_reply(
        '{"tool_calls": [{"name": "local_time", "arguments": {"city": "Oslo"}}]}', SCHEMAS, constrained=True
    )
    assert isinstance(calls, list) and calls[0].name == "local_time"
    # A server that ignored the constraint: not JSON, read tolerantly.
    assert isinstance(
        read_reply('<tool_call>{"name": "local_time", "arguments": {}}</tool_call>', SCHEMAS, constrained=True), list
    )
