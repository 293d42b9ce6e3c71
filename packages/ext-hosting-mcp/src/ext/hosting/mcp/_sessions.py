"""Streamable-HTTP sessions that any server process can continue.

The SDK's `StreamableHTTPSessionManager` keeps each session in the memory of the process that created it: behind a
load balancer or after a restart, the client's next request gets "404 session not found". This manager keeps the
SDK's per-session transport (`StreamableHTTPServerTransport`), dispatcher and request runner, and adds a
`SessionStore` that holds what a session is made of after its handshake: its id, the negotiated protocol version,
the client's `initialize` parameters and the credential that opened it. A process that gets a request for a session
it does not hold loads that record and rebuilds the session ready (no second handshake); every request refreshes the
record's expiry, so an idle session ends after `idle_timeout` seconds wherever it was used last.

Each session has its own event store (the SDK shares one across sessions, and request ids repeat between them),
from the same `SessionStore`: in memory (`MemorySessionStore`, one process) or in Redis (`RedisSessionStore`).

Requests naming a stateless protocol revision (2026-07-28 and later) have no session: they go to the SDK's own
manager in stateless mode.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar
from uuid import uuid4

import anyio
import mcp_types as types
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser, authorization_context
from mcp.server.connection import Connection
from mcp.server.lowlevel import Server
from mcp.server.runner import serve_connection
from mcp.server.streamable_http import MCP_SESSION_ID_HEADER, EventStore, StreamableHTTPServerTransport
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import RequestBodyLimitMiddleware, TransportSecuritySettings
from mcp.shared.jsonrpc_dispatcher import JSONRPCDispatcher
from mcp.shared.transport_context import TransportContext
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS
from starlette.responses import Response
from starlette.types import Message, Receive, Scope, Send

__all__ = ["SessionManager", "SessionRecord", "SessionStore"]

logger = logging.getLogger(__name__)

_PROTOCOL_HEADER = b"mcp-protocol-version"
_SESSION_HEADER = MCP_SESSION_ID_HEADER.encode("ascii")


@dataclass(frozen=True)
class SessionRecord:
    """What a session is after its handshake: enough for another process to continue it."""

    protocol_version: str
    client_params: dict[str, Any] | None
    owner: str | None  # the credential's principal that opened it (None without authentication)


class SessionStore(Protocol):
    """Where sessions live. `touch` refreshes the expiry and says whether the session still exists."""

    async def save(self, session_id: str, record: SessionRecord, ttl: float) -> None: ...

    async def load(self, session_id: str, ttl: float) -> SessionRecord | None: ...

    async def touch(self, session_id: str, ttl: float) -> bool: ...

    async def delete(self, session_id: str) -> None: ...

    def event_store(self, session_id: str, ttl: float) -> EventStore: ...

    def running(self) -> contextlib.AbstractAsyncContextManager[None]: ...


def _owner(scope: Scope) -> str | None:
    user = scope.get("user")
    if not isinstance(user, AuthenticatedUser):
        return None
    who = authorization_context(user)
    return f"{who['issuer'] or ''}|{who['client_id']}|{who['subject'] or ''}"


class _StoreUnavailable(Exception):
    """The session store failed (Redis down, a timeout): the client gets 503 rather than a dropped connection."""


_T = TypeVar("_T")


async def _stored(operation: Awaitable[_T]) -> _T:
    try:
        return await operation
    except Exception as exc:
        raise _StoreUnavailable(type(exc).__name__) from exc


def _error(message: str, status: int, code: int = types.INVALID_REQUEST) -> Response:
    body = types.JSONRPCError(jsonrpc="2.0", id=None, error=types.ErrorData(code=code, message=message))
    return Response(
        body.model_dump_json(by_alias=True, exclude_unset=True), status_code=status, media_type="application/json"
    )


class SessionManager:
    """Serves streamable HTTP for `server`, with sessions kept in `store` (see the module docstring)."""

    def __init__(
        self,
        server: Server[Any],
        store: SessionStore,
        *,
        security: TransportSecuritySettings | None,
        idle_timeout: float = 1800.0,
        json_response: bool = False,
        retry_interval: int | None = None,
        max_request_body_size: int = 4 * 1024 * 1024,
        max_sessions: int = 10_000,
    ) -> None:
        self._server = server
        self._max_sessions = max_sessions
        self._store = store
        self._security = security
        self._ttl = idle_timeout
        self._json = json_response
        self._retry_interval = retry_interval
        self._local: dict[str, StreamableHTTPServerTransport] = {}
        self._owners: dict[str, str | None] = {}
        self._versions: dict[str, str] = {}
        self._lock = anyio.Lock()
        self._tg: anyio.abc.TaskGroup | None = None
        self._lifespan_state: Any = None
        self._stateless = StreamableHTTPSessionManager(
            server, stateless=True, security_settings=security, json_response=json_response
        )
        self.asgi_app = RequestBodyLimitMiddleware(self._handle, max_request_body_size)

    @contextlib.asynccontextmanager
    async def run(self) -> AsyncIterator[None]:
        async with (
            self._store.running(),
            self._stateless.run(),
            self._server.lifespan(self._server) as state,
            anyio.create_task_group() as tg,
        ):
            self._tg, self._lifespan_state = tg, state
            try:
                yield
            finally:
                tg.cancel_scope.cancel()
                self._tg = None
                self._local.clear()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self.asgi_app(scope, receive, send)

    async def _handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        started = False

        async def watched(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self._route(scope, receive, watched)
        except _StoreUnavailable:
            logger.warning("the session store is unavailable", exc_info=True)
            if not started:  # else the answer is under way and the connection just ends
                await _error("Session store unavailable; retry later", 503, types.INTERNAL_ERROR)(scope, receive, send)

    async def _route(self, scope: Scope, receive: Receive, send: Send) -> None:
        headers = dict(scope["headers"])
        version = headers.get(_PROTOCOL_HEADER)
        if version is not None and version.decode("latin-1") not in HANDSHAKE_PROTOCOL_VERSIONS:
            await self._stateless.handle_request(scope, receive, send)
            return
        raw_id = headers.get(_SESSION_HEADER)
        if raw_id is None:
            await self._open(scope, receive, send)
            return
        session_id = raw_id.decode("latin-1")
        transport = self._local.get(session_id)
        if transport is not None:
            if not await _stored(self._store.touch(session_id, self._ttl)):  # deleted or expired elsewhere
                await self._discard(session_id, transport)
                transport = None
        else:
            transport = await self._revive(session_id)
        if transport is None or self._owners.get(session_id) != _owner(scope):
            # A session is used only with the credential that opened it; otherwise answer as if it did not exist.
            await _error("Session not found", 404)(scope, receive, send)
            return
        version = self._versions.get(session_id)
        if version is not None and _PROTOCOL_HEADER not in headers:
            # The spec lets a server fall back on the version negotiated at initialization when a request names none
            # (else it must assume 2025-03-26); the SDK's transport reads only the header, so it is supplied here.
            scope = {**scope, "headers": [*scope["headers"], (_PROTOCOL_HEADER, version.encode("latin-1"))]}
        await transport.handle_request(scope, receive, send)
        if transport.is_terminated:  # the client ended it (DELETE)
            await self._store.delete(session_id)
            await self._discard(session_id, transport)

    def _transport(self, session_id: str) -> StreamableHTTPServerTransport:
        return StreamableHTTPServerTransport(
            mcp_session_id=session_id,
            is_json_response_enabled=self._json,
            event_store=self._store.event_store(session_id, self._ttl),
            security_settings=self._security,
            retry_interval=self._retry_interval,
            idle_timeout=self._ttl,
        )

    async def _serve(
        self,
        session_id: str,
        transport: StreamableHTTPServerTransport,
        connection_of: Any,
        *,
        task_status: anyio.abc.TaskStatus[Connection] = anyio.TASK_STATUS_IGNORED,
    ) -> None:
        async with transport.connect() as (read, write):
            dispatcher: JSONRPCDispatcher[TransportContext] = JSONRPCDispatcher(
                read, write, inline_methods=frozenset({"initialize"})
            )
            connection: Connection = connection_of(dispatcher)
            task_status.started(connection)
            idle = transport.idle_scope or anyio.CancelScope()
            try:
                with idle:
                    await serve_connection(
                        self._server, dispatcher, connection=connection, lifespan_state=self._lifespan_state
                    )
            except Exception:
                logger.exception("session %s failed", session_id[:64])
            finally:
                # Idle here ends the local copy only: the record lives on in the store until its own expiry.
                await self._discard(session_id, transport)

    async def _open(self, scope: Scope, receive: Receive, send: Send) -> None:
        if len(self._local) >= self._max_sessions:
            await _error("Too many open sessions", 503, types.INTERNAL_ERROR)(scope, receive, send)
            return
        session_id = uuid4().hex
        transport = self._transport(session_id)
        assert self._tg is not None
        connection: Connection = await self._tg.start(
            self._serve, session_id, transport, lambda d: Connection.for_loop(d, session_id=session_id)
        )
        owner = _owner(scope)
        self._local[session_id], self._owners[session_id] = transport, owner
        saved = False
        ended = False
        status = 0

        async def save_then_send(message: Message) -> None:
            # The record is written before the initialize answer leaves, so the client's next request finds it on
            # whichever process it reaches. If the store fails, the answer is cut short (the client sees the
            # stream end without a result, rather than a session no other process knows) and nothing is kept.
            nonlocal saved, ended, status
            if ended:
                return
            if message["type"] == "http.response.start":
                status = message["status"]
            elif not saved and connection.client_params is not None and status < 400:
                params = connection.client_params.model_dump(mode="json", by_alias=True, exclude_none=True)
                record = SessionRecord(connection.protocol_version, params, owner)
                try:
                    await self._store.save(session_id, record, self._ttl)
                except Exception:
                    logger.warning("could not save session %s: the session store failed", session_id, exc_info=True)
                    ended = True
                    await send({"type": "http.response.body", "body": b"", "more_body": False})
                    return
                saved = True
                self._versions[session_id] = connection.protocol_version
            await send(message)

        try:
            await transport.handle_request(scope, receive, save_then_send)
        finally:
            if not saved:  # not an accepted initialize: nothing was established
                await self._discard(session_id, transport)

    async def _revive(self, session_id: str) -> StreamableHTTPServerTransport | None:
        async with self._lock:
            transport = self._local.get(session_id)
            if transport is not None:
                return transport
            record = await _stored(self._store.load(session_id, self._ttl))
            if record is None:
                return None
            transport = self._transport(session_id)

            def ready(dispatcher: JSONRPCDispatcher[TransportContext]) -> Connection:
                params = (
                    None
                    if record.client_params is None
                    else types.InitializeRequestParams.model_validate(record.client_params)
                )
                connection = Connection(
                    dispatcher, protocol_version=record.protocol_version, session_id=session_id, client_params=params
                )
                connection.initialized.set()
                return connection

            assert self._tg is not None
            await self._tg.start(self._serve, session_id, transport, ready)
            self._local[session_id], self._owners[session_id] = transport, record.owner
            self._versions[session_id] = record.protocol_version
            logger.info("continuing session %s opened elsewhere", session_id[:64])
            return transport

    async def _discard(self, session_id: str, transport: StreamableHTTPServerTransport) -> None:
        if self._local.get(session_id) is transport:
            del self._local[session_id]
            self._owners.pop(session_id, None)
            self._versions.pop(session_id, None)
        if not transport.is_terminated:
            with anyio.CancelScope(shield=True):
                await transport.terminate()
