"""A worker's agent hosting: the agents registered on it live in a `LocalAgentRuntime`, and what the gateway
sends (deliveries, RPC answers, cancellations, control replies, notices) is read here and dispatched to them.

`AgentHost` is the inbound half of `GrpcAgentRuntime`: it implements the connection's hooks (`_read`,
`_connection_lost`) and keeps the RPC bookkeeping (answers awaited, handlers running for other workers); the
outbound API (`send_message`, `send_and_await_response`, ...) is `GrpcAgentRuntime`'s, in `_worker.py`."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
from collections.abc import Callable, Coroutine, Sequence
from typing import Any

import grpc

from ext.core import (
    AgentId,
    AgentNotFoundError,
    RuntimeClosedError,
    RuntimeObserver,
    SavePolicy,
    StateStore,
    TopicId,
    UndeliverableError,
)
from ext.runtime.local import Delivery, LocalAgentRuntime

from ._connection import STREAM_ERRORS, GatewayConnection
from ._outbox import resume
from ._serializer import ProtobufMessageSerializer, SerializationError
from ._wire import EOF, Malformed, error_of, set_trace, trace_of
from .protos import agent_worker_pb2 as pb

__all__ = ["AgentHost"]

logger = logging.getLogger(__name__)

# Answers to this worker's control requests: each resolves the request's future.
_CONTROL_RESPONSES = frozenset(
    {
        "register_response",
        "list_agents_response",
        "add_subscription_response",
        "remove_subscription_response",
        "list_subscriptions_response",
    }
)


class AgentHost(GatewayConnection):
    """Hosts agents behind a `GatewayConnection`; `connection` takes `GatewayConnection`'s keyword arguments."""

    def __init__(
        self,
        address: str | Sequence[str] | grpc.aio.Channel,
        *,
        serializer: ProtobufMessageSerializer | None,
        stop_timeout: float,
        on_undelivered: Callable[[AgentId, str], None] | None,
        state_store: StateStore | None = None,
        save_policy: SavePolicy | None = None,
        idle_timeout: float | None = None,
        observer: RuntimeObserver | None = None,
        **connection: Any,
    ) -> None:
        super().__init__(address, **connection)
        self.serializer = serializer if serializer is not None else ProtobufMessageSerializer()
        # Hosted agents live in a local runtime, which also keeps their state (one implementation for both).
        self._local = LocalAgentRuntime(
            stop_timeout=stop_timeout,
            state_store=state_store,
            save_policy=save_policy,
            idle_timeout=idle_timeout,
            observer=observer,
        )
        # The local runtime observes the handling; this runtime's sends are observed in `_sending.py`.
        self._observer = observer
        if on_undelivered is not None and not callable(on_undelivered):
            raise TypeError(f"on_undelivered must be a callable or None, got {type(on_undelivered).__name__}")
        self._on_undelivered = on_undelivered
        # Request id -> the future of an answer this worker awaits (its RPCs and its control requests).
        self._pending: dict[str, asyncio.Future[Any]] = {}
        # Request id -> the handler running here for another worker's RPC (cancelled on the gateway's word).
        self._hosted: dict[str, Delivery] = {}
        self._agent_ids: dict[tuple[str, str], AgentId] = {}

    def _connection_lost(self) -> None:
        self._fail_pending(UndeliverableError("the connection to the gateway was lost before the answer came"))
        for task in list(self._hosted.values()):
            self._local.cancel_delivery(task)
        self._hosted.clear()

    def _fail_pending(self, error: Exception) -> None:
        pending, self._pending = self._pending, {}
        for future in pending.values():
            if not future.done():
                future.set_exception(error)

    async def _read(self, call: Any, done: asyncio.Future[None]) -> None:
        handed_off = False
        try:
            while True:
                message = await call.read()
                if message is EOF:
                    return
                if message.__class__ is Malformed:
                    logger.warning("worker %s dropped an undecodable message: %s", self._worker_id, message.reason)
                    continue
                body = message.WhichOneof("body")
                if body == "response":
                    # An RPC's answer: the caller's hot path, inline.
                    response = message.response
                    future = self._pending.pop(response.request_id, None)
                    if future is not None and not future.done():
                        future.set_result(response)
                    continue
                if body == "delivery":
                    run_here = await self._on_delivery(message.delivery, True)
                elif body == "batch":
                    items = message.batch.messages
                    last = len(items) - 1
                    for index, item in enumerate(items):
                        run_here = await self._handle(item, index == last)  # only the last item may return one
                else:
                    run_here = await self._handle(message)
                if run_here is None:
                    continue
                # Become the idle agent's consumer: its handler starts now instead of after a task switch, and
                # usually sends its answer before it first waits. Only then does a fresh reader take over the
                # stream, so starting that task is not on the answer's way out.
                try:
                    waiting_on = run_here.send(None)
                except StopIteration:
                    continue  # handled and answered without waiting: keep reading
                except BaseException:
                    self._reader = asyncio.get_running_loop().create_task(self._read(call, done))
                    handed_off = True
                    raise
                self._reader = asyncio.get_running_loop().create_task(self._read(call, done))
                handed_off = True
                await resume(run_here, waiting_on)
                return
        except grpc.aio.AioRpcError as exc:
            if exc.code() != grpc.StatusCode.CANCELLED:
                logger.info("the gateway stream ended: %s %s", exc.code().name, exc.details())
        finally:
            if not handed_off and not done.done():
                done.set_result(None)

    async def _handle(self, message: pb.Message, may_run_here: bool = False) -> Coroutine[Any, Any, None] | None:
        """Take one message; may return a coroutine that runs a hosted agent's mailbox in the reader's task."""
        body = message.WhichOneof("body")
        if body == "response":
            future = self._pending.pop(message.response.request_id, None)
            if future is not None and not future.done():
                future.set_result(message.response)
        elif body == "delivery":
            return await self._on_delivery(message.delivery, may_run_here)
        elif body == "cancel":
            handle = self._hosted.pop(message.cancel.request_id, None)
            if handle is not None:
                self._local.cancel_delivery(handle)
        elif body in _CONTROL_RESPONSES:
            reply = getattr(message, body)
            self._resolve(reply.request_id, reply)
        elif body == "notice":
            notice = message.notice
            logger.warning(
                "a one-way message for %s/%s was not delivered: %s",
                notice.recipient.type,
                notice.recipient.key,
                notice.error.message,
            )
            if self._on_undelivered is not None:
                try:
                    recipient = self._agent_id(notice.recipient.type, notice.recipient.key)
                except ValueError:
                    recipient = None  # a broadcast's notice names a type only
                try:
                    if recipient is not None:
                        self._on_undelivered(recipient, notice.error.message)
                except Exception:
                    logger.exception("the on_undelivered callback failed")
        return None

    def _resolve(self, request_id: str, value: Any) -> None:
        future = self._pending.pop(request_id, None)
        if future is not None and not future.done():
            future.set_result(value)

    # --- hosting ---------------------------------------------------------------------------------------

    async def _on_delivery(self, delivery: pb.Delivery, may_run_here: bool = False) -> Coroutine[Any, Any, None] | None:
        """Hand a delivery to the hosted agent; may return a coroutine that runs its mailbox in the reader's task."""
        try:
            kind = delivery.kind
            agent_ids = self._agent_ids
            sender: AgentId | None = None
            if delivery.HasField("sender"):
                wire = delivery.sender
                key = (wire.type, wire.key)
                sender = agent_ids.get(key) or self._agent_id(*key)
            try:
                message = self.serializer.from_cloud_event(delivery.event)
            except SerializationError as exc:
                if kind == pb.DELIVERY_KIND_RPC:
                    error = pb.Error(kind=pb.ERROR_KIND_BAD_MESSAGE, error_type="SerializationError", message=str(exc))
                    await self._send_response(pb.Response(request_id=delivery.request_id, error=error))
                else:
                    logger.error("dropped a message this worker cannot decode: %s", exc)
                return None
            event = delivery.event
            trace = trace_of(event) if event.attributes else None
            if kind == pb.DELIVERY_KIND_BROADCAST:
                with contextlib.suppress(RuntimeClosedError):
                    self._local.broadcast_now(message, delivery.broadcast_type, sender=sender, trace=trace)
                return None
            wire = delivery.recipient
            key = (wire.type, wire.key)
            recipient = agent_ids.get(key) or self._agent_id(*key)
            if kind == pb.DELIVERY_KIND_RPC:
                request_id = delivery.request_id
                reply = functools.partial(self._reply, request_id, recipient)
                run_here: Coroutine[Any, Any, None] | None = None
                try:
                    if may_run_here:
                        handle, run_here = self._local.deliver_here(
                            message, recipient, sender=sender, rpc=True, message_id=request_id, reply=reply, trace=trace
                        )
                    else:
                        handle = self._local.deliver(
                            message, recipient, sender=sender, rpc=True, message_id=request_id, reply=reply, trace=trace
                        )
                except (AgentNotFoundError, RuntimeClosedError) as exc:
                    await self._reply(request_id, recipient, None, exc)
                    return None
                self._hosted[request_id] = handle
                return run_here
            try:
                if kind == pb.DELIVERY_KIND_PUBLISH:
                    # The topic is the event's type and source; the event's id is the publish's message id.
                    topic = TopicId(event.type, event.source)
                    self._local.deliver(
                        message, recipient, sender=sender, trace=trace, topic_id=topic, message_id=event.id
                    )
                else:
                    self._local.deliver(message, recipient, sender=sender, trace=trace)
            except (AgentNotFoundError, RuntimeClosedError) as exc:
                logger.error("dropped a one-way message for %s: %s", recipient, exc)
            return None
        except Exception as exc:
            # A bad delivery must not take the stream (and every other agent's traffic) down, and an RPC
            # caller hears about it now rather than at its deadline.
            logger.exception("worker %s failed to take a delivery", self._worker_id)
            if delivery.kind == pb.DELIVERY_KIND_RPC:
                error = pb.Error(kind=pb.ERROR_KIND_UNDELIVERABLE, error_type=type(exc).__name__, message=str(exc))
                await self._send_response(pb.Response(request_id=delivery.request_id, error=error))
            return None

    def _agent_id(self, agent_type: str, key: str) -> AgentId:
        """AgentIds from the wire, validated once per distinct id (validation is a regex match)."""
        cache_key = (agent_type, key)
        agent_id = self._agent_ids.get(cache_key)
        if agent_id is None:
            if len(self._agent_ids) > 10_000:
                self._agent_ids.clear()
            agent_id = self._agent_ids[cache_key] = AgentId(agent_type, key)
        return agent_id

    async def _reply(self, request_id: str, recipient: AgentId, result: Any, error: BaseException | None) -> None:
        """Answer an RPC this worker hosted (the handler's result or error)."""
        hosted = self._hosted
        handle = hosted.pop(request_id, None)
        if error is None:
            envelope = pb.Message()
            response = envelope.response
            response.request_id = request_id
            try:
                self.serializer.fill_cloud_event(response.event, result, str(recipient))
            except (SerializationError, ValueError) as exc:
                error = exc
            else:
                if handle is not None and handle.answer_trace is not None:
                    set_trace(response.event, handle.answer_trace)  # the handling span's: back to the caller
                # `_write`, inlined on this hot path: with other RPCs in flight here, the answer joins a batch.
                try:
                    outbox = self._outbox
                    if outbox is None or not self._connected:
                        outbox = self._current_outbox()  # raises
                    if hosted:
                        outbox.post(envelope)
                        await outbox.wait_drained()
                    else:
                        await outbox.send(envelope)
                except (UndeliverableError, RuntimeClosedError) as exc:
                    logger.info("could not answer request %s: %s", request_id, exc)
                except STREAM_ERRORS as exc:
                    logger.info("could not answer request %s: sending to the gateway failed: %s", request_id, exc)
                return
        if not isinstance(error, asyncio.CancelledError):
            logger.debug("handler of %s failed on an RPC: %r", recipient, error)
        await self._send_response(pb.Response(request_id=request_id, error=error_of(error, recipient)))

    async def _send_response(self, response: pb.Response) -> None:
        try:
            await self._write(pb.Message(response=response))
        except (UndeliverableError, RuntimeClosedError) as exc:
            logger.info("could not answer request %s: %s", response.request_id, exc)
