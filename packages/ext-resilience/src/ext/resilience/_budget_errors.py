"""The errors a budget raises: a call that would cross a limit, and a model without a price under a cost limit."""

from __future__ import annotations

from decimal import Decimal

from ext.core import ExtError

__all__ = ["BudgetError", "BudgetExceededError", "UnpricedModelError"]


class BudgetError(ExtError):
    """A call a budget refused before it reached the provider."""


class BudgetExceededError(BudgetError):
    """The call would cross a limit. `limit` names it (`cost per 3600 s`, `tokens per run`...), `key` is the key it
    counts under, `spent` what was spent before this call, `maximum` the limit and `needed` the call's estimate
    (costs in `currency`, as `Decimal`)."""

    def __init__(
        self,
        *,
        budget: str,
        limit: str,
        key: str,
        spent: int | Decimal,
        maximum: int | Decimal,
        needed: int | Decimal,
        currency: str | None = None,
    ) -> None:
        unit = f" {currency}" if currency else ""
        super().__init__(
            f"budget {budget!r}: limit '{limit}' for key {key!r} would be crossed: spent {spent}{unit}, limit "
            f"{maximum}{unit}, this call needs about {needed}{unit}"
        )
        self.budget = budget
        self.limit = limit
        self.key = key
        self.spent = spent
        self.maximum = maximum
        self.needed = needed
        self.currency = currency


class UnpricedModelError(BudgetError):
    """A cost limit applies and the model has no price (add one to the overrides, or allow unpriced models)."""

    def __init__(self, *, budget: str, model: str, provider: str) -> None:
        super().__init__(
            f"budget {budget!r}: model {model!r} ({provider}) has no price, and a cost limit applies; add it to the "
            "price overrides or set allow_unpriced=True"
        )
        self.budget = budget
        self.model = model
        self.provider = provider
