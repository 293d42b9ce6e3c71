"""The loopback redirect target of an interactive login: a one-request HTTP server on 127.0.0.1.

The authorization server sends the browser to `http://127.0.0.1:<port><path>?code=...&state=...`; this server
answers with a short page and hands the parameters to the waiting flow. It never logs the query (the code).
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from urllib.parse import parse_qs, urlsplit

from mcp.shared.auth import AuthorizationCodeResult

from ext.core import ConfigurationError

_PAGE_OK = b"<!doctype html><title>Logged in</title><p>Login complete. You can close this window."
_PAGE_ERROR = b"<!doctype html><title>Login failed</title><p>The authorization server refused the login: "
_MAX_REQUEST = 16 * 1024


class LoginRefused(Exception):
    """The authorization server redirected back with an error instead of a code."""


class CallbackServer:
    """Listens on 127.0.0.1:`port` (0: a free port) for the authorization redirect."""

    def __init__(self, port: int, path: str) -> None:
        self._port = port
        self._path = path
        self._server: asyncio.Server | None = None
        self._result: asyncio.Future[AuthorizationCodeResult] | None = None

    @property
    def port(self) -> int:
        return self._port

    @property
    def redirect_uri(self) -> str:
        return f"http://127.0.0.1:{self._port}{self._path}"

    def arm(self) -> None:
        """Wait for a new redirect (each authorization, a scope step-up included, gets its own)."""
        self._result = asyncio.get_running_loop().create_future()

    async def start(self) -> None:
        self.arm()
        try:
            self._server = await asyncio.start_server(self._serve, "127.0.0.1", self._port)
        except OSError as exc:
            raise ConfigurationError(
                f"cannot listen for the login callback on 127.0.0.1:{self._port}: {exc.strerror or exc}"
            ) from None
        sock: socket.socket = self._server.sockets[0]
        self._port = int(sock.getsockname()[1])

    async def wait(self, timeout: float) -> AuthorizationCodeResult:
        assert self._result is not None, "start() first"
        return await asyncio.wait_for(asyncio.shield(self._result), timeout)

    async def close(self) -> None:
        server, self._server = self._server, None
        if server is not None:
            server.close()
            with contextlib.suppress(Exception):
                await server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, asyncio.TimeoutError, ConnectionError):
            writer.close()
            return
        try:
            line = head[:_MAX_REQUEST].split(b"\r\n", 1)[0].decode("latin-1")
            method, target, _ = line.split(" ", 2)
            parts = urlsplit(target)
            if method != "GET" or parts.path != self._path:
                await self._answer(writer, 404, b"not found")
                return
            query = parse_qs(parts.query)
            result = self._result
            if result is None or result.done():
                await self._answer(writer, 409, b"this login was already answered")
                return
            code = query.get("code", [None])[0]
            if code:
                result.set_result(
                    AuthorizationCodeResult(
                        code=code, state=query.get("state", [None])[0], iss=query.get("iss", [None])[0]
                    )
                )
                await self._answer(writer, 200, _PAGE_OK)
                return
            error = query.get("error", ["no code in the redirect"])[0]
            # The error code is a registered OAuth value (RFC 6749 4.1.2.1), shown only if it is a plain token.
            shown = error if error.replace("_", "").isalnum() and len(error) < 64 else "invalid redirect"
            result.set_exception(LoginRefused(shown))
            await self._answer(writer, 400, _PAGE_ERROR + shown.encode("ascii", "replace"))
        except ValueError:
            await self._answer(writer, 400, b"bad request")

    @staticmethod
    async def _answer(writer: asyncio.StreamWriter, status: int, body: bytes) -> None:
        reason = {200: "OK", 400: "Bad Request", 404: "Not Found", 409: "Conflict"}[status]
        writer.write(
            f"HTTP/1.1 {status} {reason}\r\nContent-Type: text/html; charset=utf-8\r\nContent-Length: {len(body)}\r\n"
            "Cache-Control: no-store\r\nConnection: close\r\n\r\n".encode("ascii")
            + body
        )
        with contextlib.suppress(ConnectionError):
            await writer.drain()
        writer.close()
