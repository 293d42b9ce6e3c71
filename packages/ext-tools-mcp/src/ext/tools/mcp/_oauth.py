"""`OAuthFlow`: the mcp SDK's OAuth providers, configured from `OAuthSettings`, with what a long-running client adds.

The protocol (discovery, registration, PKCE, token requests, refresh before expiry, scope step-up, issuer binding)
is the SDK's: `OAuthClientProvider` for the authorization code grant, `ClientCredentialsOAuthProvider` and
`PrivateKeyJWTOAuthProvider` for machine-to-machine. This module wraps the provider's `httpx2.Auth` flow with:

- **Durable, shared state.** Tokens, the registration and the authorization server's metadata live in a
  `TokenStore` (`_oauth_records.py`); the absolute expiry is kept with the token and the metadata seeded on start,
  so a restarted process refreshes at the right token endpoint before its first request instead of sending an
  expired token. When the token held is no longer valid, the store is read again first: another worker of the
  cluster may have refreshed it already.
- **Refresh on 401.** A request refused with 401 while a refresh token is held is retried once after a refresh
  (the SDK alone would start a new authorization, which needs a person).
- **Registrations survive refresh failures.** Only an `invalid_client` answer to a refresh drops the stored
  registration; `invalid_grant` drops the dead token.
- **Headless.** Without an `Interaction` the flow never waits for a redirect: when the SDK would send a person to
  the authorization URL, it raises `McpNeedsLoginError` naming the server and the command to run.
- **Errors without secrets.** SDK errors become `McpAuthError` with the HTTP status and OAuth error code of the
  failing request, never a body, token, code, verifier or secret. The last one is kept in `failure`, because the
  streamable HTTP transport reports a failed request to the session only as a closed connection.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncGenerator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx2
from mcp.client.auth import OAuthClientProvider, OAuthFlowError, OAuthRegistrationError, OAuthTokenError
from mcp.client.auth.extensions.client_credentials import (
    ClientCredentialsOAuthProvider,
    PrivateKeyJWTOAuthProvider,
    SignedJWTParameters,
)
from mcp.shared.auth import AuthorizationCodeResult, OAuthClientInformationFull, OAuthClientMetadata
from mcp.shared.auth_utils import resource_url_from_server_url
from pydantic import AnyUrl

from ._errors import McpAuthError, McpNeedsLoginError
from ._oauth_callback import CallbackServer, LoginRefused
from ._oauth_records import OAuthRecords
from ._oauth_settings import OAuthSettings

logger = logging.getLogger("ext.tools.mcp")


def _not_ours(record: logging.LogRecord) -> bool:
    """The SDK logs every exception of its flow with a traceback ("OAuth flow error"), ours included: a login this
    process does not do, or a refusal, is reported to the caller as a typed error, not as a traceback in the log."""
    exc = record.exc_info[1] if record.exc_info else None
    return not isinstance(exc, McpAuthError)


# Installed once, on the SDK's auth logger only, and it drops only records carrying ext's own auth errors.
logging.getLogger("mcp.client.auth.oauth2").addFilter(_not_ours)

_HEADLESS_PORT = 8976  # a redirect URI is required in the client metadata even when no redirect can happen


@dataclass
class Interaction:
    """How a login reaches a person: `open_url` shows them the authorization URL (a browser, a printed line, or a
    test driving it); the redirect comes back to a loopback server, waited for at most `timeout` seconds."""

    open_url: Callable[[str], Awaitable[None]]
    timeout: float = 300.0


def login_command(settings: OAuthSettings, label: str) -> str:
    return settings.login_command or f"ext mcp login {label}"


def _form(request: httpx2.Request) -> dict[str, list[str]]:
    if request.method != "POST":
        return {}
    try:
        return parse_qs(request.content.decode("ascii"))
    except (UnicodeDecodeError, httpx2.RequestNotRead):
        return {}


def _oauth_error(response: httpx2.Response) -> str | None:
    """The OAuth `error` code of an error response (RFC 6749 5.2), if it is a plain token."""
    try:
        body = json.loads(response.content)
    except (ValueError, httpx2.ResponseNotRead):
        return None
    error = body.get("error") if isinstance(body, dict) else None
    if isinstance(error, str) and error.replace("_", "").isalnum() and len(error) < 64:
        return error
    return None


class OAuthFlow(httpx2.Auth):
    """The `httpx2.Auth` of one MCP server's connections (see the module docstring)."""

    requires_response_body = True

    def __init__(
        self, settings: OAuthSettings, server_url: str, label: str, interaction: Interaction | None = None
    ) -> None:
        self.settings = settings
        self.server_url = server_url
        self.label = label
        self.interaction = interaction
        self.failure: McpAuthError | None = None
        # Called with each failure: a connection ends itself, because the SSE transport leaves the request
        # waiting when its POST fails, and the streamable HTTP one reports only a closed connection.
        self.failure_listeners: list[Callable[[McpAuthError], None]] = []
        self._records: OAuthRecords | None = None
        self._provider: OAuthClientProvider | None = None
        self._prepare_lock = asyncio.Lock()
        self._callback: CallbackServer | None = None
        self._had_token = False
        self._saved_metadata: Any = None
        self._last_refusal: tuple[int, str | None] | None = None

    # --- set-up ----------------------------------------------------------------------------------------

    async def _prepare(self) -> OAuthClientProvider:
        async with self._prepare_lock:
            if self._provider is not None:
                return self._provider
            # The store (and its key) is resolved on first use, before any request: a config can be loaded where
            # the key's variable is not set, and fails only when it connects.
            self._records = OAuthRecords(self.settings.store(), resource_url_from_server_url(self.server_url), None)
            stored = await self.records.load()
            settings = self.settings
            redirect_uri = await self._redirect_uri(stored.client)
            scope = settings.scope()
            issuer = settings.issuer or stored.issuer
            provider: OAuthClientProvider
            if settings.grant == "client_credentials":
                assert settings.client_id is not None  # checked by the settings
                key = settings.private_key()
                if key is not None:
                    assertion = SignedJWTParameters(
                        issuer=settings.client_id,
                        subject=settings.client_id,
                        signing_key=key,
                        signing_algorithm=settings.signing_algorithm,
                    ).create_assertion_provider()
                    provider = PrivateKeyJWTOAuthProvider(
                        self.server_url, self.records, settings.client_id, assertion, scope=scope, issuer=issuer
                    )
                else:
                    provider = ClientCredentialsOAuthProvider(
                        self.server_url,
                        self.records,
                        settings.client_id,
                        settings.secret() or "",
                        # The settings refuse "none" for this grant.
                        token_endpoint_auth_method="client_secret_post"
                        if settings.token_endpoint_auth_method == "client_secret_post"
                        else "client_secret_basic",
                        scope=scope,
                        issuer=issuer,
                    )
            else:
                secret = settings.secret()
                method = settings.token_endpoint_auth_method or ("client_secret_basic" if secret else "none")
                if settings.client_id is not None:
                    self.records.fixed_client = OAuthClientInformationFull(
                        client_id=settings.client_id,
                        client_secret=secret,
                        redirect_uris=[AnyUrl(redirect_uri)],
                        token_endpoint_auth_method=method,
                        grant_types=["authorization_code", "refresh_token"],
                        scope=scope,
                        issuer=settings.issuer,
                    )
                metadata = OAuthClientMetadata(
                    redirect_uris=[AnyUrl(redirect_uri)],
                    grant_types=["authorization_code", "refresh_token"],
                    response_types=["code"],
                    token_endpoint_auth_method="client_secret_post" if secret else "none",
                    client_name=settings.client_name,
                    scope=scope,
                )
                provider = OAuthClientProvider(
                    self.server_url,
                    metadata,
                    self.records,
                    redirect_handler=self._redirect,
                    callback_handler=self._wait_for_callback,
                    client_metadata_url=settings.client_metadata_url,
                )
            context = provider.context
            if stored.metadata is not None:
                # What discovery found last time: a refresh before the first request goes to the right endpoint.
                context.oauth_metadata = stored.metadata
                context.protected_resource_metadata = stored.resource_metadata
                if stored.resource_metadata is not None and stored.resource_metadata.authorization_servers:
                    context.auth_server_url = str(stored.resource_metadata.authorization_servers[0])
            if stored.token is not None:
                context.current_tokens = stored.token
                context.token_expiry_time = stored.expires_at
                self._had_token = True
            self.records.issuer_now = lambda: (
                context.auth_server_url
                or (str(context.oauth_metadata.issuer) if context.oauth_metadata is not None else None)
            )
            self._saved_metadata = context.oauth_metadata
            self._provider = provider
            return provider

    @property
    def records(self) -> OAuthRecords:
        assert self._records is not None, "used before the flow is prepared"
        return self._records

    async def _redirect_uri(self, stored_client: OAuthClientInformationFull | None) -> str:
        settings = self.settings
        port = settings.callback_port
        if port is None and stored_client is not None and stored_client.redirect_uris:
            # A dynamic registration names its redirect URI: a new login must come back to the same one.
            parts = urlsplit(str(stored_client.redirect_uris[0]))
            if parts.hostname in ("127.0.0.1", "localhost") and parts.port:
                port = parts.port
        if self.interaction is None or settings.grant != "authorization_code":
            return f"http://127.0.0.1:{port or _HEADLESS_PORT}{settings.callback_path}"
        self._callback = CallbackServer(port or 0, settings.callback_path)
        await self._callback.start()
        return self._callback.redirect_uri

    async def aclose(self) -> None:
        """Stop the login callback server, if one is listening."""
        callback, self._callback = self._callback, None
        if callback is not None:
            await callback.close()

    # --- the person's part of a login -----------------------------------------------------------------

    def _needs_login(self) -> McpNeedsLoginError:
        command = login_command(self.settings, self.label)
        why = (
            "its stored authorization was refused (expired or revoked)"
            if self._had_token
            else "no authorization is stored for it"
        )
        return McpNeedsLoginError(
            self.label,
            f"MCP server {self.label!r} needs an OAuth login ({why}, and this process does not open a "
            f"browser): run `{command}`, then try again",
            command=command,
        )

    async def _redirect(self, url: str) -> None:
        if self.interaction is None:
            raise self._needs_login()  # a scope step-up: only a person can grant more
        assert self._callback is not None
        self._callback.arm()
        await self.interaction.open_url(url)

    async def _wait_for_callback(self) -> AuthorizationCodeResult:
        assert self.interaction is not None and self._callback is not None
        timeout = self.interaction.timeout
        try:
            return await self._callback.wait(timeout)
        except asyncio.TimeoutError:
            raise McpAuthError(
                self.label, f"MCP server {self.label!r}: the login was not completed within {timeout:g} s"
            ) from None
        except LoginRefused as exc:
            raise McpAuthError(
                self.label, f"MCP server {self.label!r}: the authorization server refused the login ({exc})"
            ) from None

    # --- the flow ---------------------------------------------------------------------------------------

    async def async_auth_flow(self, request: httpx2.Request) -> AsyncGenerator[httpx2.Request, httpx2.Response]:
        provider = self._provider or await self._prepare()
        context = provider.context
        if context.current_tokens is not None and not context.is_token_valid():
            await self._sync_tokens()  # expired here: another process may have refreshed it already
        retried_401 = took_stored = False
        while True:
            restart = refreshed = refresh_failed = False
            flow = provider.async_auth_flow(request)
            try:
                outgoing = await flow.__anext__()
                while True:
                    if outgoing is request and refresh_failed and not took_stored and await self._sync_tokens():
                        took_stored = restart = True  # another process refreshed first: use its token
                        break
                    response = yield outgoing
                    if outgoing is request:
                        if response.status_code < 400:
                            self.failure = None
                        elif (
                            response.status_code == 401
                            and not retried_401
                            and not refreshed
                            and context.can_refresh_token()
                        ):
                            # Expired by the server's word: refresh, then send the request again (once).
                            context.token_expiry_time = 1.0
                            retried_401 = restart = True
                            break
                        elif (
                            response.status_code == 401
                            and context.current_tokens is None
                            and not took_stored
                            and await self._sync_tokens()
                        ):
                            took_stored = restart = True  # logged in elsewhere since this process started
                            break
                        elif (
                            response.status_code == 401
                            and self.interaction is None
                            and self.settings.grant == "authorization_code"
                            and not context.can_refresh_token()
                        ):
                            # Only a person can go on from here: say so now, before discovery and registration.
                            raise self._needs_login()
                    else:
                        grant = _form(outgoing).get("grant_type", [None])[0]
                        if grant is not None and response.status_code >= 400:
                            await response.aread()
                            self._last_refusal = (response.status_code, _oauth_error(response))
                        if grant == "refresh_token":
                            refreshed = True
                            if response.status_code != 200:
                                refresh_failed = True
                                await self._refresh_refused(provider)
                    outgoing = await flow.asend(response)
            except StopAsyncIteration:
                pass
            except McpAuthError as exc:
                self._failed(exc)
                raise
            except (OAuthFlowError, httpx2.HTTPError, ValueError) as exc:
                error = self._describe(exc)
                self._failed(error)
                raise error from None
            finally:
                await flow.aclose()
            if not restart:
                break
        await self._remember_metadata(provider)

    def _failed(self, error: McpAuthError) -> None:
        self.failure = error
        for listener in list(self.failure_listeners):
            listener(error)

    async def _sync_tokens(self) -> bool:
        """Take the stored token if it is another than the one held (another process refreshed or logged in)."""
        assert self._provider is not None
        context = self._provider.context
        token, expires_at = await self.records.token_record()
        held = context.current_tokens
        if token is None or (held is not None and token.access_token == held.access_token):
            return False
        context.current_tokens = token
        context.token_expiry_time = expires_at
        self._had_token = True
        return context.is_token_valid() or context.can_refresh_token()

    async def _refresh_refused(self, provider: OAuthClientProvider) -> None:
        status, error = self._last_refusal or (0, None)
        logger.warning("MCP server %r: token refresh refused (HTTP %s %s)", self.label, status, error or "")
        if error == "invalid_client" and self.records.fixed_client is None:
            # The registration itself is gone at the server: register again on the next authorization.
            await self.records.forget_client()
            provider.context.client_info = None
        elif error == "invalid_grant":
            token, _ = await self.records.token_record()
            held = provider.context.current_tokens
            if token is not None and held is not None and token.refresh_token == held.refresh_token:
                await self.records.forget_tokens()

    async def _remember_metadata(self, provider: OAuthClientProvider) -> None:
        context = provider.context
        metadata = context.oauth_metadata
        if metadata is None or metadata is self._saved_metadata or not context.is_token_valid():
            return
        issuer = context.auth_server_url or str(metadata.issuer)
        await self.records.save_metadata(issuer, metadata, context.protected_resource_metadata)
        self._saved_metadata = metadata

    def _describe(self, exc: BaseException) -> McpAuthError:
        label = self.label
        refusal = self._last_refusal
        detail = ""
        if refusal is not None:
            detail = f" (HTTP {refusal[0]}{', ' + refusal[1] if refusal[1] else ''})"
        if isinstance(exc, OAuthRegistrationError):
            what = f"client registration failed{detail}"
        elif isinstance(exc, OAuthTokenError):
            what = f"the token request was refused{detail}"
        elif isinstance(exc, OAuthFlowError):
            text = str(exc)
            # Messages the SDK builds from response bodies or from the state are not repeated.
            if text.startswith(("State parameter mismatch", "Token exchange failed")) or len(text) > 300:
                text = "the authorization response did not match the request"
            what = f"authorization failed: {text}"
        elif isinstance(exc, httpx2.HTTPError):
            what = f"cannot reach the authorization server: {type(exc).__name__}"
        else:
            what = f"authorization failed: {type(exc).__name__}"
        return McpAuthError(label, f"MCP server {label!r}: OAuth {what}")
