"""A worker's outbound plumbing, under `GrpcAgentRuntime`'s public API (`_worker.py`): building a message's
envelope (with the observer's send span and its trace context), posting one-way envelopes, and the RPC
bookkeeping of requests this worker sends (the answer's future, its deadline, cancelling the remote handler) and of
its control requests to the gateway. Answers come back through `AgentHost` (`_hosting.py`), which resolves the
futures in `Sender.pending`."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from collections.abc import Coroutine
from typing import Any, Literal

from ext.core import (
    AgentId,
    CancellationToken,
    MessageSpan,
    RuntimeClosedError,
    RuntimeObserver,
    SendInfo,
    TopicId,
    UndeliverableError,
)

from ._connection import STREAM_ERRORS, GatewayConnection
from ._deadlines import Deadlines, Expired
from ._outbox import resume
from ._serializer import ProtobufMessageSerializer
from ._wire import raise_error, set_trace, trace_of
from .protos import agent_worker_pb2 as pb

__all__ = ["Sender"]


class Sender:
    """What `GrpcAgentRuntime` sends and awaits, written on `connection`."""

    def __init__(
        self, connection: GatewayConnection, serializer: ProtobufMessageSerializer, observer: RuntimeObserver | None
    ) -> None:
        self._connection = connection
        self._serializer = serializer
        # The local runtime observes the handling; the sends are observed here.
        self._observer = observer
        self._max_message_bytes = connection.max_message_bytes
        # Request id -> the future of an answer this worker awaits (its RPCs and its control requests).
        self.pending: dict[str, asyncio.Future[Any]] = {}
        # RPC deadlines: (when, request id, future), earliest first, with one loop timer for the earliest. An
        # answered RPC's entry is dropped when it comes up (or in a sweep), so no timer is cancelled per RPC.
        self.deadlines = Deadlines()
        self._ids = itertools.count(1)

    def next_id(self) -> str:
        return str(next(self._ids))

    def fail_pending(self, error: Exception) -> None:
        """Fail every answer awaited (the stream they would come on is gone)."""
        # In place: `AgentHost` resolves answers in this same dict.
        pending = list(self.pending.values())
        self.pending.clear()
        for future in pending:
            if not future.done():
                future.set_exception(error)

    async def control(self, message: pb.Message, request_id: str) -> Any:
        """Send a control request to the gateway and return its answer (`connect_timeout` bounds the wait)."""
        connection = self._connection
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self.pending[request_id] = future
        try:
            await connection.write(message)
            return await asyncio.wait_for(future, connection.connect_timeout)
        except asyncio.TimeoutError:
            raise UndeliverableError(f"the gateway did not answer within {connection.connect_timeout:g} s") from None
        finally:
            self.pending.pop(request_id, None)

    def delivery(
        self,
        kind: int,
        message: Any,
        sender: AgentId | None,
        recipient: AgentId | None = None,
        request_id: str = "",
        broadcast_type: str = "",
        topic: TopicId | None = None,
        message_id: str | None = None,
    ) -> tuple[pb.Message, MessageSpan | None]:
        """The envelope of a message to send, and the observer's span of the send (None without an observer). A
        publish's event has the topic as its `type` and `source` (as AutoGen's has) and `message_id` as its id."""
        envelope = pb.Message()
        delivery = envelope.delivery
        delivery.kind = kind  # type: ignore[assignment]
        if topic is not None:
            self._serializer.fill_cloud_event(delivery.event, message, topic.source, topic.type, id=message_id)
        elif sender is None:
            self._serializer.fill_cloud_event(delivery.event, message, self._connection.source)
        else:
            self._serializer.fill_cloud_event(delivery.event, message, str(sender))
        if sender is not None:
            wire = delivery.sender
            wire.type = sender.type
            wire.key = sender.key
        if request_id:
            delivery.request_id = request_id
        if recipient is not None:
            wire = delivery.recipient
            wire.type = recipient.type
            wire.key = recipient.key
        if broadcast_type:
            delivery.broadcast_type = broadcast_type
        span: MessageSpan | None = None
        if self._observer is not None:
            what: Literal["send", "rpc", "broadcast", "publish"] = (
                "rpc" if request_id else "broadcast" if broadcast_type else "publish" if topic else "send"
            )
            agent_type = broadcast_type or (recipient.type if recipient is not None else topic.type if topic else "")
            span = self._observer.on_send(SendInfo(what, agent_type, recipient, sender, delivery.event.id))
            if span.trace is not None:
                set_trace(delivery.event, span.trace)
        size = envelope.ByteSize()
        if size > self._max_message_bytes:
            error = ValueError(
                f"message is {size} bytes on the wire, above max_message_bytes={self._max_message_bytes}"
            )
            if span is not None:
                span.end(error)
            raise error
        return envelope, span

    async def post_observed(self, envelope: pb.Message, span: MessageSpan | None) -> None:
        """Post a one-way envelope, ending its send span (if any) once the gateway has it."""
        if span is None:
            await self._connection.post(envelope)
            return
        try:
            await self._connection.post(envelope)
        except BaseException as exc:
            span.end(exc)
            raise
        span.end()

    async def rpc(
        self,
        envelope: pb.Message,
        request_id: str,
        message: Any,
        recipient: AgentId,
        timeout: float | None,
        cancellation_token: CancellationToken | None,
        span: MessageSpan | None = None,
    ) -> Any:
        """Send an RPC's envelope and return its answer (ending `span`, when there is one, on a decoded answer)."""
        connection = self._connection
        outbox = connection.outbox
        if outbox is None or not connection.connected:
            outbox = connection.current_outbox()  # raises
        pending = self.pending
        # The request goes out first (`GatewayConnection.write`, inlined); what only this worker needs, the
        # answer's future and the deadline, is set up while it travels, before this task first waits.
        sending: Coroutine[Any, Any, None] | None = None
        waiting_on: Any = None
        try:
            if pending:
                outbox.post(envelope)  # other RPCs in flight: the request joins a batch
            else:
                sending = outbox.send(envelope)
                try:
                    waiting_on = sending.send(None)  # the write starts here
                except StopIteration:
                    sending = None
        except STREAM_ERRORS as exc:
            raise UndeliverableError(f"sending to the gateway failed: {exc}") from None
        loop = asyncio.get_running_loop()
        future: asyncio.Future[pb.Response] = loop.create_future()
        pending[request_id] = future
        remove = cancellation_token.add_callback(future.cancel) if cancellation_token is not None else None
        if timeout is not None:
            self.deadlines.add(loop, loop.time() + timeout, request_id, future, len(pending))
        try:
            try:
                if sending is not None:
                    await resume(sending, waiting_on)
                else:
                    await outbox.wait_drained()
            except STREAM_ERRORS as exc:
                raise UndeliverableError(f"sending to the gateway failed: {exc}") from None
            response = await future
        except Expired:
            await self._cancel_remote(request_id)
            raise TimeoutError(
                f"no response from {recipient} within {timeout:g} s (message {type(message).__qualname__})"
            ) from None
        except asyncio.CancelledError:
            await self._cancel_remote(request_id)
            raise
        finally:
            pending.pop(request_id, None)
            if remove is not None:
                remove()
        if response.HasField("error"):
            raise_error(response.error)
        result = self._serializer.from_cloud_event(response.event)
        if span is not None:
            span.end(None, trace_of(response.event))
        return result

    async def _cancel_remote(self, request_id: str) -> None:
        with contextlib.suppress(UndeliverableError, RuntimeClosedError):
            await self._connection.write(pb.Message(cancel=pb.Cancel(request_id=request_id)))
