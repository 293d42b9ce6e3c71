"""Datasets: the JSONL format, its errors (file:line and field), and the datasets ext-eval ships."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from ext.core import AssistantMessage, SystemMessage, UserMessage
from ext.eval import AnswerCheck, DatasetError, NoCall, load_dataset, shipped_dataset_path

TOOL = {"name": "local_time", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}
GOOD: dict[str, Any] = {
    "id": "a",
    "category": "simple",
    "messages": [{"role": "user", "content": "What time is it in Paris?"}],
    "tools": [TOOL],
    "expected": [{"name": "local_time", "arguments": {"city": ["Paris"]}}],
}


def write(tmp_path: Path, *cases: Any) -> Path:
    path = tmp_path / "set.jsonl"
    path.write_text("\n".join(c if isinstance(c, str) else json.dumps(c) for c in cases) + "\n")
    return path


def test_plain_and_ext_messages_and_the_three_forms_of_expected(tmp_path: Path) -> None:
    ext_messages = [
        SystemMessage(content="Be brief.").model_dump(mode="json"),
        UserMessage(content="hi", source="user").model_dump(mode="json"),
    ]
    dataset = load_dataset(
        write(
            tmp_path,
            GOOD,
            "",
            {**GOOD, "id": "b", "category": "irrelevance", "expected": {"no_call": True}},
            {**GOOD, "id": "c", "messages": ext_messages, "tools": [], "expected": {"contains": ["x"]}},
            {**GOOD, "id": "d", "messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}]},
        )
    )
    assert [c.id for c in dataset] == ["a", "b", "c", "d"]
    assert dataset.name == "set"
    assert isinstance(dataset.cases[0].messages[0], UserMessage)
    assert isinstance(dataset.cases[1].expected, NoCall)
    assert isinstance(dataset.cases[2].expected, AnswerCheck)
    assert isinstance(dataset.cases[2].messages[0], SystemMessage)
    assert isinstance(dataset.cases[3].messages[1], AssistantMessage)
    assert [c.id for c in dataset.select(categories=["irrelevance"])] == ["b"]
    assert len(dataset.select(limit=2)) == 2


@pytest.mark.parametrize(
    ("line", "error"),
    [
        ("{not json", ":2: not valid JSON"),
        ("[1]", ":2: expected a JSON object, got list"),
        ({**GOOD, "id": "a"}, ":2: id: 'a' is already used on line 1"),
        ({**GOOD, "id": "x", "category": "Simple"}, ":2: category: String should match pattern"),
        ({**GOOD, "id": "x", "messages": [{"role": "robot", "content": "q"}]}, "messages: item 0: role must be"),
        ({**GOOD, "id": "x", "expected": [{"name": "clock", "arguments": {}}]}, ":2: expected.0.name: 'clock' is not"),
        ({**GOOD, "id": "x", "expected": [{"name": "local_time", "arguments": {"city": []}}]}, "arguments.city: exp"),
        ({**GOOD, "id": "x", "expected": {"no_call": False}}, ":2: expected.no_call: Input should be True"),
        ({**GOOD, "id": "x", "expected": {"regex": "("}}, ":2: expected: regex: not a valid regular expression"),
        ({**GOOD, "id": "x", "expected": []}, ':2: expected: an empty list; write {"no_call": true}'),
        ({**GOOD, "id": "x", "tools": [{"name": "a.b"}]}, ":2: tools.0.name: String should match pattern"),
        ({**GOOD, "id": "x", "messages": [{"role": "user", "content": 3}]}, ":2: messages.0.content"),
        ({**GOOD, "id": "x", "surprise": 1}, ":2: surprise: Extra inputs are not permitted"),
    ],
)
def test_a_bad_line_names_the_file_the_line_and_the_field(tmp_path: Path, line: Any, error: str) -> None:
    path = write(tmp_path, GOOD, line)
    with pytest.raises(DatasetError) as caught:
        load_dataset(path)
    assert str(caught.value).startswith(str(path) + ":2:")
    assert error in str(caught.value)


@pytest.mark.parametrize("separator", ["\u2028", "\u2029", "\u0085"])
def test_lines_split_at_line_feeds_only(tmp_path: Path, separator: str) -> None:
    # U+2028, U+2029 and U+0085 may stand unescaped inside a JSON string; str.splitlines() cut the line there.
    question = f"What time is it{separator}in Paris?"
    holding = {**GOOD, "messages": [{"role": "user", "content": question}]}
    path = tmp_path / "set.jsonl"
    text = json.dumps(holding, ensure_ascii=False) + "\r\n" + json.dumps({**GOOD, "id": "b"}) + "\n\n{bad\n"
    path.write_bytes(text.encode("utf-8"))
    with pytest.raises(DatasetError) as caught:
        load_dataset(path)
    assert str(caught.value).startswith(f"{path}:4: not valid JSON")
    path.write_bytes(text.removesuffix("{bad\n").encode("utf-8"))
    dataset = load_dataset(path)
    assert [c.id for c in dataset] == ["a", "b"]
    assert dataset.cases[0].messages[0].content == question


def test_a_line_that_is_not_utf8_or_too_deep_is_named(tmp_path: Path) -> None:
    path = tmp_path / "set.jsonl"
    path.write_bytes(json.dumps(GOOD).encode() + b'\n"caf\xe9"\n')
    with pytest.raises(DatasetError, match=r"set.jsonl:2: not UTF-8 \(byte 0xe9\)"):
        load_dataset(path)
    path.write_text(json.dumps(GOOD) + "\n" + "[" * 100_000 + "\n")
    with pytest.raises(DatasetError, match=r"set.jsonl:2: not valid JSON \(RecursionError"):
        load_dataset(path)


def test_an_unknown_category_or_a_missing_file_is_a_clear_error(tmp_path: Path) -> None:
    dataset = load_dataset(write(tmp_path, GOOD))
    with pytest.raises(ValueError, match="category 'parallel' is not in set"):
        dataset.select(categories=["parallel"])
    with pytest.raises(DatasetError, match="cannot read the dataset"):
        load_dataset(tmp_path / "missing.jsonl")


def test_the_shipped_datasets_load_with_their_attribution() -> None:
    bfcl = load_dataset("bfcl")
    assert Counter(c.category for c in bfcl) == {"simple": 20, "multiple": 10, "parallel": 10, "irrelevance": 10}
    assert all(len(c.expected) >= 2 for c in bfcl if c.category == "parallel" and isinstance(c.expected, list))
    data = shipped_dataset_path("bfcl").parent
    assert "Apache License" in (data / "LICENSE-BFCL.txt").read_text()
    assert "Berkeley Function Calling Leaderboard" in (data / "NOTICE-BFCL.md").read_text()
    demo = load_dataset("demo")
    assert len(demo) == 10
    assert {t.name for c in demo for t in c.tools} == {"local_time", "get_weather"}


async def test_the_readme_example_runs_as_written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from ext.models.openai import OpenAIChatCompletionClient
    from ext.testing.readme import python_example
    from ext.testing.servers import OpenAIServer, Reply, ToolCallSpec

    code = python_example(Path(__file__).parent.parent / "README.md", "run_eval(")
    namespace: dict[str, Any] = {}
    exec(compile(code, "README.md", "exec"), namespace)
    monkeypatch.chdir(tmp_path)
    right = Reply(tool_calls=[ToolCallSpec("local_time", {"city": "Paris"})])
    async with OpenAIServer(api_key="sk-readme", default=right) as server:
        client = OpenAIChatCompletionClient(
            "gpt-4o-mini", base_url=server.base_url + "/v1", api_key="sk-readme", bundled_encodings=False
        )
        async with client:
            await namespace["main"](client)
    report = json.loads((tmp_path / "report.json").read_text())
    # The selection: time in Paris (right), time in Tokyo (wrong city), weather in Oslo (local_time is not among
    # that case's tools: malformed), a joke (irrelevance: any call is wrong).
    assert [r["correct"] for r in report["configs"][0]["results"]] == [True, False, False, False]
