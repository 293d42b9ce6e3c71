"""`ext mcp serve` as a real process, reached by ext's own MCP client (McpWorkbench) over stdio."""

from __future__ import annotations

import sys

from ext_cli_support import HERE, clean_env, run_ext

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


async def test_nothing_to_serve_and_an_agent_spec_get_clear_errors() -> None:
    ran = await run_ext("mcp", "serve")
    assert ran.code != 0 and "nothing to serve" in ran.err and "--tool" in ran.err
    ran = await run_ext("mcp", "serve", "--agent", "agent.yaml")
    assert ran.code != 0 and "ext-agent" in ran.err
    ran = await run_ext("mcp", "serve", "--tool", "cli_tools:get_weather", "--http", "--token-env", "NO_SUCH_VAR_X")
    assert ran.code != 0 and "NO_SUCH_VAR_X" in ran.err
