"""`ext mcp login SERVER` / `ext mcp logout SERVER`: OAuth for MCP servers over HTTP.

Tokens go to ext-tools-mcp's default file store (`$EXT_MCP_TOKEN_DIR`, else `~/.local/state/ext/mcp-oauth`, files
0600), where every `McpWorkbench` with default `OAuthSettings` finds them: `ext mcp tools URL`, `ext chat --mcp URL`
and application code alike. Login opens the browser when this machine has a display, else prints the URL to open
elsewhere; either way a loopback server on 127.0.0.1 receives the redirect.
"""

from __future__ import annotations

import asyncio
import os
import sys
import webbrowser
from typing import Any

import click

from ._context import State, run_command
from ._errors import CliError


def _can_open_browser() -> bool:
    # Without a display, webbrowser may pick a text-mode browser that takes over this terminal.
    return sys.platform in ("darwin", "win32") or bool(os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"))


def oauth_server_params(
    server: str,
    *,
    scopes: tuple[str, ...] = (),
    client_id: str | None = None,
    client_secret_env: str | None = None,
    callback_port: int | None = None,
) -> Any:
    """HTTP server params for `server` (a URL; one ending in /sse is SSE) with OAuth settings."""
    from ._tools import _require

    mcp = _require("ext.tools.mcp", "ext-tools-mcp", "mcp")
    if not server.startswith(("http://", "https://")):
        raise CliError(
            f"{server!r} is not an http(s) URL", hint="OAuth applies to MCP servers over HTTP: give the server's URL"
        )
    try:
        settings = mcp.OAuthSettings(
            scopes=list(scopes) or None,
            client_id=client_id,
            client_secret_env=client_secret_env,
            callback_port=callback_port,
        )
        cls = mcp.SseServerParams if server.rstrip("/").endswith("/sse") else mcp.StreamableHttpServerParams
        return cls(url=server, auth=settings)
    except ValueError as exc:
        raise CliError(f"{server}: {_first_error(exc)}") from None


def _first_error(exc: ValueError) -> str:
    errors = getattr(exc, "errors", None)
    if callable(errors):
        first = errors(include_url=False, include_input=False)[0]
        return str(first.get("msg", exc))
    return str(exc)


async def login(server: str, options: dict[str, Any], no_browser: bool, timeout: float, state: State) -> int:
    from ext.tools.mcp import McpAuthError
    from ext.tools.mcp import login as mcp_login

    params = oauth_server_params(server, **options)
    out = state.out

    async def show(url: str) -> None:
        opened = False
        if not no_browser and _can_open_browser():
            opened = await asyncio.to_thread(webbrowser.open, url)
        if opened:
            out.info("opened the browser to log in; waiting for it to finish")
        else:
            out.info("open this URL in a browser to log in (waiting for the redirect to this machine):")
            # Printed even with --quiet: without it there is no login. soft_wrap keeps the URL one line.
            out.err.print(url, markup=False, highlight=False, soft_wrap=True)

    try:
        await mcp_login(params, open_url=show, timeout=timeout)
    except McpAuthError as exc:
        raise CliError(str(exc), hint="check the server URL, then run the login again") from None
    out.info(f"logged in to {params.describe()}", style="green")
    return 0


async def logout(server: str, state: State) -> int:
    from ext.tools.mcp import logout as mcp_logout

    params = oauth_server_params(server)
    if await mcp_logout(params):
        state.out.info(f"logged out of {params.describe()}: its tokens and registration are forgotten")
    else:
        state.out.info(f"nothing was stored for {params.describe()}")
    return 0


def add_commands(group: click.Group) -> None:
    """`login` and `logout` on the `ext mcp` group."""

    @group.command("login")
    @click.argument("server")
    @click.option("--scope", "scopes", multiple=True, help="A scope to ask for (repeatable; default: the server's).")
    @click.option("--client-id", help="A client ID registered in advance (default: the client registers itself).")
    @click.option("--client-secret-env", metavar="VAR", help="Environment variable holding that client's secret.")
    @click.option("--callback-port", type=int, help="Fixed 127.0.0.1 port of the redirect URI registered in advance.")
    @click.option("--no-browser", is_flag=True, help="Print the login URL instead of opening a browser.")
    @click.option("--timeout", type=float, default=300.0, show_default=True, help="Seconds to wait for the login.")
    @click.pass_context
    def mcp_login(
        ctx: click.Context,
        server: str,
        scopes: tuple[str, ...],
        client_id: str | None,
        client_secret_env: str | None,
        callback_port: int | None,
        no_browser: bool,
        timeout: float,
    ) -> None:
        """Log in to an OAuth-protected MCP server (SERVER is its URL) and keep the tokens for later commands."""
        options = {
            "scopes": scopes,
            "client_id": client_id,
            "client_secret_env": client_secret_env,
            "callback_port": callback_port,
        }
        state: State = ctx.obj
        ctx.exit(run_command(ctx, lambda: login(server, options, no_browser, timeout, state)))

    @group.command("logout")
    @click.argument("server")
    @click.pass_context
    def mcp_logout(ctx: click.Context, server: str) -> None:
        """Forget the tokens and client registration stored for SERVER (its URL)."""
        state: State = ctx.obj
        ctx.exit(run_command(ctx, lambda: logout(server, state)))
