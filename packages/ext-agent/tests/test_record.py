"""The session record: format 2 (one JSON text per message, each serialized once) against the plain serialization
of the whole history, and records written in format 1 still read and continued."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
from ext_agent_support import KEY, openai_client

from ext.agent import ChatAgent
from ext.agent._record import FORMAT, SessionRecord, TurnRecord
from ext.agent._steps import add_result
from ext.core import (
    AgentId,
    AssistantMessage,
    FunctionCall,
    FunctionExecutionResult,
    FunctionTool,
    InMemoryStateStore,
    LLMMessage,
    UserMessage,
    dump_messages,
    load_messages,
)
from ext.testing.servers import OpenAIServer, Reply


@pytest.fixture
async def server() -> AsyncIterator[OpenAIServer]:
    async with OpenAIServer(api_key=KEY) as srv:
        yield srv


def plain(messages: list[LLMMessage]) -> list[Any]:
    """The slow path: the whole history serialized at once, as JSON values."""
    return list(json.loads(dump_messages(messages)))


def stored(state: dict[str, Any]) -> list[Any]:
    return [json.loads(text) for text in state["messages"]]


def test_each_write_equals_the_whole_history_serialized_and_serializes_each_message_once() -> None:
    record = SessionRecord(turn=TurnRecord(start=0, instructions="Be brief."))
    record.messages.append(UserMessage(content="Add 2 and 3, then 4 and 5.", source="user"))
    first = record.to_state()
    assert first["format"] == FORMAT == 2 and stored(first) == plain(record.messages)

    calls = [
        FunctionCall(id="c1", name="add", arguments='{"a": 2, "b": 3}'),
        FunctionCall(id="c2", name="add", arguments="{}"),
    ]
    record.messages.append(AssistantMessage(content=calls, source="agent"))
    add_result(record.messages, FunctionExecutionResult(call_id="c1", name="add", content="5"))
    second = record.to_state()
    assert stored(second) == plain(record.messages)
    assert second["messages"][0] is first["messages"][0]  # the same text object: not serialized again

    add_result(record.messages, FunctionExecutionResult(call_id="c2", name="add", content="9"))  # replaces the last
    third = record.to_state()
    assert stored(third) == plain(record.messages)
    assert third["messages"][:2] == second["messages"][:2] and third["messages"][1] is second["messages"][1]
    assert json.loads(third["messages"][2])["content"][1]["content"] == "9"

    del record.messages[:1]  # the history rule drops the oldest turn
    record.turn = None
    fourth = record.to_state()
    assert stored(fourth) == plain(record.messages) and fourth["turn"] is None
    assert "[" + ",".join(fourth["messages"]) + "]" == dump_messages(record.messages)  # byte for byte


def test_a_record_read_back_equals_the_written_one_and_keeps_its_texts() -> None:
    record = SessionRecord(
        messages=[UserMessage(content="hi é", source="user"), AssistantMessage(content="hello", source="agent")],
        turn=TurnRecord(start=1, instructions="x", held=["c1"], approved=["c1"], output_retries=1),
        state={"step": 3},
    )
    state = json.loads(json.dumps(record.to_state()))  # as a store gives it back
    read = SessionRecord.from_state(state)
    assert read.messages == record.messages and read.turn == record.turn and read.state == {"step": 3}
    again = read.to_state()
    assert again == state
    assert all(a is b for a, b in zip(again["messages"], state["messages"], strict=True))  # not serialized again


FORMAT_1: dict[str, Any] = {
    "format": 1,
    "messages": [
        {"type": "UserMessage", "content": "I am Ada.", "source": "user"},
        {"type": "AssistantMessage", "content": "Hello Ada.", "thought": None, "reasoning": [], "source": "agent"},
        {"type": "UserMessage", "content": "Add 2 and 3, twice.", "source": "user"},
        {
            "type": "AssistantMessage",
            "content": [
                {"id": "c1", "name": "add", "arguments": '{"a": 2, "b": 3}'},
                {"id": "c2", "name": "add", "arguments": '{"a": 2, "b": 3}'},
            ],
            "thought": None,
            "reasoning": [],
            "source": "agent",
        },
        {
            "type": "FunctionExecutionResultMessage",
            "content": [{"call_id": "c1", "name": "add", "content": "5", "is_error": False}],
        },
    ],
    "turn": {"start": 2, "instructions": "Be brief.", "held": [], "approved": [], "output_retries": 0},
    "state": {"step": 1},
}
"""A record as ext-agent wrote it before format 2: a turn that crashed after the first of its two tool calls."""


async def test_a_format_1_record_is_read_and_its_crashed_turn_resumes_without_repeating_the_finished_call(
    server: OpenAIServer,
) -> None:
    runs: list[tuple[int, int]] = []

    def add(a: int, b: int) -> int:
        """Add two integers."""
        runs.append((a, b))
        return a + b

    store = InMemoryStateStore()
    key = AgentId("agent.sessions", "old")
    version = await store.put(key, FORMAT_1, None)
    server.enqueue(Reply(text="5 and 5."), Reply(text="Ada."))
    async with ChatAgent(openai_client(server.base_url), tools=[FunctionTool(add)], store=store) as agent:
        session = agent.session("old")
        snapshot = await session.snapshot()
        assert snapshot.unfinished and snapshot.version == version and snapshot.state == {"step": 1}
        assert snapshot.messages == load_messages(FORMAT_1["messages"])
        result = await session.resume()
        assert result.output == "5 and 5." and runs == [(2, 3)]  # only c2 ran
        later = await session.run("Who am I?")
    assert later.output == "Ada."
    sent = server.decode(server.requests[0])
    assert sent.system == ["Be brief."]  # the instructions rendered when the turn began
    assert [m.role for m in sent.messages] == ["user", "assistant", "user", "assistant", "tool", "tool"]
    record = await store.get(key)
    assert record is not None and record.state["format"] == 2 and record.state["turn"] is None
    assert stored(record.state)[:4] == FORMAT_1["messages"][:4] and record.state["state"] == {"step": 1}
    assert [r["call_id"] for r in stored(record.state)[4]["content"]] == ["c1", "c2"]
    assert len(record.state["messages"]) == 8  # the 5 (both results in the 5th), the answer, the question, its answer


TWO_MESSAGES = '{"type":"UserMessage","content":"a"},{"type":"UserMessage","content":"b"}'


@pytest.mark.parametrize(
    ("state", "error"),
    [
        ({"format": 3, "messages": []}, "format 3 is not one this ext-agent reads"),
        ({"format": 2, "messages": "[]"}, "'messages' must be a list, got str"),
        ({"format": 2, "messages": [{"type": "UserMessage", "content": "x"}]}, "must be a list of JSON texts"),
        ({"format": 2, "messages": [TWO_MESSAGES]}, "one message per JSON text"),
        ({"format": 2, "messages": [TWO_MESSAGES, "1"]}, "validation error"),  # 3 values: the "1" is no message
    ],
)
def test_a_record_that_is_not_a_session_record_is_refused(state: dict[str, Any], error: str) -> None:
    with pytest.raises(ValueError, match=error):
        SessionRecord.from_state(state)


def test_an_empty_record_round_trips() -> None:
    record = SessionRecord.from_state({"format": 2, "messages": [], "turn": None, "state": {}})
    assert record.messages == [] and record.to_state() == {"format": 2, "messages": [], "turn": None, "state": {}}
