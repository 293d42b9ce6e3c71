"""`tool_choice` on each turn's first model call only, `on_event` seeing a hosted agent's events, and the tokens in
an `AgentReply`: what the README's first command (tools/demo/demo.py) relies on."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from ext_agent_support import KEY, add_tool, openai_client

from ext.agent import AgentEvent, AgentReply, AgentRequest, ChatAgent, ToolFinished, ToolStarted
from ext.core import AgentId, ConfigurationError
from ext.runtime.local import LocalAgentRuntime
from ext.testing.servers import OpenAIServer, Reply, ToolCallSpec


@pytest.fixture
async def server() -> AsyncIterator[OpenAIServer]:
    async with OpenAIServer(api_key=KEY) as srv:
        yield srv


async def test_tool_choice_applies_to_the_first_model_call_of_a_turn_only(server: OpenAIServer) -> None:
    server.enqueue(Reply(tool_calls=[ToolCallSpec("add", {"a": 1, "b": 2})]), Reply(text="3"), Reply(text="ok"))
    agent = ChatAgent(openai_client(server.base_url), tools=[add_tool()], tool_choice="required")
    session = agent.session("s")
    assert (await session.run("1 + 2?")).output == "3"
    assert (await session.run("thanks")).output == "ok"
    choices = [r.json.get("tool_choice") for r in server.requests if isinstance(r.json, dict)]
    assert choices == ["required", "auto", "required"]  # the tool loop's later call may answer


async def test_a_hosted_agent_reports_its_events_and_its_tokens(server: OpenAIServer) -> None:
    server.enqueue(
        Reply(tool_calls=[ToolCallSpec("add", {"a": 1, "b": 2})], prompt_tokens=30, completion_tokens=7),
        Reply(text="3", prompt_tokens=41, completion_tokens=2),
    )
    seen: list[AgentEvent[Any]] = []
    agent = ChatAgent(openai_client(server.base_url), name="adder", tools=[add_tool()], on_event=seen.append)
    async with LocalAgentRuntime() as runtime:
        await agent.register(runtime)
        reply = await runtime.send_and_await_response(AgentRequest(input="1 + 2?"), AgentId("adder", "k"), timeout=10)
    assert isinstance(reply, AgentReply) and reply.text == "3"
    assert (reply.prompt_tokens, reply.completion_tokens) == (71, 9)  # summed over the turn's two model calls
    assert [type(e) for e in seen] == [ToolStarted, ToolFinished]
    assert isinstance(seen[1], ToolFinished) and seen[1].result.content == "3"


def test_bad_tool_choice_and_on_event_are_refused(server: OpenAIServer) -> None:
    with pytest.raises(ConfigurationError, match="tool_choice must be auto, required, none"):
        ChatAgent(openai_client(server.base_url), tool_choice="")
    with pytest.raises(ConfigurationError, match="on_event must be a callable"):
        ChatAgent(openai_client(server.base_url), on_event="print")  # type: ignore[call-overload]
