"""Property-based tests (hypothesis) of what takes bytes from the network: the serializer's decoders, the
gateway's and worker's handling of each stream message, and the gateway's decoding of what other replicas publish
to it (`ForwardBatch`es on the Redis bus). Malformed input gives an error for that message (a
`SerializationError`, or an error response on the stream) and never ends the stream or the process.

The stream tests run a real gateway and a real worker on an event loop in a thread (one per module, so
examples do not pay for start-up) and drive them from a raw gRPC client that can write any bytes."""

from __future__ import annotations

import asyncio
import itertools
import json
import threading
from collections.abc import Coroutine, Iterator
from typing import Any, TypeVar

import grpc
import pytest
from google.protobuf.any_pb2 import Any as AnyProto
from google.protobuf.message import DecodeError
from google.protobuf.wrappers_pb2 import StringValue
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ext.core import AgentId
from ext.runtime.grpc import (
    JSON_TYPE,
    CloudEvent,
    Gateway,
    GrpcAgentRuntime,
    LocalCluster,
    ProtobufMessageSerializer,
    SerializationError,
)
from ext.runtime.grpc._forwarder import parse_forwards
from ext.runtime.grpc.protos import agent_worker_pb2 as pb
from ext.testing.redis import RedisServer
from ext.testing.runtime_agents import MESSAGE_TYPES, EchoAgent, Journal, Ping, Pong

T = TypeVar("T")

FAST = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
STREAM = settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture]
)

PING_NAME = f"{Ping.__module__}.{Ping.__qualname__}"


def serializer() -> ProtobufMessageSerializer:
    result = ProtobufMessageSerializer()
    for message_type in MESSAGE_TYPES:
        result.register(message_type)
    return result


# --- strategies -------------------------------------------------------------------------------------------

type_names = st.sampled_from(
    [JSON_TYPE, PING_NAME, "google.protobuf.StringValue", "ext.runtime.v1.Message", "no.such.Type", "", "/", "a/b"]
)
short_text = st.text(max_size=40)
json_like = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | short_text,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(short_text, inner, max_size=4),
    max_leaves=12,
)


@st.composite
def cloud_events(draw: st.DrawFn) -> CloudEvent:
    """Events shaped like ours, with any type names, payloads and attributes."""
    version = draw(st.sampled_from(["1.0", ""]))
    event = CloudEvent(id=draw(short_text), source=draw(short_text), spec_version=version, type=draw(type_names))
    data = draw(st.sampled_from(["text", "json", "ping", "proto", "binary", "none"]))
    if data == "text":
        event.text_data = draw(st.text(max_size=80))
    elif data == "json":
        event.text_data = json.dumps(draw(json_like))
    elif data == "ping":
        event.text_data = json.dumps({"text": draw(st.one_of(short_text, st.integers(), st.none()))})
    elif data == "proto":
        url = draw(st.sampled_from(["type.googleapis.com/", ""])) + draw(type_names)
        value = draw(st.binary(max_size=64) | st.builds(lambda s: StringValue(value=s).SerializeToString(), short_text))
        event.proto_data.CopyFrom(AnyProto(type_url=url, value=value))
    elif data == "binary":
        event.binary_data = draw(st.binary(max_size=64))
    for key in draw(st.lists(st.sampled_from(["exttype", "datacontenttype", "x"]), max_size=2, unique=True)):
        event.attributes[key].ce_string = draw(type_names)
    return event


agent_ids = st.builds(
    lambda t, k: pb.AgentId(type=t, key=k), st.sampled_from(["echo", "nobody", "", "bad type!", "a" * 300]), short_text
)


@st.composite
def messages(draw: st.DrawFn, depth: int = 0) -> pb.Message:
    """Any body of agent_worker.proto's `Message`, with random fields (recipients mostly the hosted type)."""
    bodies = ["delivery", "register", "cancel", "list_agents", "response", "hello", "notice", "register_response"]
    bodies.append("empty")
    if depth == 0:
        bodies.append("batch")
    body = draw(st.sampled_from(bodies))
    message = pb.Message()
    if body == "delivery":
        delivery = message.delivery
        delivery.kind = draw(st.sampled_from([0, 1, 2, 3, 7]))  # type: ignore[assignment]
        delivery.request_id = draw(short_text)
        delivery.recipient.CopyFrom(draw(agent_ids))
        if draw(st.booleans()):
            delivery.sender.CopyFrom(draw(agent_ids))
        delivery.broadcast_type = draw(st.sampled_from(["echo", "", "nobody"]))
        delivery.event.CopyFrom(draw(cloud_events()))
    elif body == "register":
        message.register.request_id = draw(short_text)
        message.register.type = draw(st.sampled_from(["fuzzed", "", "bad type!"]))
    elif body == "cancel":
        message.cancel.request_id = draw(short_text)
    elif body == "list_agents":
        message.list_agents.request_id = draw(short_text)
        message.list_agents.type = draw(st.sampled_from(["", "echo", "bad type!"]))
    elif body == "response":
        message.response.request_id = draw(st.sampled_from(["", "1", "x/1"]) | short_text)
        if draw(st.booleans()):
            message.response.event.CopyFrom(draw(cloud_events()))
        else:
            message.response.error.kind = draw(st.integers(0, 9))  # type: ignore[assignment]
    elif body == "hello":
        message.hello.worker_id = draw(short_text)
    elif body == "notice":
        message.notice.error.message = draw(short_text)
    elif body == "register_response":
        message.register_response.request_id = draw(short_text)
    elif body == "batch":
        for item in draw(st.lists(messages(depth + 1), max_size=4)):
            message.batch.messages.append(item)
    return message


# --- the serializer ---------------------------------------------------------------------------------------


@FAST
@given(data=st.binary(max_size=256), type_name=type_names)
def test_deserialize_random_bytes_returns_or_raises_serialization_error(data: bytes, type_name: str) -> None:
    try:
        serializer().deserialize(data, type_name)
    except SerializationError:
        pass


@FAST
@given(data=st.binary(max_size=256))
def test_random_bytes_as_a_cloud_event(data: bytes) -> None:
    try:
        event = CloudEvent.FromString(data)
    except DecodeError:
        return  # protobuf refuses it: the stream layer reports it (see below)
    try:
        serializer().from_cloud_event(event)
    except SerializationError:
        pass


@FAST
@given(event=cloud_events())
def test_from_cloud_event_on_shaped_events(event: CloudEvent) -> None:
    try:
        serializer().from_cloud_event(event)
    except SerializationError:
        pass


@FAST
@given(text=st.text(max_size=60))
def test_a_ping_event_decodes_only_when_valid(text: str) -> None:
    ser = serializer()
    event = ser.to_cloud_event(Ping(text=text), "test")
    assert ser.from_cloud_event(event) == Ping(text=text)
    event.text_data = event.text_data[:-1]  # truncated JSON
    with pytest.raises(SerializationError, match="Ping"):
        ser.from_cloud_event(event)


def test_deeply_nested_json_is_a_serialization_error() -> None:
    # Found by reading json.loads' failure modes: nesting past the recursion limit raised RecursionError.
    data = b"[" * 100_000 + b"]" * 100_000
    with pytest.raises(SerializationError, match="JSON"):
        serializer().deserialize(data, JSON_TYPE)
    event = CloudEvent(id="1", source="s", spec_version="1.0", type=JSON_TYPE, text_data=data.decode())
    with pytest.raises(SerializationError):
        serializer().from_cloud_event(event)


# --- a real gateway and worker, driven by a raw client ----------------------------------------------------


class Cluster:
    """A gateway and a worker hosting "echo", on an event loop in a thread, plus a raw client stream."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.ids = itertools.count(1)
        self.run(self._start())

    def run(self, coro: Coroutine[Any, Any, T], timeout: float = 20) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    async def _start(self) -> None:
        self.gateway = Gateway()
        await self.gateway.start()
        self.worker = GrpcAgentRuntime(self.gateway.address, token_env=None, connect_timeout=5)
        for message_type in MESSAGE_TYPES:
            self.worker.register_message_type(message_type)
        await self.worker.start()
        self.journal = Journal()
        await self.worker.register_agent_factory("echo", lambda aid, rt: EchoAgent(aid, rt, self.journal))
        self.channel = grpc.aio.insecure_channel(self.gateway.address)
        self.call: Any = self.channel.stream_stream(
            "/ext.runtime.v1.AgentWorker/OpenChannel",
            request_serializer=lambda data: data,
            response_deserializer=pb.Message.FromString,
        )()  # type: ignore[call-arg]
        hello: Any = await self.call.read()
        assert hello.WhichOneof("body") == "hello"
        self.serializer = serializer()

    async def _stop(self) -> None:
        self.call.cancel()
        await self.channel.close(None)
        await self.worker.stop()
        await self.gateway.stop(0)

    def close(self) -> None:
        self.run(self._stop())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        self.loop.close()

    async def send(self, data: bytes) -> None:
        await self.call.write(data)

    async def read_until(self, body: str, request_id: str) -> pb.Message:
        """The next message of `body` with `request_id`, skipping the notices and answers to fuzzed messages."""
        while True:
            message = await asyncio.wait_for(self.call.read(), 10)
            assert message is not grpc.aio.EOF, "the gateway ended the stream"  # type: ignore[attr-defined]
            if message.WhichOneof("body") == body and getattr(message, body).request_id == request_id:
                return message  # type: ignore[no-any-return]

    async def rpc(self, text: str) -> pb.Response:
        """A valid RPC to echo/fuzz over the raw stream."""
        request_id = f"valid-{next(self.ids)}"
        message = pb.Message()
        delivery = message.delivery
        delivery.kind = pb.DELIVERY_KIND_RPC
        delivery.request_id = request_id
        delivery.recipient.CopyFrom(pb.AgentId(type="echo", key="fuzz"))
        self.serializer.fill_cloud_event(delivery.event, Ping(text=text), "raw-client")
        await self.send(message.SerializeToString())
        return (await self.read_until("response", request_id)).response

    async def still_working(self) -> None:
        """The raw stream, the gateway and the worker all still answer."""
        response = await self.rpc("still there?")
        assert response.WhichOneof("result") == "event", response
        pong = self.serializer.from_cloud_event(response.event)
        assert isinstance(pong, Pong) and pong.text == "still there?"
        reply = await self.worker.send_and_await_response(Ping(text="w"), AgentId("echo", "w"), timeout=10)
        assert isinstance(reply, Pong) and reply.agent == "echo/w"


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    cluster = Cluster()
    try:
        yield cluster
    finally:
        cluster.close()


def test_malformed_bytes_get_a_notice_and_the_stream_keeps_working(cluster: Cluster) -> None:
    async def scenario() -> None:
        await cluster.still_working()
        await cluster.send(b"\xff\xff\xff\xff not a protobuf message")
        notice = await asyncio.wait_for(cluster.call.read(), 10)
        assert notice.WhichOneof("body") == "notice"
        assert notice.notice.error.kind == pb.ERROR_KIND_BAD_MESSAGE
        assert "could not be decoded" in notice.notice.error.message
        await cluster.still_working()

    cluster.run(scenario())


def test_rpc_with_an_undecodable_payload_gets_an_error_response(cluster: Cluster) -> None:
    async def scenario() -> None:
        message = pb.Message()
        delivery = message.delivery
        delivery.kind = pb.DELIVERY_KIND_RPC
        delivery.request_id = "bad-payload"
        delivery.recipient.CopyFrom(pb.AgentId(type="echo", key="fuzz"))
        delivery.event.CopyFrom(CloudEvent(id="1", source="s", spec_version="1.0", type=PING_NAME, text_data="{"))
        await cluster.send(message.SerializeToString())
        response = (await cluster.read_until("response", "bad-payload")).response
        assert response.error.kind == pb.ERROR_KIND_BAD_MESSAGE
        assert "Ping" in response.error.message
        await cluster.still_working()

    cluster.run(scenario())


@STREAM
@given(data=st.binary(min_size=1, max_size=128))
def test_random_bytes_on_the_stream(cluster: Cluster, data: bytes) -> None:
    cluster.run(cluster.send(data))
    cluster.run(cluster.still_working())


@STREAM
@given(message=messages())
def test_random_messages_on_the_stream(cluster: Cluster, message: pb.Message) -> None:
    cluster.run(cluster.send(message.SerializeToString()))
    cluster.run(cluster.still_working())


# --- what other replicas publish to a gateway (the Redis bus) ---------------------------------------------


@st.composite
def forwards(draw: st.DrawFn) -> pb.Forward:
    target = draw(st.sampled_from(["", "no-such-worker"]) | short_text)
    return pb.Forward(target_worker=target, origin_gateway=draw(short_text), message=draw(messages()))


@FAST
@given(data=st.binary(max_size=256))
def test_random_bytes_as_a_forward_batch(data: bytes) -> None:
    found, problems = parse_forwards(data)
    assert all(isinstance(f, pb.Forward) for f in found)
    assert all(isinstance(p, str) and p for p in problems)
    if any(p.startswith("the batch") for p in problems):
        assert found == [] and len(problems) == 1


@FAST
@given(items=st.lists(forwards() | st.binary(max_size=32), max_size=6))
def test_forward_batches_decode_in_order_and_drop_only_bad_items(items: list[pb.Forward | bytes]) -> None:
    encoded = [i.SerializeToString() if isinstance(i, pb.Forward) else i for i in items]
    found, problems = parse_forwards(pb.ForwardBatch(forwards=encoded).SerializeToString())
    expected: list[pb.Forward] = []
    bad = 0
    for data in encoded:
        try:
            expected.append(pb.Forward.FromString(data))
        except DecodeError:
            bad += 1
    assert found == expected
    assert len(problems) == bad
    assert all(p.startswith("forward ") for p in problems)


class Replicas:
    """Two gateway replicas sharing a Redis, a worker hosting "echo" on the first and a caller on the second,
    on an event loop in a thread; `publish` puts raw bytes on the first replica's inbox channel."""

    def __init__(self, redis_url: str) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.run(self._start(redis_url))

    def run(self, coro: Coroutine[Any, Any, T], timeout: float = 30) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    async def _start(self, redis_url: str) -> None:
        import redis.asyncio as aioredis

        self.cluster = LocalCluster(2, redis_url=redis_url)
        await self.cluster.start()
        a, b = self.cluster.addresses
        self.host = GrpcAgentRuntime(a, token_env=None, connect_timeout=5)
        self.caller = GrpcAgentRuntime(b, token_env=None, connect_timeout=5)
        for runtime in (self.host, self.caller):
            for message_type in MESSAGE_TYPES:
                runtime.register_message_type(message_type)
            await runtime.start()
        await self.host.register_agent_factory("echo", lambda aid, rt: EchoAgent(aid, rt, Journal()))
        self.redis = aioredis.from_url(redis_url)
        self.inbox = f"{self.cluster.redis_prefix}:inbox:{self.cluster.gateways[0].gateway_id}"
        self.host_worker = self.host.worker_id

    async def publish(self, payload: bytes) -> None:
        assert await self.redis.publish(self.inbox, payload) == 1, "the replica stopped listening"

    async def still_working(self) -> None:
        reply = await self.caller.send_and_await_response(Ping(text="bus"), AgentId("echo", "bus"), timeout=10)
        assert isinstance(reply, Pong) and reply.text == "bus" and reply.agent == "echo/bus"

    def close(self) -> None:
        async def stop() -> None:
            await self.caller.stop()
            await self.host.stop()
            await self.cluster.stop()
            await self.redis.aclose()

        self.run(stop())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        self.loop.close()


@pytest.fixture(scope="module")
def replicas(redis_server: RedisServer) -> Iterator[Replicas]:
    replicas = Replicas(redis_server.url)
    try:
        yield replicas
    finally:
        replicas.close()


@STREAM
@given(data=st.binary(max_size=128))
def test_random_bytes_on_the_bus(replicas: Replicas, data: bytes) -> None:
    replicas.run(replicas.publish(data))
    replicas.run(replicas.still_working())


@STREAM
@given(items=st.lists(forwards() | st.binary(max_size=32), min_size=1, max_size=4), to_host=st.booleans())
def test_random_forward_batches_on_the_bus(replicas: Replicas, items: list[pb.Forward | bytes], to_host: bool) -> None:
    encoded = []
    for item in items:
        if isinstance(item, pb.Forward):
            if to_host and item.target_worker:
                item.target_worker = replicas.host_worker  # fuzzed messages to a real worker
            encoded.append(item.SerializeToString())
        else:
            encoded.append(item)
    replicas.run(replicas.publish(pb.ForwardBatch(forwards=encoded).SerializeToString()))
    replicas.run(replicas.still_working())
