"""`tool_calling`: ``constrained`` (the default: a grammar holds the reply to the call JSON) and ``prompt`` (no
grammar; the answer read tolerantly), on the scripted in-process model (the real `Llama` generates the scripted
text through its chat template)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from ext.core import TOOL_PREAMBLE, ConfigurationError, CreateResult, StreamChunk, UserMessage
from ext.testing.inprocess import ScriptedModel
from ext.testing.sample_inputs import ADD
from ext.testing.script import Reply

HELLO = [UserMessage(content="What is 1 plus 2?", source="user")]
TAGGED = '<tool_call>{"name": "add", "arguments": {"a": 1, "b": 2}}</tool_call>'


async def test_prompt_mode_sends_no_grammar_and_reads_a_tagged_call(scripted: ScriptedModel, make_client: Any) -> None:
    client = make_client(scripted, tool_calling="prompt")
    scripted.enqueue(Reply(text=TAGGED))
    result = await client.create(HELLO, tools=[ADD])
    body = scripted.requests[0].body
    assert body.get("grammar") is None
    assert body["messages"][0]["content"].startswith(TOOL_PREAMBLE)
    assert result.finish_reason == "function_calls" and isinstance(result.content, list)
    assert result.content[0].name == "add" and json.loads(result.content[0].arguments) == {"a": 1, "b": 2}
    assert result.content[0].id == "call_2_0"  # deterministic ids, as in constrained mode


async def test_constrained_mode_holds_the_reply_to_a_grammar_and_reads_only_the_call_json(
    scripted: ScriptedModel, make_client: Any
) -> None:
    client = make_client(scripted)
    scripted.enqueue(Reply(text=TAGGED))
    result = await client.create(HELLO, tools=[ADD])
    assert scripted.requests[0].body.get("grammar") is not None
    # Under the grammar a call starts with "{"; other text was streamed as text and stays text.
    assert result.content == TAGGED


async def test_prompt_mode_streams_text_as_one_chunk_at_the_end(scripted: ScriptedModel, make_client: Any) -> None:
    client = make_client(scripted, tool_calling="prompt")
    scripted.enqueue(Reply(text="It is 3."))
    items = [item async for item in client.create_stream(HELLO, tools=[ADD])]
    assert [i.content for i in items if isinstance(i, StreamChunk)] == ["It is 3."]
    assert isinstance(items[-1], CreateResult) and items[-1].content == "It is 3."


def test_native_tool_calling_is_refused_with_the_field_named(tiny_gguf: Any) -> None:
    from ext.models.llama_cpp import LlamaCppChatCompletionClient

    with pytest.raises(ConfigurationError, match="tool_calling"):
        LlamaCppChatCompletionClient(tiny_gguf, tool_calling="native")  # type: ignore[arg-type]
