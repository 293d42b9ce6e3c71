"""`ext chat`: stream an answer from any installed provider, with tools run by the tool loop."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping, Sequence
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from ext.core import (
    AssistantMessage,
    ChatClientBuilder,
    ChatCompletionClient,
    ChatOptions,
    CreateResult,
    LLMMessage,
    StreamChunk,
    SystemMessage,
    Tool,
    ToolCallFinished,
    ToolCallStarted,
    ToolLoopEvent,
    UserMessage,
    Workbench,
)

from ._errors import CliError
from ._output import Output
from ._providers import make_client

DEFAULT_MAX_ITERATIONS = 8


def parse_options(pairs: Sequence[str]) -> ChatOptions | None:
    """`-o key=value` pairs validated as `ChatOptions` (values are read as JSON when they parse, else text)."""
    if not pairs:
        return None
    values: dict[str, Any] = {}
    for pair in pairs:
        key, sep, raw = pair.partition("=")
        key = key.strip()
        if not sep or not key:
            raise CliError(f"-o expects key=value, got {pair!r}", hint="for example -o temperature=0")
        try:
            value: Any = json.loads(raw)
        except json.JSONDecodeError:
            value = raw
        if key == "stop_sequences" and isinstance(value, str):
            value = [value]
        values[key] = value
    try:
        return ChatOptions.model_validate(values)
    except ValidationError as exc:
        first = exc.errors(include_input=False, include_url=False)[0]
        loc = ".".join(str(p) for p in first["loc"])
        known = ", ".join(ChatOptions.model_fields)
        raise CliError(f"-o {loc}: {first['msg']}", hint=f"options: {known}") from None


@dataclass
class ChatSettings:
    """What one `ext chat` run asks for."""

    model: str
    system: str | None = None
    options: ChatOptions | None = None
    json_output: bool | type[BaseModel] | None = None
    tools: list[Tool] = field(default_factory=list)
    workbenches: list[Workbench] = field(default_factory=list)
    max_iterations: int = DEFAULT_MAX_ITERATIONS
    tool_choice: str = "auto"
    client_settings: Mapping[str, Any] = field(default_factory=dict)


def _tool_loop_client(client: ChatCompletionClient, settings: ChatSettings, out: Output) -> ChatCompletionClient:
    """`client` wrapped in ext-core's tool loop, showing each tool call and result on stderr as it happens."""

    def show(event: ToolLoopEvent) -> None:
        if isinstance(event, ToolCallStarted):
            out.info(f"→ {event.call.name}({event.call.arguments})", style="cyan")
        elif isinstance(event, ToolCallFinished):
            mark, style = ("✗", "red") if event.result.is_error else ("←", "green")
            out.info(f"{mark} {event.result.name}: {_short(event.result.content)}", style=style)

    tools: list[Tool | Workbench] = [*settings.tools, *settings.workbenches]
    return ChatClientBuilder(client).use_tool_loop(tools, max_iterations=settings.max_iterations, on_event=show).build()


def _short(text: str, limit: int = 300) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


async def chat_turn(
    client: ChatCompletionClient, messages: list[LLMMessage], settings: ChatSettings, out: Output
) -> CreateResult:
    """One turn: stream the answer to `out` and return the final result."""
    result: CreateResult | None = None
    printed = False
    stream = client.create_stream(
        messages, json_output=settings.json_output, options=settings.options, tool_choice=settings.tool_choice
    )
    async for item in stream:
        if isinstance(item, StreamChunk):
            out.thought(item.thought)
            out.answer(item.content)
            printed = printed or bool(item.content)
        else:
            result = item
    if result is None:  # every client ends its stream with the result
        raise CliError("the model's stream ended without a result")
    if not printed and isinstance(result.content, str):
        out.answer(result.content)
    out.end_answer()
    usage = result.usage
    note = " (cached)" if result.cached else ""
    out.info(
        f"[{result.finish_reason}; {usage.prompt_tokens} prompt + {usage.completion_tokens} completion tokens{note}]"
    )
    return result


async def run_chat(settings: ChatSettings, question: str | None, out: Output, read_line: Any = None) -> int:
    """Run one question, or an interactive session when `question` is None."""
    with out.status(f"Loading {_model_label(settings.model)} …"):
        client = await asyncio.to_thread(make_client, settings.model, settings.client_settings)
    async with AsyncExitStack() as stack:
        stack.push_async_callback(client.close)
        for workbench in settings.workbenches:
            with out.status("Starting MCP server …"):
                await workbench.start()
            stack.push_async_callback(workbench.stop)
        active = _tool_loop_client(client, settings, out) if settings.tools or settings.workbenches else client
        messages: list[LLMMessage] = []
        if settings.system:
            messages.append(SystemMessage(content=settings.system))
        if question is not None:
            messages.append(UserMessage(content=question, source="user"))
            await chat_turn(active, messages, settings, out)
            return 0
        reader = read_line or _read_line
        out.info("Interactive chat: type a message, or 'exit' (Ctrl-D) to leave.")
        while True:
            line = await reader()
            if line is None or line.strip() in {"exit", "quit"}:
                return 0
            if not line.strip():
                continue
            messages.append(UserMessage(content=line, source="user"))
            result = await chat_turn(active, messages, settings, out)
            if isinstance(result.content, str):
                messages.append(AssistantMessage(content=result.content, source="assistant"))


def _model_label(spec: str) -> str:
    """`llama-cpp:/long/path/model.gguf` -> `llama-cpp:model.gguf`: the part a person reads."""
    provider, _, model = spec.partition(":")
    return f"{provider}:{Path(model).name}" if "/" in model else spec


async def _read_line() -> str | None:
    try:
        return await asyncio.to_thread(input, "> ")
    except EOFError:
        return None
