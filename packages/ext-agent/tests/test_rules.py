"""The agent's pure rules, offline: the history rule, instruction templates, the approval policy."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from ext.agent import AgentError, ChatAgent
from ext.agent._approval import ApprovalPolicy
from ext.agent._history import turns_to_drop
from ext.agent._instructions import render_instructions
from ext.core import (
    AssistantMessage,
    FunctionCall,
    FunctionExecutionResult,
    FunctionExecutionResultMessage,
    LLMMessage,
    UserMessage,
)


def tool_turn(i: int) -> list[LLMMessage]:
    call = FunctionCall(id=f"c{i}", name="t", arguments="{}")
    return [
        UserMessage(content=f"q{i}", source="u"),
        AssistantMessage(content=[call]),
        FunctionExecutionResultMessage(content=[FunctionExecutionResult(call_id=f"c{i}", name="t", content="r")]),
        AssistantMessage(content=f"a{i}"),
    ]


def test_whole_turns_are_dropped_oldest_first_and_the_current_turn_is_kept() -> None:
    messages = [m for i in range(5) for m in tool_turn(i)]
    counted: list[int] = []

    def count(part: Sequence[LLMMessage]) -> int:
        counted.append(len(part))
        return 10 * len(part)  # 40 per turn

    # 200 tokens of history; room for 100: the three oldest turns go (a cut never falls inside a turn).
    assert turns_to_drop(messages, keep_from=16, budget=100, count=count) == 12
    assert counted == [4] * 5  # each turn counted once: linear in the history
    # The current turn (from index 16) is never dropped, even when nothing fits.
    assert turns_to_drop(messages, keep_from=16, budget=0, count=lambda p: 10 * len(p)) == 16
    assert turns_to_drop(messages, keep_from=16, budget=1_000, count=lambda p: 10 * len(p)) == 0
    assert turns_to_drop([], keep_from=0, budget=0, count=lambda p: 1) == 0


def test_instructions_fill_variables_and_keep_other_braces() -> None:
    text = render_instructions('Hi {name}! {{x}} {"a": 1} {not-a-var} {name}', {"name": lambda: "Ada"})
    assert text == 'Hi Ada! {x} {"a": 1} {not-a-var} Ada'
    with pytest.raises(AgentError, match="variable\\(s\\) a, b"):
        render_instructions("{a} {b}", {})
    with pytest.raises(AgentError, match="'n' gave int"):
        render_instructions("{n}", {"n": lambda: 3})  # type: ignore[dict-item,return-value]
    # No attribute access or indexing as str.format would do.
    assert render_instructions("{name.__class__}", {"name": "x"}) == "{name.__class__}"


def test_approval_by_name_and_predicate_and_hostile_arguments_hold_the_call() -> None:
    policy = ApprovalPolicy({"pay": lambda a: a["amount"] > 100, "rm": True, "ls": False})
    assert policy.needs(FunctionCall(id="1", name="rm", arguments="{}"))
    assert not policy.needs(FunctionCall(id="1", name="ls", arguments="{}"))
    assert not policy.needs(FunctionCall(id="1", name="other", arguments="{}"))
    assert not policy.needs(FunctionCall(id="1", name="pay", arguments='{"amount": 5}'))
    assert policy.needs(FunctionCall(id="1", name="pay", arguments='{"amount": 500}'))
    assert policy.needs(FunctionCall(id="1", name="pay", arguments='{"other": 1}'))  # the predicate raised
    assert policy.needs(FunctionCall(id="1", name="pay", arguments="[" * 200_000))  # unreadable: held, no error
    assert ApprovalPolicy(["rm"]).needs(FunctionCall(id="1", name="rm", arguments="{}"))
    with pytest.raises(TypeError, match="require_approval must be"):
        ApprovalPolicy("rm")


def test_agent_rejects_a_non_client() -> None:
    from ext.core import ConfigurationError

    with pytest.raises(ConfigurationError, match="client must be a ChatCompletionClient"):
        ChatAgent(object())  # type: ignore[call-overload]
