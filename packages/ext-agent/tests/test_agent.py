"""ChatAgent over the real OpenAI and Anthropic SDK clients on ext-testing's loopback servers (127.0.0.1)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from ext_agent_support import KEY, City, add_tool, count_lines, counting_tool, openai_client

from ext.agent import (
    AgentError,
    ApprovalPendingError,
    ApprovalRequested,
    ChatAgent,
    NothingToResumeError,
    OutputRetry,
    OutputValidationError,
    RunFinished,
    TextDelta,
    ToolFinished,
    ToolStarted,
)
from ext.core import (
    AssistantMessage,
    CancellationToken,
    ConfigurationError,
    FunctionExecutionResultMessage,
    FunctionTool,
    InMemoryStateStore,
    StateConflictError,
    UserMessage,
)
from ext.models.anthropic import AnthropicChatCompletionClient
from ext.pipeline import ChatClientBuilder
from ext.testing.servers import AnthropicServer, OpenAIServer, Reply, ToolCallSpec


@pytest.fixture
async def server() -> AsyncIterator[OpenAIServer]:
    async with OpenAIServer(api_key=KEY) as srv:
        yield srv


def call(name: str, id: str, **arguments: Any) -> ToolCallSpec:
    return ToolCallSpec(name, arguments, id=id)


# --- run ----------------------------------------------------------------------------------------------------


async def test_run_answers_after_a_tool_with_new_messages_usage_and_filled_instructions(server: OpenAIServer) -> None:
    server.enqueue(
        Reply(tool_calls=[call("add", "c1", a=2, b=40)], prompt_tokens=11, completion_tokens=3),
        Reply(text="42", prompt_tokens=20, completion_tokens=2),
    )
    agent = ChatAgent(
        openai_client(server.base_url),
        instructions='You help {user} on {day}. Braces {{like this}} and {"json": 1} stay.',
        tools=[add_tool()],
        variables={"user": "Ada", "day": lambda: "Monday"},
    )
    async with agent:
        result = await agent.run("what is 2 + 40?", variables={"user": "Grace"})
    assert result.status == "completed" and result.output == "42" and result.text == "42"
    assert (result.usage.prompt_tokens, result.usage.completion_tokens) == (31, 5)
    assert result.cost is None  # no pricing middleware in this pipeline
    assert [type(m).__name__ for m in result.messages] == [
        "UserMessage",
        "AssistantMessage",
        "FunctionExecutionResultMessage",
        "AssistantMessage",
    ]
    results = result.messages[2]
    assert isinstance(results, FunctionExecutionResultMessage) and results.content[0].content == "42"
    first = server.decode(server.requests[0])
    assert first.system == ['You help Grace on Monday. Braces {like this} and {"json": 1} stay.']
    assert first.tools == ["add"]
    second = server.decode(server.requests[1])
    assert second.messages[-1].tool_results[0].content == "42"
    # agent.run uses a throwaway session: deleted once the run completed.
    assert await agent.store.keys() == []


async def test_a_missing_instructions_variable_fails_before_any_request(server: OpenAIServer) -> None:
    agent = ChatAgent(openai_client(server.base_url), instructions="You help {user}.")
    session = agent.session("s1")
    with pytest.raises(AgentError, match="variable\\(s\\) user"):
        await session.run("hi")
    assert server.requests == []
    assert (await session.snapshot()).version is None  # nothing written either


async def test_bad_arguments_are_refused_at_construction(server: OpenAIServer) -> None:
    client = openai_client(server.base_url)
    with pytest.raises(ConfigurationError, match="name must be"):
        ChatAgent(client, name="has space")
    with pytest.raises(ConfigurationError, match="output_type must be a pydantic BaseModel"):
        ChatAgent(client, output_type=int)  # type: ignore[type-var]
    with pytest.raises(ConfigurationError, match="require_approval\\['x'\\] must be"):
        ChatAgent(client, require_approval={"x": "yes"})  # type: ignore[dict-item,unused-ignore]
    with pytest.raises(ConfigurationError, match="max_iterations must be an int >= 1"):
        ChatAgent(client, max_iterations=0)
    looped = ChatClientBuilder(client).use_tool_loop([add_tool()]).build()
    with pytest.raises(ConfigurationError, match="has a tool loop"):
        ChatAgent(looped)
    with pytest.raises(ValueError, match="session_id"):
        ChatAgent(client).session("")


async def test_run_stream_yields_text_tool_events_and_the_result_last(server: OpenAIServer) -> None:
    server.enqueue(
        Reply(tool_calls=[call("add", "c1", a=1, b=2)]),
        Reply(text="the sum is 3", chunks=["the ", "sum ", "is 3"]),
    )
    async with ChatAgent(openai_client(server.base_url), tools=[add_tool()]) as agent:
        events = [event async for event in agent.run_stream("1 + 2?")]
    kinds = [type(e).__name__ for e in events]
    assert kinds == ["ToolStarted", "ToolFinished", "TextDelta", "TextDelta", "TextDelta", "RunFinished"]
    assert isinstance(events[0], ToolStarted) and events[0].call.name == "add"
    assert isinstance(events[1], ToolFinished) and events[1].result.content == "3"
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "the sum is 3"
    final = events[-1]
    assert isinstance(final, RunFinished) and final.result.output == "the sum is 3"
    assert server.decode(server.requests[0]).stream


# --- typed output -----------------------------------------------------------------------------------------------


async def test_typed_output_on_the_openai_loopback_sends_a_strict_schema(server: OpenAIServer) -> None:
    server.enqueue(Reply(text='{"city": "Paris", "country": "France"}'))
    async with ChatAgent(openai_client(server.base_url), output_type=City) as agent:
        result = await agent.run("Where is the Eiffel tower?")
    assert result.output == City(city="Paris", country="France")
    schema = server.decode(server.requests[0]).json_schema
    assert schema is not None and set(schema["properties"]) == {"city", "country"}


async def test_typed_output_on_the_anthropic_loopback_uses_output_config() -> None:
    async with AnthropicServer(api_key=KEY) as server:
        server.enqueue(Reply(text='{"city": "Oslo", "country": "Norway"}'))
        client = AnthropicChatCompletionClient(
            "claude-sonnet-5-5", base_url=server.base_url, api_key=KEY, max_tokens=512, max_retries=0
        )
        async with ChatAgent(client, output_type=City) as agent:
            result = await agent.run("Capital of Norway?")
        assert result.output == City(city="Oslo", country="Norway")
        body = server.requests[0].json
        assert isinstance(body, dict) and body["output_config"]["format"]["type"] == "json_schema"


async def test_typed_output_on_the_ollama_loopback_sends_the_schema_as_format() -> None:
    from ext.models.ollama import OllamaChatCompletionClient
    from ext.testing.servers import OllamaServer

    async with OllamaServer(models=["llama3.2"]) as server:
        server.enqueue(Reply(text='{"city": "Rome", "country": "Italy"}'))
        client = OllamaChatCompletionClient("llama3.2", host=server.base_url, max_retries=0)
        async with ChatAgent(client, output_type=City) as agent:
            result = await agent.run("Capital of Italy?")
        assert result.output == City(city="Rome", country="Italy")
        body = server.requests[0].json
        assert isinstance(body, dict) and set(body["format"]["properties"]) == {"city", "country"}


async def test_a_bad_typed_answer_gets_one_corrective_retry_with_the_error(server: OpenAIServer) -> None:
    server.enqueue(Reply(text='{"city": "Paris"}'), Reply(text='{"city": "Paris", "country": "France"}'))
    async with ChatAgent(openai_client(server.base_url), output_type=City) as agent:
        events = [e async for e in agent.run_stream("Where is the Eiffel tower?")]
    retries = [e for e in events if isinstance(e, OutputRetry)]
    assert len(retries) == 1 and "country" in retries[0].errors
    final = events[-1]
    assert isinstance(final, RunFinished) and final.result.output == City(city="Paris", country="France")
    second = server.decode(server.requests[1])
    assert second.messages[-2].role == "assistant" and second.messages[-2].text == '{"city": "Paris"}'
    assert second.messages[-1].role == "user" and "country" in second.messages[-1].text


async def test_a_typed_answer_bad_twice_raises_a_clear_error_and_closes_the_turn(server: OpenAIServer) -> None:
    server.enqueue(Reply(text="Paris, I think"), Reply(text="[" * 100_000))
    async with ChatAgent(openai_client(server.base_url), output_type=City) as agent:
        session = agent.session("typed")
        with pytest.raises(OutputValidationError, match="does not match City after 2 attempt") as caught:
            await session.run("Where is the Eiffel tower?")
        assert caught.value.attempts == 2
        assert len(caught.value.errors) <= 2_100 and len(caught.value.text) <= 20_100  # bounded
        snapshot = await session.snapshot()
    assert not snapshot.unfinished  # the session is usable again
    assert len(server.requests) == 2


# --- sessions ----------------------------------------------------------------------------------------------------


async def test_a_session_continues_and_each_step_bumps_its_version(server: OpenAIServer) -> None:
    server.enqueue(Reply(text="Hello Ada."), Reply(text="Your name is Ada."))
    store = InMemoryStateStore()
    async with ChatAgent(openai_client(server.base_url), store=store, instructions="Be brief.") as agent:
        session = agent.session("chat-1")
        first = await session.run("I am Ada.")
        second = await agent.session("chat-1").run("What is my name?")
    assert second.output == "Your name is Ada."
    assert second.version > first.version
    sent = server.decode(server.requests[1])
    assert sent.system == ["Be brief."]
    assert [(m.role, m.text) for m in sent.messages] == [
        ("user", "I am Ada."),
        ("assistant", "Hello Ada."),
        ("user", "What is my name?"),
    ]
    assert [a.type for a in await store.keys()] == ["agent.sessions"]  # the system text is not stored
    stored = await store.get((await store.keys())[0])
    assert stored is not None and all(json.loads(m)["type"] != "SystemMessage" for m in stored.state["messages"])


async def test_a_write_from_a_stale_read_is_refused(server: OpenAIServer) -> None:
    server.enqueue(Reply(text="ok"))
    async with ChatAgent(openai_client(server.base_url)) as agent:
        session = agent.session("s")
        await session.update_state({"step": 1})
        version = (await session.snapshot()).version
        assert version is not None
        await session.run("hi")
        with pytest.raises(StateConflictError):
            await session.update_state({"step": 2}, expected_version=version)
        assert (await session.snapshot()).state == {"step": 1}


async def test_history_drops_the_oldest_turns_whole_and_keeps_the_system_text(server: OpenAIServer) -> None:
    store = InMemoryStateStore()
    for _ in range(2):
        server.enqueue(Reply(tool_calls=[call("add", "x", a=1, b=1)]), Reply(text="two " * 150))
    server.enqueue(Reply(text="ok"))
    agent = ChatAgent(
        openai_client(server.base_url),
        tools=[add_tool()],
        instructions="SYSTEM TEXT",
        store=store,
        context_window=400,
        reserve_tokens=100,
    )
    async with agent:
        session = agent.session("long")
        await session.run("first question " * 20)
        await session.run("second question")
        await session.run("third")
    sent = server.decode(server.requests[-1])
    assert sent.system == ["SYSTEM TEXT"]
    texts = [m.text for m in sent.messages if m.role == "user"]
    assert texts[0] != "first question " * 20  # the oldest turn went first ...
    assert texts[-1] == "third"  # ... the current one stays
    assert sent.messages[0].role == "user"  # whole turns: no orphaned tool result
    calls = {c.call_id for m in sent.messages for c in m.tool_calls}
    results = {r.call_id for m in sent.messages for r in m.tool_results}
    assert calls == results
    snapshot = await session.snapshot()
    assert len(snapshot.messages) == len(sent.messages) + 1  # the store keeps what was sent, plus the answer


# --- approval ------------------------------------------------------------------------------------------------------


async def test_a_held_call_waits_then_approve_runs_it_and_deny_shows_the_reason(
    server: OpenAIServer, tmp_path: Path
) -> None:
    counter = tmp_path / "count.txt"
    tools = [counting_tool("delete_file", counter), counting_tool("read_file", counter)]
    server.enqueue(
        Reply(tool_calls=[call("delete_file", "d1", text="a"), call("read_file", "r1", text="b")]),
        Reply(tool_calls=[call("delete_file", "d2", text="c")]),
        Reply(text="done"),
    )
    agent = ChatAgent(openai_client(server.base_url), tools=tools, require_approval=["delete_file"])
    async with agent:
        session = agent.session("ops")
        events = [e async for e in session.run_stream("clean up")]
        last_event = events[-1]
        assert isinstance(last_event, RunFinished)
        result = last_event.result
        assert result.status == "awaiting_approval"
        assert [p.call_id for p in result.pending] == ["d1"]
        assert [e.call.call_id for e in events if isinstance(e, ApprovalRequested)] == ["d1"]
        with pytest.raises(ApprovalPendingError):
            _ = result.output
        assert count_lines(counter, "read_file") == 1 and count_lines(counter, "delete_file") == 0
        with pytest.raises(ApprovalPendingError, match="d1"):
            await session.run("something else")
        with pytest.raises(ApprovalPendingError, match="d1"):
            await session.resume()
        await session.approve("d1")
        second = await session.resume()
        assert second.status == "awaiting_approval" and [p.call_id for p in second.pending] == ["d2"]
        assert count_lines(counter, "delete_file") == 1 and count_lines(counter, "read_file") == 1
        await session.deny("d2", "not on Fridays")
        final = await session.resume()
        assert final.output == "done"
        with pytest.raises(NothingToResumeError):
            await session.resume()
    assert count_lines(counter, "delete_file") == 1  # the denied call never ran
    last = server.decode(server.requests[-1]).messages[-1]
    assert last.tool_results[0].call_id == "d2" and "not on Fridays" in last.tool_results[0].content
    assert last.tool_results[0].content == "Error: The user denied this tool call: not on Fridays"
    # The first model call's results reached the model in call order, once each.
    second_request = server.decode(server.requests[1]).messages
    assert [r.call_id for m in second_request for r in m.tool_results] == ["d1", "r1"]


async def test_a_predicate_on_the_arguments_decides_which_calls_wait(server: OpenAIServer, tmp_path: Path) -> None:
    counter = tmp_path / "count.txt"
    spend = counting_tool("spend", counter)
    server.enqueue(
        Reply(tool_calls=[call("spend", "small", text="5"), call("spend", "big", text="500")]), Reply(text="ok")
    )
    agent = ChatAgent(
        openai_client(server.base_url), tools=[spend], require_approval={"spend": lambda a: int(a["text"]) > 100}
    )
    async with agent:
        result = await agent.run("buy things")
        assert [p.call_id for p in result.pending] == ["big"]
        assert count_lines(counter, "spend") == 1
        session = agent.session(result.session_id)
        assert [p.call_id for p in await session.pending()] == ["big"]
        with pytest.raises(AgentError, match="no undecided tool call 'small'"):
            await session.approve("small")


# --- cancellation ---------------------------------------------------------------------------------------------------


async def test_a_cancelled_token_stops_the_tool_in_flight_and_resume_finishes_the_turn(server: OpenAIServer) -> None:
    started = asyncio.Event()
    cancelled = asyncio.Event()
    runs: list[str] = []

    async def slow(text: str) -> str:
        """Waits."""
        runs.append(text)
        if len(runs) == 1:
            started.set()
            try:
                await asyncio.Event().wait()
            except asyncio.CancelledError:
                cancelled.set()
                raise
        return "slow done"

    server.enqueue(Reply(tool_calls=[call("slow", "s1", text="x")]), Reply(text="finished"))
    async with ChatAgent(openai_client(server.base_url), tools=[FunctionTool(slow)]) as agent:
        session = agent.session("c")
        token = CancellationToken()
        task = asyncio.ensure_future(session.run("go", cancellation_token=token))
        await started.wait()
        token.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert cancelled.is_set()
        assert (await session.snapshot()).unfinished
        result = await session.resume()
    assert result.output == "finished" and runs == ["x", "x"]  # the cancelled call had no result: it ran again


async def test_cancelling_the_task_stops_the_model_call(server: OpenAIServer) -> None:
    server.enqueue(Reply(text="never", stall_after_chunks=0))
    async with ChatAgent(openai_client(server.base_url)) as agent:
        stream = agent.run_stream("hi")
        task = asyncio.ensure_future(stream.__anext__())
        await server.wait_for_requests(1)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await server.wait_for_no_connections()  # the SDK's request was closed, not left behind


# --- an agent as a tool ----------------------------------------------------------------------------------------------


async def test_an_agent_is_a_tool_of_another_agent(server: OpenAIServer) -> None:
    server.enqueue(
        Reply(tool_calls=[call("geo", "g1", request="Where is the Eiffel tower?")]),
        Reply(text='{"city": "Paris", "country": "France"}'),
        Reply(text="It is in Paris."),
    )
    inner = ChatAgent(openai_client(server.base_url), name="geo", description="Finds cities.", output_type=City)
    tool = inner.as_tool()
    assert tool.name == "geo" and tool.description == "Finds cities."
    assert set(tool.schema["parameters"]["properties"]) == {"request"}
    async with inner, ChatAgent(openai_client(server.base_url), tools=[tool]) as outer:
        result = await outer.run("Eiffel tower?")
    assert result.output == "It is in Paris."
    inner_request = server.decode(server.requests[1])
    assert inner_request.messages[-1].text == "Where is the Eiffel tower?"
    returned = server.decode(server.requests[2]).messages[-1].tool_results[0]
    assert json.loads(returned.content) == {"city": "Paris", "country": "France"}


async def test_a_run_with_messages_as_input_and_a_user_message(server: OpenAIServer) -> None:
    server.enqueue(Reply(text="a"), Reply(text="b"))
    async with ChatAgent(openai_client(server.base_url)) as agent:
        await agent.run(
            [UserMessage(content="one", source="u"), AssistantMessage(content="x"), UserMessage(content="two")]
        )
        await agent.run(UserMessage(content="three", source="u"))
        with pytest.raises(TypeError, match="input must be"):
            await agent.run(42)  # type: ignore[arg-type]
    assert [m.text for m in server.decode(server.requests[0]).messages] == ["one", "x", "two"]


async def test_the_readme_example_runs_as_written(server: OpenAIServer, capsys: pytest.CaptureFixture[str]) -> None:
    from ext.testing.readme import python_example

    code = python_example(Path(__file__).parent.parent / "README.md", "ChatAgent(")
    namespace: dict[str, Any] = {"__name__": "readme"}
    exec(compile(code, "README.md", "exec"), namespace)
    server.enqueue(
        Reply(tool_calls=[call("add", "c1", a=2, b=3)], prompt_tokens=30),
        Reply(text='{"total": 5}', prompt_tokens=40),
    )
    await namespace["main"](openai_client(server.base_url))
    assert capsys.readouterr().out == "5 70\n"
    assert server.decode(server.requests[0]).system == ["You help Ada. Use the tools."]


async def test_memory_puts_relevant_passages_in_front_of_the_call_once_per_run(server: OpenAIServer) -> None:
    from ext.memory import VectorMemory
    from ext.testing.hashing_embedder import HashingEmbedder
    from ext.vectors.sqlite import SqliteVectorStore

    store = SqliteVectorStore(collection_name="notes", vector_size=128)
    memory = VectorMemory(HashingEmbedder(128), store)
    await memory.add(["The deploy key rotates every ninety days.", "Lunch is served at noon."])
    server.enqueue(Reply(text="Every ninety days."))
    async with ChatAgent(openai_client(server.base_url), instructions="Be brief.", memory=memory) as agent:
        session = agent.session("m")
        result = await session.run("when does the deploy key rotate?")
        snapshot = await session.snapshot()
    await store.close()
    assert result.output == "Every ninety days."
    system = server.decode(server.requests[0]).system
    assert system[0] == "Be brief." and "deploy key rotates every ninety days" in system[1]
    assert [m.type for m in snapshot.messages] == ["UserMessage", "AssistantMessage"]  # memories are not stored


async def test_a_pipeline_s_middlewares_see_every_model_turn_and_tool_call(server: OpenAIServer) -> None:
    from ext.core import CreateResult, FunctionExecutionResult
    from ext.pipeline import ChatCall, ChatMiddleware, CreateNext, ToolInvocation, ToolNext

    seen: list[str] = []

    class Trace(ChatMiddleware):
        async def create(self, call: ChatCall, next: CreateNext) -> CreateResult:
            seen.append(f"model turn {call.turn}")
            return await next(call)

        async def call_tool(self, invocation: ToolInvocation, next: ToolNext) -> FunctionExecutionResult:
            seen.append(f"tool {invocation.call.name}")
            return await next(invocation)

    server.enqueue(Reply(tool_calls=[call("add", "c1", a=1, b=1)]), Reply(text="2"))
    pipeline = ChatClientBuilder(openai_client(server.base_url)).use(Trace()).build()
    async with ChatAgent(pipeline, tools=[add_tool()]) as agent:
        assert (await agent.run("1+1")).output == "2"
    assert seen == ["model turn 1", "tool add", "model turn 2"]


async def test_the_turn_limit_closes_the_turn_with_the_unrun_calls_answered(server: OpenAIServer) -> None:
    server.enqueue(Reply(tool_calls=[call("add", "c1", a=1, b=1)]), Reply(tool_calls=[call("add", "c2", a=2, b=2)]))
    async with ChatAgent(openai_client(server.base_url), tools=[add_tool()], max_iterations=2) as agent:
        session = agent.session("limited")
        with pytest.raises(AgentError, match="max_iterations=2"):
            await session.run("loop forever")
        snapshot = await session.snapshot()
    assert not snapshot.unfinished
    last = snapshot.messages[-1]
    assert isinstance(last, FunctionExecutionResultMessage) and last.content[0].call_id == "c2"
    assert last.content[0].is_error and "turn limit" in last.content[0].content


async def test_a_turn_cancelled_during_the_model_call_resumes_with_the_same_instructions(server: OpenAIServer) -> None:
    server.enqueue(Reply(text="never", stall_after_chunks=0), Reply(text="answered"))
    agent = ChatAgent(openai_client(server.base_url), instructions="Speak to {who}.")
    async with agent:
        session = agent.session("m")
        token = CancellationToken()
        task = asyncio.ensure_future(session.run("hello", variables={"who": "Ada"}, cancellation_token=token))
        await server.wait_for_requests(1)
        token.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        with pytest.raises(AgentError, match="unfinished turn"):
            await session.run("again")
        result = await session.resume()
    assert result.output == "answered"
    resumed = server.decode(server.requests[1])
    assert resumed.system == ["Speak to Ada."]  # the instructions rendered when the turn began
    assert [(m.role, m.text) for m in resumed.messages] == [("user", "hello")]
    assert [m.type for m in result.messages] == ["UserMessage", "AssistantMessage"]
