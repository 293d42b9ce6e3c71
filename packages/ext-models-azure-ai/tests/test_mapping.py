"""The mapping functions on their own (no network): think tags cut anywhere, tool calls by index, requests."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel

from ext.core import ChatOptions, ChatRequest, FunctionCall, UserMessage
from ext.models.azure_ai import (
    AZURE_AI_MODELS,
    StreamState,
    ThinkTagSplitter,
    WireSettings,
    map_request,
    map_response,
    split_think_tags,
)
from ext.models.azure_ai._mapping import map_stream_update

TAGGED = "<think>\nweigh the options</think>\n\nThe answer is 42."


def test_split_think_tags() -> None:
    assert split_think_tags(TAGGED) == ("weigh the options", "The answer is 42.")
    assert split_think_tags("  <think>a</think>b") == ("a", "b")
    assert split_think_tags("plain <think>not leading</think>") == (None, "plain <think>not leading</think>")
    assert split_think_tags("<think>cut off while thinking") == ("cut off while thinking", "")
    assert split_think_tags("<think></think>answer") == (None, "answer")


@pytest.mark.parametrize("size", [1, 2, 3, 5, 7, 8, 9, 13])
def test_think_tag_splitter_with_pieces_of_every_size(size: int) -> None:
    splitter = ThinkTagSplitter()
    thought, answer = [], []
    for i in range(0, len(TAGGED), size):
        t, a = splitter.feed(TAGGED[i : i + size])
        thought.append(t)
        answer.append(a)
    t, a = splitter.flush()
    thought.append(t)
    answer.append(a)
    assert "".join(thought).strip() == "weigh the options"
    assert "".join(answer) == "The answer is 42."


@pytest.mark.parametrize("text", ["<thinking is fun", "<", "<th", "no tags at all", "  leading space"])
def test_think_tag_splitter_passes_other_text_through(text: str) -> None:
    splitter = ThinkTagSplitter()
    pieces = [splitter.feed(ch) for ch in text] + [splitter.flush()]
    assert "".join(t for t, _ in pieces) == ""
    assert "".join(a for _, a in pieces) == text


def _update(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    return {"choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}


def test_interleaved_tool_call_fragments_are_assembled_by_index() -> None:
    state = StreamState()
    updates = [
        _update({"tool_calls": [{"index": 0, "id": "a", "function": {"name": "f", "arguments": ""}}]}),
        _update({"tool_calls": [{"index": 1, "id": "b", "function": {"name": "g", "arguments": '{"y"'}}]}),
        _update({"tool_calls": [{"index": 0, "function": {"arguments": '{"x": 1'}}]}),
        _update({"tool_calls": [{"index": 1, "function": {"arguments": ": 2}"}}]}),
        _update({"tool_calls": [{"index": 0, "function": {"arguments": "}"}}]}),
        _update({}, "tool_calls"),
        {"choices": [], "usage": {"prompt_tokens": 7, "completion_tokens": 4}},
    ]
    assert [map_stream_update(u, state) for u in updates] == [None] * len(updates)
    result = state.result()
    assert result.content == [
        FunctionCall(id="a", name="f", arguments='{"x": 1}'),
        FunctionCall(id="b", name="g", arguments='{"y": 2}'),
    ]
    assert result.finish_reason == "function_calls"
    assert (result.usage.prompt_tokens, result.usage.completion_tokens) == (7, 4)


def test_response_with_text_and_tool_calls_keeps_the_text_as_thought() -> None:
    completion = {
        "choices": [
            {
                "message": {
                    "role": "assistant",
                    "content": "let me look",
                    "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}],
                },
                "finish_reason": "tool_calls",
            }
        ],
        "usage": {"prompt_tokens": 3, "completion_tokens": 2, "completion_tokens_details": {"reasoning_tokens": 1}},
    }
    result = map_response(completion)
    assert result.content == [FunctionCall(id="c1", name="f", arguments="{}")]
    assert result.thought == "let me look"
    assert result.usage.reasoning_tokens == 1


class Out(BaseModel):
    x: int


def test_request_body() -> None:
    info = AZURE_AI_MODELS.lookup("gpt-4o")
    request = ChatRequest(
        messages=[UserMessage(content="hi")],
        model="gpt-4o",
        options=ChatOptions(temperature=0.5, max_tokens=9, stop_sequences=["x"], top_k=4),
        json_output=Out,
        tool_choice="none",
        extra={"seed": 1, "safe_mode": True},
    )
    body, extras = map_request(request, info, WireSettings(model_extras={"a": 1}), stream=True)
    assert extras is True
    response_format = body.pop("response_format")
    assert response_format["type"] == "json_schema"
    assert response_format["json_schema"]["name"] == "Out"
    assert body == {
        "messages": [{"role": "user", "content": "hi"}],
        "model": "gpt-4o",
        "temperature": 0.5,
        "max_tokens": 9,
        "stop": ["x"],
        "seed": 1,
        "stream": True,
        "a": 1,
        "top_k": 4,
        "safe_mode": True,
        "stream_options": {"include_usage": True},
    }
    json_mode = ChatRequest(messages=[UserMessage(content="hi")], model="m", json_output=True)
    body, extras = map_request(json_mode, info, WireSettings(include_usage=True))
    assert body["response_format"] == {"type": "json_object"}
    assert extras is False  # no stream, no extras: no pass-through header


def test_the_model_table_is_valid() -> None:
    AZURE_AI_MODELS.validate()
    assert AZURE_AI_MODELS.lookup("DeepSeek-R1-0528").reasoning is True
    assert AZURE_AI_MODELS.lookup("Llama-4-Maverick-17B-128E-Instruct-FP8").vision is True


def test_importing_the_package_does_not_load_the_inference_sdk() -> None:
    import subprocess
    import sys

    code = (
        "import sys\n"
        "import ext.models.azure_ai\n"
        "assert 'azure.ai.inference' not in sys.modules, 'the SDK was imported'\n"
        "from ext.models.azure_ai import AzureAIChatCompletionClient\n"
        "AzureAIChatCompletionClient(endpoint='https://x', model='m', credential='k')\n"
        "assert 'azure.ai.inference.aio' in sys.modules\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
