"""ext resilience and spend: chat-pipeline middlewares that keep agents going when a provider fails or limits
them (fallback, cooldowns) and keep them within limits (rate limits, budgets), in memory or shared through Redis."""

from typing import TYPE_CHECKING

from .__about__ import __version__

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

if TYPE_CHECKING:
    from ._cooldown_redis import RedisCooldowns

__all__ = ["__version__"]

# --- fallback and cooldowns (issue 36: fallback) ---
__all__ += [
    # application code
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


def __getattr__(name: str) -> object:
    # RedisCooldowns needs ext-redis (the [redis] extra): imported only when asked for.
    if name == "RedisCooldowns":
        from ._cooldown_redis import RedisCooldowns

        return RedisCooldowns
    raise AttributeError(f"module 'ext.resilience' has no attribute {name!r}")
