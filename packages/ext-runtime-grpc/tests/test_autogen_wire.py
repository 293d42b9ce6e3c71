"""The mapping between AutoGen's wire (`agents.AgentRpc`) and ext's, offline: payload bytes pass through unchanged
in both directions, and what each side's runtime reads (type names, content types, senders, errors, trace
context) arrives where it looks. The end-to-end tests against real AutoGen workers are in tests-autogen/."""

from __future__ import annotations

from google.protobuf import any_pb2
from pydantic import BaseModel

from ext.runtime.grpc import ProtobufMessageSerializer
from ext.runtime.grpc._autogen_wire import (
    JSON_DATA_CONTENT_TYPE,
    PROTOBUF_DATA_CONTENT_TYPE,
    event_to_payload,
    payload_to_event,
    request_from_delivery,
    request_to_delivery,
    response_from_ext,
    response_to_ext,
)
from ext.runtime.grpc.protos import agent_rpc_pb2 as ag
from ext.runtime.grpc.protos import agent_worker_pb2 as pb
from ext.runtime.grpc.protos.cloudevent_pb2 import CloudEvent


class Ping(BaseModel):
    text: str


TRACEPARENT = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"


def test_json_payload_round_trips_byte_for_byte_and_ext_decodes_it() -> None:
    payload = ag.Payload(data_type="Ping", data_content_type=JSON_DATA_CONTENT_TYPE, data=b'{"text": "h\xc3\xa9"}')
    event = CloudEvent()
    payload_to_event(payload, event, "ag_echo/k", "e1")
    assert (event.type, event.source, event.id, event.spec_version) == ("Ping", "ag_echo/k", "e1", "1.0")
    assert event.attributes["datacontenttype"].ce_string == JSON_DATA_CONTENT_TYPE
    serializer = ProtobufMessageSerializer()
    serializer.register(Ping, type_name="Ping")
    assert serializer.from_cloud_event(event) == Ping(text="hé")
    back = ag.Payload()
    event_to_payload(event, back)
    assert back == payload


def test_protobuf_payload_is_the_any_autogen_sends() -> None:
    inner = pb.AgentId(type="t", key="k")
    packed = any_pb2.Any()
    packed.Pack(inner)
    payload = ag.Payload(
        data_type="ext.runtime.v1.AgentId",
        data_content_type=PROTOBUF_DATA_CONTENT_TYPE,
        data=packed.SerializeToString(),
    )
    event = CloudEvent()
    payload_to_event(payload, event, "s", "e")
    assert event.WhichOneof("data") == "proto_data"
    assert ProtobufMessageSerializer().from_cloud_event(event) == inner
    back = ag.Payload()
    event_to_payload(event, back)
    assert back == payload


def test_ext_messages_reach_autogen_under_their_type_names() -> None:
    serializer = ProtobufMessageSerializer()
    serializer.register(Ping, type_name="Ping")
    payload = ag.Payload()
    event_to_payload(serializer.to_cloud_event(Ping(text="x"), "src"), payload)
    assert (payload.data_type, payload.data_content_type, payload.data) == (
        "Ping",
        JSON_DATA_CONTENT_TYPE,
        b'{"text":"x"}',
    )
    proto = pb.AgentId(type="a", key="b")
    event_to_payload(serializer.to_cloud_event(proto, "src"), payload)
    unpacked = any_pb2.Any.FromString(payload.data)
    assert payload.data_type == "ext.runtime.v1.AgentId" and payload.data_content_type == PROTOBUF_DATA_CONTENT_TYPE
    assert unpacked.Unpack(decoded := pb.AgentId()) and decoded == proto


def test_unknown_content_type_passes_as_bytes() -> None:
    payload = ag.Payload(data_type="Blob", data_content_type="application/octet-stream", data=b"\x00\xff")
    event = CloudEvent()
    payload_to_event(payload, event, "s", "e")
    assert event.binary_data == b"\x00\xff"
    back = ag.Payload()
    event_to_payload(event, back)
    assert back == payload


def test_request_both_ways_keeps_ids_sender_and_trace() -> None:
    request = ag.RpcRequest(
        request_id="7",
        source=ag.AgentId(type="caller", key="c"),
        target=ag.AgentId(type="callee", key="d"),
        payload=ag.Payload(data_type="Ping", data_content_type=JSON_DATA_CONTENT_TYPE, data=b'{"text":"x"}'),
        metadata={"traceparent": TRACEPARENT},
    )
    message = request_to_delivery(request, "ev")
    delivery = message.delivery
    assert delivery.kind == pb.DELIVERY_KIND_RPC and delivery.request_id == "7"
    assert (delivery.recipient.type, delivery.recipient.key) == ("callee", "d")
    assert (delivery.sender.type, delivery.sender.key) == ("caller", "c")
    assert delivery.event.source == "caller/c"
    assert delivery.event.attributes["traceparent"].ce_string == TRACEPARENT
    back = request_from_delivery(delivery, "gw/1").request
    assert back.request_id == "gw/1"
    assert (back.source, back.target, back.payload) == (request.source, request.target, request.payload)
    assert dict(back.metadata) == {"traceparent": TRACEPARENT}


def test_request_without_a_sender() -> None:
    request = ag.RpcRequest(request_id="1", target=ag.AgentId(type="t", key="k"), payload=ag.Payload())
    delivery = request_to_delivery(request, "e").delivery
    assert not delivery.HasField("sender")
    assert not request_from_delivery(delivery, "1").request.HasField("source")


def test_responses_and_errors_both_ways() -> None:
    payload = ag.Payload(data_type="Pong", data_content_type=JSON_DATA_CONTENT_TYPE, data=b"{}")
    ok = response_to_ext(ag.RpcResponse(request_id="gw/3", payload=payload), "callee/d", "e").response
    assert ok.request_id == "gw/3" and ok.event.type == "Pong" and ok.event.source == "callee/d"
    assert response_from_ext(ok, "5").response == ag.RpcResponse(request_id="5", payload=payload)

    failed = response_to_ext(ag.RpcResponse(request_id="gw/4", error="boom"), "callee/d", "e").response
    assert (failed.error.kind, failed.error.message) == (pb.ERROR_KIND_HANDLER, "boom")
    not_found = pb.Response(
        request_id="x", error=pb.Error(kind=pb.ERROR_KIND_AGENT_NOT_FOUND, message="no worker hosts agent type 't'")
    )
    assert response_from_ext(not_found, "6").response == ag.RpcResponse(
        request_id="6", error="no worker hosts agent type 't'"
    )
