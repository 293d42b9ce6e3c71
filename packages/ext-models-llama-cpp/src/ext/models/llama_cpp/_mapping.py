"""ext messages, tools and options to llama-cpp-python's chat call, and the model's output back.

Tool calling is done by ext at the prompt level, the same way for every chat template: the tools are described
in a system message, the model answers a call as one JSON object ``{"tool_calls": [{"name": ..., "arguments":
{...}}]}``, and a grammar built from the tools' JSON schemas makes that object valid (``required`` / a named
tool: only calls are possible; ``auto``: a call, or text that does not start with ``{``). Earlier calls and their
results go back into the prompt as the same JSON (results in a user message ``{"tool_results": [...]}``), so a
tool loop round-trips through any chat template, including ones that know nothing of tools.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from ext.core import (
    TOOL_PREAMBLE,
    AssistantMessage,
    ChatRequest,
    ConfigurationError,
    FunctionCall,
    FunctionExecutionResultMessage,
    LLMMessage,
    SystemMessage,
    ToolCalling,
    ToolSchema,
    UnsupportedOptionError,
    UserMessage,
    calls_schema,
    calls_text,
    read_reply,
    results_text,
    tool_system_text,
)

__all__ = [
    "TOOL_PREAMBLE",
    "LlamaCall",
    "calls_schema",
    "check_extra_args",
    "map_messages",
    "map_request",
    "parse_output",
    "tool_grammar",
    "tool_system_text",
]


def _text(message: UserMessage | SystemMessage) -> str:
    content = message.content
    if isinstance(content, str):
        return content
    return "\n".join(part for part in content if isinstance(part, str))


def map_messages(messages: Sequence[LLMMessage]) -> list[dict[str, str]]:
    """ext messages as the role/content dicts a llama-cpp-python chat template renders."""
    out: list[dict[str, str]] = []
    for message in messages:
        if isinstance(message, SystemMessage):
            out.append({"role": "system", "content": message.content})
        elif isinstance(message, UserMessage):
            out.append({"role": "user", "content": _text(message)})
        elif isinstance(message, AssistantMessage):
            if isinstance(message.content, str):
                out.append({"role": "assistant", "content": message.content})
            else:
                out.append({"role": "assistant", "content": calls_text(message.content)})
        elif isinstance(message, FunctionExecutionResultMessage):
            out.append({"role": "user", "content": results_text(message)})
        else:  # pragma: no cover - the base validated the messages
            raise ConfigurationError(f"unsupported message type {type(message).__name__}")
    return out


_ROOT_RULE = re.compile(r"^root ::= ", re.MULTILINE)


def tool_grammar(tools: Sequence[ToolSchema], tool_choice: str, text_schema: dict[str, Any] | None) -> str:
    """GBNF for a reply with tools. ``required`` / named: only a tool-call object. ``auto``: a tool-call object or
    text, where text is free text that does not start with ``{`` (``text_schema`` None), or JSON matching
    ``text_schema`` (JSON mode / structured output next to tools)."""
    from llama_cpp.llama_grammar import json_schema_to_gbnf

    schema = calls_schema(tools, tool_choice)
    if tool_choice != "auto":
        return str(json_schema_to_gbnf(json.dumps(schema)))
    if text_schema is not None:
        return str(json_schema_to_gbnf(json.dumps({"anyOf": [schema, text_schema]})))
    calls = _ROOT_RULE.sub("tool-calls ::= ", str(json_schema_to_gbnf(json.dumps(schema))), count=1)
    return f"root ::= tool-calls | free-text\nfree-text ::= ([^{{] [^\\x00]*)?\n{calls}"


@dataclass(slots=True)
class LlamaCall:
    """One mapped request: the keyword arguments of ``Llama.create_chat_completion`` (without ``stream``) and how
    to read the answer. ``grammar`` is GBNF text (built into a ``LlamaGrammar`` by the client)."""

    kwargs: dict[str, Any]
    grammar: str | None
    tools: list[ToolSchema]
    tool_choice: str
    buffer_text: bool
    """True when streamed text must be held back until the end (it may be a tool call)."""
    tolerant: bool = False
    """True when the answer is read tolerantly (``prompt`` mode: no grammar held the model to the call JSON)."""


def _json_schema(json_output: bool | type[BaseModel]) -> dict[str, Any]:
    if isinstance(json_output, type):
        return json_output.model_json_schema()
    return {"type": "object"}


_OWN_ARGUMENTS = {
    "stream": "create() returns one CreateResult and create_stream() streams; call create_stream() for a stream",
    "messages": "pass the messages as the first argument of create() / create_stream()",
}
"""`create_chat_completion` arguments the client sets itself, so `extra_create_args` cannot carry them."""


def check_extra_args(extra: Mapping[str, Any]) -> None:
    """Refuse `extra_create_args` keys the client sets itself (llama-cpp-python would raise a bare `TypeError`
    for a keyword given twice, after the call started)."""
    for name, why in _OWN_ARGUMENTS.items():
        if name in extra:
            raise UnsupportedOptionError(
                f"extra_create_args={{{name!r}: {extra[name]!r}}} is not accepted by LlamaCppChatCompletionClient: "
                f"the client sets {name!r} itself; {why}"
            )


def map_request(request: ChatRequest, sampling: dict[str, Any], mode: ToolCalling = "constrained") -> LlamaCall:
    """The chat call for ``request``. ``sampling`` holds the client's defaults (temperature, top_p, top_k,
    max_tokens, min_p, repeat_penalty), overridden here by the call's ``ChatOptions``. ``mode``: ``constrained``
    holds a reply with tools to the call JSON by a grammar; ``prompt`` describes the tools only (no grammar) and
    reads the answer tolerantly."""
    options = request.options
    kwargs: dict[str, Any] = dict(sampling)
    for name, value in (
        ("temperature", options.temperature),
        ("top_p", options.top_p),
        ("top_k", options.top_k),
        ("max_tokens", options.max_tokens),
        ("frequency_penalty", options.frequency_penalty),
        ("presence_penalty", options.presence_penalty),
        ("seed", options.seed),
    ):
        if value is not None:
            kwargs[name] = value
    if options.stop_sequences:
        kwargs["stop"] = list(options.stop_sequences)
    kwargs.update(request.extra)

    messages = map_messages(request.messages)
    tools = request.tools if request.tool_choice != "none" else []
    grammar: str | None = None
    buffer_text = False
    if tools:
        messages.insert(0, {"role": "system", "content": tool_system_text(tools, request.tool_choice)})
        text_schema = _json_schema(request.json_output) if request.json_output else None
        if mode == "prompt":
            buffer_text = True  # any text may hold a call written another way: read at the end
        else:
            grammar = tool_grammar(tools, request.tool_choice, text_schema)
            buffer_text = request.tool_choice != "auto" or text_schema is not None
    elif request.json_output:
        response_format: dict[str, Any] = {"type": "json_object"}
        if isinstance(request.json_output, type):
            response_format["schema"] = _json_schema(request.json_output)
        kwargs["response_format"] = response_format
    kwargs["messages"] = messages
    return LlamaCall(
        kwargs=kwargs,
        grammar=grammar,
        tools=list(tools),
        tool_choice=request.tool_choice,
        buffer_text=buffer_text,
        tolerant=mode == "prompt",
    )


def parse_output(
    text: str, tools: Sequence[ToolSchema], *, turn: int | None = None, constrained: bool = False
) -> list[FunctionCall] | None:
    """The tool calls in the model's answer, or None when it is text (`ext.core.read_reply`: the call JSON, then
    the other shapes small models write). Calls name one of ``tools`` and carry their arguments as compact JSON.

    With ``turn``, call ids are ``call_<turn>_<index>``: ``turn`` is the number of messages in the prompt the
    model answered (the client passes the messages it sent to llama.cpp, including the system message that
    describes the tools), ``index`` the call's place in the answer, from 0. So they are deterministic, not
    fresh: unique within a conversation (each turn adds messages) and the same on every run, so a
    temperature-0 tool loop renders the same prompts and gives the same answers each time. Without ``turn``,
    ids are random. ``constrained``: JSON that is not ``{"tool_calls": [...]}`` is text (JSON output next to
    tools)."""
    if not tools:
        return None
    content = read_reply(text, tools, turn=turn, constrained=constrained)
    return None if isinstance(content, str) else content
