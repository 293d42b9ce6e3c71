"""The streamable-HTTP app: `SessionManager` at one path, behind the SDK's transport security (DNS-rebinding
protection: Host and Origin checked against allow-lists), an optional bearer-token check (the SDK's bearer middleware
over a `TokenVerifier`: a fixed token, or any verifier such as a JWT one), and the OAuth protected-resource metadata
(RFC 9728, the SDK's routes) when the server names its authorization servers.

DNS-rebinding protection is on by default when the server binds a loopback address: a web page the user visits
cannot make the browser talk to it through a rebound name. For another address, pass the names clients use
(`allowed_hosts`), or `allowed_hosts=["*"]` to turn the check off knowingly.
"""

from __future__ import annotations

import contextlib
import hmac
from collections.abc import AsyncIterator, Sequence
from typing import Any

from mcp.server.auth.middleware.auth_context import AuthContextMiddleware
from mcp.server.auth.middleware.bearer_auth import BearerAuthBackend, RequireAuthMiddleware
from mcp.server.auth.provider import AccessToken, TokenVerifier
from mcp.server.auth.routes import build_resource_metadata_url, create_protected_resource_routes
from mcp.server.transport_security import TransportSecuritySettings
from pydantic import AnyHttpUrl, SecretStr
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.authentication import AuthenticationMiddleware
from starlette.routing import BaseRoute, Route

from ext.core import ConfigurationError

from ._memory_store import MemorySessionStore
from ._server import McpServer
from ._sessions import SessionManager, SessionStore

__all__ = ["StaticTokenVerifier", "streamable_http_app"]

_LOOPBACK = ("127.0.0.1", "localhost", "::1")


class StaticTokenVerifier(TokenVerifier):
    """Accepts one bearer token (compared in constant time). The token is never in a repr or error."""

    def __init__(self, token: str | SecretStr) -> None:
        secret = token if isinstance(token, SecretStr) else SecretStr(token)
        if not secret.get_secret_value():
            raise ConfigurationError("token must be a non-empty string")
        self._token = secret

    async def verify_token(self, token: str) -> AccessToken | None:
        if hmac.compare_digest(token.encode(), self._token.get_secret_value().encode()):
            return AccessToken(token=token, client_id="bearer", scopes=[])
        return None

    def __repr__(self) -> str:
        return "StaticTokenVerifier(token=***)"


def security_settings(
    host: str, allowed_hosts: Sequence[str] | None, allowed_origins: Sequence[str] | None
) -> TransportSecuritySettings | None:
    """Loopback: on, for the loopback names at any port (plus what is given). Otherwise: on only when given."""
    if allowed_hosts is not None and list(allowed_hosts) == ["*"]:
        return None
    hosts = list(allowed_hosts or [])
    origins = list(allowed_origins or [])
    if host in _LOOPBACK:
        hosts += ["127.0.0.1:*", "localhost:*", "[::1]:*", "127.0.0.1", "localhost", "[::1]"]
        origins += ["http://127.0.0.1:*", "http://localhost:*", "http://[::1]:*"]
    elif not hosts:
        return None
    return TransportSecuritySettings(enable_dns_rebinding_protection=True, allowed_hosts=hosts, allowed_origins=origins)


def streamable_http_app(
    server: McpServer,
    *,
    path: str = "/mcp",
    host: str = "127.0.0.1",
    allowed_hosts: Sequence[str] | None = None,
    allowed_origins: Sequence[str] | None = None,
    token: str | SecretStr | None = None,
    token_verifier: TokenVerifier | None = None,
    resource_server_url: str | None = None,
    authorization_servers: Sequence[str] = (),
    sessions: SessionStore | None = None,
    idle_timeout: float = 1800.0,
    json_response: bool = False,
    retry_interval: int | None = None,
    max_request_body_size: int = 4 * 1024 * 1024,
) -> Starlette:
    """A Starlette app serving `server` at `path` (run it with uvicorn, or `serve_http`).

    Arguments:
        host: the address the app will bind; loopback turns DNS-rebinding protection on (see the module docstring).
        allowed_hosts, allowed_origins: more Host / Origin values to accept (`"name:*"` for any port).
        token / token_verifier: require `Authorization: Bearer ...` (a fixed token, or a verifier of your own).
        resource_server_url, authorization_servers: publish OAuth protected-resource metadata (RFC 9728) and name
            it in the 401 challenge.
        sessions: where sessions and their events live (`MemorySessionStore()` by default; `RedisSessionStore` to
            share them between processes and keep them through restarts).
        idle_timeout: seconds after which a session with no request ends (everywhere).
        retry_interval: milliseconds a client should wait before reconnecting after the server closes a stream.
        max_request_body_size: larger request bodies get 413 before they are read.
    """
    if not path.startswith("/"):
        raise ConfigurationError(f"path must start with '/', got {path!r}")
    if not idle_timeout > 0:
        raise ConfigurationError(f"idle_timeout must be > 0 seconds, got {idle_timeout!r}")
    if token is not None and token_verifier is not None:
        raise ConfigurationError("give token or token_verifier, not both")
    if authorization_servers and resource_server_url is None:
        raise ConfigurationError("authorization_servers needs resource_server_url (this server's public URL)")
    verifier = StaticTokenVerifier(token) if token is not None else token_verifier
    manager = SessionManager(
        server.server,
        sessions if sessions is not None else MemorySessionStore(),
        security=security_settings(host, allowed_hosts, allowed_origins),
        idle_timeout=idle_timeout,
        json_response=json_response,
        retry_interval=retry_interval,
        max_request_body_size=max_request_body_size,
    )
    routes: list[BaseRoute] = []
    middleware: list[Middleware] = []
    endpoint: Any = manager
    if verifier is not None:
        middleware = [
            Middleware(AuthenticationMiddleware, backend=BearerAuthBackend(verifier)),
            Middleware(AuthContextMiddleware),
        ]
        metadata_url = None
        if resource_server_url is not None:
            metadata_url = build_resource_metadata_url(AnyHttpUrl(resource_server_url))
        endpoint = RequireAuthMiddleware(manager, [], metadata_url)
    routes.append(Route(path, endpoint=endpoint, methods=["GET", "POST", "DELETE"]))
    if resource_server_url is not None and authorization_servers:
        routes.extend(
            create_protected_resource_routes(
                resource_url=AnyHttpUrl(resource_server_url),
                authorization_servers=[AnyHttpUrl(a) for a in authorization_servers],
            )
        )

    @contextlib.asynccontextmanager
    async def lifespan(_app: Starlette) -> AsyncIterator[None]:
        async with manager.run():
            yield

    return Starlette(routes=routes, middleware=middleware, lifespan=lifespan)


async def serve_http(app: Starlette, *, host: str = "127.0.0.1", port: int = 8000, log_level: str = "warning") -> None:
    """Run `app` with uvicorn until cancelled (or SIGINT/SIGTERM)."""
    import uvicorn

    config = uvicorn.Config(app, host=host, port=port, log_level=log_level, lifespan="on")
    await uvicorn.Server(config).serve()
