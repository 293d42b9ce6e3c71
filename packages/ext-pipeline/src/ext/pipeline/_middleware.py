"""Built-in middlewares: `LoggingMiddleware` and `RetryMiddleware` (the cache is in `_cache.py`, the tool loop
in `_tool_loop.py`)."""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from ext.core import (
    CancelScope,
    ComponentError,
    ConfigurationError,
    CreateResult,
    FunctionExecutionResult,
    RetryPolicy,
    dump_messages,
)

from ._pipeline import (
    RETRY_MAX_WAIT,
    ChatCall,
    ChatItem,
    ChatMiddleware,
    CreateNext,
    StreamNext,
    ToolInvocation,
    ToolNext,
)


class LoggingConfig(BaseModel):
    """Config of a `LoggingMiddleware`."""

    model_config = ConfigDict(extra="forbid", defer_build=True)

    logger: str = Field(default="ext.core.pipeline", description="Name of the logger records go to.")
    level: int = Field(default=logging.INFO, description="Level of a successful call's record.")
    error_level: int = Field(default=logging.WARNING, description="Level of a failed call's record.")
    include_content: bool = Field(default=False, description="Add the messages and the reply to each record.")


class LoggingMiddleware(ChatMiddleware):
    """One structured log record per call, and per tool call when placed after a tool loop.

    The record's `chat` attribute (`logging.LogRecord.chat`, for formatters and handlers) is a dict with
    `operation` (`create`, `stream` or `tool`), `provider`, `model`, `latency_ms`, `prompt_tokens`,
    `completion_tokens`, `finish_reason`, `cached`, `turn` (tool-loop turn or None) and `error` (the
    exception's class name, `CancelledError` for a cancelled call, or None); a tool record has `tool`,
    `call_id` and `is_error` instead of the usage. The message repeats these as `key=value` text. Nothing from
    the client's configuration is logged, so no key can leak; messages and reply text are added (`messages`,
    `content`) only with `include_content=True`.
    """

    component_config_schema = LoggingConfig
    component_provider_override = "ext.pipeline.LoggingMiddleware"

    def __init__(
        self,
        *,
        logger: str | logging.Logger | None = None,
        level: int | str = logging.INFO,
        error_level: int | str = logging.WARNING,
        include_content: bool = False,
    ) -> None:
        if logger is None or isinstance(logger, str):
            self._logger = logging.getLogger(logger or "ext.core.pipeline")
        elif isinstance(logger, logging.Logger):
            self._logger = logger
        else:
            raise ConfigurationError(f"logger must be a logger name or a logging.Logger, got {type(logger).__name__}")
        level = _level(level, "level")
        error_level = _level(error_level, "error_level")
        if not isinstance(include_content, bool):
            raise ConfigurationError(f"include_content must be a bool, got {type(include_content).__name__}")
        self._level = level
        self._error_level = error_level
        self._lowest = min(level, error_level)
        self._include_content = include_content
        self._config = LoggingConfig(
            logger=self._logger.name, level=level, error_level=error_level, include_content=include_content
        )

    def __repr__(self) -> str:
        return f"LoggingMiddleware(logger={self._logger.name!r}, include_content={self._include_content})"

    def _log(self, level: int, record: dict[str, Any]) -> None:
        logger = self._logger
        if not logger.isEnabledFor(level):
            return
        # makeRecord + handle (public Logger API) instead of log(): the caller's file and line would only ever
        # point here, and finding them walks the stack on every call.
        entry = logger.makeRecord(logger.name, level, "", 0, "chat %s", (_Text(record),), None, extra={"chat": record})
        logger.handle(entry)

    def _emit(
        self, operation: str, call: ChatCall, started: float, result: CreateResult | None, error: str | None
    ) -> None:
        latency_ms = round((time.perf_counter() - started) * 1000.0, 3)
        if result is not None:
            usage = result.usage
            record: dict[str, Any] = {
                "operation": operation,
                "provider": call.provider,
                "model": call.model,
                "latency_ms": latency_ms,
                "prompt_tokens": usage.prompt_tokens,
                "completion_tokens": usage.completion_tokens,
                "finish_reason": result.finish_reason,
                "cached": result.cached,
                "turn": call.turn,
                "error": error,
            }
        else:
            record = {
                "operation": operation,
                "provider": call.provider,
                "model": call.model,
                "latency_ms": latency_ms,
                "prompt_tokens": None,
                "completion_tokens": None,
                "finish_reason": None,
                "cached": None,
                "turn": call.turn,
                "error": error,
            }
        if self._include_content:
            record["messages"] = dump_messages(list(call.messages))
            if result is not None:
                content = result.content
                record["content"] = content if isinstance(content, str) else [c.model_dump() for c in content]
        self._log(self._level if error is None else self._error_level, record)

    async def create(self, call: ChatCall, next: CreateNext) -> CreateResult:
        if not self._logger.isEnabledFor(self._lowest):
            return await next(call)
        started = time.perf_counter()
        try:
            result = await next(call)
        except BaseException as exc:
            self._emit("create", call, started, None, type(exc).__name__)
            raise
        self._emit("create", call, started, result, None)
        return result

    def create_stream(self, call: ChatCall, next: StreamNext) -> AsyncIterator[ChatItem]:
        if not self._logger.isEnabledFor(self._lowest):
            return next(call)
        return self._logged_stream(call, next)

    async def _logged_stream(self, call: ChatCall, next: StreamNext) -> AsyncIterator[ChatItem]:
        started = time.perf_counter()
        stream = next(call)
        result: CreateResult | None = None
        error: str | None = None
        try:
            async for item in stream:
                if isinstance(item, CreateResult):
                    result = item
                yield item
        except GeneratorExit:
            error = "closed_early"  # the consumer stopped reading before the result
            raise
        except BaseException as exc:
            error = type(exc).__name__
            raise
        finally:
            await _aclose(stream)
            self._emit("stream", call, started, result, error)

    async def call_tool(self, invocation: ToolInvocation, next: ToolNext) -> FunctionExecutionResult:
        if not self._logger.isEnabledFor(self._lowest):
            return await next(invocation)
        started = time.perf_counter()
        call = invocation.chat_call
        record: dict[str, Any] = {
            "operation": "tool",
            "provider": call.provider,
            "model": call.model,
            "tool": invocation.call.name,
            "call_id": invocation.call.id,
            "turn": invocation.turn,
            "latency_ms": None,
            "is_error": None,
            "error": None,
        }
        if self._include_content:
            record["arguments"] = invocation.call.arguments
        try:
            outcome = await next(invocation)
        except BaseException as exc:
            record["latency_ms"] = round((time.perf_counter() - started) * 1000.0, 3)
            record["error"] = type(exc).__name__
            self._log(self._error_level, record)
            raise
        record["latency_ms"] = round((time.perf_counter() - started) * 1000.0, 3)
        record["is_error"] = outcome.is_error
        if self._include_content:
            record["content"] = outcome.content
        self._log(self._level, record)
        return outcome


def _level(value: int | str, name: str) -> int:
    if isinstance(value, str):
        number = logging.getLevelName(value.upper())  # a name gives its number
        if isinstance(number, int):
            return number
    elif isinstance(value, int) and not isinstance(value, bool):
        return value
    raise ConfigurationError(f"{name} must be a logging level (an int or a name such as 'INFO'), got {value!r}")


class _Text:
    """A record's `key=value` text, built only if a handler formats the message (content fields left out)."""

    __slots__ = ("record",)

    def __init__(self, record: dict[str, Any]) -> None:
        self.record = record

    def __str__(self) -> str:
        hidden = ("messages", "content", "arguments")
        return " ".join(f"{k}={v}" for k, v in self.record.items() if k not in hidden)


class RetryConfig(BaseModel):
    """Config of a `RetryMiddleware`: the `RetryPolicy` fields (classifiers cannot be dumped)."""

    model_config = ConfigDict(extra="forbid", defer_build=True)

    max_retries: int = Field(default=3, ge=0)
    multiplier: float = Field(default=1.0, ge=0)
    max_delay: float = Field(default=60.0, ge=0)
    jitter: float = Field(default=0.25, ge=0)
    honour_retry_after: bool = True
    max_retry_after: float = Field(default=120.0, ge=0)


class RetryMiddleware(ChatMiddleware):
    """Retries rate-limit and transient errors of any installed provider with a `RetryPolicy` (exponential
    backoff with jitter, `Retry-After` honoured, the last error re-raised unchanged). A call whose context holds
    `RETRY_MAX_WAIT` (seconds; a fallback middleware placed before this one puts it there) is not retried after an
    error whose `Retry-After` is longer: the error goes up at once, to the fallback.

    The one retry owner of its pipeline: a `ChatPipeline` holding a `RetryMiddleware` turns its client's own
    retries off (`BaseChatCompletionClient.disable_retries()`), so a call makes at most
    `policy.max_retries + 1` attempts at the provider. A client that is not a `BaseChatCompletionClient` and
    retries by itself should be built with its retries off. A stream is retried only until its first item (a
    chunk already yielded cannot be taken back). A cancelled token stops the waiting between attempts at once.
    """

    component_config_schema = RetryConfig
    component_provider_override = "ext.pipeline.RetryMiddleware"
    retries = True

    def __init__(self, policy: RetryPolicy | None = None) -> None:
        if policy is not None and not isinstance(policy, RetryPolicy):
            raise ConfigurationError(f"policy must be a RetryPolicy, got {type(policy).__name__}")
        self._policy = policy or RetryPolicy()

    @property
    def policy(self) -> RetryPolicy:
        return self._policy

    def __repr__(self) -> str:
        return f"RetryMiddleware(max_retries={self._policy.max_retries})"

    async def create(self, call: ChatCall, next: CreateNext) -> CreateResult:
        token = call.cancellation_token
        if token is None:
            try:
                return await next(call)
            except Exception as exc:
                error = exc
            return await self._policy.retry_after(error, lambda: next(call), max_wait=call.context.get(RETRY_MAX_WAIT))
        with CancelScope(token):
            return await self._policy.run(lambda: next(call), max_wait=call.context.get(RETRY_MAX_WAIT))

    async def create_stream(self, call: ChatCall, next: StreamNext) -> AsyncIterator[ChatItem]:
        async def open_stream() -> tuple[AsyncIterator[ChatItem], ChatItem]:
            stream = next(call)
            try:
                return stream, await stream.__anext__()
            except BaseException:
                await _aclose(stream)
                raise

        with CancelScope(call.cancellation_token):
            stream, first = await self._policy.run(open_stream, max_wait=call.context.get(RETRY_MAX_WAIT))
        try:
            yield first
            async for item in stream:
                yield item
        finally:
            await _aclose(stream)

    def _to_config(self) -> RetryConfig:
        policy = self._policy
        if policy.classifiers:
            raise ComponentError("RetryMiddleware: a policy with custom classifiers cannot be dumped")
        return RetryConfig(**{name: getattr(policy, name) for name in RetryConfig.model_fields})

    @classmethod
    def _from_config(cls, config: RetryConfig) -> RetryMiddleware:
        return cls(RetryPolicy(**config.model_dump()))


async def _aclose(stream: AsyncIterator[Any]) -> None:
    aclose = getattr(stream, "aclose", None)
    if aclose is not None:
        await aclose()
