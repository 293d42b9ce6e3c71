"""Topics on the gRPC runtime, beyond the shared scenarios (`RuntimeTopicScenarios`): what the wire carries, a
recipient type no worker hosts, and the gateway's refusals."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
import pytest_asyncio
from ext_runtime_grpc_support import worker

from ext.core import AgentId, TopicId, TypePrefixSubscription, TypeSubscription
from ext.runtime.grpc import Gateway, GrpcAgentRuntime
from ext.runtime.grpc.protos import agent_worker_pb2 as pb
from ext.testing.runtime_agents import EchoAgent, GetNotes, Journal, Note


@pytest_asyncio.fixture
async def gateway() -> AsyncIterator[Gateway]:
    gw = Gateway(port=0, shutdown_grace=0)
    await gw.start()
    try:
        yield gw
    finally:
        await gw.stop()


def test_a_publish_envelope_carries_the_topic_as_the_events_type_and_source() -> None:
    runtime = worker("127.0.0.1:1")
    envelope, _ = runtime._sender.delivery(
        pb.DELIVERY_KIND_PUBLISH, Note(text="x"), AgentId("a", "b"), topic=TopicId("orders.new", "o/1"), message_id="m7"
    )
    delivery = envelope.delivery
    assert delivery.kind == pb.DELIVERY_KIND_PUBLISH
    assert not delivery.HasField("recipient")
    event = delivery.event
    # AutoGen's convention: CloudEvents `type` = topic type, `source` = topic source; the message type is ext's.
    assert (event.type, event.source, event.id) == ("orders.new", "o/1", "m7")
    assert event.attributes["exttype"].ce_string == runtime.serializer.type_name(Note(text="x"))
    assert (delivery.sender.type, delivery.sender.key) == ("a", "b")


async def test_a_recipient_type_nobody_hosts_is_reported_like_a_one_way_send(gateway: Gateway) -> None:
    journal = Journal()
    undelivered: list[tuple[AgentId, str]] = []
    got_notice = asyncio.Event()

    def on_undelivered(recipient: AgentId, reason: str) -> None:
        undelivered.append((recipient, reason))
        got_notice.set()

    runtime = worker(f"127.0.0.1:{gateway.port}", on_undelivered=on_undelivered)
    async with runtime:
        await runtime.register_agent_factory("echo", lambda aid, rt: EchoAgent(aid, rt, journal))
        await runtime.add_subscription(TypeSubscription("t", "echo"))
        await runtime.add_subscription(TypeSubscription("t", "ghost"))
        await runtime.publish(Note(text="hi"), TopicId("t", "k"))
        await asyncio.wait_for(got_notice.wait(), 10)
        assert [(str(r), "ghost" in reason) for r, reason in undelivered] == [("ghost/k", True)]
        # The other recipient still got it.
        notes = await runtime.send_and_await_response(GetNotes(), AgentId("echo", "k"))
        assert notes.notes == ["hi!"]


async def test_gateway_refusals_reach_the_caller_as_value_and_lookup_errors(gateway: Gateway) -> None:
    runtime: GrpcAgentRuntime = worker(f"127.0.0.1:{gateway.port}")
    async with runtime:
        await runtime.add_subscription(TypeSubscription("t", "a", id="taken"))
        with pytest.raises(ValueError, match="'taken' is already used"):
            await runtime.add_subscription(TypePrefixSubscription("u", "a", id="taken"))
        with pytest.raises(LookupError, match="'nope'"):
            await runtime.remove_subscription("nope")
        # A subscription with no kind, written by hand on the wire: refused by the gateway, naming what is missing.
        request_id = runtime._sender.next_id()
        bare = pb.Message(add_subscription=pb.AddSubscription(request_id=request_id, subscription=pb.Subscription()))
        reply = await runtime._sender.control(bare, request_id)
        assert (reply.error.kind, reply.error.message) == (
            pb.ERROR_KIND_BAD_REQUEST,
            "subscription has no kind (type or type_prefix)",
        )
        assert [s.id for s in await runtime.list_subscriptions()] == ["taken"]


async def test_a_topic_source_that_cannot_be_an_agent_key_is_refused_before_sending(gateway: Gateway) -> None:
    journal = Journal()
    runtime = worker(f"127.0.0.1:{gateway.port}")
    async with runtime:
        await runtime.register_agent_factory("echo", lambda aid, rt: EchoAgent(aid, rt, journal))
        await runtime.add_subscription(TypeSubscription("t", "echo"))
        # The source becomes the recipients' agent key: a bad one is refused where the topic is made, naming it.
        with pytest.raises(ValueError, match=r"TopicId\.source must be a non-empty printable string"):
            await runtime.publish(Note(text="x"), TopicId("t", "line\nbreak"))
        await runtime.publish(Note(text="fine"), TopicId("t", "k"))
        assert (await runtime.send_and_await_response(GetNotes(), AgentId("echo", "k"))).notes == ["fine!"]
        assert journal.created == [AgentId("echo", "k")]
