"""What a run gives back: the events of `run_stream` and the `RunResult` at the end of every run.

Events, in the order they happen: `TextDelta` for each piece of streamed model text (of every model turn),
`ToolStarted` / `ToolFinished` around each tool call (calls of one model turn run concurrently, so their events
interleave), `OutputRetry` when a typed answer failed validation and the model is asked once more,
`ApprovalRequested` for each held call when the run stops for approval, and `RunFinished` last, holding the
`RunResult`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Generic, Literal, TypeVar, Union

from ext.core import FunctionCall, FunctionExecutionResult, LLMMessage, RequestUsage

from ._errors import ApprovalPendingError

__all__ = [
    "AgentEvent",
    "ApprovalRequested",
    "OutputRetry",
    "PendingApproval",
    "RunFinished",
    "RunResult",
    "RunStatus",
    "TextDelta",
    "ToolFinished",
    "ToolStarted",
]

OutputT = TypeVar("OutputT")

RunStatus = Literal["completed", "awaiting_approval"]
"""`completed`: the model answered; `awaiting_approval`: the run stopped with held tool calls."""


@dataclass(frozen=True, slots=True)
class PendingApproval:
    """A tool call held for approval. `arguments` is the JSON text the model wrote (untrusted)."""

    call_id: str
    name: str
    arguments: str

    @classmethod
    def of(cls, call: FunctionCall) -> PendingApproval:
        return cls(call.id, call.name, call.arguments)


@dataclass(frozen=True, slots=True)
class TextDelta:
    """A piece of the model's streamed text."""

    text: str


@dataclass(frozen=True, slots=True)
class ToolStarted:
    """The agent is about to run `call`."""

    call: FunctionCall


@dataclass(frozen=True, slots=True)
class ToolFinished:
    """`call` finished with `result` (`result.is_error` when it failed); the result is already saved in the
    session."""

    call: FunctionCall
    result: FunctionExecutionResult


@dataclass(frozen=True, slots=True)
class OutputRetry:
    """The typed answer did not validate: the model is asked once more, with `errors`."""

    errors: str


@dataclass(frozen=True, slots=True)
class ApprovalRequested:
    """The run stops: `call` waits for `approve` or `deny`."""

    call: PendingApproval


@dataclass(frozen=True, slots=True)
class RunResult(Generic[OutputT]):
    """The end of a run.

    - `status`: `completed`, or `awaiting_approval` with the held calls in `pending`;
    - `output`: the answer (a `str`, or an instance of the agent's `output_type`); reading it on a result that
      awaits approval raises `ApprovalPendingError`;
    - `text`: the model's final text as it came (the JSON text for a typed answer; "" while awaiting approval);
    - `messages`: the messages of the turn (the user's input, assistant turns, tool results, the answer; for a
      resumed turn, from its start);
    - `usage`: tokens over every model call of the run; `cost`: its price when the pipeline reports one
      (a pricing middleware setting `CreateResult.cost`), else None;
    - `session_id` and `version` (the session record's version after the run).
    """

    status: RunStatus
    text: str
    messages: list[LLMMessage]
    usage: RequestUsage
    session_id: str
    version: int
    cost: float | None = None
    pending: list[PendingApproval] = field(default_factory=list)
    value: OutputT | None = None

    @property
    def output(self) -> OutputT:
        """The answer; `ApprovalPendingError` when the run stopped for approval."""
        if self.status != "completed":
            raise ApprovalPendingError(
                self.session_id, [p.call_id for p in self.pending], "the run has no output until it is resumed"
            )
        return self.value  # type: ignore[return-value]  # completed runs always set it


@dataclass(frozen=True, slots=True)
class RunFinished(Generic[OutputT]):
    """The last event of a stream."""

    result: RunResult[OutputT]


AgentEvent = Union[TextDelta, ToolStarted, ToolFinished, OutputRetry, ApprovalRequested, RunFinished[OutputT]]
"""Any event `run_stream` yields."""
