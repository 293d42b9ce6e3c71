"""`ext mcp serve` as a real process, reached by ext's own MCP client (McpWorkbench) over stdio."""

from __future__ import annotations

import sys
from pathlib import Path

from ext_cli_support import HERE, agent_spec, clean_env, run_ext

from ext.testing.servers import OpenAIServer, Reply, ToolCallSpec
from ext.tools.mcp import McpWorkbench, StdioServerParams


async def test_serves_the_named_tools_over_stdio() -> None:
    params = StdioServerParams(
        command=sys.executable,
        args=["-m", "ext.cli", "mcp", "serve", "--tool", "cli_tools:get_weather", "--tool", "cli_tools:broken"],
        env={**clean_env(), "PYTHONPATH": str(HERE)},
        cwd=str(HERE),
    )
    async with McpWorkbench(params) as workbench:
        tools = {t["name"]: t for t in await workbench.list_tools()}
        assert set(tools) == {"get_weather", "broken"}
        assert tools["get_weather"]["description"] == "The weather in a city."
        assert tools["get_weather"]["parameters"]["required"] == ["city"]
        result = await workbench.call_tool("get_weather", {"city": "Oslo"})
        assert (result.is_error, result.to_text()) == (False, "sunny in Oslo, 21 C")
        failed = await workbench.call_tool("broken", {"city": "Oslo"})
        assert failed.is_error and failed.to_text() == "RuntimeError: no station for Oslo"


async def test_serves_an_agent_spec_as_one_tool(
    server: OpenAIServer, openai_env: dict[str, str], tmp_path: Path
) -> None:
    server.enqueue(Reply(tool_calls=[ToolCallSpec("get_weather", {"city": "Oslo"})]), Reply(text="Sunny in Oslo."))
    spec = agent_spec(tmp_path, server.base_url, description="Reports the weather.")
    params = StdioServerParams(
        command=sys.executable,
        args=["-m", "ext.cli", "mcp", "serve", "--agent", str(spec)],
        env={**openai_env, "PYTHONPATH": str(HERE)},
        cwd=str(HERE),
    )
    async with McpWorkbench(params) as workbench:
        (tool,) = await workbench.list_tools()
        assert (tool["name"], tool["description"]) == ("forecaster", "Reports the weather.")
        result = await workbench.call_tool("forecaster", {"request": "Weather in Oslo?"})
        assert (result.is_error, result.to_text()) == (False, "Sunny in Oslo.")
    tool_result = [m for m in server.requests[1].json["messages"] if m["role"] == "tool"]  # type: ignore[index]
    assert tool_result[0]["content"] == "sunny in Oslo, 21 C"  # the agent ran its own tool in the server process


async def test_nothing_to_serve_and_a_bad_agent_spec_get_clear_errors(tmp_path: Path) -> None:
    ran = await run_ext("mcp", "serve")
    assert ran.code != 0 and "nothing to serve" in ran.err and "--tool" in ran.err
    spec = tmp_path / "agent.yaml"
    spec.write_text("name: x\n")
    ran = await run_ext("mcp", "serve", "--agent", str(spec))
    assert ran.code != 0 and f"error: {spec}: model: required" in ran.err
    ran = await run_ext("mcp", "serve", "--tool", "cli_tools:get_weather", "--http", "--token-env", "NO_SUCH_VAR_X")
    assert ran.code != 0 and "NO_SUCH_VAR_X" in ran.err
