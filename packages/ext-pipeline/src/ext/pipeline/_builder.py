"""`ChatClientBuilder`: assembles a `ChatPipeline` from a client and the built-in middlewares.

It lives apart from `_pipeline.py` because it names every built-in middleware, and the middlewares are built on
`_pipeline.py`'s types: kept there, the two would import each other.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from ext.core import ChatCompletionClient, ConfigurationError, RetryPolicy, Tool, Workbench

from ._cache import CacheMiddleware, CacheStore
from ._middleware import LoggingMiddleware, RetryMiddleware
from ._pipeline import ChatMiddleware, ChatPipeline
from ._tool_loop import EventCallback, HoldCallback, ToolLoop

__all__ = ["ChatClientBuilder"]


class ChatClientBuilder:
    """Wrap a model client in middleware. Each `use_*` appends one middleware; the first added is the outermost
    (see `ChatPipeline`'s module for what that means, and for the tool loop's place).

    A usual order::

        client = (
            ChatClientBuilder(OpenAIChatCompletionClient("gpt-4o-mini"))
            .use_logging()      # one record per user call, cache hits included
            .use_cache(InMemoryCacheStore())
            .use_retry(RetryPolicy(max_retries=3))  # at most 4 attempts per model call, cache misses only
            .use_tool_loop([weather_tool])
            .build()
        )

    Retries have one owner: with `use_retry` the pipeline turns the client's own retries off (an ext client's
    `disable_retries()`), so the example above makes at most `max_retries + 1` = 4 attempts per model call,
    whatever `max_retries` the client was built with. Without `use_retry` the client retries as configured.
    """

    def __init__(self, client: ChatCompletionClient) -> None:
        if not isinstance(client, ChatCompletionClient):
            raise ConfigurationError(f"client must be a ChatCompletionClient, got {type(client).__name__}")
        self._client = client
        self._middleware: list[ChatMiddleware] = []

    def use(self, middleware: ChatMiddleware) -> ChatClientBuilder:
        """Append a middleware (a `ChatMiddleware` subclass)."""
        if not isinstance(middleware, ChatMiddleware):
            raise ConfigurationError(f"use() takes a ChatMiddleware, got {type(middleware).__name__}")
        self._middleware.append(middleware)
        return self

    def use_logging(
        self, *, logger: str | logging.Logger | None = None, level: int = logging.INFO, include_content: bool = False
    ) -> ChatClientBuilder:
        """Append a `LoggingMiddleware`: one structured log record per call."""
        return self.use(LoggingMiddleware(logger=logger, level=level, include_content=include_content))

    def use_retry(self, policy: RetryPolicy | None = None) -> ChatClientBuilder:
        """Append a `RetryMiddleware` with `policy` (default `RetryPolicy()`: 3 retries, so up to 4 attempts).
        The built pipeline is then the only one retrying: the client's own retries are turned off."""
        return self.use(RetryMiddleware(policy))

    def use_cache(
        self,
        store: CacheStore | None = None,
        *,
        ttl: float | None = None,
        cache_tool_turns: bool = True,
        close_store: bool | None = None,
    ) -> ChatClientBuilder:
        """Append a `CacheMiddleware` over `store` (default: a fresh `InMemoryCacheStore()`). `ttl` None: the
        store's default (one hour for both built-in stores). A store passed in is closed by the pipeline's
        `close()` only with `close_store=True`."""
        return self.use(CacheMiddleware(store, ttl=ttl, cache_tool_turns=cache_tool_turns, close_store=close_store))

    def use_tool_loop(
        self,
        tools: Sequence[Tool | Workbench],
        *,
        max_iterations: int = 10,
        on_event: EventCallback | None = None,
        hold: HoldCallback | None = None,
    ) -> ChatClientBuilder:
        """Append a `ToolLoop` over `tools` (plain tools and workbenches). See `ToolLoop`."""
        return self.use(ToolLoop(tools, max_iterations=max_iterations, on_event=on_event, hold=hold))

    def build(self) -> ChatPipeline:
        """The pipeline: a `ChatCompletionClient`."""
        return ChatPipeline(self._client, self._middleware)
