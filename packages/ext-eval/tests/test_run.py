"""Runs over a real OpenAI client on ext-testing's loopback OpenAI server, with scripted replies whose right,
wrong and malformed counts are known exactly."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import genai_prices
import pytest

from ext.core import ConfigurationError
from ext.eval import CaseResult, EvalTarget, load_dataset, load_report, percentile, run_eval, summarize
from ext.models.openai import OpenAIChatCompletionClient
from ext.testing.servers import Fault, OpenAIServer, Reply, ToolCallSpec

KEY = "sk-eval-test"
TIME = {
    "name": "local_time",
    "description": "The local time in a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
}


def paris(category: str = "simple") -> list[dict[str, Any]]:
    return [{"name": "local_time", "arguments": {"city": ["Paris"]}}]


CASES: list[dict[str, Any]] = [
    {"id": "s1", "category": "simple", "expected": paris()},
    {"id": "s2", "category": "simple", "expected": paris()},
    {"id": "s3", "category": "simple", "expected": paris()},
    {
        "id": "p1",
        "category": "parallel",
        "expected": [*paris(), {"name": "local_time", "arguments": {"city": ["Oslo"]}}],
    },
    {"id": "i1", "category": "irrelevance", "expected": {"no_call": True}},
    {"id": "i2", "category": "irrelevance", "expected": {"no_call": True}},
    {"id": "a1", "category": "answer", "expected": {"contains": ["Paris"]}, "tools": []},
    {"id": "s4", "category": "simple", "expected": paris()},
]
# In the order of CASES (the run below has concurrency 1, so the server answers them in that order).
REPLIES: list[Reply | Fault] = [
    Reply(tool_calls=[ToolCallSpec("local_time", {"city": "paris"})], prompt_tokens=11, completion_tokens=3),
    Reply(tool_calls=[ToolCallSpec("local_time", {"city": "Lyon"})], prompt_tokens=12, completion_tokens=4),
    Reply(tool_calls=[ToolCallSpec("local_time", '{"city": "Paris"')], prompt_tokens=13, completion_tokens=5),
    Reply(
        tool_calls=[ToolCallSpec("local_time", {"city": "Oslo"}), ToolCallSpec("local_time", {"city": "Paris"})],
        prompt_tokens=14,
        completion_tokens=6,
    ),
    Reply(text="I have no tool for that.", prompt_tokens=15, completion_tokens=7),
    Reply(tool_calls=[ToolCallSpec("local_time", {"city": "Rome"})], prompt_tokens=16, completion_tokens=8),
    Reply(text="The capital of France is Paris.", prompt_tokens=17, completion_tokens=9),
    Fault("server_error"),
]


def write_dataset(tmp_path: Path, cases: list[dict[str, Any]]) -> Path:
    path = tmp_path / "scripted.jsonl"
    lines = [
        json.dumps({"messages": [{"role": "user", "content": f"question {c['id']}"}], "tools": [TIME], **c})
        for c in cases
    ]
    path.write_text("\n".join(lines) + "\n")
    return path


def openai_client(server: OpenAIServer) -> OpenAIChatCompletionClient:
    return OpenAIChatCompletionClient(
        "gpt-4o-mini", base_url=server.base_url + "/v1", api_key=KEY, bundled_encodings=False, max_retries=0
    )


async def test_scripted_replies_give_exactly_the_known_counts(tmp_path: Path) -> None:
    dataset = load_dataset(write_dataset(tmp_path, CASES))
    seen: list[str] = []
    async with OpenAIServer(api_key=KEY) as server:
        server.enqueue(*REPLIES)
        async with openai_client(server) as client:
            report = await run_eval(
                dataset,
                [EvalTarget("scripted", client)],
                concurrency=1,
                on_result=lambda name, result: seen.append(f"{name}/{result.id}"),
            )
        # What went on the wire: each case's question with its tools (none for the answer case).
        bodies: list[dict[str, Any]] = [r.json for r in server.requests if isinstance(r.json, dict)]
    assert [b["messages"][-1]["content"] for b in bodies] == [f"question {c['id']}" for c in CASES]
    assert [[t["function"]["name"] for t in b.get("tools", [])] for b in bodies] == [["local_time"]] * 6 + [
        [],
        ["local_time"],
    ]

    assert seen == [f"scripted/{c['id']}" for c in CASES]
    only = report.config("scripted")
    by_id = {r.id: r for r in only.results}
    assert {i for i, r in by_id.items() if r.correct} == {"s1", "p1", "i1", "a1"}
    assert {i for i, r in by_id.items() if r.malformed} == {"s3"}
    assert by_id["s4"].error is not None and "InternalServerError" in by_id["s4"].error
    assert by_id["s2"].reason == "local_time.city: 'Lyon' is not among the allowed values ['Paris']"
    assert [c.name for c in by_id["p1"].calls] == ["local_time", "local_time"]
    assert by_id["a1"].answer == "The capital of France is Paris."

    overall = only.overall
    assert (overall.cases, overall.correct, overall.malformed, overall.errors) == (8, 4, 1, 1)
    assert overall.accuracy == 4 / 8
    assert overall.malformed_rate == 1 / 8
    assert (overall.prompt_tokens, overall.completion_tokens) == (
        11 + 12 + 13 + 14 + 15 + 16 + 17,
        3 + 4 + 5 + 6 + 7 + 8 + 9,
    )
    # ext-eval[cost]: each answered case priced from the genai-prices table (gpt-4o-mini), the failed one not
    assert by_id["s4"].cost_usd is None
    priced = [r for r in only.results if r.error is None]
    for result in priced:
        usage = genai_prices.Usage(input_tokens=result.prompt_tokens, output_tokens=result.completion_tokens)
        assert result.cost_usd == float(genai_prices.calc_price(usage, "gpt-4o-mini").total_price)
    assert overall.cost_usd == pytest.approx(sum(r.cost_usd or 0.0 for r in priced))
    simple = only.categories["simple"]
    assert (simple.cases, simple.correct, simple.malformed) == (4, 1, 1)
    assert (only.categories["irrelevance"].correct, only.categories["parallel"].correct) == (1, 1)
    latencies = [r.latency_s for r in only.results]
    assert overall.latency_p50_s == sorted(latencies)[3]  # nearest rank: ceil(0.5 * 8) = 4th
    assert overall.latency_p99_s == max(latencies)

    out = tmp_path / "report.json"
    report.write_json(out)
    assert load_report(out) == report


async def test_two_configurations_side_by_side_with_concurrency(tmp_path: Path) -> None:
    cases = [{"id": f"s{i}", "category": "simple", "expected": paris()} for i in range(6)]
    dataset = load_dataset(write_dataset(tmp_path, cases))
    right = Reply(tool_calls=[ToolCallSpec("local_time", {"city": "Paris"})])
    wrong = Reply(text="no idea")
    async with OpenAIServer(api_key=KEY, default=right) as good, OpenAIServer(api_key=KEY, default=wrong) as bad:
        async with openai_client(good) as a, openai_client(bad) as b:
            report = await run_eval(dataset, [EvalTarget("good", a), EvalTarget("bad", b)], concurrency=3)
        assert (len(good.requests), len(bad.requests)) == (6, 6)
    assert [c.name for c in report.configs] == ["good", "bad"]
    rows = {row.category: row for row in report.compare()}
    assert set(rows) == {"simple", "overall"}
    assert (rows["overall"].accuracy_a, rows["overall"].accuracy_b, rows["overall"].accuracy_delta) == (1.0, 0.0, -1.0)
    assert rows["simple"].malformed_rate_delta == 0.0


async def test_bad_run_arguments_fail_before_any_call(tmp_path: Path) -> None:
    dataset = load_dataset(write_dataset(tmp_path, CASES[:1]))
    async with OpenAIServer(api_key=KEY) as server:
        async with openai_client(server) as client:
            with pytest.raises(ValueError, match="concurrency must be at least 1"):
                await run_eval(dataset, [EvalTarget("x", client)], concurrency=0)
            with pytest.raises(ValueError, match="two configurations are named 'x'"):
                await run_eval(dataset, [EvalTarget("x", client), EvalTarget("x", client)])
            with pytest.raises(ConfigurationError, match="PROVIDER:MODEL"):
                await run_eval(dataset, ["no-colon"])
        assert server.requests == []


async def test_a_pipeline_file_and_a_provider_spec_as_configurations(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    dataset = load_dataset(write_dataset(tmp_path, CASES[:1]))
    right = Reply(tool_calls=[ToolCallSpec("local_time", {"city": "Paris"})])
    async with OpenAIServer(api_key=KEY, default=right) as server:
        monkeypatch.setenv("EVAL_TEST_KEY", KEY)
        monkeypatch.setenv("OPENAI_API_KEY", KEY)
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url + "/v1")
        options = {"endpoint": server.base_url + "/v1", "default_model": "gpt-4o-mini", "api_key_env": "EVAL_TEST_KEY"}
        pipeline = tmp_path / "pipeline.json"
        pipeline.write_text(json.dumps({"client": {"provider": "openai", "options": options}}))
        report = await run_eval(dataset, [str(pipeline), "openai:gpt-4.1-mini"])
        models = [r.json["model"] for r in server.requests if isinstance(r.json, dict)]
    assert [c.name for c in report.configs] == ["pipeline", "openai:gpt-4.1-mini"]
    assert [c.overall.correct for c in report.configs] == [1, 1]
    assert models == ["gpt-4o-mini", "gpt-4.1-mini"]


def test_summary_figures_from_hand_made_results() -> None:
    results = [
        CaseResult(id=str(i), category="simple", correct=i < 3, malformed=i == 4, latency_s=float(i), prompt_tokens=2)
        for i in range(1, 11)
    ]
    summary = summarize(results)
    assert (summary.correct, summary.malformed, summary.accuracy, summary.malformed_rate) == (2, 1, 0.2, 0.1)
    assert (summary.latency_p50_s, summary.latency_p99_s, summary.prompt_tokens) == (5.0, 10.0, 20)
    assert percentile([], 50) == 0.0
    assert summarize([]).accuracy == 0.0
