"""The order of tool calls and tool results in a conversation, checked before any request.

What the providers refuse (each as a 400 after a round trip):

- OpenAI Chat Completions (and Azure OpenAI, Azure AI Inference): a ``tool`` message that does not answer a
  ``tool_calls`` id of the assistant message before it; an assistant message whose ``tool_calls`` are not all
  answered before the next other message.
- Anthropic Messages (and Bedrock): a ``tool_result`` whose ``tool_use_id`` is not a ``tool_use`` of the previous
  message; a ``tool_use`` without its ``tool_result`` in the next message.
- Ollama refuses neither: it pairs ``tool`` messages with calls by tool name and position.

So a result that answers no call of the assistant turn before it is refused for every provider: on Ollama it would
be paired with the wrong call. A call without a result is refused unless the provider accepts it (the client's
``tool_results_required``; Ollama's is False). A `SystemMessage` between a turn's calls and its results does not
break the pairing: Anthropic and Bedrock move system text out of the conversation, so only some providers refuse
it, and their own mapping decides.
"""

from __future__ import annotations

from collections.abc import Sequence

from ._errors import ConfigurationError
from ._messages import AssistantMessage, FunctionCall, FunctionExecutionResultMessage, LLMMessage, SystemMessage

__all__ = ["check_tool_pairing"]


def check_tool_pairing(messages: Sequence[LLMMessage], *, results_required: bool = True) -> None:
    """Raise `ConfigurationError` naming the message index and the call id when a `FunctionExecutionResult`
    answers no `FunctionCall` of the `AssistantMessage` right before it (other result messages of the same turn
    may come between), or, with ``results_required``, when a call has no result before the next other message
    (or the end of the conversation)."""
    open_calls: dict[str, FunctionCall] = {}
    unanswered: dict[str, FunctionCall] = {}
    turn = -1  # index of the assistant message whose calls are open
    for index, message in enumerate(messages):
        if isinstance(message, SystemMessage):
            continue
        if isinstance(message, FunctionExecutionResultMessage):
            for result in message.content:
                if result.call_id not in open_calls:
                    raise ConfigurationError(_orphan(index, result.call_id, result.name, turn, open_calls))
                unanswered.pop(result.call_id, None)
            continue
        if results_required and unanswered:
            raise ConfigurationError(_unanswered(turn, unanswered, f"messages[{index}]"))
        if isinstance(message, AssistantMessage) and not isinstance(message.content, str) and message.content:
            open_calls = {call.id: call for call in message.content}
            unanswered = dict(open_calls)
            turn = index
        else:
            open_calls, unanswered, turn = {}, {}, -1
    if results_required and unanswered:
        raise ConfigurationError(_unanswered(turn, unanswered, "the end of the messages"))


def _orphan(index: int, call_id: str, name: str, turn: int, open_calls: dict[str, FunctionCall]) -> str:
    where = (
        f"the calls of messages[{turn}] are {sorted(open_calls)}"
        if open_calls
        else "a FunctionExecutionResultMessage must follow the AssistantMessage whose FunctionCall it answers"
    )
    return f"messages[{index}]: the result for call_id {call_id!r} ({name}) answers no tool call before it; {where}"


def _unanswered(turn: int, unanswered: dict[str, FunctionCall], before: str) -> str:
    ids = ", ".join(f"{call_id!r} ({call.name})" for call_id, call in unanswered.items())
    subject = f"tool call {ids} has" if len(unanswered) == 1 else f"tool calls {ids} have"
    return (
        f"messages[{turn}]: {subject} no result; a FunctionExecutionResultMessage answering every call "
        f"of an AssistantMessage must follow it, before {before}"
    )
