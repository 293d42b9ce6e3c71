from __future__ import annotations

import json
from dataclasses import dataclass

import pytest
from cloudevents.core.formats.json import JSONFormat
from pydantic import BaseModel

from ext.runtime.grpc import (
    JSON_TYPE,
    CloudEvent,
    ProtobufMessageSerializer,
    SerializationError,
    from_sdk_event,
    to_sdk_event,
)
from ext.runtime.grpc.protos import agent_worker_pb2 as pb


class Order(BaseModel):
    item: str
    quantity: int


@dataclass
class Point:
    x: float
    y: float


class Unregistered(BaseModel):
    value: int


@pytest.fixture
def serializer() -> ProtobufMessageSerializer:
    s = ProtobufMessageSerializer()
    s.register(Order, "shop.Order")
    s.register(Point)
    return s


def test_protobuf_messages_need_no_registration(serializer: ProtobufMessageSerializer) -> None:
    message = pb.AgentId(type="writer", key="k1")
    data = serializer.serialize(message)
    assert data == message.SerializeToString()
    assert serializer.deserialize(data, "ext.runtime.v1.AgentId") == message
    assert serializer.deserialize(data, pb.AgentId) == message
    assert serializer.type_name(message) == "ext.runtime.v1.AgentId"


def test_pydantic_and_dataclass_round_trip(serializer: ProtobufMessageSerializer) -> None:
    order = Order(item="tea", quantity=2)
    assert serializer.serialize(order) == b'{"item":"tea","quantity":2}'
    assert serializer.deserialize(serializer.serialize(order), "shop.Order") == order
    point = Point(1.5, -2.0)
    name = serializer.type_name(point)
    assert name == f"{Point.__module__}.Point"
    assert serializer.deserialize(serializer.serialize(point), name) == point
    assert serializer.deserialize(serializer.serialize(point), Point) == point


def test_plain_json_values_travel_without_registration(serializer: ProtobufMessageSerializer) -> None:
    for value in ("text", 3, 2.5, True, None, [1, "a"], {"k": [1, 2]}):
        assert serializer.type_name(value) == JSON_TYPE
        assert serializer.deserialize(serializer.serialize(value), JSON_TYPE) == value


def test_errors_name_the_problem(serializer: ProtobufMessageSerializer) -> None:
    with pytest.raises(SerializationError, match=r"Unregistered is not registered: call register\(Unregistered\)"):
        serializer.serialize(Unregistered(value=1))
    with pytest.raises(SerializationError, match="cannot serialize object"):
        serializer.serialize(object())
    with pytest.raises(SerializationError, match=r"unknown message type 'nope\.Nope'"):
        serializer.deserialize(b"{}", "nope.Nope")
    with pytest.raises(SerializationError, match="not a valid Order"):
        serializer.deserialize(b'{"item": 1}', "shop.Order")
    with pytest.raises(SerializationError, match="not a valid AgentId"):
        serializer.deserialize(b"\xff\xff\xff", pb.AgentId)
    with pytest.raises(SerializationError, match="not plain JSON"):
        serializer.serialize({"k": {1, 2}})
    with pytest.raises(TypeError, match="data must be bytes"):
        serializer.deserialize("{}", "shop.Order")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="already registered for Order"):
        serializer.register(Point, "shop.Order")
    with pytest.raises(TypeError, match="protobuf message, pydantic model or dataclass"):
        serializer.register(int)
    with pytest.raises(ValueError, match="full name"):
        serializer.register(pb.AgentId, "other.Name")


def test_cloud_event_carries_protobuf_as_any(serializer: ProtobufMessageSerializer) -> None:
    message = pb.AgentId(type="writer", key="k1")
    event = serializer.to_cloud_event(message, source="writer/k1", id="e1")
    assert (event.id, event.source, event.spec_version, event.type) == (
        "e1",
        "writer/k1",
        "1.0",
        "ext.runtime.v1.AgentId",
    )
    assert event.WhichOneof("data") == "proto_data"
    assert event.proto_data.type_url == "type.googleapis.com/ext.runtime.v1.AgentId"
    assert "datacontenttype" not in event.attributes  # proto_data is self-describing
    wire = CloudEvent.FromString(event.SerializeToString())
    assert serializer.from_cloud_event(wire) == message


def test_cloud_event_with_custom_type_and_json_data(serializer: ProtobufMessageSerializer) -> None:
    order = Order(item="tea", quantity=2)
    event = serializer.to_cloud_event(
        order, source="/shop", type="com.example.order.placed", attributes={"subject": "o1"}
    )
    assert event.type == "com.example.order.placed"
    assert event.text_data == '{"item":"tea","quantity":2}'
    assert event.attributes["exttype"].ce_string == "shop.Order"
    assert serializer.from_cloud_event(event) == order
    assert serializer.from_cloud_event(event, Order) == order
    with pytest.raises(ValueError, match="source"):
        serializer.to_cloud_event(order, source="")
    with pytest.raises(TypeError, match="CloudEvent"):
        serializer.from_cloud_event({"id": "x"})  # type: ignore[arg-type]


def test_cloudevents_json_format_interop(serializer: ProtobufMessageSerializer) -> None:
    """Our protobuf-format event, written by the cloudevents SDK's JSON format, reads back unchanged."""
    order = Order(item="tea", quantity=2)
    event = serializer.to_cloud_event(order, source="/shop", type="com.example.order", id="e-42")
    as_json = JSONFormat().write(to_sdk_event(event))
    document = json.loads(as_json)
    document.pop("time")  # the SDK stamps every event it builds
    assert document == {
        "id": "e-42",
        "source": "/shop",
        "specversion": "1.0",
        "type": "com.example.order",
        "datacontenttype": "application/json",
        "exttype": "shop.Order",
        "data": {"item": "tea", "quantity": 2},
    }
    back = from_sdk_event(JSONFormat().read(None, as_json))
    assert serializer.from_cloud_event(back) == order
    assert (back.id, back.source, back.type) == ("e-42", "/shop", "com.example.order")

    proto_event = serializer.to_cloud_event(pb.AgentId(type="a", key="b"), source="/x", id="e-7")
    proto_json = json.loads(JSONFormat().write(to_sdk_event(proto_event)))
    assert proto_json["datacontenttype"] == "application/protobuf" and "data_base64" in proto_json
    proto_back = from_sdk_event(JSONFormat().read(None, json.dumps(proto_json).encode()))
    assert serializer.from_cloud_event(proto_back) == pb.AgentId(type="a", key="b")


def test_event_from_another_sdk_reads_as_json() -> None:
    foreign = b'{"specversion":"1.0","id":"1","source":"/other","type":"ext.json","data":{"a":[1,2]},"n":7}'
    event = from_sdk_event(JSONFormat().read(None, foreign))
    assert event.attributes["n"].ce_integer == 7
    assert ProtobufMessageSerializer().from_cloud_event(event) == {"a": [1, 2]}
