"""The tool loop: run the tools a model asks for and ask again, until a final answer.

`ToolLoop` is a middleware (`ChatClientBuilder.use_tool_loop`). Per user call it lists its tools (plain tools
and each workbench's `list_tools()`), adds them to the call, and then, turn by turn:

1. asks the model (through the middlewares placed after the loop; `call.turn` is 1, 2, ...);
2. if the answer is text, returns it: the final result, with `usage` summed over every turn;
3. otherwise runs every tool call of the answer, concurrently, each through the `call_tool` hooks of the
   middlewares placed after the loop; appends the assistant turn and one `FunctionExecutionResultMessage`
   holding the results in the order of the calls; and goes back to 1.

A tool that fails, times out, gets arguments that are not valid JSON, or is not known, gives an
`is_error=True` result that goes back to the model, which can recover. The caller's `tool_choice` applies to
the first turn only (later turns use `auto`, or the loop could never end). A call to a tool the caller passed
as a bare schema (nothing the loop can run) ends the loop: that result, with its function calls, is returned
to the caller. At `max_iterations` model turns the loop stops and returns the last result as it is: if the
model still asked for tools, its `content` holds those calls, not run, and `finish_reason` is
`function_calls` (a warning is logged). A cancelled token stops the loop: the model call or the tools in flight
are cancelled and `asyncio.CancelledError` is raised.

Streaming (`create_stream`) yields the chunks of every turn, then one final `CreateResult`. Tool calls and
their results are reported as they happen through `on_event` (a function or coroutine function taking a
`ToolLoopEvent`): `ModelTurn` after each model answer, `ToolCallStarted` / `ToolCallFinished` around each call,
`ToolCallHeld` for a call held back. The loop awaits `on_event` before it goes on, so a caller that saves what
it is told there (an agent keeping its session) has saved each answer before its tools run and each tool
result before the next model call.

Holding calls (`hold`, a function or coroutine function taking the `ToolInvocation`): a call for which it
returns True is not run. The other calls of the same answer run; then the loop stops and returns the model's
result with `content` holding only the held calls (`finish_reason` `function_calls`). A caller that approves
them later continues the conversation as below.

Continuing an interrupted turn: when the call's messages end with an assistant answer whose tool calls are not
all answered (the last message is that `AssistantMessage`, or a `FunctionExecutionResultMessage` holding the
results of only some of its calls), the loop first runs the unanswered calls (events carry `turn=0`; `hold`
applies), completes the results message with the results in the order of the calls, and then asks the model.
A call that already has a result is never run again: a turn saved step by step survives a crash this way.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Union

from pydantic import BaseModel, ConfigDict, Field

from ext.core import (
    AssistantMessage,
    CancellationToken,
    CancelScope,
    ComponentError,
    ComponentModel,
    ConfigurationError,
    CreateResult,
    FunctionCall,
    FunctionExecutionResult,
    FunctionExecutionResultMessage,
    LLMMessage,
    RequestUsage,
    Tool,
    ToolArgumentsError,
    ToolSchema,
    Workbench,
    load_component,
    parse_tool_arguments,
    tool_schema_of,
)

from ._pipeline import ChatCall, ChatItem, CreateNext, LoopHooks, StreamNext, ToolInvocation, ToolLoopBase, ToolNext

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class ModelTurn:
    """The model answered turn `turn` with `result` (tool calls, or the final text)."""

    turn: int
    result: CreateResult


@dataclass(frozen=True, slots=True)
class ToolCallStarted:
    """The loop is about to run `call` (asked for in turn `turn`)."""

    turn: int
    call: FunctionCall


@dataclass(frozen=True, slots=True)
class ToolCallFinished:
    """`call` finished with `result` (`result.is_error` when it failed)."""

    turn: int
    call: FunctionCall
    result: FunctionExecutionResult


@dataclass(frozen=True, slots=True)
class ToolCallHeld:
    """`hold` held `call` back: it is not run, and the loop stops after the other calls of the turn."""

    turn: int
    call: FunctionCall


ToolLoopEvent = Union[ModelTurn, ToolCallStarted, ToolCallFinished, ToolCallHeld]
EventCallback = Callable[[ToolLoopEvent], Union[Awaitable[None], None]]
HoldCallback = Callable[[ToolInvocation], Union[Awaitable[bool], bool]]


class ToolLoopConfig(BaseModel):
    """Config of a `ToolLoop`: its tools and workbenches as component dumps (`on_event` is not dumped)."""

    model_config = ConfigDict(defer_build=True)

    tools: list[ComponentModel] = Field(default_factory=list)
    max_iterations: int = Field(default=10, ge=1)


class _Runnable:
    """The loop's tools for one user call: schemas to send and what runs each name."""

    __slots__ = ("plain", "schemas", "workbench_of")

    def __init__(self) -> None:
        self.schemas: list[Tool | ToolSchema] = []
        self.plain: dict[str, Tool] = {}
        self.workbench_of: dict[str, Workbench] = {}

    def add(self, name: str) -> None:
        if name in self.plain or name in self.workbench_of:
            raise ConfigurationError(f"tool loop: two tools are named {name!r}")


class ToolLoop(ToolLoopBase):
    """Runs the tools a model asks for until it answers (see the module docstring).

    `tools` are plain `Tool`s and `Workbench`es. A workbench is started on first use and stopped by the
    pipeline's `close()`. `max_iterations` (default 10) caps the model turns per user call. `on_event` receives
    the loop's events, `hold` decides which calls are held back (see the module docstring).
    """

    component_config_schema = ToolLoopConfig
    component_provider_override = "ext.pipeline.ToolLoop"

    def __init__(
        self,
        tools: Sequence[Tool | Workbench],
        *,
        max_iterations: int = 10,
        on_event: EventCallback | None = None,
        hold: HoldCallback | None = None,
    ) -> None:
        given: object = tools
        if isinstance(given, (str, bytes)) or not isinstance(given, Sequence):
            raise ConfigurationError(f"tools must be a list of tools or workbenches, got {type(tools).__name__}")
        if not isinstance(max_iterations, int) or isinstance(max_iterations, bool) or max_iterations < 1:
            raise ConfigurationError(f"max_iterations must be an int >= 1, got {max_iterations!r}")
        if on_event is not None and not callable(on_event):
            raise ConfigurationError(f"on_event must be callable, got {type(on_event).__name__}")
        if hold is not None and not callable(hold):
            raise ConfigurationError(f"hold must be callable, got {type(hold).__name__}")
        plain: dict[str, Tool] = {}
        workbenches: list[Workbench] = []
        for index, item in enumerate(tools):
            if isinstance(item, Workbench):
                workbenches.append(item)
            elif isinstance(item, Tool):
                if item.name in plain:
                    raise ConfigurationError(f"tool loop: two tools are named {item.name!r}")
                plain[item.name] = item
            else:
                raise ConfigurationError(f"tools[{index}] must be a Tool or a Workbench, got {type(item).__name__}")
        self._items = list(tools)
        self._plain = plain
        self._workbenches = workbenches
        self._max_iterations = max_iterations
        self._on_event = on_event
        self._hold = hold
        self._started: list[Workbench] = []
        self._start_lock: asyncio.Lock | None = None

    @property
    def max_iterations(self) -> int:
        return self._max_iterations

    def __repr__(self) -> str:
        return (
            f"ToolLoop(tools={len(self._plain)}, workbenches={len(self._workbenches)}, "
            f"max_iterations={self._max_iterations})"
        )

    # --- tools of one call -----------------------------------------------------------------------

    async def _start_workbenches(self) -> None:
        if len(self._started) == len(self._workbenches):
            return
        if self._start_lock is None:
            self._start_lock = asyncio.Lock()
        async with self._start_lock:
            for workbench in self._workbenches:
                if not any(w is workbench for w in self._started):
                    await workbench.start()
                    self._started.append(workbench)

    async def _runnable(self, call: ChatCall) -> _Runnable:
        runnable = _Runnable()
        for tool in self._plain.values():
            runnable.schemas.append(tool)
            runnable.plain[tool.name] = tool
        if self._workbenches:
            await self._start_workbenches()
            for workbench in self._workbenches:
                for schema in await workbench.list_tools():
                    runnable.add(schema["name"])
                    runnable.schemas.append(schema)
                    runnable.workbench_of[schema["name"]] = workbench
        for item in call.tools:
            name = tool_schema_of(item)["name"]
            runnable.add(name)
            runnable.schemas.append(item)
            if not isinstance(item, dict) and isinstance(item, Tool):
                runnable.plain[name] = item
        return runnable

    # --- running -----------------------------------------------------------------------------------

    def bind(self, hooks: LoopHooks) -> tuple[CreateNext, StreamNext]:
        next_create = hooks.create
        next_stream = hooks.stream
        run_tool = hooks.wrap_tool(self._execute)
        max_iterations = self._max_iterations
        emit = self._emit

        async def loop(call: ChatCall) -> CreateResult:
            runnable = await self._runnable(call)
            messages: list[LLMMessage] = list(call.messages)
            results: list[CreateResult] = []
            held = await self._resume(call, messages, runnable, run_tool)
            if held:
                return _held(None, held, results)
            for turn in range(1, max_iterations + 1):
                _check(call.cancellation_token)
                result = await next_create(_turn_call(call, messages, runnable, turn))
                results.append(result)
                await emit(ModelTurn(turn, result))
                if not _should_run(result, runnable, turn, max_iterations):
                    return _final(result, results)
                held = await self._run_turn(call, result, turn, messages, runnable, run_tool)
                if held:
                    return _held(result, held, results)
            raise AssertionError("unreachable")  # pragma: no cover

        async def loop_stream(call: ChatCall) -> AsyncIterator[ChatItem]:
            runnable = await self._runnable(call)
            messages: list[LLMMessage] = list(call.messages)
            results: list[CreateResult] = []
            held = await self._resume(call, messages, runnable, run_tool)
            if held:
                yield _held(None, held, results)
                return
            for turn in range(1, max_iterations + 1):
                _check(call.cancellation_token)
                stream = next_stream(_turn_call(call, messages, runnable, turn))
                result: CreateResult | None = None
                try:
                    async for item in stream:
                        if isinstance(item, CreateResult):
                            result = item
                        else:
                            yield item
                finally:
                    aclose = getattr(stream, "aclose", None)
                    if aclose is not None:
                        await aclose()
                if result is None:
                    raise ConfigurationError("the model stream ended without a CreateResult")
                results.append(result)
                await emit(ModelTurn(turn, result))
                if not _should_run(result, runnable, turn, max_iterations):
                    yield _final(result, results)
                    return
                held = await self._run_turn(call, result, turn, messages, runnable, run_tool)
                if held:
                    yield _held(result, held, results)
                    return

        return hooks.wrap_loop(loop), hooks.wrap_loop_stream(loop_stream)

    async def _run_turn(
        self,
        call: ChatCall,
        result: CreateResult,
        turn: int,
        messages: list[LLMMessage],
        runnable: _Runnable,
        run_tool: ToolNext,
    ) -> list[FunctionCall]:
        """Run the calls of `result`; append the assistant turn and the results. Returns the held calls."""
        calls = result.content
        assert isinstance(calls, list)
        outcomes, held = await self._run_calls(call, calls, turn, runnable, run_tool)
        messages.append(result.to_assistant_message())
        if outcomes:
            messages.append(FunctionExecutionResultMessage(content=outcomes))
        return held

    async def _resume(
        self, call: ChatCall, messages: list[LLMMessage], runnable: _Runnable, run_tool: ToolNext
    ) -> list[FunctionCall]:
        """Run the unanswered calls of an interrupted turn at the end of `messages` (see the module docstring)
        and complete its results message. Returns the held calls."""
        unanswered = _unanswered(messages)
        if unanswered is None:
            return []
        calls, done = unanswered
        answered = {r.call_id for r in done}
        todo = [fc for fc in calls if fc.id not in answered]
        outcomes, held = await self._run_calls(call, todo, 0, runnable, run_tool)
        by_id = {r.call_id: r for r in [*done, *outcomes]}
        merged = [by_id[fc.id] for fc in calls if fc.id in by_id]
        if done:
            messages.pop()
        if merged:
            messages.append(FunctionExecutionResultMessage(content=merged))
        return held

    async def _run_calls(
        self, call: ChatCall, calls: list[FunctionCall], turn: int, runnable: _Runnable, run_tool: ToolNext
    ) -> tuple[list[FunctionExecutionResult], list[FunctionCall]]:
        """Run `calls` concurrently, except those `hold` holds back: (results in call order, held calls)."""
        token = call.cancellation_token
        invocations = [
            ToolInvocation(
                fc,
                turn,
                call,
                runnable.plain.get(fc.name),
                runnable.workbench_of.get(fc.name),
                token,
            )
            for fc in calls
        ]
        held: list[FunctionCall] = []
        if self._hold is not None:
            kept = []
            for invocation in invocations:
                verdict = self._hold(invocation)
                if inspect.isawaitable(verdict):
                    verdict = await verdict
                if verdict:
                    held.append(invocation.call)
                    await self._emit(ToolCallHeld(turn, invocation.call))
                else:
                    kept.append(invocation)
            invocations = kept

        async def one(invocation: ToolInvocation) -> FunctionExecutionResult:
            await self._emit(ToolCallStarted(turn, invocation.call))
            outcome = await run_tool(invocation)
            await self._emit(ToolCallFinished(turn, invocation.call, outcome))
            return outcome

        with CancelScope(token):
            if not invocations:
                outcomes = []
            elif len(invocations) == 1:
                outcomes = [await one(invocations[0])]
            else:
                outcomes = await _gather_all_or_none([one(i) for i in invocations])
        return outcomes, held

    async def _execute(self, invocation: ToolInvocation) -> FunctionExecutionResult:
        """The end of the `call_tool` chain: run the tool, turning every failure into an error result."""
        fc = invocation.call
        if invocation.tool is None and invocation.workbench is None:
            return _error(fc, f"unknown tool {fc.name!r}")
        try:
            arguments = parse_tool_arguments(fc.arguments, tool=fc.name)
        except ToolArgumentsError as exc:
            return _error(fc, str(exc))
        try:
            if invocation.tool is not None:
                value = await invocation.tool.run_json(arguments, invocation.cancellation_token, fc.id)
                text = invocation.tool.return_value_as_string(value)
                return FunctionExecutionResult(call_id=fc.id, name=fc.name, content=text, is_error=False)
            assert invocation.workbench is not None
            outcome = await invocation.workbench.call_tool(
                fc.name, arguments, invocation.cancellation_token, call_id=fc.id
            )
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # the model sees the failure and can recover
            logger.debug("tool %s failed", fc.name, exc_info=True)
            return _error(fc, f"{type(exc).__name__}: {exc}")
        return FunctionExecutionResult(
            call_id=fc.id, name=fc.name, content=outcome.to_text(), is_error=outcome.is_error
        )

    async def _emit(self, event: ToolLoopEvent) -> None:
        callback = self._on_event
        if callback is None:
            return
        outcome = callback(event)
        if inspect.isawaitable(outcome):
            await outcome

    async def close(self) -> None:
        """Stop the workbenches this loop started."""
        started, self._started = self._started, []
        for workbench in started:
            await workbench.stop()

    # --- components --------------------------------------------------------------------------------

    def _to_config(self) -> ToolLoopConfig:
        dumps = []
        for item in self._items:
            dump = getattr(item, "dump_component", None)
            if dump is None:
                name = getattr(item, "name", type(item).__name__)
                raise ComponentError(f"tool loop: {name!r} is not a component and cannot be dumped")
            dumps.append(dump())
        return ToolLoopConfig(tools=dumps, max_iterations=self._max_iterations)

    @classmethod
    def _from_config(cls, config: ToolLoopConfig) -> ToolLoop:
        return cls([load_component(t) for t in config.tools], max_iterations=config.max_iterations)


def _check(token: CancellationToken | None) -> None:
    if token is not None and token.is_cancelled():
        raise asyncio.CancelledError("cancelled by CancellationToken")


def _turn_call(call: ChatCall, messages: list[LLMMessage], runnable: _Runnable, turn: int) -> ChatCall:
    return call.replace(
        messages=list(messages),
        tools=runnable.schemas,
        tool_choice=call.tool_choice if turn == 1 else "auto",
        turn=turn,
    )


def _should_run(result: CreateResult, runnable: _Runnable, turn: int, max_iterations: int) -> bool:
    calls = result.content
    if not isinstance(calls, list) or not calls:
        return False
    # A tool the caller passed as a bare schema: the caller runs it, so the loop hands the calls back.
    known = runnable.plain.keys() | runnable.workbench_of.keys()
    schema_only = {tool_schema_of(t)["name"] for t in runnable.schemas} - known
    if any(fc.name in schema_only for fc in calls):
        return False
    if turn >= max_iterations:
        logger.warning(
            "tool loop stopped at max_iterations=%d with %d tool call(s) not run", max_iterations, len(calls)
        )
        return False
    return True


def _unanswered(messages: list[LLMMessage]) -> tuple[list[FunctionCall], list[FunctionExecutionResult]] | None:
    """(the calls, the results already there) of an assistant turn at the end of `messages` whose calls are not
    all answered; None when the messages do not end that way."""
    if not messages:
        return None
    last = messages[-1]
    if isinstance(last, AssistantMessage):
        if isinstance(last.content, list) and last.content:
            return list(last.content), []
        return None
    if isinstance(last, FunctionExecutionResultMessage) and len(messages) >= 2:
        before = messages[-2]
        if isinstance(before, AssistantMessage) and isinstance(before.content, list):
            ids = {fc.id for fc in before.content}
            answered = {r.call_id for r in last.content}
            if answered < ids:
                return list(before.content), list(last.content)
    return None


def _held(result: CreateResult | None, held: list[FunctionCall], results: list[CreateResult]) -> CreateResult:
    """The loop's answer when calls are held: their calls as the content, usage summed over the turns."""
    usage = RequestUsage.sum(r.usage for r in results)
    if result is None:
        return CreateResult(finish_reason="function_calls", content=held, usage=usage, cached=False)
    return result.model_copy(update={"content": held, "finish_reason": "function_calls", "usage": usage})


def _final(result: CreateResult, results: list[CreateResult]) -> CreateResult:
    if len(results) == 1:
        return result
    usage = RequestUsage.sum(r.usage for r in results)
    return result.model_copy(update={"usage": usage, "cached": all(r.cached for r in results)})


def _error(call: FunctionCall, message: str) -> FunctionExecutionResult:
    return FunctionExecutionResult(call_id=call.id, name=call.name, content=message, is_error=True)


async def _gather_all_or_none(work: list[Awaitable[FunctionExecutionResult]]) -> list[FunctionExecutionResult]:
    """Every result in order; if one raises (or this task is cancelled), the others are cancelled and awaited
    before the error propagates, so no tool keeps running behind the caller's back."""
    tasks = [asyncio.ensure_future(w) for w in work]
    try:
        return list(await asyncio.gather(*tasks))
    except BaseException:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        raise
