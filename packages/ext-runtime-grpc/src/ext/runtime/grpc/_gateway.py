"""The gateway: workers connect over one bidirectional gRPC stream each; the gateway places agents on workers
and relays deliveries, responses and cancellations between them (and, with a shared registry, between gateway
replicas)."""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import hmac
import itertools
import logging
import uuid
from collections.abc import Awaitable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc
from pydantic import SecretStr

from ext.core import AgentId

from ._forwarder import Forwarder, parse_forwards
from ._health import HealthServer
from ._outbox import Outbox
from ._registry import InMemoryRegistry, Registry, RegistryUnavailableError
from ._secrets import check_token
from .protos import agent_worker_pb2 as pb

logger = logging.getLogger(__name__)

_EOF: object = grpc.aio.EOF  # type: ignore[attr-defined]  # missing from grpc-stubs

DEFAULT_MAX_MESSAGE_BYTES = 4 * 1024 * 1024

# Set while a serve loop handles the items of a batch: what they produce is queued and written as batches
# too, instead of one stream write per item.
_coalescing: contextvars.ContextVar[bool] = contextvars.ContextVar("ext_gateway_coalescing", default=False)

# Set (by a serve loop, for the items of a batch) to collect what they queued for other gateways: per
# forwarder, the last sequence number. The loop waits for those before reading on, so that its next messages
# are routed after these are published or re-routed (the order per sender, even when a gateway dies).
_queued: contextvars.ContextVar[dict[Forwarder[Any], int] | None] = contextvars.ContextVar(
    "ext_gateway_queued", default=None
)


def _error(kind: int, message: str, error_type: str = "") -> pb.Error:
    return pb.Error(kind=kind, error_type=error_type, message=message)  # type: ignore[arg-type]


class _Conn:
    """One connected worker."""

    __slots__ = ("context", "inflight", "outbox", "outgoing", "task", "types", "worker_id")

    def __init__(self, worker_id: str, context: grpc.aio.ServicerContext[Any, Any], max_bytes: int) -> None:
        self.worker_id = worker_id
        self.context = context
        # The task serving this stream (grpc's, running `Gateway.serve`): `stop` waits for it to finish.
        self.task = asyncio.current_task()
        self.outbox = Outbox(context.write, max_bytes)
        self.types: set[str] = set()
        # caller's request id -> gateway request id, for the RPCs this worker started
        self.outgoing: dict[str, str] = {}
        # gateway request id -> recipient, for the RPCs this worker is handling
        self.inflight: dict[str, AgentId] = {}

    def send(self, message: pb.Message) -> Awaitable[None]:
        """Write `message` (await the result). Not a coroutine itself: one layer less on every relayed message."""
        if _coalescing.get():
            self.outbox.post(message)
            return self.outbox.wait_drained()
        return self.outbox.send(message)


@dataclass(slots=True)
class _Pending:
    origin_worker: str
    origin_request: str
    target_worker: str
    target_gateway: str
    recipient: AgentId


@dataclass(slots=True)
class _Outgoing:
    """A message forwarded to another gateway, with what to do if that gateway cannot be reached."""

    message: pb.Message
    # Report a failure (an RPC gets an error response; the sender of a one-way message, when connected here, a
    # Notice). False for responses and cancels: their other end cleans up on its own.
    report: bool = True
    origin: _Conn | None = None
    # Set for a delivery's first attempt: when the target gateway is gone, place the recipient again and re-send.
    recipient: AgentId | None = None
    pending: _Pending | None = None


class Gateway:
    """The gRPC gateway server. `python -m ext.runtime.grpc gateway` runs one; tests and apps can embed it.

    Args:
        host, port: where to listen (port 0 picks a free one; `port` holds the bound one after `start`).
        token: when set, a worker must send `authorization: Bearer <token>` metadata or is rejected.
        tls_cert_file, tls_key_file: PEM files; both set means TLS, neither means plaintext.
        max_message_bytes: the largest message accepted or sent (default 4 MiB).
        registry: `InMemoryRegistry()` (default, one gateway) or `RedisRegistry(...)` (replicas).
        shutdown_grace: seconds `stop()` waits for in-flight RPCs before closing the streams.
        health_port: serve `GET /healthz` (liveness) and `GET /readyz` (readiness) over HTTP on this port
            (0 picks a free one; `health_port` holds the bound one after `start`); None (default): no listener.
        health_host: the interface of the health listener (default: `host`).

    The gRPC port also serves the standard health service (`grpc.health.v1.Health`, what Kubernetes `grpc:`
    probes call), for the overall status (`""`) and `ext.runtime.v1.AgentWorker`, with the same readiness.
    """

    def __init__(
        self,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        token: str | SecretStr | None = None,
        tls_cert_file: str | Path | None = None,
        tls_key_file: str | Path | None = None,
        max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
        registry: Registry | None = None,
        shutdown_grace: float = 5.0,
        health_port: int | None = None,
        health_host: str | None = None,
    ) -> None:
        if not isinstance(host, str) or not host:
            raise ValueError(f"host must be a non-empty string, got {host!r}")
        if isinstance(port, bool) or not isinstance(port, int) or not 0 <= port <= 65535:
            raise ValueError(f"port must be an integer from 0 to 65535, got {port!r}")
        if isinstance(max_message_bytes, bool) or not isinstance(max_message_bytes, int) or max_message_bytes < 1024:
            raise ValueError(f"max_message_bytes must be an integer of at least 1024, got {max_message_bytes!r}")
        if (tls_cert_file is None) != (tls_key_file is None):
            raise ValueError("tls_cert_file and tls_key_file must be given together")
        if not isinstance(shutdown_grace, (int, float)) or shutdown_grace < 0:
            raise ValueError(f"shutdown_grace must be a non-negative number of seconds, got {shutdown_grace!r}")
        if health_port is not None and (
            isinstance(health_port, bool) or not isinstance(health_port, int) or not 0 <= health_port <= 65535
        ):
            raise ValueError(f"health_port must be None or an integer from 0 to 65535, got {health_port!r}")
        if health_host is not None and (not isinstance(health_host, str) or not health_host):
            raise ValueError(f"health_host must be None or a non-empty string, got {health_host!r}")
        if isinstance(token, str):
            token = SecretStr(token)
        if token is not None:
            check_token(token)
        self._host = host
        self._port = port
        self._token = token
        self._tls = (Path(tls_cert_file), Path(tls_key_file)) if tls_cert_file and tls_key_file else None
        self._max_message_bytes = max_message_bytes
        self._registry = registry if registry is not None else InMemoryRegistry()
        self._shutdown_grace = float(shutdown_grace)
        self.gateway_id = uuid.uuid4().hex[:12]
        self._request_prefix = f"{self.gateway_id}/"
        self._server: grpc.aio.Server | None = None
        self._workers: dict[str, _Conn] = {}
        self._pending: dict[str, _Pending] = {}
        self._worker_seq = itertools.count(1)
        self._request_seq = itertools.count(1)
        self._draining = False
        self._agent_ids: dict[tuple[str, str], AgentId] = {}
        # Per other gateway: the ordered queue of what is forwarded to it (see _forwarder.py).
        self._forwarders: dict[str, Forwarder[_Outgoing]] = {}
        self._idle = asyncio.Event()
        self._stopped = asyncio.Event()
        self._health = (
            None if health_port is None else HealthServer(health_host or host, health_port, self.not_ready_reason)
        )

    @property
    def port(self) -> int:
        """The bound port (after `start`)."""
        return self._port

    @property
    def health_port(self) -> int | None:
        """The health listener's port (the bound one after `start`), or None without one."""
        return None if self._health is None else self._health.port

    def not_ready_reason(self) -> str | None:
        """None when the gateway is ready for traffic: its gRPC port serves, its registry answers, and it is not
        draining. Otherwise a short reason (what `/readyz` and the gRPC health service report)."""
        if self._stopped.is_set():
            return "the gateway has stopped"
        if self._draining:
            return "draining: the gateway is shutting down"
        if self._server is None:
            return "the gRPC port is not serving yet"
        return self._registry.health_problem()

    @property
    def address(self) -> str:
        return f"{self._host}:{self._port}"

    def __repr__(self) -> str:
        return f"Gateway(address={self.address!r}, gateway_id={self.gateway_id!r}, tls={self._tls is not None})"

    # --- lifecycle -------------------------------------------------------------------------------------

    async def start(self) -> int:
        """Listen and return the bound port."""
        if self._server is not None:
            return self._port
        # The health port first: failing to bind it then leaves nothing else bound (grpc keeps a port bound by
        # add_*_port until its server object is collected, started or not).
        if self._health is not None:
            await self._health.start()
        try:
            server, bound = await self._start_grpc()
        except BaseException:
            if self._health is not None:
                await self._health.stop()
            raise
        self._server = server
        self._port = bound
        logger.info("gateway %s listening on %s:%d (tls=%s)", self.gateway_id, self._host, bound, self._tls is not None)
        return bound

    async def _start_grpc(self) -> tuple[grpc.aio.Server, int]:
        options = [
            ("grpc.max_receive_message_length", self._max_message_bytes),
            ("grpc.max_send_message_length", self._max_message_bytes),
            ("grpc.so_reuseport", 0),
        ]
        server = grpc.aio.server(options=options)
        _add_servicer(self, server)
        health_pb2_grpc.add_HealthServicer_to_server(_HealthService(self), server)
        target = f"{self._host}:{self._port}"
        if self._tls is not None:
            cert, key = (p.read_bytes() for p in self._tls)
            credentials = grpc.ssl_server_credentials([(key, cert)])
            bound = server.add_secure_port(target, credentials)
        else:
            bound = server.add_insecure_port(target)
        if bound == 0:
            raise OSError(f"cannot listen on {target}")
        await self._registry.start(
            self.gateway_id, self._on_forward, self._on_gateway_gone, link_lost=self._on_registry_link_lost
        )
        await server.start()
        return server, bound

    async def stop(self, grace: float | None = None) -> None:
        """Graceful shutdown: refuse new workers and requests, wait up to `grace` (default `shutdown_grace`)
        seconds for in-flight RPCs, then close every stream and remove this gateway's registrations."""
        if self._server is None or self._stopped.is_set():
            return
        self._draining = True
        grace = self._shutdown_grace if grace is None else grace
        if self._pending:
            self._idle.clear()
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._idle.wait(), grace)
        for worker_id in list(self._workers):
            with contextlib.suppress(Exception):
                await self._registry.remove_worker(worker_id)
        handlers = [conn.task for conn in self._workers.values() if conn.task is not None]
        await self._server.stop(grace=0.5)
        # grpc cancels the streams still open; their handlers then clean up (`_drop`). Wait for them, so that
        # `stop` returning means no handler of ours is still running.
        if handlers:
            await asyncio.wait(handlers, timeout=5.0)
        # What is still queued for other gateways (answers to their callers among it) goes out first.
        flushing = [task for task in (f.flushing for f in self._forwarders.values()) if task is not None]
        if flushing:
            await asyncio.wait(flushing, timeout=5.0)
        await self._registry.close()
        self._stopped.set()
        # Last: probes see the drain (503) until the gateway is gone.
        if self._health is not None:
            await self._health.stop()
        logger.info("gateway %s stopped", self.gateway_id)

    async def wait_stopped(self) -> None:
        await self._stopped.wait()

    # --- one worker stream -----------------------------------------------------------------------------

    def _authorized(self, context: grpc.aio.ServicerContext[Any, Any]) -> bool:
        if self._token is None:
            return True
        expected = f"Bearer {self._token.get_secret_value()}".encode()
        for key, value in context.invocation_metadata() or ():
            if key == "authorization":
                given = value.encode() if isinstance(value, str) else value
                return hmac.compare_digest(given, expected)
        return False

    async def serve(self, context: grpc.aio.ServicerContext[Any, Any]) -> None:
        if not self._authorized(context):
            logger.warning("rejected a worker with a missing or wrong token from %s", context.peer())
            await context.abort(grpc.StatusCode.UNAUTHENTICATED, "missing or invalid token")
        if self._draining:
            await context.abort(grpc.StatusCode.UNAVAILABLE, "the gateway is shutting down")
        conn = _Conn(f"{self.gateway_id}.{next(self._worker_seq)}", context, self._max_message_bytes)
        self._workers[conn.worker_id] = conn
        logger.info("worker %s connected from %s", conn.worker_id, context.peer())
        try:
            await conn.send(pb.Message(hello=pb.Hello(worker_id=conn.worker_id, gateway_id=self.gateway_id)))
            while True:
                message = await context.read()
                if message is _EOF:
                    break
                if message.__class__ is Malformed:
                    # Bytes that are not a `Message`: reported to the sender, and the stream goes on.
                    logger.warning("worker %s sent an undecodable message: %s", conn.worker_id, message.reason)
                    text = f"a message could not be decoded ({message.reason}); it was dropped"
                    await conn.send(pb.Message(notice=pb.Notice(error=_error(pb.ERROR_KIND_BAD_MESSAGE, text))))
                    continue
                body = message.WhichOneof("body")
                if body != "batch":
                    try:
                        # The two hot bodies first, without the generic dispatch.
                        if body == "delivery":
                            await self._on_delivery(conn, message)
                        elif body == "response":
                            await self._route_response(message, conn)
                        else:
                            await self._dispatch(conn, message)
                    except Exception:
                        logger.exception("gateway failed to handle a message from worker %s", conn.worker_id)
                    continue
                token = _coalescing.set(True)
                queued: dict[Forwarder[Any], int] = {}
                queued_token = _queued.set(queued)
                try:
                    for item in message.batch.messages:
                        await self._dispatch_safely(conn, item)
                finally:
                    _queued.reset(queued_token)
                    _coalescing.reset(token)
                for forwarder, seq in queued.items():
                    await forwarder.wait_sent(seq)
        finally:
            await self._drop(conn)

    async def _drop(self, conn: _Conn) -> None:
        self._workers.pop(conn.worker_id, None)
        logger.info("worker %s disconnected", conn.worker_id)
        with contextlib.suppress(Exception):
            await self._registry.remove_worker(conn.worker_id)
        # RPCs this worker was handling: their callers learn at once instead of waiting for their deadline.
        for request_id, recipient in list(conn.inflight.items()):
            error = _error(pb.ERROR_KIND_UNDELIVERABLE, f"the worker hosting {recipient} disconnected", "")
            await self._route_response(pb.Message(response=pb.Response(request_id=request_id, error=error)))
        conn.inflight.clear()
        # RPCs this worker started: nobody is left to answer, so their handlers are cancelled.
        for request_id in list(conn.outgoing.values()):
            pending = self._pending.pop(request_id, None)
            if pending is not None:
                await self._send_cancel(request_id, pending)
        self._check_idle()

    def _check_idle(self) -> None:
        if not self._pending:
            self._idle.set()

    # --- routing ---------------------------------------------------------------------------------------

    async def _dispatch_safely(self, conn: _Conn, message: pb.Message) -> None:
        try:
            await self._dispatch(conn, message)
        except Exception:
            logger.exception("gateway failed to handle a message from worker %s", conn.worker_id)

    async def _dispatch(self, conn: _Conn, message: pb.Message) -> None:
        body = message.WhichOneof("body")
        if body == "delivery":
            await self._on_delivery(conn, message)
        elif body == "response":
            await self._route_response(message, conn)
        elif body == "cancel":
            request_id = conn.outgoing.pop(message.cancel.request_id, None)
            pending = self._pending.pop(request_id, None) if request_id is not None else None
            if request_id is not None and pending is not None:
                await self._send_cancel(request_id, pending)
                self._check_idle()
        elif body == "register":
            await self._on_register(conn, message.register)
        elif body == "list_agents":
            try:
                agents = await self._registry.agents(message.list_agents.type or None)
            except RegistryUnavailableError as exc:
                reply = pb.ListAgentsResponse(request_id=message.list_agents.request_id, error=str(exc))
            else:
                reply = pb.ListAgentsResponse(
                    request_id=message.list_agents.request_id,
                    agents=[pb.AgentId(type=a.type, key=a.key) for a in agents],
                )
            await conn.send(pb.Message(list_agents_response=reply))
        else:
            logger.warning("worker %s sent an unexpected %s message", conn.worker_id, body)

    async def _on_register(self, conn: _Conn, request: pb.RegisterAgentType) -> None:
        error = ""
        if request.type in conn.types:
            error = f"agent type {request.type!r} is already registered by this worker"
        else:
            try:
                AgentId(request.type, "k")
            except ValueError as exc:
                error = str(exc)
        if not error:
            try:
                await self._registry.add(conn.worker_id, request.type)
            except RegistryUnavailableError as exc:
                error = str(exc)
            else:
                conn.types.add(request.type)
                logger.info("worker %s hosts agent type %r", conn.worker_id, request.type)
        reply = pb.RegisterAgentTypeResponse(request_id=request.request_id, error=error)
        await conn.send(pb.Message(register_response=reply))

    async def _on_delivery(self, conn: _Conn, message: pb.Message) -> None:
        delivery = message.delivery
        kind = delivery.kind
        if kind == pb.DELIVERY_KIND_BROADCAST:
            try:
                targets = await self._registry.workers_for(delivery.broadcast_type)
            except RegistryUnavailableError as exc:
                await self._undeliverable(message, str(exc), origin=conn)
                return
            for worker_id, gateway_id in targets:
                await self._send_to_worker(worker_id, gateway_id, message)
            return
        if kind == pb.DELIVERY_KIND_RPC and self._draining:
            await self._answer(conn, delivery.request_id, pb.ERROR_KIND_UNDELIVERABLE, "the gateway is shutting down")
            return
        wire = delivery.recipient
        key = (wire.type, wire.key)
        recipient = self._agent_ids.get(key)
        if recipient is None:
            try:
                recipient = self._agent_id(*key)
            except ValueError as exc:
                logger.warning("worker %s sent a bad recipient: %s", conn.worker_id, exc)
        target = None
        error_kind = pb.ERROR_KIND_AGENT_NOT_FOUND
        text = f"no worker hosts agent type {key[0]!r} (recipient {key[0]}/{key[1]})"
        if recipient is not None:
            try:
                target = self._registry.lookup(recipient) or await self._registry.place(recipient)
            except RegistryUnavailableError as exc:
                error_kind, text = pb.ERROR_KIND_UNDELIVERABLE, f"cannot route to {recipient}: {exc}"
        if target is None:
            if kind == pb.DELIVERY_KIND_RPC:
                await self._answer(conn, delivery.request_id, error_kind, text)
            else:
                notice = pb.Notice(error=_error(error_kind, text), recipient=wire)
                await conn.send(pb.Message(notice=notice))
            return
        assert recipient is not None
        worker_id, gateway_id = target
        pending: _Pending | None = None
        request_id = ""
        if kind == pb.DELIVERY_KIND_RPC:
            request_id = f"{self._request_prefix}{next(self._request_seq)}"
            origin_request = delivery.request_id
            pending = _Pending(conn.worker_id, origin_request, worker_id, gateway_id, recipient)
            self._pending[request_id] = pending
            conn.outgoing[origin_request] = request_id
            delivery.request_id = request_id
        if gateway_id == self.gateway_id:
            # The common case, inline: the recipient's worker is connected here.
            target_conn = self._workers.get(worker_id)
            if target_conn is not None:
                if pending is not None:
                    target_conn.inflight[request_id] = recipient
                try:
                    if _coalescing.get():
                        target_conn.outbox.post(message)
                        await target_conn.outbox.wait_drained()
                    else:
                        await target_conn.outbox.send(message)
                except Exception as exc:
                    await self._undeliverable(message, f"writing to worker {worker_id} failed: {exc}")
                return
        else:
            outgoing = _Outgoing(message, origin=conn, recipient=recipient, pending=pending)
            await self._forward(gateway_id, worker_id, outgoing)
            return
        await self._send_to_worker(
            worker_id, gateway_id, message, recipient if pending is not None else None, origin=conn
        )

    def _agent_id(self, agent_type: str, key: str) -> AgentId:
        """AgentIds from the wire, validated once per distinct id (validation is a regex match)."""
        cache_key = (agent_type, key)
        agent_id = self._agent_ids.get(cache_key)
        if agent_id is None:
            if len(self._agent_ids) > 100_000:
                self._agent_ids.clear()
            agent_id = self._agent_ids[cache_key] = AgentId(agent_type, key)
        return agent_id

    async def _answer(self, conn: _Conn, request_id: str, kind: int, text: str) -> None:
        await conn.send(pb.Message(response=pb.Response(request_id=request_id, error=_error(kind, text))))

    async def _forward(self, gateway_id: str, worker_id: str, outgoing: _Outgoing, *, wait: bool = True) -> None:
        """Forward to `worker_id` (empty: the gateway itself) behind gateway `gateway_id`, through that gateway's
        ordered queue: published at once when nothing is in flight to it, batched with what queues meanwhile
        otherwise. Returns once published or its failure handled, except inside a serve loop's batch (which
        waits at the end of the batch) and with `wait=False` (re-sends from the failure handler)."""
        forwarder = self._forwarders.get(gateway_id)
        if forwarder is None:
            forwarder = self._forwarders[gateway_id] = Forwarder(
                gateway_id, self._registry.publish, self._forwards_failed, self._max_message_bytes
            )
        payload = pb.Forward(
            target_worker=worker_id, origin_gateway=self.gateway_id, message=outgoing.message
        ).SerializeToString()
        if not wait:
            forwarder.post(payload, outgoing)
            return
        queued = _queued.get()
        if queued is not None:
            queued[forwarder] = forwarder.post(payload, outgoing)  # the serve loop waits after the batch
        else:
            await forwarder.send(payload, outgoing)

    async def _forwards_failed(self, gateway_id: str, items: list[_Outgoing], exc: Exception) -> None:
        """A publish to `gateway_id` failed: for each of its forwards, in order, what a single one gets."""
        gone = isinstance(exc, LookupError)
        if gone:
            self._registry.forget_gateway(gateway_id)
        # What this sends on to other gateways is queued without waiting: a flush never waits on another.
        token = _queued.set({})
        try:
            for item in items:
                try:
                    await self._forward_failed(item, exc, gone)
                except Exception:
                    logger.exception("handling a forward to gateway %s that failed", gateway_id)
        finally:
            _queued.reset(token)

    async def _forward_failed(self, item: _Outgoing, exc: Exception, gone: bool) -> None:
        message, recipient, origin = item.message, item.recipient, item.origin
        if not item.report:
            return  # a response or cancel: the caller's gateway fails the RPC when its own link breaks
        if recipient is None:
            await self._undeliverable(message, str(exc), origin=origin)
            return
        if not gone:  # RegistryUnavailableError
            await self._undeliverable(message, f"cannot route to {recipient}: {exc}", origin=origin)
            return
        # The replica holding the placement is gone; place the agent again among live workers.
        try:
            target = await self._registry.place(recipient)
        except RegistryUnavailableError as error:
            await self._undeliverable(message, f"cannot route to {recipient}: {error}", origin=origin)
            return
        if target is None:
            text = f"no live worker hosts agent type {recipient.type!r} (recipient {recipient})"
            await self._undeliverable(message, text, pb.ERROR_KIND_AGENT_NOT_FOUND, origin=origin)
            return
        worker_id, gateway_id = target
        pending = item.pending
        if pending is not None:
            pending.target_worker, pending.target_gateway = worker_id, gateway_id
        rpc_recipient = recipient if pending is not None else None
        await self._send_to_worker(worker_id, gateway_id, message, rpc_recipient, origin=origin, wait=False)

    async def _send_to_worker(
        self,
        worker_id: str,
        gateway_id: str,
        message: pb.Message,
        rpc_recipient: AgentId | None = None,
        origin: _Conn | None = None,
        *,
        wait: bool = True,
    ) -> None:
        """Send to a worker here or behind another gateway. `rpc_recipient` marks an RPC delivery, tracked
        so the caller hears at once if this worker dies before answering; `origin` (the sender, when connected
        here) is told of a one-way message that could not be delivered."""
        if gateway_id != self.gateway_id:
            await self._forward(gateway_id, worker_id, _Outgoing(message, origin=origin), wait=wait)
            return
        conn = self._workers.get(worker_id)
        if conn is None:
            await self._undeliverable(message, f"worker {worker_id} is gone", origin=origin)
            return
        if rpc_recipient is not None:
            conn.inflight[message.delivery.request_id] = rpc_recipient
        try:
            await conn.send(message)
        except Exception as exc:
            await self._undeliverable(message, f"writing to worker {worker_id} failed: {exc}")

    async def _undeliverable(
        self,
        message: pb.Message,
        reason: str,
        kind: int = pb.ERROR_KIND_UNDELIVERABLE,
        origin: _Conn | None = None,
    ) -> None:
        """An RPC gets an error response; a one-way message or broadcast is logged here, and its sender (when
        connected here) gets a `Notice`."""
        if message.WhichOneof("body") != "delivery":
            logger.warning("dropped a message: %s", reason)
            return
        delivery = message.delivery
        if delivery.kind == pb.DELIVERY_KIND_RPC:
            error = _error(kind, reason)
            await self._route_response(pb.Message(response=pb.Response(request_id=delivery.request_id, error=error)))
            return
        logger.warning(
            "dropped a one-way message for %s/%s: %s", delivery.recipient.type, delivery.recipient.key, reason
        )
        if origin is not None:
            notice = pb.Notice(error=_error(kind, reason), recipient=delivery.recipient)
            with contextlib.suppress(Exception):
                await origin.send(pb.Message(notice=notice))

    async def _route_response(self, message: pb.Message, handler: _Conn | None = None) -> None:
        """Relay an RPC's response to its caller; `handler` is the worker that answered (if it is connected here)."""
        response = message.response
        request_id = response.request_id
        if handler is not None:
            handler.inflight.pop(request_id, None)
        if not request_id.startswith(self._request_prefix):
            gateway_id = request_id.split("/", 1)[0]
            if gateway_id != self.gateway_id:
                await self._forward(gateway_id, "", _Outgoing(message, report=False))
                return
        pending = self._pending.pop(request_id, None)
        if pending is None:
            return  # cancelled, or its caller disconnected
        if self._draining and not self._pending:
            self._idle.set()
        origin = self._workers.get(pending.origin_worker)
        if origin is None:
            return
        origin.outgoing.pop(pending.origin_request, None)
        response.request_id = pending.origin_request
        try:
            if _coalescing.get():
                origin.outbox.post(message)
                await origin.outbox.wait_drained()
            else:
                await origin.outbox.send(message)
        except Exception:
            pass  # the caller's stream is gone: its end cleans up (a try block is cheaper than suppress())

    async def _send_cancel(self, request_id: str, pending: _Pending) -> None:
        cancel = pb.Message(cancel=pb.Cancel(request_id=request_id))
        if pending.target_gateway == self.gateway_id:
            conn = self._workers.get(pending.target_worker)
            if conn is not None:
                conn.inflight.pop(request_id, None)
                with contextlib.suppress(Exception):
                    await conn.send(cancel)
        else:
            await self._forward(pending.target_gateway, pending.target_worker, _Outgoing(cancel, report=False))

    # --- replicas --------------------------------------------------------------------------------------

    async def _on_forward(self, payload: bytes) -> None:
        """A `ForwardBatch` another gateway published to this one: each forward handled in order (what they
        produce for local workers is coalesced per stream); what cannot be decoded is reported and dropped."""
        forwards, problems = parse_forwards(payload)
        for problem in problems:
            logger.warning("dropped a forwarded message that could not be decoded (%s)", problem)
        if len(forwards) == 1:
            await self._on_one_forward(forwards[0])
            return
        token = _coalescing.set(True)
        try:
            for forward in forwards:
                try:
                    await self._on_one_forward(forward)
                except Exception:
                    logger.exception("handling a message forwarded by gateway %s failed", forward.origin_gateway)
        finally:
            _coalescing.reset(token)

    async def _on_one_forward(self, forward: pb.Forward) -> None:
        message = forward.message
        if not forward.target_worker:
            if message.WhichOneof("body") == "response":
                await self._route_response(message)
            return
        if message.WhichOneof("body") == "cancel":
            conn = self._workers.get(forward.target_worker)
            if conn is not None:
                conn.inflight.pop(message.cancel.request_id, None)
                with contextlib.suppress(Exception):
                    await conn.send(message)
            return
        delivery = message.delivery
        rpc_recipient = None
        if message.WhichOneof("body") == "delivery" and delivery.kind == pb.DELIVERY_KIND_RPC:
            rpc_recipient = self._agent_id(delivery.recipient.type, delivery.recipient.key)
        await self._send_to_worker(forward.target_worker, self.gateway_id, message, rpc_recipient)

    async def _on_registry_link_lost(self, reason: str) -> None:
        """Messages to this gateway through the registry may have been lost: RPCs waiting on an answer from
        another gateway fail now rather than at their deadline."""
        for request_id, pending in list(self._pending.items()):
            if pending.target_gateway != self.gateway_id:
                text = f"{reason}; the answer from {pending.recipient} may be lost"
                error = _error(pb.ERROR_KIND_UNDELIVERABLE, text)
                await self._route_response(pb.Message(response=pb.Response(request_id=request_id, error=error)))

    async def _on_gateway_gone(self, gateway_id: str) -> None:
        """A replica died: the RPCs it was carrying for our workers fail now rather than at their deadline."""
        forwarder = self._forwarders.get(gateway_id)
        if forwarder is not None and forwarder.idle:
            del self._forwarders[gateway_id]
        for request_id, pending in list(self._pending.items()):
            if pending.target_gateway == gateway_id:
                error = _error(pb.ERROR_KIND_UNDELIVERABLE, f"the gateway hosting {pending.recipient} is gone")
                await self._route_response(pb.Message(response=pb.Response(request_id=request_id, error=error)))


class Malformed:
    """What the stream yields for bytes that do not parse as a `Message` (instead of grpc ending the stream)."""

    __slots__ = ("reason",)

    def __init__(self, reason: str) -> None:
        self.reason = reason


def parse_message(data: bytes) -> pb.Message | Malformed:
    """The stream's deserializer: grpc aborts the whole call when a deserializer raises, so a bad frame is
    returned as `Malformed` for the handler to report."""
    try:
        return pb.Message.FromString(data)
    except Exception as exc:  # DecodeError, and whatever else protobuf raises on hostile input
        return Malformed(f"{type(exc).__name__}: {exc}")


SERVICE = "ext.runtime.v1.AgentWorker"
OPEN_CHANNEL = f"/{SERVICE}/OpenChannel"


def _add_servicer(gateway: Gateway, server: grpc.aio.Server) -> None:
    """`add_AgentWorkerServicer_to_server`, with `parse_message` as the request deserializer."""

    async def open_channel(request_iterator: Any, context: grpc.aio.ServicerContext[Any, Any]) -> None:
        await gateway.serve(context)

    handlers = {
        "OpenChannel": grpc.stream_stream_rpc_method_handler(
            open_channel,
            request_deserializer=parse_message,
            response_serializer=pb.Message.SerializeToString,
        )
    }
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(SERVICE, handlers),))


class _HealthService(health_pb2_grpc.HealthServicer):  # type: ignore[misc]  # the base is Any in grpc-stubs
    """`grpc.health.v1.Health` with the gateway's readiness, computed on each call (no state to keep in step)."""

    SERVICES = ("", SERVICE)
    WATCH_INTERVAL = 1.0

    def __init__(self, gateway: Gateway) -> None:
        self._gateway = gateway

    def _status(self, service: str) -> int:
        if service not in self.SERVICES:
            return int(health_pb2.HealthCheckResponse.SERVICE_UNKNOWN)
        if self._gateway.not_ready_reason() is None:
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
