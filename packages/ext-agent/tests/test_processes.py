"""Sessions across real processes: continued in a second process, approved after the first was killed, and a turn
resumed after a SIGKILL between two tool calls (`agent_process.py` is the other process; the loopback OpenAI
server runs here, in the test process)."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from ext_agent_support import KEY, count_lines, openai_client

from ext.agent import AgentReply, AgentRequest, ChatAgent
from ext.core import AgentId, FunctionExecutionResultMessage, FunctionTool, StateConflictError
from ext.redis import RedisStateStore
from ext.runtime.grpc import GrpcAgentRuntime, LocalCluster
from ext.testing.redis import RedisServer
from ext.testing.servers import OpenAIServer, Reply, ToolCallSpec

HERE = Path(__file__).resolve().parent
TIMEOUT = 60.0


class Child:
    """`agent_process.py` in its own process, read line by line (JSON)."""

    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self.process = process
        self.lines: list[dict[str, Any]] = []

    @classmethod
    async def start(cls, *args: str, env: dict[str, str] | None = None) -> Child:
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            str(HERE / "agent_process.py"),
            *args,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env={**os.environ, **(env or {})},
        )
        return cls(process)

    async def until(self, event: str, **match: Any) -> dict[str, Any]:
        """The line with `event` (and the `match` fields), read already or read until it comes; fails with the
        child's stderr when the process ends first."""
        assert self.process.stdout is not None
        for seen in self.lines:
            if seen["event"] == event and all(seen.get(k) == v for k, v in match.items()):
                return seen
        while True:
            try:
                raw = await asyncio.wait_for(self.process.stdout.readline(), TIMEOUT)
            except asyncio.TimeoutError:
                raise AssertionError(f"no {event!r} from the agent process within {TIMEOUT}s: {self.lines}") from None
            if not raw:
                await self.process.wait()
                assert self.process.stderr is not None
                err = (await self.process.stderr.read()).decode()[-3000:]
                raise AssertionError(f"the agent process ended before {event!r}: {self.lines}\n{err}")
            line: dict[str, Any] = json.loads(raw)
            self.lines.append(line)
            if line["event"] == event and all(line.get(k) == v for k, v in match.items()):
                return line

    async def failure(self) -> dict[str, Any]:
        error = await self.until("error")
        assert await asyncio.wait_for(self.process.wait(), TIMEOUT) == 3
        return error

    async def finish(self) -> dict[str, Any]:
        result = await self.until("result")
        assert await asyncio.wait_for(self.process.wait(), TIMEOUT) == 0
        return result

    async def kill(self) -> None:
        if self.process.returncode is None:
            self.process.send_signal(signal.SIGKILL)
        await self.process.wait()
        assert self.process.returncode == -signal.SIGKILL or self.process.returncode == 0


@pytest.fixture
async def server() -> AsyncIterator[OpenAIServer]:
    async with OpenAIServer(api_key=KEY) as srv:
        yield srv


async def test_a_session_continues_in_a_second_process(server: OpenAIServer, tmp_path: Path) -> None:
    store = str(tmp_path / "sessions")  # FileStateStore: several processes of one machine
    server.enqueue(Reply(text="Nice to meet you, Ada."), Reply(text="You are Ada."))
    first = await Child.start(server.base_url, store, "chat-7", "run", "My name is Ada.")
    assert (await first.finish())["status"] == "completed"
    second = await Child.start(server.base_url, store, "chat-7", "run", "What is my name?")
    result = await second.finish()
    assert result["text"] == "You are Ada." and result["version"] > 0
    sent = server.decode(server.requests[1])
    assert [(m.role, m.text) for m in sent.messages] == [
        ("user", "My name is Ada."),
        ("assistant", "Nice to meet you, Ada."),
        ("user", "What is my name?"),
    ]


async def test_an_approval_given_after_the_first_process_was_killed(
    server: OpenAIServer, redis_server: RedisServer, tmp_path: Path
) -> None:
    counter = tmp_path / "count.txt"
    env = {"COUNTER": str(counter), "WAIT_AFTER": "1"}
    server.enqueue(
        Reply(tool_calls=[ToolCallSpec("charge", {"text": "42 EUR"}, id="pay-1")]),
        Reply(text="Charged 42 EUR."),
    )
    first = await Child.start(server.base_url, redis_server.url, "order-9", "run", "charge the order", env=env)
    held = await first.until("result")
    assert held["status"] == "awaiting_approval" and held["pending"] == ["pay-1"]
    await first.until("waiting")
    await first.kill()  # the process dies while the call waits for a person
    assert count_lines(counter, "charge") == 0

    second = await Child.start(
        server.base_url, redis_server.url, "order-9", "approve", "pay-1", env={"COUNTER": str(counter)}
    )
    result = await second.finish()
    assert result["status"] == "completed" and result["text"] == "Charged 42 EUR."
    lines = counter.read_text().split()
    assert lines == ["charge", str(second.process.pid)]  # ran once, in the second process
    last = server.decode(server.requests[-1]).messages[-1]
    assert last.tool_results[0].call_id == "pay-1" and last.tool_results[0].content == "charge did 42 EUR"


async def test_a_turn_killed_between_two_tool_calls_resumes_without_repeating_the_finished_one(
    server: OpenAIServer, redis_server: RedisServer, tmp_path: Path
) -> None:
    counter = tmp_path / "count.txt"
    server.enqueue(
        Reply(
            tool_calls=[
                ToolCallSpec("alpha", {"text": "one"}, id="a-1"),
                ToolCallSpec("beta", {"text": "two"}, id="b-1"),
            ]
        ),
        Reply(text="Both done."),
    )
    first = await Child.start(
        server.base_url,
        redis_server.url,
        "crash-1",
        "run",
        "do both",
        env={"COUNTER": str(counter), "BLOCK_TOOL": "beta"},
    )
    # ToolFinished is reported after the result is saved: alpha's result is in Redis; beta is running.
    await first.until("ToolFinished", name="alpha")
    await first.until("blocked", name="beta")
    await first.kill()
    assert count_lines(counter, "alpha") == 1 and count_lines(counter, "beta") == 1

    store = RedisStateStore(redis_server.url)
    try:
        agent = ChatAgent(openai_client(server.base_url), name="assistant", store=store)
        snapshot = await agent.session("crash-1").snapshot()
        assert snapshot.unfinished
        assert [
            r.call_id for m in snapshot.messages if m.type == "FunctionExecutionResultMessage" for r in m.content
        ] == ["a-1"]
        await agent.close()
    finally:
        await store.close()

    second = await Child.start(server.base_url, redis_server.url, "crash-1", "resume", env={"COUNTER": str(counter)})
    result = await second.finish()
    assert result["status"] == "completed" and result["text"] == "Both done."
    assert count_lines(counter, "alpha") == 1  # the finished call ran exactly once
    assert count_lines(counter, "beta") == 2  # the call in flight when the process died ran again
    assert len(server.requests) == 2  # the model was not asked again for the first answer
    results = [r for m in server.decode(server.requests[1]).messages for r in m.tool_results]
    assert [(r.call_id, r.content) for r in results] == [("a-1", "alpha did one"), ("b-1", "beta did two")]


async def test_a_chat_agent_on_a_grpc_worker_answers_an_rpc_from_another_process(
    server: OpenAIServer, tmp_path: Path
) -> None:
    server.enqueue(Reply(text="Hello from the worker."), Reply(text="Still me."))
    async with LocalCluster(replicas=1) as cluster:
        address = cluster.addresses[0]
        host = await Child.start(server.base_url, str(tmp_path / "sessions"), "-", "host", address)
        try:
            await host.until("ready")
            async with GrpcAgentRuntime(address, token_env=None, connect_timeout=10) as caller:
                caller.register_message_type(AgentRequest)
                caller.register_message_type(AgentReply)
                reply = await caller.send_and_await_response(
                    AgentRequest(input="hi"), AgentId("assistant", "user-1"), timeout=30
                )
                assert isinstance(reply, AgentReply)
                assert (reply.status, reply.text, reply.session_id) == ("completed", "Hello from the worker.", "user-1")
                text = await caller.send_and_await_response("and again", AgentId("assistant", "user-1"), timeout=30)
                assert text == "Still me."
        finally:
            await host.kill()
    second = server.decode(server.requests[1])
    assert [m.text for m in second.messages] == ["hi", "Hello from the worker.", "and again"]  # one session per key


async def test_two_processes_on_one_session_cannot_both_advance_it(
    server: OpenAIServer, redis_server: RedisServer, tmp_path: Path
) -> None:
    """Writer 1 (this process) is inside a tool call; writer 2 (another process) is refused a new turn, then resumes
    the open turn and finishes it; writer 1's next save is then refused, so neither overwrites the other."""
    counter = tmp_path / "count.txt"
    gate = asyncio.Event()
    started = asyncio.Event()

    async def alpha(text: str) -> str:
        """Waits for the test."""
        started.set()
        await gate.wait()
        return "late result"

    server.enqueue(Reply(tool_calls=[ToolCallSpec("alpha", {"text": "x"}, id="a-1")]), Reply(text="finished by two"))
    store = RedisStateStore(redis_server.url)
    agent = ChatAgent(openai_client(server.base_url), name="assistant", store=store, tools=[FunctionTool(alpha)])
    try:
        first = asyncio.ensure_future(agent.session("shared").run("go"))
        await started.wait()
        refused = await Child.start(server.base_url, redis_server.url, "shared", "run", "me too")
        assert "unfinished turn" in (await refused.failure())["message"]
        second = await Child.start(server.base_url, redis_server.url, "shared", "resume", env={"COUNTER": str(counter)})
        assert (await second.finish())["text"] == "finished by two"
        gate.set()
        with pytest.raises(StateConflictError):
            await first
        snapshot = await agent.session("shared").snapshot()
    finally:
        await agent.close()
        await store.close()
    assert count_lines(counter, "alpha") == 1
    results = [r.content for m in snapshot.messages if isinstance(m, FunctionExecutionResultMessage) for r in m.content]
    assert results == ["alpha did x"]  # writer 1's late result was not written over writer 2's turn
    assert not snapshot.unfinished and snapshot.messages[-1].content == "finished by two"
