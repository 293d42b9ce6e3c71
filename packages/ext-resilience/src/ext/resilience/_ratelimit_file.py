"""The `rate_limit:` entry of a pipeline file (published under the `ext.pipeline.middleware` entry points).

```yaml
middleware:
  - rate_limit: {requests: 60, tokens: 90000, concurrency: 4, key: model, backend: redis, redis_url_env: EXT_REDIS_URL}
```

`backend` is `memory` (default: this process) or `redis`: the URL is read from the environment variable
`redis_url_env` names (`EXT_REDIS_URL` by default; it must not hold a password) and the password from `REDIS_PASSWORD`
(ext-redis's `RedisConnection`), so a file never holds a secret. `check` finds every error `build` would, without
connecting anywhere.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from ext.core import ConfigurationError

from ._ratelimit import RateLimitMiddleware

__all__ = ["RateLimitEntry", "rate_limit_entry"]

_LIMIT_KEYS = ("requests", "tokens", "window", "concurrency", "lease", "max_queue", "max_wait", "key", "name")
_BACKEND_KEYS = ("backend", "redis_url_env", "prefix")
DEFAULT_URL_ENV = "EXT_REDIS_URL"


def _known(settings: Mapping[str, Any], where: str, allowed: tuple[str, ...]) -> None:
    if not isinstance(settings, Mapping):
        raise ConfigurationError(f"{where} must be a mapping of settings, got {type(settings).__name__}")
    unknown = sorted(set(map(str, settings)) - set(allowed))
    if unknown:
        raise ConfigurationError(f"{where}: unknown settings {unknown}; expected {', '.join(allowed)}")


def redis_connection(settings: Mapping[str, Any], where: str) -> Any:
    """The `RedisConnection` of an entry with `backend: redis`, or None for `memory` (errors name the field)."""
    backend = settings.get("backend", "memory")
    if backend == "memory":
        for key in ("redis_url_env", "prefix"):
            if key in settings:
                raise ConfigurationError(f"{where}.{key} applies to backend: redis only")
        return None
    if backend != "redis":
        raise ConfigurationError(f"{where}.backend must be 'memory' or 'redis', got {backend!r}")
    variable = settings.get("redis_url_env", DEFAULT_URL_ENV)
    if not isinstance(variable, str) or not variable:
        raise ConfigurationError(f"{where}.redis_url_env must name an environment variable, got {variable!r}")
    url = os.environ.get(variable)
    if not url:
        raise ConfigurationError(
            f"{where}.redis_url_env: the environment variable {variable} is not set (a redis:// URL)"
        )
    prefix = settings.get("prefix")
    if prefix is not None and not isinstance(prefix, str):
        raise ConfigurationError(f"{where}.prefix must be a str, got {type(prefix).__name__}")
    try:
        from ext.redis import RedisConnection
    except ImportError:
        raise ConfigurationError(
            f"{where}.backend: redis needs ext-redis: pip install 'ext-resilience[redis]'"
        ) from None
    try:
        return RedisConnection(url)
    except ConfigurationError as exc:
        raise ConfigurationError(f"{where}: {variable}: {exc}") from None


def _middleware(settings: Mapping[str, Any], where: str, *, offline: bool) -> RateLimitMiddleware:
    _known(settings, where, _LIMIT_KEYS + _BACKEND_KEYS)
    connection = redis_connection(settings, where)
    backend = None
    if connection is not None and not offline:
        from ._ratelimit_redis import RedisRateLimitBackend

        prefix = settings.get("prefix")
        backend = RedisRateLimitBackend(connection, **({} if prefix is None else {"prefix": prefix}))
    try:
        return RateLimitMiddleware(
            **{k: settings[k] for k in _LIMIT_KEYS if k in settings}, backend=backend, close_backend=True
        )
    except ConfigurationError as exc:
        raise ConfigurationError(f"{where}.{exc}" if _names_field(exc) else f"{where}: {exc}") from None


def _names_field(exc: ConfigurationError) -> bool:
    return str(exc).split(" ", 1)[0] in _LIMIT_KEYS


class RateLimitEntry:
    """The `rate_limit:` middleware kind of pipeline files."""

    def check(self, settings: dict[str, Any], where: str) -> None:
        _middleware(settings, where, offline=True)

    def build(self, settings: dict[str, Any], where: str) -> RateLimitMiddleware:
        return _middleware(settings, where, offline=False)


rate_limit_entry = RateLimitEntry()
