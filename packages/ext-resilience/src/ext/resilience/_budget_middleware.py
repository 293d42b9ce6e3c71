"""`BudgetMiddleware`: a `Budget` over every call of a chat pipeline (create and streams, and each turn of a tool
loop placed before it)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from ext.core import ComponentError, ConfigurationError, CreateResult, RequestUsage
from ext.pipeline import ChatCall, ChatItem, ChatMiddleware, CreateNext, StreamNext

from ._budget import Budget, Hold
from ._ratelimit_keys import KeySpec, check_key_spec, estimate_prompt_tokens, key_function, max_output_tokens

__all__ = ["BudgetMiddleware"]

_RUN = "ext.resilience.budget.run"


class BudgetMiddleware(ChatMiddleware):
    """Checks `budget` before each call and records the call's usage after it (see `Budget`).

    Place it after a `ToolLoop` (`builder.use_tool_loop(...)` then `builder.use(BudgetMiddleware(...))`) to count
    each model turn of the loop: a loop stops with `BudgetExceededError` at the turn that would cross a limit.
    Placed before the loop, it sees one call per user call, checked before the loop and recorded after it.

    Arguments:
        budget: the `Budget`.
        key: what a call counts under (`global`, `client`, `model`, `caller` or a function of the call).
        close_budget: close the budget (and the store it owns) when the pipeline closes (True).
    """

    component_provider_override = "ext.resilience.BudgetMiddleware"

    def __init__(self, budget: Budget, *, key: KeySpec = "global", close_budget: bool = True) -> None:
        if not isinstance(budget, Budget):
            raise ConfigurationError(f"budget must be a Budget, got {type(budget).__name__}")
        self._budget = budget
        self._key_spec = check_key_spec(key)
        self._key = key_function(self._key_spec)
        self._close_budget = close_budget

    @property
    def budget(self) -> Budget:
        return self._budget

    def __repr__(self) -> str:
        return f"BudgetMiddleware({self._budget!r}, key={self._key_spec!r})"

    def _to_config(self) -> Any:
        raise ComponentError("BudgetMiddleware is built in code or from a pipeline file's budget: entry")

    async def _hold(self, call: ChatCall) -> Hold:
        run = call.context.get(_RUN)
        if run is None:
            run = call.context[_RUN] = {}
        return await self._budget.hold(
            key=self._key(call),
            model=call.model,
            provider=call.provider,
            prompt_tokens=estimate_prompt_tokens(call.client, call.messages, call.tools),
            output_tokens=max_output_tokens(call.options),
            run=run,
        )

    async def create(self, call: ChatCall, next: CreateNext) -> CreateResult:
        hold = await self._hold(call)
        try:
            result = await next(call)
        except BaseException:
            await self._budget.settle(hold, None)
            raise
        await self._budget.settle(hold, RequestUsage() if result.cached else result.usage)
        return result

    async def create_stream(self, call: ChatCall, next: StreamNext) -> AsyncIterator[ChatItem]:
        hold = await self._hold(call)
        usage: RequestUsage | None = None
        failed = False
        stream = next(call)
        try:
            async for item in stream:
                if isinstance(item, CreateResult):
                    usage = RequestUsage() if item.cached else item.usage
                yield item
        except GeneratorExit:
            raise
        except BaseException:
            failed = True
            raise
        finally:
            try:
                aclose = getattr(stream, "aclose", None)
                if aclose is not None:
                    await aclose()
            finally:
                if usage is not None or failed:
                    await self._budget.settle(hold, usage)
                # closed early without a result: the estimate stays recorded (the provider may have billed it)

    async def close(self) -> None:
        if self._close_budget:
            await self._budget.close()
