"""ext resilience and spend: chat-pipeline middlewares that keep agents going when a provider fails or limits
them (fallback, cooldowns) and keep them within limits (rate limits, budgets), in memory or shared through Redis."""

from .__about__ import __version__

__all__ = ["__version__"]

# --- rate limits and budgets (issue 36, branch limits) -------------------------------------------------------
from ._budget import Budget, BudgetLimit
from ._budget_embeddings import BudgetedEmbeddingClient
from ._budget_errors import BudgetError, BudgetExceededError, UnpricedModelError
from ._budget_file import budget_entry
from ._budget_middleware import BudgetMiddleware
from ._budget_redis import RedisBudgetStore
from ._budget_store import BudgetStore, Charge, InMemoryBudgetStore
from ._prices import PRICE_KEYS, PriceTable, price_usage
from ._ratelimit import RateLimitMiddleware
from ._ratelimit_backend import InMemoryRateLimitBackend, RateDecision, RateLimitBackend
from ._ratelimit_errors import (
    RateLimitQueueFullError,
    RateLimitRefusedError,
    RateLimitTooLargeError,
    RateLimitWaitError,
)
from ._ratelimit_file import rate_limit_entry
from ._ratelimit_keys import KeySpec, limit_key
from ._ratelimit_redis import RedisRateLimitBackend

__all__ += [
    # application code: rate limits
    "RateLimitMiddleware",
    "InMemoryRateLimitBackend",
    "RedisRateLimitBackend",
    "limit_key",
    "KeySpec",
    # application code: budgets and prices
    "Budget",
    "BudgetLimit",
    "BudgetMiddleware",
    "BudgetedEmbeddingClient",
    "InMemoryBudgetStore",
    "RedisBudgetStore",
    "PriceTable",
    "PRICE_KEYS",
    "price_usage",
    # errors
    "BudgetError",
    "BudgetExceededError",
    "UnpricedModelError",
    "RateLimitRefusedError",
    "RateLimitQueueFullError",
    "RateLimitWaitError",
    "RateLimitTooLargeError",
    # backend authors
    "BudgetStore",
    "Charge",
    "RateDecision",
    "RateLimitBackend",
    # pipeline files (the ext.pipeline.middleware entry points)
    "budget_entry",
    "rate_limit_entry",
]
