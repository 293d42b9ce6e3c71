"""`McpWorkbench`: the tools, resources and prompts of one MCP server behind ext's `Workbench`."""

from __future__ import annotations

import asyncio
import contextvars
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Annotated, Any, Union

from mcp import types as mt
from mcp.client.session import ClientRequestContext, ClientSession
from mcp.shared.exceptions import MCPError
from pydantic import BaseModel, Field, TypeAdapter, ValidationError

from ext.core import (
    CancellationToken,
    ChatCompletionClient,
    ClientClosedError,
    ComponentError,
    ComponentModel,
    ConfigurationError,
    ResourceResultContent,
    ToolOverride,
    ToolResult,
    ToolSchema,
    Workbench,
    load_component,
)

from ._connection import Connection, Handlers, all_pages
from ._errors import McpTimeoutError
from ._mapping import (
    PromptResult,
    SamplingMappingError,
    error_result,
    model_name,
    prompt_result,
    resource_content,
    roots_of,
    sampling_messages,
    sampling_options,
    sampling_result,
    sampling_tool_choice,
    sampling_tools,
    tool_result,
    tool_schema,
)
from ._oauth import Interaction, OAuthFlow
from ._oauth_settings import OAuthSettings
from ._params import ServerParams, SseServerParams, StdioServerParams, StreamableHttpServerParams

logger = logging.getLogger("ext.tools.mcp")

ElicitationCallback = Callable[[mt.ElicitRequestParams], Awaitable[mt.ElicitResult]]
"""Answers a server's elicitation request (a form or a URL to visit) on behalf of the user."""

Roots = Union[Sequence[Union[mt.Root, str]], Callable[[], Awaitable[Sequence[Union[mt.Root, str]]]]]
"""The roots offered to the server: `file://` URIs (or `mcp.types.Root`), or an async function giving them."""

_HTTP = (SseServerParams, StreamableHttpServerParams)
_PARAMS: TypeAdapter[ServerParams] = TypeAdapter(Annotated[ServerParams, Field(discriminator="type")])

# The explicit per-call timeout of the call in progress, so the SDK's own read timeout is set past it
# and the base class's timeout (which also cancels the request on the server) fires first.
_CALL_TIMEOUT: contextvars.ContextVar[float | None] = contextvars.ContextVar("mcp_call_timeout", default=None)


class _ReadTimeout(Exception):
    """The SDK's per-request read timeout fired during a tool call (reported by `call_tool`)."""


class McpWorkbenchConfig(BaseModel):
    """Config of an `McpWorkbench`. Secrets (api keys, header and env values) are never in it."""

    server_params: Annotated[ServerParams, Field(discriminator="type")]
    tool_overrides: dict[str, ToolOverride] = Field(default_factory=dict)
    model_client: ComponentModel | None = Field(default=None, description="Answers sampling requests.")
    roots: list[str] | None = Field(default=None, description="file:// URIs offered as roots.")


class McpWorkbench(Workbench):
    """The tools (and resources and prompts) of one MCP server, over stdio, SSE or streamable HTTP.

    One session per workbench, started by `start()` (or the first call) and shared by concurrent
    callers; `stop()` ends it (stdio: the process). If the server goes away, the call in flight raises
    `McpConnectionError` and the next call connects again (stdio: a new process).

    `model_client` answers the server's sampling requests; `elicitation_callback` and `roots` answer
    elicitation and roots requests. Without them the capability is not offered to the server.

    With `auth=OAuthSettings(...)` on the HTTP params, the workbench authorizes with OAuth 2.1. It never waits for
    a person unless given `oauth_interaction` (how to show the authorization URL): without it, a server that needs
    a login raises `McpNeedsLoginError` naming the command to run (`ext mcp login URL`).
    """

    component_config_schema = McpWorkbenchConfig
    component_provider_override = "ext.tools.mcp.McpWorkbench"

    def __init__(
        self,
        server_params: ServerParams | Mapping[str, Any],
        tool_overrides: Mapping[str, ToolOverride | Mapping[str, Any]] | None = None,
        *,
        model_client: ChatCompletionClient | None = None,
        elicitation_callback: ElicitationCallback | None = None,
        roots: Roots | None = None,
        oauth_interaction: Interaction | None = None,
    ) -> None:
        super().__init__(tool_overrides)
        self._params = _check_params(server_params)
        if model_client is not None and not isinstance(model_client, ChatCompletionClient):
            raise ConfigurationError(
                f"McpWorkbench.model_client must be an ext ChatCompletionClient, got {type(model_client).__name__}"
            )
        if elicitation_callback is not None and not callable(elicitation_callback):
            raise ConfigurationError("McpWorkbench.elicitation_callback must be an async callable")
        if roots is not None and not callable(roots):
            if isinstance(roots, (str, bytes)) or not isinstance(roots, Sequence):
                raise ConfigurationError("McpWorkbench.roots must be a list of file:// URIs or an async callable")
            try:
                roots = roots_of(roots)
            except ValidationError:
                raise ConfigurationError("McpWorkbench.roots: each root must be a file:// URI") from None
        self._model_client = model_client
        self._elicitation_callback = elicitation_callback
        self._roots = roots
        self._label = self._params.describe()
        if oauth_interaction is not None and not isinstance(oauth_interaction, Interaction):
            raise ConfigurationError(
                "McpWorkbench.oauth_interaction must be an ext.tools.mcp.Interaction, "
                f"got {type(oauth_interaction).__name__}"
            )
        oauth = getattr(self._params, "oauth", None)
        if oauth_interaction is not None and oauth is None:
            raise ConfigurationError("McpWorkbench.oauth_interaction needs server_params with auth=OAuthSettings(...)")
        # One OAuth flow per workbench, kept across reconnects (its tokens and discovered metadata with it).
        self._auth: OAuthFlow | None = (
            OAuthFlow(oauth, self._params.url, self._label, oauth_interaction)
            if isinstance(self._params, _HTTP) and oauth
            else None
        )
        self._read_timeout = self._params.request_timeout  # the params are frozen
        self._plain_names = not self._overrides  # no overrides: a presented name is the tool's own
        self._conn: Connection | None = None
        self._lock = asyncio.Lock()
        self._stopped = False

    # --- lifetime ---------------------------------------------------------------------------------

    @property
    def server_params(self) -> ServerParams:
        return self._params

    @property
    def server_info(self) -> mt.Implementation | None:
        """The server's name and version, once started."""
        conn = self._conn
        return conn.init_result.server_info if conn is not None and conn.init_result is not None else None

    @property
    def server_capabilities(self) -> mt.ServerCapabilities | None:
        conn = self._conn
        return conn.init_result.capabilities if conn is not None and conn.init_result is not None else None

    @property
    def session(self) -> ClientSession:
        """The live mcp `ClientSession`, for what this class does not wrap. Raises if not started."""
        conn = self._conn
        if conn is None or conn.session is None or not conn.alive:
            raise ClientClosedError(f"McpWorkbench for {self._label!r} is not started")
        return conn.session

    async def start(self) -> None:
        """Connect (stdio: spawn the server) and run the handshake. Idempotent."""
        self._stopped = False
        await self._connect()

    async def stop(self) -> None:
        """End the session (stdio: stop the process). Idempotent; `start()` connects again."""
        self._stopped = True
        async with self._lock:
            conn, self._conn = self._conn, None
            if conn is not None:
                await conn.close()
            if self._auth is not None:
                await self._auth.aclose()

    async def _listed(self) -> Connection:
        """The live connection, its tools listed (the SDK checks call results against their output schemas).
        Call sites test the fast case inline and await this only when something is missing."""
        conn = await self._connect()
        if not conn.tools_listed:
            await conn.tools()
        return conn

    async def _connect(self) -> Connection:
        conn = self._conn
        if conn is not None and conn.alive and conn.loop is asyncio.get_running_loop():
            return conn
        async with self._lock:
            if self._stopped:
                raise ClientClosedError(f"McpWorkbench for {self._label!r} was stopped; call start() first")
            conn = self._conn
            loop = asyncio.get_running_loop()
            if conn is not None and conn.loop is not loop:
                if conn.loop is not None and not conn.loop.is_closed():
                    raise RuntimeError(
                        f"McpWorkbench for {self._label!r} was started on another event loop; stop it there first"
                    )
                conn = self._conn = None  # its loop is gone, and the session with it
            if conn is not None and conn.alive:
                return conn
            if conn is not None:
                logger.info("MCP server %r: reconnecting (%s)", self._label, conn.failure or "connection ended")
                await conn.close()
                self._conn = None
            conn = Connection(self._params, self._label, self._handlers(), self._auth)
            await conn.open()
            self._conn = conn
            return conn

    def _handlers(self) -> Handlers:
        return Handlers(
            sampling=self._on_sampling if self._model_client is not None else None,
            elicitation=self._on_elicitation if self._elicitation_callback is not None else None,
            roots=self._on_roots if self._roots is not None else None,
        )

    # --- tools ------------------------------------------------------------------------------------

    async def _list_tools(self) -> list[ToolSchema]:
        conn = await self._connect()
        return [tool_schema(tool) for tool in await conn.tools(refresh=True)]

    async def list_mcp_tools(self) -> list[mt.Tool]:
        """Every tool as the server describes it (input and output schemas, annotations), with the
        tool overrides applied to names and descriptions."""
        conn = await self._connect()
        tools = await conn.tools(refresh=True)
        self._overrides.check_names([t.name for t in tools])
        out = []
        for tool in tools:
            presented = self._overrides.apply(tool_schema(tool))
            update: dict[str, Any] = {"name": presented["name"]}
            if presented.get("description") != tool_schema(tool).get("description"):
                update["description"] = presented.get("description")
            out.append(tool.model_copy(update=update))
        return out

    async def call_tool(
        self,
        name: str,
        arguments: Mapping[str, Any] | None = None,
        cancellation_token: CancellationToken | None = None,
        *,
        call_id: str | None = None,
        timeout: float | None = None,
        timeout_as_error: bool = False,
    ) -> ToolResult:
        """Call a tool by its presented name. Without `timeout`, the server params' request timeout
        applies; either way a timed-out call is cancelled on the server too."""
        if (
            timeout is None
            and cancellation_token is None
            and self._plain_names
            and (arguments is None or type(arguments) is dict)
            and _CALL_TIMEOUT.get() is None
        ):
            # The plain call (no timeout, token or overrides): what `Workbench.call_tool` and `_call_tool`
            # do for it, in this one frame around the SDK's call.
            conn = self._conn
            if conn is None or not conn.alive or conn.loop is not asyncio.get_running_loop() or not conn.tools_listed:
                conn = await self._listed()
            session = conn.session
            assert session is not None  # set before the connection is alive
            try:
                # The SDK copies the arguments into its request model before sending.
                result = await session.call_tool(
                    name, arguments if arguments is not None else {}, read_timeout_seconds=self._read_timeout
                )
            except MCPError as exc:
                return await self._refused(conn, name, exc, timeout_as_error)
            except RuntimeError as exc:
                # The SDK checks structured content against the tool's output schema.
                return error_result(name, str(exc))
            return tool_result(name, result)
        # The call sees its own explicit timeout (None included); setting it is skipped when it already holds.
        token = _CALL_TIMEOUT.set(timeout) if timeout is not None or _CALL_TIMEOUT.get() is not None else None
        try:
            return await super().call_tool(
                name,
                arguments,
                cancellation_token,
                call_id=call_id,
                timeout=timeout,
                timeout_as_error=timeout_as_error,
            )
        except _ReadTimeout:
            return self._read_timed_out(name, timeout_as_error)
        finally:
            if token is not None:
                _CALL_TIMEOUT.reset(token)

    def _read_timed_out(self, name: str, timeout_as_error: bool) -> ToolResult:
        message = f"tool {name!r} on MCP server {self._label!r} did not answer within {self._params.request_timeout} s"
        if timeout_as_error:
            return error_result(name, message)
        raise McpTimeoutError(self._label, message) from None

    async def _refused(self, conn: Connection, name: str, exc: MCPError, timeout_as_error: bool) -> ToolResult:
        """A plain call's SDK error: as `_call_tool` maps it, and a read timeout as `call_tool` reports it."""
        error = await conn.failed(exc, f"tools/call {name!r}")
        if isinstance(error, McpTimeoutError):
            return self._read_timed_out(name, timeout_as_error)
        if error.code == mt.CONNECTION_CLOSED:
            raise error from exc
        # The server refused this call (unknown tool, invalid arguments): the model sees why.
        return error_result(name, f"MCP error {error.code}: {error.message}")

    async def _call_tool(
        self, name: str, arguments: dict[str, Any], cancellation_token: CancellationToken | None, call_id: str | None
    ) -> ToolResult:
        # The path of calls with a timeout, token or overrides (plain calls stay in `call_tool`).
        conn = self._conn
        if conn is None or not conn.alive or conn.loop is not asyncio.get_running_loop() or not conn.tools_listed:
            conn = await self._listed()
        session = conn.session
        assert session is not None  # set before the connection is alive
        read_timeout = self._read_timeout
        explicit = _CALL_TIMEOUT.get()
        if explicit is not None:
            read_timeout = max(explicit, read_timeout or 0.0) + 1.0
        try:
            result = await session.call_tool(name, arguments, read_timeout_seconds=read_timeout)
        except MCPError as exc:
            error = await conn.failed(exc, f"tools/call {name!r}")
            if isinstance(error, McpTimeoutError):
                raise _ReadTimeout from None
            if error.code == mt.CONNECTION_CLOSED:
                raise error from exc
            # The server refused this call (unknown tool, invalid arguments): the model sees why.
            return error_result(name, f"MCP error {error.code}: {error.message}")
        except RuntimeError as exc:
            # The SDK checks structured content against the tool's output schema.
            return error_result(name, str(exc))
        return tool_result(name, result)

    # --- resources and prompts --------------------------------------------------------------------

    async def list_resources(self) -> list[mt.Resource]:
        """Every resource the server lists (all pages)."""
        conn = await self._connect()
        return await conn.request(
            "resources/list", lambda s: all_pages(s.list_resources, lambda r: r.resources, self._label)
        )

    async def list_resource_templates(self) -> list[mt.ResourceTemplate]:
        """Every resource template the server lists (all pages)."""
        conn = await self._connect()
        return await conn.request(
            "resources/templates/list",
            lambda s: all_pages(s.list_resource_templates, lambda r: r.resource_templates, self._label),
        )

    async def read_resource(self, uri: str) -> list[ResourceResultContent]:
        """The contents of a resource: text in `text`, binary in `data`."""
        if not isinstance(uri, str) or not uri:
            raise ConfigurationError("read_resource: uri must be a non-empty string")
        conn = await self._connect()
        result = await conn.request(f"resources/read {uri!r}", lambda s: s.read_resource(uri))
        return [resource_content(c) for c in result.contents]

    async def list_prompts(self) -> list[mt.Prompt]:
        """Every prompt the server lists (all pages)."""
        conn = await self._connect()
        return await conn.request("prompts/list", lambda s: all_pages(s.list_prompts, lambda r: r.prompts, self._label))

    async def get_prompt(self, name: str, arguments: Mapping[str, str] | None = None) -> PromptResult:
        """A prompt filled in with `arguments`, as ext messages."""
        if not isinstance(name, str) or not name:
            raise ConfigurationError("get_prompt: name must be a non-empty string")
        if arguments is not None and (
            not isinstance(arguments, Mapping) or not all(isinstance(v, str) for v in arguments.values())
        ):
            raise ConfigurationError("get_prompt: arguments must map argument names to strings")
        conn = await self._connect()
        args = dict(arguments) if arguments is not None else None
        result = await conn.request(f"prompts/get {name!r}", lambda s: s.get_prompt(name, args))
        return prompt_result(result)

    # --- requests from the server -----------------------------------------------------------------

    async def _on_sampling(
        self, context: ClientRequestContext, params: mt.CreateMessageRequestParams
    ) -> mt.CreateMessageResult | mt.CreateMessageResultWithTools | mt.ErrorData:
        client = self._model_client
        assert client is not None
        try:
            messages = sampling_messages(params)
            options = sampling_options(params)
            tools = sampling_tools(params)
        except (SamplingMappingError, ValidationError, ValueError) as exc:
            return mt.ErrorData(code=mt.INVALID_PARAMS, message=f"cannot map the sampling request: {exc}")
        try:
            result = await client.create(
                messages, tools=tools, tool_choice=sampling_tool_choice(params), options=options
            )
            return sampling_result(result, model_name(client), with_tools=bool(params.tools))
        except Exception as exc:  # the server gets an error answer; this process keeps going
            logger.warning("MCP server %r: sampling request failed: %s", self._label, type(exc).__name__)
            return mt.ErrorData(code=mt.INTERNAL_ERROR, message=f"sampling failed: {type(exc).__name__}: {exc}")

    async def _on_elicitation(
        self, context: ClientRequestContext, params: mt.ElicitRequestParams
    ) -> mt.ElicitResult | mt.ErrorData:
        callback = self._elicitation_callback
        assert callback is not None
        try:
            return await callback(params)
        except Exception as exc:
            logger.warning("MCP server %r: elicitation callback failed: %s", self._label, type(exc).__name__)
            return mt.ErrorData(code=mt.INTERNAL_ERROR, message=f"elicitation failed: {type(exc).__name__}: {exc}")

    async def _on_roots(self, context: ClientRequestContext) -> mt.ListRootsResult | mt.ErrorData:
        roots = self._roots
        try:
            values = await roots() if callable(roots) else roots
            return mt.ListRootsResult(roots=roots_of(values or []))
        except Exception as exc:
            logger.warning("MCP server %r: roots callback failed: %s", self._label, type(exc).__name__)
            return mt.ErrorData(code=mt.INTERNAL_ERROR, message=f"listing roots failed: {type(exc).__name__}: {exc}")

    # --- components -------------------------------------------------------------------------------

    def _undumpable_settings(self) -> dict[str, str]:
        settings = super()._undumpable_settings()
        if self._elicitation_callback is not None:
            settings["elicitation_callback"] = "a callable"
        if callable(self._roots):
            settings["roots"] = "a callable (a config holds a list of file:// URIs)"
        auth = getattr(self._params, "auth", None)
        if isinstance(auth, OAuthSettings):
            if auth.client_secret is not None:
                settings["server_params.auth.client_secret"] = (
                    "a secret a dump leaves out; name an environment variable in client_secret_env instead"
                )
            if auth.token_store is not None:
                settings["server_params.auth.token_store"] = (
                    "an object; a config names the default file store's token_dir instead"
                )
        elif auth is not None:
            settings["server_params.auth"] = "an httpx2.Auth object"
        env = getattr(self._params, "env", None)
        if env:
            settings["server_params.env"] = (
                f"values of {sorted(env)} are secrets a dump leaves out; name variables of this process in "
                "inherit_env instead"
            )
        return settings

    def _to_config(self) -> McpWorkbenchConfig:
        model_client = None
        if self._model_client is not None:
            dump = getattr(self._model_client, "dump_component", None)
            if dump is None:
                raise ComponentError("McpWorkbench.model_client is not a component and cannot be dumped")
            model_client = dump()
        roots = None
        if self._roots is not None and not callable(self._roots):
            roots = [str(r.uri) for r in roots_of(self._roots)]
        return McpWorkbenchConfig(
            server_params=self._params,
            tool_overrides=dict(self._overrides.items()),
            model_client=model_client,
            roots=roots,
        )

    @classmethod
    def _from_config(cls, config: McpWorkbenchConfig) -> McpWorkbench:
        model_client: ChatCompletionClient | None = None
        if config.model_client is not None:
            model_client = load_component(config.model_client)
        return cls(config.server_params, config.tool_overrides, model_client=model_client, roots=config.roots)

    def __repr__(self) -> str:
        return f"McpWorkbench({self._params!r})"


def _check_params(value: Any) -> ServerParams:
    if isinstance(value, (StdioServerParams, SseServerParams, StreamableHttpServerParams)):
        return value
    if isinstance(value, Mapping):
        try:
            return _PARAMS.validate_python(dict(value))
        except ValidationError as exc:
            details = "; ".join(
                f"{'.'.join(str(p) for p in e['loc']) or '<root>'}: {e['msg']}"
                for e in exc.errors(include_input=False, include_url=False)
            )
            raise ConfigurationError(f"McpWorkbench.server_params is invalid: {details}") from None
    raise ConfigurationError(
        "McpWorkbench.server_params must be StdioServerParams, SseServerParams or StreamableHttpServerParams, "
        f"got {type(value).__name__}"
    )
