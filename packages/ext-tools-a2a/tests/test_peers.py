"""A2AAgentTool against fasta2a (an independent A2A server), and as an agent on ext's local runtime."""

from __future__ import annotations

import asyncio
from datetime import datetime, timezone
from typing import Any

import pytest
from a2a.server.tasks import TaskUpdater
from a2a.types.a2a_pb2 import Part
from a2a_peers import sdk_agent, serving
from fasta2a import FastA2A, Worker
from fasta2a.broker import InMemoryBroker
from fasta2a.schema import Artifact, Message, Task, TaskIdParams, TaskSendParams, TaskState
from fasta2a.storage import InMemoryStorage

from ext.core import AgentId, CantHandleError
from ext.runtime.local import LocalAgentRuntime
from ext.tools.a2a import A2AAgentTool, A2ARemoteAgent, A2ARequest, A2AResponseError, A2ATaskFailedError


class ShoutWorker(Worker[list[Message]]):  # type: ignore[misc]  # fasta2a ships no type information
    """Answers the upper-cased text as one artifact; fails on 'boom'."""

    def __init__(self, broker: InMemoryBroker, storage: InMemoryStorage[list[Message]]) -> None:
        self.broker = broker
        self.storage = storage

    async def run_task(self, params: TaskSendParams) -> None:
        text = "".join(part.get("text", "") for part in params["message"]["parts"])
        await self.storage.update_task(params["id"], state="working")
        if text == "boom":
            raise RuntimeError("boom")
        artifact = Artifact(artifact_id="shout", parts=[{"text": text.upper()}])
        await self.publish_artifact(params["id"], params["context_id"], artifact)
        await self.storage.update_task(params["id"], state="completed", new_artifacts=[artifact])

    async def cancel_task(self, params: TaskIdParams) -> None:
        await self.storage.update_task(params["id"], state="canceled")

    def build_message_history(self, history: list[Message]) -> list[Any]:
        return list(history)

    def build_artifacts(self, result: Any) -> list[Artifact]:
        return []


class UtcStorage(InMemoryStorage[list[Message]]):  # type: ignore[misc]
    """fasta2a's in-memory storage stamps statuses with a naive local time (`datetime.now().isoformat()`), which
    A2A's JSON form (a protobuf Timestamp, RFC 3339 with an offset) does not allow; this one writes UTC."""

    async def submit_task(self, context_id: str, message: Message) -> Task:
        return _utc(await super().submit_task(context_id, message))

    async def update_task(
        self, task_id: str, state: TaskState, new_artifacts: Any = None, new_messages: Any = None
    ) -> Task:
        return _utc(await super().update_task(task_id, state, new_artifacts, new_messages))


def _utc(task: Task) -> Task:
    task["status"]["timestamp"] = datetime.now(timezone.utc).isoformat().replace("+00:00", "Z")
    return task


def fasta2a_app(base: str, storage: InMemoryStorage[list[Message]] | None = None) -> FastA2A:
    storage = storage if storage is not None else UtcStorage()
    broker = InMemoryBroker()
    worker = ShoutWorker(broker, storage)

    async def lifespan(app: FastA2A) -> Any:
        async with app.task_manager, worker.run():
            yield

    from contextlib import asynccontextmanager

    return FastA2A(
        storage=storage, broker=broker, name="Shouter", url=base + "/", lifespan=asynccontextmanager(lifespan)
    )


@pytest.mark.parametrize("streaming", [True, False], ids=["stream", "send"])
async def test_a_fasta2a_agent(streaming: bool) -> None:
    async with serving(fasta2a_app, lifespan="on") as base:
        tool = await A2AAgentTool.from_url(base, streaming=streaming, poll_interval=0.05)
        async with tool:
            assert tool.name == "Shouter"
            reply = await tool.send("hello")
            assert (reply.text, reply.state) == ("HELLO", "completed")
            with pytest.raises(A2ATaskFailedError) as info:
                await tool.send("boom")
            assert info.value.state == "failed"


async def test_an_answer_that_is_not_valid_a2a_is_a_clear_error() -> None:
    # fasta2a's own InMemoryStorage: its naive timestamps are refused by the SDK's protobuf reader.
    async with (
        serving(lambda base: fasta2a_app(base, InMemoryStorage()), lifespan="on") as base,
        A2AAgentTool(base, "shout", "Shout.", timeout=10) as tool,
    ):
        with pytest.raises(A2AResponseError, match=r"not valid A2A: .*timestamp"):
            await tool.send("hello")


async def test_a_remote_agent_on_the_runtime_answers_rpcs() -> None:
    async def ask(text: str, updater: TaskUpdater) -> None:
        if text == "order":
            await updater.requires_input(updater.new_agent_message([Part(text="what?")]))
            return
        await updater.add_artifact([Part(text=f"got {text}")], artifact_id="answer")
        await updater.complete()

    async with sdk_agent(ask) as (base, _), A2AAgentTool(base, "echo", "Echo.") as tool:
        runtime = LocalAgentRuntime()
        await runtime.start()
        try:
            await runtime.register_agent_factory("remote", A2ARemoteAgent.factory(tool))
            plain = await runtime.send_and_await_response("tea", AgentId("remote", "k"), timeout=10)
            asked = await runtime.send_and_await_response(A2ARequest(text="order"), AgentId("remote", "k"), timeout=10)
            assert plain == "got tea"
            assert asked.state == "input-required" and asked.text == "what?"
            answered = await runtime.send_and_await_response(
                A2ARequest(text="cake", task_id=asked.task_id, context_id=asked.context_id),
                AgentId("remote", "k"),
                timeout=10,
            )
            assert (answered.text, answered.task_id) == ("got cake", asked.task_id)
            with pytest.raises(CantHandleError, match="takes a str or an A2ARequest"):
                await runtime.send_and_await_response(42, AgentId("remote", "k"), timeout=10)
        finally:
            await runtime.stop()


async def test_a_runtime_rpc_timeout_cancels_the_remote_task() -> None:
    never = asyncio.Event()

    async def wait(text: str, updater: TaskUpdater) -> None:
        await updater.add_artifact([Part(text="...")], artifact_id="answer")
        await never.wait()

    async with sdk_agent(wait) as (base, executor):
        async with A2AAgentTool(base, "echo", "Echo.") as tool:
            runtime = LocalAgentRuntime()
            await runtime.start()
            try:
                await runtime.register_agent_factory("remote", A2ARemoteAgent.factory(tool))
                with pytest.raises(TimeoutError):
                    await runtime.send_and_await_response("x", AgentId("remote", "k"), timeout=1.0)
                # The cancel is sent by the agent's handler as it unwinds; wait for it without a clock.
                await asyncio.wait_for(executor.cancel_seen.wait(), 10)
            finally:
                await runtime.stop()
        assert len(executor.cancelled) == 1
