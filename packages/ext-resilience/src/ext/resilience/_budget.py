"""`Budget`: usage limits (requests, tokens, cost) per run, per key and per time window, checked before each call
and recorded after it; `BudgetMiddleware` applies one to a chat pipeline.

Before a call the budget charges its estimate to every counter at once (one atomic decision in the store): one
request, the prompt's tokens (the client's `count_tokens`) plus the call's `max_tokens`, and their price. If any
limit would be crossed nothing is charged and the call is refused with `BudgetExceededError`. After the call the
estimate is replaced by what the provider reported, priced by the `PriceTable`, so the recorded spend is exactly
the table's price of the recorded usage. A call that fails gives its tokens and cost back (its request stays
counted); a cached answer costs nothing; a stream closed before its end keeps its estimate (the provider may have
billed it). So a limit stops the call that would cross it when the call sets `max_tokens`, and the first call after
the spend reached it otherwise.

Scopes: a limit with `per_run=True` counts one user call of the pipeline (a tool loop's turns together: place the
middleware after the tool loop so it sees each turn); otherwise it counts under the call's key (`global`, `client`,
`model`, `caller` or a function, as rate limits do) in the store, for ever or in fixed windows of `window` seconds
(aligned to the epoch: a daily window starts at 00:00 UTC).

Under a cost limit a model without a price is refused (`UnpricedModelError`) unless `allow_unpriced=True`, which
counts it at 0.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from ext.core import ConfigurationError, RequestUsage

from ._budget_errors import BudgetExceededError, UnpricedModelError
from ._budget_store import BudgetStore, Charge, InMemoryBudgetStore
from ._prices import PriceTable

__all__ = ["Budget", "BudgetLimit"]

NANO = Decimal(1_000_000_000)
"""Costs are counted in billionths of the currency (integers, exact in Redis and Lua)."""

_REQUESTS, _TOKENS, _COST = "requests", "tokens", "cost"


class BudgetLimit(BaseModel):
    """One limit: at most `requests` calls, `tokens` tokens and `cost` in the budget's currency (each None: not
    limited), per run (`per_run=True`), or per key for ever (`window=None`) or per fixed window of `window` seconds."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    requests: int | None = Field(default=None, ge=1, description="Calls allowed.")
    tokens: int | None = Field(default=None, ge=1, description="Tokens allowed (prompt and completion).")
    cost: Decimal | None = Field(default=None, gt=0, description="Cost allowed, in the budget's currency.")
    window: float | None = Field(default=None, gt=0, description="Seconds of a fixed window; None: no window.")
    per_run: bool = Field(default=False, description="Count one user call of the pipeline (not the store).")

    @model_validator(mode="after")
    def _check(self) -> BudgetLimit:
        if self.requests is None and self.tokens is None and self.cost is None:
            raise ValueError("a budget limit needs at least one of requests, tokens or cost")
        if self.per_run and self.window is not None:
            raise ValueError("a per_run limit has no window")
        return self

    def describe(self, metric: str) -> str:
        if self.per_run:
            return f"{metric} per run"
        return f"{metric} per {self.window:g} s" if self.window else f"{metric} in total"


@dataclass(slots=True)
class Hold:
    """What a call was charged before it ran, to be settled after it."""

    key: str
    model: str
    provider: str
    tokens: int
    cost: int
    store_charges: list[Charge] = field(default_factory=list)
    metrics: list[str] = field(default_factory=list)
    run_counters: dict[str, int] | None = None


@dataclass(frozen=True, slots=True)
class _Step:
    """One checked counter of a limit, worked out once: `counter` is `<limit index>:<metric>`."""

    counter: str
    metric: str
    maximum: int
    described: str
    window: float | None


def _nano(amount: Decimal) -> int:
    return int((amount * NANO).to_integral_value())


class Budget:
    """Limits shared by a `BudgetMiddleware` and a `BudgetedEmbeddingClient` (one budget can serve both).

    Arguments:
        limits: the `BudgetLimit`s (or dicts of their fields), all checked on every call.
        key: what a call counts under (`global`, `client`, `model`, `caller` or a function of the call); the
            key of an embedding call is found the same way from the embedding client.
        store: where spend lives (default: an `InMemoryBudgetStore`; `RedisBudgetStore` shares it).
        prices: the `PriceTable` (default: the `genai-prices` table).
        currency: the currency of costs and of `prices` (`USD`; the bundled table is in dollars, so another
            currency needs `usd_rate` or prices of its own in `prices` with `use_table=False`).
        usd_rate: units of `currency` per dollar, applied to prices (1).
        allow_unpriced: count a model without a price at 0 instead of refusing it under a cost limit.
        name: the budget's name in errors and a prefix of its counters (`budget`).
    """

    def __init__(
        self,
        limits: Sequence[BudgetLimit | dict[str, Any]],
        *,
        store: BudgetStore | None = None,
        prices: PriceTable | None = None,
        currency: str = "USD",
        usd_rate: Decimal | float | int = 1,
        allow_unpriced: bool = False,
        name: str = "budget",
        close_store: bool = False,
        clock: Callable[[], float] = time.time,
    ) -> None:
        given: object = limits
        if isinstance(given, (str, bytes)) or not isinstance(given, Sequence) or not given:
            raise ConfigurationError("limits must be a non-empty list of BudgetLimit (or dicts of its fields)")
        built: list[BudgetLimit] = []
        for index, limit in enumerate(limits):
            if isinstance(limit, BudgetLimit):
                built.append(limit)
            elif isinstance(limit, dict):
                try:
                    built.append(BudgetLimit(**limit))
                except ValueError as exc:
                    raise ConfigurationError(f"limits[{index}]: {_first_error(exc)}") from None
            else:
                raise ConfigurationError(f"limits[{index}] must be a BudgetLimit or a dict, got {type(limit).__name__}")
        self.limits = tuple(built)
        if store is not None and not isinstance(store, BudgetStore):
            raise ConfigurationError(f"store must be a BudgetStore, got {type(store).__name__}")
        if prices is not None and not isinstance(prices, PriceTable):
            raise ConfigurationError(f"prices must be a PriceTable, got {type(prices).__name__}")
        if not isinstance(currency, str) or not currency:
            raise ConfigurationError(f"currency must be a non-empty str such as 'USD', got {currency!r}")
        try:
            rate = Decimal(str(usd_rate))
        except ArithmeticError:
            rate = Decimal(-1)
        if isinstance(usd_rate, bool) or not rate.is_finite() or rate <= 0:
            raise ConfigurationError(f"usd_rate must be a number > 0, got {usd_rate!r}")
        if not isinstance(name, str) or not name:
            raise ConfigurationError(f"name must be a non-empty str, got {name!r}")
        self.store: BudgetStore = store if store is not None else InMemoryBudgetStore()
        self._owns_store = store is None or close_store
        self.prices = prices if prices is not None else PriceTable()
        self.currency = currency
        self._rate = rate
        self.allow_unpriced = bool(allow_unpriced)
        self.name = name
        self._clock = clock
        self._priced = any(limit.cost is not None for limit in self.limits)
        # What each call checks, worked out once: per-run counters (in the call's context) and store counters.
        self._run_steps: list[_Step] = []
        self._store_steps: list[_Step] = []
        for index, limit in enumerate(self.limits):
            cost_limit = None if limit.cost is None else _nano(limit.cost)
            for metric, maximum in ((_REQUESTS, limit.requests), (_TOKENS, limit.tokens), (_COST, cost_limit)):
                if maximum is not None:
                    step = _Step(f"{index}:{metric}", metric, maximum, limit.describe(metric), limit.window)
                    (self._run_steps if limit.per_run else self._store_steps).append(step)

    def __repr__(self) -> str:
        return f"Budget({self.name!r}, limits={len(self.limits)}, currency={self.currency!r}, store={self.store!r})"

    def price(self, model: str, usage: RequestUsage, *, provider: str | None = None) -> Decimal | None:
        """The cost of `usage` on `model` in this budget's currency, or None without a price."""
        price = self.prices.price(model, usage, provider=provider)
        return None if price is None else price * self._rate

    def _counter(
        self, limit_index: int, limit: BudgetLimit, metric: str, key: str, now: float
    ) -> tuple[str, float | None]:
        counter = f"{self.name}:{key}:{limit_index}:{metric}"
        if limit.window:
            return f"{counter}:{int(now // limit.window)}", limit.window
        return counter, None

    async def spent(self, key: str, limit_index: int = 0, metric: str = _COST) -> int | Decimal:
        """What is spent under `key` for `limits[limit_index]`'s `metric` now (a cost as a `Decimal`)."""
        counter, _ = self._counter(limit_index, self.limits[limit_index], metric, key, self._clock())
        value = await self.store.spent(counter)
        return Decimal(value) / NANO if metric == _COST else value

    async def hold(
        self,
        *,
        key: str,
        model: str,
        provider: str,
        prompt_tokens: int,
        output_tokens: int = 0,
        run: dict[str, int] | None = None,
    ) -> Hold:
        """Charge a call's estimate (or raise `BudgetExceededError` / `UnpricedModelError`, charging nothing)."""
        cost = 0
        if self._priced:
            price = self.prices.price_tokens(model, prompt_tokens, output_tokens, provider=provider)
            if price is not None:
                price *= self._rate
            if price is None and not self.allow_unpriced:
                raise UnpricedModelError(budget=self.name, model=model, provider=provider)
            cost = 0 if price is None else _nano(price)
        tokens = prompt_tokens + output_tokens
        amounts = {_REQUESTS: 1, _TOKENS: tokens, _COST: cost}
        hold = Hold(key, model, provider, tokens, cost, run_counters={} if run is None else run)
        run = hold.run_counters
        assert run is not None
        now = self._clock()
        for step in self._run_steps:
            spent = run.get(step.counter, 0)
            amount = amounts[step.metric]
            if spent + max(amount, 1) > step.maximum:
                raise self._exceeded(step.described, "run", spent, step.maximum, amount)
        if self._store_steps:
            charges = hold.store_charges
            for step in self._store_steps:
                counter = f"{self.name}:{key}:{step.counter}"
                if step.window:
                    counter = f"{counter}:{int(now // step.window)}"
                charges.append(Charge(counter, amounts[step.metric], step.maximum, step.window))
            hold.metrics = [step.metric for step in self._store_steps]
            index, spent = await self.store.charge(charges)
            if index >= 0:
                step = self._store_steps[index]
                raise self._exceeded(step.described, key, spent, step.maximum, charges[index].amount)
        for step in self._run_steps:
            run[step.counter] = run.get(step.counter, 0) + amounts[step.metric]
        return hold

    def _exceeded(self, limit: str, key: str, spent: int, maximum: int, amount: int) -> BudgetExceededError:
        if limit.startswith(_COST):
            return BudgetExceededError(
                budget=self.name,
                limit=limit,
                key=key,
                spent=Decimal(spent) / NANO,
                maximum=Decimal(maximum) / NANO,
                needed=Decimal(amount) / NANO,
                currency=self.currency,
            )
        return BudgetExceededError(budget=self.name, limit=limit, key=key, spent=spent, maximum=maximum, needed=amount)

    async def settle(self, hold: Hold, usage: RequestUsage | None) -> Decimal | None:
        """Replace the estimate by `usage` (None: the call failed, its tokens and cost are given back). Returns the
        call's cost (None without a price)."""
        if usage is None:
            tokens, cost, priced = 0, 0, None
        else:
            tokens = usage.prompt_tokens + usage.completion_tokens
            priced = self.price(hold.model, usage, provider=hold.provider)
            cost = 0 if priced is None else _nano(priced)
        changes: list[Charge] = []
        deltas = {_REQUESTS: 0, _TOKENS: tokens - hold.tokens, _COST: cost - hold.cost}
        for charge, metric in zip(hold.store_charges, hold.metrics, strict=True):
            delta = deltas[metric]
            if delta:
                changes.append(Charge(charge.counter, delta, None, charge.ttl))
        if changes:
            await self.store.add(changes)
        run = hold.run_counters
        if run is not None:
            for step in self._run_steps:
                run[step.counter] += deltas[step.metric]
        return priced

    async def close(self) -> None:
        if self._owns_store:
            await self.store.close()


def _first_error(exc: ValueError) -> str:
    errors = getattr(exc, "errors", None)
    if callable(errors):
        first = errors()[0]
        where = ".".join(str(p) for p in first.get("loc", ()))
        return f"{where}: {first.get('msg')}" if where else str(first.get("msg"))
    return str(exc)
