"""Tool calling done by ext at the prompt level, for models without (reliable) native tool calling.

Every client that offers it does the same thing, so it lives here once:

- the tools are described in a system message (`tool_system_text`) and are not sent as native tools;
- the model answers a call as one JSON object ``{"tool_calls": [{"name": ..., "arguments": {...}}]}``;
- earlier calls and their results go back into the prompt as the same JSON (`prompt_messages`), so a tool loop
  round-trips through any chat template, including ones that know nothing of tools;
- with the constraint on, the server is made to produce that JSON: a backend that takes a JSON schema gets
  `reply_schema` (for ``auto`` it also allows ``{"answer": "..."}``, a plain answer, unwrapped by `read_reply`), and
  the in-process llama.cpp client builds a grammar from `calls_schema`;
- the answer is read by `read_reply`: the exact JSON first, then tolerant reading (`find_tool_calls`) of the other
  shapes small models write, where the whole answer must be the call (a call mentioned in prose is text). Only the
  offered tools' names become calls. A tool whose schema says ``"text_calls": False`` is called only from a reply
  held to the call schema (``constrained``), never from free text.
"""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from pydantic import BaseModel

from ._messages import (
    AssistantMessage,
    CreateResult,
    FunctionCall,
    FunctionExecutionResultMessage,
    LLMMessage,
    StreamChunk,
    SystemMessage,
    UserMessage,
)
from ._tool_text import INVALID, find_tool_calls, json_tool_calls, load_json
from ._tools import ToolSchema


class _Request(Protocol):
    """What `plan_prompt_tools` reads of a `ChatRequest` (not imported: `_client` imports this module)."""

    @property
    def messages(self) -> list[LLMMessage]: ...
    @property
    def tools(self) -> list[ToolSchema]: ...
    @property
    def tool_choice(self) -> str: ...
    @property
    def json_output(self) -> Any: ...


__all__ = [
    "ANSWER_KEY",
    "TOOL_PREAMBLE",
    "PromptToolPlan",
    "plan_prompt_tools",
    "ToolCalling",
    "calls_schema",
    "calls_text",
    "prompt_messages",
    "prompt_tool_stream",
    "read_reply",
    "resolve_tool_calling",
    "reply_schema",
    "results_text",
    "tool_system_text",
    "with_prompt_tool_calls",
]

ToolCalling = Literal["native", "constrained", "prompt"]
"""How a client gets tool calls from a model:

- ``native``: the tools go to the server's own tool API, which parses the model's calls;
- ``constrained``: the tools are described in a system message and the reply is constrained (a JSON schema or a
  grammar) to the call JSON, so a call is well-formed and validates against the tool's schema;
- ``prompt``: the same system message without a constraint; the answer is read tolerantly."""

TOOL_PREAMBLE = "You can call these tools (name, description, JSON Schema of the arguments):"
"""The first line of the system message that describes the tools."""

ANSWER_KEY = "answer"
"""The key of a plain answer where the reply is held to a JSON schema (``auto``): ``{"answer": "..."}``."""

_CALL_FORMAT = (
    'To call tools, answer with only this JSON and nothing else: {"tool_calls": [{"name": "<tool name>", '
    '"arguments": {<the arguments>}}]}'
)
_ANSWER_FORMAT = 'To answer without a tool, answer with only this JSON: {"answer": "<your answer>"}'
_EMPTY_PARAMETERS: dict[str, Any] = {"type": "object", "properties": {}}


def resolve_tool_calling(setting: ToolCalling | None, *, native_tools: bool, local: bool = True) -> ToolCalling:
    """The mode a call uses: `setting` when given; otherwise ``native``, except on a local server (`local`) for a
    model known to lack native tool calling (`native_tools` False, `ModelInfo.function_calling`): ``constrained``."""
    if setting is not None:
        return setting
    return "constrained" if local and not native_tools else "native"


def _parameters(tool: ToolSchema) -> dict[str, Any]:
    return tool.get("parameters") or _EMPTY_PARAMETERS


def tool_system_text(tools: Sequence[ToolSchema], tool_choice: str, *, answer_object: bool = False) -> str:
    """The system text that describes `tools` to the model and how to call them. `answer_object`: a plain answer
    is the ``{"answer": ...}`` object (a backend held to a JSON schema, `reply_schema`)."""
    listed = [{"name": t["name"], "description": t.get("description", ""), "parameters": _parameters(t)} for t in tools]
    lines = [TOOL_PREAMBLE, json.dumps(listed, ensure_ascii=False), _CALL_FORMAT]
    if tool_choice == "required":
        lines.append("You must call at least one tool.")
    elif tool_choice != "auto":
        lines.append(f"You must call the tool {tool_choice}.")
    elif answer_object:
        lines.append(_ANSWER_FORMAT)
    return "\n".join(lines)


def _loaded(arguments: str) -> Any:
    if not arguments.strip():
        return {}
    value = load_json(arguments)
    return arguments if value is INVALID else value  # not bounded, strict JSON: kept as the model wrote it


def calls_text(calls: Sequence[FunctionCall]) -> str:
    """An assistant turn's calls as the text the model writes for them."""
    listed = [{"id": c.id, "name": c.name, "arguments": _loaded(c.arguments)} for c in calls]
    return json.dumps({"tool_calls": listed}, ensure_ascii=False, allow_nan=False)


def results_text(message: FunctionExecutionResultMessage) -> str:
    """Tool results as the text of the user turn that brings them back to the model."""
    results = [
        {"call_id": r.call_id, "name": r.name, "content": r.content, "is_error": r.is_error} for r in message.content
    ]
    return json.dumps({"tool_results": results}, ensure_ascii=False)


def prompt_messages(messages: Sequence[LLMMessage]) -> list[LLMMessage]:
    """`messages` with tool calls and results written as text (assistant and user turns), for a server that is
    not given native tools."""
    out: list[LLMMessage] = []
    for message in messages:
        if isinstance(message, AssistantMessage) and not isinstance(message.content, str):
            out.append(AssistantMessage(content=calls_text(message.content), source=message.source))
        elif isinstance(message, FunctionExecutionResultMessage):
            out.append(UserMessage(content=results_text(message), source="tools"))
        else:
            out.append(message)
    return out


def calls_schema(tools: Sequence[ToolSchema], tool_choice: str) -> dict[str, Any]:
    """The JSON schema of a tool-call answer: ``{"tool_calls": [one of the tools, ...]}`` (a named `tool_choice`:
    that tool only)."""
    chosen = [t for t in tools if tool_choice in ("auto", "required") or t["name"] == tool_choice]
    items = [
        {
            "type": "object",
            "properties": {"name": {"const": t["name"]}, "arguments": _parameters(t)},
            "required": ["name", "arguments"],
            "additionalProperties": False,
        }
        for t in chosen
    ]
    calls: dict[str, Any] = {"type": "array", "items": items[0] if len(items) == 1 else {"anyOf": items}}
    calls["minItems"] = 1
    return {
        "type": "object",
        "properties": {"tool_calls": calls},
        "required": ["tool_calls"],
        "additionalProperties": False,
    }


def reply_schema(
    tools: Sequence[ToolSchema], tool_choice: str, text_schema: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """The JSON schema a reply is held to on a backend that takes only a JSON schema (no free text).
    ``required`` / a named tool: a call only. ``auto``: a call, or a plain answer ``{"answer": "..."}``
    (`read_reply` unwraps it), or JSON matching `text_schema` (JSON mode / structured output next to tools)."""
    schema = calls_schema(tools, tool_choice)
    if tool_choice != "auto":
        return schema
    answer = text_schema or {
        "type": "object",
        "properties": {ANSWER_KEY: {"type": "string"}},
        "required": [ANSWER_KEY],
        "additionalProperties": False,
    }
    return {"anyOf": [schema, dict(answer)]}


def new_call_id() -> str:
    """A random tool-call id, ``call_`` and 24 hex digits."""
    return "call_" + os.urandom(12).hex()


def _whole_json(text: str) -> Any:
    """`text` decoded when it is one JSON object (`load_json`: bounded and strict), else None."""
    if not text.lstrip().startswith("{"):
        return None
    value = load_json(text)
    return None if value is INVALID else value


def _text_tools(tools: Sequence[ToolSchema]) -> dict[str, dict[str, Any]]:
    """The tools whose calls may be read from free text: all but those whose schema says ``text_calls: False``."""
    return {t["name"]: _parameters(t) for t in tools if t.get("text_calls", True) is not False}


def _function_calls(found: Sequence[tuple[str, dict[str, Any]]], turn: int | None) -> list[FunctionCall]:
    # The reader gives finite numbers only: allow_nan=False holds the JSON strict should that ever change.
    return [
        FunctionCall.of(
            new_call_id() if turn is None else f"call_{turn}_{index}",
            name,
            json.dumps(arguments, ensure_ascii=False, separators=(",", ":"), allow_nan=False),
        )
        for index, (name, arguments) in enumerate(found)
    ]


def read_reply(
    text: str,
    tools: Sequence[ToolSchema],
    *,
    turn: int | None = None,
    unwrap_answer: bool = False,
    constrained: bool = False,
) -> list[FunctionCall] | str:
    """The tool calls in a model's answer, or its text. Calls name one of `tools` and carry their arguments as
    compact JSON text. `unwrap_answer`: a reply that is just ``{"answer": "..."}`` is returned as its text.

    `constrained` (the reply was held to the call JSON or to `text_schema`): a reply that is one JSON object is a
    call only as ``{"tool_calls": [...]}``, so JSON output next to tools stays text; a reply that is not JSON (a
    server that ignored the constraint) is read tolerantly, as always without a constraint (`find_tool_calls`).
    A tool whose schema has ``"text_calls": False`` is called only by a constrained ``{"tool_calls": [...]}``
    reply: read tolerantly, a call of it leaves the reply text.

    With `turn`, call ids are ``call_<turn>_<index>`` (deterministic: the number of messages in the prompt the
    model answered and the call's place in the answer); without, random (`new_call_id`)."""
    value = _whole_json(text) if unwrap_answer or constrained else None
    if isinstance(value, dict):
        if unwrap_answer and set(value) == {ANSWER_KEY} and isinstance(value[ANSWER_KEY], str):
            return str(value[ANSWER_KEY])
        if constrained:
            if set(value) != {"tool_calls"}:
                return text
            # Held to the call schema: every offered tool may be called, text_calls or not.
            found = json_tool_calls(value, {t["name"]: _parameters(t) for t in tools})
            return _function_calls(found, turn) if found else text
    found = find_tool_calls(text, _text_tools(tools))
    return _function_calls(found, turn) if found else text


def with_prompt_tool_calls(
    result: CreateResult,
    tools: Sequence[ToolSchema],
    *,
    turn: int | None = None,
    unwrap_answer: bool = False,
    constrained: bool = False,
) -> CreateResult:
    """`result` with the calls its text holds (`read_reply`) as its content, or its unwrapped answer text."""
    if not isinstance(result.content, str) or not tools:
        return result
    content = read_reply(result.content, tools, turn=turn, unwrap_answer=unwrap_answer, constrained=constrained)
    if isinstance(content, str):
        return result if content is result.content else result.model_copy(update={"content": content})
    return result.model_copy(update={"content": content, "finish_reason": "function_calls"})


async def prompt_tool_stream(
    create: Callable[[], Awaitable[CreateResult]],
) -> AsyncIterator[StreamChunk | CreateResult]:
    """A stream for a prompt-level tool request: whether the answer is a call is known only at its end, so the
    whole answer is generated first; its text (when it is not calls) comes as one chunk, then the result."""
    result = await create()
    if isinstance(result.content, str) and result.content:
        yield StreamChunk.of(result.content)
    yield result


@dataclass(frozen=True)
class PromptToolPlan:
    """A request's tool calling done at the prompt level, for a backend that takes a JSON schema (or nothing):
    the messages to send (the tools' system message first, history with calls and results as text), the schema
    to hold the reply to (None: no constraint), and how to read the answer (`read`)."""

    mode: ToolCalling
    tools: list[ToolSchema]
    messages: list[LLMMessage]
    schema: dict[str, Any] | None
    unwrap_answer: bool

    def read(self, result: CreateResult) -> CreateResult:
        """The provider's result with the calls its text holds, or its unwrapped answer."""
        return with_prompt_tool_calls(
            result, self.tools, unwrap_answer=self.unwrap_answer, constrained=self.mode == "constrained"
        )


def _text_schema(json_output: Any) -> dict[str, Any] | None:
    if isinstance(json_output, type) and issubclass(json_output, BaseModel):
        schema: dict[str, Any] = json_output.model_json_schema()
        return schema
    return {"type": "object"} if json_output else None


def plan_prompt_tools(request: _Request, mode: ToolCalling) -> PromptToolPlan:
    """How to send `request` with tools at the prompt level (`mode` ``constrained`` or ``prompt``). With
    ``tool_choice="none"`` (or no tools) the tools are not offered and nothing is constrained; calls and results
    already in the history are still written as text, since the server is given no native tools."""
    tools = request.tools if request.tool_choice != "none" else []
    messages = prompt_messages(request.messages)
    if not tools:
        return PromptToolPlan(mode, [], messages, None, False)
    constrained = mode == "constrained"
    text_schema = _text_schema(request.json_output)
    answer_object = constrained and request.tool_choice == "auto" and text_schema is None
    system = SystemMessage(content=tool_system_text(tools, request.tool_choice, answer_object=answer_object))
    schema = reply_schema(tools, request.tool_choice, text_schema) if constrained else None
    return PromptToolPlan(mode, list(tools), [system, *messages], schema, answer_object)
