"""The cost of a model call on its span, when ext-resilience is installed (`ext-telemetry-opentelemetry[cost]`).

The GenAI semantic conventions have no cost attribute yet, so the cost goes in ext's own `ext.usage.cost` (a float,
in `ext.usage.cost.currency`, US dollars: the `genai-prices` table ext-resilience reads, with no network). A model
without a price gets no cost attribute."""

from __future__ import annotations

from collections.abc import Callable
from decimal import Decimal
from typing import Any

from ext.core import RequestUsage

COST: str = "ext.usage.cost"
COST_CURRENCY: str = "ext.usage.cost.currency"

Pricer = Callable[..., Decimal | None]


def find_pricer() -> Pricer | None:
    """ext-resilience's `price_usage`, or None when it is not installed."""
    try:
        from ext.resilience import price_usage
    except ImportError:
        return None
    return price_usage


def cost_attributes(pricer: Pricer | None, model: Any, provider: Any, usage: RequestUsage) -> dict[str, Any]:
    if pricer is None or not isinstance(model, str) or not model:
        return {}
    try:
        cost = pricer(model, usage, provider=provider if isinstance(provider, str) else None)
    except Exception:  # a price table that cannot price this usage never fails the call
        return {}
    if cost is None:
        return {}
    return {COST: float(cost), COST_CURRENCY: "USD"}
