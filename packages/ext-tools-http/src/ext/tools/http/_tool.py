"""`HttpTool`: one REST endpoint as a tool, over one pooled httpx client."""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import math
import os
import re
import string
from collections.abc import Iterator, Mapping
from types import TracebackType
from typing import Any, Literal, cast

import httpx
from pydantic import BaseModel, ConfigDict, Field, SecretStr

from ext.core import (
    CancellationToken,
    ClientClosedError,
    ConfigurationError,
    SchemaTool,
    ToolSchema,
    check_tool_name,
    normalize_parameters,
    run_cancellable,
)

from ._errors import (
    HttpConnectionError,
    HttpResponseFormatError,
    HttpStatusError,
    HttpTimeoutError,
    HttpToolError,
    excerpt,
)
from ._schema import compile_schema
from ._url import PathTemplate, encode_query

logger = logging.getLogger(__name__)

HttpMethod = Literal["GET", "POST", "PUT", "PATCH", "DELETE"]
ReturnType = Literal["text", "json"]

_METHODS: frozenset[str] = frozenset(("GET", "POST", "PUT", "PATCH", "DELETE"))
_QUERY_METHODS: frozenset[str] = frozenset(("GET", "DELETE"))
_HEADER_NAME = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+\Z")
_BAD_HOST_CHARS = frozenset("/?#@[]\\ \t\r\n%")


class HttpToolConfig(BaseModel):
    """The configuration of an `HttpTool` (what `dump_component()` writes, without secrets)."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(description="The tool's name as the model sees it: 1 to 64 letters, digits, '_' or '-'.")
    host: str = Field(description="Host name or IP address of the server, without scheme, port or path.")
    port: int = Field(ge=1, le=65535, description="TCP port, 1 to 65535.")
    json_schema: dict[str, Any] = Field(
        description="JSON Schema of the arguments; must be an object schema. Arguments are validated against it "
        "before any request, and every `{param}` in `path` must be one of its properties."
    )
    description: str | None = Field(
        default=None,
        description="What the tool does, for the model. Default: the schema's description, else the method and path.",
    )
    scheme: Literal["http", "https"] = Field(default="http", description="`http` or `https`.")
    path: str = Field(
        default="/",
        description="Path starting with '/'; `{param}` placeholders are filled, percent-encoded, from the argument "
        "of the same name. No '?' or '#': arguments make the query string.",
    )
    method: HttpMethod = Field(
        default="POST",
        description="GET and DELETE send the other arguments as the query string; POST, PUT and PATCH as a JSON body.",
    )
    headers: dict[str, SecretStr] | None = Field(
        default=None,
        description="Headers sent with every request. Every value is treated as a secret: never logged, never in "
        "repr or errors, and left out of dumps (use `headers_env` for headers that must survive a dump).",
    )
    headers_env: dict[str, str] | None = Field(
        default=None,
        description="Headers read from the environment when the tool is built: header name -> an environment "
        'variable name holding the whole value (`"API_TOKEN"`), or a template with `$VAR`/`${VAR}` references '
        '(`"Bearer ${API_TOKEN}"`). Kept in dumps; the values are not.',
    )
    return_type: ReturnType = Field(
        default="text", description="`text`: the body as a string; `json`: the body parsed as JSON."
    )
    timeout: float = Field(default=5.0, gt=0, description="Seconds the whole request may take, > 0.")


class HttpTool(SchemaTool[HttpToolConfig]):
    """Call one HTTP endpoint as a tool.

    Sends to `scheme://host:port` + `path`, with `{param}` placeholders filled (percent-encoded) from
    the arguments of the same name; the other arguments go as the query string for GET and DELETE
    and as a JSON body for POST, PUT and PATCH. Arguments are validated against `json_schema` before
    any request. Returns the body as text, or parsed JSON with `return_type="json"`.

    The tool keeps one pooled `httpx.AsyncClient`, created on first use; release it with `close()`
    or `async with tool:`. A status outside 2xx raises `HttpStatusError`; a non-JSON body with
    `return_type="json"` raises `HttpResponseFormatError`; `timeout` raises `HttpTimeoutError`.
    """

    component_config_schema = HttpToolConfig
    component_provider_override = "ext.tools.http.HttpTool"

    def __init__(
        self,
        name: str,
        host: str,
        port: int,
        json_schema: Mapping[str, Any],
        description: str | None = None,
        scheme: str = "http",
        path: str = "/",
        method: str = "POST",
        headers: Mapping[str, str | SecretStr] | None = None,
        return_type: str = "text",
        timeout: float = 5.0,
        *,
        headers_env: Mapping[str, str] | None = None,
    ) -> None:
        self._name = check_tool_name(name)
        self._host = _check_host(host)
        self._port = _check_port(port)
        self._scheme = _check_choice("scheme", scheme, ("http", "https"), lower=True)
        self._method = _check_choice("method", method, tuple(sorted(_METHODS)), upper=True)
        self._return_type = _check_choice("return_type", return_type, ("text", "json"))
        self._timeout = _check_timeout(timeout)
        if description is not None and not isinstance(description, str):
            raise ConfigurationError(f"description must be a string, got {type(description).__name__}")
        self._check_args = compile_schema(json_schema)
        self._json_schema = dict(json_schema)
        self._template = _check_path(path, self._json_schema)
        self._explicit_headers = _check_headers(headers)
        env_headers = _resolve_env_headers(headers_env)
        clash = {k.lower() for k in self._explicit_headers} & {k.lower() for k in env_headers}
        if clash:
            raise ConfigurationError(f"headers and headers_env both set header {sorted(clash)[0]!r}; set it once")
        self._description = (
            description
            if description is not None
            else str(self._json_schema.get("description") or f"Send an HTTP {self._method} request to {path}.")
        )
        # What a dump holds: the arguments as checked (scheme, method and return type in their canonical case).
        self._config = HttpToolConfig(
            name=self._name,
            host=self._host,
            port=self._port,
            json_schema=self._json_schema,
            description=description,
            scheme=cast("Literal['http', 'https']", self._scheme),
            path=self._template.template,
            method=cast("HttpMethod", self._method),
            headers=dict(self._explicit_headers) or None,
            headers_env=dict(headers_env) if headers_env else None,
            return_type=cast("ReturnType", self._return_type),
            timeout=self._timeout,
        )
        host_part = f"[{self._host}]" if ":" in self._host else self._host
        self._base_url = f"{self._scheme}://{host_part}:{self._port}"
        self._send_headers: dict[str, str] = {k: v.get_secret_value() for k, v in self._explicit_headers.items()}
        self._send_headers.update(env_headers)
        if self._return_type == "json" and not any(k.lower() == "accept" for k in self._send_headers):
            self._send_headers["Accept"] = "application/json"
        self._query_method = self._method in _QUERY_METHODS
        self._schema: ToolSchema = {
            "name": self._name,
            "description": self._description,
            "parameters": normalize_parameters(self._json_schema),
        }
        self._http: httpx.AsyncClient | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._closed = False

    # -- Tool protocol (name, description, schema and return_value_as_string: SchemaTool) ----------------------

    @property
    def url(self) -> str:
        """The endpoint with its path template, e.g. `http://127.0.0.1:8000/users/{user_id}`."""
        return self._base_url + self._template.template

    @property
    def method(self) -> str:
        return self._method

    @property
    def return_type(self) -> str:
        return self._return_type

    @property
    def timeout(self) -> float:
        return self._timeout

    async def run_json(
        self, args: Mapping[str, Any], cancellation_token: CancellationToken | None = None, call_id: str | None = None
    ) -> Any:
        """Validate `args`, send the request and return the body (text, or parsed JSON)."""
        self._check_args_object(args)
        self._check_args(args, self._name)
        template = self._template
        url = self._base_url + template.fill(args, self._name)
        rest = {k: v for k, v in args.items() if k not in template.names} if template.names else dict(args)
        if self._query_method:
            query = encode_query(rest)
            if query:
                url = f"{url}?{query}"
            return await run_cancellable(self._send(url, None), cancellation_token)
        return await run_cancellable(self._send(url, rest), cancellation_token)

    # -- lifecycle ----------------------------------------------------------------------------------------------

    async def close(self) -> None:
        """Close the connection pool. Idempotent; the tool cannot be used afterwards."""
        self._closed = True
        client, self._http = self._http, None
        self._loop = None
        if client is not None:
            await client.aclose()

    async def __aenter__(self) -> HttpTool:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    def __repr__(self) -> str:
        return f"HttpTool(name={self._name!r}, method={self._method!r}, url={self.url!r})"

    # -- request ------------------------------------------------------------------------------------------------

    def _client(self) -> httpx.AsyncClient:
        if self._closed:
            raise ClientClosedError(f"HttpTool {self._name!r} is closed")
        loop = asyncio.get_running_loop()
        client = self._http
        if client is None or self._loop is not loop:
            # Pooled connections belong to the loop that opened them; a new loop needs a new pool.
            client = httpx.AsyncClient(
                headers=self._send_headers, timeout=httpx.Timeout(self._timeout), follow_redirects=False
            )
            self._http, self._loop = client, loop
        return client

    async def _send(self, url: str, body: dict[str, Any] | None) -> Any:
        client = self._client()
        request = client.build_request(self._method, url, json=body)
        task = asyncio.current_task()
        assert task is not None  # run_json is only ever awaited inside a task
        cancelling = task.cancelling() if hasattr(task, "cancelling") else 0
        expired = False

        def expire() -> None:
            nonlocal expired
            expired = True
            task.cancel()

        # httpx's timeout bounds each phase (connect, each read...); this bounds the whole call, so a
        # server that trickles bytes cannot hold a tool call past `timeout`.
        handle = asyncio.get_running_loop().call_later(self._timeout, expire)
        try:
            response = await client.send(request)
        except asyncio.CancelledError:
            if expired and _uncancel(task, cancelling):
                raise self._timeout_error(request) from None
            raise
        except httpx.TimeoutException as exc:
            raise self._timeout_error(request) from exc
        except httpx.TransportError as exc:
            raise HttpConnectionError(
                f"HttpTool {self._name!r}: {self._method} {_safe_url(request)} failed: {type(exc).__name__}: {exc}"
            ) from exc
        except httpx.RequestError as exc:
            raise HttpToolError(
                f"HttpTool {self._name!r}: {self._method} {_safe_url(request)} failed: {type(exc).__name__}: {exc}"
            ) from exc
        finally:
            handle.cancel()
        status = response.status_code
        logger.debug("HttpTool %s: %s %s -> %d", self._name, self._method, self._template.template, status)
        if not 200 <= status < 300:
            body_excerpt = excerpt(response.text)
            raise HttpStatusError(
                f"HttpTool {self._name!r}: {self._method} {_safe_url(request)} returned HTTP {status} "
                f"{response.reason_phrase}: {body_excerpt}",
                request=request,
                response=response,
                body_excerpt=body_excerpt,
            )
        if self._return_type == "text":
            return response.text
        if not response.content:
            return None
        try:
            return response.json()
        except ValueError:  # JSONDecodeError and UnicodeDecodeError
            body_excerpt = excerpt(response.text)
            content_type = response.headers.get("content-type", "none")
            raise HttpResponseFormatError(
                f"HttpTool {self._name!r}: {self._method} {_safe_url(request)} returned a body that is not JSON "
                f"(content-type {content_type}) although return_type='json': {body_excerpt}",
                body_excerpt=body_excerpt,
            ) from None

    def _timeout_error(self, request: httpx.Request) -> HttpTimeoutError:
        return HttpTimeoutError(
            f"HttpTool {self._name!r}: {self._method} {_safe_url(request)} did not complete within {self._timeout} s"
        )


def _uncancel(task: asyncio.Task[Any], cancelling: int) -> bool:
    """Undo our own cancel; True when nobody else cancelled the task meanwhile."""
    uncancel = getattr(task, "uncancel", None)
    if uncancel is None:  # Python 3.10: no cancel counting
        return True
    return bool(uncancel() <= cancelling)


def _safe_url(request: httpx.Request) -> str:
    # Without the query string and cut short: argument values can be long. Header values never appear
    # in a URL, and HttpTool never puts user info in one.
    return excerpt(str(request.url.copy_with(query=None)), 160)


def _check_choice(
    field: str, value: object, choices: tuple[str, ...], *, lower: bool = False, upper: bool = False
) -> str:
    if isinstance(value, str):
        normal = value.lower() if lower else value.upper() if upper else value
        if normal in choices:
            return normal
    raise ConfigurationError(f"{field} must be one of {', '.join(repr(c) for c in choices)}, got {value!r}")


def _check_host(host: object) -> str:
    if not isinstance(host, str) or not host.strip():
        raise ConfigurationError(f"host must be a non-empty host name or IP address, got {host!r}")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    try:
        ipaddress.ip_address(host)
    except ValueError:
        pass
    else:
        return host
    if "://" in host or any(c in _BAD_HOST_CHARS for c in host) or ":" in host:
        # Never echo it: a host with user info ('user:pass@') would leak the password.
        raise ConfigurationError(
            "host must be a bare host name or IP address, without scheme, user info, port or path "
            "(set scheme, port and path separately)"
        )
    return host


def _check_port(port: object) -> int:
    if isinstance(port, bool) or not isinstance(port, int) or not 1 <= port <= 65535:
        raise ConfigurationError(f"port must be an integer from 1 to 65535, got {port!r}")
    return port


def _check_timeout(timeout: object) -> float:
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not math.isfinite(timeout) or timeout <= 0:
        raise ConfigurationError(f"timeout must be a number of seconds > 0, got {timeout!r}")
    return float(timeout)


def _check_path(path: object, json_schema: Mapping[str, Any]) -> PathTemplate:
    if not isinstance(path, str) or not path.startswith("/"):
        raise ConfigurationError(f"path must be a string starting with '/', got {path!r}")
    if "?" in path or "#" in path:
        raise ConfigurationError(
            f"path must not contain '?' or '#', got {path!r}: arguments become the query string (GET, DELETE)"
        )
    if any(c.isspace() or ord(c) < 32 for c in path):
        raise ConfigurationError(f"path must not contain whitespace or control characters, got {path!r}")
    template = PathTemplate(path)
    properties = json_schema.get("properties") or {}
    missing = sorted(name for name in template.names if name not in properties)
    if missing:
        raise ConfigurationError(
            f"path: placeholder {{{missing[0]}}} in {path!r} is not a property of json_schema "
            f"(properties: {', '.join(sorted(properties)) or 'none'})"
        )
    return template


def _check_header(name: object, value_ok: bool, field: str) -> None:
    if not isinstance(name, str) or not _HEADER_NAME.match(name):
        raise ConfigurationError(f"{field}: {name!r} is not a valid HTTP header name")
    if not value_ok:
        # The value may be a secret: name the header only.
        raise ConfigurationError(f"{field}[{name!r}]: the value must be a string without CR, LF or NUL characters")


def _valid_value(value: object) -> bool:
    return isinstance(value, str) and not any(c in value for c in "\r\n\0")


def _check_headers(headers: Mapping[str, str | SecretStr] | None) -> dict[str, SecretStr]:
    if headers is None:
        return {}
    if not isinstance(headers, Mapping):
        raise ConfigurationError(f"headers must be a mapping of header name to value, got {type(headers).__name__}")
    out: dict[str, SecretStr] = {}
    seen: set[str] = set()
    for name, value in headers.items():
        secret = value if isinstance(value, SecretStr) else SecretStr(value) if isinstance(value, str) else None
        _check_header(name, secret is not None and _valid_value(secret.get_secret_value()), "headers")
        assert secret is not None
        if name.lower() in seen:
            raise ConfigurationError(f"headers: {name!r} is given twice (header names are case-insensitive)")
        seen.add(name.lower())
        out[name] = secret
    return out


def _resolve_env_headers(headers_env: Mapping[str, str] | None) -> dict[str, str]:
    if not headers_env:
        return {}
    if not isinstance(headers_env, Mapping):
        raise ConfigurationError(
            f"headers_env must be a mapping of header name to environment variable, got {type(headers_env).__name__}"
        )
    env = os.environ
    out: dict[str, str] = {}
    for name, ref in headers_env.items():
        _check_header(name, True, "headers_env")
        if not isinstance(ref, str) or not ref:
            raise ConfigurationError(
                f"headers_env[{name!r}] must be an environment variable name or a '$VAR' template, got {ref!r}"
            )
        if "$" in ref:
            try:
                value = string.Template(ref).substitute(_NonEmptyEnv(env))
            except KeyError as exc:
                raise ConfigurationError(
                    f"headers_env[{name!r}]: environment variable {exc.args[0]!r} is not set or empty"
                ) from None
            except ValueError:
                raise ConfigurationError(f"headers_env[{name!r}]: invalid '$' placeholder in {ref!r}") from None
        else:
            value = env.get(ref, "")
            if not value:
                raise ConfigurationError(f"headers_env[{name!r}]: environment variable {ref!r} is not set or empty")
        if not _valid_value(value):
            raise ConfigurationError(
                f"headers_env[{name!r}]: the value from the environment contains CR, LF or NUL characters"
            )
        out[name] = value
    return out


class _NonEmptyEnv(Mapping[str, str]):
    """`os.environ` seen through `string.Template`: an empty variable counts as missing."""

    def __init__(self, env: Mapping[str, str]) -> None:
        self._env = env

    def __getitem__(self, key: str) -> str:
        value = self._env[key]
        if not value:
            raise KeyError(key)
        return value

    def __iter__(self) -> Iterator[str]:
        return iter(self._env)

    def __len__(self) -> int:
        return len(self._env)
