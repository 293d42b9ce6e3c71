"""ext-redis: ext's stores in Redis, over one connection setup.

- `RedisConnection`: where Redis is and how to reach it (a URL without a password, the password from an argument or
  `REDIS_PASSWORD`, a blocking connection pool, timeouts), shared by every store here and by ext-runtime-grpc's
  registry.
- `RedisCacheStore`: the chat pipeline's response cache (ext-pipeline's `CacheStore`), shared by processes.
- `RedisStateStore`: agents' durable states (ext-core's `StateStore`), shared by a cluster's workers.
"""

from ext.redis.__about__ import __version__
from ext.redis._cache import RedisCacheConfig, RedisCacheStore
from ext.redis._connection import DEFAULT_REDIS_URL, RedisConnection
from ext.redis._state import RedisStateStore

__all__ = [
    "DEFAULT_REDIS_URL",
    "RedisCacheConfig",
    "RedisCacheStore",
    "RedisConnection",
    "RedisStateStore",
    "__version__",
]
