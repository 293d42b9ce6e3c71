"""`OllamaChatCompletionClient`: ext's chat client over Ollama's `/api/chat`.

ext-core's base does validation, options merging, retries, cancellation and output parsing; this module turns the
configuration into an HTTP client set up as the ollama SDK sets up its own (host forms and `OLLAMA_HOST`,
`OLLAMA_API_KEY`, headers, timeout) and sends one request. It sends `/api/chat` itself rather than through
`ollama.AsyncClient.chat`: the SDK's `Tool` model keeps only `type`, `items`, `description` and `enum` of each
property (a nested object loses its properties and `required`), and it builds a pydantic model for every streamed
line. Errors are the SDK's types (see `_errors`).
"""

from __future__ import annotations

import functools
import ipaddress
import logging
import os
import platform
import urllib.parse
from collections.abc import AsyncGenerator, Mapping
from importlib.metadata import PackageNotFoundError, version
from typing import Any, ClassVar, NoReturn

import httpx
from pydantic import BaseModel, SecretStr

from ext.core import (
    BaseChatCompletionClient,
    ChatOptions,
    ChatRequest,
    ComponentError,
    ConfigurationError,
    CreateResult,
    EventStream,
    ModelInfo,
    PromptToolPlan,
    RetryPolicy,
    ToolCalling,
    config_from_arguments,
    json_dumps_compact,
    json_loads,
    plan_prompt_tools,
    resolve_tool_calling,
)

from .__about__ import __version__
from ._config import DEFAULT_HOST, DEFAULT_TIMEOUT, OllamaClientConfig, ThinkSetting, check_option_names
from ._errors import OllamaConnectionError, OllamaModelNotFoundError, OllamaResponseError, OllamaTimeoutError
from ._mapping import (
    OLLAMA_MODELS,
    RESERVED_BODY_KEYS,
    OllamaWireSettings,
    StreamState,
    check_tool_choice,
    map_request,
    map_response,
)
from ._retry import classify_ollama_error

logger = logging.getLogger(__name__)

__all__ = ["OllamaChatCompletionClient", "parse_host"]

CHAT_PATH = "/api/chat"
# Reachability should be known fast even when the read timeout is long (a model load takes a while).
MAX_CONNECT_TIMEOUT = 10.0


def parse_host(host: str | None) -> str:
    """Ollama's base URL from `host` in any form the ollama SDK takes (`host`, `host:port`, `:port`, a URL with
    or without port and path, IPv6 in brackets): port 11434 unless the scheme or the text says otherwise. An
    empty value is `DEFAULT_HOST`."""
    text = (host or "").strip() or DEFAULT_HOST
    port = 11434
    scheme, _, hostport = text.partition("://")
    if not hostport:
        scheme, hostport = "http", text
    elif scheme == "http":
        port = 80
    elif scheme == "https":
        port = 443
    split = urllib.parse.urlsplit(f"{scheme}://{hostport}")
    name = split.hostname or "localhost"
    try:
        port = split.port or port
    except ValueError:
        raise ConfigurationError(f"host: {host!r} has an invalid port") from None
    try:
        if isinstance(ipaddress.ip_address(name), ipaddress.IPv6Address):
            name = f"[{name}]"
    except ValueError:
        pass
    path = split.path.strip("/")
    return f"{scheme}://{name}:{port}/{path}" if path else f"{scheme}://{name}:{port}"


@functools.lru_cache(maxsize=1)
def _user_agent() -> str:
    try:
        sdk = version("ollama")
    except PackageNotFoundError:  # pragma: no cover - a dependency
        sdk = "unknown"
    return (
        f"ext-models-ollama/{__version__} ollama-python/{sdk} "
        f"({platform.machine()} {platform.system().lower()}) Python/{platform.python_version()}"
    )


class OllamaChatCompletionClient(BaseChatCompletionClient):
    """A chat client for a local or remote Ollama server (`/api/chat`).

    No key: a remote Ollama behind a proxy gets its credentials through `headers_env` (or `headers`, or
    `OLLAMA_API_KEY` as with the SDK). See the package README for every option and for the mapping rules.
    """

    provider_name = "ollama"
    model_table = OLLAMA_MODELS
    # `ollama serve` accepts a turn whose tool calls go unanswered (it checks no pairing); a result without its
    # call is still refused by ext-core, since Ollama would pair it with the wrong call.
    tool_results_required: ClassVar[bool] = False
    component_config_schema: ClassVar[type[BaseModel]] = OllamaClientConfig
    component_provider_override: ClassVar[str | None] = "ext.models.ollama.OllamaChatCompletionClient"

    def __init__(
        self,
        model: str,
        *,
        host: str | None = None,
        temperature: float | None = None,
        top_p: float | None = None,
        top_k: int | None = None,
        num_ctx: int | None = None,
        num_predict: int | None = None,
        repeat_penalty: float | None = None,
        seed: int | None = None,
        options: Mapping[str, Any] | None = None,
        think: ThinkSetting | None = None,
        tool_calling: ToolCalling | None = None,
        keep_alive: float | str | None = None,
        headers: Mapping[str, str | SecretStr] | None = None,
        headers_env: Mapping[str, str] | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        max_retries: int = 3,
        model_info: ModelInfo | Mapping[str, Any] | None = None,
        token_limit: int | None = None,
        default_options: ChatOptions | Mapping[str, Any] | None = None,
        retry_policy: RetryPolicy | None = None,
    ) -> None:
        owner = type(self).__name__
        config = config_from_arguments(OllamaClientConfig, locals(), owner)
        environ = os.environ
        base_url = parse_host(config.host if config.host is not None else environ.get("OLLAMA_HOST"))
        wire_headers = self._wire_headers(config, environ, owner)
        model_info = config.model_info
        if config.tool_calling == "native":  # asked for Ollama's tools: the model is taken to have them
            model_info = {**(model_info or {}), "function_calling": True}
        super().__init__(
            model=config.model,
            model_info=model_info,
            token_limit=config.token_limit or config.num_ctx,
            default_options=config.default_chat_options(),
            max_retries=config.max_retries,
            retry_policy=retry_policy,
        )
        self._retry = self._retry.with_classifiers([classify_ollama_error])
        self._config = config
        self._host = base_url
        self._wire = OllamaWireSettings(
            options=config.ollama_options(), think=config.think, keep_alive=config.keep_alive
        )
        self._http = httpx.AsyncClient(
            base_url=base_url,
            headers=wire_headers,
            timeout=httpx.Timeout(config.timeout, connect=min(config.timeout, MAX_CONNECT_TIMEOUT)),
            follow_redirects=True,
        )

    @staticmethod
    def _wire_headers(config: OllamaClientConfig, environ: Mapping[str, str], owner: str) -> dict[str, str]:
        headers = {"content-type": "application/json", "accept": "application/json", "user-agent": _user_agent()}
        for name, secret in (config.headers or {}).items():
            headers[name.lower()] = secret.get_secret_value()
        for name, variable in (config.headers_env or {}).items():
            value = environ.get(variable)
            if not value:
                raise ConfigurationError(
                    f"{owner}: headers_env: header {name!r} is read from the environment variable {variable}, "
                    "which is not set"
                )
            if any(c in value for c in "\r\n\0"):
                raise ConfigurationError(f"{owner}: headers_env: {variable} (header {name!r}) holds a line break")
            headers[name.lower()] = value
        api_key = environ.get("OLLAMA_API_KEY")
        if api_key and "authorization" not in headers:  # as the ollama SDK does
            headers["authorization"] = f"Bearer {api_key}"
        return headers

    @property
    def host(self) -> str:
        """The Ollama server's base URL requests go to."""
        return self._host

    @property
    def http_client(self) -> httpx.AsyncClient:
        """The HTTP client (closed by `close()`)."""
        return self._http

    # --- the provider's part ---------------------------------------------------------------------

    def _tool_calling_for(self, model: str, info: ModelInfo) -> ToolCalling:
        return resolve_tool_calling(self._config.tool_calling, native_tools=info.function_calling)

    def _plan(self, request: ChatRequest) -> PromptToolPlan | None:
        mode = self._tool_calling_for(request.model, self.info_for(request.model))
        return None if mode == "native" else plan_prompt_tools(request, mode)

    def _check_request(self, request: ChatRequest) -> None:
        # At the prompt level a forced choice is the system text's (and, constrained, the schema's) to enforce.
        native = self._tool_calling_for(request.model, self.info_for(request.model)) == "native"
        if request.tool_choice != "auto" and native:
            check_tool_choice(request)
        if request.extra:
            reserved = sorted(RESERVED_BODY_KEYS & request.extra.keys())
            if reserved:
                raise ConfigurationError(
                    f"extra_create_args: {reserved} are set by the client (use messages, tools, json_output)"
                )
            options = request.extra.get("options")
            if options is not None:
                if not isinstance(options, Mapping):
                    raise ConfigurationError("extra_create_args.options must be a mapping of Ollama options")
                try:
                    check_option_names(dict(options), "extra_create_args.options")
                except ValueError as exc:
                    raise ConfigurationError(str(exc)) from None

    async def _create(self, request: ChatRequest) -> CreateResult:
        plan = self._plan(request)
        result = await self._chat(request, plan)
        return result if plan is None else plan.read(result)

    async def _chat(self, request: ChatRequest, plan: PromptToolPlan | None) -> CreateResult:
        body = json_dumps_compact(map_request(request, self._wire, stream=False, plan=plan))
        try:
            response = await self._http.post(CHAT_PATH, content=body)
        except httpx.HTTPError as exc:
            self._raise_transport(exc)
        if response.status_code >= 400:
            self._raise_status(response.status_code, response.content, response.headers, request.model)
        try:
            data = json_loads(response.content)
        except ValueError as exc:
            raise self._malformed(exc, response.status_code) from None
        if not isinstance(data, dict):
            raise self._malformed(TypeError("the reply is not a JSON object"), response.status_code)
        error = data.get("error")
        if error:
            raise OllamaResponseError(str(error), response.status_code, host=self._host, headers=response.headers)
        return map_response(data)

    async def _open_events(self, request: ChatRequest) -> EventStream:
        plan = self._plan(request)
        if plan is not None and plan.tools:
            return EventStream.of_result(plan.read(await self._chat(request, plan)))
        body = json_dumps_compact(map_request(request, self._wire, stream=True, plan=plan))
        http_request = self._http.build_request("POST", CHAT_PATH, content=body)
        try:
            response = await self._http.send(http_request, stream=True)
        except httpx.HTTPError as exc:
            self._raise_transport(exc)
        if response.status_code >= 400:
            try:
                content = await response.aread()
            except httpx.HTTPError as exc:
                self._raise_transport(exc)
            finally:
                await response.aclose()
            self._raise_status(response.status_code, content, response.headers, request.model)
        state = StreamState()
        parts = self._parts(response)

        def translate(exc: Exception) -> BaseException | None:
            if isinstance(exc, httpx.HTTPError):
                return self._transport_error(exc)
            if isinstance(exc, ValueError) and not isinstance(exc, OllamaResponseError):
                return self._malformed(exc, response.status_code)
            return None

        async def close() -> None:
            # Closing before the end closes the connection: the server sees the client go away.
            try:
                await parts.aclose()
            finally:
                await response.aclose()

        return EventStream(parts, state.handle, state.result, close, translate)

    async def _parts(self, response: httpx.Response) -> AsyncGenerator[dict[str, Any], None]:
        """The NDJSON lines of a streamed reply, parsed. A line with `error` raises `OllamaResponseError`."""
        pending = b""
        async for data in response.aiter_bytes():
            if pending:
                data = pending + data
                pending = b""
            if data[-1:] == b"\n" and data.count(b"\n") == 1:  # the common case: one whole line
                lines = [data]
            else:
                lines = data.split(b"\n")
                pending = lines.pop()
            for line in lines:
                if line.strip():
                    yield self._part(line, response)
        if pending.strip():
            yield self._part(pending, response)

    def _part(self, line: bytes, response: httpx.Response) -> dict[str, Any]:
        part = json_loads(line)
        if type(part) is not dict:
            raise ValueError(f"a line of the stream is a JSON {type(part).__name__}, not an object")
        if "error" in part:
            raise OllamaResponseError(str(part["error"]), -1, host=self._host, headers=response.headers)
        return part

    # --- errors ------------------------------------------------------------------------------------

    def _transport_error(self, exc: httpx.HTTPError) -> Exception:
        host = self._host
        if isinstance(exc, httpx.TimeoutException):
            timeout = self._config.timeout
            phase = "connect" if isinstance(exc, httpx.ConnectTimeout) else "answer"
            return OllamaTimeoutError(
                f"Ollama at {host} did not {phase} within the client's timeout ({type(exc).__name__})",
                host=host,
                timeout=timeout,
            )
        if isinstance(exc, httpx.ConnectError):
            return OllamaConnectionError(
                f"cannot connect to Ollama at {host} ({exc}); is `ollama serve` running there? "
                "Set host= or OLLAMA_HOST to where it listens",
                host=host,
            )
        return OllamaConnectionError(
            f"the connection to Ollama at {host} broke off before the reply ended ({type(exc).__name__}: {exc})",
            host=host,
        )

    def _raise_transport(self, exc: httpx.HTTPError) -> NoReturn:
        raise self._transport_error(exc) from exc

    def _malformed(self, exc: Exception, status: int) -> OllamaResponseError:
        return OllamaResponseError(
            f"the reply from Ollama at {self._host} is not Ollama's JSON: {exc}", status, host=self._host
        )

    def _raise_status(self, status: int, content: bytes, headers: httpx.Headers, model: str) -> NoReturn:
        text = content.decode("utf-8", "replace")
        try:
            data = json_loads(content)
            error = str(data["error"]) if isinstance(data, dict) and "error" in data else text
        except ValueError:
            error = text
        if status == 404 and "not found" in error and model in error:
            raise OllamaModelNotFoundError(model, host=self._host, server_error=error, headers=headers)
        raise OllamaResponseError(error or f"HTTP {status}", status, host=self._host, headers=headers)

    # --- lifecycle and components ------------------------------------------------------------------

    async def _close(self) -> None:
        await self._http.aclose()

    def _to_config(self) -> BaseModel:
        if self._config.headers:
            names = sorted(self._config.headers)
            raise ComponentError(
                f"{type(self).__name__}: headers {names} were given as values, which a dump never holds; give them "
                f"as headers_env={{name: 'ENV_VAR'}} (the value read from the environment) to dump this client"
            )
        return self._config

    def __repr__(self) -> str:
        return f"{type(self).__name__}(model={self.model!r}, host={self._host!r})"
