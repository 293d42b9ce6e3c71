"""`RedisConnection`: how every ext Redis store (and ext-runtime-grpc's registry) reaches Redis, set up once.

- The URL names the server and never the password: a URL carrying one (`redis://:secret@host`, `?password=`) is
  refused, with an error that does not repeat it, so URLs can be logged, dumped and shown in errors as they are.
- The password is a `SecretStr`, given as an argument or read from an environment variable (`REDIS_PASSWORD` by
  default); it appears in no repr, dump, error or log record.
- The client's pool is a `redis.asyncio.BlockingConnectionPool`: redis-py's default pool refuses a command at once
  (`MaxConnectionsError`) when its connections are all busy, which failed the 101st concurrent call of both stores
  before; this one makes it wait for a free connection, at most `pool_timeout` seconds.
- Every command and every connect has a timeout, and failed commands are retried `max_retries` times (none by
  default, without backoff): a Redis that went away costs a caller one failed command, never a hang.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qsl, urlsplit

import redis.asyncio as aioredis
from pydantic import SecretStr
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff

from ext.core import ConfigurationError, resolve_secret

__all__ = ["DEFAULT_REDIS_URL", "RedisConnection"]

DEFAULT_REDIS_URL = "redis://127.0.0.1:6379/0"
_SCHEMES = ("redis", "rediss", "unix")


def _check_url(url: object) -> str:
    """`url` if it is a redis://, rediss:// or unix:// URL without a password (errors never repeat it)."""
    if not isinstance(url, str):
        raise ConfigurationError(f"url must be a redis://, rediss:// or unix:// URL, got {type(url).__name__}")
    try:
        parts = urlsplit(url)
        in_userinfo = bool(parts.password)
    except ValueError:  # a malformed netloc (an unclosed IPv6 bracket, a port that is not a number)
        raise ConfigurationError("url must be a redis://, rediss:// or unix:// URL; this one does not parse") from None
    if parts.scheme not in _SCHEMES:
        raise ConfigurationError("url must be a redis://, rediss:// or unix:// URL")
    # redis-py reads a password from the user info and from a `password` query parameter (parse_url).
    in_query = any(name == "password" and value for name, value in parse_qsl(parts.query, keep_blank_values=True))
    if in_userinfo or in_query:
        raise ConfigurationError(
            "url must not carry a password (found in the URL's "
            + ("user info" if in_userinfo else "query")
            + "): give it as password=, or in the environment variable password_env names (REDIS_PASSWORD by default)"
        )
    return url


def _seconds(name: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < float("inf"):
        raise ConfigurationError(f"{name} must be a number of seconds > 0, got {value!r}")
    return float(value)


def _count(name: str, value: object, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ConfigurationError(f"{name} must be an int >= {minimum}, got {value!r}")
    return value


class RedisConnection:
    """Where Redis is and how to talk to it; `client()` opens a client with its own blocking pool.

    Arguments:
        url: `redis://host:port/db`, `rediss://` (TLS) or `unix:///path.sock`; a user name is fine
            (`redis://alice@host/0`, an ACL user), a password is refused.
        password: the password (a `str` or `SecretStr`); default: read from `password_env`.
        password_env: the environment variable holding the password when `password` is not given (`REDIS_PASSWORD`;
            None: none). Read once, here. Unset or empty: no password.
        max_connections: connections the pool opens at most (100).
        socket_timeout: seconds a command may take (10).
        connect_timeout: seconds connecting may take (5).
        pool_timeout: seconds a command waits for a free connection when all are busy (default `socket_timeout`).
        max_retries: retries of a failed command, without backoff (0).
    """

    __slots__ = (
        "_connect_timeout",
        "_max_connections",
        "_max_retries",
        "_password",
        "_password_env",
        "_pool_timeout",
        "_socket_timeout",
        "_url",
    )

    def __init__(
        self,
        url: str = DEFAULT_REDIS_URL,
        *,
        password: str | SecretStr | None = None,
        password_env: str | None = "REDIS_PASSWORD",
        max_connections: int = 100,
        socket_timeout: float = 10.0,
        connect_timeout: float = 5.0,
        pool_timeout: float | None = None,
        max_retries: int = 0,
    ) -> None:
        self._url = _check_url(url)
        if password is not None and not isinstance(password, (str, SecretStr)):
            raise ConfigurationError(f"password must be a str or SecretStr, got {type(password).__name__}")
        if password_env is not None and (not isinstance(password_env, str) or not password_env):
            raise ConfigurationError(f"password_env must name an environment variable or be None, got {password_env!r}")
        self._password, _ = resolve_secret(password, password_env)
        self._password_env = password_env
        self._max_connections = _count("max_connections", max_connections, 1)
        self._socket_timeout = _seconds("socket_timeout", socket_timeout)
        self._connect_timeout = _seconds("connect_timeout", connect_timeout)
        self._pool_timeout = self._socket_timeout if pool_timeout is None else _seconds("pool_timeout", pool_timeout)
        self._max_retries = _count("max_retries", max_retries, 0)

    @property
    def url(self) -> str:
        """The URL (never holding a password)."""
        return self._url

    @property
    def password_env(self) -> str | None:
        """The variable the password is read from when none is given (what a dump names instead of it)."""
        return self._password_env

    @property
    def has_password(self) -> bool:
        return self._password is not None

    @property
    def max_connections(self) -> int:
        return self._max_connections

    @property
    def socket_timeout(self) -> float:
        return self._socket_timeout

    @property
    def connect_timeout(self) -> float:
        return self._connect_timeout

    @property
    def pool_timeout(self) -> float:
        return self._pool_timeout

    @property
    def max_retries(self) -> int:
        return self._max_retries

    @property
    def where(self) -> str:
        """Host and port (or the socket path), for messages: `127.0.0.1:6379`, `unix:/run/redis.sock`."""
        parts = urlsplit(self._url)
        if parts.scheme == "unix":
            return f"unix:{parts.path}"
        return f"{parts.hostname or '127.0.0.1'}:{parts.port or 6379}"

    def client(self) -> aioredis.Redis:
        """A new `redis.asyncio.Redis` over a `BlockingConnectionPool` of its own (`aclose()` closes both).
        Nothing connects until the first command."""
        kwargs: dict[str, Any] = {
            "max_connections": self._max_connections,
            "timeout": self._pool_timeout,
            "socket_timeout": self._socket_timeout,
            "socket_connect_timeout": self._connect_timeout,
            "retry": Retry(NoBackoff(), self._max_retries),
            "retry_on_timeout": self._max_retries > 0,
        }
        if self._password is not None:
            kwargs["password"] = self._password.get_secret_value()
        pool = aioredis.BlockingConnectionPool.from_url(self._url, **kwargs)
        return aioredis.Redis.from_pool(pool)

    def __repr__(self) -> str:
        password = "set" if self._password is not None else "none"
        return (
            f"RedisConnection(url={self._url!r}, password={password}, password_env={self._password_env!r}, "
            f"max_connections={self._max_connections}, socket_timeout={self._socket_timeout}, "
            f"connect_timeout={self._connect_timeout}, pool_timeout={self._pool_timeout}, "
            f"max_retries={self._max_retries})"
        )
