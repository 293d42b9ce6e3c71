"""The Chat Completions request shapes ext-core shares between OpenAI-format providers."""

from __future__ import annotations

import pytest

from ext.core import (
    ChatOptions,
    ChatToolCallDeltas,
    ConfigurationError,
    FunctionCall,
    chat_options,
    chat_tool_choice,
    check_api_version,
    split_chat_extra_args,
)


def test_chat_options() -> None:
    options = ChatOptions(temperature=0.2, top_p=0.9, max_tokens=5, stop_sequences=["x"], seed=1, top_k=3)
    assert chat_options(options) == {"temperature": 0.2, "top_p": 0.9, "max_tokens": 5, "stop": ["x"], "seed": 1}
    assert chat_options(options, max_tokens_field="max_completion_tokens", sampling=False) == {
        "max_completion_tokens": 5,
        "stop": ["x"],
        "seed": 1,
    }
    assert chat_options(ChatOptions()) == {}


def test_tool_call_deltas_by_index() -> None:
    deltas = ChatToolCallDeltas()
    assert not deltas
    deltas.add(1, "b", "g", '{"y"')
    deltas.add(0, None, "f", "{")
    deltas.add(1, None, None, ": 2}")
    deltas.add(0, None, None, "}")
    assert deltas
    assert deltas.calls() == [
        FunctionCall(id="call_0", name="f", arguments="{}"),
        FunctionCall(id="b", name="g", arguments='{"y": 2}'),
    ]


def test_tool_choice() -> None:
    assert chat_tool_choice("auto") == "auto"
    assert chat_tool_choice("required") == "required"
    assert chat_tool_choice("f") == {"type": "function", "function": {"name": "f"}}


def test_split_extra_args() -> None:
    fields, extras = split_chat_extra_args({"seed": 1, "top_k": 2, "bag": {"a": 3}}, known={"seed"}, extras_key="bag")
    assert (fields, extras) == ({"seed": 1}, {"top_k": 2, "a": 3})
    with pytest.raises(ConfigurationError, match="'stream'"):
        split_chat_extra_args({"stream": True}, known=(), extras_key="bag")
    with pytest.raises(ConfigurationError, match=r"extra_create_args\['bag'\] must be a mapping"):
        split_chat_extra_args({"bag": 1}, known=(), extras_key="bag")


@pytest.mark.parametrize("value", ["2024-10-21", "2024-05-01-preview"])
def test_api_versions(value: str) -> None:
    assert check_api_version(value) == value


@pytest.mark.parametrize("value", ["2024-13-01", "May 2024", "2024-05-01-beta", ""])
def test_bad_api_versions(value: str) -> None:
    with pytest.raises(ValueError, match="api_version must be a date like 2024-05-01-preview"):
        check_api_version(value, example="2024-05-01-preview")
