"""ext-cache-redis: a Redis `CacheStore` for ext's chat pipeline, so several processes share one response cache."""

from ext.cache.redis.__about__ import __version__
from ext.cache.redis._store import RedisCacheConfig, RedisCacheStore

__all__ = ["RedisCacheConfig", "RedisCacheStore", "__version__"]
