"""What the gateway's routing keeps per connected worker (`WorkerLink`) and per message in flight (`PendingRpc`,
`Outgoing`), and the two context flags a serve loop sets while it handles the items of a batch."""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Awaitable
from dataclasses import dataclass
from typing import Any

import grpc

from ext.core import AgentId

from ._forwarder import Forwarder
from ._outbox import Outbox
from .protos import agent_worker_pb2 as pb

# Set while a serve loop handles the items of a batch: what they produce is queued and written as batches
# too, instead of one stream write per item.
coalescing: contextvars.ContextVar[bool] = contextvars.ContextVar("ext_gateway_coalescing", default=False)

# Set (by a serve loop, for the items of a batch) to collect what they queued for other gateways: per
# forwarder, the last sequence number. The loop waits for those before reading on, so that its next messages
# are routed after these are published or re-routed (the order per sender, even when a gateway dies).
batch_forwards: contextvars.ContextVar[dict[Forwarder[Any], int] | None] = contextvars.ContextVar(
    "ext_gateway_queued", default=None
)


class WorkerLink:
    """One connected worker's stream, as routing sees it."""

    __slots__ = ("context", "inflight", "instance", "outbox", "outgoing", "previous", "task", "types", "worker_id")

    def __init__(
        self,
        worker_id: str,
        context: grpc.aio.ServicerContext[Any, Any],
        max_bytes: int,
        *,
        instance: str = "",
        previous: str = "",
    ) -> None:
        self.worker_id = worker_id
        self.context = context
        # The worker's secret instance id, and the worker id it had before this connection ("" for none).
        self.instance = instance
        self.previous = previous
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
        if coalescing.get():
            self.outbox.post(message)
            return self.outbox.wait_drained()
        return self.outbox.send(message)


@dataclass(slots=True)
class PendingRpc:
    origin_worker: str
    origin_request: str
    target_worker: str
    target_gateway: str
    recipient: AgentId


@dataclass(slots=True)
class Outgoing:
    """A message forwarded to another gateway, with what to do if that gateway cannot be reached."""

    message: pb.Message
    # Report a failure (an RPC gets an error response; the sender of a one-way message, when connected here, a
    # Notice). False for responses and cancels: their other end cleans up on its own.
    report: bool = True
    origin: WorkerLink | None = None
    # Set for a delivery's first attempt: when the target gateway is gone, place the recipient again and re-send.
    recipient: AgentId | None = None
    pending: PendingRpc | None = None
