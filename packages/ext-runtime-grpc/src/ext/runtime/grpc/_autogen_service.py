"""AutoGen's `agents.AgentRpc` service on an ext gateway: AutoGen 0.7 workers (`GrpcWorkerAgentRuntime`) connect
unchanged, on a listener of their own, and share the gateway's registry and routing with ext's workers.

Each AutoGen channel becomes an `AutoGenLink`: to the gateway's `Router` it is one more worker link, whose outbox
translates what routing sends it (ext's wire) into AutoGen's, and whose reads are translated into ext's before
routing sees them (`_autogen_wire.py` holds the mapping). So everything routing does for ext's workers holds for
AutoGen's: request ids made unique at the gateway, an immediate error for a recipient no worker hosts, an error for
the callers of a worker that disconnects mid-RPC, replicas.

AutoGen's Python worker opens only plaintext channels and sends no token: this listener authenticates nobody. What
it lets such a client do is bounded here: an AutoGen client removes only the subscriptions its own channel added,
and, when the gateway requires a token of ext's workers, cannot register an agent type an ext worker hosts (taking a
share of that worker's traffic). It can call, send to and publish to every agent: `Gateway` refuses, with a token, a
listener on a non-loopback address unless the operator says so (`autogen_allow_unauthenticated`).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import ipaddress
import itertools
import logging
from typing import Any

import grpc

from ._autogen_subscriptions import SubscriptionHolders
from ._autogen_wire import (
    CLIENT_ID,
    SERVICE,
    publish_from_ext,
    publish_to_ext,
    request_from_delivery,
    request_to_delivery,
    response_from_ext,
    response_to_ext,
    subscription_of_autogen,
    subscription_to_autogen,
)
from ._links import WorkerLink
from ._outbox import Outbox
from ._registry import RegistryUnavailableError
from ._routing import Router
from ._wire import EOF, Malformed, metadata_value
from .protos import agent_rpc_pb2 as ag
from .protos import agent_worker_pb2 as pb

__all__ = ["AutoGenLink", "AutoGenService", "is_loopback"]

logger = logging.getLogger(__name__)

# How many recent published events an AutoGen link remembers, to pass each on once (see `AutoGenLink._write`).
RECENT_EVENTS = 4096

ONE_WAY_PREFIX = "oneway/"
"""The request ids given to ext's one-way messages for an AutoGen agent (AutoGen only has RPCs): their answers are
dropped."""

AUTOGEN_WORKER = ".autogen-"
"""What the worker id of an AutoGen channel holds (`<gateway id>.autogen-<n>`), on every replica; an ext worker's is
`<gateway id>.<n>`."""


def is_loopback(address: str) -> bool:
    """Whether the host of `address` (`HOST:PORT`) is a loopback one: `localhost`, `127.0.0.0/8`, `::1`. Any other
    name or address (`0.0.0.0`, `::`, a host name) may be reachable from elsewhere."""
    host = address.rpartition(":")[0].strip("[]")
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _parse(cls: type[Any]) -> Any:
    def parse(data: bytes) -> Any:
        try:
            return cls.FromString(data)
        except Exception as exc:  # DecodeError, and whatever else protobuf raises on hostile input
            return Malformed(f"{type(exc).__name__}: {exc}")

    return parse


class AutoGenLink(WorkerLink):
    """An AutoGen worker's channel, as routing sees it (a `WorkerLink` whose writes are translated)."""

    def __init__(
        self, worker_id: str, client_id: str, context: grpc.aio.ServicerContext[Any, Any], max_bytes: int
    ) -> None:
        super().__init__(worker_id, context, max_bytes)
        self.client_id = client_id
        self._stream_write = context.write
        self.outbox = Outbox(self._write, max_bytes)
        # Registrations awaiting the gateway's answer, by the request id this link gave them.
        self.registrations: dict[str, asyncio.Future[pb.RegisterAgentTypeResponse]] = {}
        self._one_way = itertools.count(1)
        self._events = itertools.count(1)
        self._published: collections.OrderedDict[str, None] = collections.OrderedDict()

    def event_id(self) -> str:
        return f"{self.worker_id}-{next(self._events)}"

    async def _write(self, message: pb.Message) -> None:
        body = message.WhichOneof("body")
        if body == "batch":
            for item in message.batch.messages:
                await self._write(item)
            return
        if body == "delivery":
            delivery = message.delivery
            if delivery.kind == pb.DELIVERY_KIND_RPC:
                await self._stream_write(request_from_delivery(delivery, delivery.request_id))
            elif delivery.kind == pb.DELIVERY_KIND_ONE_WAY:
                request_id = f"{ONE_WAY_PREFIX}{next(self._one_way)}"
                await self._stream_write(request_from_delivery(delivery, request_id))
            elif delivery.kind == pb.DELIVERY_KIND_PUBLISH:
                # The gateway sends a publish once per recipient; an AutoGen worker finds the recipients among its
                # own agents itself (its subscriptions are its own), so it gets each published event once, as
                # from AutoGen's host.
                event_id = f"{delivery.event.source}\0{delivery.event.id}"
                if event_id in self._published:
                    return
                self._published[event_id] = None
                if len(self._published) > RECENT_EVENTS:
                    self._published.popitem(last=False)
                await self._stream_write(publish_from_ext(delivery))
            else:
                logger.debug("AutoGen worker %s: an ext broadcast is not part of AutoGen's protocol", self.worker_id)
        elif body == "response":
            await self._stream_write(response_from_ext(message.response, message.response.request_id))
        elif body == "register_response":
            future = self.registrations.pop(message.register_response.request_id, None)
            if future is not None and not future.done():
                future.set_result(message.register_response)
        elif body == "notice":
            error = message.notice.error
            logger.warning("AutoGen worker %s: a one-way message was not delivered: %s", self.worker_id, error.message)
        # A cancel has no AutoGen counterpart (its handlers cannot be cancelled from outside): its answer, when it
        # comes, is dropped by routing (the RPC is no longer pending).


class AutoGenService:
    """The `agents.AgentRpc` listener of one gateway (`Gateway(autogen_address=...)` starts and stops it), on the
    gateway's `router`. `token_required`: the gateway requires a token of ext's workers, which AutoGen clients cannot
    send (they then cannot register an agent type an ext worker hosts)."""

    def __init__(
        self,
        router: Router,
        address: str,
        max_message_bytes: int,
        *,
        token_required: bool = False,
        channel_wait: float = 5.0,
    ) -> None:
        self._router = router
        self._address = address
        self._token_required = token_required
        self._max_message_bytes = max_message_bytes
        # A worker makes its unary calls right after its channel opens; the two can race at the server.
        self._channel_wait = channel_wait
        self._server: grpc.aio.Server | None = None
        self._links: dict[str, AutoGenLink] = {}
        self._opened: dict[str, asyncio.Event] = {}
        self._seq = itertools.count(1)
        # Which client holds which subscription of the table: they end with the client's channel.
        self._holders = SubscriptionHolders()
        self.port = 0

    @property
    def address(self) -> str:
        host = self._address.rpartition(":")[0]
        return f"{host}:{self.port}"

    async def start(self) -> int:
        options = [
            ("grpc.max_receive_message_length", self._max_message_bytes),
            ("grpc.max_send_message_length", self._max_message_bytes),
            ("grpc.so_reuseport", 0),
        ]
        server = grpc.aio.server(options=options)
        server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(SERVICE, self._handlers()),))
        bound = server.add_insecure_port(self._address)
        if bound == 0:
            raise OSError(f"cannot listen on {self._address} (autogen_address)")
        await server.start()
        self._server, self.port = server, bound
        # With a token, `Gateway` refuses an address off loopback unless the operator allowed it (and warned then).
        note = "plaintext, without the gateway's token" if self._token_required else "plaintext"
        logger.info("gateway %s serves AutoGen workers on %s (%s)", self._router.gateway_id, self.address, note)
        return bound

    async def stop(self, grace: float = 0.5) -> None:
        if self._server is None:
            return
        server, self._server = self._server, None
        await server.stop(grace=grace)

    def _handlers(self) -> dict[str, grpc.RpcMethodHandler[Any, Any]]:
        def unary(method: Any, request: type[Any], response: type[Any]) -> grpc.RpcMethodHandler[Any, Any]:
            return grpc.unary_unary_rpc_method_handler(
                method, request_deserializer=request.FromString, response_serializer=response.SerializeToString
            )

        return {
            "OpenChannel": grpc.stream_stream_rpc_method_handler(
                self._open_channel,
                request_deserializer=_parse(ag.Message),
                response_serializer=ag.Message.SerializeToString,
            ),
            "OpenControlChannel": grpc.stream_stream_rpc_method_handler(
                self._open_control_channel,
                request_deserializer=ag.ControlMessage.FromString,
                response_serializer=ag.ControlMessage.SerializeToString,
            ),
            "RegisterAgent": unary(self._register_agent, ag.RegisterAgentTypeRequest, ag.RegisterAgentTypeResponse),
            "AddSubscription": unary(self._add_subscription, ag.AddSubscriptionRequest, ag.AddSubscriptionResponse),
            "RemoveSubscription": unary(
                self._remove_subscription, ag.RemoveSubscriptionRequest, ag.RemoveSubscriptionResponse
            ),
            "GetSubscriptions": unary(self._get_subscriptions, ag.GetSubscriptionsRequest, ag.GetSubscriptionsResponse),
        }

    # --- the channel -----------------------------------------------------------------------------------

    async def _client_id(self, context: grpc.aio.ServicerContext[Any, Any]) -> str:
        client_id = metadata_value(context.invocation_metadata(), CLIENT_ID)
        if not client_id:
            # AutoGen's host answers the same status and text (get_client_id_or_abort).
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "client-id metadata not found.")
        return client_id

    async def _open_channel(self, request_iterator: Any, context: grpc.aio.ServicerContext[Any, Any]) -> None:
        client_id = await self._client_id(context)
        if client_id in self._links:
            await context.abort(grpc.StatusCode.ALREADY_EXISTS, f"client-id {client_id!r} already has an open channel")
        router = self._router
        if router.draining:
            await context.abort(grpc.StatusCode.UNAVAILABLE, "the gateway is shutting down")
        link = AutoGenLink(
            f"{router.gateway_id}{AUTOGEN_WORKER}{next(self._seq)}", client_id, context, self._max_message_bytes
        )
        router.attach(link)
        self._links[client_id] = link
        self._opened.pop(client_id, asyncio.Event()).set()
        logger.info("AutoGen worker %s (client-id %s) connected from %s", link.worker_id, client_id, context.peer())
        try:
            while True:
                message = await context.read()
                if message is EOF:
                    break
                if message.__class__ is Malformed:
                    logger.warning("AutoGen worker %s sent an undecodable message: %s", link.worker_id, message.reason)
                    continue
                try:
                    await self._on_message(link, message)
                except Exception:
                    logger.exception("gateway failed to handle a message from AutoGen worker %s", link.worker_id)
        finally:
            self._links.pop(client_id, None)
            for sub_id in self._holders.client_gone(client_id):
                with contextlib.suppress(LookupError, RegistryUnavailableError):
                    await router.registry.remove_subscription(sub_id)
            for future in link.registrations.values():
                future.cancel()
            await router.detach(link)

    async def _on_message(self, link: AutoGenLink, message: ag.Message) -> None:
        which = message.WhichOneof("message")
        if which == "request":
            await self._router.on_delivery(link, request_to_delivery(message.request, link.event_id()))
        elif which == "response":
            response = message.response
            request_id = response.request_id
            if request_id.startswith(ONE_WAY_PREFIX):
                if response.error:
                    logger.warning("a one-way message to AutoGen worker %s failed: %s", link.worker_id, response.error)
                return
            recipient = link.inflight.get(request_id)
            source = str(recipient) if recipient is not None else link.worker_id
            await self._router.route_response(response_to_ext(response, source, link.event_id()), link)
        elif which == "cloudEvent":
            await self._router.on_delivery(link, publish_to_ext(message.cloudEvent))

    async def _open_control_channel(self, request_iterator: Any, context: grpc.aio.ServicerContext[Any, Any]) -> None:
        await self._client_id(context)
        # AutoGen 0.7's worker never opens this channel (its state save/load raise NotImplementedError).
        await context.abort(grpc.StatusCode.UNIMPLEMENTED, "state save/load between AutoGen workers is not supported")

    # --- unary calls, tied to a channel by client-id --------------------------------------------------

    async def _link(self, context: grpc.aio.ServicerContext[Any, Any]) -> AutoGenLink:
        client_id = await self._client_id(context)
        link = self._links.get(client_id)
        if link is None:
            opened = self._opened.setdefault(client_id, asyncio.Event())
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(opened.wait(), self._channel_wait)
            link = self._links.get(client_id)
            if link is None:
                self._opened.pop(client_id, None)
                await context.abort(
                    grpc.StatusCode.FAILED_PRECONDITION,
                    f"no open channel for client-id {client_id!r}: call OpenChannel with the same client-id first",
                )
        assert link is not None
        return link

    async def _register_agent(
        self, request: ag.RegisterAgentTypeRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> ag.RegisterAgentTypeResponse:
        link = await self._link(context)
        if self._token_required:
            await self._refuse_ext_type(request.type, context)
        request_id = f"register/{next(self._seq)}"
        future: asyncio.Future[pb.RegisterAgentTypeResponse] = asyncio.get_running_loop().create_future()
        link.registrations[request_id] = future
        register = pb.RegisterAgentType(request_id=request_id, type=request.type)
        await self._router.on_message(link, pb.Message(register=register))
        reply = await future
        if reply.error:
            # AutoGen's host refuses a type another client registered with INVALID_ARGUMENT; ext lets several
            # workers host one type, and refuses what its registry refuses (a bad name, the same type twice on
            # one worker, an unreachable shared registry) with the same status.
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, reply.error)
        return ag.RegisterAgentTypeResponse()

    async def _refuse_ext_type(self, agent_type: str, context: grpc.aio.ServicerContext[Any, Any]) -> None:
        """Abort unless no ext worker hosts `agent_type`: a client without the token must not take a share of the
        traffic of a worker that authenticated."""
        try:
            hosts = await self._router.registry.workers_for(agent_type)
        except RegistryUnavailableError as exc:
            await context.abort(grpc.StatusCode.UNAVAILABLE, str(exc))
        if any(AUTOGEN_WORKER not in worker_id for worker_id, _ in hosts):
            await context.abort(
                grpc.StatusCode.PERMISSION_DENIED,
                f"agent type {agent_type!r} is hosted by ext workers that hold the gateway's token: "
                "an AutoGen client, which sends none, cannot host it too",
            )

    async def _add_subscription(
        self, request: ag.AddSubscriptionRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> ag.AddSubscriptionResponse:
        link = await self._link(context)
        registry = self._router.registry
        try:
            subscription = subscription_of_autogen(request.subscription)
            # One already in the table under this id (with this mapping, or the add fails) is not this client's to
            # remove later: the registry's answer alone does not tell it from a new one.
            existed = any(s.id == subscription.id for s in await registry.subscriptions())
            await registry.add_subscription(subscription)
        except RegistryUnavailableError as exc:
            await context.abort(grpc.StatusCode.UNAVAILABLE, str(exc))
        except (ValueError, TypeError) as exc:
            # A bad subscription, or its id taken by another one: AutoGen's host refuses both with this status.
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(exc))
        self._holders.added(link.client_id, subscription.id, existed=existed)
        return ag.AddSubscriptionResponse()

    async def _remove_subscription(
        self, request: ag.RemoveSubscriptionRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> ag.RemoveSubscriptionResponse:
        client_id = await self._client_id(context)
        registry = self._router.registry
        try:
            table_id = self._holders.release(client_id, request.id)
        except LookupError:
            # Not added through this client's channel: another worker's (ext's among them) stays; AutoGen's host
            # would remove it.
            try:
                exists = any(s.id == request.id for s in await registry.subscriptions())
            except RegistryUnavailableError as exc:
                await context.abort(grpc.StatusCode.UNAVAILABLE, str(exc))
            if not exists:
                await context.abort(grpc.StatusCode.NOT_FOUND, f"no subscription with id {request.id!r}")
            await context.abort(
                grpc.StatusCode.PERMISSION_DENIED,
                f"subscription {request.id!r} was not added by client-id {client_id!r}: an AutoGen client removes "
                "only the subscriptions its own channel added",
            )
        if table_id is not None:
            try:
                await registry.remove_subscription(table_id)
            except LookupError as exc:
                await context.abort(grpc.StatusCode.NOT_FOUND, str(exc))
            except RegistryUnavailableError as exc:
                await context.abort(grpc.StatusCode.UNAVAILABLE, str(exc))
        return ag.RemoveSubscriptionResponse()

    async def _get_subscriptions(
        self, request: ag.GetSubscriptionsRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> ag.GetSubscriptionsResponse:
        await self._client_id(context)
        try:
            subscriptions = await self._router.registry.subscriptions()
        except RegistryUnavailableError as exc:
            await context.abort(grpc.StatusCode.UNAVAILABLE, str(exc))
        wire = (subscription_to_autogen(s) for s in subscriptions)
        return ag.GetSubscriptionsResponse(subscriptions=[w for w in wire if w is not None])
