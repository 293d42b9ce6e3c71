"""A ChatAgent (on ext-testing's loopback OpenAI server) and an agent on ext's runtime, served over A2A and
called with ext-tools-a2a; held tool calls become input-required turns."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from a2a_hosting_support import serving

from ext.agent import ChatAgent
from ext.core import AgentId, BaseAgent, FunctionTool, InMemoryStateStore, MessageContext
from ext.hosting.a2a import RuntimeResponder, a2a_app
from ext.models.openai import OpenAIChatCompletionClient
from ext.runtime.local import LocalAgentRuntime
from ext.testing.servers import OpenAIServer, Reply, ToolCallSpec
from ext.tools.a2a import A2AAgentTool

KEY = "sk-a2a-test"


@pytest.fixture
async def server() -> AsyncIterator[OpenAIServer]:
    async with OpenAIServer(api_key=KEY) as srv:
        yield srv


def client(base_url: str) -> OpenAIChatCompletionClient:
    return OpenAIChatCompletionClient(
        "gpt-4o-mini", base_url=base_url + "/v1", api_key=KEY, bundled_encodings=False, max_retries=0
    )


async def test_a_chat_agent_with_its_tools_on_the_card_and_a_conversation(server: OpenAIServer) -> None:
    server.enqueue(Reply(text="Hello Ada"), Reply(text="You are Ada"))

    def add(a: int, b: int) -> int:
        return a + b

    agent = ChatAgent(
        client(server.base_url),
        name="helper",
        description="Helps.",
        tools=[FunctionTool(add, description="Add two integers.")],
        store=InMemoryStateStore(),
    )
    async with agent, serving(lambda base: a2a_app(agent, url=base)) as base:
        tool = await A2AAgentTool.from_url(base, required_skills=["add"])
        async with tool:
            card = await tool.card()
            assert (card.name, card.description) == ("helper", "Helps.")
            assert [s.id for s in card.skills] == ["chat", "add"]
            first = await tool.send("I am Ada")
            second = await tool.send("Who am I?", context_id=first.context_id)
    assert (first.text, second.text) == ("Hello Ada", "You are Ada")
    last = server.decode(server.requests[-1])
    assert [m.text for m in last.messages] == ["I am Ada", "Hello Ada", "Who am I?"]


async def test_a_held_tool_call_is_an_input_required_turn(server: OpenAIServer, tmp_path: Path) -> None:
    wired: list[str] = []

    def wire(amount: str) -> str:
        wired.append(amount)
        return "wired"

    server.enqueue(
        Reply(tool_calls=[ToolCallSpec("wire", {"amount": "100"}, id="w1")]),
        Reply(text="sent"),
        Reply(tool_calls=[ToolCallSpec("wire", {"amount": "999"}, id="w2")]),
        Reply(text="not sent"),
    )
    agent = ChatAgent(
        client(server.base_url),
        name="bank",
        tools=[FunctionTool(wire, description="Wire money.")],
        require_approval=["wire"],
        store=InMemoryStateStore(),
    )
    async with (
        agent,
        serving(lambda base: a2a_app(agent, url=base)) as base,
        A2AAgentTool(base, "bank", "Bank.") as tool,
    ):
        asked = await tool.send("wire 100")
        assert asked.state == "input-required"
        assert "wire(" in asked.text and "100" in asked.text
        assert wired == []
        done = await tool.send("approve", task_id=asked.task_id, context_id=asked.context_id)
        assert (done.state, done.text, wired) == ("completed", "sent", ["100"])
        asked_again = await tool.send("wire 999", context_id=asked.context_id)
        refused = await tool.send("no way", task_id=asked_again.task_id, context_id=asked.context_id)
        assert (refused.state, refused.text, wired) == ("completed", "not sent", ["100"])


class Greeter(BaseAgent):
    async def on_message(self, message: object, ctx: MessageContext) -> str:
        return f"hello {message} from {self.id.key}"


async def test_an_agent_on_the_runtime() -> None:
    runtime = LocalAgentRuntime()
    await runtime.start()
    try:
        await runtime.register_agent_factory("greeter", Greeter)
        responder = RuntimeResponder(runtime, "greeter", timeout=10)
        app = lambda base: a2a_app(responder, name="greeter", url=base)  # noqa: E731
        async with serving(app) as base, A2AAgentTool(base, "greeter", "Greets.") as tool:
            reply = await tool.send("Ada")
        assert reply.text == f"hello Ada from {reply.context_id}"
        assert AgentId("greeter", reply.context_id) in await runtime.list_agents("greeter")
    finally:
        await runtime.stop()
