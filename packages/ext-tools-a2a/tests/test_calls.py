"""A2AAgentTool against the SDK's own server, over each transport, streamed and not."""

from __future__ import annotations

import asyncio

import pytest
from a2a.helpers.proto_helpers import new_text_message
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.tasks import TaskUpdater
from a2a.types.a2a_pb2 import Part, Role
from a2a_peers import bound_socket, card_for, echo, sdk_agent, sdk_app, serving

from ext.core import CancellationToken, ConfigurationError, ToolArgumentsError
from ext.tools.a2a import (
    A2AAgentTool,
    A2ACardMismatchError,
    A2ARefusedError,
    A2ATaskFailedError,
    A2ATimeoutError,
    A2AUnreachableError,
)

BINDINGS = [("JSONRPC",), ("HTTP+JSON",)]


@pytest.mark.parametrize("bindings", BINDINGS, ids=["jsonrpc", "http-json"])
@pytest.mark.parametrize("streaming", [True, False], ids=["stream", "send"])
async def test_send_follows_the_task_to_its_end(bindings: tuple[str, ...], streaming: bool) -> None:
    async with (
        sdk_agent(bindings=bindings) as (base, _),
        A2AAgentTool(base, "echo", "Echo.", streaming=streaming) as tool,
    ):
        reply = await tool.send("hello there")
    assert reply.text == "echo: hello there"
    assert reply.state == "completed"
    assert reply.task_id and reply.context_id


@pytest.mark.parametrize("bindings", BINDINGS, ids=["jsonrpc", "http-json"])
async def test_stream_yields_the_chunks_as_they_come(bindings: tuple[str, ...]) -> None:
    async with sdk_agent(bindings=bindings) as (base, _), A2AAgentTool(base, "echo", "Echo.") as tool:
        deltas = [delta async for delta in tool.stream("abcdef")]
    assert len(deltas) == 3
    assert "".join(deltas) == "echo: abcdef"


async def test_from_url_names_the_tool_from_the_card_and_runs_as_a_tool() -> None:
    async with sdk_agent(name="Echo agent v2") as (base, _), await A2AAgentTool.from_url(base) as tool:
        assert tool.name == "Echo_agent_v2"
        assert tool.description == "Echoes what it is told."
        assert tool.schema["parameters"]["required"] == ["message"]
        assert await tool.run_json({"message": "x"}) == "echo: x"
        with pytest.raises(ToolArgumentsError, match="'message' must be a string"):
            await tool.run_json({"message": 3})
        with pytest.raises(ToolArgumentsError, match="takes only 'message'"):
            await tool.run_json({"message": "x", "other": 1})


@pytest.mark.parametrize(
    ("card_options", "tool_options", "match"),
    [
        ({}, {"expected_name": "Other"}, "named 'Echo agent', expected 'Other'"),
        ({}, {"required_skills": ["translate"]}, "no skill 'translate'"),
        ({"streaming": False}, {"streaming": True}, "does not stream"),
        ({"bindings": ("GRPC",)}, {}, "offers no transport this tool speaks"),
    ],
    ids=["name", "skill", "streaming", "transport"],
)
async def test_a_card_that_does_not_match_is_refused_before_any_message(
    card_options: dict[str, object], tool_options: dict[str, object], match: str
) -> None:
    async with sdk_agent(echo, **card_options) as (base, executor):
        async with A2AAgentTool(base, "echo", "Echo.", **tool_options) as tool:  # type: ignore[arg-type]
            with pytest.raises(A2ACardMismatchError, match=match):
                await tool.send("hello")
        assert not executor.started.is_set()


async def test_a_failed_task_raises_with_the_agents_message() -> None:
    async def fail(text: str, updater: TaskUpdater) -> None:
        await updater.failed(updater.new_agent_message([Part(text="the disk is full")]))

    async with sdk_agent(fail) as (base, _), A2AAgentTool(base, "echo", "Echo.") as tool:
        with pytest.raises(A2ATaskFailedError, match="failed: the disk is full") as info:
            await tool.send("hello")
    assert info.value.state == "failed"
    assert info.value.agent_message == "the disk is full"
    assert info.value.task_id


async def test_a_rejected_task_is_refused() -> None:
    async def reject(text: str, updater: TaskUpdater) -> None:
        await updater.reject(updater.new_agent_message([Part(text="not my job")]))

    async with sdk_agent(reject) as (base, _), A2AAgentTool(base, "echo", "Echo.") as tool:
        with pytest.raises(A2ARefusedError, match=r"rejected .*not my job"):
            await tool.send("hello")


async def test_an_unknown_task_id_is_refused_by_the_agent() -> None:
    async with sdk_agent() as (base, _), A2AAgentTool(base, "echo", "Echo.") as tool:
        with pytest.raises(A2ARefusedError, match=r"TaskNotFound|not found"):
            await tool.send("hello", task_id="no-such-task")


async def test_an_agent_that_is_not_listening_is_unreachable() -> None:
    sock = bound_socket()
    port = sock.getsockname()[1]
    sock.close()  # the port is now closed: connections are refused
    async with A2AAgentTool(f"http://127.0.0.1:{port}", "echo", "Echo.") as tool:
        with pytest.raises(A2AUnreachableError, match=f"127.0.0.1:{port}"):
            await tool.send("hello")


async def test_a_peer_that_stops_answering_mid_stream_times_out_and_its_task_is_cancelled() -> None:
    never = asyncio.Event()

    async def stall(text: str, updater: TaskUpdater) -> None:
        await updater.add_artifact([Part(text="first ")], artifact_id="answer")
        await never.wait()

    async with sdk_agent(stall) as (base, executor):
        async with A2AAgentTool(base, "echo", "Echo.", idle_timeout=0.5, timeout=30) as tool:
            seen: list[str] = []
            with pytest.raises(A2ATimeoutError, match=r"idle_timeout=0.5"):
                async for delta in tool.stream("hello"):
                    seen.append(delta)
        assert seen == ["first "]
        assert len(executor.cancelled) == 1


async def test_the_whole_call_is_bounded_by_timeout() -> None:
    async def slow(text: str, updater: TaskUpdater) -> None:
        # Always talking, never done: only the whole-call timeout can end this.
        for i in range(10_000):
            await updater.add_artifact([Part(text=".")], artifact_id="answer", append=i > 0)
            await asyncio.sleep(0.05)

    async with sdk_agent(slow) as (base, executor):
        async with A2AAgentTool(base, "echo", "Echo.", idle_timeout=5, timeout=0.6) as tool:
            with pytest.raises(A2ATimeoutError, match=r"timeout=0.6"):
                await tool.send("hello")
        assert len(executor.cancelled) == 1


async def test_a_cancellation_token_cancels_the_remote_task() -> None:
    never = asyncio.Event()

    async def wait(text: str, updater: TaskUpdater) -> None:
        await updater.add_artifact([Part(text="working on it")], artifact_id="answer")
        await never.wait()

    async with sdk_agent(wait) as (base, executor):
        async with A2AAgentTool(base, "echo", "Echo.") as tool:
            token = CancellationToken()
            seen: list[str] = []
            with pytest.raises(asyncio.CancelledError):
                async for delta in tool.stream("hello", cancellation_token=token):
                    seen.append(delta)
                    token.cancel()  # the task id is known once the first chunk is in
        assert seen == ["working on it"]
        assert len(executor.cancelled) == 1


async def test_input_required_ends_the_call_and_the_task_continues() -> None:
    async def ask(text: str, updater: TaskUpdater) -> None:
        if text == "book a table":
            await updater.requires_input(updater.new_agent_message([Part(text="for how many?")]))
        else:
            await updater.add_artifact([Part(text=f"booked for {text}")], artifact_id="answer")
            await updater.complete()

    async with sdk_agent(ask) as (base, _), A2AAgentTool(base, "echo", "Echo.") as tool:
        first = await tool.send("book a table")
        assert (first.state, first.text) == ("input-required", "for how many?")
        second = await tool.send("4", task_id=first.task_id, context_id=first.context_id)
    assert (second.state, second.text, second.task_id) == ("completed", "booked for 4", first.task_id)


class PlainExecutor(AgentExecutor):
    """Answers with a message, no task."""

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        await event_queue.enqueue_event(new_text_message("plain " + context.get_user_input(), role=Role.ROLE_AGENT))

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        raise AssertionError("not cancellable")


async def test_a_plain_message_answer() -> None:
    async with (
        serving(lambda b: sdk_app(PlainExecutor(), card_for(b))) as base,
        A2AAgentTool(base, "echo", "Echo.") as tool,
    ):
        reply = await tool.send("hi")
    assert (reply.text, reply.state, reply.task_id) == ("plain hi", "message", "")


def test_bad_configuration_is_refused_before_any_request() -> None:
    with pytest.raises(ConfigurationError, match="url must be an http"):
        A2AAgentTool("ftp://x", "echo", "Echo.")
    with pytest.raises(ConfigurationError):
        A2AAgentTool("http://127.0.0.1:1", "bad name!", "Echo.")


async def test_dump_and_load_round_trip() -> None:
    tool = A2AAgentTool("http://127.0.0.1:9/", "echo", "Echo.", required_skills=["echo"], timeout=3)
    loaded = A2AAgentTool.load_component(tool.dump_component())
    assert loaded.dump_component() == tool.dump_component()
    assert loaded.url == "http://127.0.0.1:9"
