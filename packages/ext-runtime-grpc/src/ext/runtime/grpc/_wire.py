"""What worker and gateway share on the wire: the stream's method and framing (a bad frame is `Malformed`, not
fatal), the authorization metadata, the size limit, how errors travel (a handler's exception as the wire's
`Error` and back, and the worker's `AuthenticationError`), where a message's trace context rides, and how topic
subscriptions are written."""

from __future__ import annotations

import asyncio
import hmac
from collections.abc import Iterable

import grpc
from pydantic import SecretStr

from ext.core import (
    AgentId,
    AgentNotFoundError,
    CantHandleError,
    ExtError,
    MessageHandlerError,
    Subscription,
    TraceContext,
    TypePrefixSubscription,
    TypeSubscription,
    UndeliverableError,
)

from ._registry import shared_kind
from ._serializer import SerializationError
from .protos import agent_worker_pb2 as pb
from .protos.cloudevent_pb2 import CloudEvent

__all__ = [
    "DEFAULT_MAX_MESSAGE_BYTES",
    "EOF",
    "OPEN_CHANNEL",
    "PREVIOUS_WORKER",
    "SERVICE",
    "WORKER_INSTANCE",
    "AuthenticationError",
    "Malformed",
    "authorization_metadata",
    "bearer_matches",
    "metadata_value",
    "resume_metadata",
    "error_of",
    "parse_message",
    "raise_error",
    "raise_control_error",
    "set_trace",
    "subscription_of_wire",
    "subscription_to_wire",
    "trace_of",
    "wire_error",
]

DEFAULT_MAX_MESSAGE_BYTES = 4 * 1024 * 1024

SERVICE = "ext.runtime.v1.AgentWorker"
OPEN_CHANNEL = f"/{SERVICE}/OpenChannel"

AUTHORIZATION = "authorization"
"""The metadata key of the worker's token (`Bearer <token>`)."""

EOF: object = grpc.aio.EOF  # type: ignore[attr-defined]  # missing from grpc-stubs
"""What `read()` on a stream returns once the other side has closed it."""


class Malformed:
    """What the stream yields for bytes that do not parse as a `Message` (instead of grpc ending the stream)."""

    __slots__ = ("reason",)

    def __init__(self, reason: str) -> None:
        self.reason = reason


def parse_message(data: bytes) -> pb.Message | Malformed:
    """The stream's deserializer, on both sides: grpc aborts the whole call when a deserializer raises, so a bad
    frame is returned as `Malformed` for the reader to report."""
    try:
        return pb.Message.FromString(data)
    except Exception as exc:  # DecodeError, and whatever else protobuf raises on hostile input
        return Malformed(f"{type(exc).__name__}: {exc}")


def authorization_metadata(token: SecretStr | None) -> tuple[tuple[str, str], ...]:
    """The call metadata a worker sends: its token, when it has one."""
    return ((AUTHORIZATION, f"Bearer {token.get_secret_value()}"),) if token is not None else ()


WORKER_INSTANCE = "ext-worker-instance"
"""The metadata key of a worker process's secret instance id (random, per `GrpcAgentRuntime`, never sent on)."""

PREVIOUS_WORKER = "ext-previous-worker"
"""The metadata key of the worker id a reconnecting worker had on its last connection."""


def resume_metadata(instance: str, previous_worker_id: str) -> tuple[tuple[str, str], ...]:
    """What a worker sends so that a gateway can move its agents' placements to its new connection at once: its
    instance id and, when reconnecting, its previous worker id. The instance id proves the claim: only the
    process that registered the previous id knows it."""
    pairs = ((WORKER_INSTANCE, instance),)
    return (*pairs, (PREVIOUS_WORKER, previous_worker_id)) if previous_worker_id else pairs


def metadata_value(metadata: Iterable[tuple[str, str | bytes]] | None, key: str) -> str:
    """The value of `key` in a call's metadata, or "" (values that are not printable ASCII count as absent)."""
    for name, value in metadata or ():
        if name == key:
            text = value.decode("ascii", "replace") if isinstance(value, bytes) else value
            return text if text.isprintable() and text.isascii() and len(text) <= 200 else ""
    return ""


def bearer_matches(metadata: Iterable[tuple[str, str | bytes]] | None, token: SecretStr) -> bool:
    """Whether a call's metadata (`(key, value)` pairs) carries `token`, compared in constant time."""
    expected = f"Bearer {token.get_secret_value()}".encode()
    for key, value in metadata or ():
        if key == AUTHORIZATION:
            given = value.encode() if isinstance(value, str) else value
            return hmac.compare_digest(given, expected)
    return False


def wire_error(kind: int, message: str, error_type: str = "") -> pb.Error:
    """An `Error` to send (`kind` is one of the `ERROR_KIND_*` values)."""
    return pb.Error(kind=kind, error_type=error_type, message=message)  # type: ignore[arg-type]


class AuthenticationError(ExtError, PermissionError):
    """The gateway rejected this worker's token (or the lack of one)."""


_ERROR_KINDS: dict[type[BaseException], int] = {
    AgentNotFoundError: pb.ERROR_KIND_AGENT_NOT_FOUND,
    CantHandleError: pb.ERROR_KIND_CANT_HANDLE,
    SerializationError: pb.ERROR_KIND_BAD_MESSAGE,
    UndeliverableError: pb.ERROR_KIND_UNDELIVERABLE,
}


def error_of(exc: BaseException, recipient: AgentId) -> pb.Error:
    """A handler's exception (or its cancellation) as the wire's `Error`."""
    if isinstance(exc, asyncio.CancelledError):
        return pb.Error(kind=pb.ERROR_KIND_CANCELLED, error_type="CancelledError", message=f"{recipient}: cancelled")
    for cls, kind in _ERROR_KINDS.items():
        if isinstance(exc, cls):
            return pb.Error(kind=kind, error_type=type(exc).__name__, message=str(exc))  # type: ignore[arg-type]
    text = f"handler of {recipient} raised {type(exc).__name__}: {exc}"
    return pb.Error(kind=pb.ERROR_KIND_HANDLER, error_type=type(exc).__name__, message=text)


def raise_error(error: pb.Error) -> None:
    """Raise what a wire `Error` stands for (the exception type the caller would get in-process)."""
    kind = error.kind
    if kind == pb.ERROR_KIND_AGENT_NOT_FOUND:
        raise AgentNotFoundError(error.message)
    if kind == pb.ERROR_KIND_CANT_HANDLE:
        raise CantHandleError(error.message)
    if kind == pb.ERROR_KIND_BAD_MESSAGE:
        raise SerializationError(error.message)
    if kind in (pb.ERROR_KIND_UNDELIVERABLE, pb.ERROR_KIND_CANCELLED):
        raise UndeliverableError(error.message)
    raise MessageHandlerError(error.message, error_type=error.error_type or "Exception")


# The CloudEvents distributed-tracing extension (https://github.com/cloudevents/spec/blob/v1.0.2/cloudevents/
# extensions/distributed-tracing.md): W3C Trace Context strings as the event's `traceparent` and `tracestate`
# attributes. Gateways pass events through untouched, so the context reaches the handler and, on the response's
# event, comes back.
TRACEPARENT = "traceparent"
TRACESTATE = "tracestate"


def set_trace(event: CloudEvent, trace: TraceContext) -> None:
    """Put `trace` on an event (a delivery's, or an RPC response's)."""
    attributes = event.attributes
    attributes[TRACEPARENT].ce_string = trace.traceparent
    if trace.tracestate:
        attributes[TRACESTATE].ce_string = trace.tracestate


def trace_of(event: CloudEvent) -> TraceContext | None:
    """The trace context an event carries: None when it has none, or an invalid one (ignored, as W3C says)."""
    attributes = event.attributes
    if TRACEPARENT not in attributes:
        return None
    state = attributes[TRACESTATE].ce_string if TRACESTATE in attributes else ""
    return TraceContext.parse(attributes[TRACEPARENT].ce_string, state)


# --- topic subscriptions ----------------------------------------------------------------------------------


def subscription_to_wire(subscription: Subscription) -> pb.Subscription:
    """A subscription as the wire carries it (the built-in kinds only: the other side must rebuild it)."""
    kind, topic, agent_type = shared_kind(subscription)
    wire = pb.Subscription(id=subscription.id)
    if kind == "type":
        wire.type.topic_type, wire.type.agent_type = topic, agent_type
    else:
        wire.type_prefix.topic_type_prefix, wire.type_prefix.agent_type = topic, agent_type
    return wire


def subscription_of_wire(wire: pb.Subscription) -> Subscription:
    """The subscription a wire `Subscription` stands for; `ValueError` (naming the field) when it is not valid."""
    kind = wire.WhichOneof("kind")
    if kind == "type":
        return TypeSubscription(wire.type.topic_type, wire.type.agent_type, id=wire.id or None)
    if kind == "type_prefix":
        prefix = wire.type_prefix
        return TypePrefixSubscription(prefix.topic_type_prefix, prefix.agent_type, id=wire.id or None)
    raise ValueError("subscription has no kind (type or type_prefix)")


def raise_control_error(error: pb.Error, what: str) -> None:
    """Raise what a control request's `Error` stands for: the gateway's `ValueError` and `LookupError` as such,
    anything else (the registry unreachable) as `UndeliverableError`."""
    if error.kind == pb.ERROR_KIND_BAD_REQUEST:
        raise ValueError(error.message)
    if error.kind == pb.ERROR_KIND_NOT_FOUND:
        raise LookupError(error.message)
    raise UndeliverableError(f"the gateway could not {what}: {error.message}")
