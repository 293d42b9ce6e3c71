"""What crosses between a `RayAgentRuntime` and an agent's actor: the `Envelope` a message travels in, the
`Outcome` an actor answers with, and errors made portable (an exception that does not survive pickling arrives
as `MessageHandlerError` naming its class). Ray pickles both; nothing here imports Ray."""

from __future__ import annotations

import logging
import pickle
from dataclasses import dataclass
from typing import Any

from ext.core import AgentId, MessageHandlerError, StateConflictError, TopicId, TraceContext, UndeliverableError

__all__ = [
    "ACTOR_PREFIX",
    "NOT_FOUND",
    "REGISTRY_NAME",
    "AgentActorDiedError",
    "Envelope",
    "Outcome",
    "actor_name",
    "portable_error",
]

logger = logging.getLogger(__name__)

NOT_FOUND = "not-found"
"""The registry's answer to an activation of an agent whose type has no factory."""

REGISTRY_NAME = "ext-registry"
"""The registry actor's name in a runtime's Ray namespace."""

ACTOR_PREFIX = "ext-agent:"
"""An agent's actor is named `ext-agent:<type>/<key>` in the runtime's Ray namespace."""


def actor_name(agent_id: AgentId) -> str:
    return f"{ACTOR_PREFIX}{agent_id}"


class AgentActorDiedError(UndeliverableError):
    """The actor hosting the recipient died (or was restarting) while the message was on its way or being handled:
    it may or may not have been handled. Ray restarts the actor (up to `max_restarts`), which reloads the agent's
    last saved state; the runtime does not resend (at most once) unless built with `delivery="at_least_once"`."""


@dataclass(frozen=True, slots=True)
class Envelope:
    """One message to one agent, with its context."""

    message: Any
    recipient: AgentId
    sender: AgentId | None
    rpc: bool
    message_id: str
    trace: TraceContext | None = None
    topic_id: TopicId | None = None
    stream: str = ""
    """The sender's stream and the message's number in it (see `_ordering.py`)."""
    seq: int = 0


@dataclass(frozen=True, slots=True)
class Outcome:
    """An actor's answer: the handler's result or error (`cancelled` when the handler was cancelled), the trace
    context of the handling, or `retired` when the actor was deactivating and handled nothing (the sender
    activates the agent again and resends)."""

    result: Any = None
    error: BaseException | None = None
    answer_trace: TraceContext | None = None
    cancelled: bool = False
    retired: bool = False


def portable_error(error: BaseException) -> BaseException:
    """`error` itself when it survives pickling (as Ray will pickle it), else an equivalent that does: a
    `StateConflictError` rebuilt from its fields, anything else a `MessageHandlerError` naming its class."""
    try:
        copy = pickle.loads(pickle.dumps(error))
    except Exception:
        copy = None
    if isinstance(copy, BaseException) and type(copy) is type(error):
        return error
    if isinstance(error, StateConflictError):
        return _StateConflict(error.agent_id, error.expected, error.found)
    return MessageHandlerError(str(error), error_type=type(error).__name__)


class _StateConflict(StateConflictError):
    """A `StateConflictError` that pickles (its constructor's arguments are its fields)."""

    def __reduce__(self) -> tuple[Any, ...]:
        return (_StateConflict, (self.agent_id, self.expected, self.found))
