"""AutoGen's wire (`agents.AgentRpc`, AutoGen 0.7) and its translation to and from ext's own, in plain functions.

What AutoGen's Python worker (`autogen_ext.runtimes.grpc.GrpcWorkerAgentRuntime` 0.7.5) sends and expects, as read
in its source (`_worker_runtime.py`, `_constants.py`) and its host's (`_worker_runtime_host_servicer.py`):

- a message's payload is `Payload(data_type, data_content_type, data)`: `application/json` carries UTF-8 JSON,
  `application/x-protobuf` a serialized `google.protobuf.Any`. Payload bytes pass through unchanged both ways;
- an RPC's error travels as the response's `error` string (the caller raises `Exception(error)`);
- a published message is a CloudEvent whose `type`/`source` are the topic's, with the attributes below;
- trace context rides in the request's and response's `metadata` map (`traceparent`, `tracestate`), where ext
  carries it as CloudEvent attributes of the same names.
"""

from __future__ import annotations

from collections.abc import Mapping, MutableMapping

from google.protobuf.message import DecodeError

from ext.core import Subscription, TypePrefixSubscription, TypeSubscription

from ._serializer import JSON_CONTENT_TYPE
from ._wire import TRACEPARENT, TRACESTATE
from .protos import agent_rpc_pb2 as ag
from .protos import agent_worker_pb2 as pb
from .protos.cloudevent_pb2 import CloudEvent

__all__ = [
    "CLIENT_ID",
    "JSON_DATA_CONTENT_TYPE",
    "PROTOBUF_DATA_CONTENT_TYPE",
    "SERVICE",
    "error_text",
    "event_to_payload",
    "payload_to_event",
    "publish_from_ext",
    "publish_to_ext",
    "request_from_delivery",
    "response_from_ext",
    "response_to_ext",
    "request_to_delivery",
    "subscription_of_autogen",
    "subscription_to_autogen",
]

SERVICE = "agents.AgentRpc"
CLIENT_ID = "client-id"
"""The call metadata key that ties a worker's unary calls to its channel (AutoGen's host requires it)."""

JSON_DATA_CONTENT_TYPE = JSON_CONTENT_TYPE
# AutoGen's name for protobuf payloads (ext's own events mark theirs by the `Any` in `proto_data` alone).
PROTOBUF_DATA_CONTENT_TYPE = "application/x-protobuf"

# CloudEvent attributes AutoGen's worker sets on a publish and reads on receipt (autogen_ext.runtimes.grpc._constants).
DATA_CONTENT_TYPE_ATTR = "datacontenttype"
DATA_SCHEMA_ATTR = "dataschema"  # the payload's type name
SENDER_TYPE_ATTR = "agagentsendertype"
SENDER_KEY_ATTR = "agagentsenderkey"
MESSAGE_KIND_ATTR = "agmsgkind"
MESSAGE_KIND_PUBLISH = "publish"
# What AutoGen's worker sets as the sender of a message published from outside any agent.
UNKNOWN_SENDER = ("unknown", "unknown")

# Where ext's events carry the message's type name when it differs from the event's type (_serializer.py).
EXT_TYPE_ATTR = "exttype"
_TRACE_KEYS = (TRACEPARENT, TRACESTATE)


def payload_to_event(payload: ag.Payload, event: CloudEvent, source: str, event_id: str) -> None:
    """Fill ext's (empty) `event` with an AutoGen payload: the event's type is the payload's type name, JSON goes
    to `text_data`, a protobuf `Any` to `proto_data`, anything else to `binary_data` with its content type."""
    event.id = event_id
    event.source = source
    event.spec_version = "1.0"
    event.type = payload.data_type
    content_type = payload.data_content_type
    if content_type == PROTOBUF_DATA_CONTENT_TYPE:
        try:
            event.proto_data.ParseFromString(payload.data)
        except DecodeError:
            pass  # not an Any after all: passed on as bytes below
        else:
            name = event.proto_data.type_url.rpartition("/")[2]
            if name and name != payload.data_type:
                event.attributes[EXT_TYPE_ATTR].ce_string = name
            return
    if content_type == JSON_DATA_CONTENT_TYPE:
        try:
            event.text_data = payload.data.decode()
        except UnicodeDecodeError:
            event.binary_data = payload.data
    else:
        event.binary_data = payload.data
    if content_type:
        event.attributes[DATA_CONTENT_TYPE_ATTR].ce_string = content_type


def event_to_payload(event: CloudEvent, payload: ag.Payload) -> None:
    """Fill AutoGen's `payload` from an ext event: the type name ext gave the message, its encoding, its bytes."""
    attributes = event.attributes
    which = event.WhichOneof("data")
    data_type = attributes[EXT_TYPE_ATTR].ce_string if EXT_TYPE_ATTR in attributes else ""
    if which == "proto_data":
        payload.data_type = data_type or event.proto_data.type_url.rpartition("/")[2] or event.type
        payload.data_content_type = PROTOBUF_DATA_CONTENT_TYPE
        payload.data = event.proto_data.SerializeToString()
        return
    payload.data_type = data_type or event.type
    content_type = attributes[DATA_CONTENT_TYPE_ATTR].ce_string if DATA_CONTENT_TYPE_ATTR in attributes else ""
    if which == "text_data":
        payload.data_content_type = content_type or JSON_DATA_CONTENT_TYPE
        payload.data = event.text_data.encode()
    elif which == "binary_data":
        payload.data_content_type = content_type
        payload.data = event.binary_data


def _trace_to_metadata(event: CloudEvent, metadata: MutableMapping[str, str]) -> None:
    attributes = event.attributes
    for key in _TRACE_KEYS:
        if key in attributes:
            metadata[key] = attributes[key].ce_string


def _trace_to_event(metadata: Mapping[str, str], event: CloudEvent) -> None:
    for key in _TRACE_KEYS:
        value = metadata.get(key)
        if value:
            event.attributes[key].ce_string = value


def request_to_delivery(request: ag.RpcRequest, event_id: str) -> pb.Message:
    """An AutoGen worker's RPC request as ext's RPC delivery (its request id is the worker's own)."""
    message = pb.Message()
    delivery = message.delivery
    delivery.kind = pb.DELIVERY_KIND_RPC
    delivery.request_id = request.request_id
    delivery.recipient.type = request.target.type
    delivery.recipient.key = request.target.key
    source = "autogen"
    if request.HasField("source"):
        delivery.sender.type = request.source.type
        delivery.sender.key = request.source.key
        source = f"{request.source.type}/{request.source.key}"
    payload_to_event(request.payload, delivery.event, source, event_id)
    _trace_to_event(request.metadata, delivery.event)
    return message


def request_from_delivery(delivery: pb.Delivery, request_id: str) -> ag.Message:
    """ext's RPC or one-way delivery as the request an AutoGen worker handles (AutoGen has no one-way send: the
    caller of `request_id` drops its answer)."""
    message = ag.Message()
    request = message.request
    request.request_id = request_id
    request.target.type = delivery.recipient.type
    request.target.key = delivery.recipient.key
    if delivery.HasField("sender"):
        request.source.type = delivery.sender.type
        request.source.key = delivery.sender.key
    event_to_payload(delivery.event, request.payload)
    _trace_to_metadata(delivery.event, request.metadata)
    return message


def error_text(error: pb.Error) -> str:
    """ext's wire error as the one string an AutoGen caller gets (ext's messages already name the recipient and,
    for a handler's exception, its type)."""
    return error.message or error.error_type or "the RPC failed"


def response_from_ext(response: pb.Response, request_id: str) -> ag.Message:
    """ext's RPC response as AutoGen's, for the AutoGen caller's `request_id`."""
    message = ag.Message()
    reply = message.response
    reply.request_id = request_id
    if response.WhichOneof("result") == "error":
        reply.error = error_text(response.error)
    else:
        event_to_payload(response.event, reply.payload)
        _trace_to_metadata(response.event, reply.metadata)
    return message


def response_to_ext(response: ag.RpcResponse, source: str, event_id: str) -> pb.Message:
    """An AutoGen worker's RPC response as ext's (the request id is the gateway's, as the worker received it). A
    non-empty `error` is the handler's exception text: ext's caller raises `MessageHandlerError`."""
    message = pb.Message()
    reply = message.response
    reply.request_id = response.request_id
    if response.error:
        reply.error.kind = pb.ERROR_KIND_HANDLER
        reply.error.message = response.error
    else:
        payload_to_event(response.payload, reply.event, source, event_id)
        _trace_to_event(response.metadata, reply.event)
    return message


def publish_to_ext(event: CloudEvent) -> pb.Message:
    """An AutoGen worker's published CloudEvent as ext's publish: the same event (the topic is its type and source
    on both sides), with the payload's type name where ext reads it (`exttype`) and the sender in the delivery
    (AutoGen's `unknown/unknown`, a publish from outside any agent, as none)."""
    message = pb.Message()
    delivery = message.delivery
    delivery.kind = pb.DELIVERY_KIND_PUBLISH
    delivery.event.CopyFrom(event)
    attributes = event.attributes
    if SENDER_TYPE_ATTR in attributes and SENDER_KEY_ATTR in attributes:
        sender = (attributes[SENDER_TYPE_ATTR].ce_string, attributes[SENDER_KEY_ATTR].ce_string)
        if sender != UNKNOWN_SENDER:
            delivery.sender.type, delivery.sender.key = sender
    if DATA_SCHEMA_ATTR in attributes:
        delivery.event.attributes[EXT_TYPE_ATTR].ce_string = attributes[DATA_SCHEMA_ATTR].ce_string
    return message


def publish_from_ext(delivery: pb.Delivery) -> ag.Message:
    """ext's publish (one copy, to one recipient) as the CloudEvent an AutoGen worker reads: the attributes it looks
    up (content type, type name, sender, kind) filled in where ext's event lacks them, and JSON as `binary_data`,
    where AutoGen's worker reads it. The payload bytes are unchanged."""
    message = ag.Message()
    event = message.cloudEvent
    event.CopyFrom(delivery.event)
    attributes = event.attributes
    which = event.WhichOneof("data")
    if DATA_SCHEMA_ATTR not in attributes:
        name = attributes[EXT_TYPE_ATTR].ce_string if EXT_TYPE_ATTR in attributes else ""
        if not name and which == "proto_data":
            name = event.proto_data.type_url.rpartition("/")[2]
        attributes[DATA_SCHEMA_ATTR].ce_string = name or event.type
    if EXT_TYPE_ATTR in attributes:
        del attributes[EXT_TYPE_ATTR]
    if which == "proto_data":
        if DATA_CONTENT_TYPE_ATTR not in attributes:
            attributes[DATA_CONTENT_TYPE_ATTR].ce_string = PROTOBUF_DATA_CONTENT_TYPE
    elif which == "text_data":
        event.binary_data = event.text_data.encode()
    if DATA_CONTENT_TYPE_ATTR not in attributes:
        attributes[DATA_CONTENT_TYPE_ATTR].ce_string = JSON_DATA_CONTENT_TYPE
    if SENDER_TYPE_ATTR not in attributes and delivery.HasField("sender"):
        attributes[SENDER_TYPE_ATTR].ce_string = delivery.sender.type
        attributes[SENDER_KEY_ATTR].ce_string = delivery.sender.key
    if MESSAGE_KIND_ATTR not in attributes:
        attributes[MESSAGE_KIND_ATTR].ce_string = MESSAGE_KIND_PUBLISH
    return message


def subscription_of_autogen(wire: ag.Subscription) -> Subscription:
    """The subscription an AutoGen `Subscription` stands for; `ValueError` naming the field when it is not valid."""
    if not wire.id:
        raise ValueError("subscription.id: expected a non-empty id")
    kind = wire.WhichOneof("subscription")
    if kind == "typeSubscription":
        return TypeSubscription(wire.typeSubscription.topic_type, wire.typeSubscription.agent_type, id=wire.id)
    if kind == "typePrefixSubscription":
        prefix = wire.typePrefixSubscription
        return TypePrefixSubscription(prefix.topic_type_prefix, prefix.agent_type, id=wire.id)
    raise ValueError("subscription: expected typeSubscription or typePrefixSubscription, got neither")


def subscription_to_autogen(subscription: Subscription) -> ag.Subscription | None:
    """A subscription as AutoGen's wire has it (None for a kind AutoGen does not know)."""
    if isinstance(subscription, TypeSubscription):
        kind = ag.TypeSubscription(topic_type=subscription.topic_type, agent_type=subscription.agent_type)
        return ag.Subscription(id=subscription.id, typeSubscription=kind)
    if isinstance(subscription, TypePrefixSubscription):
        prefix = ag.TypePrefixSubscription(
            topic_type_prefix=subscription.topic_type_prefix, agent_type=subscription.agent_type
        )
        return ag.Subscription(id=subscription.id, typePrefixSubscription=prefix)
    return None
