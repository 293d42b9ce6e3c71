"""The AutoGen listener's checks, with a client built from our own copy of the protocol: the channel and its
client-id, what it refuses (with the status and text AutoGen's host uses, where it has one), subscriptions, and the
gateway option. Real AutoGen workers drive it end to end in tests-autogen/."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import grpc
import pytest
from ext_runtime_grpc_support import client, eventually, open_channel

from ext.runtime.grpc import Gateway, gateway_main
from ext.runtime.grpc._autogen_service import AutoGenService
from ext.runtime.grpc.protos import agent_rpc_pb2 as ag
from ext.runtime.grpc.protos import agent_rpc_pb2_grpc as ag_grpc
from ext.runtime.grpc.testing import start_gateway_process


@pytest.fixture
async def gateway() -> AsyncIterator[Gateway]:
    gw = Gateway(autogen_address="127.0.0.1:0")
    await gw.start()
    try:
        yield gw
    finally:
        await gw.stop(grace=0)


@pytest.fixture
async def stub(gateway: Gateway) -> AsyncIterator[Any]:
    async with grpc.aio.insecure_channel(f"127.0.0.1:{gateway.autogen_port}") as channel:
        yield ag_grpc.AgentRpcStub(channel)  # type: ignore[no-untyped-call]  # generated, untyped


def test_gateway_option_is_checked() -> None:
    with pytest.raises(ValueError, match="autogen_address must be None or 'HOST:PORT', got 'nowhere'"):
        Gateway(autogen_address="nowhere")
    assert Gateway().autogen_port is None


async def test_calls_without_client_id_are_refused_as_autogens_host_does(stub: Any) -> None:
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await stub.RegisterAgent(ag.RegisterAgentTypeRequest(type="t"))
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert caught.value.details() == "client-id metadata not found."


async def test_register_needs_the_clients_channel(gateway: Gateway, stub: Any) -> None:
    call, _ = await open_channel(stub, "c1")
    await stub.RegisterAgent(ag.RegisterAgentTypeRequest(type="ag_t"), metadata=client("c1"))
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await stub.RegisterAgent(ag.RegisterAgentTypeRequest(type="ag_t"), metadata=client("c1"))
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert caught.value.details() == "agent type 'ag_t' is already registered by this worker"
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await stub.RegisterAgent(ag.RegisterAgentTypeRequest(type="bad type!"), metadata=client("c1"))
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "bad type!" in (caught.value.details() or "")
    call.cancel()


async def test_control_channel_is_unimplemented(stub: Any) -> None:
    async def nothing() -> AsyncIterator[ag.ControlMessage]:
        await asyncio.Event().wait()
        yield ag.ControlMessage()

    call = stub.OpenControlChannel(nothing(), metadata=client("c2"))
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await call.read()
    assert caught.value.code() == grpc.StatusCode.UNIMPLEMENTED


async def test_subscriptions_go_to_the_registry_and_end_with_the_channel(gateway: Gateway, stub: Any) -> None:
    call, _ = await open_channel(stub, "c3")
    sub = ag.Subscription(id="s1", typeSubscription=ag.TypeSubscription(topic_type="news", agent_type="reader"))
    await stub.AddSubscription(ag.AddSubscriptionRequest(subscription=sub), metadata=client("c3"))
    # The same subscription again changes nothing.
    await stub.AddSubscription(ag.AddSubscriptionRequest(subscription=sub), metadata=client("c3"))
    assert [(s.id, s.agent_type) for s in await gateway.registry.subscriptions()] == [("s1", "reader")]
    other = ag.Subscription(id="s1", typeSubscription=ag.TypeSubscription(topic_type="sport", agent_type="reader"))
    for bad, text in [
        (other, "s1"),
        (ag.Subscription(id="s2"), "subscription: expected typeSubscription or typePrefixSubscription, got neither"),
        (ag.Subscription(typeSubscription=sub.typeSubscription), "subscription.id: expected a non-empty id"),
        (ag.Subscription(id="s3", typeSubscription=ag.TypeSubscription(topic_type="news")), "agent_type"),
    ]:
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await stub.AddSubscription(ag.AddSubscriptionRequest(subscription=bad), metadata=client("c3"))
        assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert text in (caught.value.details() or "")
    listed = await stub.GetSubscriptions(ag.GetSubscriptionsRequest(), metadata=client("c3"))
    assert list(listed.subscriptions) == [sub]
    await stub.RemoveSubscription(ag.RemoveSubscriptionRequest(id="s1"), metadata=client("c3"))
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await stub.RemoveSubscription(ag.RemoveSubscriptionRequest(id="s1"), metadata=client("c3"))
    assert caught.value.code() == grpc.StatusCode.NOT_FOUND
    await stub.AddSubscription(ag.AddSubscriptionRequest(subscription=sub), metadata=client("c3"))
    call.cancel()

    # The channel's end removes its client's subscriptions (as AutoGen's host does).
    async def gone() -> bool:
        return not await gateway.registry.subscriptions()

    await eventually(gone, what="the closed channel's subscriptions removed")


def test_command_refuses_autogen_listen_with_replicas(capsys: pytest.CaptureFixture[str]) -> None:
    assert gateway_main(["--replicas", "2", "--redis-url", "redis://x", "--autogen-listen", "127.0.0.1:0"]) == 2
    assert "--autogen-listen serves one gateway" in capsys.readouterr().err


def test_command_prints_the_autogen_address() -> None:
    process = start_gateway_process("--autogen-listen", "127.0.0.1:0")
    try:
        assert process.process.stdout is not None
        line = process.process.stdout.readline().strip()
        host, _, port = line.removeprefix("autogen ").rpartition(":")
        assert line.startswith("autogen ") and host == "127.0.0.1" and int(port) > 0
    finally:
        process.kill()


async def test_an_equal_subscription_stays_while_another_worker_holds_it(gateway: Gateway, stub: Any) -> None:
    """AutoGen workers hosting one type each add the same `<type>:` prefix subscription (under their own ids)."""
    first, _ = await open_channel(stub, "w1")
    second, _ = await open_channel(stub, "w2")
    prefix = ag.TypePrefixSubscription(topic_type_prefix="ag_t:", agent_type="ag_t")
    for client_id, own_id in (("w1", "id-1"), ("w2", "id-2")):
        request = ag.AddSubscriptionRequest(subscription=ag.Subscription(id=own_id, typePrefixSubscription=prefix))
        await stub.AddSubscription(request, metadata=client(client_id))
    await stub.RegisterAgent(ag.RegisterAgentTypeRequest(type="w1_type"), metadata=client("w1"))
    assert [s.id for s in await gateway.registry.subscriptions()] == ["id-1"]
    first.cancel()

    async def first_detached() -> bool:  # the gateway has handled the first channel's end
        return not await gateway.registry.workers_for("w1_type")

    await eventually(first_detached, what="the first worker's channel end handled")
    # The first worker's id went with its channel; the second's still holds the subscription.
    assert [s.id for s in await gateway.registry.subscriptions()] == ["id-2"]
    # The second worker removes it under its own id: it was the last holder.
    await stub.RemoveSubscription(ag.RemoveSubscriptionRequest(id="id-2"), metadata=client("w2"))
    assert await gateway.registry.subscriptions() == []
    second.cancel()


async def test_unary_call_for_a_client_without_a_channel_fails_after_the_wait() -> None:
    gateway = Gateway()  # only its routing is used: the listener under test is started on its own
    service = AutoGenService(gateway._router, "127.0.0.1:0", 1 << 22, channel_wait=0.2)
    await service.start()
    try:
        async with grpc.aio.insecure_channel(service.address) as channel:
            stub = ag_grpc.AgentRpcStub(channel)  # type: ignore[no-untyped-call]  # generated, untyped
            with pytest.raises(grpc.aio.AioRpcError) as caught:
                await stub.RegisterAgent(ag.RegisterAgentTypeRequest(type="t"), metadata=client("nobody"))
    finally:
        await service.stop()
    assert caught.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert caught.value.details() == (
        "no open channel for client-id 'nobody': call OpenChannel with the same client-id first"
    )


async def test_an_undecodable_frame_is_dropped_and_the_channel_goes_on(gateway: Gateway, stub: Any) -> None:
    async with grpc.aio.insecure_channel(f"127.0.0.1:{gateway.autogen_port}") as channel:
        raw = channel.stream_stream(
            "/agents.AgentRpc/OpenChannel",
            request_serializer=lambda data: data,
            response_deserializer=ag.Message.FromString,
        )
        call: Any = raw(metadata=client("c5"))  # type: ignore[call-arg]  # no iterator: written with call.write
        await call.write(b"\xff\xff\xff")  # not a Message
        # The same channel then asks for an agent nobody hosts, and is answered.
        request = ag.Message(request=ag.RpcRequest(request_id="1", target=ag.AgentId(type="nobody", key="k")))
        await call.write(request.SerializeToString())
        reply: ag.Message = await asyncio.wait_for(call.read(), 30)
        assert reply.response.request_id == "1"
        assert reply.response.error == "no worker hosts agent type 'nobody' (recipient nobody/k)"
        call.cancel()
