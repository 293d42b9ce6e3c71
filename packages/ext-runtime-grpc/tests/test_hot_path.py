"""What the RPC hot path's shortcuts must keep: deadlines held by one timer, handlers started in the reader's
task, and cached CloudEvent templates."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import grpc
import pytest
import pytest_asyncio
from google.protobuf.wrappers_pb2 import StringValue
from pydantic import BaseModel

from ext.core import AgentId, MessageContext, RoutedAgent, message_handler
from ext.runtime.grpc import CloudEvent, Gateway, GrpcAgentRuntime, ProtobufMessageSerializer
from ext.runtime.grpc.protos import agent_worker_pb2 as pb
from ext.runtime.grpc.protos import agent_worker_pb2_grpc as pb_grpc
from ext.testing.runtime_agents import MESSAGE_TYPES, EchoAgent, Journal, Ping, Pong, Slow

WAIT = 15.0


def _worker(gateway: Gateway) -> GrpcAgentRuntime:
    runtime = GrpcAgentRuntime(f"127.0.0.1:{gateway.port}", token_env=None, connect_timeout=5, stop_timeout=2)
    for message_type in MESSAGE_TYPES:
        runtime.register_message_type(message_type)
    return runtime


@pytest_asyncio.fixture
async def pair() -> AsyncIterator[tuple[GrpcAgentRuntime, GrpcAgentRuntime, Journal]]:
    """A caller and a host running `EchoAgent`s as type "echo", on one in-process gateway."""
    gateway = Gateway(port=0, shutdown_grace=0)
    await gateway.start()
    journal = Journal()
    try:
        async with _worker(gateway) as caller, _worker(gateway) as host:
            await host.register_agent_factory("echo", lambda aid, rt: EchoAgent(aid, rt, journal))
            yield caller, host, journal
    finally:
        await gateway.stop()


async def test_a_shorter_deadline_set_later_expires_first(
    pair: tuple[GrpcAgentRuntime, GrpcAgentRuntime, Journal],
) -> None:
    caller, _, journal = pair
    long = asyncio.ensure_future(caller.send_and_await_response(Slow(seconds=30), AgentId("echo", "long"), 20))
    await asyncio.wait_for(journal.slow_started.wait(), WAIT)
    with pytest.raises(TimeoutError, match="echo/short"):
        await asyncio.wait_for(caller.send_and_await_response(Slow(seconds=30), AgentId("echo", "short"), 0.2), WAIT)
    assert not long.done()
    long.cancel()
    with pytest.raises(asyncio.CancelledError):
        await long
    # Both remote handlers were cancelled (the long one by the caller's cancellation).
    reply = await asyncio.wait_for(caller.send_and_await_response(Ping(text="after"), AgentId("echo", "long")), WAIT)
    assert reply.text == "after"
    assert sorted(str(a) for a in journal.cancelled) == ["echo/long", "echo/short"]


async def test_answered_rpcs_leave_no_deadlines_behind(
    pair: tuple[GrpcAgentRuntime, GrpcAgentRuntime, Journal],
) -> None:
    caller, _, _ = pair
    for i in range(600):
        reply = await asyncio.wait_for(
            caller.send_and_await_response(Ping(text=str(i)), AgentId("echo", "a"), 60), WAIT
        )
        assert reply.count == i + 1
    # Answered RPCs' deadline entries are swept as they accumulate: what is left is bounded, not one per RPC.
    assert len(caller._sender.deadlines) <= 257


async def test_no_deadline_waits_for_the_answer(pair: tuple[GrpcAgentRuntime, GrpcAgentRuntime, Journal]) -> None:
    caller, _, _ = pair
    reply = await asyncio.wait_for(caller.send_and_await_response(Ping(text="x"), AgentId("echo", "n"), None), WAIT)
    assert reply.text == "x"


async def test_other_agents_are_served_while_a_handler_waits(
    pair: tuple[GrpcAgentRuntime, GrpcAgentRuntime, Journal],
) -> None:
    caller, host, journal = pair
    slow = asyncio.ensure_future(caller.send_and_await_response(Slow(seconds=30), AgentId("echo", "busy"), 10))
    await asyncio.wait_for(journal.slow_started.wait(), WAIT)
    # The host's stream reader ran the slow handler's first step, then handed the stream on: it still reads.
    for key in ("a", "b", "c"):
        reply = await asyncio.wait_for(caller.send_and_await_response(Ping(text=key), AgentId("echo", key)), WAIT)
        assert (reply.text, reply.agent) == (key, f"echo/{key}")
    assert not slow.done()
    slow.cancel()
    with pytest.raises(asyncio.CancelledError):
        await slow
    assert sorted(str(a) for a in await host.local_agents()) == ["echo/a", "echo/b", "echo/busy", "echo/c"]


class Countdown(BaseModel):
    n: int


class Chain(RoutedAgent):
    """Answers `Countdown(n)` by asking agent `n - 1` for `n - 1`: every handler but the last waits on an RPC."""

    @message_handler
    async def on_countdown(self, message: Countdown, ctx: MessageContext) -> int:
        if message.n == 0:
            return 0
        below = await self.send_and_await_response(Countdown(n=message.n - 1), AgentId("chain", str(message.n - 1)), 10)
        assert isinstance(below, int)
        return below + 1


async def test_handlers_that_wait_on_rpcs_to_the_same_worker(
    pair: tuple[GrpcAgentRuntime, GrpcAgentRuntime, Journal],
) -> None:
    caller, host, _ = pair
    await host.register_agent_factory("chain", Chain)
    caller.register_message_type(Countdown)
    assert await asyncio.wait_for(caller.send_and_await_response(Countdown(n=6), AgentId("chain", "6")), WAIT) == 6
    assert sorted(a.key for a in await host.local_agents() if a.type == "chain") == [str(n) for n in range(7)]


async def test_answers_queued_behind_a_write_in_flight(
    pair: tuple[GrpcAgentRuntime, GrpcAgentRuntime, Journal],
) -> None:
    """Many RPCs at once: answers that queue behind a write finish their handler without waiting."""
    caller, _, _ = pair
    calls = [
        caller.send_and_await_response(StringValue(value=str(i)), AgentId("echo", f"k{i % 5}")) for i in range(200)
    ]
    results = await asyncio.wait_for(asyncio.gather(*calls, return_exceptions=True), WAIT)
    # EchoAgent has no StringValue handler: every call fails the same way, each with its own answer.
    assert len(results) == 200
    assert all(type(r).__name__ == "CantHandleError" and "StringValue" in str(r) for r in results)
    pongs = [caller.send_and_await_response(Ping(text=str(i)), AgentId("echo", f"k{i % 5}")) for i in range(200)]
    replies = await asyncio.wait_for(asyncio.gather(*pongs), WAIT)
    assert [r.text for r in replies] == [str(i) for i in range(200)]
    assert all(isinstance(r, Pong) for r in replies)


# --- serializer templates -------------------------------------------------------------------------------


class Order(BaseModel):
    item: str


def test_templated_event_equals_the_general_one() -> None:
    serializer = ProtobufMessageSerializer()
    serializer.register(Order, "shop.Order")
    for message in (StringValue(value="v"), Order(item="tea"), {"k": [1, 2]}, "text", None):
        for _ in range(2):  # the second time from the cached template
            fast = CloudEvent()
            serializer.fill_cloud_event(fast, message, "src/a")
            general = serializer.to_cloud_event(message, "src/a", id=fast.id, attributes={})
            assert fast == general
            assert serializer.from_cloud_event(CloudEvent.FromString(fast.SerializeToString())) == message


def test_filling_keeps_what_the_event_already_held() -> None:
    serializer = ProtobufMessageSerializer()
    for _ in range(2):  # the second time from the cached template
        event = CloudEvent()
        event.attributes["traceparent"].ce_string = "00-abc-def-01"
        serializer.fill_cloud_event(event, StringValue(value="v"), "src/a")
        assert event.attributes["traceparent"].ce_string == "00-abc-def-01"
        assert serializer.from_cloud_event(event, StringValue) == StringValue(value="v")


def test_registering_a_class_again_renames_its_events() -> None:
    serializer = ProtobufMessageSerializer()
    serializer.register(Order, "shop.Order")
    assert serializer.to_cloud_event(Order(item="a"), "s").type == "shop.Order"
    serializer.register(Order, "shop.v2.Order")
    event = serializer.to_cloud_event(Order(item="a"), "s")
    assert event.type == "shop.v2.Order"
    assert serializer.from_cloud_event(event) == Order(item="a")


def test_bad_sources_are_still_refused() -> None:
    serializer = ProtobufMessageSerializer()
    for source in ("", None, 3, ["x"]):
        with pytest.raises(ValueError, match="source"):
            serializer.fill_cloud_event(CloudEvent(), StringValue(value="v"), source)  # type: ignore[arg-type]


def test_exttype_still_wins_over_the_type_url() -> None:
    serializer = ProtobufMessageSerializer()
    event = serializer.to_cloud_event(StringValue(value="v"), "s")
    assert serializer.from_cloud_event(event) == StringValue(value="v")
    event.attributes["exttype"].ce_string = "google.protobuf.BytesValue"
    decoded = serializer.from_cloud_event(event)
    assert type(decoded).__name__ == "BytesValue"


async def test_the_size_limit_counts_the_whole_envelope() -> None:
    """The recipient and request id count toward max_message_bytes, not only the payload."""
    gateway = Gateway(port=0, shutdown_grace=0)
    await gateway.start()
    try:
        runtime = GrpcAgentRuntime(f"127.0.0.1:{gateway.port}", token_env=None, max_message_bytes=1024)
        runtime.register_message_type(Ping)
        async with runtime:
            far = AgentId("echo", "k" * 1000)
            with pytest.raises(ValueError, match="max_message_bytes=1024"):
                await runtime.send_and_await_response(Ping(text="small"), far, 5)
            with pytest.raises(ValueError, match="max_message_bytes=1024"):
                await runtime.send_message(Ping(text="small"), far)
            with pytest.raises(ValueError, match="max_message_bytes=1024"):
                await runtime.broadcast(Ping(text="small"), "t" * 1000)
    finally:
        await gateway.stop()


async def test_the_deadline_holds_while_the_request_is_still_being_written() -> None:
    """The request is written before the deadline is set up; a gateway that never reads must still not hang
    the caller (its write may never complete)."""
    release = asyncio.Event()

    class Deaf(pb_grpc.AgentWorkerServicer):
        async def OpenChannel(
            self, request_iterator: object, context: grpc.aio.ServicerContext[object, object]
        ) -> None:
            await context.write(pb.Message(hello=pb.Hello(worker_id="deaf.1", gateway_id="deaf")))
            await release.wait()  # never reads what the worker sends

    server = grpc.aio.server()
    pb_grpc.add_AgentWorkerServicer_to_server(Deaf(), server)  # type: ignore[no-untyped-call]
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    try:
        async with GrpcAgentRuntime(f"127.0.0.1:{port}", token_env=None, stop_timeout=1) as runtime:
            big = StringValue(value="x" * (3 << 20))
            with pytest.raises(TimeoutError, match="echo/a"):
                await asyncio.wait_for(runtime.send_and_await_response(big, AgentId("echo", "a"), 0.5), WAIT)
            with pytest.raises(TimeoutError, match="echo/b"):
                await asyncio.wait_for(
                    runtime.send_and_await_response(StringValue(value="x"), AgentId("echo", "b"), 0.3), WAIT
                )
    finally:
        release.set()
        await server.stop(0)


class Collector(RoutedAgent):
    """Keeps the one-way `StringValue`s it gets; answers RPCs with the payload's length."""

    received: list[str]
    done: asyncio.Event
    wanted: int

    @message_handler
    async def on_text(self, message: StringValue, ctx: MessageContext) -> StringValue | None:
        if ctx.is_rpc:
            return StringValue(value=str(len(message.value)))
        self.received.append(message.value)
        if len(self.received) >= self.wanted:
            self.done.set()
        return None


async def test_bursts_of_large_messages_are_split_to_fit_the_size_limit() -> None:
    """Messages that queue up go out together, but never as a write above the stream's message size limit
    (which would end the stream and lose them all)."""
    gateway = Gateway(port=0, shutdown_grace=0)
    await gateway.start()
    collector_state: dict[str, Any] = {"received": [], "done": asyncio.Event(), "wanted": 6}

    def factory(agent_id: AgentId, runtime: Any) -> Collector:
        agent = Collector(agent_id, runtime)
        agent.received, agent.done, agent.wanted = (
            collector_state["received"],
            collector_state["done"],
            collector_state["wanted"],
        )
        return agent

    try:
        async with _worker(gateway) as caller, _worker(gateway) as host:
            await host.register_agent_factory("collect", factory)
            ids = (caller.worker_id, host.worker_id)
            payloads = [str(i) * (1_500_000) for i in range(6)]  # about 1.5 MB each; 4 MiB limit
            for payload in payloads:
                await caller.send_message(StringValue(value=payload), AgentId("collect", "c"))
            await asyncio.wait_for(collector_state["done"].wait(), WAIT)
            assert collector_state["received"] == payloads
            calls = [caller.send_and_await_response(StringValue(value=p), AgentId("collect", "r")) for p in payloads]
            assert [r.value for r in await asyncio.wait_for(asyncio.gather(*calls), WAIT)] == ["1500000"] * 6
            assert (caller.worker_id, host.worker_id) == ids  # neither stream was lost on the way
    finally:
        await gateway.stop()
