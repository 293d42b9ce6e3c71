"""A session: one conversation of an agent kept in a `StateStore`, and the run that advances it step by step.

A run writes the session record (see `_record`) at each step, always passing the version it read, so the
store's compare-and-set keeps two writers apart:

1. the user's input and the opened turn, before the model is called;
2. each model answer holding tool calls, before its tools run (`ModelTurn` of the tool loop);
3. each tool result as soon as it is there, before the next model call (`ToolCallFinished`);
4. the held calls when the run stops for approval, or the final answer with the turn closed.

The tool loop awaits the agent's hooks, so each step is in the store before the next one starts. A process
that dies leaves the turn open with every finished tool result saved; `resume()` (from any process) sends the
history back through the pipeline, whose tool loop runs only the calls that have no result yet.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from pydantic import BaseModel

from ext.core import (
    AgentId,
    AssistantMessage,
    CancellationToken,
    ChatOptions,
    CreateResult,
    FunctionCall,
    FunctionExecutionResult,
    FunctionExecutionResultMessage,
    LLMMessage,
    OutputParseError,
    RequestUsage,
    StateStore,
    StreamChunk,
    SystemMessage,
    UserMessage,
    coerce_messages,
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
from ._errors import AgentError, ApprovalPendingError, NothingToResumeError, OutputValidationError
from ._events import (
    AgentEvent,
    ApprovalRequested,
    OutputRetry,
    PendingApproval,
    RunFinished,
    RunResult,
    TextDelta,
    ToolFinished,
    ToolStarted,
)
from ._instructions import Variable
from ._output import MAX_ECHO_CHARS, MAX_ERROR_CHARS, correction_text, cut, typed_value
from ._record import SessionRecord, TurnRecord

__all__ = ["AgentInput", "AgentParts", "AgentSession", "SessionSnapshot", "current_run", "loop_hold", "loop_event"]

logger = logging.getLogger(__name__)

OutputT = TypeVar("OutputT")

AgentInput = str | UserMessage | Sequence[LLMMessage]
"""What a run takes: the user's text, a `UserMessage` (images included), or several messages."""

Emit = Callable[[AgentEvent[Any]], None]

DENIED_PREFIX = "The user denied this tool call"


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


@dataclass(frozen=True, slots=True)
class SessionSnapshot:
    """A session as stored: its messages, the application's `state`, the record `version` (None: no record
    yet), the calls waiting for approval and whether a turn is unfinished (crashed, cancelled or held)."""

    session_id: str
    messages: list[LLMMessage]
    state: dict[str, Any]
    version: int | None
    pending: list[PendingApproval]
    unfinished: bool


class _Run:
    """One run's working state, reached by the agent's tool-loop hooks through `current_run`."""

    def __init__(self, session: AgentSession[Any], record: SessionRecord, version: int, emit: Emit | None) -> None:
        self.session = session
        self.record = record
        self.version = version
        self.emit = emit
        self.lock = asyncio.Lock()
        self.usages: list[RequestUsage] = []
        self.costs: list[float | None] = []
        self.held: list[FunctionCall] = []

    @property
    def turn(self) -> TurnRecord:
        assert self.record.turn is not None
        return self.record.turn

    async def save(self) -> None:
        async with self.lock:
            await self._save_locked()

    async def _save_locked(self) -> None:
        self.version = await self.session._put(self.record, self.version)

    def send(self, event: AgentEvent[Any]) -> None:
        if self.emit is not None:
            self.emit(event)

    def hold(self, call: FunctionCall) -> bool:
        if call.id in self.turn.approved:
            return False
        return self.session.parts.approval.needs(call)

    async def on_event(self, event: ToolLoopEvent) -> None:
        if isinstance(event, ModelTurn):
            result = event.result
            self.usages.append(result.usage)
            self.costs.append(_cost_of(result))
            if isinstance(result.content, list) and result.content:
                async with self.lock:
                    _order_results(self.record.messages)
                    self.record.messages.append(result.to_assistant_message(self.session.parts.name))
                    await self._save_locked()
        elif isinstance(event, ToolCallStarted):
            self.send(ToolStarted(event.call))
        elif isinstance(event, ToolCallFinished):
            async with self.lock:
                _add_result(self.record.messages, event.result)
                await self._save_locked()
            self.send(ToolFinished(event.call, event.result))
        elif isinstance(event, ToolCallHeld):
            self.held.append(event.call)


current_run: ContextVar[_Run | None] = ContextVar("ext_agent_current_run", default=None)


async def loop_event(event: ToolLoopEvent) -> None:
    """The agent's `ToolLoop(on_event=...)`: hands the event to the run in progress."""
    run = current_run.get()
    if run is not None:
        await run.on_event(event)


def loop_hold(invocation: ToolInvocation) -> bool:
    """The agent's `ToolLoop(hold=...)`: whether the run in progress holds this call for approval."""
    run = current_run.get()
    return run is not None and run.hold(invocation.call)


class AgentSession(Generic[OutputT]):
    """One conversation of `agent`, kept in the agent's store under `AgentId("<name>.sessions", session_id)`.

    Open one with `agent.session(session_id)`; any process with the same agent definition and store continues
    it. `run`/`run_stream` start a turn; `resume`/`resume_stream` finish an unfinished one (after `approve` /
    `deny`, after a crash or a cancellation). A session object holds no conversation in memory: every call
    reads the record, so two objects (or processes) on one session see each other's writes, and a write based
    on a stale read raises `StateConflictError`.
    """

    def __init__(self, parts: AgentParts, session_id: str) -> None:
        self._parts = parts
        self._id = session_id
        self._key = AgentId(parts.session_type, session_id)

    @property
    def id(self) -> str:
        return self._id

    @property
    def key(self) -> AgentId:
        """The store key of the session's record."""
        return self._key

    @property
    def parts(self) -> AgentParts:
        return self._parts

    def __repr__(self) -> str:
        return f"AgentSession({self._parts.name!r}, {self._id!r})"

    # --- running -------------------------------------------------------------------------------------

    async def run(
        self,
        input: AgentInput,
        *,
        variables: Mapping[str, Variable] | None = None,
        cancellation_token: CancellationToken | None = None,
    ) -> RunResult[OutputT]:
        """Add `input` to the conversation and run the agent until it answers or holds calls for approval."""
        messages = _input_messages(input)
        return await self._execute(messages, variables, cancellation_token, None, stream=False)

    def run_stream(
        self,
        input: AgentInput,
        *,
        variables: Mapping[str, Variable] | None = None,
        cancellation_token: CancellationToken | None = None,
    ) -> AsyncIterator[AgentEvent[OutputT]]:
        """`run`, yielding events as they happen; the last is `RunFinished`."""
        messages = _input_messages(input)
        return _stream(lambda emit: self._execute(messages, variables, cancellation_token, emit, stream=True))

    async def resume(self, *, cancellation_token: CancellationToken | None = None) -> RunResult[OutputT]:
        """Finish the unfinished turn: run the approved calls (and those a crash or a cancellation left without a
        result; a call with a saved result never runs again), then ask the model. `ApprovalPendingError` while a
        held call is undecided, `NothingToResumeError` when no turn is unfinished."""
        return await self._execute(None, None, cancellation_token, None, stream=False)

    def resume_stream(
        self, *, cancellation_token: CancellationToken | None = None
    ) -> AsyncIterator[AgentEvent[OutputT]]:
        """`resume`, yielding events as they happen."""
        return _stream(lambda emit: self._execute(None, None, cancellation_token, emit, stream=True))

    # --- approval ----------------------------------------------------------------------------------------

    async def pending(self) -> list[PendingApproval]:
        """The held calls not decided yet."""
        record, _ = await self._load()
        return _undecided(record)

    async def approve(self, call_id: str) -> None:
        """Let the held call `call_id` run at the next `resume`."""
        record, version = await self._load()
        call = self._held_call(record, call_id)
        turn = record.turn
        assert turn is not None
        if call.id not in turn.approved:
            turn.approved.append(call.id)
        await self._put(record, version)

    async def deny(self, call_id: str, reason: str = "") -> None:
        """Refuse the held call `call_id`: it never runs, and the model sees an error result with `reason`."""
        if not isinstance(reason, str):
            raise TypeError(f"reason must be a str, got {type(reason).__name__}")
        record, version = await self._load()
        call = self._held_call(record, call_id)
        text = f"{DENIED_PREFIX}: {reason}" if reason else f"{DENIED_PREFIX}."
        _add_result(
            record.messages, FunctionExecutionResult(call_id=call.id, name=call.name, content=text, is_error=True)
        )
        turn = record.turn
        assert turn is not None
        turn.held = [i for i in turn.held if i != call.id]
        await self._put(record, version)

    def _held_call(self, record: SessionRecord, call_id: str) -> FunctionCall:
        for pending in _undecided(record):
            if pending.call_id == call_id:
                return FunctionCall(id=pending.call_id, name=pending.name, arguments=pending.arguments)
        shown = ", ".join(p.call_id for p in _undecided(record)) or "none"
        raise AgentError(f"session {self._id!r} holds no undecided tool call {call_id!r} (undecided: {shown})")

    # --- the record --------------------------------------------------------------------------------------

    async def snapshot(self) -> SessionSnapshot:
        """The session as stored now."""
        stored = await self._parts.store.get(self._key)
        record = SessionRecord() if stored is None else SessionRecord.from_state(stored.state)
        return SessionSnapshot(
            session_id=self._id,
            messages=list(record.messages),
            state=dict(record.state),
            version=None if stored is None else stored.version,
            pending=_undecided(record),
            unfinished=record.turn is not None,
        )

    async def update_state(self, state: Mapping[str, Any], *, expected_version: int | None = None) -> int:
        """Replace the application's JSON `state` of the session; returns the new version. With
        `expected_version`, only if the record is still at that version (`StateConflictError` otherwise)."""
        if not isinstance(state, Mapping):
            raise TypeError(f"state must be a mapping (a JSON object), got {type(state).__name__}")
        record, version = await self._load()
        if expected_version is not None and expected_version != version:
            from ext.core import StateConflictError

            raise StateConflictError(self._key, expected_version, version)
        record.state = dict(state)
        return await self._put(record, version)

    async def delete(self) -> None:
        """Remove the session's record."""
        await self._parts.store.delete(self._key)

    async def _load(self) -> tuple[SessionRecord, int | None]:
        stored = await self._parts.store.get(self._key)
        if stored is None:
            return SessionRecord(), None
        return SessionRecord.from_state(stored.state), stored.version

    async def _put(self, record: SessionRecord, version: int | None) -> int:
        return await self._parts.store.put(self._key, record.to_state(), version)

    # --- one run -------------------------------------------------------------------------------------------

    async def _execute(
        self,
        new: list[LLMMessage] | None,
        variables: Mapping[str, Variable] | None,
        token: CancellationToken | None,
        emit: Emit | None,
        *,
        stream: bool,
    ) -> RunResult[OutputT]:
        agent = self._parts
        record, version = await self._load()
        if new is not None:
            if record.turn is not None:
                undecided = [p.call_id for p in _undecided(record)]
                if undecided:
                    raise ApprovalPendingError(self._id, undecided, "approve or deny them, then resume()")
                raise AgentError(
                    f"session {self._id!r} has an unfinished turn (a crash or a cancellation); resume() finishes it"
                )
            instructions = agent.render_instructions(variables)  # before any write: a bad variable changes nothing
            start = len(record.messages)
            record.messages.extend(new)
            record.turn = TurnRecord(start=start, instructions=instructions)
            agent.trim(record)
        else:
            if record.turn is None:
                raise NothingToResumeError(f"session {self._id!r} has no unfinished turn to resume")
            undecided = [p.call_id for p in _undecided(record)]
            if undecided:
                raise ApprovalPendingError(self._id, undecided, "approve or deny them before resume()")
            record.turn.held = []
        version = await self._put(record, version)
        run = _Run(self, record, version, emit)
        reset = current_run.set(run)
        try:
            return await self._turn(run, token, stream)
        finally:
            current_run.reset(reset)

    async def _turn(self, run: _Run, token: CancellationToken | None, stream: bool) -> RunResult[OutputT]:
        agent = self._parts
        record = run.record
        output_type = agent.output_model
        while True:
            try:
                # The client parses a typed answer and raises OutputParseError when it does not validate;
                # `typed_value` does the same for a client that does not parse.
                result = await self._call_model(run, token, stream)
                if run.held or isinstance(result.content, list):
                    break
                if output_type is None:
                    value: Any = result.content
                    break
                value = typed_value(result, output_type)
                break
            except OutputParseError as exc:
                if output_type is None:
                    raise
                error = exc
            if run.turn.output_retries >= agent.output_retries:
                attempts = run.turn.output_retries + 1
                await self._close_turn(run)
                raise OutputValidationError(
                    output_type.__name__,
                    text=cut(error.text, MAX_ECHO_CHARS),
                    errors=cut(str(error), MAX_ERROR_CHARS),
                    attempts=attempts,
                ) from None
            run.turn.output_retries += 1
            _order_results(record.messages)
            record.messages.append(AssistantMessage(content=cut(error.text, MAX_ECHO_CHARS), source=agent.name))
            record.messages.append(UserMessage(content=correction_text(error, output_type), source="output_check"))
            await run.save()
            run.send(OutputRetry(cut(str(error), MAX_ERROR_CHARS)))

        turn = run.turn
        if run.held:
            _order_results(record.messages)
            turn.held = [c.id for c in run.held]
            await run.save()
            pending = [PendingApproval.of(c) for c in run.held]
            for item in pending:
                run.send(ApprovalRequested(item))
            return self._result(run, "awaiting_approval", "", None, pending)
        if isinstance(result.content, list):
            # The loop stopped at max_iterations with calls it did not run: answer them so the history stays
            # valid, close the turn, and say so.
            for call in result.content:
                _add_result(
                    record.messages,
                    FunctionExecutionResult(
                        call_id=call.id,
                        name=call.name,
                        content="not run: the agent's turn limit was reached",
                        is_error=True,
                    ),
                )
            await self._close_turn(run)
            raise AgentError(
                f"the agent stopped after max_iterations={agent.max_iterations} model turns without an answer "
                f"(the model still asked for {', '.join(c.name for c in result.content)})"
            )
        text = result.content
        _order_results(record.messages)
        record.messages.append(result.to_assistant_message(agent.name))
        outcome = self._result(run, "completed", text, value, [])
        await self._close_turn(run)
        return _with_version(outcome, run.version)

    async def _close_turn(self, run: _Run) -> None:
        _order_results(run.record.messages)
        run.record.turn = None
        await run.save()

    async def _call_model(self, run: _Run, token: CancellationToken | None, stream: bool) -> CreateResult:
        agent = self._parts
        record = run.record
        instructions = run.turn.instructions
        messages: list[LLMMessage] = [SystemMessage(content=instructions)] if instructions else []
        messages.extend(record.messages)
        kwargs: dict[str, Any] = {"json_output": agent.output_model, "options": agent.options}
        if not stream:
            return await agent.pipeline.create(messages, token, **kwargs)
        result: CreateResult | None = None
        items = agent.pipeline.create_stream(messages, token, **kwargs)
        try:
            async for item in items:
                if isinstance(item, CreateResult):
                    result = item
                elif isinstance(item, StreamChunk) and item.content:
                    run.send(TextDelta(item.content))
        finally:
            aclose = getattr(items, "aclose", None)
            if aclose is not None:
                await aclose()
        if result is None:
            raise AgentError("the model stream ended without a result")
        return result

    def _result(
        self, run: _Run, status: Any, text: str, value: Any, pending: list[PendingApproval]
    ) -> RunResult[OutputT]:
        turn = run.turn
        costs = run.costs
        cost = None if not costs or any(c is None for c in costs) else float(sum(c for c in costs if c is not None))
        return RunResult(
            status=status,
            text=text,
            messages=list(run.record.messages[turn.start :]),
            usage=RequestUsage.sum(run.usages),
            session_id=self._id,
            version=run.version,
            cost=cost,
            pending=pending,
            value=value,
        )


def _with_version(result: RunResult[OutputT], version: int) -> RunResult[OutputT]:
    from dataclasses import replace

    return replace(result, version=version)


async def _stream(start: Callable[[Emit], Any]) -> AsyncIterator[AgentEvent[Any]]:
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


def _input_messages(input: object) -> list[LLMMessage]:
    if isinstance(input, str):
        if not input:
            raise ValueError("input must be a non-empty str, a UserMessage or a list of messages")
        return [UserMessage(content=input, source="user")]
    if isinstance(input, UserMessage):
        return [input]
    if isinstance(input, Sequence) and not isinstance(input, (bytes, bytearray)):
        messages = coerce_messages(list(input))
        if not messages:
            raise ValueError("input must not be an empty list of messages")
        if any(isinstance(m, SystemMessage) for m in messages):
            raise ValueError("input must not hold a SystemMessage: the agent's instructions are its system text")
        return messages
    raise TypeError(f"input must be a str, a UserMessage or a list of messages, got {type(input).__name__}")


def _cost_of(result: CreateResult) -> float | None:
    cost = getattr(result, "cost", None)
    return float(cost) if isinstance(cost, (int, float)) and not isinstance(cost, bool) else None


def _add_result(messages: list[LLMMessage], result: FunctionExecutionResult) -> None:
    """Add a tool result to the results message after the assistant turn that asked for it."""
    last = messages[-1] if messages else None
    if isinstance(last, FunctionExecutionResultMessage):
        messages[-1] = FunctionExecutionResultMessage(content=[*last.content, result])
    else:
        messages.append(FunctionExecutionResultMessage(content=[result]))


def _order_results(messages: list[LLMMessage]) -> None:
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


def _undecided(record: SessionRecord) -> list[PendingApproval]:
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
