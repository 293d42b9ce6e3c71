"""OAuth end to end against a real OAuth-protected MCP server: the mcp SDK's server-side auth (ext-testing's
`mcp_oauth_server`) in
a subprocess on 127.0.0.1, over streamable HTTP and SSE.

The person's part of a login (following the authorization URL to the redirect) is driven by `drive_login`, which
does what a browser does: GET the authorization URL, follow its redirect to the loopback callback.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from ext.testing.mcp_oauth_server import McpOAuthServer, start_mcp_oauth_server
from ext.tools.mcp import (
    FileTokenStore,
    McpAuthError,
    McpNeedsLoginError,
    McpWorkbench,
    OAuthSettings,
    SseServerParams,
    StreamableHttpServerParams,
    login,
    logout,
)


def files_in(directory: Path) -> list[Path]:
    """The directory's entries (a plain function: the async tests call it between awaits)."""
    return sorted(directory.iterdir())


def read(path: Path) -> bytes:
    return path.read_bytes()


def mode_of(path: Path) -> int:
    return path.stat().st_mode & 0o777


def expire_stored_tokens(directory: Path) -> int:
    """Rewrite the absolute expiry of each stored (plain) token record to the past: as if time went by."""
    count = 0
    for path in directory.iterdir():
        record = json.loads(path.read_bytes())
        if "expires_at" in record:
            record["expires_at"] = time.time() - 5
            path.write_text(json.dumps(record))
            count += 1
    return count


@pytest.fixture(params=["http", "sse"])
def server(request: pytest.FixtureRequest) -> Iterator[McpOAuthServer]:
    srv = start_mcp_oauth_server(request.param)
    try:
        yield srv
    finally:
        srv.stop()


def params_for(
    server: McpOAuthServer, store: object = None, **settings: object
) -> StreamableHttpServerParams | SseServerParams:
    if store is not None:
        settings["token_store"] = store
    auth = OAuthSettings(**settings)  # type: ignore[arg-type]
    cls = SseServerParams if server.kind == "sse" else StreamableHttpServerParams
    return cls(url=server.url, auth=auth, timeout=10)


def _browse(url: str) -> int:
    with urllib.request.urlopen(url, timeout=10) as answer:  # follows the redirect to the callback
        status: int = answer.status
        return status


async def drive_login(url: str) -> None:
    """A browser's part: open the authorization URL, follow the redirect to the loopback callback. (urllib, which
    logs nothing: the logs checked for secrets are the client's own.)"""
    assert await asyncio.to_thread(_browse, url) == 200


async def test_headless_first_use_needs_login_within_a_second(server: McpOAuthServer, tmp_path: Path) -> None:
    params = params_for(server, FileTokenStore(tmp_path))
    # The process's first connection pays one-time costs (imports, the TLS trust store every httpx client loads)
    # that a busy shared machine stretches; the bound below is about not waiting for a redirect (which would take
    # the 300 s login timeout), so it is measured on a second workbench.
    with pytest.raises(McpNeedsLoginError):
        await McpWorkbench(params).start()
    bench = McpWorkbench(params)
    started = time.monotonic()
    with pytest.raises(McpNeedsLoginError) as caught:
        await bench.list_tools()
    elapsed = time.monotonic() - started
    assert elapsed < 1.0, f"needs-login took {elapsed:.2f} s"  # generous guard: no redirect is waited for
    error = caught.value
    assert error.server == server.url
    assert error.command == f"ext mcp login {server.url}"
    assert f"run `ext mcp login {server.url}`" in str(error)
    assert "no authorization is stored" in str(error)
    assert server.stats().get("authorize", 0) == 0  # nobody was sent to the authorization endpoint
    # Someone logs in elsewhere (another process, same store): the same workbench now works, without a restart.
    await login(params, open_url=drive_login, timeout=10)
    try:
        assert (await bench.call_tool("echo", {"text": "later"})).to_text() == "later"
    finally:
        await bench.stop()
    assert server.stats()["authorize"] == 1


async def test_login_call_expiry_refresh_and_revocation(
    server: McpOAuthServer, tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    caplog.set_level(logging.DEBUG)
    monkeypatch.setenv("EXT_TEST_TOKEN_KEY", FileTokenStore.generate_key())
    # The default file store, encrypted, configured by name: a workbench that can be dumped.
    params = params_for(server, token_dir=str(tmp_path), token_encryption_key_env="EXT_TEST_TOKEN_KEY")
    store = params.auth.store()
    assert isinstance(store, FileTokenStore) and store.encrypted
    opened: list[str] = []

    async def person(url: str) -> None:
        opened.append(url)
        await drive_login(url)

    await login(params, open_url=person, timeout=10)
    assert len(opened) == 1 and "code_challenge_method=S256" in opened[0]
    assert server.stats() == {"register": 1, "authorize": 1, "authorization_code": 1}

    bench = McpWorkbench(params)
    async with bench:
        assert (await bench.call_tool("echo", {"text": "one"})).to_text() == "one"
        # The server expires the access token; the next call is refused with 401, refreshes, and succeeds.
        server.control("expire")
        result = await bench.call_tool("echo", {"text": "two"})
        assert (result.is_error, result.to_text()) == (False, "two")
        assert server.stats()["refresh_token"] == 1
        # Revoked (access and refresh tokens): a clear error naming the server and the command, promptly.
        server.control("revoke")
        started = time.monotonic()
        with pytest.raises(McpNeedsLoginError) as caught:
            await bench.call_tool("echo", {"text": "three"})
        assert time.monotonic() - started < 1.0
        assert "stored authorization was refused" in str(caught.value)
        assert server.stats()["authorize"] == 1  # headless: never sent anyone to log in again

    issued = server.secrets()
    assert len(issued) >= 6  # two access and two refresh tokens, a code, a PKCE verifier
    leaks = {
        "logs": caplog.text,
        "error": f"{caught.value!s} {caught.value!r}",
        "repr": repr(bench) + repr(params) + repr(params.auth) + repr(store),
        "dump": bench.dump_component().model_dump_json(),
    }
    for where, text in leaks.items():
        for value in issued:
            assert value not in text, f"a secret appeared in the {where}"
    # At rest: the store's files hold ciphertext only.
    for path in files_in(tmp_path):
        raw = read(path)
        assert all(value.encode() not in raw for value in issued), path
        assert mode_of(path) == 0o600


async def test_expired_token_in_store_refreshes_before_the_call(server: McpOAuthServer, tmp_path: Path) -> None:
    """A process started after the access token expired refreshes it (at the token endpoint discovered last time)
    before sending it, then calls the tool."""
    params = params_for(server, FileTokenStore(tmp_path))
    await login(params, open_url=drive_login, timeout=10)
    # Let the stored token expire: rewrite its absolute expiry to the past (the store's own format).
    assert expire_stored_tokens(tmp_path) == 1
    async with McpWorkbench(params) as bench:
        result = await bench.call_tool("echo", {"text": "fresh"})
    assert result.to_text() == "fresh"
    stats = server.stats()
    assert stats["refresh_token"] == 1 and stats["authorize"] == 1


async def test_workers_share_a_refresh(server: McpOAuthServer, tmp_path: Path) -> None:
    """Two workbenches on one store (two workers): one refreshes, the other takes the new token from the store
    when its own refresh token was already rotated away."""
    params = params_for(server, FileTokenStore(tmp_path))
    await login(params, open_url=drive_login, timeout=10)
    first, second = McpWorkbench(params), McpWorkbench(params)
    async with first, second:
        assert (await first.call_tool("echo", {"text": "a"})).to_text() == "a"
        assert (await second.call_tool("echo", {"text": "b"})).to_text() == "b"
        server.control("expire")
        assert (await first.call_tool("echo", {"text": "c"})).to_text() == "c"
        assert (await second.call_tool("echo", {"text": "d"})).to_text() == "d"
    stats = server.stats()
    # One refresh was granted: the second worker's refresh token had been rotated away (refused before any
    # exchange), and it went on with the token the first worker stored.
    assert stats["refresh_token"] == 1 and stats["authorize"] == 1


async def test_refresh_failure_keeps_the_registration_and_invalid_client_drops_it(
    server: McpOAuthServer, tmp_path: Path
) -> None:
    params = params_for(server, FileTokenStore(tmp_path))
    await login(params, open_url=drive_login, timeout=10)
    files = {p.name for p in files_in(tmp_path)}
    server.control("revoke")  # refresh -> invalid_grant
    with pytest.raises(McpNeedsLoginError):
        async with McpWorkbench(params) as bench:
            await bench.call_tool("echo", {"text": "x"})
    left = {p.name for p in files_in(tmp_path)}
    assert len(files - left) == 1  # the dead token record only; the registration and the metadata stay
    # Log in again: no new registration is needed.
    await login(params, open_url=drive_login, timeout=10)
    assert server.stats()["register"] == 1
    # Now the server forgets the client: the refresh answer is invalid_client, and the registration goes.
    server.control("forget-clients")
    server.control("expire")
    with pytest.raises(McpAuthError):
        async with McpWorkbench(params) as bench:
            await bench.call_tool("echo", {"text": "y"})
    await login(params, open_url=drive_login, timeout=10)
    assert server.stats()["register"] == 2


async def test_logout_forgets_everything(server: McpOAuthServer, tmp_path: Path) -> None:
    params = params_for(server, FileTokenStore(tmp_path))
    assert await logout(params) is False
    await login(params, open_url=drive_login, timeout=10)
    assert any(files_in(tmp_path))
    assert await logout(params) is True
    assert not any(files_in(tmp_path))
    with pytest.raises(McpNeedsLoginError):
        async with McpWorkbench(params) as bench:
            await bench.list_tools()


async def test_login_refused_or_abandoned_is_a_clear_error(server: McpOAuthServer, tmp_path: Path) -> None:
    params = params_for(server, FileTokenStore(tmp_path))

    async def nobody(url: str) -> None:
        return None

    started = time.monotonic()
    with pytest.raises(McpAuthError, match=r"not completed within 0.3 s"):
        await login(params, open_url=nobody, timeout=0.3)
    assert time.monotonic() - started < 5
