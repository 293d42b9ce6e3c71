"""The AutoGen listener of a gateway that requires a token (issue 35, item 10): what an AutoGen client, which sends
no token, may do to ext's authenticated workers. A real gateway, a real ext worker holding the token and an
AutoGen-protocol client built from our copy of the protocol, over loopback sockets."""

from __future__ import annotations

import asyncio
import logging
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from typing import Any

import grpc
import pytest
from ext_runtime_grpc_support import client, eventually, open_channel, worker

from ext.core import AgentId, TypeSubscription
from ext.runtime.grpc import Gateway, GrpcAgentRuntime
from ext.runtime.grpc._autogen_wire import JSON_DATA_CONTENT_TYPE
from ext.runtime.grpc.protos import agent_rpc_pb2 as ag
from ext.runtime.grpc.protos import agent_rpc_pb2_grpc as ag_grpc
from ext.testing.runtime_agents import EchoAgent, Journal, Ping, Pong

TOKEN = "gateway-token-1"
FLAG = "autogen_allow_unauthenticated"


@pytest.fixture
async def gateway() -> AsyncIterator[Gateway]:
    gw = Gateway(token=TOKEN, autogen_address="127.0.0.1:0")
    await gw.start()
    try:
        yield gw
    finally:
        await gw.stop(grace=0)


@pytest.fixture
async def ext_host(gateway: Gateway) -> AsyncIterator[tuple[GrpcAgentRuntime, Journal]]:
    """An ext worker that authenticated with the token, hosting `ext_echo`."""
    journal = Journal()
    async with worker(f"127.0.0.1:{gateway.port}", token=TOKEN) as host:
        await host.register_agent_factory("ext_echo", lambda aid, rt: EchoAgent(aid, rt, journal))
        yield host, journal


@pytest.fixture
async def stub(gateway: Gateway) -> AsyncIterator[Any]:
    async with grpc.aio.insecure_channel(f"127.0.0.1:{gateway.autogen_port}") as channel:
        yield ag_grpc.AgentRpcStub(channel)  # type: ignore[no-untyped-call]  # generated, untyped


async def table_ids(runtime: GrpcAgentRuntime) -> list[str]:
    return sorted(s.id for s in await runtime.list_subscriptions())


async def test_an_autogen_client_cannot_remove_an_ext_workers_subscription(
    gateway: Gateway, ext_host: tuple[GrpcAgentRuntime, Journal], stub: Any
) -> None:
    host, _ = ext_host
    await host.add_subscription(TypeSubscription("news", "ext_echo", id="ext-news"))
    call, _ = await open_channel(stub, "intruder")
    # It can see the table (listing is open to AutoGen clients, as documented) ...
    listed = await stub.GetSubscriptions(ag.GetSubscriptionsRequest(), metadata=client("intruder"))
    assert [s.id for s in listed.subscriptions] == ["ext-news"]
    # ... but not remove what an ext worker added.
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await stub.RemoveSubscription(ag.RemoveSubscriptionRequest(id="ext-news"), metadata=client("intruder"))
    assert caught.value.code() == grpc.StatusCode.PERMISSION_DENIED
    assert caught.value.details() == (
        "subscription 'ext-news' was not added by client-id 'intruder': an AutoGen client removes only the "
        "subscriptions its own channel added"
    )
    assert await table_ids(host) == ["ext-news"]
    # Nor by adding a copy of it (same id, same mapping: the table answers as for a new one) and removing that.
    copy = ag.Subscription(
        id="ext-news", typeSubscription=ag.TypeSubscription(topic_type="news", agent_type="ext_echo")
    )
    await stub.AddSubscription(ag.AddSubscriptionRequest(subscription=copy), metadata=client("intruder"))
    await stub.RemoveSubscription(ag.RemoveSubscriptionRequest(id="ext-news"), metadata=client("intruder"))
    assert await table_ids(host) == ["ext-news"]
    # Nor by holding the copy when its channel ends.
    await stub.AddSubscription(ag.AddSubscriptionRequest(subscription=copy), metadata=client("intruder"))
    await stub.RegisterAgent(ag.RegisterAgentTypeRequest(type="intruder_t"), metadata=client("intruder"))
    call.cancel()

    async def channel_end_handled() -> bool:
        return not await gateway.registry.workers_for("intruder_t")

    await eventually(channel_end_handled, what="the AutoGen channel's end handled")
    assert await table_ids(host) == ["ext-news"]


async def test_an_autogen_client_removes_its_own_subscriptions(
    ext_host: tuple[GrpcAgentRuntime, Journal], stub: Any
) -> None:
    host, _ = ext_host
    call, _ = await open_channel(stub, "guest")
    own = ag.Subscription(id="guest-sub", typeSubscription=ag.TypeSubscription(topic_type="t", agent_type="guest_t"))
    await stub.AddSubscription(ag.AddSubscriptionRequest(subscription=own), metadata=client("guest"))
    assert await table_ids(host) == ["guest-sub"]
    await stub.RemoveSubscription(ag.RemoveSubscriptionRequest(id="guest-sub"), metadata=client("guest"))
    assert await table_ids(host) == []
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await stub.RemoveSubscription(ag.RemoveSubscriptionRequest(id="guest-sub"), metadata=client("guest"))
    assert caught.value.code() == grpc.StatusCode.NOT_FOUND
    call.cancel()


async def test_an_autogen_client_cannot_register_a_type_an_ext_worker_hosts(
    gateway: Gateway, ext_host: tuple[GrpcAgentRuntime, Journal], stub: Any
) -> None:
    host, journal = ext_host
    call, _ = await open_channel(stub, "squatter")
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await stub.RegisterAgent(ag.RegisterAgentTypeRequest(type="ext_echo"), metadata=client("squatter"))
    assert caught.value.code() == grpc.StatusCode.PERMISSION_DENIED
    assert caught.value.details() == (
        "agent type 'ext_echo' is hosted by ext workers that hold the gateway's token: an AutoGen client, which "
        "sends none, cannot host it too"
    )
    assert await gateway.registry.workers_for("ext_echo") == [(host.worker_id, gateway.gateway_id)]
    # The ext worker keeps all its traffic: every agent of its type is placed on it, none on the AutoGen channel.
    async with worker(f"127.0.0.1:{gateway.port}", token=TOKEN) as caller:
        keys = [f"k{i}" for i in range(24)]
        replies = [
            await caller.send_and_await_response(Ping(text=key), AgentId("ext_echo", key), timeout=10) for key in keys
        ]
    assert [reply.agent for reply in replies] == [f"ext_echo/{key}" for key in keys]
    assert sorted(map(str, journal.created)) == sorted(f"ext_echo/{key}" for key in keys)
    # A type no ext worker hosts is the AutoGen client's to host.
    await stub.RegisterAgent(ag.RegisterAgentTypeRequest(type="guest_t"), metadata=client("squatter"))
    assert [w for w, _ in await gateway.registry.workers_for("guest_t")] != []
    call.cancel()


async def test_an_autogen_client_on_a_loopback_listener_calls_ext_agents_without_the_token(
    ext_host: tuple[GrpcAgentRuntime, Journal], stub: Any
) -> None:
    """What the listener bypasses, as the README says: on loopback (or with the flag) it reaches every agent."""
    host, _ = ext_host
    call, outgoing = await open_channel(stub, "local")
    payload = ag.Payload(
        data_type=host.serializer.type_name(Ping(text="x")),
        data_content_type=JSON_DATA_CONTENT_TYPE,
        data=b'{"text": "hi"}',
    )
    target = ag.AgentId(type="ext_echo", key="k")
    await outgoing.put(ag.Message(request=ag.RpcRequest(request_id="1", target=target, payload=payload)))
    reply: ag.Message = await asyncio.wait_for(call.read(), 15)
    assert reply.response.request_id == "1" and not reply.response.error
    assert Pong.model_validate_json(reply.response.payload.data) == Pong(text="hi", agent="ext_echo/k", count=1)
    call.cancel()


@pytest.mark.parametrize("address", ["0.0.0.0:0", "[::]:0", "gateway.example:50052", "10.0.0.5:50052"])
def test_a_token_and_a_listener_off_loopback_need_the_flag(address: str) -> None:
    with pytest.raises(ValueError, match=f"pass {FLAG}=True \\(--autogen-allow-unauthenticated\\)") as caught:
        Gateway(token=TOKEN, autogen_address=address)
    assert TOKEN not in str(caught.value)


@pytest.mark.parametrize("address", ["127.0.0.1:0", "127.0.0.2:0", "localhost:0", "[::1]:0"])
def test_a_token_and_a_loopback_listener_need_no_flag(address: str, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="ext.runtime.grpc"):
        Gateway(token=TOKEN, autogen_address=address)
    assert caplog.records == []


def test_the_flag_must_be_a_bool() -> None:
    with pytest.raises(TypeError, match=f"{FLAG} must be a bool, got str"):
        Gateway(token=TOKEN, autogen_address="0.0.0.0:0", autogen_allow_unauthenticated="yes")  # type: ignore[arg-type]


def test_without_a_token_every_door_is_open_alike_and_no_flag_is_needed(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="ext.runtime.grpc"):
        Gateway(autogen_address="0.0.0.0:0")
    assert caplog.records == []


def test_the_flag_accepts_the_exposed_listener_with_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    # Constructed, not started: the warning is given when the configuration is accepted, and the test binds nothing
    # off loopback.
    with caplog.at_level(logging.WARNING, logger="ext.runtime.grpc"):
        gateway = Gateway(token=TOKEN, autogen_address="0.0.0.0:0", autogen_allow_unauthenticated=True)
    assert gateway.autogen_port == 0
    assert [(r.levelno, r.name) for r in caplog.records] == [(logging.WARNING, "ext.runtime.grpc._gateway")]
    text = caplog.records[0].getMessage()
    assert "0.0.0.0:0" in text and FLAG in text and "every agent" in text and TOKEN not in text


def test_the_command_refuses_the_exposed_listener_without_the_flag() -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("EXT_GRPC")} | {"EXT_GRPC_GATEWAY_TOKEN": TOKEN}
    command = [sys.executable, "-m", "ext.runtime.grpc", "gateway", "--port", "0", "--autogen-listen", "0.0.0.0:0"]
    # A bounded run: a gateway that started instead would serve until the timeout, and the test fail there.
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 1, done.stderr[-2000:]
    assert done.stdout == ""  # no port announced: nothing was served
    assert "--autogen-allow-unauthenticated" in done.stderr and "not a loopback address" in done.stderr
    assert TOKEN not in done.stderr
