"""What answers an A2A message: a `Responder` yields the answer's text piece by piece, or asks for input.

Three are given: `FunctionResponder` (an async generator function), `ChatAgentResponder` (an ext-agent
`ChatAgent`, or a chat pipeline wrapped in one; held tool calls become `input-required` turns) and
`RuntimeResponder` (an RPC to an agent hosted on ext's local or gRPC runtime). A task's `context_id` is the
session: the ChatAgent's session id, the runtime agent's key."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from ext.core import AgentId, AgentRuntime, CancellationToken


@dataclass(frozen=True)
class InputRequired:
    """The turn stops until the caller answers `question` (sent as the task's `input-required` status message)."""

    question: str


@runtime_checkable
class Responder(Protocol):
    """Answers one message of a conversation."""

    def respond(
        self, text: str, *, session_id: str, resuming: bool, cancellation_token: CancellationToken
    ) -> AsyncIterator[str | InputRequired]:
        """Yield the answer's text as it comes, or an `InputRequired` to stop the turn. `resuming` is True when
        `text` answers an earlier `InputRequired` of the same task."""
        ...


class FunctionResponder:
    """A responder from `fn(text) -> AsyncIterator[str]` (stateless)."""

    def __init__(self, fn: Callable[[str], AsyncIterator[str]]) -> None:
        self._fn = fn

    async def respond(
        self, text: str, *, session_id: str, resuming: bool, cancellation_token: CancellationToken
    ) -> AsyncIterator[str | InputRequired]:
        async for piece in self._fn(text):
            yield piece


_YES = frozenset({"approve", "approved", "yes", "y", "ok", "allow"})
_NO = frozenset({"deny", "denied", "no", "n", "reject"})


class ChatAgentResponder:
    """A `ChatAgent` (ext-agent) as a responder: one session per A2A context.

    A tool call held for approval (the agent's `require_approval`) ends the turn as `input-required`, naming each
    held call; the caller's next message on that task answers it: `approve` (or yes/ok) runs every held call,
    `deny` (or no, or anything else, with the text as the reason) refuses them, then the run resumes."""

    def __init__(self, agent: Any) -> None:
        self._agent = agent

    async def respond(
        self, text: str, *, session_id: str, resuming: bool, cancellation_token: CancellationToken
    ) -> AsyncIterator[str | InputRequired]:
        session = self._agent.session(session_id)
        pending = await session.pending() if resuming else []
        if pending:
            answer = text.strip().lower()
            for call in pending:
                if answer in _YES:
                    await session.approve(call.call_id)
                else:
                    await session.deny(call.call_id, "" if answer in _NO else text)
            events = session.resume_stream(cancellation_token=cancellation_token)
        else:
            events = session.run_stream(text, cancellation_token=cancellation_token)
        async for event in events:
            kind = type(event).__name__
            if kind == "TextDelta":
                yield event.text
            elif kind == "RunFinished" and event.result.status == "awaiting_approval":
                calls = ", ".join(f"{p.name}({p.arguments[:200]})" for p in event.result.pending)
                yield InputRequired(f"Approve the tool call(s) {calls}? Answer approve or deny.")


class RuntimeResponder:
    """An agent on ext's runtime as a responder: an RPC `send_and_await_response(text, AgentId(agent_type,
    session_id))`; a reply with a `text` attribute (an ext-agent `AgentReply`) gives that text, else `str(reply)`."""

    def __init__(self, runtime: AgentRuntime, agent_type: str, *, timeout: float = 60.0) -> None:
        self._runtime = runtime
        self._type = agent_type
        self._timeout = timeout

    async def respond(
        self, text: str, *, session_id: str, resuming: bool, cancellation_token: CancellationToken
    ) -> AsyncIterator[str | InputRequired]:
        reply = await self._runtime.send_and_await_response(
            text, AgentId(self._type, session_id), timeout=self._timeout, cancellation_token=cancellation_token
        )
        yield str(getattr(reply, "text", reply))
