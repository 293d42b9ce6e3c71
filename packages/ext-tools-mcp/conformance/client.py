"""ext-tools-mcp's client for the MCP conformance suite (`@modelcontextprotocol/conformance`, client mode).

The suite runs `python client.py <server-url>` with the scenario in `MCP_CONFORMANCE_SCENARIO` and, for scenarios
with pre-registered credentials, a JSON object in `MCP_CONFORMANCE_CONTEXT`. Every scenario goes through the public
API a user has: `McpWorkbench` over `StreamableHttpServerParams`, with `OAuthSettings` for the auth scenarios. The
person's part of a login is played by `follow_redirect`: it opens the authorization URL without a browser (the
suite's authorization server approves at once) and follows the redirect to the workbench's loopback callback.

Exit status 0 when the scenario's client side completed, 1 (with the error on stderr) otherwise.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import sys
import tempfile
import urllib.error
import urllib.request
from typing import Any

import mcp.types

from ext.tools.mcp import (
    FileTokenStore,
    Interaction,
    McpWorkbench,
    OAuthSettings,
    StreamableHttpServerParams,
)

# A client ID metadata document URL (the suite's CIMD scenario accepts this one, as the mcp SDK's client uses it).
CIMD_URL = "https://conformance-test.local/client-metadata.json"


def _open(url: str) -> int:
    try:
        with urllib.request.urlopen(url, timeout=20) as answer:  # follows the redirect to the callback
            return int(answer.status)
    except urllib.error.HTTPError as exc:
        return exc.code


async def follow_redirect(url: str) -> None:
    status = await asyncio.to_thread(_open, url)
    if status != 200:
        raise RuntimeError(f"the authorization redirect ended with HTTP {status}")


async def accept_with_defaults(params: mcp.types.ElicitRequestParams) -> mcp.types.ElicitResult:
    """Accept a form elicitation with the defaults its schema gives (SEP-1034)."""
    content: dict[str, Any] = {}
    schema = getattr(params, "requested_schema", None) or {}
    for name, prop in (schema.get("properties") or {}).items():
        if isinstance(prop, dict) and "default" in prop:
            content[name] = prop["default"]
    return mcp.types.ElicitResult(action="accept", content=content)


def oauth_settings(scenario: str, context: dict[str, Any], token_dir: str) -> OAuthSettings:
    store = FileTokenStore(token_dir)
    if scenario == "auth/client-credentials-basic":
        return OAuthSettings(
            grant="client_credentials",
            client_id=context["client_id"],
            client_secret=context["client_secret"],
            token_endpoint_auth_method="client_secret_basic",
            token_store=store,
        )
    if scenario == "auth/client-credentials-jwt":
        key_file = os.path.join(token_dir, "client-key.pem")
        with open(key_file, "w", encoding="utf-8") as handle:
            handle.write(context["private_key_pem"])
        return OAuthSettings(
            grant="client_credentials",
            client_id=context["client_id"],
            private_key_file=key_file,
            signing_algorithm=context.get("signing_algorithm", "ES256"),
            token_store=store,
        )
    if context.get("client_id"):  # pre-registered
        return OAuthSettings(
            client_id=context["client_id"],
            client_secret=context.get("client_secret"),
            token_store=store,
        )
    return OAuthSettings(client_metadata_url=CIMD_URL, client_name="ext-conformance", token_store=store)


async def run(scenario: str, url: str) -> None:
    context = json.loads(os.environ.get("MCP_CONFORMANCE_CONTEXT") or "{}")
    with tempfile.TemporaryDirectory(prefix="ext-conformance-") as token_dir:
        interaction = None
        auth = None
        if scenario.startswith("auth/"):
            auth = oauth_settings(scenario, context, token_dir)
            if auth.grant == "authorization_code":
                interaction = Interaction(follow_redirect, timeout=20)
        params = StreamableHttpServerParams(url=url, auth=auth, timeout=20)
        bench = McpWorkbench(
            params,
            elicitation_callback=accept_with_defaults if scenario.startswith("elicitation") else None,
            oauth_interaction=interaction,
        )
        async with bench:
            tools = await bench.list_tools()
            names = {tool["name"] for tool in tools}
            if scenario == "tools_call" or "add_numbers" in names:
                await bench.call_tool("add_numbers", {"a": 5, "b": 3})
            elif scenario == "sse-retry":
                await bench.call_tool("test_reconnection", {})
            elif scenario.startswith("elicitation"):
                await bench.call_tool("test_client_elicitation_defaults", {})
            elif tools:
                # Auth scenarios: one call exercises the authorized path (and a step-up, where the scenario has one).
                first = tools[0]
                await bench.call_tool(first["name"], {})


def main() -> int:
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(levelname)s %(name)s: %(message)s")
    scenario = os.environ.get("MCP_CONFORMANCE_SCENARIO", "")
    if len(sys.argv) < 2:
        print("usage: client.py SERVER_URL (MCP_CONFORMANCE_SCENARIO names the scenario)", file=sys.stderr)
        return 2
    try:
        asyncio.run(run(scenario, sys.argv[-1]))
    except Exception as exc:
        print(f"scenario {scenario!r} failed: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
