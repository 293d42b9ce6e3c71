"""How to reach an MCP server: over stdio (a subprocess), SSE, or streamable HTTP."""

from __future__ import annotations

import os
import shlex
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Union
from urllib.parse import urlsplit, urlunsplit

import httpx2
from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_serializer, field_validator

from ext.core import ConfigurationError, resolve_secret

from ._oauth_settings import OAuthSettings, check_oauth

_HTTP_SCHEMES = ("http", "https")


def _check_url(value: str, field: str) -> str:
    parts = urlsplit(value)
    if parts.scheme not in _HTTP_SCHEMES or not parts.hostname:
        # The URL may carry a token in its query or userinfo: name the field, not the value.
        raise ValueError(f"{field} must be an absolute http:// or https:// URL")
    return value


def _safe_url(url: str) -> str:
    """The URL without userinfo, query or fragment, which may hold credentials."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    netloc = f"{host}:{parts.port}" if parts.port is not None else host
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


def _check_auth(value: Any) -> Any:
    value = check_oauth(value)
    if value is None or isinstance(value, (OAuthSettings, httpx2.Auth)) or callable(value):
        return value
    raise ValueError(
        "auth must be OAuthSettings, an httpx2.Auth (for example mcp.client.auth.OAuthClientProvider) "
        f"or a callable(request) -> request, got {type(value).__name__}"
    )


def _resolve_headers(headers: Mapping[str, SecretStr], headers_env: Mapping[str, str], owner: str) -> dict[str, str]:
    out = {name: value.get_secret_value() for name, value in headers.items()}
    for name, var in headers_env.items():
        if name in out:
            continue
        secret, _ = resolve_secret(None, var)
        if secret is None:
            raise ConfigurationError(f"{owner}.headers_env[{name!r}]: environment variable {var!r} is not set")
        out[name] = secret.get_secret_value()
    return out


class _Params(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, arbitrary_types_allowed=True)

    startup_timeout_seconds: float | None = Field(
        default=None,
        gt=0,
        description="Seconds to spawn or connect and finish the handshake; default: the request timeout.",
    )

    @property
    def startup_timeout(self) -> float | None:
        return self.startup_timeout_seconds if self.startup_timeout_seconds is not None else self.request_timeout

    def describe(self) -> str:
        """A short label for logs and errors, free of secrets."""
        raise NotImplementedError

    @property
    def request_timeout(self) -> float | None:
        """Seconds to wait for any single request's answer (and for start-up)."""
        raise NotImplementedError


class StdioServerParams(_Params):
    """Run the server as a subprocess and speak MCP over its stdin and stdout.

    The process gets the mcp SDK's safe default environment (HOME, LOGNAME, PATH, SHELL, TERM, USER on
    POSIX), the variables named in `inherit_env`, then `env`. Its stderr is logged at DEBUG on the
    `ext.tools.mcp` logger and its last lines are quoted in start-up and crash errors.
    """

    type: Literal["StdioServerParams"] = "StdioServerParams"
    command: str = Field(min_length=1, description="The executable to run, e.g. 'npx' or a path.")
    args: list[str] = Field(default_factory=list, description="Command-line arguments.")
    env: dict[str, SecretStr] | None = Field(
        default=None,
        description="Extra environment variables. Values are secrets: hidden from repr and left out of dumps "
        "(use inherit_env to refer to variables of this process in a config).",
    )
    inherit_env: list[str] = Field(
        default_factory=list, description="Names of variables copied from this process's environment."
    )
    cwd: str | None = Field(default=None, description="Working directory of the process.")
    read_timeout_seconds: float = Field(
        default=30.0,
        gt=0,
        description="Seconds to wait for each request's answer (and for start-up, unless startup_timeout_seconds).",
    )

    if TYPE_CHECKING:
        # pydantic turns plain strings into SecretStr; this tells type checkers they are accepted.
        def __init__(
            self,
            *,
            command: str,
            args: list[str] = ...,
            env: Mapping[str, str | SecretStr] | None = None,
            inherit_env: list[str] = ...,
            cwd: str | Path | None = None,
            read_timeout_seconds: float = 30.0,
            startup_timeout_seconds: float | None = None,
        ) -> None: ...

    @field_validator("cwd", mode="before")
    @classmethod
    def _path_to_str(cls, value: Any) -> Any:
        return str(value) if isinstance(value, Path) else value

    @property
    def request_timeout(self) -> float | None:
        return self.read_timeout_seconds

    def describe(self) -> str:
        # Paths are shortened to their last part: the label is for people reading an error.
        words = [Path(self.command).name] + [Path(a).name if os.path.isabs(a) else a for a in self.args]
        text = shlex.join(words)
        return text if len(text) <= 80 else text[:77] + "..."

    def environment(self) -> dict[str, str]:
        """The variables added to the SDK's defaults: `inherit_env` from this process, then `env`."""
        out = {name: os.environ[name] for name in self.inherit_env if name in os.environ}
        out.update({name: value.get_secret_value() for name, value in (self.env or {}).items()})
        return out

    def secret_values(self) -> list[str]:
        return [v.get_secret_value() for v in (self.env or {}).values() if v.get_secret_value()]


class _HttpParams(_Params):
    """What both HTTP transports take: the endpoint, headers, timeouts and auth."""

    url: str = Field(description="The server's endpoint, e.g. http://127.0.0.1:8000/sse (SSE) or .../mcp.")
    headers: dict[str, SecretStr] = Field(
        default_factory=dict, description="Extra request headers; values are secrets (left out of dumps)."
    )
    headers_env: dict[str, str] = Field(
        default_factory=dict, description="Header name -> environment variable holding its value."
    )
    timeout: float = Field(default=30.0, gt=0, description="Seconds for connecting and for each request's answer.")
    sse_read_timeout: float = Field(
        default=300.0, gt=0, description="Seconds an event stream may stay silent before it is dropped."
    )
    auth: Any = Field(
        default=None,
        description="OAuthSettings (OAuth 2.1, dumped without secrets), or an httpx2.Auth or callable(request) -> "
        "request (code: left out of dumps).",
    )

    @field_validator("url")
    @classmethod
    def _valid_url(cls, value: str) -> str:
        return _check_url(value, f"{cls.__name__}.url")

    @field_validator("auth", mode="before")
    @classmethod
    def _valid_auth(cls, value: Any) -> Any:
        return _check_auth(value)

    @field_serializer("auth")
    def _dump_auth(self, value: Any) -> Any:
        return value.model_dump(mode="json") if isinstance(value, OAuthSettings) else None

    @property
    def oauth(self) -> OAuthSettings | None:
        """The OAuth settings, when `auth` holds them."""
        return self.auth if isinstance(self.auth, OAuthSettings) else None

    @property
    def request_timeout(self) -> float | None:
        return self.timeout

    def describe(self) -> str:
        return _safe_url(self.url)

    def http_headers(self) -> dict[str, str]:
        """The headers to send, secrets resolved (raises naming a missing environment variable)."""
        return _resolve_headers(self.headers, self.headers_env, type(self).__name__)

    def secret_values(self) -> list[str]:
        values = [v.get_secret_value() for v in self.headers.values() if v.get_secret_value()]
        if isinstance(self.auth, OAuthSettings):
            values.extend(self.auth.secret_values())
        return values


class SseServerParams(_HttpParams):
    """Connect to a server over the legacy HTTP+SSE transport (a GET event stream plus POSTed messages); `url` is the
    SSE endpoint, e.g. http://127.0.0.1:8000/sse."""

    type: Literal["SseServerParams"] = "SseServerParams"
    api_key: SecretStr | None = Field(default=None, description="Sent as 'Authorization: Bearer <api_key>'.")
    api_key_env: str | None = Field(
        default=None, description="Environment variable to read api_key from when it is not given."
    )

    if TYPE_CHECKING:

        def __init__(
            self,
            *,
            url: str,
            api_key: str | SecretStr | None = None,
            api_key_env: str | None = None,
            headers: Mapping[str, str | SecretStr] = ...,
            headers_env: Mapping[str, str] = ...,
            timeout: float = 30.0,
            sse_read_timeout: float = 300.0,
            auth: OAuthSettings | Any = None,
            startup_timeout_seconds: float | None = None,
        ) -> None: ...

    def http_headers(self) -> dict[str, str]:
        out = super().http_headers()
        key = self.api_key
        if key is None and self.api_key_env:
            key, _ = resolve_secret(None, self.api_key_env)
            if key is None:
                raise ConfigurationError(
                    f"SseServerParams.api_key_env: environment variable {self.api_key_env!r} is not set"
                )
        if key is not None:
            out["Authorization"] = f"Bearer {key.get_secret_value()}"
        return out

    def secret_values(self) -> list[str]:
        values = super().secret_values()
        if self.api_key is not None and self.api_key.get_secret_value():
            values.append(self.api_key.get_secret_value())
        return values


class StreamableHttpServerParams(_HttpParams):
    """Connect to a server over the streamable HTTP transport (one endpoint, POST plus optional event streams); `url`
    is the MCP endpoint, e.g. http://127.0.0.1:8000/mcp."""

    type: Literal["StreamableHttpServerParams"] = "StreamableHttpServerParams"
    terminate_on_close: bool = Field(default=True, description="Send DELETE to end the server session on stop.")

    if TYPE_CHECKING:

        def __init__(
            self,
            *,
            url: str,
            headers: Mapping[str, str | SecretStr] = ...,
            headers_env: Mapping[str, str] = ...,
            timeout: float = 30.0,
            sse_read_timeout: float = 300.0,
            terminate_on_close: bool = True,
            auth: OAuthSettings | Any = None,
            startup_timeout_seconds: float | None = None,
        ) -> None: ...


ServerParams = Union[StdioServerParams, SseServerParams, StreamableHttpServerParams]
"""Any of the three ways to reach a server."""
