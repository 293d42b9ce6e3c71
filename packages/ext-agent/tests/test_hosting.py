"""A ChatAgent hosted on the in-process runtime (ext-runtime-local): one session per AgentId key, RPCs, topic
messages and approvals through AgentRequest."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from ext_agent_support import KEY, count_lines, counting_tool, openai_client

from ext.agent import AgentReply, AgentRequest, ChatAgent
from ext.core import AgentId, InMemoryStateStore, TopicId
from ext.runtime.local import LocalAgentRuntime
from ext.testing.servers import OpenAIServer, Reply, ToolCallSpec


@pytest.fixture
async def server() -> AsyncIterator[OpenAIServer]:
    async with OpenAIServer(api_key=KEY) as srv:
        yield srv


async def test_one_session_per_key_over_rpcs_and_topic_messages(server: OpenAIServer) -> None:
    server.enqueue(Reply(text="hi A"), Reply(text="hi B"), Reply(text="noted"), Reply(text="A again"))
    store = InMemoryStateStore()
    agent = ChatAgent(openai_client(server.base_url), name="helper", store=store)
    runtime = LocalAgentRuntime()
    await runtime.start()
    try:
        registered = await agent.register(runtime, topics=["news"])
        assert registered.name == "helper"
        a = await runtime.send_and_await_response(AgentRequest(input="I am A"), AgentId("helper", "a"), timeout=10)
        b = await runtime.send_and_await_response("I am B", AgentId("helper", "b"), timeout=10)
        assert isinstance(a, AgentReply) and (a.status, a.text, a.session_id) == ("completed", "hi A", "a")
        assert b == "hi B"
        await runtime.publish("the sky is blue", TopicId("news", "a"))  # reaches AgentId("helper", "a")
        again = await runtime.send_and_await_response("who am I?", AgentId("helper", "a"), timeout=10)
        assert again == "A again"
    finally:
        await runtime.stop()
        await agent.close()
    last = server.decode(server.requests[-1])
    assert [m.text for m in last.messages] == ["I am A", "hi A", "the sky is blue", "noted", "who am I?"]
    assert sorted(k.key for k in await store.keys()) == ["a", "b"]


async def test_approval_through_agent_requests(server: OpenAIServer, tmp_path: Path) -> None:
    counter = tmp_path / "count.txt"
    server.enqueue(Reply(tool_calls=[ToolCallSpec("wire", {"text": "100"}, id="w1")]), Reply(text="sent"))
    agent = ChatAgent(
        openai_client(server.base_url), name="bank", tools=[counting_tool("wire", counter)], require_approval=["wire"]
    )
    runtime = LocalAgentRuntime()
    await runtime.start()
    try:
        await agent.register(runtime)
        held = await runtime.send_and_await_response(AgentRequest(input="pay"), AgentId("bank", "k"), timeout=10)
        assert isinstance(held, AgentReply) and held.status == "awaiting_approval"
        assert [(p.call_id, p.name, p.arguments) for p in held.pending] == [("w1", "wire", '{"text":"100"}')]
        assert count_lines(counter, "wire") == 0
        done = await runtime.send_and_await_response(AgentRequest(approve=["w1"]), AgentId("bank", "k"), timeout=10)
        assert isinstance(done, AgentReply) and (done.status, done.output) == ("completed", "sent")
    finally:
        await runtime.stop()
        await agent.close()
    assert count_lines(counter, "wire") == 1
