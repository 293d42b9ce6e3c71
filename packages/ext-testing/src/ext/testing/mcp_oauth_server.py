"""An OAuth-protected MCP server built on the mcp SDK's own server-side auth, for OAuth client tests (the `mcp-oauth`
extra: ext-tools-mcp's and ext-cli's tests).

`MCPServer(auth_server_provider=..., auth=AuthSettings(...))` serves both roles on one origin: the authorization
server (metadata, dynamic registration, /authorize, /token, /revoke from `mcp.server.auth.routes`) and the resource
server (bearer-token middleware, protected-resource metadata, `WWW-Authenticate` challenges). The provider below
keeps its state in memory and approves every authorization at once (the person's consent is the test driving the
authorize URL): `/authorize` answers with a redirect to the client's redirect URI carrying the code.

Run: ``python -m ext.testing.mcp_oauth_server http|sse [--port N] [--access-ttl S]``; prints ``PORT <n>`` once
listening. `start_mcp_oauth_server(kind)` starts it in a subprocess and returns a handle with the test controls.
Test controls (no auth): ``POST /test/expire`` expires every access token server-side, ``POST /test/revoke``
revokes every access and refresh token, ``POST /test/forget-clients`` drops every registration, ``GET /test/stats``
counts registrations and token requests by grant.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import secrets
import socket
import subprocess
import sys
import time
import urllib.request
import warnings
from collections import Counter
from typing import Any
from urllib.parse import parse_qs

from mcp.server.auth.provider import (
    AccessToken,
    AuthorizationCode,
    AuthorizationParams,
    IdentityAssertionParams,
    RefreshToken,
    TokenError,
    construct_redirect_uri,
)
from mcp.server.auth.settings import AuthSettings, ClientRegistrationOptions, RevocationOptions
from mcp.server.mcpserver import MCPServer
from mcp.shared.auth import OAuthClientInformationFull, OAuthToken
from mcp.shared.exceptions import MCPDeprecationWarning
from pydantic import AnyHttpUrl
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

warnings.simplefilter("ignore", MCPDeprecationWarning)


class MemoryProvider:
    """An in-memory authorization server that approves every request."""

    def __init__(self, access_ttl: int) -> None:
        self.access_ttl = access_ttl
        self.clients: dict[str, OAuthClientInformationFull] = {}
        self.codes: dict[str, AuthorizationCode] = {}
        self.access: dict[str, AccessToken] = {}
        self.refresh: dict[str, RefreshToken] = {}
        self.stats: Counter[str] = Counter()
        self.used_codes: list[str] = []
        self.verifiers: list[str] = []  # PKCE verifiers and client secrets seen at /token (a challenge is public)
        self.all_tokens: list[str] = []

    async def get_client(self, client_id: str) -> OAuthClientInformationFull | None:
        return self.clients.get(client_id)

    async def register_client(self, client_info: OAuthClientInformationFull) -> None:
        self.stats["register"] += 1
        self.clients[client_info.client_id] = client_info

    async def authorize(self, client: OAuthClientInformationFull, params: AuthorizationParams) -> str:
        self.stats["authorize"] += 1
        code = secrets.token_urlsafe(32)
        self.used_codes.append(code)
        self.codes[code] = AuthorizationCode(
            code=code,
            scopes=params.scopes or ["mcp"],
            expires_at=time.time() + 300,
            client_id=client.client_id,
            code_challenge=params.code_challenge,
            redirect_uri=params.redirect_uri,
            redirect_uri_provided_explicitly=params.redirect_uri_provided_explicitly,
            resource=params.resource,
        )
        return construct_redirect_uri(str(params.redirect_uri), code=code, state=params.state)

    async def load_authorization_code(
        self, client: OAuthClientInformationFull, authorization_code: str
    ) -> AuthorizationCode | None:
        return self.codes.get(authorization_code)

    def _issue(self, client_id: str, scopes: list[str], resource: str | None) -> OAuthToken:
        access = "at-" + secrets.token_urlsafe(24)
        refresh = "rt-" + secrets.token_urlsafe(24)
        self.all_tokens += [access, refresh]
        self.access[access] = AccessToken(
            token=access,
            client_id=client_id,
            scopes=scopes,
            expires_at=int(time.time()) + self.access_ttl,
            resource=resource,
        )
        self.refresh[refresh] = RefreshToken(token=refresh, client_id=client_id, scopes=scopes, resource=resource)
        return OAuthToken(
            access_token=access, expires_in=self.access_ttl, refresh_token=refresh, scope=" ".join(scopes)
        )

    async def exchange_authorization_code(
        self, client: OAuthClientInformationFull, authorization_code: AuthorizationCode
    ) -> OAuthToken:
        self.stats["authorization_code"] += 1
        self.codes.pop(authorization_code.code, None)
        return self._issue(client.client_id, authorization_code.scopes, authorization_code.resource)

    async def load_refresh_token(self, client: OAuthClientInformationFull, refresh_token: str) -> RefreshToken | None:
        token = self.refresh.get(refresh_token)
        return token if token is not None and token.client_id == client.client_id else None

    async def exchange_refresh_token(
        self, client: OAuthClientInformationFull, refresh_token: RefreshToken, scopes: list[str]
    ) -> OAuthToken:
        self.stats["refresh_token"] += 1
        if self.refresh.pop(refresh_token.token, None) is None:  # rotation: each refresh token works once
            raise TokenError(error="invalid_grant", error_description="refresh token already used")
        return self._issue(client.client_id, scopes or refresh_token.scopes, refresh_token.resource)

    async def load_access_token(self, token: str) -> AccessToken | None:
        found = self.access.get(token)
        if found is None or (found.expires_at is not None and found.expires_at < time.time()):
            return None
        return found

    async def exchange_identity_assertion(
        self, client: OAuthClientInformationFull, params: IdentityAssertionParams
    ) -> OAuthToken:
        raise TokenError(error="unsupported_grant_type", error_description="not offered by this test server")

    async def revoke_token(self, token: AccessToken | RefreshToken) -> None:
        self.access.pop(token.token, None)
        self.refresh.pop(token.token, None)


def build(port: int, access_ttl: int, kind: str = "http") -> tuple[MCPServer, MemoryProvider]:
    base = f"http://127.0.0.1:{port}"
    endpoint = "/sse" if kind == "sse" else "/mcp"
    provider = MemoryProvider(access_ttl)
    server = MCPServer(
        "oauth-test",
        auth_server_provider=provider,
        auth=AuthSettings(
            issuer_url=AnyHttpUrl(base),
            resource_server_url=AnyHttpUrl(f"{base}{endpoint}"),
            client_registration_options=ClientRegistrationOptions(
                enabled=True, valid_scopes=["mcp", "extra"], default_scopes=["mcp"]
            ),
            revocation_options=RevocationOptions(enabled=True),
            required_scopes=["mcp"],
            validate_token_resource=False,
        ),
        log_level="WARNING",
    )

    @server.tool()
    def echo(text: str) -> str:
        """Repeat the text."""
        return text

    async def expire(request: Request) -> Response:
        for token in provider.access.values():
            token.expires_at = int(time.time()) - 10
        return JSONResponse({"expired": len(provider.access)})

    async def revoke(request: Request) -> Response:
        count = len(provider.access) + len(provider.refresh)
        provider.access.clear()
        provider.refresh.clear()
        return JSONResponse({"revoked": count})

    async def forget_clients(request: Request) -> Response:
        provider.clients.clear()
        return JSONResponse({"ok": True})

    async def issued(request: Request) -> Response:
        """Every secret value this server issued or received (for tests that check none leaks)."""
        values = [*provider.all_tokens, *provider.used_codes, *provider.verifiers]
        values += [c.client_secret for c in provider.clients.values() if c.client_secret]
        return JSONResponse(values)

    async def stats(request: Request) -> Response:
        return JSONResponse(dict(provider.stats))

    server.custom_route("/test/expire", methods=["POST"])(expire)
    server.custom_route("/test/revoke", methods=["POST"])(revoke)
    server.custom_route("/test/forget-clients", methods=["POST"])(forget_clients)
    server.custom_route("/test/secrets", methods=["GET"])(issued)
    server.custom_route("/test/stats", methods=["GET"])(stats)
    return server, provider


def record_token_requests(app: Any, provider: MemoryProvider) -> Any:
    """Keep the secrets of each /token request (PKCE verifier, client secret, assertion) for `/test/secrets`."""

    async def wrapped(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["path"] != "/token" or scope["method"] != "POST":
            await app(scope, receive, send)
            return
        body = b""
        messages = []
        while True:
            message = await receive()
            messages.append(message)
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        for name, values in parse_qs(body.decode("latin-1")).items():
            if name in ("code_verifier", "client_secret", "client_assertion"):
                provider.verifiers.extend(values)

        async def replay() -> Any:
            return messages.pop(0) if messages else {"type": "http.disconnect"}

        await app(scope, replay, send)

    return wrapped


async def serve(kind: str, port: int, access_ttl: int) -> None:
    import uvicorn

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    bound = sock.getsockname()[1]
    server, provider = build(bound, access_ttl, kind)
    app: Any = server.sse_app() if kind == "sse" else server.streamable_http_app()
    app = record_token_requests(app, provider)
    config = uvicorn.Config(app, log_level="warning", lifespan="on")
    sock.listen(128)
    print(f"PORT {bound}", flush=True)
    await uvicorn.Server(config).serve(sockets=[sock])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("transport", choices=["sse", "http"])
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--access-ttl", type=int, default=3600)
    args = parser.parse_args()
    asyncio.run(serve(args.transport, args.port, args.access_ttl))


if __name__ == "__main__":
    main()


class McpOAuthServer:
    """A running `mcp_oauth_server` subprocess: `url` is its MCP endpoint, `base` its origin (also the issuer)."""

    def __init__(self, kind: str, *extra: str) -> None:
        self.kind = kind
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "ext.testing.mcp_oauth_server", kind, *extra],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )
        assert self.proc.stdout is not None
        # The child prints its port once listening (or exits, closing stdout).
        line = self.proc.stdout.readline()
        found = re.search(rb"PORT (\d+)", line)
        if found is None:
            self.stop()
            raise RuntimeError(f"mcp_oauth_server did not start (printed {line!r}); is the mcp-oauth extra installed?")
        self.base = f"http://127.0.0.1:{int(found.group(1))}"
        self.url = self.base + ("/sse" if kind == "sse" else "/mcp")

    def _call(self, method: str, what: str) -> Any:
        request = urllib.request.Request(
            f"{self.base}/test/{what}", method=method, data=b"" if method == "POST" else None
        )
        with urllib.request.urlopen(request, timeout=10) as answer:
            return json.loads(answer.read())

    def control(self, what: str) -> None:
        """`expire` (every access token, server-side), `revoke` (every token), `forget-clients`."""
        self._call("POST", what)

    def stats(self) -> dict[str, int]:
        """Registrations, authorizations and token requests by grant."""
        stats: dict[str, int] = self._call("GET", "stats")
        return stats

    def secrets(self) -> list[str]:
        """Every token, code, PKCE verifier and client secret this server issued or received."""
        values: list[str] = self._call("GET", "secrets")
        return values

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        if self.proc.stdout is not None:
            self.proc.stdout.close()


def start_mcp_oauth_server(kind: str = "http", *extra: str) -> McpOAuthServer:
    """Start the server (`http`: streamable HTTP at /mcp; `sse`: /sse) on 127.0.0.1 and an ephemeral port."""
    return McpOAuthServer(kind, *extra)
