"""A worker's agent hosting: the agents registered on it live in a `LocalAgentRuntime`, and what the gateway
sends (deliveries, RPC answers, cancellations, control replies, notices) is read here and dispatched to them.

`AgentHost` is the inbound half of `GrpcAgentRuntime`: its `read` consumes each stream the connection opens, and it
keeps the handlers running here for other workers' RPCs; answers to this worker's own requests resolve the futures
the `Sender` (`_sending.py`) awaits. The outbound API (`send_message`, `send_and_await_response`, ...) is
`GrpcAgentRuntime`'s, in `_worker.py`."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
from collections.abc import Callable, Coroutine
from typing import Any

import grpc

from ext.core import AgentId, AgentNotFoundError, RuntimeClosedError, TopicId, UndeliverableError
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


class AgentHost:
    """Hosts the agents of `local` behind `connection`.

    Args:
        connection: where answers to hosted RPCs are written.
        local: the runtime the hosted agents live in.
        serializer: decodes what arrives and encodes the answers.
        answers: request id -> the future of an answer this worker awaits (the `Sender`'s; resolved here).
        on_undelivered: called with the recipient and the reason of a gateway's notice (see `GrpcAgentRuntime`).
    """

    def __init__(
        self,
        connection: GatewayConnection,
        local: LocalAgentRuntime,
        serializer: ProtobufMessageSerializer,
        answers: dict[str, asyncio.Future[Any]],
        on_undelivered: Callable[[AgentId, str], None] | None,
    ) -> None:
        if on_undelivered is not None and not callable(on_undelivered):
            raise TypeError(f"on_undelivered must be a callable or None, got {type(on_undelivered).__name__}")
        self._connection = connection
        self._local = local
        self._serializer = serializer
        self._pending = answers
        self._on_undelivered = on_undelivered
        # Request id -> the handler running here for another worker's RPC (cancelled on the gateway's word).
        self._hosted: dict[str, Delivery] = {}
        self._agent_ids: dict[tuple[str, str], AgentId] = {}
        # The reader task that took the stream over from another (kept referenced while it runs).
        self._reader: asyncio.Task[None] | None = None

    def cancel_hosted(self) -> None:
        """The stream ended: the handlers running for other workers' RPCs are cancelled (nobody gets the answer)."""
        for task in list(self._hosted.values()):
            self._local.cancel_delivery(task)
        self._hosted.clear()

    async def read(self, call: Any, done: asyncio.Future[None]) -> None:
        """Consume the stream `call`; set `done` when it ends (or hand both to a successor reader task)."""
        handed_off = False
        try:
            while True:
                message = await call.read()
                if message is EOF:
                    return
                if message.__class__ is Malformed:
                    logger.warning(
                        "worker %s dropped an undecodable message: %s", self._connection.worker_id, message.reason
                    )
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
                    self._reader = asyncio.get_running_loop().create_task(self.read(call, done))
                    handed_off = True
                    raise
                self._reader = asyncio.get_running_loop().create_task(self.read(call, done))
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
                message = self._serializer.from_cloud_event(delivery.event)
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
            logger.exception("worker %s failed to take a delivery", self._connection.worker_id)
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
                self._serializer.fill_cloud_event(response.event, result, str(recipient))
            except (SerializationError, ValueError) as exc:
                error = exc
            else:
                if handle is not None and handle.answer_trace is not None:
                    set_trace(response.event, handle.answer_trace)  # the handling span's: back to the caller
                # `GatewayConnection.write`, inlined on this hot path: with other RPCs in flight here, the answer
                # joins a batch.
                try:
                    connection = self._connection
                    outbox = connection.outbox
                    if outbox is None or not connection.connected:
                        outbox = connection.current_outbox()  # raises
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
            await self._connection.write(pb.Message(response=response))
        except (UndeliverableError, RuntimeClosedError) as exc:
            logger.info("could not answer request %s: %s", response.request_id, exc)
