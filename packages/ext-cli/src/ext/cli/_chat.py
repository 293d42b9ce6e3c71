"""`ext chat`: stream an answer from any installed provider, with tools run by the tool loop."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Mapping, Sequence
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from ext.core import (
    AssistantMessage,
    ChatCompletionClient,
    ChatOptions,
    CreateResult,
    FallbackEvent,
    FunctionExecutionResult,
    FunctionExecutionResultMessage,
    LLMMessage,
    RequestUsage,
    StreamChunk,
    SystemMessage,
    Tool,
    UserMessage,
    Workbench,
)
from ext.memory import DEFAULT_TOP_K, MemoryMiddleware
from ext.pipeline import ChatClientBuilder, ModelTurn, ToolCallFinished, ToolCallStarted, ToolLoopEvent

from ._errors import CliError
from ._memory import MemorySettings, open_memory
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
    endpoint: str | None = None
    system: str | None = None
    options: ChatOptions | None = None
    json_output: bool | type[BaseModel] | None = None
    tools: list[Tool] = field(default_factory=list)
    workbenches: list[Workbench] = field(default_factory=list)
    max_iterations: int = DEFAULT_MAX_ITERATIONS
    tool_choice: str = "auto"
    client_settings: Mapping[str, Any] = field(default_factory=dict)
    memory: MemorySettings | None = None
    memory_top_k: int = DEFAULT_TOP_K


class ToolTurns:
    """The tool loop's events for one user turn: each call and result shown on stderr as it happens, the text of
    a model turn that ends in tool calls moved to stderr (only the final answer goes to stdout), and the
    assistant's tool calls and their results kept so the conversation's history holds them."""

    def __init__(self, out: Output) -> None:
        self._out = out
        self._pending: list[str] = []
        self._results: dict[str, FunctionExecutionResult] = {}
        self.messages: list[LLMMessage] = []

    def start(self) -> None:
        self._pending.clear()
        self._results.clear()
        self.messages = []

    def text(self, piece: str) -> None:
        self._pending.append(piece)

    def on_event(self, event: ToolLoopEvent) -> None:
        out = self._out
        if isinstance(event, ModelTurn):
            text = "".join(self._pending).strip()
            self._pending.clear()
            calls = event.result.content
            if isinstance(calls, list):
                if text:
                    out.info(f"… {_short(text)}")
                self._close_turn()
                self.messages.append(AssistantMessage(content=calls, thought=event.result.thought, source="assistant"))
        elif isinstance(event, ToolCallStarted):
            out.info(f"→ {event.call.name}({event.call.arguments})", style="cyan")
        elif isinstance(event, ToolCallFinished):
            self._results[event.call.id] = event.result
            mark, style = ("✗", "red") if event.result.is_error else ("←", "green")
            out.info(f"{mark} {event.result.name}: {_short(event.result.content)}", style=style)

    def _close_turn(self) -> None:
        """The results of the previous assistant turn's calls, in the order of the calls."""
        if not self.messages:
            return
        last = self.messages[-1]
        if isinstance(last, AssistantMessage) and isinstance(last.content, list):
            done = [self._results[c.id] for c in last.content if c.id in self._results]
            if done:
                self.messages.append(FunctionExecutionResultMessage(content=done))

    def finish(self) -> list[LLMMessage]:
        """The tool calls and results of this user turn, to go into the history before the final answer."""
        self._close_turn()
        self._pending.clear()
        return self.messages


def _tool_loop_client(client: ChatCompletionClient, settings: ChatSettings, turns: ToolTurns) -> ChatCompletionClient:
    """`client` wrapped in ext-core's tool loop, reporting to `turns`."""
    tools: list[Tool | Workbench] = [*settings.tools, *settings.workbenches]
    builder = ChatClientBuilder(client)
    return builder.use_tool_loop(tools, max_iterations=settings.max_iterations, on_event=turns.on_event).build()


def _short(text: str, limit: int = 300) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


async def chat_turn(
    client: ChatCompletionClient,
    messages: list[LLMMessage],
    settings: ChatSettings,
    out: Output,
    turns: ToolTurns | None = None,
) -> CreateResult:
    """One turn: the answer to `out` (streamed; with tools, written once the model stops calling them) and the
    final result."""
    result: CreateResult | None = None
    printed = False
    if turns is not None:
        turns.start()
    stream = client.create_stream(
        messages, json_output=settings.json_output, options=settings.options, tool_choice=settings.tool_choice
    )
    async for item in stream:
        if isinstance(item, FallbackEvent):  # a fallback middleware switched clients: say so, on stderr
            out.info(f"[fallback: {item.from_client} -> {item.to_client} ({item.reason})]")
            continue
        if isinstance(item, StreamChunk):
            out.thought(item.thought)
            if turns is not None:
                turns.text(item.content)  # final or intermediate: known when the turn ends
            else:
                out.answer(item.content)
                printed = printed or bool(item.content)
        else:
            result = item
    if result is None:  # every client ends its stream with the result
        raise CliError("the model's stream ended without a result")
    if not printed and isinstance(result.content, str):
        out.answer(result.content.strip() if turns is not None else result.content)
    out.end_answer()
    usage = result.usage
    note = " (cached)" if result.cached else _cost_note(client, usage)
    out.info(
        f"[{result.finish_reason}; {usage.prompt_tokens} prompt + {usage.completion_tokens} completion tokens{note}]"
    )
    return result


def _cost_note(client: ChatCompletionClient, usage: RequestUsage) -> str:
    """`; $0.000123` when ext-resilience (`ext-cli[cost]`) prices the model, else nothing."""
    try:
        from ext.resilience import price_usage
    except ImportError:
        return ""
    model = str(getattr(client, "model", "") or "")
    cost = price_usage(model, usage, provider=getattr(client, "provider_name", None)) if model else None
    return "" if cost is None else f"; ${cost:.6f}"


async def run_chat(settings: ChatSettings, question: str | None, out: Output, read_line: Any = None) -> int:
    """Run one question, or an interactive session when `question` is None."""
    with out.status(f"Loading {_model_label(settings.model)} …"):
        client = await asyncio.to_thread(
            make_client, settings.model, settings.client_settings, endpoint=settings.endpoint
        )
    async with AsyncExitStack() as stack:
        stack.push_async_callback(client.close)
        if settings.memory is not None:
            # Inside the tool loop: each model turn gets the memories closest to the question.
            memory = await stack.enter_async_context(open_memory(settings.memory, out, create=False))
            middleware = MemoryMiddleware(memory, top_k=settings.memory_top_k)
            client = ChatClientBuilder(client).use(middleware).build()
        for workbench in settings.workbenches:
            with out.status("Starting MCP server …"):
                await workbench.start()
            stack.push_async_callback(workbench.stop)
        has_tools = bool(settings.tools or settings.workbenches)
        turns = ToolTurns(out) if has_tools else None
        active = _tool_loop_client(client, settings, turns) if turns is not None else client
        messages: list[LLMMessage] = []
        if settings.system:
            messages.append(SystemMessage(content=settings.system))
        if question is not None:
            messages.append(UserMessage(content=question, source="user"))
            await chat_turn(active, messages, settings, out, turns)
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
            result = await chat_turn(active, messages, settings, out, turns)
            if turns is not None:
                messages.extend(turns.finish())  # the tool calls and results, so a follow-up can refer to them
            if isinstance(result.content, str):
                messages.append(AssistantMessage(content=result.content, source="assistant"))


def _model_label(spec: str) -> str:
    """`llama-cpp:/long/path/model.gguf` -> `llama-cpp:model.gguf`: the part a person reads."""
    provider, _, model = spec.partition(":")
    return f"{provider}:{Path(model).name}" if "/" in model else spec


async def _read_line() -> str | None:
    """A line from stdin, or None at end of input.

    `input` blocks until Enter; it runs on a daemon thread of its own (not the default executor, which
    `asyncio.run` waits for on the way out), so Ctrl-C at the prompt ends the command at once.
    """
    loop = asyncio.get_running_loop()
    future: asyncio.Future[str | None] = loop.create_future()

    def read() -> None:
        try:
            line: str | None = input("> ")
        except EOFError:
            line = None
        except BaseException as exc:  # handed to the waiting coroutine
            loop.call_soon_threadsafe(_settle, future, None, exc)
            return
        loop.call_soon_threadsafe(_settle, future, line, None)

    threading.Thread(target=read, name="ext-chat-input", daemon=True).start()
    return await future


def _settle(future: asyncio.Future[str | None], value: str | None, error: BaseException | None) -> None:
    if future.done():
        return
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(value)
