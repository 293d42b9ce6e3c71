"""The named middleware of a pipeline file (`- logging: {...}`, `- memory: {...}`).

A kind is an object with `check(settings, where)` (the settings' shape, without building anything: what
`check_pipeline` runs) and `build(settings, where)` (the middleware). ext-pipeline's own kinds are `logging`, `retry`,
`cache` and `tool_loop`; another distribution adds one by publishing it under the `ext.pipeline.middleware`
entry-point group (ext-memory publishes `memory`), so this distribution never imports the features built on it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol, runtime_checkable

from ext.core import ConfigurationError, RetryPolicy, load_component

from ._pipeline import ChatMiddleware

ENTRY_POINT_GROUP = "ext.pipeline.middleware"


@runtime_checkable
class MiddlewareKind(Protocol):
    """A named middleware of pipeline files. Errors are `ConfigurationError`s whose text starts with `where`."""

    def check(self, settings: dict[str, Any], where: str) -> None: ...

    def build(self, settings: dict[str, Any], where: str) -> ChatMiddleware: ...


class _Logging:
    def check(self, settings: dict[str, Any], where: str) -> None:
        return None

    def build(self, settings: dict[str, Any], where: str) -> ChatMiddleware:
        from ._middleware import LoggingMiddleware

        return LoggingMiddleware(**settings)


class _Retry:
    def check(self, settings: dict[str, Any], where: str) -> None:
        return None

    def build(self, settings: dict[str, Any], where: str) -> ChatMiddleware:
        from ._middleware import RetryMiddleware

        return RetryMiddleware(RetryPolicy(**settings))


class _Cache:
    def check(self, settings: dict[str, Any], where: str) -> None:
        return None

    def build(self, settings: dict[str, Any], where: str) -> ChatMiddleware:
        from ._cache import CacheMiddleware, InMemoryCacheStore

        settings = dict(settings)
        store = settings.pop("store", None)
        if store is None or store == "memory":
            memory = {"max_entries": settings.pop("max_entries")} if "max_entries" in settings else {}
            if "store_ttl" in settings:  # absent: the store's default; null: until evicted
                memory["ttl"] = settings.pop("store_ttl")
            built: Any = InMemoryCacheStore(**memory)
        elif isinstance(store, Mapping) and "provider" in store:
            built = load_component(dict(store))
        elif isinstance(store, Mapping):
            built = InMemoryCacheStore(**store)
        else:
            raise ConfigurationError(f"{where}.store must be 'memory', store settings or a component")
        return CacheMiddleware(built, close_store=True, **settings)


class _ToolLoop:
    def check(self, settings: dict[str, Any], where: str) -> None:
        return None

    def build(self, settings: dict[str, Any], where: str) -> ChatMiddleware:
        from ._tool_loop import ToolLoop

        settings = dict(settings)
        tools = settings.pop("tools", [])
        if not isinstance(tools, list):
            raise ConfigurationError(f"{where}.tools must be a list of component dumps")
        return ToolLoop([load_component(t) for t in tools], **settings)


_BUILT_IN: dict[str, MiddlewareKind] = {
    "logging": _Logging(),
    "retry": _Retry(),
    "cache": _Cache(),
    "tool_loop": _ToolLoop(),
}


def middleware_kinds() -> dict[str, MiddlewareKind]:
    """Every named middleware kind: the built-in ones, then those the installed distributions publish."""
    from importlib.metadata import entry_points  # only when a file is read: keeps importing ext.pipeline fast

    kinds = dict(_BUILT_IN)
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        if ep.name in kinds:
            continue
        kind = ep.load()
        if not isinstance(kind, MiddlewareKind):
            raise ConfigurationError(
                f"the {ENTRY_POINT_GROUP!r} entry point {ep.name!r} ({ep.value}) is not a middleware kind "
                "(an object with check(settings, where) and build(settings, where))"
            )
        kinds[ep.name] = kind
    return kinds


__all__ = ["ENTRY_POINT_GROUP", "MiddlewareKind", "middleware_kinds"]
