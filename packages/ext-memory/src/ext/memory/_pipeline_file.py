"""The `memory:` entry of a pipeline file: a `MemoryMiddleware` over a `VectorMemory` whose embedder and store are
component dumps. Checked without building (`check_memory_settings`) or built (`build_memory_middleware`); the
built middleware owns both and closes them with the pipeline."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ext.core import ComponentError, ConfigurationError, load_component

from ._memory import VectorMemory
from ._middleware import MemoryMiddleware

_MEMORY_ARGS = ("chunk_size", "chunk_overlap", "max_chunk_chars")
_MIDDLEWARE_ARGS = ("top_k", "min_score", "token_budget", "filter")
_MEMORY_KEYS = ("embedder", "store", *_MEMORY_ARGS, *_MIDDLEWARE_ARGS)


class _OwningMemoryMiddleware(MemoryMiddleware):
    """A `MemoryMiddleware` built from a file: nothing else holds its embedder and store, so it closes them."""

    def __init__(self, memory: VectorMemory, **settings: Any) -> None:
        super().__init__(memory, **settings)
        self._owned = memory

    async def close(self) -> None:
        try:
            await self._owned.embedder.close()
        finally:
            await self._owned.store.close()


def check_memory_settings(settings: Mapping[str, Any], where: str) -> None:
    """The entry's shape: known keys, and the embedder and store given as component dumps."""
    unknown = sorted(set(map(str, settings)) - set(_MEMORY_KEYS))
    if unknown:
        raise ConfigurationError(f"{where}: unknown settings {unknown}; expected {', '.join(_MEMORY_KEYS)}")
    for key in ("embedder", "store"):
        dump = settings.get(key)
        if not isinstance(dump, Mapping) or "provider" not in dump:
            raise ConfigurationError(
                f"{where}.{key} must be a component dump {{provider: <registered class path>, config: {{...}}}}, "
                f"got {type(dump).__name__ if dump is not None else 'nothing'}"
            )
        config = dump.get("config", {})
        if not isinstance(config, Mapping):
            raise ConfigurationError(f"{where}.{key}.config must be a mapping, got {type(config).__name__}")


def build_memory_middleware(settings: Mapping[str, Any], where: str) -> MemoryMiddleware:
    """The middleware of a `memory:` entry. VectorMemory checks that the embedder and the store are what they
    must be (an EmbeddingClient, a VectorStore of the embedder's vector size) and raises naming the field."""
    check_memory_settings(settings, where)
    try:
        embedder: Any = load_component(dict(settings["embedder"]))
    except ComponentError as exc:
        raise ConfigurationError(f"{where}.embedder: {exc}") from None
    try:
        store: Any = load_component(dict(settings["store"]))
    except ComponentError as exc:
        raise ConfigurationError(f"{where}.store: {exc}") from None
    try:
        memory = VectorMemory(embedder, store, **{k: settings[k] for k in _MEMORY_ARGS if k in settings})
        return _OwningMemoryMiddleware(memory, **{k: settings[k] for k in _MIDDLEWARE_ARGS if k in settings})
    except (TypeError, ValueError) as exc:  # ConfigurationError and VectorSizeError are ValueErrors
        raise ConfigurationError(f"{where}: {exc}") from None


class MemoryEntry:
    """The `memory:` middleware kind of pipeline files (published under the `ext.pipeline.middleware` entry points)."""

    def check(self, settings: dict[str, Any], where: str) -> None:
        check_memory_settings(settings, where)

    def build(self, settings: dict[str, Any], where: str) -> MemoryMiddleware:
        return build_memory_middleware(settings, where)


memory_entry = MemoryEntry()
