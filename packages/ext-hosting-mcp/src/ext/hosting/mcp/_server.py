"""`McpServer`: ext tools, workbenches, resources and prompts behind the `mcp` SDK's low-level `Server`.

Each request method is one handler here; the transports (stdio, streamable HTTP in `_http`) are the SDK's. Tools
keep their names, descriptions and argument schemas; `tool_overrides` renames or re-describes them as a workbench
does. Plain `Tool`s (an ext-agent `as_tool()`, a `PipelineTool`, an `HttpTool`, a LangChain adapter) are grouped in
one `StaticWorkbench`; a `Workbench` (an `McpWorkbench` aggregating other servers) is listed as it is.

What a client gets:
- an unknown tool: JSON-RPC error -32602 naming it;
- arguments that break the tool's schema: a tool error (`isError`) naming each failing field, before the tool runs
  (SEP-1303: the calling model can correct itself);
- a tool that raises: a tool error with the exception's type and message (ext's workbench contract);
- anything else raising in a handler: the SDK's internal error, with the detail only in the server's log.
"""

from __future__ import annotations

import contextlib
import logging
import warnings
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any

import mcp_types as types
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.shared.exceptions import MCPError

from ext.core import ConfigurationError, StaticWorkbench, Tool, ToolOverride, ToolOverrides, ToolSchema, Workbench

from .__about__ import __version__
from ._catalog import Prompt, Resource, ResourceTemplate, resource_contents
from ._context import ToolContext, _enter, _leave
from ._mapping import argument_errors, argument_validator, call_result, mcp_tool

__all__ = ["McpServer"]

logger = logging.getLogger(__name__)

Ctx = ServerRequestContext[Any, Any]


class _Entry:
    __slots__ = ("name", "schema", "validator", "workbench")

    def __init__(self, workbench: Workbench, name: str, schema: ToolSchema) -> None:
        self.workbench = workbench
        self.name = name  # the name the workbench presents it under
        self.schema = schema  # as this server presents it
        self.validator = argument_validator(schema.get("parameters") or {})


class McpServer:
    """ext tools served over MCP.

    Arguments:
        tools: `Tool`s and `Workbench`es (any mix). Workbenches are started with the server and stopped after it.
        name, version, instructions: what `initialize` tells the client.
        tool_overrides: original name -> `ToolOverride` (or a dict with `name`/`description`), as for workbenches.
        resources, resource_templates, prompts: see `ext.hosting.mcp.Resource`, `ResourceTemplate`, `Prompt`.
        tool_timeout: seconds a tool call may take before it becomes a tool error (None: no limit).
    """

    def __init__(
        self,
        tools: Sequence[Tool | Workbench] = (),
        *,
        name: str = "ext",
        version: str = __version__,
        instructions: str | None = None,
        tool_overrides: Mapping[str, ToolOverride | Mapping[str, Any]] | None = None,
        resources: Sequence[Resource] = (),
        resource_templates: Sequence[ResourceTemplate] = (),
        prompts: Sequence[Prompt] = (),
        tool_timeout: float | None = None,
    ) -> None:
        plain: list[Tool] = []
        self._workbenches: list[Workbench] = []
        for item in tools:
            if isinstance(item, Workbench):
                self._workbenches.append(item)
            elif isinstance(item, Tool):
                plain.append(item)
            else:
                raise ConfigurationError(f"tools: {item!r} is neither an ext Tool nor a Workbench")
        if plain:
            self._workbenches.insert(0, StaticWorkbench(plain))
        if tool_timeout is not None and not tool_timeout > 0:
            raise ConfigurationError(f"tool_timeout must be > 0 seconds or None, got {tool_timeout!r}")
        self._tool_timeout = tool_timeout
        self._overrides = ToolOverrides(tool_overrides)
        self._resources = {r.uri: r for r in resources}
        if len(self._resources) != len(resources):
            raise ConfigurationError("resources: two resources share a URI")
        self._templates = list(resource_templates)
        self._prompts = {p.name: p for p in prompts}
        if len(self._prompts) != len(prompts):
            raise ConfigurationError("prompts: two prompts share a name")
        self._index: dict[str, _Entry] | None = None
        self._subscriptions: set[str] = set()
        self._log_level: str | None = None
        self._users = 0
        self._server = self._build(name, version, instructions)

    @property
    def server(self) -> Server[Any]:
        """The SDK's low-level `Server` (for its transports and session managers)."""
        return self._server

    @property
    def subscriptions(self) -> frozenset[str]:
        """Resource URIs clients subscribed to (`resources/subscribe`), in this process."""
        return frozenset(self._subscriptions)

    def _build(self, name: str, version: str, instructions: str | None) -> Server[Any]:
        with warnings.catch_warnings():
            # logging/setLevel is deprecated only from 2026-07-28; the handshake revisions still define it.
            warnings.simplefilter("ignore")
            server: Server[Any] = Server(
                name,
                version=version,
                instructions=instructions,
                lifespan=self._lifespan,
                on_list_tools=self._list_tools,
                on_call_tool=self._call_tool,
                on_list_resources=self._list_resources,
                on_list_resource_templates=self._list_resource_templates,
                on_read_resource=self._read_resource,
                on_subscribe_resource=self._subscribe,
                on_unsubscribe_resource=self._unsubscribe,
                on_list_prompts=self._list_prompts,
                on_get_prompt=self._get_prompt,
                on_completion=self._complete,
                on_set_logging_level=self._set_level,
            )
        return server

    @contextlib.asynccontextmanager
    async def _lifespan(self, _server: Server[Any]) -> AsyncIterator[dict[str, Any]]:
        # Entered by each transport that serves this server (the HTTP app enters it twice: stateful and stateless
        # managers): the workbenches start with the first and stop after the last.
        if self._users == 0:
            for workbench in self._workbenches:
                await workbench.start()
        self._users += 1
        try:
            yield {}
        finally:
            self._users -= 1
            if self._users == 0:
                for workbench in reversed(self._workbenches):
                    await workbench.stop()

    async def tools(self) -> dict[str, ToolSchema]:
        """The tools as clients see them (presented name -> schema), listed once and kept."""
        if self._index is None:
            index: dict[str, _Entry] = {}
            for workbench in self._workbenches:
                for schema in await workbench.list_tools():
                    presented = self._overrides.apply(schema)
                    if presented["name"] in index:
                        raise ConfigurationError(f"two served tools are named {presented['name']!r}")
                    index[presented["name"]] = _Entry(workbench, schema["name"], presented)
            self._overrides.check_names([e.name for e in index.values()])
            self._index = index
        return {name: entry.schema for name, entry in self._index.items()}

    def refresh_tools(self) -> None:
        """List the workbenches' tools again at the next request (after an aggregated server changed its tools)."""
        self._index = None

    # tools

    async def _list_tools(self, _ctx: Ctx, _params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
        return types.ListToolsResult(tools=[mcp_tool(s) for s in (await self.tools()).values()])

    async def _call_tool(self, ctx: Ctx, params: types.CallToolRequestParams) -> types.CallToolResult:
        await self.tools()
        assert self._index is not None
        entry = self._index.get(params.name)
        if entry is None:
            raise MCPError(types.INVALID_PARAMS, f"unknown tool {params.name!r}")
        arguments = params.arguments or {}
        problem = argument_errors(params.name, entry.validator, arguments)
        if problem is not None:
            return types.CallToolResult(content=[types.TextContent(type="text", text=problem)], is_error=True)
        token = _enter(ToolContext(ctx, params.name))
        try:
            result = await entry.workbench.call_tool(
                entry.name,
                arguments,
                call_id=None if ctx.request_id is None else str(ctx.request_id),
                timeout=self._tool_timeout,
                timeout_as_error=True,
            )
        finally:
            _leave(token)
        return call_result(result)

    # resources

    async def _list_resources(
        self, _ctx: Ctx, _params: types.PaginatedRequestParams | None
    ) -> types.ListResourcesResult:
        return types.ListResourcesResult(resources=[r.listing() for r in self._resources.values()])

    async def _list_resource_templates(
        self, _ctx: Ctx, _params: types.PaginatedRequestParams | None
    ) -> types.ListResourceTemplatesResult:
        return types.ListResourceTemplatesResult(resource_templates=[t.listing() for t in self._templates])

    async def _read_resource(self, _ctx: Ctx, params: types.ReadResourceRequestParams) -> types.ReadResourceResult:
        uri = str(params.uri)
        resource = self._resources.get(uri)
        if resource is not None:
            return resource_contents(uri, resource.mime_type, await resource.contents())
        for template in self._templates:
            variables = template.match(uri)
            if variables is not None:
                return resource_contents(uri, template.mime_type, await template.read(variables))
        raise MCPError(types.INVALID_PARAMS, f"resource not found: {uri!r}")

    def _known(self, uri: str) -> bool:
        return uri in self._resources or any(t.match(uri) is not None for t in self._templates)

    async def _subscribe(self, _ctx: Ctx, params: types.SubscribeRequestParams) -> types.EmptyResult:
        uri = str(params.uri)
        if not self._known(uri):
            raise MCPError(types.INVALID_PARAMS, f"resource not found: {uri!r}")
        self._subscriptions.add(uri)
        return types.EmptyResult()

    async def _unsubscribe(self, _ctx: Ctx, params: types.UnsubscribeRequestParams) -> types.EmptyResult:
        self._subscriptions.discard(str(params.uri))
        return types.EmptyResult()

    # prompts, completion, logging

    async def _list_prompts(self, _ctx: Ctx, _params: types.PaginatedRequestParams | None) -> types.ListPromptsResult:
        return types.ListPromptsResult(prompts=[p.listing() for p in self._prompts.values()])

    async def _get_prompt(self, _ctx: Ctx, params: types.GetPromptRequestParams) -> types.GetPromptResult:
        prompt = self._prompts.get(params.name)
        if prompt is None:
            raise MCPError(types.INVALID_PARAMS, f"unknown prompt {params.name!r}")
        arguments = params.arguments or {}
        missing = [a.name for a in prompt.arguments if a.required and a.name not in arguments]
        if missing:
            raise MCPError(types.INVALID_PARAMS, f"prompt {params.name!r} needs the argument(s) {', '.join(missing)}")
        return types.GetPromptResult(description=prompt.description, messages=await prompt.messages(arguments))

    async def _complete(self, _ctx: Ctx, _params: types.CompleteRequestParams) -> types.CompleteResult:
        return types.CompleteResult(completion=types.Completion(values=[], total=0, has_more=False))

    async def _set_level(self, _ctx: Ctx, params: types.SetLevelRequestParams) -> types.EmptyResult:
        self._log_level = params.level
        return types.EmptyResult()

    # stdio

    async def run_stdio(self) -> None:
        """Serve one client over this process's stdin and stdout until it closes them."""
        from mcp.server.stdio import stdio_server

        async with stdio_server() as (read, write):
            await self._server.run(read, write, self._server.create_initialization_options())

    def __repr__(self) -> str:
        return f"McpServer(name={self._server.name!r}, workbenches={len(self._workbenches)})"
