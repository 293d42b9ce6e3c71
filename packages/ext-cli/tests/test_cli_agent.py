"""`ext chat --agent`, `ext eval --agent` and `ext config check` on agent spec files (ext-agent), against the OpenAI
loopback server: real `ext` processes, and the approval prompt driven in process."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

from ext_cli_support import KEY, agent_spec, run_ext

from ext.cli._agent_cli import run_agent_chat
from ext.cli._output import Output
from ext.testing.servers import OpenAIServer, Reply, ToolCallSpec


async def test_chat_with_an_agent_spec_runs_its_tool_and_streams_the_answer(
    server: OpenAIServer, openai_env: dict[str, str], tmp_path: Path
) -> None:
    server.enqueue(Reply(tool_calls=[ToolCallSpec("get_weather", {"city": "Oslo"})]), Reply(text="Sunny in Oslo."))
    ran = await run_ext(
        "chat", "--agent", str(agent_spec(tmp_path, server.base_url)), "Weather in Oslo?", env=openai_env
    )
    assert ran.code == 0, ran.err
    assert ran.out.strip() == "Sunny in Oslo."
    assert '→ get_weather({"city":"Oslo"})' in ran.err and "← get_weather: sunny in Oslo, 21 C" in ran.err
    first = server.requests[0].json
    assert isinstance(first, dict)
    assert first["messages"][0] == {"role": "system", "content": "You report the weather for Ada."}


async def test_a_held_call_without_a_terminal_stops_with_code_3(
    server: OpenAIServer, openai_env: dict[str, str], tmp_path: Path
) -> None:
    server.enqueue(Reply(tool_calls=[ToolCallSpec("get_weather", {"city": "Oslo"})]))
    path = agent_spec(tmp_path, server.base_url, require_approval=["get_weather"])
    ran = await run_ext("chat", "--agent", str(path), "--session", "s1", "Weather in Oslo?", env=openai_env)
    assert ran.code == 3, ran.err
    assert "waiting for approval of get_weather" in ran.err and "in session s1" in ran.err
    assert len(server.requests) == 1  # the tool did not run, and the model was not asked again


async def test_the_approval_prompt_approves_and_denies(server: OpenAIServer, tmp_path: Path, monkeypatch: Any) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    server.enqueue(
        Reply(
            tool_calls=[ToolCallSpec("get_weather", {"city": "Oslo"}), ToolCallSpec("get_weather", {"city": "Rome"})]
        ),
        Reply(text="Oslo is sunny; Rome I may not check."),
    )
    answers = iter(["y", "n"])

    async def read_line() -> str | None:
        return next(answers)

    out, err = io.StringIO(), io.StringIO()
    path = agent_spec(tmp_path, server.base_url, require_approval=["get_weather"])
    code = await run_agent_chat(str(path), "Weather in Oslo and Rome?", Output(out, err), read_line=read_line)
    assert code == 0, err.getvalue()
    assert out.getvalue().strip() == "Oslo is sunny; Rome I may not check."
    results = [m for m in server.requests[1].json["messages"] if m["role"] == "tool"]  # type: ignore[index]
    assert results[0]["content"] == "sunny in Oslo, 21 C"
    assert "the user declined this call" in results[1]["content"]


async def test_config_check_reads_an_agent_spec_and_names_the_field_of_an_error(
    openai_env: dict[str, str], tmp_path: Path
) -> None:
    path = agent_spec(
        tmp_path, "http://127.0.0.1:9", output={"type": "object", "properties": {"n": {"type": "integer"}}}
    )
    ran = await run_ext("config", "check", str(path), env=openai_env)
    assert ran.code == 0, ran.err
    assert ran.out.splitlines() == [
        f"{path}: valid agent spec",
        "  agent: forecaster",
        "  client: OpenAIChatCompletionClient from provider openai (model gpt-4o-mini)",
        "  tool: cli_tools:get_weather",
        "  output: n",
    ]
    path = agent_spec(
        tmp_path,
        "http://127.0.0.1:9",
        tools=[{"http": {"name": "w", "host": "h", "port": 0, "json_schema": {"type": "object"}}}],
    )
    ran = await run_ext("config", "check", str(path), env=openai_env)
    assert ran.code == 1
    assert f"error: {path}: tools[0].http.port: Input should be greater than or equal to 1" in ran.err


async def test_eval_scores_an_agents_model_with_its_instructions(
    server: OpenAIServer, openai_env: dict[str, str], tmp_path: Path
) -> None:
    dataset = tmp_path / "one.jsonl"
    tool = {
        "name": "local_time",
        "description": "d",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
    }
    case = {
        "id": "t1",
        "category": "simple",
        "messages": [{"role": "user", "content": "time in Oslo?"}],
        "tools": [tool],
        "expected": [{"name": "local_time", "arguments": {"city": ["Oslo"]}}],
    }
    dataset.write_text(json.dumps(case) + "\n")
    server.enqueue(Reply(tool_calls=[ToolCallSpec("local_time", {"city": "Oslo"})]))
    ran = await run_ext("eval", str(dataset), "--agent", str(agent_spec(tmp_path, server.base_url)), env=openai_env)
    assert ran.code == 0, ran.err
    (request,) = [r.json for r in server.requests]
    assert isinstance(request, dict)
    assert request["messages"][0] == {"role": "system", "content": "You report the weather for Ada."}
    assert [t["function"]["name"] for t in request["tools"]] == ["local_time"]  # the case's tools, not the agent's
    assert "forecaster" in ran.out and "100.0%" in ran.out


async def test_agent_flags_that_build_a_chat_by_hand_are_refused(openai_env: dict[str, str], tmp_path: Path) -> None:
    path = agent_spec(tmp_path, "http://127.0.0.1:9")
    ran = await run_ext("chat", "--agent", str(path), "-m", "openai:gpt-4o", "hi", env=openai_env)
    assert ran.code == 1 and "-m goes without --agent" in ran.err
    ran = await run_ext("chat", "--session", "s1", "hi", env=openai_env)
    assert ran.code == 1 and "--session names a session of --agent" in ran.err
