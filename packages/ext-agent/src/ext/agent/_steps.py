"""One run, step by step: the per-run state the agent's tool-loop hooks reach (`Run`, through `current_run`), the
saves made as the loop reports each step, and the helpers that keep a session's messages in shape.

The tool loop awaits `on_event`, so each save below is done before the loop takes its next step: the model's
answer with tool calls before its tools run, each tool result before the next model call. Calls of one answer
run concurrently, so their saves are serialized by the run's lock.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, Optional

from pydantic import BaseModel

from ext.core import (
    AssistantMessage,
    ChatOptions,
    CreateResult,
    FunctionCall,
    FunctionExecutionResult,
    FunctionExecutionResultMessage,
    LLMMessage,
    RequestUsage,
    StateStore,
    ToolChoice,
)
from ext.pipeline import (
    ChatPipeline,
    ModelTurn,
    ToolCallFinished,
    ToolCallHeld,
    ToolCallStarted,
    ToolInvocation,
    ToolLoopEvent,
)

from ._approval import ApprovalPolicy
from ._events import AgentEvent, PendingApproval, RunFinished, RunResult, ToolFinished, ToolStarted
from ._instructions import Variable
from ._record import SessionRecord, TurnRecord

__all__ = [
    "AgentParts",
    "Emit",
    "Put",
    "Run",
    "add_result",
    "cost_of",
    "current_run",
    "loop_event",
    "loop_hold",
    "order_results",
    "stream_events",
    "undecided",
]


Emit = Callable[[AgentEvent[Any]], None]
Put = Callable[[SessionRecord, Optional[int]], Awaitable[int]]


@dataclass(frozen=True, slots=True)
class AgentParts:
    """What a session needs from its agent, handed over by `ChatAgent` (so sessions do not import the agent)."""

    name: str
    session_type: str
    store: StateStore
    pipeline: ChatPipeline
    options: ChatOptions | None
    output_model: type[BaseModel] | None
    output_retries: int
    max_iterations: int
    approval: ApprovalPolicy
    render_instructions: Callable[[Mapping[str, Variable] | None], str | None]
    trim: Callable[[SessionRecord], None]
    tool_choice: ToolChoice = "auto"
    on_event: Callable[[AgentEvent[Any]], None] | None = None


class Run:
    """One run's working state, reached by the agent's tool-loop hooks through `current_run`."""

    def __init__(self, parts: AgentParts, put: Put, record: SessionRecord, version: int, emit: Emit | None) -> None:
        self.parts = parts
        self.put = put
        self.record = record
        self.version = version
        self.emit = emit
        self.lock = asyncio.Lock()
        self.usages: list[RequestUsage] = []
        self.costs: list[float | None] = []
        self.held: list[FunctionCall] = []
        # The next model call opens the turn (not a resume, not an output retry): it gets the agent's tool_choice.
        self.opens_turn = False

    @property
    def turn(self) -> TurnRecord:
        assert self.record.turn is not None
        return self.record.turn

    async def save(self) -> None:
        async with self.lock:
            await self._save_locked()

    async def _save_locked(self) -> None:
        self.version = await self.put(self.record, self.version)

    def send(self, event: AgentEvent[Any]) -> None:
        if self.parts.on_event is not None:
            self.parts.on_event(event)
        if self.emit is not None:
            self.emit(event)

    def hold(self, call: FunctionCall) -> bool:
        if call.id in self.turn.approved:
            return False
        return self.parts.approval.needs(call)

    async def on_event(self, event: ToolLoopEvent) -> None:
        if isinstance(event, ModelTurn):
            result = event.result
            self.usages.append(result.usage)
            self.costs.append(cost_of(result))
            if isinstance(result.content, list) and result.content:
                async with self.lock:
                    order_results(self.record.messages)
                    self.record.messages.append(result.to_assistant_message(self.parts.name))
                    await self._save_locked()
        elif isinstance(event, ToolCallStarted):
            self.send(ToolStarted(event.call))
        elif isinstance(event, ToolCallFinished):
            async with self.lock:
                add_result(self.record.messages, event.result)
                await self._save_locked()
            self.send(ToolFinished(event.call, event.result))
        elif isinstance(event, ToolCallHeld):
            self.held.append(event.call)


current_run: ContextVar[Run | None] = ContextVar("ext_agent_current_run", default=None)


async def loop_event(event: ToolLoopEvent) -> None:
    """The agent's `ToolLoop(on_event=...)`: hands the event to the run in progress."""
    run = current_run.get()
    if run is not None:
        await run.on_event(event)


def loop_hold(invocation: ToolInvocation) -> bool:
    """The agent's `ToolLoop(hold=...)`: whether the run in progress holds this call for approval."""
    run = current_run.get()
    return run is not None and run.hold(invocation.call)


async def stream_events(start: Callable[[Emit], Any]) -> AsyncIterator[AgentEvent[Any]]:
    """Run `start(emit)` in a task and yield what it emits as it happens, then `RunFinished`. Leaving the
    iteration early (or cancelling the consumer) cancels the run: the model call and the tools in flight."""
    queue: asyncio.Queue[AgentEvent[Any] | None] = asyncio.Queue()
    task: asyncio.Task[RunResult[Any]] = asyncio.ensure_future(start(queue.put_nowait))
    task.add_done_callback(lambda _: queue.put_nowait(None))
    try:
        while True:
            event = await queue.get()
            if event is None:
                break
            yield event
        yield RunFinished(task.result())
    finally:
        if not task.done():
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)


def cost_of(result: CreateResult) -> float | None:
    cost = getattr(result, "cost", None)
    return float(cost) if isinstance(cost, (int, float)) and not isinstance(cost, bool) else None


def add_result(messages: list[LLMMessage], result: FunctionExecutionResult) -> None:
    """Add a tool result to the results message after the assistant turn that asked for it."""
    last = messages[-1] if messages else None
    if isinstance(last, FunctionExecutionResultMessage):
        messages[-1] = FunctionExecutionResultMessage(content=[*last.content, result])
    else:
        messages.append(FunctionExecutionResultMessage(content=[result]))


def order_results(messages: list[LLMMessage]) -> None:
    """Put the last results message in the order of the calls (calls of one answer finish in any order)."""
    if len(messages) < 2:
        return
    last, before = messages[-1], messages[-2]
    if (
        isinstance(last, FunctionExecutionResultMessage)
        and isinstance(before, AssistantMessage)
        and isinstance(before.content, list)
    ):
        rank = {fc.id: i for i, fc in enumerate(before.content)}
        ordered = sorted(last.content, key=lambda r: rank.get(r.call_id, len(rank)))
        if ordered != list(last.content):
            messages[-1] = FunctionExecutionResultMessage(content=ordered)


def undecided(record: SessionRecord) -> list[PendingApproval]:
    """The held calls of the unfinished turn that are neither approved nor answered (denied)."""
    turn = record.turn
    if turn is None or not turn.held:
        return []
    answered: set[str] = set()
    calls: dict[str, FunctionCall] = {}
    for message in record.messages[turn.start :]:
        if isinstance(message, AssistantMessage) and isinstance(message.content, list):
            calls.update((fc.id, fc) for fc in message.content)
        elif isinstance(message, FunctionExecutionResultMessage):
            answered.update(r.call_id for r in message.content)
    return [
        PendingApproval.of(calls[i]) for i in turn.held if i in calls and i not in answered and i not in turn.approved
    ]
