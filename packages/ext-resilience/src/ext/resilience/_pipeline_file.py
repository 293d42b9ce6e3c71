"""The `fallback` and `cooldown` middleware of pipeline files (published under `ext.pipeline.middleware`)::

    middleware:
      - fallback:
          clients:                        # in order, each one of:
            - backup.yaml                 #   a pipeline file (YAML or JSON)
            - {client: {provider: anthropic, options: {...}}, middleware: [{retry: {}}]}   # a pipeline document
            - {provider: llama-cpp}       #   a client section
          on: [rate_limited, overloaded, server_error, timeout, connection, auth, not_found]   # the default
          when: [length, empty]           # result rules (none by default)
          context_window_client: {provider: openai, options: {default_model: big-model}}      # same forms
          max_retry_after: 10             # seconds; a longer Retry-After fails over at once
          stream: before_first_chunk      # or buffer, continue
          names: [main, backup, local]    # cooldown keys: the pipeline's client, then each of clients
          cooldown: {failure_rate: 0.5, min_calls: 5, window: 60, cooldown: 60, backend: memory}
      - cooldown:                         # without a fallback: the pipeline's client refused while it cools
          min_calls: 5
          backend: {redis: "redis://127.0.0.1:6379/0", prefix: "ext:cooldown", password_env: REDIS_PASSWORD, refresh: 0}
          name: main

`check` reads every setting (and every nested pipeline document or file, with ext-pipeline's `check_pipeline`)
without building anything; errors name the field (`middleware[0].fallback.clients[1]...`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError

from ext.core import ChatCompletionClient, ConfigurationError
from ext.pipeline import ChatMiddleware, check_pipeline, load_pipeline, pipeline_from_config

from ._cooldown import CooldownBackend, CooldownPolicy, Cooldowns
from ._cooldown_middleware import CooldownMiddleware
from ._fallback import RESULT_RULES, FallbackMiddleware, _kinds, _rules
from ._fallback_stream import STREAM_RULES

_FALLBACK_KEYS = frozenset(
    {"clients", "on", "when", "context_window_client", "max_retry_after", "stream", "names", "cooldown"}
)
_POLICY_KEYS = frozenset(CooldownPolicy.model_fields)
_REDIS_KEYS = frozenset({"redis", "prefix", "password_env", "refresh"})


def _document(entry: Any, where: str) -> str | Mapping[str, Any]:
    """A pipeline file name or a pipeline document for one client entry."""
    if isinstance(entry, str):
        if not entry:
            raise ConfigurationError(f"{where} must name a pipeline file, got an empty string")
        return entry
    if not isinstance(entry, Mapping):
        raise ConfigurationError(
            f"{where} must be a pipeline file name, a pipeline document or a client section, got {type(entry).__name__}"
        )
    return entry if "client" in entry else {"client": dict(entry)}


def _check_client(entry: Any, where: str) -> None:
    source = _document(entry, where)
    try:
        check_pipeline(source)
    except ConfigurationError as exc:
        raise ConfigurationError(f"{where}: {exc}") from None


def _build_client(entry: Any, where: str) -> ChatCompletionClient:
    source = _document(entry, where)
    try:
        return load_pipeline(source) if isinstance(source, str) else pipeline_from_config(source)
    except ConfigurationError as exc:
        raise ConfigurationError(f"{where}: {exc}") from None


def _check_cooldown(settings: Any, where: str, extra: frozenset[str] = frozenset()) -> tuple[dict[str, Any], Any]:
    """The policy fields and the backend setting, checked."""
    if not isinstance(settings, Mapping):
        raise ConfigurationError(f"{where} must be a mapping of cooldown settings, got {type(settings).__name__}")
    unknown = set(settings) - _POLICY_KEYS - {"backend"} - extra
    if unknown:
        expected = ", ".join(sorted(_POLICY_KEYS | {"backend"} | extra))
        raise ConfigurationError(f"{where}: unknown keys {sorted(map(str, unknown))}; expected {expected}")
    fields = {k: v for k, v in settings.items() if k in _POLICY_KEYS}
    try:
        CooldownPolicy(**fields)
    except ValidationError as exc:
        first = exc.errors()[0]
        field = ".".join(str(p) for p in first["loc"])
        raise ConfigurationError(f"{where}.{field}: {first['msg']}") from None
    backend = settings.get("backend", "memory")
    if backend not in (None, "memory"):
        if not isinstance(backend, Mapping) or "redis" not in backend or set(backend) - _REDIS_KEYS:
            raise ConfigurationError(
                f"{where}.backend must be 'memory' or {{redis: <url>, prefix: ..., password_env: ...}}, got {backend!r}"
            )
        if not isinstance(backend["redis"], str) or not backend["redis"]:
            raise ConfigurationError(f"{where}.backend.redis must be a Redis URL (redis://host:port/db)")
    return fields, backend


def _build_cooldowns(settings: Any, where: str, extra: frozenset[str] = frozenset()) -> Cooldowns:
    fields, backend = _check_cooldown(settings, where, extra)
    built: CooldownBackend | None = None
    if isinstance(backend, Mapping):
        try:
            from ext.redis import RedisConnection

            from ._cooldown_redis import RedisCooldowns
        except ImportError:
            raise ConfigurationError(
                f"{where}.backend: a Redis backend needs ext-redis: pip install 'ext-resilience[redis]'"
            ) from None
        connection = RedisConnection(backend["redis"], password_env=backend.get("password_env", "REDIS_PASSWORD"))
        built = RedisCooldowns(
            connection, prefix=backend.get("prefix", "ext:cooldown"), refresh=backend.get("refresh", 0.0)
        )
    return Cooldowns(CooldownPolicy(**fields), built)


class FallbackEntry:
    """The `fallback` middleware kind of pipeline files."""

    def check(self, settings: dict[str, Any], where: str) -> None:
        unknown = set(settings) - _FALLBACK_KEYS
        if unknown:
            raise ConfigurationError(
                f"{where}: unknown keys {sorted(map(str, unknown))}; expected {', '.join(sorted(_FALLBACK_KEYS))}"
            )
        clients = settings.get("clients", [])
        if not isinstance(clients, list):
            raise ConfigurationError(f"{where}.clients must be a list of clients, got {type(clients).__name__}")
        if not clients and settings.get("context_window_client") is None:
            raise ConfigurationError(f"{where}.clients must name at least one client to fall back to")
        for index, entry in enumerate(clients):
            _check_client(entry, f"{where}.clients[{index}]")
        if settings.get("context_window_client") is not None:
            _check_client(settings["context_window_client"], f"{where}.context_window_client")
        try:
            _kinds(settings.get("on"))
            _rules(settings.get("when") or ())
        except ConfigurationError as exc:
            raise ConfigurationError(f"{where}.{exc}") from None
        if "when" in settings and not all(isinstance(w, str) for w in settings["when"] or ()):
            raise ConfigurationError(f"{where}.when: a file names rules: {', '.join(RESULT_RULES)}")
        stream = settings.get("stream", "before_first_chunk")
        if stream not in STREAM_RULES:
            raise ConfigurationError(f"{where}.stream must be one of {', '.join(STREAM_RULES)}, got {stream!r}")
        bound = settings.get("max_retry_after", 10.0)
        if isinstance(bound, bool) or not isinstance(bound, (int, float)) or bound < 0:
            raise ConfigurationError(f"{where}.max_retry_after must be seconds >= 0, got {bound!r}")
        names = settings.get("names")
        if names is not None and (
            not isinstance(names, list)
            or len(names) != len(clients) + 1
            or not all(isinstance(n, str) and n for n in names)
        ):
            raise ConfigurationError(
                f"{where}.names must list {len(clients) + 1} names: the pipeline's client, then each of clients"
            )
        if settings.get("cooldown") is not None:
            _check_cooldown(settings["cooldown"], f"{where}.cooldown")

    def build(self, settings: dict[str, Any], where: str) -> ChatMiddleware:
        self.check(settings, where)
        clients = [_build_client(e, f"{where}.clients[{i}]") for i, e in enumerate(settings.get("clients", []))]
        larger = settings.get("context_window_client")
        cooldown = settings.get("cooldown")
        return FallbackMiddleware(
            clients,
            on=settings.get("on"),
            when=settings.get("when") or (),
            context_window_client=(
                _build_client(larger, f"{where}.context_window_client") if larger is not None else None
            ),
            max_retry_after=settings.get("max_retry_after", 10.0),
            stream=settings.get("stream", "before_first_chunk"),
            cooldown=_build_cooldowns(cooldown, f"{where}.cooldown") if cooldown is not None else None,
            names=settings.get("names"),
        )


class CooldownEntry:
    """The `cooldown` middleware kind of pipeline files."""

    def check(self, settings: dict[str, Any], where: str) -> None:
        _check_cooldown(settings, where, frozenset({"name"}))
        name = settings.get("name")
        if name is not None and (not isinstance(name, str) or not name):
            raise ConfigurationError(f"{where}.name must be a non-empty string, got {name!r}")

    def build(self, settings: dict[str, Any], where: str) -> ChatMiddleware:
        self.check(settings, where)
        settings = dict(settings)
        name = settings.pop("name", None)
        return CooldownMiddleware(_build_cooldowns(settings, where), name=name)


fallback_entry = FallbackEntry()
cooldown_entry = CooldownEntry()
