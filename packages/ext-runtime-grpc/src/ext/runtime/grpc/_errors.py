"""How errors travel between workers: a handler's exception as the wire's `Error` and back, and the
worker's `AuthenticationError`."""

from __future__ import annotations

import asyncio

from ext.core import (
    AgentId,
    AgentNotFoundError,
    CantHandleError,
    ExtError,
    MessageHandlerError,
    UndeliverableError,
)

from ._serializer import SerializationError
from .protos import agent_worker_pb2 as pb

__all__ = ["AuthenticationError", "error_of", "raise_error"]


class AuthenticationError(ExtError, PermissionError):
    """The gateway rejected this worker's token (or the lack of one)."""


_ERROR_KINDS: dict[type[BaseException], int] = {
    AgentNotFoundError: pb.ERROR_KIND_AGENT_NOT_FOUND,
    CantHandleError: pb.ERROR_KIND_CANT_HANDLE,
    SerializationError: pb.ERROR_KIND_BAD_MESSAGE,
    UndeliverableError: pb.ERROR_KIND_UNDELIVERABLE,
}


def error_of(exc: BaseException, recipient: AgentId) -> pb.Error:
    """A handler's exception (or its cancellation) as the wire's `Error`."""
    if isinstance(exc, asyncio.CancelledError):
        return pb.Error(kind=pb.ERROR_KIND_CANCELLED, error_type="CancelledError", message=f"{recipient}: cancelled")
    for cls, kind in _ERROR_KINDS.items():
        if isinstance(exc, cls):
            return pb.Error(kind=kind, error_type=type(exc).__name__, message=str(exc))  # type: ignore[arg-type]
    text = f"handler of {recipient} raised {type(exc).__name__}: {exc}"
    return pb.Error(kind=pb.ERROR_KIND_HANDLER, error_type=type(exc).__name__, message=text)


def raise_error(error: pb.Error) -> None:
    """Raise what a wire `Error` stands for (the exception type the caller would get in-process)."""
    kind = error.kind
    if kind == pb.ERROR_KIND_AGENT_NOT_FOUND:
        raise AgentNotFoundError(error.message)
    if kind == pb.ERROR_KIND_CANT_HANDLE:
        raise CantHandleError(error.message)
    if kind == pb.ERROR_KIND_BAD_MESSAGE:
        raise SerializationError(error.message)
    if kind in (pb.ERROR_KIND_UNDELIVERABLE, pb.ERROR_KIND_CANCELLED):
        raise UndeliverableError(error.message)
    raise MessageHandlerError(error.message, error_type=error.error_type or "Exception")
