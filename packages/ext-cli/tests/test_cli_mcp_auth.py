"""`ext mcp login|logout SERVER`, and `ext mcp tools` on a server that needs a login: real processes against an
OAuth-protected MCP server on the mcp SDK's own server-side auth (ext-testing's `mcp_oauth_server`)."""

from __future__ import annotations

import asyncio
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from ext_cli_support import HERE, clean_env, run_ext

from ext.testing.mcp_oauth_server import McpOAuthServer, start_mcp_oauth_server


@pytest.fixture
def server() -> Iterator[McpOAuthServer]:
    srv = start_mcp_oauth_server("http")
    try:
        yield srv
    finally:
        srv.stop()


def stored_modes(directory: Path) -> set[int]:
    return {p.stat().st_mode & 0o777 for p in directory.iterdir()}


def _browse(url: str) -> int:
    with urllib.request.urlopen(url, timeout=10) as answer:  # follows the redirect to the loopback callback
        return int(answer.status)


async def _login(url: str, env: dict[str, str]) -> tuple[int, str]:
    """`ext mcp login URL --no-browser`, with this test as the person: it opens the printed URL."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "ext.cli", "mcp", "login", url, "--no-browser", "--timeout", "30",
        cwd=HERE, env=env, stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    assert proc.stderr is not None
    seen = ""
    while True:
        line = (await asyncio.wait_for(proc.stderr.readline(), 30)).decode()
        assert line, f"login ended before printing the URL: {seen}"
        seen += line
        if line.startswith("http://127.0.0.1") and "/authorize?" in line:
            assert await asyncio.to_thread(_browse, line.strip()) == 200
            break
    _, err = await asyncio.wait_for(proc.communicate(), 30)
    return int(proc.returncode or 0), seen + err.decode()


async def test_tools_needs_login_then_login_then_logout(server: McpOAuthServer, tmp_path: Path) -> None:
    env = clean_env(EXT_MCP_TOKEN_DIR=str(tmp_path))
    before = await run_ext("mcp", "tools", server.url, env=env, timeout=30)
    assert before.code == 1
    assert "Traceback" not in before.err
    assert "needs an OAuth login" in before.err
    assert f"ext mcp login {server.url}" in before.err

    code, err = await _login(server.url, env)
    assert code == 0, err
    assert f"logged in to {server.url}" in err
    assert server.stats()["authorization_code"] == 1
    assert stored_modes(tmp_path) == {0o600}

    after = await run_ext("mcp", "call", server.url, "echo", "text=hello", env=env, timeout=30)
    assert (after.code, after.out.strip()) == (0, "hello"), after.err
    for value in server.secrets():
        assert value not in after.out + after.err and value not in err

    out = await run_ext("mcp", "logout", server.url, env=env, timeout=30)
    assert out.code == 0 and "logged out" in out.err
    assert stored_modes(tmp_path) == set()
    again = await run_ext("mcp", "logout", server.url, env=env, timeout=30)
    assert "nothing was stored" in again.err


async def test_login_refuses_a_command_line_server() -> None:
    ran = await run_ext("mcp", "login", "npx some-server", timeout=30)
    assert ran.code == 1 and "is not an http(s) URL" in ran.err and "Traceback" not in ran.err
