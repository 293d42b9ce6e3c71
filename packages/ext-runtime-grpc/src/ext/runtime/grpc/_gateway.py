"""The gateway's serving side: the gRPC server (the `AgentWorker` stream service and the standard health
service), authentication of workers, each worker's stream read loop, the workers' requests on the registry's
topic subscription table, readiness, and drain/shutdown. Where a message goes is the business of the `Router` it holds
(`_routing.py`)."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
from pathlib import Path
from typing import Any

import grpc
from grpc_health.v1 import health_pb2_grpc
from pydantic import SecretStr

from ._autogen_service import AutoGenService, is_loopback
from ._health import GrpcHealthService, HealthServer
from ._links import WorkerLink
from ._registry import InMemoryRegistry, Registry, RegistryUnavailableError
from ._routing import Router
from ._secrets import check_token
from ._wire import (
    DEFAULT_MAX_MESSAGE_BYTES,
    EOF,
    PREVIOUS_WORKER,
    SERVICE,
    WORKER_INSTANCE,
    Malformed,
    bearer_matches,
    metadata_value,
    parse_message,
    subscription_of_wire,
    subscription_to_wire,
    wire_error,
)
from .protos import agent_worker_pb2 as pb

__all__ = ["DEFAULT_MAX_MESSAGE_BYTES", "Gateway"]

logger = logging.getLogger(__name__)


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
        autogen_address: `HOST:PORT` (port 0 picks a free one) to also serve AutoGen 0.7's `agents.AgentRpc`
            protocol there, so that AutoGen's `GrpcWorkerAgentRuntime` workers join this gateway; None (default):
            off. That listener is plaintext and authenticates nobody (AutoGen's worker sends no token and opens
            only plaintext channels): bind it to loopback or a private network, or put a TLS proxy in front.
            An AutoGen client removes only the subscriptions it added and, with `token`, cannot host an agent
            type an ext worker hosts; it can call, send to and publish to every agent, and list the subscriptions.
        autogen_allow_unauthenticated: with `token` set, an `autogen_address` that is not a loopback one is refused
            (`ValueError`) unless this is True: it lets any AutoGen client that reaches that address, without the
            token, call, send to and publish to every agent of the cluster and list its subscriptions (logged as a
            WARNING here). Without `token`, or on loopback, it changes nothing.

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
        autogen_address: str | None = None,
        autogen_allow_unauthenticated: bool = False,
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
        if autogen_address is not None and (not isinstance(autogen_address, str) or not _is_host_port(autogen_address)):
            raise ValueError(f"autogen_address must be None or 'HOST:PORT', got {autogen_address!r}")
        if not isinstance(autogen_allow_unauthenticated, bool):
            raise TypeError(
                f"autogen_allow_unauthenticated must be a bool, got {type(autogen_allow_unauthenticated).__name__}"
            )
        if isinstance(token, str):
            token = SecretStr(token)
        if token is not None:
            check_token(token)
        exposed = autogen_address is not None and not is_loopback(autogen_address)
        if token is not None and exposed and not autogen_allow_unauthenticated:
            raise ValueError(
                f"autogen_address {autogen_address!r} is not a loopback address, and this gateway requires a token "
                "that AutoGen clients cannot send: any client reaching it would call every agent without the token. "
                "Bind it to 127.0.0.1, or pass autogen_allow_unauthenticated=True (--autogen-allow-unauthenticated) "
                "to accept that"
            )
        if token is not None and exposed:
            logger.warning(
                "the AutoGen listener on %s authenticates nobody (%s=True): although ext's workers need the token, "
                "any client that reaches it can call, send to and publish to every agent and list the subscriptions",
                autogen_address,
                "autogen_allow_unauthenticated",
            )
        self._host = host
        self._port = port
        self._token = token
        self._tls = (Path(tls_cert_file), Path(tls_key_file)) if tls_cert_file and tls_key_file else None
        self._max_message_bytes = max_message_bytes
        # Where each message goes; the subscription-table requests of workers come back here.
        self._router = Router(
            registry if registry is not None else InMemoryRegistry(), max_message_bytes, self._on_table_request
        )
        self._registry = self._router.registry
        self._shutdown_grace = float(shutdown_grace)
        self._server: grpc.aio.Server | None = None
        self._worker_seq = itertools.count(1)
        self._stopped = asyncio.Event()
        self._health = (
            None if health_port is None else HealthServer(health_host or host, health_port, self.not_ready_reason)
        )
        self._autogen = (
            None
            if autogen_address is None
            else AutoGenService(self._router, autogen_address, max_message_bytes, token_required=token is not None)
        )

    @property
    def gateway_id(self) -> str:
        """This gateway's id in the cluster (random, per `Gateway`)."""
        return self._router.gateway_id

    @property
    def port(self) -> int:
        """The bound port (after `start`)."""
        return self._port

    @property
    def health_port(self) -> int | None:
        """The health listener's port (the bound one after `start`), or None without one."""
        return None if self._health is None else self._health.port

    @property
    def autogen_port(self) -> int | None:
        """The AutoGen listener's port (the bound one after `start`), or None without one."""
        return None if self._autogen is None else self._autogen.port

    @property
    def autogen_address(self) -> str | None:
        """`HOST:PORT` of the AutoGen listener (the bound port after `start`), or None without one."""
        return None if self._autogen is None else self._autogen.address

    @property
    def registry(self) -> Registry:
        """The registry this gateway shares with its replicas."""
        return self._registry

    @property
    def draining(self) -> bool:
        """True once `stop` began: new workers and requests are refused."""
        return self._router.draining

    def not_ready_reason(self) -> str | None:
        """None when the gateway is ready for traffic: its gRPC port serves, its registry answers, and it is not
        draining. Otherwise a short reason (what `/readyz` and the gRPC health service report)."""
        if self._stopped.is_set():
            return "the gateway has stopped"
        if self._router.draining:
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
        if self._autogen is not None:
            try:
                await self._autogen.start()
            except BaseException:
                await server.stop(grace=0)
                await self._registry.close()
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
        health_pb2_grpc.add_HealthServicer_to_server(GrpcHealthService(self.not_ready_reason, SERVICE), server)
        target = f"{self._host}:{self._port}"
        if self._tls is not None:
            cert, key = (p.read_bytes() for p in self._tls)
            credentials = grpc.ssl_server_credentials([(key, cert)])
            bound = server.add_secure_port(target, credentials)
        else:
            bound = server.add_insecure_port(target)
        if bound == 0:
            raise OSError(f"cannot listen on {target}")
        router = self._router
        await self._registry.start(
            router.gateway_id, router.on_forward, router.on_gateway_gone, link_lost=router.on_registry_link_lost
        )
        await server.start()
        return server, bound

    async def stop(self, grace: float | None = None) -> None:
        """Graceful shutdown: refuse new workers and requests, wait up to `grace` (default `shutdown_grace`)
        seconds for in-flight RPCs, then close every stream and remove this gateway's registrations."""
        if self._server is None or self._stopped.is_set():
            return
        router = self._router
        router.drain()
        await router.wait_idle(self._shutdown_grace if grace is None else grace)
        links = router.links()
        for link in links:
            with contextlib.suppress(Exception):
                await self._registry.remove_worker(link.worker_id)
        handlers = [link.task for link in links if link.task is not None]
        if self._autogen is not None:
            await self._autogen.stop(grace=0.5)
        await self._server.stop(grace=0.5)
        # grpc cancels the streams still open; their handlers then clean up (`detach`). Wait for them, so that
        # `stop` returning means no handler of ours is still running.
        if handlers:
            await asyncio.wait(handlers, timeout=5.0)
        # What is still queued for other gateways (answers to their callers among it) goes out first.
        flushing = router.flushing()
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
        return self._token is None or bearer_matches(context.invocation_metadata(), self._token)

    async def serve(self, context: grpc.aio.ServicerContext[Any, Any]) -> None:
        if not self._authorized(context):
            logger.warning("rejected a worker with a missing or wrong token from %s", context.peer())
            await context.abort(grpc.StatusCode.UNAUTHENTICATED, "missing or invalid token")
        router = self._router
        if router.draining:
            await context.abort(grpc.StatusCode.UNAVAILABLE, "the gateway is shutting down")
        metadata = context.invocation_metadata()
        conn = WorkerLink(
            f"{self.gateway_id}.{next(self._worker_seq)}",
            context,
            self._max_message_bytes,
            instance=metadata_value(metadata, WORKER_INSTANCE),
            previous=metadata_value(metadata, PREVIOUS_WORKER),
        )
        router.attach(conn)
        logger.info("worker %s connected from %s", conn.worker_id, context.peer())
        try:
            await conn.send(pb.Message(hello=pb.Hello(worker_id=conn.worker_id, gateway_id=self.gateway_id)))
            while True:
                message = await context.read()
                if message is EOF:
                    break
                if message.__class__ is Malformed:
                    # Bytes that are not a `Message`: reported to the sender, and the stream goes on.
                    logger.warning("worker %s sent an undecodable message: %s", conn.worker_id, message.reason)
                    text = f"a message could not be decoded ({message.reason}); it was dropped"
                    await conn.send(pb.Message(notice=pb.Notice(error=wire_error(pb.ERROR_KIND_BAD_MESSAGE, text))))
                    continue
                body = message.WhichOneof("body")
                if body != "batch":
                    try:
                        # The two hot bodies first, without the generic dispatch.
                        if body == "delivery":
                            await router.on_delivery(conn, message)
                        elif body == "response":
                            await router.route_response(message, conn)
                        else:
                            await router.on_message(conn, message)
                    except Exception:
                        logger.exception("gateway failed to handle a message from worker %s", conn.worker_id)
                    continue
                await router.on_batch(conn, message.batch.messages)
        finally:
            await router.detach(conn)

    # --- the subscription table, for workers ----------------------------------------------------------------

    async def _on_table_request(self, conn: WorkerLink, message: pb.Message) -> None:
        """A worker's request that routing does not handle (`Router`'s `on_request` hook)."""
        body = message.WhichOneof("body")
        if body == "add_subscription":
            await conn.send(
                pb.Message(add_subscription_response=await self._add_subscription(message.add_subscription))
            )
        elif body == "remove_subscription":
            request = message.remove_subscription
            reply = pb.RemoveSubscriptionResponse(request_id=request.request_id)
            try:
                await self._registry.remove_subscription(request.id)
            except LookupError as exc:
                reply.error.CopyFrom(wire_error(pb.ERROR_KIND_NOT_FOUND, str(exc), "LookupError"))
            except RegistryUnavailableError as exc:
                reply.error.CopyFrom(wire_error(pb.ERROR_KIND_UNDELIVERABLE, str(exc), type(exc).__name__))
            await conn.send(pb.Message(remove_subscription_response=reply))
        elif body == "list_subscriptions":
            listing = pb.ListSubscriptionsResponse(request_id=message.list_subscriptions.request_id)
            try:
                listing.subscriptions.extend(subscription_to_wire(s) for s in await self._registry.subscriptions())
            except RegistryUnavailableError as exc:
                listing.error.CopyFrom(wire_error(pb.ERROR_KIND_UNDELIVERABLE, str(exc), type(exc).__name__))
            await conn.send(pb.Message(list_subscriptions_response=listing))
        else:
            logger.warning("worker %s sent an unexpected %s message", conn.worker_id, body)

    async def _add_subscription(self, request: pb.AddSubscription) -> pb.AddSubscriptionResponse:
        reply = pb.AddSubscriptionResponse(request_id=request.request_id)
        try:
            held = await self._registry.add_subscription(subscription_of_wire(request.subscription))
        except RegistryUnavailableError as exc:
            reply.error.CopyFrom(wire_error(pb.ERROR_KIND_UNDELIVERABLE, str(exc), type(exc).__name__))
        except (ValueError, TypeError) as exc:
            reply.error.CopyFrom(wire_error(pb.ERROR_KIND_BAD_REQUEST, str(exc), type(exc).__name__))
        else:
            reply.id = held.id
        return reply


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


def _is_host_port(address: str) -> bool:
    host, sep, port = address.rpartition(":")
    return bool(sep and host and port.isdigit() and 0 <= int(port) <= 65535)
