from __future__ import annotations

import base64
import json

import pytest
from pydantic import ValidationError

from ext.core import (
    AssistantMessage,
    CreateResult,
    FunctionCall,
    FunctionExecutionResult,
    FunctionExecutionResultMessage,
    Image,
    LLMMessage,
    ReasoningBlock,
    RequestUsage,
    StreamChunk,
    SystemMessage,
    UserMessage,
    dump_messages,
    load_messages,
)

PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
)


def test_mixed_message_list_round_trips_through_json() -> None:
    messages: list[LLMMessage] = [
        SystemMessage(content="be brief"),
        UserMessage(content=["look", Image.from_bytes(PNG)], source="alice"),
        AssistantMessage(
            content=[FunctionCall(id="c1", name="add", arguments='{"a": 1}')],
            thought="I should add",
            reasoning=[ReasoningBlock(text="thinking", signature="sig==", provider="anthropic")],
        ),
        FunctionExecutionResultMessage(
            content=[FunctionExecutionResult(call_id="c1", name="add", content="oops", is_error=True)]
        ),
        AssistantMessage(content="done"),
    ]
    text = dump_messages(messages)
    assert json.loads(text)[1]["content"][1]["data"] == base64.b64encode(PNG).decode()
    back = load_messages(text)
    assert back == messages
    assert [type(m).__name__ for m in back] == [
        "SystemMessage",
        "UserMessage",
        "AssistantMessage",
        "FunctionExecutionResultMessage",
        "AssistantMessage",
    ]
    assert back[2].reasoning[0].signature == "sig=="  # type: ignore[union-attr]
    assert load_messages(json.loads(text)) == messages


def test_unknown_message_type_is_rejected() -> None:
    with pytest.raises(ValidationError, match="type"):
        load_messages('[{"type": "Nope", "content": "x"}]')


def test_usage_adds_optional_counts() -> None:
    a = RequestUsage(prompt_tokens=3, completion_tokens=4)
    b = RequestUsage(prompt_tokens=1, completion_tokens=1, cached_tokens=2, reasoning_tokens=5)
    total = a + b
    assert (total.prompt_tokens, total.completion_tokens, total.cached_tokens, total.reasoning_tokens) == (4, 5, 2, 5)
    assert (a + a).cached_tokens is None


def test_create_result_to_assistant_message_keeps_reasoning() -> None:
    block = ReasoningBlock(text="t", signature="s")
    result = CreateResult(finish_reason="stop", content="hi", usage=RequestUsage(), thought="t", reasoning=[block])
    message = result.to_assistant_message()
    assert message.content == "hi"
    assert message.reasoning == [block]
    assert message.thought == "t"


def test_create_result_rejects_unknown_finish_reason() -> None:
    with pytest.raises(ValidationError, match="finish_reason"):
        CreateResult(finish_reason="done", content="", usage=RequestUsage())  # type: ignore[arg-type]


def test_stream_chunk_defaults_to_empty_content() -> None:
    assert StreamChunk().content == ""
    assert StreamChunk(content="a").content == "a"


def test_trusted_constructors_equal_validated_models() -> None:
    usage = RequestUsage.of(10, 3, 4, None)
    assert usage == RequestUsage(prompt_tokens=10, completion_tokens=3, cached_tokens=4)
    assert usage.model_dump() == {
        "prompt_tokens": 10,
        "completion_tokens": 3,
        "cached_tokens": 4,
        "reasoning_tokens": None,
    }
    call = FunctionCall.of("c1", "add", '{"a": 1}')
    assert call == FunctionCall(id="c1", name="add", arguments='{"a": 1}')
    result = CreateResult.of("function_calls", [call], usage, "why")
    validated = CreateResult(finish_reason="function_calls", content=[call], usage=usage, thought="why")
    assert result == validated
    assert result.model_dump() == validated.model_dump()
    assert result.model_dump(exclude_unset=True) == validated.model_dump(exclude_unset=True) | {"reasoning": []}
    assert result.reasoning == [] and result.reasoning is not CreateResult.of("stop", "", usage).reasoning
    assert CreateResult.model_validate_json(result.model_dump_json()) == result
    chunk = StreamChunk.of("tok")
    assert chunk == StreamChunk(content="tok") and chunk.model_fields_set == {"content"}
    assert StreamChunk.of("", "hmm") == StreamChunk(thought="hmm")
    assert repr(chunk) == repr(StreamChunk(content="tok"))
    chunk.content = "changed"  # an ordinary model afterwards
    assert chunk.content == "changed" and chunk.model_copy().content == "changed"


def test_usage_sum_keeps_unknown_counts_unknown() -> None:
    total = RequestUsage(prompt_tokens=1, completion_tokens=2) + RequestUsage.of(3, 4, 5, None)
    assert total == RequestUsage(prompt_tokens=4, completion_tokens=6, cached_tokens=5, reasoning_tokens=None)


def test_request_usage_sum_keeps_optional_counts_none_until_reported() -> None:
    from ext.core import RequestUsage

    a = RequestUsage(prompt_tokens=3, completion_tokens=2)
    b = RequestUsage(prompt_tokens=1, completion_tokens=1, cached_tokens=4)
    c = RequestUsage(prompt_tokens=5, completion_tokens=0, reasoning_tokens=7)
    assert RequestUsage.sum([]) == RequestUsage()
    assert RequestUsage.sum([a, a]) == RequestUsage(prompt_tokens=6, completion_tokens=4)
    assert RequestUsage.sum([a, b, c]) == RequestUsage(
        prompt_tokens=9, completion_tokens=3, cached_tokens=4, reasoning_tokens=7
    )
    assert a + b == RequestUsage.sum([a, b])


def test_trusted_model_equals_the_validated_model() -> None:
    from ext.core import FunctionCall, trusted_model

    built = trusted_model(FunctionCall, {"id": "c1", "name": "add", "arguments": "{}"}, {"id", "name", "arguments"})
    validated = FunctionCall(id="c1", name="add", arguments="{}")
    assert built == validated
    assert built.model_fields_set == validated.model_fields_set
    assert built.model_dump() == validated.model_dump()
    assert built.model_dump_json() == validated.model_dump_json()
