"""Lifetimes. `UsageLifecycle`: what a client and a `ChatPipeline` (`ext.pipeline`) share around their calls: usage
bookkeeping, an idempotent `close` and `async with`. `ClientLifecycle` adds what every client base shares (chat in
`_client`, embeddings in `_embeddings`): a dump that refuses to drop a `RetryPolicy` object given in code.
`AsyncStartStop`: `async with` for what has a `start` and a `stop` (workbenches, runtimes, servers)."""

from __future__ import annotations

from abc import ABC, abstractmethod
from types import TracebackType
from typing import Any, TypeVar

from pydantic import BaseModel

from ._component import Component, ConfigT
from ._messages import RequestUsage, UsageTally

_LifecycleT = TypeVar("_LifecycleT", bound="UsageLifecycle[Any]")
_StartStopT = TypeVar("_StartStopT", bound="AsyncStartStop")


class AsyncStartStop(ABC):
    """Something with a lifetime: `start()` then `stop()`, or `async with`, which starts it, gives it, and stops it on
    the way out (also when the body raises). A subclass implements `start` and `stop`; `stop` is idempotent."""

    @abstractmethod
    async def start(self) -> object:
        """Start (connect, bind, spawn)."""

    @abstractmethod
    async def stop(self) -> None:
        """Stop and release what `start` took. Idempotent."""

    async def __aenter__(self: _StartStopT) -> _StartStopT:
        await self.start()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.stop()


class UsageLifecycle(Component[ConfigT]):
    """A subclass sets `_usage` and `_closed` in its constructor and releases its resources in `_close`."""

    _usage: UsageTally
    _closed: bool

    async def _close(self) -> None:
        """Release the provider's connections (or model)."""

    def actual_usage(self) -> RequestUsage:
        """Usage of the last completed call."""
        return self._usage.actual

    def total_usage(self) -> RequestUsage:
        """Usage of every completed call since the client was made."""
        return self._usage.total()

    async def close(self) -> None:
        """Close connections. Idempotent; the client cannot be used afterwards."""
        if self._closed:
            return
        self._closed = True
        await self._close()

    async def __aenter__(self: _LifecycleT) -> _LifecycleT:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()


class ClientLifecycle(UsageLifecycle[BaseModel]):
    """A subclass sets `_model`, `_usage`, `_closed` and `_custom_retry_policy` in its constructor and releases its
    resources in `_close`."""

    _model: str
    _custom_retry_policy: bool

    def _undumpable_settings(self) -> dict[str, str]:
        settings = super()._undumpable_settings()
        if self._custom_retry_policy:
            settings["retry_policy"] = "a RetryPolicy object (a config holds max_retries only)"
        return settings

    def __repr__(self) -> str:
        return f"{type(self).__name__}(model={self._model!r})"
