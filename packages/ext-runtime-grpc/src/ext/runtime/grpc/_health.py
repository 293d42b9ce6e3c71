"""The gateway's health endpoints. `HealthServer`: the HTTP listener, `GET /healthz` (liveness) and `GET /readyz`
(readiness), what Kubernetes `httpGet` probes and compose healthchecks call; plain asyncio streams, no dependency;
a probe costs the gateway nothing per message, and each request is bounded in size, time and concurrency so a
slow or hostile client cannot hold the gateway's loop. `GrpcHealthService`: the standard `grpc.health.v1.Health`
service on the gRPC port (what Kubernetes `grpc:` probes call), with the same readiness."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from typing import Any

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

logger = logging.getLogger(__name__)

# A probe's request line and headers fit in far less; more is refused with 431.
MAX_REQUEST_BYTES = 8192
# Seconds a client has to send its request head before the connection is closed with 408.
REQUEST_TIMEOUT = 5.0
# Connections served at once; more are closed without an answer (probes open one at a time).
MAX_CONNECTIONS = 32

_REASONS = {
    200: "OK",
    400: "Bad Request",
    404: "Not Found",
    405: "Method Not Allowed",
    408: "Request Timeout",
    431: "Request Header Fields Too Large",
    503: "Service Unavailable",
}

NotReadyReason = Callable[[], "str | None"]
"""Returns None when ready, otherwise a short reason (shown in the 503 body)."""


class HealthServer:
    """Serves `/healthz` and `/readyz` on `host:port` (port 0 picks a free one; `port` holds the bound one).

    `/healthz` answers 200 whenever the loop runs (liveness). `/readyz` answers 200 `ready` when
    `not_ready_reason()` returns None, otherwise 503 `not ready: <reason>`. `GET` and `HEAD` only; other paths
    404. Every response closes its connection.
    """

    def __init__(self, host: str, port: int, not_ready_reason: NotReadyReason) -> None:
        self._host = host
        self._port = port
        self._not_ready_reason = not_ready_reason
        self._server: asyncio.Server | None = None
        self._connections: set[asyncio.Task[None]] = set()

    @property
    def port(self) -> int:
        return self._port

    async def start(self) -> int:
        server = await asyncio.start_server(self._handle, self._host, self._port, limit=MAX_REQUEST_BYTES)
        self._server = server
        self._port = int(server.sockets[0].getsockname()[1])
        logger.info("health endpoints on http://%s:%d/healthz and /readyz", self._host, self._port)
        return self._port

    async def stop(self) -> None:
        if self._server is None:
            return
        self._server.close()
        for task in list(self._connections):
            task.cancel()
        if self._connections:
            await asyncio.wait(list(self._connections), timeout=2.0)
        with contextlib.suppress(Exception):
            await self._server.wait_closed()
        self._server = None

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        if task is None or len(self._connections) >= MAX_CONNECTIONS:
            writer.close()
            return
        self._connections.add(task)
        try:
            status, body, head_only = await self._answer(reader)
            _write(writer, status, body, head_only)
            await asyncio.wait_for(writer.drain(), REQUEST_TIMEOUT)
        except (OSError, asyncio.TimeoutError, asyncio.CancelledError):
            pass  # the client went away or stalls reading; nothing to tell it
        finally:
            self._connections.discard(task)
            writer.close()

    async def _answer(self, reader: asyncio.StreamReader) -> tuple[int, str, bool]:
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), REQUEST_TIMEOUT)
        except asyncio.TimeoutError:
            return 408, "request not received in time\n", False
        except asyncio.LimitOverrunError:
            return 431, f"request head over {MAX_REQUEST_BYTES} bytes\n", False
        except asyncio.IncompleteReadError:
            return 400, "incomplete request\n", False
        parts = head.split(b"\r\n", 1)[0].split(b" ")
        if len(parts) != 3 or not parts[2].startswith(b"HTTP/1."):
            return 400, "expected 'METHOD /path HTTP/1.x'\n", False
        method, target = parts[0], parts[1].split(b"?", 1)[0]
        if target not in (b"/healthz", b"/readyz"):
            return 404, "not found: the paths are /healthz and /readyz\n", False
        if method not in (b"GET", b"HEAD"):
            return 405, "only GET and HEAD\n", False
        head_only = method == b"HEAD"
        if target == b"/healthz":
            return 200, "ok\n", head_only
        reason = self._not_ready_reason()
        if reason is None:
            return 200, "ready\n", head_only
        return 503, f"not ready: {reason}\n", head_only


def _write(writer: asyncio.StreamWriter, status: int, body: str, head_only: bool) -> None:
    data = body.encode()
    head = (
        f"HTTP/1.1 {status} {_REASONS[status]}\r\n"
        "Content-Type: text/plain; charset=utf-8\r\n"
        f"Content-Length: {len(data)}\r\n"
        "Cache-Control: no-store\r\n"
        "Connection: close\r\n\r\n"
    ).encode()
    writer.write(head if head_only else head + data)


class GrpcHealthService(health_pb2_grpc.HealthServicer):  # type: ignore[misc]  # the base is Any in grpc-stubs
    """`grpc.health.v1.Health` with the gateway's readiness, computed on each call (no state to keep in step)."""

    WATCH_INTERVAL = 1.0

    def __init__(self, not_ready_reason: NotReadyReason, service: str) -> None:
        # The overall status ("") and the named service share one readiness.
        self.SERVICES = ("", service)
        self._not_ready_reason = not_ready_reason

    def _status(self, service: str) -> int:
        if service not in self.SERVICES:
            return int(health_pb2.HealthCheckResponse.SERVICE_UNKNOWN)
        if self._not_ready_reason() is None:
            return int(health_pb2.HealthCheckResponse.SERVING)
        return int(health_pb2.HealthCheckResponse.NOT_SERVING)

    async def Check(
        self, request: health_pb2.HealthCheckRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> health_pb2.HealthCheckResponse:
        if request.service not in self.SERVICES:
            await context.abort(grpc.StatusCode.NOT_FOUND, f"unknown service {request.service!r}")
        return health_pb2.HealthCheckResponse(status=self._status(request.service))

    async def Watch(self, request: health_pb2.HealthCheckRequest, context: grpc.aio.ServicerContext[Any, Any]) -> None:
        # Polled (once a second per watcher) rather than pushed: readiness depends on the registry's last answer,
        # which changes on its own. grpc cancels this handler when the watcher goes away or the server stops.
        last = -1
        while True:
            status = self._status(request.service)
            if status != last:
                await context.write(health_pb2.HealthCheckResponse(status=status))
                last = status
            await asyncio.sleep(self.WATCH_INTERVAL)
