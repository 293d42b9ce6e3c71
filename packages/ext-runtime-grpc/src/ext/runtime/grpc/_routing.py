"""The gateway's routing: which connected worker or other gateway a message goes to, and the bookkeeping that
keeps RPCs answered (local placement, forwarding to other replicas through the registry, failures of either).

`Router` holds the routing state; `Gateway` (in `_gateway.py`) holds one, serves the gRPC streams and calls into
it: a worker's stream is `attach`ed, every message it reads goes to `on_message` (or `on_batch`), and `detach`
cleans up when the stream ends. What other gateways forward arrives through the registry's inbox (`on_forward`).
The AutoGen listener (`_autogen_service.py`) drives the same calls for AutoGen's workers. A worker's request that
is not routing's (the subscription table's) goes to the `on_request` hook."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from ext.core import AgentId, TopicId

from ._forwarder import Forwarder, parse_forwards
from ._links import Outgoing, PendingRpc, WorkerLink, batch_forwards, coalescing
from ._registry import Registry, RegistryUnavailableError
from ._wire import wire_error
from .protos import agent_worker_pb2 as pb

logger = logging.getLogger(__name__)


class Router:
    """Routing state and decisions of one gateway (see the module docstring for how `Gateway` drives it).
    `on_request` takes a worker's messages routing does not handle (the gateway answers its table requests there)."""

    def __init__(
        self,
        registry: Registry,
        max_message_bytes: int,
        on_request: Callable[[WorkerLink, pb.Message], Awaitable[None]] | None = None,
    ) -> None:
        self._registry = registry
        self._on_request = on_request
        self._max_message_bytes = max_message_bytes
        self.gateway_id = uuid.uuid4().hex[:12]
        self._request_prefix = f"{self.gateway_id}/"
        self._workers: dict[str, WorkerLink] = {}
        self._pending: dict[str, PendingRpc] = {}
        self._request_seq = itertools.count(1)
        self._draining = False
        self._agent_ids: dict[tuple[str, str], AgentId] = {}
        # Per other gateway: the ordered queue of what is forwarded to it (see _forwarder.py).
        self._forwarders: dict[str, Forwarder[Outgoing]] = {}
        self._idle = asyncio.Event()

    @property
    def registry(self) -> Registry:
        return self._registry

    @property
    def draining(self) -> bool:
        """True once `drain` was called: new RPCs are refused."""
        return self._draining

    def drain(self) -> None:
        self._draining = True

    async def wait_idle(self, timeout: float) -> None:
        """Wait up to `timeout` seconds for the RPCs in flight to be answered (or given up)."""
        if self._pending:
            self._idle.clear()
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._idle.wait(), timeout)

    def links(self) -> list[WorkerLink]:
        """The workers connected here now."""
        return list(self._workers.values())

    # --- a worker's stream -----------------------------------------------------------------------------

    def attach(self, link: WorkerLink) -> None:
        self._workers[link.worker_id] = link

    async def on_batch(self, conn: WorkerLink, messages: Any) -> None:
        """The items of a worker's `Batch`, in order; what they produce is coalesced per stream, and this returns
        once what they queued for other gateways is published (or its failure handled)."""
        token = coalescing.set(True)
        queued: dict[Forwarder[Any], int] = {}
        queued_token = batch_forwards.set(queued)
        try:
            for item in messages:
                await self._dispatch_safely(conn, item)
        finally:
            batch_forwards.reset(queued_token)
            coalescing.reset(token)
        for forwarder, seq in queued.items():
            await forwarder.wait_sent(seq)

    def flushing(self) -> list[asyncio.Task[None]]:
        """What is still being published to other gateways (`stop` waits for it)."""
        return [task for task in (f.flushing for f in self._forwarders.values()) if task is not None]

    async def detach(self, conn: WorkerLink) -> None:
        """The stream ended: forget the worker and settle the RPCs it was part of."""
        self._workers.pop(conn.worker_id, None)
        logger.info("worker %s disconnected", conn.worker_id)
        with contextlib.suppress(Exception):
            await self._registry.remove_worker(conn.worker_id)
        # RPCs this worker was handling: their callers learn at once instead of waiting for their deadline.
        for request_id, recipient in list(conn.inflight.items()):
            error = wire_error(pb.ERROR_KIND_UNDELIVERABLE, f"the worker hosting {recipient} disconnected", "")
            await self.route_response(pb.Message(response=pb.Response(request_id=request_id, error=error)))
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

    # --- what a worker sends ----------------------------------------------------------------------------

    async def _dispatch_safely(self, conn: WorkerLink, message: pb.Message) -> None:
        try:
            await self.on_message(conn, message)
        except Exception:
            logger.exception("gateway failed to handle a message from worker %s", conn.worker_id)

    async def on_message(self, conn: WorkerLink, message: pb.Message) -> None:
        body = message.WhichOneof("body")
        if body == "delivery":
            await self.on_delivery(conn, message)
        elif body == "response":
            await self.route_response(message, conn)
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
        elif self._on_request is not None:
            await self._on_request(conn, message)
        else:
            logger.warning("worker %s sent an unexpected %s message", conn.worker_id, body)

    async def _on_register(self, conn: WorkerLink, request: pb.RegisterAgentType) -> None:
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
                await self._registry.add(conn.worker_id, request.type, instance=conn.instance)
                if conn.previous:
                    # The worker came back through this gateway (its own died): its registration here is the
                    # evidence, so its agents' placements follow it now, not when the dead gateway's lease ends.
                    await self._registry.adopt(conn.previous, conn.worker_id, request.type, conn.instance)
            except RegistryUnavailableError as exc:
                error = str(exc)
            else:
                conn.types.add(request.type)
                logger.info("worker %s hosts agent type %r", conn.worker_id, request.type)
        reply = pb.RegisterAgentTypeResponse(request_id=request.request_id, error=error)
        await conn.send(pb.Message(register_response=reply))

    async def on_delivery(self, conn: WorkerLink, message: pb.Message) -> None:
        delivery = message.delivery
        kind = delivery.kind
        if kind == pb.DELIVERY_KIND_PUBLISH and not delivery.HasField("recipient"):
            await self._publish(conn, message)
            return
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
                notice = pb.Notice(error=wire_error(error_kind, text), recipient=wire)
                await conn.send(pb.Message(notice=notice))
            return
        assert recipient is not None
        worker_id, gateway_id = target
        pending: PendingRpc | None = None
        request_id = ""
        if kind == pb.DELIVERY_KIND_RPC:
            request_id = f"{self._request_prefix}{next(self._request_seq)}"
            origin_request = delivery.request_id
            pending = PendingRpc(conn.worker_id, origin_request, worker_id, gateway_id, recipient)
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
                    if coalescing.get():
                        target_conn.outbox.post(message)
                        await target_conn.outbox.wait_drained()
                    else:
                        await target_conn.outbox.send(message)
                except Exception as exc:
                    await self._undeliverable(message, f"writing to worker {worker_id} failed: {exc}")
                return
        else:
            outgoing = Outgoing(message, origin=conn, recipient=recipient, pending=pending)
            await self._forward(gateway_id, worker_id, outgoing)
            return
        await self._send_to_worker(
            worker_id, gateway_id, message, recipient if pending is not None else None, origin=conn
        )

    async def _publish(self, conn: WorkerLink, message: pb.Message) -> None:
        """A worker's publish: one copy per recipient of the registry's subscription table (except the sender), each
        routed below as a one-way message, so a recipient is placed, and its type found missing, as a send's is."""
        delivery = message.delivery
        event = delivery.event
        try:
            # A source that cannot be an agent key (not printable) fails here, when a subscription matches it.
            recipients = await self._registry.recipients(TopicId(event.type, event.source))
        except RegistryUnavailableError as exc:
            await self._undeliverable(message, f"cannot publish to {event.type}/{event.source}: {exc}", origin=conn)
            return
        except ValueError as exc:
            text = f"a message published to {event.type!r}/{event.source!r} cannot be delivered: {exc}"
            await conn.send(pb.Message(notice=pb.Notice(error=wire_error(pb.ERROR_KIND_BAD_MESSAGE, text))))
            return
        sender = delivery.sender
        for recipient in recipients:
            if delivery.HasField("sender") and (recipient.type, recipient.key) == (sender.type, sender.key):
                continue  # as AutoGen does: the publisher does not receive its own message
            copy = pb.Message()
            copy.CopyFrom(message)
            copy.delivery.recipient.type = recipient.type
            copy.delivery.recipient.key = recipient.key
            await self.on_delivery(conn, copy)

    def _agent_id(self, agent_type: str, key: str) -> AgentId:
        """AgentIds from the wire, validated once per distinct id (validation is a regex match)."""
        cache_key = (agent_type, key)
        agent_id = self._agent_ids.get(cache_key)
        if agent_id is None:
            if len(self._agent_ids) > 100_000:
                self._agent_ids.clear()
            agent_id = self._agent_ids[cache_key] = AgentId(agent_type, key)
        return agent_id

    async def _answer(self, conn: WorkerLink, request_id: str, kind: int, text: str) -> None:
        await conn.send(pb.Message(response=pb.Response(request_id=request_id, error=wire_error(kind, text))))

    async def _forward(self, gateway_id: str, worker_id: str, outgoing: Outgoing, *, wait: bool = True) -> None:
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
        queued = batch_forwards.get()
        if queued is not None:
            queued[forwarder] = forwarder.post(payload, outgoing)  # the serve loop waits after the batch
        else:
            await forwarder.send(payload, outgoing)

    async def _forwards_failed(self, gateway_id: str, items: list[Outgoing], exc: Exception) -> None:
        """A publish to `gateway_id` failed: for each of its forwards, in order, what a single one gets."""
        gone = isinstance(exc, LookupError)
        if gone:
            self._registry.forget_gateway(gateway_id)
        # What this sends on to other gateways is queued without waiting: a flush never waits on another.
        token = batch_forwards.set({})
        try:
            for item in items:
                try:
                    await self._forward_failed(item, exc, gone)
                except Exception:
                    logger.exception("handling a forward to gateway %s that failed", gateway_id)
        finally:
            batch_forwards.reset(token)

    async def _forward_failed(self, item: Outgoing, exc: Exception, gone: bool) -> None:
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
        origin: WorkerLink | None = None,
        *,
        wait: bool = True,
    ) -> None:
        """Send to a worker here or behind another gateway. `rpc_recipient` marks an RPC delivery, tracked
        so the caller hears at once if this worker dies before answering; `origin` (the sender, when connected
        here) is told of a one-way message that could not be delivered."""
        if gateway_id != self.gateway_id:
            await self._forward(gateway_id, worker_id, Outgoing(message, origin=origin), wait=wait)
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
        origin: WorkerLink | None = None,
    ) -> None:
        """An RPC gets an error response; a one-way message or broadcast is logged here, and its sender (when
        connected here) gets a `Notice`."""
        if message.WhichOneof("body") != "delivery":
            logger.warning("dropped a message: %s", reason)
            return
        delivery = message.delivery
        if delivery.kind == pb.DELIVERY_KIND_RPC:
            error = wire_error(kind, reason)
            await self.route_response(pb.Message(response=pb.Response(request_id=delivery.request_id, error=error)))
            return
        logger.warning(
            "dropped a one-way message for %s/%s: %s", delivery.recipient.type, delivery.recipient.key, reason
        )
        if origin is not None:
            notice = pb.Notice(error=wire_error(kind, reason), recipient=delivery.recipient)
            with contextlib.suppress(Exception):
                await origin.send(pb.Message(notice=notice))

    async def route_response(self, message: pb.Message, handler: WorkerLink | None = None) -> None:
        """Relay an RPC's response to its caller; `handler` is the worker that answered (if it is connected here)."""
        response = message.response
        request_id = response.request_id
        if handler is not None:
            handler.inflight.pop(request_id, None)
        if not request_id.startswith(self._request_prefix):
            gateway_id = request_id.split("/", 1)[0]
            if gateway_id != self.gateway_id:
                await self._forward(gateway_id, "", Outgoing(message, report=False))
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
            if coalescing.get():
                origin.outbox.post(message)
                await origin.outbox.wait_drained()
            else:
                await origin.outbox.send(message)
        except Exception:
            pass  # the caller's stream is gone: its end cleans up (a try block is cheaper than suppress())

    async def _send_cancel(self, request_id: str, pending: PendingRpc) -> None:
        cancel = pb.Message(cancel=pb.Cancel(request_id=request_id))
        if pending.target_gateway == self.gateway_id:
            conn = self._workers.get(pending.target_worker)
            if conn is not None:
                conn.inflight.pop(request_id, None)
                with contextlib.suppress(Exception):
                    await conn.send(cancel)
        else:
            await self._forward(pending.target_gateway, pending.target_worker, Outgoing(cancel, report=False))

    # --- replicas --------------------------------------------------------------------------------------

    async def on_forward(self, payload: bytes) -> None:
        """A `ForwardBatch` another gateway published to this one: each forward handled in order (what they
        produce for local workers is coalesced per stream); what cannot be decoded is reported and dropped."""
        forwards, problems = parse_forwards(payload)
        for problem in problems:
            logger.warning("dropped a forwarded message that could not be decoded (%s)", problem)
        if len(forwards) == 1:
            await self._on_one_forward(forwards[0])
            return
        token = coalescing.set(True)
        try:
            for forward in forwards:
                try:
                    await self._on_one_forward(forward)
                except Exception:
                    logger.exception("handling a message forwarded by gateway %s failed", forward.origin_gateway)
        finally:
            coalescing.reset(token)

    async def _on_one_forward(self, forward: pb.Forward) -> None:
        message = forward.message
        if not forward.target_worker:
            if message.WhichOneof("body") == "response":
                await self.route_response(message)
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

    async def on_registry_link_lost(self, reason: str) -> None:
        """Messages to this gateway through the registry may have been lost: RPCs waiting on an answer from
        another gateway fail now rather than at their deadline."""
        for request_id, pending in list(self._pending.items()):
            if pending.target_gateway != self.gateway_id:
                text = f"{reason}; the answer from {pending.recipient} may be lost"
                error = wire_error(pb.ERROR_KIND_UNDELIVERABLE, text)
                await self.route_response(pb.Message(response=pb.Response(request_id=request_id, error=error)))

    async def on_gateway_gone(self, gateway_id: str) -> None:
        """A replica died: the RPCs it was carrying for our workers fail now rather than at their deadline."""
        forwarder = self._forwarders.get(gateway_id)
        if forwarder is not None and forwarder.idle:
            del self._forwarders[gateway_id]
        for request_id, pending in list(self._pending.items()):
            if pending.target_gateway == gateway_id:
                error = wire_error(pb.ERROR_KIND_UNDELIVERABLE, f"the gateway hosting {pending.recipient} is gone")
                await self.route_response(pb.Message(response=pb.Response(request_id=request_id, error=error)))
