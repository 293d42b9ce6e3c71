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

import logging
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from ext.core import (
    AgentId,
    AssistantMessage,
    CancellationToken,
    CreateResult,
    FunctionCall,
    FunctionExecutionResult,
    LLMMessage,
    OutputParseError,
    RequestUsage,
    StreamChunk,
    SystemMessage,
    UserMessage,
    coerce_messages,
)

from ._errors import AgentError, ApprovalPendingError, NothingToResumeError, OutputValidationError
from ._events import (
    AgentEvent,
    ApprovalRequested,
    OutputRetry,
    PendingApproval,
    RunResult,
    TextDelta,
)
from ._instructions import Variable
from ._output import MAX_ECHO_CHARS, MAX_ERROR_CHARS, correction_text, cut, typed_value
from ._record import SessionRecord, TurnRecord
from ._steps import (
    AgentParts,
    Emit,
    Run,
    add_result,
    current_run,
    loop_event,
    loop_hold,
    order_results,
    stream_events,
    undecided,
)

__all__ = ["AgentInput", "AgentParts", "AgentSession", "SessionSnapshot", "current_run", "loop_event", "loop_hold"]

logger = logging.getLogger(__name__)

OutputT = TypeVar("OutputT")

AgentInput = str | UserMessage | Sequence[LLMMessage]
"""What a run takes: the user's text, a `UserMessage` (images included), or several messages."""

DENIED_PREFIX = "The user denied this tool call"


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
        return stream_events(lambda emit: self._execute(messages, variables, cancellation_token, emit, stream=True))

    async def resume(self, *, cancellation_token: CancellationToken | None = None) -> RunResult[OutputT]:
        """Finish the unfinished turn: run the approved calls (and those a crash or a cancellation left without a
        result; a call with a saved result never runs again), then ask the model. `ApprovalPendingError` while a
        held call is undecided, `NothingToResumeError` when no turn is unfinished."""
        return await self._execute(None, None, cancellation_token, None, stream=False)

    def resume_stream(
        self, *, cancellation_token: CancellationToken | None = None
    ) -> AsyncIterator[AgentEvent[OutputT]]:
        """`resume`, yielding events as they happen."""
        return stream_events(lambda emit: self._execute(None, None, cancellation_token, emit, stream=True))

    # --- approval ----------------------------------------------------------------------------------------

    async def pending(self) -> list[PendingApproval]:
        """The held calls not decided yet."""
        record, _ = await self._load()
        return undecided(record)

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
        add_result(
            record.messages, FunctionExecutionResult(call_id=call.id, name=call.name, content=text, is_error=True)
        )
        turn = record.turn
        assert turn is not None
        turn.held = [i for i in turn.held if i != call.id]
        await self._put(record, version)

    def _held_call(self, record: SessionRecord, call_id: str) -> FunctionCall:
        for pending in undecided(record):
            if pending.call_id == call_id:
                return FunctionCall(id=pending.call_id, name=pending.name, arguments=pending.arguments)
        shown = ", ".join(p.call_id for p in undecided(record)) or "none"
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
            pending=undecided(record),
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
                waiting = [p.call_id for p in undecided(record)]
                if waiting:
                    raise ApprovalPendingError(self._id, waiting, "approve or deny them, then resume()")
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
            waiting = [p.call_id for p in undecided(record)]
            if waiting:
                raise ApprovalPendingError(self._id, waiting, "approve or deny them before resume()")
            record.turn.held = []
        version = await self._put(record, version)
        run = Run(self._parts, self._put, record, version, emit)
        run.opens_turn = new is not None
        reset = current_run.set(run)
        try:
            return await self._turn(run, token, stream)
        finally:
            current_run.reset(reset)

    async def _turn(self, run: Run, token: CancellationToken | None, stream: bool) -> RunResult[OutputT]:
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
            order_results(record.messages)
            record.messages.append(AssistantMessage(content=cut(error.text, MAX_ECHO_CHARS), source=agent.name))
            record.messages.append(UserMessage(content=correction_text(error, output_type), source="output_check"))
            await run.save()
            run.send(OutputRetry(cut(str(error), MAX_ERROR_CHARS)))

        turn = run.turn
        if run.held:
            order_results(record.messages)
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
                add_result(
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
        order_results(record.messages)
        record.messages.append(result.to_assistant_message(agent.name))
        start = turn.start
        await self._close_turn(run)
        return self._result(run, "completed", text, value, [], start)

    async def _close_turn(self, run: Run) -> None:
        order_results(run.record.messages)
        run.record.turn = None
        await run.save()

    async def _call_model(self, run: Run, token: CancellationToken | None, stream: bool) -> CreateResult:
        agent = self._parts
        record = run.record
        instructions = run.turn.instructions
        messages: list[LLMMessage] = [SystemMessage(content=instructions)] if instructions else []
        messages.extend(record.messages)
        kwargs: dict[str, Any] = {"json_output": agent.output_model, "options": agent.options}
        if run.opens_turn:
            run.opens_turn = False
            kwargs["tool_choice"] = agent.tool_choice
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
        self, run: Run, status: Any, text: str, value: Any, pending: list[PendingApproval], start: int | None = None
    ) -> RunResult[OutputT]:
        """The run's result; `start` (the turn's first message) when the turn is closed already."""
        if start is None:
            start = run.turn.start
        costs = run.costs
        cost = None if not costs or any(c is None for c in costs) else float(sum(c for c in costs if c is not None))
        return RunResult(
            status=status,
            text=text,
            messages=list(run.record.messages[start:]),
            usage=RequestUsage.sum(run.usages),
            session_id=self._id,
            version=run.version,
            cost=cost,
            pending=pending,
            value=value,
        )


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
