"""ext resilience and spend: chat-pipeline middlewares that keep agents going when a provider fails or limits
them (fallback, cooldowns) and keep them within limits (rate limits, budgets), in memory or shared through Redis."""

from typing import TYPE_CHECKING

from .__about__ import __version__

# --- rate limits and budgets (issue 36, limits) ---
from ._budget import Budget, BudgetLimit
from ._budget_embeddings import BudgetedEmbeddingClient
from ._budget_errors import BudgetError, BudgetExceededError, UnpricedModelError
from ._budget_file import budget_entry
from ._budget_middleware import BudgetMiddleware
from ._budget_redis import RedisBudgetStore
from ._budget_store import BudgetStore, Charge, InMemoryBudgetStore

# --- fallback and cooldowns (issue 36: fallback) ---
from ._cooldown import DEFAULT_IMMEDIATE, CooldownBackend, CooldownPolicy, Cooldowns, InMemoryCooldowns
from ._cooldown_middleware import CooldownMiddleware
from ._errors import AllClientsFailedError, Attempt, ClientCoolingDownError
from ._fallback import (
    DEFAULT_TRIGGERS,
    RESULT_RULES,
    FallbackMiddleware,
    ResultRule,
    empty_answer,
    finish_reason_length,
)
from ._fallback_stream import CONTINUE_PROMPT, STREAM_RULES, StreamRule
from ._pipeline_file import CooldownEntry, FallbackEntry, cooldown_entry, fallback_entry
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

if TYPE_CHECKING:
    from ._cooldown_redis import RedisCooldowns

__all__ = ["__version__"]

# --- fallback and cooldowns (issue 36: fallback) ---
__all__ += [
    # application code: fallback and cooldowns
    "FallbackMiddleware",
    "CooldownMiddleware",
    "Cooldowns",
    "CooldownPolicy",
    "InMemoryCooldowns",
    "RedisCooldowns",
    "AllClientsFailedError",
    "Attempt",
    "ClientCoolingDownError",
    "StreamRule",
    "ResultRule",
    "finish_reason_length",
    "empty_answer",
    # extension authors and pipeline files
    "CooldownBackend",
    "CONTINUE_PROMPT",
    "DEFAULT_IMMEDIATE",
    "DEFAULT_TRIGGERS",
    "RESULT_RULES",
    "STREAM_RULES",
    "CooldownEntry",
    "FallbackEntry",
    "cooldown_entry",
    "fallback_entry",
]


# --- rate limits and budgets (issue 36, limits) ---
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


def __getattr__(name: str) -> object:
    # RedisCooldowns needs ext-redis (the [redis] extra): imported only when asked for.
    if name == "RedisCooldowns":
        from ._cooldown_redis import RedisCooldowns

        return RedisCooldowns
    raise AttributeError(f"module 'ext.resilience' has no attribute {name!r}")
