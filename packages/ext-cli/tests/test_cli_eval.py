"""`ext eval` end to end: a real `ext` process, a tiny dataset, two configurations on the loopback OpenAI server."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ext_cli_support import run_ext

from ext.testing.servers import OpenAIServer, Reply, ToolCallSpec

TIME = {
    "name": "local_time",
    "description": "The local time in a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
}
CASES: list[dict[str, Any]] = [
    {"id": "t1", "category": "simple", "expected": [{"name": "local_time", "arguments": {"city": ["Paris"]}}]},
    {"id": "t2", "category": "simple", "expected": [{"name": "local_time", "arguments": {"city": ["Oslo"]}}]},
    {"id": "t3", "category": "irrelevance", "expected": {"no_call": True}},
]


def tiny_dataset(tmp_path: Path) -> Path:
    path = tmp_path / "tiny.jsonl"
    rows = [{"messages": [{"role": "user", "content": f"q {c['id']}"}], "tools": [TIME], **c} for c in CASES]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


async def test_eval_compares_two_configurations_and_writes_json_and_html(
    server: OpenAIServer, openai_env: dict[str, str], tmp_path: Path
) -> None:
    server.enqueue(
        # openai:gpt-4o-mini, case by case (concurrency 1): right, malformed, right.
        Reply(tool_calls=[ToolCallSpec("local_time", {"city": "Paris"})]),
        Reply(tool_calls=[ToolCallSpec("local_time", '{"city": ')]),
        Reply(text="No tool fits."),
        # openai:gpt-4o: wrong, right, wrong.
        Reply(tool_calls=[ToolCallSpec("local_time", {"city": "Rome"})]),
        Reply(tool_calls=[ToolCallSpec("local_time", {"city": "oslo"})]),
        Reply(tool_calls=[ToolCallSpec("local_time", {"city": "Oslo"})]),
    )
    out = tmp_path / "report.json"
    ran = await run_ext(
        "eval",
        str(tiny_dataset(tmp_path)),
        "-m",
        "openai:gpt-4o-mini",
        "-m",
        "openai:gpt-4o",
        "--concurrency",
        "1",
        "--json",
        str(out),
        "--html",
        str(tmp_path / "report.html"),
        env=openai_env,
    )
    assert ran.code == 0, ran.err
    assert [r.json["model"] for r in server.requests if isinstance(r.json, dict)] == ["gpt-4o-mini"] * 3 + [
        "gpt-4o"
    ] * 3
    report = json.loads(out.read_text())
    a, b = report["configs"]
    assert (a["name"], a["overall"]["correct"], a["overall"]["malformed"]) == ("openai:gpt-4o-mini", 2, 1)
    assert (b["name"], b["overall"]["correct"], b["overall"]["malformed"]) == ("openai:gpt-4o", 1, 0)
    assert [r["correct"] for r in a["results"]] == [True, False, True]
    # The tables on stdout: each configuration, then B against A.
    assert "openai:gpt-4o-mini" in ran.out and "openai:gpt-4o vs openai:gpt-4o-mini" in ran.out
    assert ran.out.count("cost $") == 2  # both models are in the price table (ext-resilience)
    overall_rows = [line for line in ran.out.splitlines() if "overall" in line]
    assert len(overall_rows) == 3
    assert "66.7%" in overall_rows[0] and "33.3%" in overall_rows[0]  # accuracy, malformed rate of A
    assert "33.3%" in overall_rows[1]
    assert "-33.3" in overall_rows[2]  # accuracy delta B - A
    assert f"report written to {out}" in ran.err
    page = (tmp_path / "report.html").read_text()
    assert f"page written to {tmp_path / 'report.html'}" in ran.err
    assert 'data-config="openai:gpt-4o-mini" data-category="overall">67% (2/3)</text>' in page
    assert "q t2" in page  # the dataset's messages, beside what each configuration called
    assert page.count('<tr data-id="') == 3


async def test_eval_category_and_limit_select_cases(
    server: OpenAIServer, openai_env: dict[str, str], tmp_path: Path
) -> None:
    server.enqueue(Reply(text="nothing to call"))
    ran = await run_ext(
        "eval",
        str(tiny_dataset(tmp_path)),
        "-m",
        "openai:gpt-4o-mini",
        "--category",
        "irrelevance",
        "--limit",
        "1",
        env=openai_env,
    )
    assert ran.code == 0, ran.err
    assert len(server.requests) == 1
    assert "irrelevance" in ran.out and "100.0%" in ran.out


async def test_eval_a_bad_dataset_line_fails_before_any_request(
    server: OpenAIServer, openai_env: dict[str, str], tmp_path: Path
) -> None:
    path = tiny_dataset(tmp_path)
    path.write_text(path.read_text() + '{"id": "bad", "category": "simple"}\n')
    ran = await run_ext("eval", str(path), "-m", "openai:gpt-4o-mini", env=openai_env)
    assert ran.code == 1
    assert f"error: {path}:4: messages: Field required" in ran.err
    assert server.requests == []
    ran = await run_ext("eval", str(path), "-m", "nocolon", env=openai_env)
    assert ran.code == 1 and "error:" in ran.err
