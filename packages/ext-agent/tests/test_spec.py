"""Agent spec files: built into a ChatAgent that runs on the OpenAI loopback server, and checked without building
anything, every error naming the file and the field."""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from ext_agent_support import KEY

from ext.agent import ChatAgent, check_agent_spec, load_agent
from ext.core import ConfigurationError
from ext.testing.servers import OpenAIServer, Reply, ToolCallSpec

ENV = {"EXT_AGENT_TEST_KEY": KEY}


@pytest.fixture
async def server() -> AsyncIterator[OpenAIServer]:
    async with OpenAIServer(api_key=KEY) as srv:
        yield srv


def spec(base_url: str, **changes: Any) -> dict[str, Any]:
    document: dict[str, Any] = {
        "name": "adder",
        "description": "Adds numbers.",
        "instructions": "You add numbers for {user}.",
        "variables": {"user": "Ada"},
        "model": {
            "client": {
                "provider": "openai",
                "options": {
                    "endpoint": base_url + "/v1",
                    "default_model": "gpt-4o-mini",
                    "api_key_env": "EXT_AGENT_TEST_KEY",
                },
                "args": {"max_retries": 0},
            },
            "middleware": [{"retry": {"max_retries": 1}}],
        },
        "tools": [{"python": "ext_agent_support:add"}],
        "output": {
            "type": "object",
            "properties": {"sum": {"type": "integer", "description": "The sum."}, "note": {"type": "string"}},
            "required": ["sum"],
        },
        "limits": {"max_iterations": 4},
        "options": {"temperature": 0},
    }
    document.update(changes)
    return document


def write(tmp_path: Path, document: dict[str, Any], name: str = "agent.yaml") -> Path:
    path = tmp_path / name
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    return path


async def test_a_spec_file_builds_an_agent_that_calls_its_tool_and_answers_typed(
    server: OpenAIServer, tmp_path: Path
) -> None:
    server.enqueue(
        Reply(tool_calls=[ToolCallSpec("add", {"a": 2, "b": 3})]),
        Reply(text='{"sum": 5, "note": "two and three"}'),
    )
    path = write(tmp_path, spec(server.base_url))
    async with ChatAgent.from_spec(path, environ=ENV) as agent:
        assert (agent.name, agent.description) == ("adder", "Adds numbers.")
        result = await agent.run("What is 2 + 3?")
    assert result.output.sum == 5 and result.output.note == "two and three"
    first, second = (r.json for r in server.requests)
    assert isinstance(first, dict) and isinstance(second, dict)
    assert first["messages"][0] == {"role": "system", "content": "You add numbers for Ada."}
    assert [t["function"]["name"] for t in first["tools"]] == ["add"]
    assert first["temperature"] == 0
    answer = first["response_format"]["json_schema"]
    assert (answer["name"], answer["strict"]) == ("AdderOutput", True)
    assert answer["schema"]["properties"]["sum"] == {"description": "The sum.", "type": "integer"}
    assert second["messages"][-1]["role"] == "tool" and second["messages"][-1]["content"] == "5"


async def test_a_spec_names_a_pipeline_file_beside_it_and_a_json_spec_works_too(
    server: OpenAIServer, tmp_path: Path
) -> None:
    server.enqueue(Reply(text='{"sum": 7}'))
    document = spec(server.base_url)
    (tmp_path / "pipeline.json").write_text(json.dumps(document["model"]))
    document["model"] = "pipeline.json"
    path = tmp_path / "agent.json"
    path.write_text(json.dumps(document))
    found = check_agent_spec(path, environ=ENV)
    assert (found.name, found.model.provider, found.model.model) == ("adder", "openai", "gpt-4o-mini")
    assert found.model.middleware == ["retry"] and found.output == ["sum", "note"]
    agent = load_agent(path, environ=ENV)
    try:
        assert (await agent.run("4 + 3?")).output.sum == 7
    finally:
        await agent.close()


def test_check_builds_nothing_and_runs_no_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A module that would fail if imported: check finds it without running it.
    (tmp_path / "exploding_tools.py").write_text("raise RuntimeError('imported')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    document = spec(
        "http://127.0.0.1:9",
        tools=[
            {"python": "exploding_tools:tools"},
            {"mcp": {"command": "/nonexistent/mcp-server", "args": ["--x"]}},
            {
                "http": {
                    "name": "get_weather",
                    "host": "127.0.0.1",
                    "port": 9,
                    "json_schema": {"type": "object", "properties": {}},
                }
            },
        ],
        require_approval=["get_weather"],
    )
    found = check_agent_spec(write(tmp_path, document), environ=ENV)
    assert found.tools == [
        "exploding_tools:tools",
        "mcp: ext.tools.mcp.McpWorkbench",
        "http: ext.tools.http.HttpTool",
    ]
    assert found.require_approval == ["get_weather"]
    assert "exploding_tools" not in sys.modules


BAD: list[tuple[str, dict[str, Any], str]] = [
    ("no name", {"name": None}, "name: expected text"),
    ("unknown key", {"prompt": "x"}, "unknown key 'prompt'; an agent spec has name, description"),
    (
        "unknown tool kind",
        {"tools": [{"python": "ext_agent_support:add"}, {"shell": "ls"}]},
        "tools[1]: unknown tool kind 'shell'",
    ),
    ("python form", {"tools": [{"python": "no_colon"}]}, "tools[0].python: expected 'module:name', got 'no_colon'"),
    ("python module", {"tools": [{"python": "no_such_module_x:f"}]}, "tools[0].python: no module 'no_such_module_x'"),
    (
        "http setting",
        {"tools": [{"http": {"name": "w", "host": "h", "port": 70000, "json_schema": {"type": "object"}}}]},
        "tools[0].http.port: Input should be less than or equal to 65535",
    ),
    (
        "mcp shape",
        {"tools": [{"mcp": {"args": ["x"]}}]},
        "tools[0].mcp: expected `command` (a server over stdio) or `url`",
    ),
    (
        "output type",
        {"output": {"type": "object", "properties": {"n": {"type": "decimal"}}}},
        "output.properties.n.type: expected one of object",
    ),
    (
        "output required",
        {"output": {"type": "object", "properties": {}, "required": ["x"]}},
        "output.required: 'x' is not among the properties",
    ),
    ("limits", {"limits": {"max_iterations": 0}}, "limits.max_iterations: expected a positive whole number, got 0"),
    ("options", {"options": {"temperature": "hot"}}, "options.temperature:"),
    ("approval", {"require_approval": "delete"}, "require_approval: expected a list of tool names"),
    ("no client", {"model": {"middleware": []}}, "model: the pipeline config has no client"),
    (
        "middleware",
        {"model": {"client": {"provider": "openai"}, "middleware": [{"shout": {}}]}},
        "model: middleware[0]: unknown middleware 'shout'",
    ),
]


@pytest.mark.parametrize(("label", "change", "message"), BAD, ids=[b[0] for b in BAD])
def test_a_bad_spec_names_the_file_and_the_field(
    tmp_path: Path, label: str, change: dict[str, Any], message: str
) -> None:
    document = spec("http://127.0.0.1:9")
    document.update(change)
    if change.get("name", "") is None:
        del document["name"]
        message = "name: required"
    path = write(tmp_path, document)
    with pytest.raises(ConfigurationError) as caught:
        check_agent_spec(path, environ=ENV)
    assert str(caught.value).startswith(f"{path}: "), str(caught.value)
    assert message in str(caught.value)
    with pytest.raises(ConfigurationError):  # building checks the same way first
        load_agent(path, environ=ENV)


def test_secrets_only_from_the_environment(tmp_path: Path) -> None:
    document = spec("http://127.0.0.1:9")
    document["tools"] = [{"mcp": {"url": "http://127.0.0.1:9/mcp", "headers": {"Authorization": "Bearer sk-live-123"}}}]
    path = write(tmp_path, document)
    with pytest.raises(ConfigurationError) as caught:
        check_agent_spec(path, environ=ENV)
    assert str(caught.value).startswith(f"{path}: tools[0].mcp")
    assert "sk-live-123" not in str(caught.value)
    document = spec("http://127.0.0.1:9")
    document["model"]["client"]["options"]["api_key_env"] = "EXT_AGENT_TEST_UNSET"
    path = write(tmp_path, document)
    with pytest.raises(ConfigurationError) as caught:
        check_agent_spec(path, environ=ENV)
    assert "EXT_AGENT_TEST_UNSET" in str(caught.value) and str(caught.value).startswith(f"{path}: model")


def test_output_schemas_become_models_and_deep_nesting_is_refused() -> None:
    from ext.agent._schema_model import MAX_DEPTH, model_from_schema

    model = model_from_schema(
        {
            "type": "object",
            "properties": {
                "unit": {"enum": ["c", "f"]},
                "readings": {"type": "array", "items": {"type": "number"}},
                "place": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
                "code": {"anyOf": [{"type": "integer"}, {"type": "string"}]},
            },
            "required": ["unit", "readings", "place"],
            "additionalProperties": False,
        }
    )
    value = model.model_validate({"unit": "c", "readings": [1, 2.5], "place": {"city": "Oslo"}, "code": "x1"})
    assert value.model_dump() == {"unit": "c", "readings": [1.0, 2.5], "place": {"city": "Oslo"}, "code": "x1"}
    with pytest.raises(ValueError):
        model.model_validate({"unit": "k", "readings": [], "place": {"city": "Oslo"}})
    with pytest.raises(ValueError):
        model.model_validate({"unit": "c", "readings": [], "place": {"city": "Oslo"}, "extra": 1})
    deep: dict[str, Any] = {"type": "string"}
    for _ in range(MAX_DEPTH + 2):
        deep = {"type": "object", "properties": {"x": deep}}
    with pytest.raises(ConfigurationError, match=f"nested deeper than {MAX_DEPTH} levels"):
        model_from_schema(deep)
    with pytest.raises(ConfigurationError, match="output: the answer must be an object schema"):
        model_from_schema({"type": "string"})
