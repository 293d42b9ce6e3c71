"""ext resilience and spend: chat-pipeline middlewares that keep agents going when a provider fails or limits
them (fallback, cooldowns) and keep them within limits (rate limits, budgets), in memory or shared through Redis."""

from .__about__ import __version__

__all__ = ["__version__"]
