"""Tool calls and tool results out of order are refused before any request, naming the message and the call."""

from __future__ import annotations

from typing import ClassVar

import pytest

from ext.core import (
    AssistantMessage,
    BaseChatCompletionClient,
    ChatRequest,
    ConfigurationError,
    CreateResult,
    FunctionCall,
    FunctionExecutionResult,
    FunctionExecutionResultMessage,
    LLMMessage,
    RequestUsage,
    SystemMessage,
    UserMessage,
    check_tool_pairing,
)

USER = UserMessage(content="What is 2 + 3 and 2 * 3?")
ADD = FunctionCall(id="call_add", name="add", arguments='{"a": 2, "b": 3}')
MUL = FunctionCall(id="call_mul", name="mul", arguments='{"a": 2, "b": 3}')
CALLS = AssistantMessage(content=[ADD, MUL])


def answer(*calls: FunctionCall) -> FunctionExecutionResultMessage:
    return FunctionExecutionResultMessage(
        content=[FunctionExecutionResult(call_id=c.id, name=c.name, content="5") for c in calls]
    )


class Recording(BaseChatCompletionClient):
    provider_name = "recording"

    def __init__(self) -> None:
        super().__init__(model="gpt-4o")
        self.requests: list[ChatRequest] = []

    async def _create(self, request: ChatRequest) -> CreateResult:
        self.requests.append(request)
        return CreateResult(
            finish_reason="stop", content="ok", usage=RequestUsage(prompt_tokens=1, completion_tokens=1)
        )


class Lenient(Recording):
    tool_results_required: ClassVar[bool] = False


@pytest.mark.parametrize(
    ("messages", "match"),
    [
        # A result with no assistant turn before it.
        ([USER, answer(ADD)], r"messages\[1\]: the result for call_id 'call_add' \(add\) answers no tool call"),
        # A result for an id the turn before it did not call.
        (
            [USER, CALLS, answer(ADD, MUL), UserMessage(content="again"), answer(ADD)],
            r"messages\[4\]: the result for call_id 'call_add'",
        ),
        (
            [
                USER,
                CALLS,
                FunctionExecutionResultMessage(
                    content=[FunctionExecutionResult(call_id="call_other", name="add", content="5")]
                ),
            ],
            r"messages\[2\]: the result for call_id 'call_other' \(add\) answers no tool call before it; the calls of "
            r"messages\[1\] are \['call_add', 'call_mul'\]",
        ),
    ],
)
async def test_a_result_without_its_call_is_refused_for_every_provider(messages: list[LLMMessage], match: str) -> None:
    for client in (Recording(), Lenient()):
        with pytest.raises(ConfigurationError, match=match):
            await client.create(messages)
        assert client.requests == []


@pytest.mark.parametrize(
    ("messages", "match"),
    [
        (
            [USER, CALLS, answer(MUL), UserMessage(content="and?")],
            r"messages\[1\]: tool call 'call_add' \(add\) has no result; .* before messages\[3\]",
        ),
        (
            [USER, CALLS, SystemMessage(content="be brief"), UserMessage(content="and?")],
            r"messages\[1\]: tool calls 'call_add' \(add\), 'call_mul' \(mul\) have no result; .* before messages\[3\]",
        ),
        ([USER, CALLS], r"messages\[1\]: tool calls 'call_add' .* before the end of the messages"),
    ],
)
async def test_a_call_without_its_result_is_refused_where_the_provider_refuses_it(
    messages: list[LLMMessage], match: str
) -> None:
    client = Recording()
    with pytest.raises(ConfigurationError, match=match) as info:
        await client.create(messages)
    assert isinstance(info.value, ValueError)
    assert client.requests == []
    lenient = Lenient()  # Ollama accepts unanswered calls
    await lenient.create(messages)
    assert len(lenient.requests) == 1


async def test_paired_histories_pass() -> None:
    client = Recording()
    await client.create([USER, CALLS, answer(MUL, ADD), UserMessage(content="thanks")])
    # The results of one turn may come in several messages.
    await client.create([USER, CALLS, answer(MUL), answer(ADD)])
    await client.create([USER, AssistantMessage(content="no tools"), UserMessage(content="ok")])
    # A system message between calls and results: Anthropic and Bedrock move it out of the conversation.
    await client.create([USER, CALLS, SystemMessage(content="mind errors"), answer(ADD, MUL)])
    assert len(client.requests) == 4


def test_the_check_is_public_and_parameterised() -> None:
    check_tool_pairing([USER, CALLS], results_required=False)
    with pytest.raises(ConfigurationError, match="call_add"):
        check_tool_pairing([USER, CALLS])
