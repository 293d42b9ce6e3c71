"""`login()` and `logout()`: the interactive OAuth login a headless workbench asks for, and forgetting it."""

from __future__ import annotations

import asyncio
import webbrowser
from collections.abc import Awaitable, Callable
from typing import Any

from mcp.shared.auth_utils import resource_url_from_server_url

from ext.core import ConfigurationError

from ._errors import McpAuthError
from ._oauth import Interaction
from ._oauth_records import OAuthRecords
from ._oauth_settings import OAuthSettings
from ._params import SseServerParams, StreamableHttpServerParams


def _oauth_params(server_params: Any, what: str) -> tuple[SseServerParams | StreamableHttpServerParams, OAuthSettings]:
    if not isinstance(server_params, (SseServerParams, StreamableHttpServerParams)):
        raise ConfigurationError(
            f"{what}: server_params must be StreamableHttpServerParams or SseServerParams, "
            f"got {type(server_params).__name__}"
        )
    settings = server_params.oauth
    if settings is None:
        raise ConfigurationError(f"{what}: server_params.auth must be OAuthSettings")
    return server_params, settings


async def open_in_browser(url: str) -> None:
    """Open `url` in this machine's browser; raises `McpAuthError` when there is none."""
    opened = await asyncio.to_thread(webbrowser.open, url)
    if not opened:
        raise McpAuthError("", "no browser could be opened for the login; pass open_url to show the URL another way")


async def login(
    server_params: SseServerParams | StreamableHttpServerParams,
    *,
    open_url: Callable[[str], Awaitable[None]] | None = None,
    timeout: float = 300.0,
) -> None:
    """Log in to an OAuth-protected MCP server and keep the tokens in its settings' token store.

    Connects with the server's `OAuthSettings`; when the server asks for authorization, `open_url` gets the
    authorization URL (default: this machine's browser) and a loopback server on 127.0.0.1 waits up to `timeout`
    seconds for the redirect. A stored authorization that still works is kept (call `logout` first to start over).
    Raises `McpAuthError` if the login fails or is not completed in time.
    """
    from ._workbench import McpWorkbench  # the workbench imports this module's neighbours

    params, _ = _oauth_params(server_params, "login")
    if not isinstance(timeout, (int, float)) or isinstance(timeout, bool) or not 0 < timeout < float("inf"):
        raise ConfigurationError(f"login: timeout must be a number of seconds > 0, got {timeout!r}")
    bench = McpWorkbench(params, oauth_interaction=Interaction(open_url or open_in_browser, timeout))
    try:
        await bench.start()
    finally:
        await bench.stop()


async def logout(server_params: SseServerParams | StreamableHttpServerParams) -> bool:
    """Forget the stored tokens and registration of this server (every authorization server it used).
    True if anything was stored."""
    params, settings = _oauth_params(server_params, "logout")
    records = OAuthRecords(settings.store(), resource_url_from_server_url(params.url), None)
    return await records.forget_all()
