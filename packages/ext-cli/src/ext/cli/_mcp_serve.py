"""`ext mcp serve`: serve tools, a pipeline or an agent over MCP (ext-hosting-mcp), on stdio or streamable HTTP.

What is served: tools named on the command line (`--tool module:function`, `--http-tool FILE`, `--mcp SERVER`: the
tools of other MCP servers, aggregated), a pipeline file as one tool (`--pipeline FILE`: question in, answer out),
or an agent spec (`--agent FILE`: needs ext-agent). A bearer token for HTTP is read from an environment variable
(`--token-env`), never from the command line, so it stays out of shell history and process lists.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from importlib import import_module
from typing import Any

from ext.core import Tool, Workbench

from ._errors import CliError
from ._output import Output
from ._tools import function_tool, http_tool, mcp_workbench


def _require(module: str, what: str, extra: str) -> Any:
    try:
        return import_module(module)
    except ImportError:
        raise CliError(
            f"{what} is not installed",
            hint=f"install it (from a clone: pip install -e 'packages/ext-cli[{extra}]')",
        ) from None


@dataclass
class ServeSettings:
    tools: Sequence[str] = ()
    http_tools: Sequence[str] = ()
    mcp_servers: Sequence[str] = ()
    pipeline: str | None = None
    pipeline_tool: str = "ask"
    agent: str | None = None
    transport: str = "stdio"
    host: str = "127.0.0.1"
    port: int = 8000
    path: str = "/mcp"
    redis_url: str | None = None
    token_env: str | None = None
    idle_timeout: float = 1800.0
    allowed_hosts: Sequence[str] = field(default_factory=tuple)
    name: str = "ext"


def served_tools(settings: ServeSettings) -> list[Tool | Workbench]:
    """What the settings name, built before anything is served (bad input fails here, naming the option)."""
    hosting = _require("ext.hosting.mcp", "ext-hosting-mcp", "mcp-serve")
    items: list[Tool | Workbench] = [
        *(function_tool(s) for s in settings.tools),
        *(http_tool(p) for p in settings.http_tools),
        *(mcp_workbench(s) for s in settings.mcp_servers),
    ]
    if settings.pipeline is not None:
        from ext.pipeline import load_pipeline

        try:
            pipeline = load_pipeline(settings.pipeline)
        except (OSError, ValueError) as exc:
            raise CliError(f"--pipeline {settings.pipeline}: {exc}") from None
        items.append(hosting.PipelineTool(pipeline, name=settings.pipeline_tool))
    if settings.agent is not None:
        from ._agent_cli import load_agent_spec  # names the extra to install when ext-agent is missing

        items.append(load_agent_spec(settings.agent).as_tool())
    if not items:
        raise CliError(
            "nothing to serve", hint="name tools with --tool, --http-tool or --mcp, or give --pipeline or --agent"
        )
    return items


async def serve(settings: ServeSettings, out: Output) -> int:
    hosting = _require("ext.hosting.mcp", "ext-hosting-mcp", "mcp-serve")
    server = hosting.McpServer(served_tools(settings), name=settings.name)
    if settings.transport == "stdio":
        if settings.redis_url or settings.token_env:
            raise CliError("--redis and --token-env apply to --http", hint="add --http")
        await server.run_stdio()
        return 0
    token = None
    if settings.token_env:
        token = os.environ.get(settings.token_env)
        if not token:
            raise CliError(f"--token-env {settings.token_env}: the variable is unset or empty")
    sessions = None
    if settings.redis_url:
        redis_store = _require("ext.hosting.mcp.redis", "ext-hosting-mcp[redis]", "mcp-serve")
        from ext.redis import RedisConnection

        sessions = redis_store.RedisSessionStore(RedisConnection(settings.redis_url))
    app = hosting.streamable_http_app(
        server,
        path=settings.path,
        host=settings.host,
        allowed_hosts=list(settings.allowed_hosts) or None,
        token=token,
        sessions=sessions,
        idle_timeout=settings.idle_timeout,
    )
    out.info(f"serving MCP on http://{settings.host}:{settings.port}{settings.path}")
    await hosting.serve_http(app, host=settings.host, port=settings.port)
    return 0
